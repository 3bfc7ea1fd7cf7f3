#!/bin/sh
# Run test binaries one by one; print their output and a closing tally.
# Exit status 77 from a test means "skipped" (the test says why).
# Environment: B (build dir, for the label), STRESS (passed through),
# HBG_TEST_TIMEOUT (seconds per binary, default 900).
set -u
label=$(basename "${B:-build}")
timeout_s=${HBG_TEST_TIMEOUT:-900}
pass=0 fail=0 skip=0 failed=""
for t in "$@"; do
        name=$(basename "$t")
        printf '==> %s (%s)\n' "$name" "$label"
        start=$(date +%s)
        timeout --kill-after=10 "$timeout_s" "$t"
        rc=$?
        secs=$(( $(date +%s) - start ))
        case $rc in
        0)  pass=$((pass + 1)); printf 'PASS %s (%ss)\n' "$name" "$secs" ;;
        77) skip=$((skip + 1)); printf 'SKIP %s\n' "$name" ;;
        124|137) fail=$((fail + 1)); failed="$failed $name"; printf 'FAIL %s: timed out after %ss\n' "$name" "$timeout_s" ;;
        *)  fail=$((fail + 1)); failed="$failed $name"; printf 'FAIL %s (exit %s)\n' "$name" "$rc" ;;
        esac
done
[ -n "$failed" ] && printf 'failed in %s:%s\n' "$label" "$failed"
printf '%s: %d passed, %d failed, %d skipped\n' "$label" "$pass" "$fail" "$skip"
[ "$fail" -eq 0 ]
