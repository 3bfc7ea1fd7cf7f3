#!/bin/sh
# hbg-bench's man page as the build writes it (version filled in), and
# hbg-bench's comparison end to end, at toy sizes, without the peers and
# (but for one run) without valgrind: it starts its own hbgd per completion policy, runs 1
# and 2 producer processes on every shape and replays each, writes results.csv with exactly
# the documented columns and a row per shape x policy x clients, metrics.csv
# in the long format, and --compare reads two results.csv (a file beside
# itself, and beside a copy with a row twice as fast and a row less). Each
# peer that is built runs a graph with --check. Timings are not
# checked (the bench never fails on a slow figure). The latency rows of
# one policy, among them fairness with its backlog as another uid, and
# beside them the floor and OpenMP peers, each with its figure in
# overhead.dat. --kernels: the
# module-kernel rows (each graph with two built-ins and the example
# module's relu_f32, on an hbgd that loaded it) and their ratios, and
# the rows skipped, saying why, when the module is not there. --host: the
# host-function rows of hbg (each case on every worker count, positive
# figures, the speed-ups and goals in the metrics). --python: the Python
# rows (the package beside Dask and concurrent.futures; without numpy
# skipped, saying why; without dask no dask rows, said). --trace: one
# 10 x 10 wavefront recorded by hbgctl trace, its JSON (parsed by python3:
# a task slice per task, on the 4 scheduler tracks) and its SVG kept, the
# summary printed; without hbgctl beside hbg-bench, a clear failure.
# Instructions per task under callgrind (valgrind; skipped, saying so,
# without it): the totals and every stage, the stages adding up. Exit 0 passed, 1
# failed. Environment: B (build directory). Not for sanitizer builds: the
# benchmark's numbers mean nothing there, and it is not a test of hbgd.
set -u
B=${B:-build}
bench=$B/bin/hbg-bench
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hbg-bench-test.XXXXXX") || exit 1
all_pid=
# The background run stopped and waited for before its directory goes
# (its hbgd ends with it); an interrupt ends the script, and so the run.
trap '[ -z "$all_pid" ] || { kill "$all_pid" 2>/dev/null; wait "$all_pid"; }; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
fail() { echo "test-bench: FAIL: $*"; exit 1; }

# Its man page is read from the build (it is not installed): written
# there with the version in its footer, no placeholder left.
page=$B/man/hbg-bench.1
[ -f "$page" ] || fail "no $page: the build writes hbg-bench's man page (man -l $page)"
! grep -q '@[A-Z]*@' "$page" || fail "$page keeps a placeholder: $(grep -m1 '@[A-Z]*@' "$page")"

# The comparison of every shape and policy spends most of its time
# waiting (hbgd settling, its idle CPU read over a second): it runs beside
# the other runs, each on an hbgd of its own, and is checked last. No
# figure is checked, so sharing the CPUs changes nothing checked.
TMPDIR="$tmp" "$bench" --quick --sizes 300 --clients 1,2 --repeat 2 --warmup 0 --peers none \
        --no-instructions --no-latency --no-reuse --out "$tmp/a" >"$tmp/a.log" 2>&1 &
all_pid=$!

# The latency rows of one policy: 1- and 16-task graphs busy and parked,
# tensor waits, connects at once, and the fairness row, whose backlog runs as uid 65534
# when we are root (or, if that child cannot start, as us: said so).
# Beside them the two peers gcc alone builds (make test builds them), and
# Taskflow, built only when make is told where it is.
for peer in floor openmp; do
        [ -x "$B/bin/hbg-bench-$peer" ] || fail "no $B/bin/hbg-bench-$peer (make test builds it)"
done
"$bench" --quick --sizes 300 --clients 1 --peers floor,openmp,taskflow --modes eager-batched --shapes chain \
        --no-instructions --no-reuse --out "$tmp/l" >"$tmp/l.log" 2>&1 ||
        { rc=$?; cat "$tmp/l.log"; fail "hbg-bench (latency rows) exited $rc"; }
if [ ! -x "$B/bin/hbg-bench-taskflow" ]; then
        grep -q "^-- taskflow: .* is not built (make bench-peers TASKFLOW_INC=DIR builds it, DIR holding taskflow/taskflow.hpp): skipped$" \
                "$tmp/l.log" || { cat "$tmp/l.log"; fail "no Taskflow, and the note does not say how to build it"; }
fi
# overhead.dat is written at the end from the rows hbg-bench kept: a
# figure in hbg's column and in each peer's, named by its title; a
# column for Taskflow, with a figure when it is built.
head -n 1 "$tmp/l/overhead.dat" | grep -q ' Taskflow ' || { cat "$tmp/l/overhead.dat"; fail "overhead.dat has no Taskflow column"; }
titles="hbg-eager-batched floor OpenMP"
[ ! -x "$B/bin/hbg-bench-taskflow" ] || titles="$titles Taskflow"
for title in $titles; do
        awk -v t="$title" 'NR == 1 { for (i = 2; i <= NF; i++) if ($i == t) col = i; next }
                $1 == "chain" && col && $col ~ /^[0-9.]+$/ { ok = 1 } END { exit !ok }' "$tmp/l/overhead.dat" ||
                { cat "$tmp/l/overhead.dat"; fail "overhead.dat has no $title figure for chain"; }
done
# Its last line names the plots when gnuplot drew them, and only then.
if command -v gnuplot >/dev/null 2>&1; then
        grep -q " results: $tmp/l/results.csv, $tmp/l/metrics.csv, plots $tmp/l/overhead.png and $tmp/l/latency.png$" \
                "$tmp/l.log" && [ -s "$tmp/l/overhead.png" ] && [ -s "$tmp/l/latency.png" ] ||
                { cat "$tmp/l.log"; fail "the plots were not drawn, or not named"; }
else
        grep -q " results: $tmp/l/results.csv, $tmp/l/metrics.csv$" "$tmp/l.log" ||
                { cat "$tmp/l.log"; fail "no gnuplot, yet plots are named"; }
fi
# Every peer that is built runs one graph checking its order (--check:
# each task once, after its fanins, or exit 1); those with a graph object
# to run again (compare_peers.c) also run it again.
peers_checked=
for peer in floor openmp tbb starpu taskflow; do
        prog=$B/bin/hbg-bench-$peer
        [ -x "$prog" ] || continue
        rerun=
        case $peer in tbb | taskflow) rerun=--rerun ;; esac
        for mode in "" $rerun; do
                "$prog" --check $mode --shape layered --size 300 --threads 2 --repeat 2 --warmup 0 \
                        >"$tmp/peer.log" 2>&1 && grep -q '^ok$' "$tmp/peer.log" ||
                        { cat "$tmp/peer.log"; fail "hbg-bench-$peer --check $mode failed"; }
        done
        peers_checked="$peers_checked${peers_checked:+,}$peer"
done
for metric in latency_1_task_parked_p50 latency_1_task_parked_over_eventfd_p50 eventfd_pingpong_parked_beside_p50 \
              latency_1_task_busy_32_idle_sessions_p50 connect_burst_8_p99 connect_burst_8_hbgd_cpu connect_lone_p50 \
              connect_lone_producer_cpu \
              fairness_1_task_p99 \
              fairness_other_uid tensor_wait_2ms_late_p50 tensor_wait_10ms_cpu_p50 tensor_wait_beside_2ms_late_p50; do
        grep -q "^$metric," "$tmp/l/metrics.csv" || { cat "$tmp/l.log"; fail "metrics.csv has no $metric"; }
done
awk -F, '$1 == "latency_1_task_parked_over_eventfd_p50" && $7 + 0 > 0 { ok = 1 } END { exit !ok }' \
        "$tmp/l/metrics.csv" ||
        { cat "$tmp/l.log"; fail "latency_1_task_parked_over_eventfd_p50 is not a ratio above 0"; }
other=$(awk -F, '$1 == "fairness_other_uid" { print $7 + 0 }' "$tmp/l/metrics.csv")
if [ "$(id -u)" = 0 ] && [ "$other" != 1 ]; then
        grep -q "the backlog cannot run as uid 65534" "$tmp/l.log" ||
                { cat "$tmp/l.log"; fail "root, yet the fairness backlog ran as root without saying why"; }
fi
[ "$(id -u)" = 0 ] || [ "$other" = 0 ] || fail "fairness_other_uid is $other, not being root"
grep -q "fairness: .* of $([ "$other" = 1 ] && echo 'uid 65534' || echo 'the same uid')" "$tmp/l.log" ||
        { cat "$tmp/l.log"; fail "the fairness line does not say whose backlog it was"; }
echo "test-bench: latency rows ok (fairness backlog as $([ "$other" = 1 ] && echo 'uid 65534' || echo 'this uid'))"

# The targets, judged from the run's own figures: the twelve, each met,
# not met or not measured ("-"); those measured here (the latencies, the
# first graph, connects, fairness, idle), each verdict in metrics.csv as
# target_met (1 met, 0 not) agreeing with its line; one producer only, so
# eight producers' target is not measured, nor Taskflow's when it is not
# built, and those have no metric.
targets_ok() { # LOG METRICS
        awk '/^-- \[.*\] targets \(docs\/PERFORMANCE.md\), from this run: eager-batched, 4 threads/ { on = 1; next }
             on && /^  (met     |not met |-       ) / { n++ } on && /^$/ { on = 0 } END { exit n != 12 }' "$1" ||
                { cat "$1"; fail "the targets are not twelve lines of met, not met or -"; }
        while read -r name words; do
                line=$(grep -m1 "^  [a-z -]\{8\} $words" "$1") || { cat "$1"; fail "no target line for $name ($words)"; }
                metric=$(awk -F, -v t="$name" '$1 == "target_met" && $2 == t { print $7 }' "$2")
                case $line in
                "  met      "*) [ "$metric" = 1 ] ;;
                "  not met  "*) [ "$metric" = 0 ] ;;
                *) [ -z "$metric" ] ;;
                esac || { cat "$1"; fail "target $name: the line says '$line', target_met is '$metric'"; }
        done <<EOF2
parked_p50 parked 1-task graph p50
parked_p99 parked 1-task graph p99
busy_p50 busy 1-task graph p50
first_graph a session's first graph
vs_taskflow build+run per task <= Taskflow's
connect_p99 hbg_connect p99
fairness_p99 fairness: 1-task graph p99
idle_cpu idle hbgd
eight_producers 8 producers
EOF2
}
targets_ok "$tmp/l.log" "$tmp/l/metrics.csv"
for name in parked_p50 parked_p99 busy_p50 first_graph connect_p99 fairness_p99 idle_cpu; do
        grep -q "^target_met,$name,hbg,eager-batched,4,," "$tmp/l/metrics.csv" ||
                { cat "$tmp/l.log"; fail "target $name was measured, yet has no target_met"; }
done
! grep -q "^target_met,eight_producers," "$tmp/l/metrics.csv" || fail "eight producers judged from one"
[ -x "$B/bin/hbg-bench-taskflow" ] || ! grep -q "^target_met,vs_taskflow," "$tmp/l/metrics.csv" ||
        fail "Taskflow's target judged without Taskflow"
echo "test-bench: targets ok"

# The kernel rows alone: 3 graphs x 3 kernels, on hbgd with the module.
"$bench" --quick --kernels --shapes none --sizes 200 --repeat 2 --warmup 0 --peers none --no-instructions \
        --out "$tmp/k" >"$tmp/k.log" 2>&1 || { rc=$?; cat "$tmp/k.log"; fail "hbg-bench --kernels exited $rc"; }
rows=$(tail -n +2 "$tmp/k/results.csv" | awk -F, '
        NF != 11 || $2 !~ /^hbg-(copy|scale|relu)_f32$/ || $6 != 200 || $8 + 0 <= 0 { bad++ }
        END { print NR + 0, bad + 0 }')
[ "$rows" = "9 0" ] || { cat "$tmp/k.log"; fail "--kernels: rows, bad rows = $rows"; }
# None of these rows is overhead.png's (it has the shapes' systems): of
# the plots only latency.png (the eventfd ping-pong's) is drawn and named.
command -v gnuplot >/dev/null 2>&1 && k_plots=", plot $tmp/k/latency.png" || k_plots=
grep -q " results: $tmp/k/results.csv, $tmp/k/metrics.csv$k_plots$" "$tmp/k.log" && [ ! -e "$tmp/k/overhead.png" ] ||
        { cat "$tmp/k.log"; fail "--kernels: overhead.png named or drawn with nothing to plot"; }
for shape in independent-64B chain-64B independent-64KiB; do
        grep -q "^$shape,hbg-relu_f32,[a-z-]*,4,1,200," "$tmp/k/results.csv" || fail "--kernels: no relu_f32 row for $shape"
        for builtin in copy_f32 scale_f32; do
                grep -q "^module_over_builtin_ns_per_task,$shape,relu_f32/$builtin,.*,ratio$" "$tmp/k/metrics.csv" ||
                        fail "--kernels: no ratio relu_f32/$builtin for $shape"
        done
done
# No module: no row, no failure, and the reason printed.
"$bench" --quick --kernels --shapes none --peers none --no-instructions --module "$tmp/none/hbg-nn.so" \
        --out "$tmp/n" >"$tmp/n.log" 2>&1 || { rc=$?; cat "$tmp/n.log"; fail "hbg-bench --kernels without a module exited $rc"; }
grep -q "kernel rows skipped: no module at $tmp/none/hbg-nn.so" "$tmp/n.log" || { cat "$tmp/n.log"; fail "no module: no reason"; }
[ "$(wc -l <"$tmp/n/results.csv")" = 1 ] || fail "no module: results.csv has rows"
# The host rows alone, hbg only: 4 cases x their worker counts (1,2,4 for
# the speed-up; 0,1,2,4 for the others), 1 repetition of --quick sizes.
"$bench" --quick --host --shapes none --repeat 1 --warmup 0 --peers none --no-instructions --no-latency \
        --out "$tmp/h" >"$tmp/h.log" 2>&1 || { rc=$?; cat "$tmp/h.log"; fail "hbg-bench --host exited $rc"; }
rows=$(tail -n +2 "$tmp/h/results.csv" | awk -F, '
        NF != 11 || $2 != "hbg-host" || $6 + 0 <= 0 || $8 + 0 <= 0 { bad++ }
        $1 == "host-spin1ms" && ($6 != 64 || $4 == 0) { bad++ }
        { seen[$1 "/" $4]++ }
        END { print NR + 0, bad + 0, length(seen) }')
[ "$rows" = "15 0 15" ] || { cat "$tmp/h.log"; fail "--host: rows, bad rows, distinct = $rows"; }
for w in 0 1 2 4; do
        for shape in host-empty-chain host-empty-indep host-mixed; do
                grep -q "^$shape,hbg-host,[a-z-]*,$w,1," "$tmp/h/results.csv" || fail "--host: no $shape row for $w workers"
        done
done
for w in 1 2 4; do
        grep -q "^host_speedup,host-spin1ms,hbg-host,,$w,1,[0-9.]*,ratio$" "$tmp/h/metrics.csv" ||
                fail "--host: no speed-up for $w workers"
        grep -q "^host_speedup_goal_met,host-spin1ms,hbg-host,,$w,1,[01],bool$" "$tmp/h/metrics.csv" ||
                fail "--host: no speed-up goal for $w workers"
done
# metrics.csv prints a thread count of 0 as an empty field (report.h).
for w in "" 1 2 4; do
        grep -q "^host_overhead_goal_5us_met,host-empty-chain,hbg-host,,$w,1,[01],bool$" "$tmp/h/metrics.csv" ||
                fail "--host: no 5 us goal for ${w:-0} workers"
done
awk -F, '$1 == "host_body_rounds" && $2 == "host-spin1ms" && $7 + 0 > 0 { ok = 1 } END { exit !ok }' \
        "$tmp/h/metrics.csv" || fail "--host: the 1 ms body was not calibrated"
grep -q "^tbb: not in --peers: skipped$" "$tmp/h.log" || fail "--host: no word on the skipped peers"
# The Python rows alone (hbg-bench --python, bench/python/bench_py.py), at
# toy size: every shape but gemm, empty tasks and 64 KiB arrays, each by
# hbg's package (1, 2, 4 processes; replayed), Dask, futures, the plain
# loop, and the empty-task replays from C. Counted, never timed.
"$bench" --quick --python --shapes none --python-size 300 --repeat 2 --warmup 0 --peers none --no-instructions \
        --no-latency --no-reuse --out "$tmp/p" >"$tmp/p.log" 2>&1 || { rc=$?; cat "$tmp/p.log"; fail "hbg-bench --python exited $rc"; }
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        grep -q "python rows skipped: " "$tmp/p.log" || { cat "$tmp/p.log"; fail "--python without numpy: no reason"; }
        [ "$(wc -l <"$tmp/p/results.csv")" = 1 ] || fail "--python without numpy: results.csv has rows"
        echo "test-bench: note: no numpy for /usr/bin/python3: the Python rows were skipped"
        py_rows=0
else
        dask=12
        if ! /usr/bin/python3 -c 'import dask' 2>/dev/null; then
                grep -q "dask is not installed" "$tmp/p.log" || fail "--python without dask: no note"
                echo "test-bench: note: no dask for /usr/bin/python3: no dask-threaded rows"
                dask=0
        fi
        # Per system: rows, and rows whose fields are wrong. One process's
        # graph of each shape: tasks[shape]; n processes build n of them.
        rows=$(tail -n +2 "$tmp/p/results.csv" | awk -F, '
                { n[$2]++ }
                NF != 11 || $1 !~ /^py-(chain|independent|tree|wavefront|layered|attention)(-64KiB)?$/ ||
                        $6 + 0 <= 0 || $8 + 0 <= 0 || $11 + 0 <= 0 { bad++ }
                $2 ~ /^hbg-/ && $3 == "" { bad++ }
                $2 !~ /^hbg-/ && $3 != "" { bad++ }
                $2 != "hbg-py" && $5 != 1 { bad++ }
                $5 == 1 && ($9 != "" || $10 != "") { bad++ }
                $5 > 1 && ($9 == "" || $10 == "") { bad++ }
                $2 == "hbg-py" && $5 == 1 { one[$1] = $6 }
                { tasks[NR] = $6; shape[NR] = $1; clients[NR] = $5 }
                END {
                        for (r in tasks)
                                if (tasks[r] != clients[r] * one[shape[r]]) bad++
                        printf "%d %d %d %d %d %d %d", n["hbg-py"], n["hbg-py-replay"], n["hbg-c-replay"],
                               n["dask-threaded"], n["futures"], n["py-floor"], bad + 0
                }')
        [ "$rows" = "36 12 6 $dask 12 12 0" ] ||
                { cat "$tmp/p.log"; fail "--python: hbg-py, replay, C replay, dask, futures, floor, bad = $rows"; }
        for shape in chain independent tree wavefront layered attention; do
                for clients in 1 2 4; do
                        grep -q "^py-$shape-64KiB,hbg-py,[a-z-]*,4,$clients," "$tmp/p/results.csv" ||
                                fail "--python: no 64 KiB $shape row for $clients processes"
                done
                grep -q "^py_replay_over_c_met,py-$shape,hbg-py-replay,[a-z-]*,4,1,[01],bool$" "$tmp/p/metrics.csv" ||
                        fail "--python: no replay goal for $shape"
        done
        goals=$(awk -F, '$1 == "py_add_ns_per_task_met" { a++ } $1 == "py_dask_over_hbg_met" { d++ }
                $1 == "py_scaling_met" && ($5 == 2 || $5 == 4) { s++ } END { print a + 0, d + 0, s + 0 }' "$tmp/p/metrics.csv")
        [ "$goals" = "12 $dask 24" ] || fail "--python: add, dask, scaling goals = $goals"
        py_rows=$(( 78 + dask ))
fi
# The trace alone: one 10 x 10 wavefront (100 tasks) under hbgctl trace.
"$bench" --trace --trace-size 100 --shapes none --peers none --no-instructions --no-latency --no-reuse \
        --out "$tmp/t" >"$tmp/t.log" 2>&1 || { rc=$?; cat "$tmp/t.log"; fail "hbg-bench --trace exited $rc"; }
grep -q "^trace: $tmp/t/trace.json (.*), picture: $tmp/t/trace.svg$" "$tmp/t.log" ||
        { cat "$tmp/t.log"; fail "--trace: does not say where the files are"; }
grep -q "^wavefront: 100 tasks run$" "$tmp/t.log" || { cat "$tmp/t.log"; fail "--trace: not 100 tasks"; }
[ "$(grep -c '^scheduler [0-3] ' "$tmp/t.log")" = 4 ] || { cat "$tmp/t.log"; fail "--trace: no row per thread"; }
grep -q "^all  *100 " "$tmp/t.log" || { cat "$tmp/t.log"; fail "--trace: the summary does not count 100 slices"; }
# Task slices ("X", category task, named by the kernel: spin_ns, the
# default body) on scheduler tracks 0..3: one per task (one block each);
# every task id once.
counts=$(/usr/bin/python3 - "$tmp/t/trace.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "task"]
bad = sum(1 for e in x if e["name"] != "spin_ns" or not 0 <= e["tid"] < 4 or e["dur"] < 0)
names = sum(1 for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"
            and str(e["args"]["name"]).startswith("scheduler "))
print(len(x), len({e["args"]["task"] for e in x}), bad, names)
PY
) || fail "--trace: trace.json does not parse"
[ "$counts" = "100 100 0 4" ] || fail "--trace: slices, distinct tasks, bad slices, scheduler tracks = $counts"
head -c 5 "$tmp/t/trace.svg" | grep -q '^<?xml\|^<svg' || fail "--trace: trace.svg is not SVG"
[ "$(grep -c 'class="task"' "$tmp/t/trace.svg")" = 100 ] || fail "--trace: trace.svg has not 100 task boxes"
# No hbgctl beside hbg-bench: said, and a failure. hbg-bench finds its
# programs in its own directory; this one has hbgd but no hbgctl.
mkdir -p "$tmp/x/bin" && cp "$bench" "$tmp/x/bin/" && ln -s "$(cd "$B/bin" && pwd)/hbgd" "$tmp/x/bin/hbgd" &&
        ln -s "$(cd "$B/lib" && pwd)" "$tmp/x/lib" || fail "cannot copy hbg-bench"
"$tmp/x/bin/hbg-bench" --trace --trace-size 100 --shapes none --peers none --no-instructions --no-latency \
        --no-reuse --out "$tmp/x/out" >"$tmp/x.log" 2>&1 && { cat "$tmp/x.log"; fail "--trace without hbgctl exited 0"; }
grep -q "hbg-bench: --trace: no hbgctl beside hbg-bench ($tmp/x/bin/hbgctl: " "$tmp/x.log" ||
        { cat "$tmp/x.log"; fail "--trace without hbgctl: no reason"; }

# Instructions per task under callgrind, end to end (make check installs
# valgrind): chain with one producer, built and replayed. The total and
# hbgd's and the producer's shares in metrics.csv, every stage of each
# (docs/PERFORMANCE.md, "Instructions by stage") with the stages adding
# up to their process's share within rounding, the stages that a noop
# task cannot skip above zero, and the two stage lines printed.
instr_checked=no
if command -v valgrind >/dev/null 2>&1; then
        "$bench" --quick --shapes chain --sizes 200 --modes eager-batched --peers none --no-latency --no-reuse \
                --clients 1 --repeat 1 --warmup 0 --out "$tmp/i" >"$tmp/i.log" 2>&1 ||
                { rc=$?; cat "$tmp/i.log"; fail "hbg-bench (instructions) exited $rc"; }
        stages=$(awk -F, '$2 == "chain" && $3 == "hbg" { v[$1] = $7 }
                END {
                        n = split("ingest validate classify ready run complete retire schedule other", h, " ")
                        for (i = 1; i <= n; i++) { k = "instructions_per_task_hbgd_" h[i]; if (!(k in v)) { print "no " k; exit }
                                hs += v[k] }
                        n = split("add deps write bench other", p, " ")
                        for (i = 1; i <= n; i++) { k = "instructions_per_task_producer_" p[i]; if (!(k in v)) { print "no " k; exit }
                                ps += v[k] }
                        t = v["instructions_per_task"]; hd = v["instructions_per_task_hbgd"]; pr = v["instructions_per_task_producer"]
                        if (!(t > 0 && hd > 0 && pr > 0)) { print "totals " t " " hd " " pr; exit }
                        if ((hs - hd) ^ 2 > (5 + hd / 100) ^ 2) { print "hbgd stages " hs " against " hd; exit }
                        if ((ps - pr) ^ 2 > (5 + pr / 100) ^ 2) { print "producer stages " ps " against " pr; exit }
                        if ((hd + pr - t) ^ 2 > (5 + t / 100) ^ 2) { print "hbgd " hd " and producer " pr " against " t; exit }
                        if (!(v["instructions_per_task_hbgd_validate"] > 0 && v["instructions_per_task_hbgd_run"] > 0 &&
                              v["instructions_per_task_hbgd_complete"] > 0 && v["instructions_per_task_producer_add"] > 0)) {
                                print "a stage every task goes through is 0"; exit }
                        print "ok"
                }' "$tmp/i/metrics.csv")
        [ "$stages" = ok ] || { cat "$tmp/i.log"; fail "instructions by stage: $stages"; }
        grep -q '^instructions_per_task_hbgd,chain,hbg-replay,' "$tmp/i/metrics.csv" ||
                { cat "$tmp/i.log"; fail "no replay instruction count"; }
        grep -q '^    hbgd      ingest [0-9]* validate [0-9]* ' "$tmp/i.log" &&
                grep -q '^    producer  add [0-9]* deps [0-9]* write ' "$tmp/i.log" ||
                { cat "$tmp/i.log"; fail "no stage lines under the instruction rows"; }
        instr_checked=yes
else
        echo "test-bench: valgrind not installed: instructions by stage not checked (make check installs it)"
fi
wait "$all_pid" || { rc=$?; all_pid=; cat "$tmp/a.log"; fail "hbg-bench exited $rc"; }
all_pid=
header=$(head -n 1 "$tmp/a/results.csv")
[ "$header" = "shape,system,mode,threads,clients,tasks,tasks_per_s,ns_per_task,p50_us,p99_us,rss_kib" ] ||
        fail "results.csv header is '$header'"
# 7 shapes x every policy (hbgd's table) x 2 client counts of hbg, and
# 7 x every policy replay rows
# (one client), every one with 11 fields and a positive ns_per_task;
# p50/p99 empty with one client, set with two.
rows=$(tail -n +2 "$tmp/a/results.csv" | awk -F, '
        NF != 11 || ($2 != "hbg" && $2 != "hbg-replay") || $8 + 0 <= 0 { bad++ }
        $2 == "hbg-replay" && $5 != 1 { bad++ }
        $5 == 1 && ($9 != "" || $10 != "") { bad++ }
        $5 == 2 && ($9 == "" || $10 == "") { bad++ }
        END { print NR + 0, bad + 0 }')
modes=$("$B/bin/hbgd" --completion=help) || fail "hbgd --completion=help"
n_modes=$(echo "$modes" | wc -l)
hbg_rows=$((21 * n_modes))
[ "$rows" = "$hbg_rows 0" ] || fail "results.csv: rows, bad rows = $rows"
for mode in $modes; do
        grep -q "^chain,hbg,$mode,4,2," "$tmp/a/results.csv" || fail "no chain row for $mode with 2 clients"
        grep -q "^gemm,hbg-replay,$mode,4,1," "$tmp/a/results.csv" || fail "no gemm replay row for $mode"
done
[ "$(head -n 1 "$tmp/a/metrics.csv")" = "metric,shape,system,mode,threads,clients,value,unit" ] ||
        fail "metrics.csv header"
for metric in spread connect_us_median idle_cpu idle_cpu_sessions hbgctl_compile_ns_per_task failsafe_pushes_per_task; do
        grep -q "^$metric," "$tmp/a/metrics.csv" || fail "metrics.csv has no $metric"
done
awk -F, 'NR > 1 && NF != 8 { exit 1 }' "$tmp/a/metrics.csv" || fail "metrics.csv: a row without 8 fields"

"$bench" --compare "$tmp/a/results.csv" "$tmp/a/results.csv" >"$tmp/cmp.log" 2>&1 ||
        fail "--compare exited $?"
grep -q "geometric mean of new/old over $hbg_rows rows: 1.000" "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "--compare of a file with itself"; }
"$bench" --compare "$tmp/a/metrics.csv" "$tmp/a/results.csv" >/dev/null 2>&1 && fail "--compare took a metrics.csv"
# Against a copy with the first row twice as fast and the second gone:
# new/old is 0.500 for the first and the second is "gone"; the other way
# round 2.000, and the second a "new row".
awk -F, -v OFS=, 'NR == 2 { $8 = sprintf("%.2f", $8 / 2) } NR != 3' "$tmp/a/results.csv" >"$tmp/b.csv"
faster=$(sed -n 2p "$tmp/a/results.csv" | cut -d, -f1-5)
gone=$(sed -n 3p "$tmp/a/results.csv" | cut -d, -f1-5)
"$bench" --compare "$tmp/a/results.csv" "$tmp/b.csv" >"$tmp/cmp.log" 2>&1 || fail "--compare (a row halved, one gone) exited $?"
grep -q "^$faster .* 0\.500$" "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "--compare: $faster is not 0.500"; }
grep -q "^$gone .* gone$" "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "--compare: $gone is not gone"; }
"$bench" --compare "$tmp/b.csv" "$tmp/a/results.csv" >"$tmp/cmp.log" 2>&1 || fail "--compare (one row new) exited $?"
grep -q "^$faster .* 2\.000$" "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "--compare: $faster is not 2.000"; }
grep -q "^$gone .* new row$" "$tmp/cmp.log" || { cat "$tmp/cmp.log"; fail "--compare: $gone is not a new row"; }

echo "test-bench: ok ($hbg_rows rows, metrics, --compare, peers checked: $peers_checked, 9 kernel rows, 15 host rows," \
        "$py_rows Python rows, a trace, instructions by stage: $instr_checked)"
