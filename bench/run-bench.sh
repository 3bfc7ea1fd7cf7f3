#!/bin/sh
# Run the micro-benchmarks (`make bench`):
#   1. hbg-bench completion: ns per completion, table on stdout and
#      $B/bench/completion.csv;
#   2. the same four cases under callgrind: instructions per completion,
#      table on stdout and $B/bench/completion_instructions.csv.
# Environment: B (build dir, default build), HBG_BENCH_CG_COMPLETIONS
# (completions per callgrind run, default 200000).
set -u
B=${B:-build}
bin=$B/bin/hbg-bench
out=$B/bench
cg_n=${HBG_BENCH_CG_COMPLETIONS:-200000}
csv=$out/completion.csv
icsv=$out/completion_instructions.csv

if [ ! -x "$bin" ]; then
        echo "run-bench: $bin not found; build it with: make $bin" >&2
        exit 1
fi
mkdir -p "$out" || exit 1
# The suite appends; a fresh file keeps this run's rows only.
rm -f "$csv" "$icsv"

"$bin" completion --csv "$csv" || exit $?

echo
if ! command -v valgrind >/dev/null 2>&1; then
        echo "instruction counts skipped: valgrind is not installed (make bench-deps installs it)"
        echo
        echo "CSV: $csv"
        exit 0
fi

# Total Ir of a callgrind out file: its "summary:" line, else "totals:",
# else what callgrind_annotate reports as PROGRAM TOTALS.
ir_total() {
        v=$(sed -n 's/^summary: *\([0-9][0-9]*\).*/\1/p' "$1" | tail -n 1)
        [ -n "$v" ] || v=$(sed -n 's/^totals: *\([0-9][0-9]*\).*/\1/p' "$1" | tail -n 1)
        if [ -z "$v" ] && command -v callgrind_annotate >/dev/null 2>&1; then
                v=$(callgrind_annotate "$1" 2>/dev/null |
                    sed -n 's/^ *\([0-9,][0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d , | head -n 1)
        fi
        [ -n "$v" ] && echo "$v"
}

# run_callgrind OUTFILE THREADS ORDER COMPLETIONS: Ir total on stdout. The
# program's own output goes to OUTFILE.log, kept for when something fails;
# its counters go to OUTFILE.csv, read back for the "deferred" column.
run_callgrind() {
        rm -f "$1" "$1.csv"
        if ! valgrind --tool=callgrind --callgrind-out-file="$1" \
                "$bin" completion --threads "$2" --order "$3" --completions "$4" --repeat 1 \
                --csv "$1.csv" >"$1.log" 2>&1; then
                echo "run-bench: callgrind run failed, see $1.log" >&2
                return 1
        fi
        if ! ir_total "$1"; then
                echo "run-bench: no instruction total in $1" >&2
                return 1
        fi
}

echo "instructions per completion (callgrind, $cg_n completions per run, setup subtracted)"
echo
printf '%-14s %7s %-8s %12s %10s %13s %9s\n' case threads order "Ir(run)" "Ir(setup)" "Ir/completion" deferred
echo "suite,case,threads,order,completions,ir_run,ir_setup,instructions_per_completion,deferred" >"$icsv"
for threads in 1 4; do
        for order in inorder shuffled; do
                case_name=t${threads}_$order
                f=$out/callgrind.$case_name.out
                # Same command with no completions: process start, geometry,
                # region, completers, thread start and join, output.
                ir_run=$(run_callgrind "$f" "$threads" "$order" "$cg_n") || exit 1
                ir_setup=$(run_callgrind "$out/callgrind.$case_name.setup.out" "$threads" "$order" 0) || exit 1
                deferred=$(awk -F, 'NR == 2 { print $13 }' "$f.csv")
                per=$(awk -v a="$ir_run" -v b="$ir_setup" -v n="$cg_n" 'BEGIN { printf "%.1f", (a - b) / n }')
                printf '%-14s %7s %-8s %12s %10s %13s %9s\n' "$case_name" "$threads" "$order" \
                        "$ir_run" "$ir_setup" "$per" "$deferred"
                echo "completion,$case_name,$threads,$order,$cg_n,$ir_run,$ir_setup,$per,$deferred" >>"$icsv"
                rm -f "$f.csv" "$out/callgrind.$case_name.setup.out.csv"
        done
done
echo
echo "Ir: instructions executed by the whole process (callgrind total);"
echo "Ir/completion = (Ir(run) - Ir(setup)) / $cg_n, Ir(setup) being the same command with --completions 0."
echo "Under valgrind the threads run one at a time: the 4-thread rows count the instructions"
echo "of the path taken (deferred: ids that went through the failsafe heap), with no cache-line"
echo "contention and no real concurrency; use the ns table above for those."
echo
echo "CSV: $csv"
echo "     $icsv"
echo "callgrind profiles: $out/callgrind.*.out (callgrind_annotate FILE)"
