#!/bin/bash
# Run test binaries and scripts, HBG_TEST_JOBS at a time, in the order
# given (the Makefile puts the longest first); print each one's output
# as one block when it ends, then a closing tally with the time it took.
# Exit status 77 from a test means "skipped" (the test says why).
# Environment: B (build dir, for the label), STRESS (passed through),
# HBG_TEST_TIMEOUT (seconds per test, default 900), HBG_TEST_JOBS (tests
# at once, default the number of cores; 1 runs them one by one),
# HBG_TEST_ALONE (names of tests that run with no other beside them).
# Two at a time on two cores: most tests wait on a daemon, a pipe or a
# timer as much as they compute, so one at a time leaves a core idle.
# Every test owns its temporary directory, sockets, daemons and limits,
# so none sees another.
set -u
label=$(basename "${B:-build}")
timeout_s=${HBG_TEST_TIMEOUT:-900}
jobs=${HBG_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) echo "run-tests: HBG_TEST_JOBS must be a positive number, not '$jobs'" >&2; exit 2 ;; esac
# A test beside another may take twice its time alone: Check's default
# of 4 s for a test case that sets none is for a quiet machine.
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-30}
out=$(mktemp -d "${TMPDIR:-/tmp}/hbg-tests.XXXXXX") || exit 1

declare -A name_of=() start_of=()
began=$(date +%s)
pass=0 fail=0 skip=0 failed=""

# Stop what still runs (each under timeout, which passes the signal on)
# and remove the outputs on every exit.
stop_all() {
        for pid in "${!name_of[@]}"; do kill -TERM "$pid" 2>/dev/null; done
        wait 2>/dev/null
        rm -rf "$out"
}
trap stop_all EXIT
trap 'exit 130' INT TERM HUP

start() {
        local t=$1 name
        name=$(basename "$t")
        timeout --kill-after=10 "$timeout_s" "$t" >"$out/$name.log" 2>&1 &
        name_of[$!]=$name
        start_of[$!]=$(date +%s)
}

# finish PID RC: print the test's block and count it.
finish() {
        local pid=$1 rc=$2 name=${name_of[$1]} secs
        secs=$(( $(date +%s) - ${start_of[$1]} ))
        unset "name_of[$pid]" "start_of[$pid]"
        printf '==> %s (%s)\n' "$name" "$label"
        cat "$out/$name.log"
        case $rc in
        0)  pass=$((pass + 1)); printf 'PASS %s (%ss)\n' "$name" "$secs" ;;
        77) skip=$((skip + 1)); printf 'SKIP %s\n' "$name" ;;
        124|137) fail=$((fail + 1)); failed="$failed $name"; printf 'FAIL %s: timed out after %ss\n' "$name" "$timeout_s" ;;
        *)  fail=$((fail + 1)); failed="$failed $name"; printf 'FAIL %s (exit %s)\n' "$name" "$rc" ;;
        esac
}

wait_one() {
        local pid rc
        wait -n -p pid
        rc=$?
        finish "$pid" "$rc"
}

# A test named in HBG_TEST_ALONE runs with nothing beside it: those that
# pin CPUs or count sleeps (the Makefile's TEST_ALONE says which).
alone() {
        case " ${HBG_TEST_ALONE:-} " in *" $(basename "$1") "*) return 0 ;; esac
        return 1
}

for t in "$@"; do
        if alone "$t"; then
                while [ "${#name_of[@]}" -gt 0 ]; do wait_one; done
                start "$t"
                wait_one
                continue
        fi
        [ "${#name_of[@]}" -lt "$jobs" ] || wait_one
        start "$t"
done
while [ "${#name_of[@]}" -gt 0 ]; do wait_one; done

[ -n "$failed" ] && printf 'failed in %s:%s\n' "$label" "$failed"
printf '%s: %d passed, %d failed, %d skipped in %ss\n' "$label" "$pass" "$fail" "$skip" "$(( $(date +%s) - began ))"
[ "$fail" -eq 0 ]
