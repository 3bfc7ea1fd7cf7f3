#!/bin/sh
# The completion protocol's model (model/completion.pml, docs/RUNTIME_LOGIC.md
# §15), the host-task hand-off's (model/host.pml, §15.1), the producer ->
# hbgd wake-up's (model/wake.pml, §15.2) and a tensor wait's request for one
# task (model/taskwait.pml, §15.3) checked with
# spin: every correct variant exhaustively, and every mutant must be caught
# with the failure it stands for. Exit 0 passed, 1
# failed, 77 skipped (no spin, or no C compiler for pan).
# Environment: CC (default cc), MODEL_JOBS (1: one check at a time; default 2).
# pan stores states uncompressed (no -DCOLLAPSE): the largest checks take
# up to about 2 GB each and a third less time than compressed; the two
# lanes' largest running together hold about 3.5 GB.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
model=$here/model
cc=${CC:-cc}
command -v spin >/dev/null 2>&1 || { echo "test-model: spin not installed, skipped"; exit 77; }
command -v "$cc" >/dev/null 2>&1 || { echo "test-model: no C compiler ($cc), skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hbg-model.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$model"/*.pml "$tmp"/ || exit 1

# check NAME MODEL EXPECT SPIN_DEFINES PAN_RUN_FLAGS [CC_FLAGS]
#   MODEL: the model file's name without .pml.
#   EXPECT: pass (no error, search complete), or the text pan must report.
# Writes $tmp/NAME.result: "ok|FAIL <summary>".
check() {
        name=$1 pml=$2.pml expect=$3 defs=$4 runflags=$5 ccflags=${6:-}
        dir=$tmp/$name
        mkdir "$dir" && cp "$tmp"/*.pml "$dir"/ || return 1
        start=$(date +%s)
        (
                cd "$dir" || exit 1
                # shellcheck disable=SC2086
                spin $defs -a "$pml" >spin.log 2>&1 || { echo "FAIL spin: $(cat spin.log)"; exit 0; }
                # shellcheck disable=SC2086
                "$cc" -w -DMEMLIM=4096 $ccflags -o pan pan.c >cc.log 2>&1 ||
                        { echo "FAIL cc: $(head -n 5 cc.log)"; exit 0; }
                # shellcheck disable=SC2086
                ./pan -m10000 $runflags >pan.log 2>&1
                states=$(awk '/states, stored/ { print $1; exit }' pan.log)
                first=$(grep -m 1 '^pan:1:' pan.log)
                if [ "$expect" = pass ]; then
                        if grep -q 'errors: 0' pan.log && ! grep -q 'Search not completed\|search depth too small\|out of memory' pan.log; then
                                echo "ok $states states"
                        else
                                echo "FAIL expected no error, got: ${first:-$(tail -n 3 pan.log)}"
                        fi
                elif printf '%s' "$first" | grep -q "$expect"; then
                        echo "ok caught after $states states: $first"
                else
                        echo "FAIL expected '$expect', got: ${first:-no error after $states states}"
                fi
        ) >"$tmp/$name.result" 2>&1
        echo "$(cat "$tmp/$name.result") ($(( $(date +%s) - start ))s)" >"$tmp/$name.result"
        rm -rf "$dir"
}

safety="-DNOCLAIM -DSAFETY"
lost='assertion violated 0'         # the monitor: a published frontier nobody walks past
freeze='invalid end state'          # a completer blocked for ever behind the watermark

# lane | name | model | expect | spin defines | pan flags | compile flags
# Two lanes run side by side, each in order (about the same CPU time).
# host.pml: its pass runs at its default bounds (2 workers, D = 4, M = 2,
# 5 tasks) and with 3 workers at smaller ones; the mutants at the
# defaults, the SC/barrier runs that show which failure needs what at the
# smallest bounds that show it.
cat >"$tmp/plan" <<EOF
1|eager|completion|pass||-a -w23|-O2
2|batched|completion|pass|-DBATCHED -DNIDS=4|-w26|-O2 $safety
2|lazy|completion|pass|-DLAZY -DNIDS=5|-w23|-O2 $safety
1|unordered-frontier|completion|$lost|-DUNORDERED_FRONTIER||-O0 $safety
1|unordered-frontier-freeze|completion|$freeze|-DUNORDERED_FRONTIER|-A|-O0 $safety
1|unordered-frontier-sc|completion|pass|-DUNORDERED_FRONTIER -DSC -DNIDS=4|-w21|-O1 $safety
2|no-recheck|completion|$lost|-DNO_RECHECK|-w20|-O0 $safety
2|no-recheck-freeze|completion|$freeze|-DNO_RECHECK|-A -w20|-O0 $safety
2|no-batch-fence|completion|$lost|-DBATCHED -DNO_BATCH_FENCE -DNIDS=4|-w20|-O0 $safety
2|no-laps|completion|assertion violated done|-DNO_LAPS|-w20|-O0 $safety
2|heap-d-minus-f|completion|assertion violated (hlen<2)|-DHEAP_CAP=2 -DNIDS=5|-w22|-O0 $safety
1|host-3-workers|host|pass|-DNW=3 -DD=2 -DM=1 -DE=2|-w25|-O2 $safety
1|host-plain-sleepers|host|$freeze|-DPLAIN_SLEEPERS|-w22|-O0 $safety
1|host-plain-sleepers-1w|host|$freeze|-DPLAIN_SLEEPERS -DNW=1|-w20|-O0 $safety
1|host-plain-sleepers-1w-sc|host|pass|-DPLAIN_SLEEPERS -DNW=1 -DSC|-w20|-O0 $safety
1|host-plain-sleepers-1w-futex|host|pass|-DPLAIN_SLEEPERS -DNW=1 -DFUTEX_BARRIER|-w20|-O0 $safety
1|host-sleepers-first|host|$freeze|-DSLEEPERS_FIRST|-w22|-O0 $safety
1|host-sleepers-first-futex|host|$freeze|-DSLEEPERS_FIRST -DFUTEX_BARRIER|-w22|-O0 $safety
1|host-sleepers-first-sc|host|pass|-DSLEEPERS_FIRST -DSC -DD=2 -DM=1 -DE=4|-w22|-O2 $safety
2|host|host|pass||-w25|-O2 $safety
2|host-no-recheck|host|$freeze|-DNO_RECHECK|-w22|-O0 $safety
2|host-take-no-cas|host|assertion violated  !(executed|-DTAKE_NO_CAS|-w22|-O0 $safety
2|host-no-room|host|assertion violated ((kof|-DNO_ROOM|-w22|-O0 $safety
2|host-seq-first|host|assertion violated (v==(task_of|-DSEQ_FIRST|-w22|-O0 $safety
2|host-tail-first|host|assertion violated (v==(h+1))|-DTAIL_FIRST|-w22|-O0 $safety
2|host-stop-once|host|$freeze|-DSTOP_ONCE|-w22|-O0 $safety
1|host-lookers-first|host|$freeze|-DLOOKERS_FIRST|-w22|-O0 $safety
1|host-lookers-first-sc|host|pass|-DLOOKERS_FIRST -DSC -DD=2 -DM=1 -DE=4|-w22|-O2 $safety
2|host-give-up-kept|host|$freeze|-DGIVE_UP_KEPT|-w22|-O0 $safety
1|wake|wake|pass|||-O2 $safety
1|wake-same-uid|wake|pass|-DSAME_UID||-O2 $safety
2|wake-shared|wake|pass|-DSHARED||-O2 $safety
2|wake-trust-wake|wake|$lost|-DSAME_UID -DTRUST_WAKE||-O0 $safety
2|wake-no-recheck|wake|$lost|-DNO_RECHECK||-O0 $safety
2|wake-kick-page|wake|$lost|-DSAME_UID -DKICK_PAGE||-O0 $safety
2|wake-unserved|wake|pass|-DUNSERVED -DNG=1|-w26|-O2 $safety
2|wake-unserved-same-uid|wake|pass|-DUNSERVED -DNG=1 -DSAME_UID|-w26|-O2 $safety
1|wake-old-client|wake|pass|-DOLD_CLIENT -DNG=1||-O2 $safety
2|wake-serve-no-kick|wake|$lost|-DUNSERVED -DNG=1 -DSERVE_NO_KICK||-O0 $safety
1|wake-serve-clear-quiet|wake|$lost|-DUNSERVED -DNG=1 -DSERVE_CLEAR_QUIET||-O0 $safety
2|wake-unserved-trusting|wake|pass|-DUNSERVED -DNG=1 -DTRUST_WAKE|-w26|-O2 $safety
1|wake-serve-look-first|wake|$lost|-DUNSERVED -DNG=1 -DTRUST_WAKE -DSERVE_LOOK_FIRST||-O0 $safety
1|wake-serve-bump-first|wake|$lost|-DUNSERVED -DNG=1 -DSERVE_BUMP_FIRST||-O0 $safety
2|wake-clear-unserved|wake|$lost|-DOLD_CLIENT -DNG=1 -DCLEAR_UNSERVED||-O0 $safety
1|wake-peer|wake|pass|-DPEER -DNG=1|-w26|-O2 $safety
2|wake-awake-counts-policy|wake|$lost|-DPEER -DNG=1 -DAWAKE_COUNTS_POLICY||-O0 $safety
1|taskwait|taskwait|pass|||-O2 $safety
2|taskwait-look-first|taskwait|$lost|-DLOOK_FIRST||-O0 $safety
1|taskwait-load-first|taskwait|$lost|-DLOAD_FIRST||-O0 $safety
EOF

lane() {
        grep "^$1|" "$tmp/plan" | while IFS='|' read -r _ name pml expect defs runflags ccflags; do
                check "$name" "$pml" "$expect" "$defs" "$runflags" "$ccflags"
        done
}

t0=$(date +%s)
if [ "${MODEL_JOBS:-2}" -ge 2 ]; then
        lane 1 &
        lane 2
        wait
else
        lane 1
        lane 2
fi

fail=0
while IFS='|' read -r _ name _; do
        result=$(cat "$tmp/$name.result" 2>/dev/null || echo "FAIL no result")
        printf '%-30s %s\n' "$name" "$result"
        case $result in ok*) ;; *) fail=1 ;; esac
done <"$tmp/plan"
echo "test-model: $(( $(date +%s) - t0 ))s"
[ "$fail" -eq 0 ] || { echo "test-model: FAIL"; exit 1; }
echo "test-model: passed"
