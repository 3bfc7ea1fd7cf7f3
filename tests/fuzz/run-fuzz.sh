#!/bin/sh
# Run the fuzz targets (make fuzz): run-fuzz.sh [--merge] SECONDS TARGET...
#
# Each target runs for SECONDS with libFuzzer, from the committed corpus
# (tests/fuzz/corpus/NAME, read only) and the working corpus
# (build/fuzz/corpus/NAME, where new inputs go). A crash is written to
# build/fuzz/crashes/NAME/ and fails the run. At the end, one line per
# target: executions, coverage (edges), features, corpus size.
# --merge: instead of fuzzing, add the working corpus's inputs that cover
# something new to the committed corpus (minimised by libFuzzer).
set -u
merge=0
if [ "${1:-}" = --merge ]; then merge=1; shift; fi
secs=${1:?seconds}; shift
bin=build/fuzz/bin
status=0
summary=""
for t in "$@"; do
        work=build/fuzz/corpus/$t
        crashes=build/fuzz/crashes/$t
        seeds=tests/fuzz/corpus/$t
        mkdir -p "$work" "$crashes" "$seeds"
        log=build/fuzz/$t.log
        if [ $merge = 1 ]; then
                before=$(ls "$seeds" | wc -l)
                "$bin/fuzz_$t" -merge=1 "$seeds" "$work" >"$log" 2>&1 || { echo "fuzz: merge of $t failed, see $log"; status=1; }
                echo "fuzz: $t: committed corpus $before -> $(ls "$seeds" | wc -l) inputs"
                continue
        fi
        echo "==> fuzz_$t for ${secs}s"
        # -timeout: an input running 30 s is a hang; -rss_limit_mb: hbgd's
        # sessions map their regions (virtual), ASan's shadow adds to RSS.
        "$bin/fuzz_$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
                -artifact_prefix="$crashes/" "$work" "$seeds" >"$log" 2>&1
        rc=$?
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
        ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
        n=$(ls "$work" | wc -l)
        line="$t: ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, working corpus $n"
        if [ $rc -ne 0 ]; then
                line="$line: FAILED (exit $rc), see $log and $crashes/"
                status=1
        fi
        echo "$line"
        summary="$summary$line
"
done
[ -n "$summary" ] && printf '\nfuzz summary (%ss each):\n%s' "$secs" "$summary"
exit $status
