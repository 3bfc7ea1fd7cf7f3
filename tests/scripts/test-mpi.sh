#!/bin/sh
# examples/mpi_producer.c under mpirun (docs/SCALING.md): 3 ranks on this
# machine, each a producer of one real private hbgd.
#   1. HBG_SOCKET names the node's hbgd: exit 0, every rank's share checked,
#      and rank 0's reduced sum equal to the closed form computed here;
#      hbgd saw one session per rank.
#   2. --socket with %h (the node's name) and --fail-rank 1: rank 1's graph
#      fails in hbgd with -EIO; rank 1 says which task, every rank learns it
#      (mpirun exits non-zero), rank 0 reports "1 of 3 ranks failed".
#   3. No hbgd at the socket: every rank's connect fails, reported, non-zero.
# hbgd is stopped on every exit path (trap). Exit 0 passed, 1 failed, 77
# skipped (mpirun missing: package openmpi-bin, which `make deps` installs).
# Environment: B (build directory, default build). Plain build only (the
# example is built by the plain `make test`).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$root/$B ;; esac
hbgd=$B/bin/hbgd
example=$B/bin/hbg-example-mpi-producer

command -v mpirun >/dev/null 2>&1 ||
        { echo "test-mpi: SKIP: mpirun not found (Debian package openmpi-bin; make deps installs it)"; exit 77; }
for f in "$hbgd" "$example"; do
        [ -x "$f" ] || { echo "test-mpi: FAIL: $f not built (make $f)"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hbg-mpi.XXXXXX") || exit 1
pid=
cleanup() {
        if [ -n "$pid" ]; then
                kill -TERM "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
                pid=
        fi
        rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fails=0
ok()   { echo "  ok   $*"; }
bad()  { echo "  FAIL $*"; fails=$((fails + 1)); }
die()  { echo "test-mpi: FAIL: $*"; exit 1; }
show() { [ -s "$1" ] && sed 's/^/    | /' "$1"; }

# Open MPI in a container: no ssh (every rank is local), shared memory
# between ranks without CMA (ptrace may be denied), more ranks than cores,
# and its session files in our directory.
export OMPI_MCA_plm_rsh_agent=''
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_orte_tmpdir_base="$tmp"
unset HBG_SOCKET
asroot=
[ "$(id -u)" = 0 ] && asroot=--allow-run-as-root

run() {  # run NAME ARGS...: mpirun -np 3 the example; output in $tmp/NAME.out/.err, exit in $rc
        name=$1
        shift
        timeout --kill-after=5 60 mpirun $asroot --oversubscribe -np 3 "$example" "$@" \
                >"$tmp/$name.out" 2>"$tmp/$name.err"
        rc=$?
}

# The node's hbgd, on a socket named after the node (as a cluster would
# have one per node on a shared file system).
host=$(uname -n)
sock=$tmp/hbgd-$host.sock
"$hbgd" --socket "$sock" 2>"$tmp/hbgd.log" &
pid=$!
i=0
until [ -S "$sock" ] && grep -q 'ready:' "$tmp/hbgd.log"; do
        kill -0 "$pid" 2>/dev/null || { show "$tmp/hbgd.log"; pid=; die "hbgd exited before it was ready"; }
        i=$((i + 1))
        [ $i -le 500 ] || { show "$tmp/hbgd.log"; die "hbgd not ready after 5 s"; }
        sleep 0.01
done
echo "test-mpi: hbgd (pid $pid) on $sock"

# 1. The closed form, computed here: sum over i < N of alpha*(i mod 64) + 1.
n=1000003 alpha=5
q=$((n / 64)) r=$((n % 64))
want=$((n + alpha * (q * 2016 + r * (r - 1) / 2)))
echo "test-mpi: mpirun -np 3 (HBG_SOCKET), N=$n alpha=$alpha, expecting sum $want"
HBG_SOCKET=$sock run good --n "$n" --alpha "$alpha"
if [ $rc -eq 0 ]; then ok "mpirun exit 0"; else bad "mpirun exit $rc"; fi
line="mpi_producer: 3 ranks, $n elements, alpha $alpha: sum $want (expected $want) ok"
if grep -qxF "$line" "$tmp/good.out"; then ok "rank 0: $line"; else bad "no line \"$line\""; fi
for k in 0 1 2; do
        if grep -q "^rank $k/3 on .* via $sock: partial sum [0-9]* ok\$" "$tmp/good.out"; then
                ok "rank $k checked its share"
        else
                bad "rank $k did not report its share as checked"
        fi
done
for k in 0 1 2; do
        grep -q "mpi_producer rank $k)" "$tmp/hbgd.log" || bad "hbgd saw no session of rank $k"
done
[ $fails -eq 0 ] || { show "$tmp/good.out"; show "$tmp/good.err"; show "$tmp/hbgd.log"; }

# 2. Rank 1's graph fails in hbgd.
echo "test-mpi: mpirun -np 3 --socket '$tmp/hbgd-%h.sock' --fail-rank 1"
before=$fails
run failing --socket "$tmp/hbgd-%h.sock" --fail-rank 1 --n 30000
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ]; then ok "mpirun exit $rc (not 0)"
else bad "mpirun exit $rc, expected a failure that is not a timeout"; fi
if grep -q "^rank 1 on .*: graph 0 failed at task [0-9]* (the task --fail-rank added): Input/output error: kernel fail returned -EIO\$" \
        "$tmp/failing.err"; then
        ok "rank 1 names the failed graph, its task, its kernel and the error (hbg_graph_error)"
else
        bad "rank 1 did not report its failed graph"
fi
if grep -qxF "mpi_producer: 1 of 3 ranks failed" "$tmp/failing.err"; then ok "rank 0: 1 of 3 ranks failed"
else bad "rank 0 did not report 1 of 3 ranks failed"; fi
for k in 0 2; do
        grep -q "^rank $k/3 on .* via $sock: partial sum [0-9]* ok\$" "$tmp/failing.out" ||
                bad "rank $k (not failing) did not finish its share"
done
grep -q 'mpi_producer: .* ok$' "$tmp/failing.out" && bad "rank 0 reported success"
grep -q 'failed: Input/output error' "$tmp/hbgd.log" && ok "hbgd logged the failed graph" ||
        bad "hbgd did not log the failed graph"
[ $fails -eq $before ] || { show "$tmp/failing.out"; show "$tmp/failing.err"; show "$tmp/hbgd.log"; }

# 3. No hbgd there.
echo "test-mpi: mpirun -np 3 --socket $tmp/none.sock (no hbgd)"
before=$fails
run nohbgd --socket "$tmp/none.sock" --n 1000
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ]; then ok "mpirun exit $rc (not 0)"
else bad "mpirun exit $rc, expected a failure that is not a timeout"; fi
c=$(grep -c "^rank [0-2] on .*: hbg_connect: .*$tmp/none.sock" "$tmp/nohbgd.err")
[ "$c" -eq 3 ] && ok "every rank reports its failed connect" || bad "$c of 3 ranks report the failed connect"
grep -qxF "mpi_producer: 3 of 3 ranks failed" "$tmp/nohbgd.err" && ok "rank 0: 3 of 3 ranks failed" ||
        bad "rank 0 did not report 3 of 3 ranks failed"
[ $fails -eq $before ] || { show "$tmp/nohbgd.out"; show "$tmp/nohbgd.err"; }

kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
[ $rc -eq 0 ] && ok "hbgd stopped by SIGTERM, exit 0" || { show "$tmp/hbgd.log"; bad "hbgd exit $rc after SIGTERM"; }

if [ $fails -ne 0 ]; then
        echo "test-mpi: $fails checks failed"
        exit 1
fi
echo "test-mpi: 3 ranks, each a producer of its node's hbgd, results and failures reduced with MPI"
exit 0
