#!/bin/sh
# Run the micro-benchmarks (`make bench-micro`):
#   1. hbg-bench completion: ns per completion, table on stdout and
#      $B/bench/completion.csv;
#   2. the same four cases under callgrind: instructions per completion,
#      table on stdout and $B/bench/completion_instructions.csv;
#   3. hbg-bench engine: ns per noop task through the scheduler engine,
#      table on stdout and $B/bench/engine.csv;
#   4. its six cases under callgrind: instructions per task, table on stdout
#      and $B/bench/engine_instructions.csv.
# Steps 2 and 4 need valgrind. A failed engine run (the suite exits 1) does
# not stop the later steps; the script then exits 1 at the end.
# Environment: B (build dir, default build), HBG_BENCH_CG_COMPLETIONS
# (completions per callgrind run, default 200000), HBG_BENCH_CG_TASKS
# (engine tasks per callgrind run, default 20000).
set -u
B=${B:-build}
bin=$B/bin/hbg-bench
out=$B/bench
cg_n=${HBG_BENCH_CG_COMPLETIONS:-200000}
cg_tasks=${HBG_BENCH_CG_TASKS:-20000}
csv=$out/completion.csv
icsv=$out/completion_instructions.csv
ecsv=$out/engine.csv
eicsv=$out/engine_instructions.csv
status=0

if [ ! -x "$bin" ]; then
        echo "run-bench: $bin not found; build it with: make $bin" >&2
        exit 1
fi
mkdir -p "$out" || exit 1
# The suites append; a fresh file keeps this run's rows only.
rm -f "$csv" "$icsv" "$ecsv" "$eicsv"

"$bin" completion --csv "$csv" || exit $?

echo
have_valgrind=1
command -v valgrind >/dev/null 2>&1 || have_valgrind=0

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

if [ $have_valgrind = 1 ]; then
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
else
        echo "instruction counts skipped: valgrind is not installed (make bench-deps installs it)"
fi

# ---------------------------------------------------------------- engine
echo
# 1: a run went wrong (the table says which case, stderr why); the other
# cases still ran and their rows are in the CSV. Anything else: stop.
"$bin" engine --csv "$ecsv"
rc=$?
case $rc in
0) ;;
1) status=1 ;;
*) exit $rc ;;
esac

# run_engine_callgrind OUTFILE THREADS SHAPE TASKS: Ir total on stdout; the
# program's output in OUTFILE.log, its CSV row (counters) in OUTFILE.csv.
# --no-spin: idle threads park at once instead of spinning for 50 us, which
# callgrind would count. --fair-sched=yes: valgrind runs one thread at a
# time, and with its default (unfair) lock a thread that loops without
# blocking can keep the others from running for seconds.
run_engine_callgrind() {
        rm -f "$1" "$1.csv"
        if ! valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$1" \
                "$bin" engine --threads "$2" --shape "$3" --tasks "$4" --repeat 1 --no-spin \
                --csv "$1.csv" >"$1.log" 2>&1; then
                echo "run-bench: callgrind run failed, see $1.log" >&2
                return 1
        fi
        if ! ir_total "$1"; then
                echo "run-bench: no instruction total in $1" >&2
                return 1
        fi
}

if [ $have_valgrind = 1 ]; then
        echo
        echo "instructions per task (callgrind, $cg_tasks tasks per run, setup subtracted, --no-spin)"
        echo
        printf '%-16s %7s %-11s %12s %10s %9s %7s %8s\n' case threads shape "Ir(run)" "Ir(setup)" "Ir/task" parks wakeups
        echo "suite,case,threads,shape,tasks,ir_run,ir_setup,instructions_per_task,parks,wakeups" >"$eicsv"
        for threads in 1 4; do
                for shape in chain independent fanin4; do
                        case_name=t${threads}_$shape
                        f=$out/callgrind.engine.$case_name.out
                        # Same command with --tasks 0: process start, fanin table,
                        # engine and ring set-up and teardown, output.
                        if ! ir_run=$(run_engine_callgrind "$f" "$threads" "$shape" "$cg_tasks") ||
                           ! ir_setup=$(run_engine_callgrind "$out/callgrind.engine.$case_name.setup.out" \
                                        "$threads" "$shape" 0); then
                                printf '%-16s %7s %-11s %12s\n' "$case_name" "$threads" "$shape" FAILED
                                status=1
                                continue
                        fi
                        parks=$(awk -F, 'NR == 2 { print $9 }' "$f.csv")
                        wakeups=$(awk -F, 'NR == 2 { print $10 }' "$f.csv")
                        per=$(awk -v a="$ir_run" -v b="$ir_setup" -v n="$cg_tasks" 'BEGIN { printf "%.1f", (a - b) / n }')
                        printf '%-16s %7s %-11s %12s %10s %9s %7s %8s\n' "$case_name" "$threads" "$shape" \
                                "$ir_run" "$ir_setup" "$per" "$parks" "$wakeups"
                        echo "engine,$case_name,$threads,$shape,$cg_tasks,$ir_run,$ir_setup,$per,$parks,$wakeups" >>"$eicsv"
                        rm -f "$f.csv" "$out/callgrind.engine.$case_name.setup.out.csv"
                done
        done
        echo
        echo "Ir/task = (Ir(run) - Ir(setup)) / $cg_tasks, Ir(setup) being the same command with --tasks 0;"
        echo "it covers the whole path of a task: the client writing and publishing it (harness), the"
        echo "engine classifying, queueing, dispatching, running the noop kernel, completing and retiring"
        echo "it, and parking/waking (parks, wakeups: that run's futex waits and returns)."
        echo "The runs use --no-spin (spin_before_park_ns = 0): idle threads try to park at once instead"
        echo "of spinning for 50 us, so that parked threads add no spin instructions. An idle thread that"
        echo "finds work in park()'s re-check does not sleep and loops again: those loops are counted."
        echo "Under valgrind the threads run one at a time (--fair-sched=yes): the 4-thread rows count"
        echo "the instructions of the path taken, with no cache-line contention and no real concurrency;"
        echo "use the ns table above for those."
else
        echo
        echo "instruction counts skipped: valgrind is not installed (make bench-deps installs it)"
fi

echo
echo "CSV: $csv"
[ -f "$icsv" ] && echo "     $icsv"
echo "     $ecsv"
[ -f "$eicsv" ] && echo "     $eicsv"
[ $have_valgrind = 1 ] && echo "callgrind profiles: $out/callgrind.*.out (callgrind_annotate FILE)"
exit $status
