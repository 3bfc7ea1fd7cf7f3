#!/bin/bash
# The bash completion (ctl/hbg-completion.bash) against the built hbgctl and
# hbgd: commands, each command's options, files for `run` and for the
# options that take one, hbgd's options and completion modes. The script
# asks the programs for the names, so this also checks that they answer.
# Exit 0 passed, 1 failed, 77 skipped (no bash). Environment: B (build
# directory, default build).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$root/$B ;; esac
hbgctl=$B/bin/hbgctl
hbgd=$B/bin/hbgd
for p in "$hbgctl" "$hbgd"; do
        [ -x "$p" ] || { echo "test-completion: FAIL: $p not built"; exit 1; }
done

# shellcheck source=../ctl/hbg-completion.bash
. "$root/ctl/hbg-completion.bash"
complete -p hbgctl >/dev/null && complete -p hbgd >/dev/null ||
        { echo "test-completion: FAIL: the script registers no completion"; exit 1; }

fails=0
# expect FUNCTION "WANTED WORDS" [ABSENT WORDS] -- WORD...: complete the last
# word; every wanted word must be offered, no absent one.
expect() {
        local fn=$1 want=$2 absent=$3 w
        shift 4
        COMP_WORDS=("$@")
        COMP_CWORD=$(($# - 1))
        COMPREPLY=()
        "$fn"
        local got=" ${COMPREPLY[*]} "
        for w in $want; do
                [[ $got == *" $w "* ]] || { echo "  FAIL [$*]: no '$w' in:$got"; fails=$((fails + 1)); return; }
        done
        for w in $absent; do
                [[ $got != *" $w "* ]] || { echo "  FAIL [$*]: '$w' offered:$got"; fails=$((fails + 1)); return; }
        done
        echo "  ok   [$*]"
}

cd "$root" || exit 1
verbs=$("$hbgctl" help --list | tr '\n' ' ')
expect _hbgctl "$verbs" "--json" -- "$hbgctl" ""
expect _hbgctl "threads top" "status run" -- "$hbgctl" t
expect _hbgctl "top" "" -- "$hbgctl" --json --socket /tmp/x t
expect _hbgctl "--progress --dot= --dry-run --heap= --window= --socket= --json --help" "--batch" -- "$hbgctl" run --
expect _hbgctl "128M" "64K" -- "$hbgctl" run --heap 12
expect _hbgctl "16K" "" -- "$hbgctl" run --window 16
expect _hbgctl "--batch --iterations= --delay= --json" "--dot=" -- "$hbgctl" top -
expect _hbgctl "--delay=" "" -- "$hbgctl" -n 3 top --d
expect _hbgctl "--socket= --json" "--progress" -- "$hbgctl" --
expect _hbgctl "tests/graphs/kernels.json" "" -- "$hbgctl" --json run tests/graphs/ke
expect _hbgctl "-" "" -- "$hbgctl" run ""
expect _hbgctl "" "tests/graphs/kernels.json status" -- "$hbgctl" run a.json tests/graphs/ke
expect _hbgctl "tests/graphs/deps.json" "" -- "$hbgctl" run --dot tests/graphs/de
expect _hbgctl "tests/graphs" "" -- "$hbgctl" --socket = tests/gra
expect _hbgctl "" "status top" -- "$hbgctl" top -d ""
expect _hbgctl "run" "" -- "$hbgctl" help r
expect _hbgctl "--output= --format= --listen= --per-uid --json" "--batch" -- "$hbgctl" metrics --
expect _hbgctl "trace" "" -- "$hbgctl" tr
expect _hbgctl "--duration= --session= --output= --svg= --socket= --json" "--batch --format=" -- "$hbgctl" trace --
expect _hbgctl "5" "" -- "$hbgctl" trace --duration ""
expect _hbgctl "tests/graphs" "status" -- "$hbgctl" trace --svg tests/gra
expect _hbgctl "tests/graphs" "status" -- "$hbgctl" trace -o tests/gra
# the formats offered are those hbgctl lists (its table), every one accepted
formats=$("$hbgctl" metrics --format=help | tr '\n' ' ')
[[ $formats == *openmetrics* && $formats == *prometheus* ]] ||
        { echo "  FAIL hbgctl metrics --format=help lists '$formats'"; fails=$((fails + 1)); }
expect _hbgctl "$formats" "" -- "$hbgctl" metrics --format ""
expect _hbgctl "prometheus" "openmetrics" -- "$hbgctl" metrics --format = pr
expect _hbgctl "127.0.0.1:9464" "" -- "$hbgctl" metrics --listen ""
expect _hbgctl "tests/graphs" "" -- "$hbgctl" metrics --output tests/gra
expect _hbgctl "--timeout= --socket= --json" "--batch --dot=" -- "$hbgctl" wait --
expect _hbgd "--socket= --config= --threads= --completion= --check-config= --help --version" "" -- "$hbgd" --
expect _hbgd "ctl/hbg-completion.bash" "" -- "$hbgd" --config ctl/hbg-c
expect _hbgd "systemd/hbgd.conf.example" "" -- "$hbgd" --check-config = systemd/hbgd.conf.ex
# the modes offered are those hbgd lists (its table): some, the same ones
# its --help and its refusal of an unknown mode name, every one accepted
modes=$("$hbgd" --completion=help | tr '\n' ' ')
modes=${modes% }
[ -n "$modes" ] || { echo "  FAIL hbgd --completion=help lists no mode"; fails=$((fails + 1)); }
# --help's words, split at spaces, commas, parentheses and line ends: a
# mode must be one whole (one mode's name may be part of another's).
usage=" $("$hbgd" --help | tr -s ' ,()\n' ' ') "
for m in $modes; do
        [[ $usage == *" $m "* ]] || { echo "  FAIL hbgd --help does not name mode $m"; fails=$((fails + 1)); }
done
if why=$("$hbgd" --check-config --completion=no-such-mode 2>&1); then
        echo "  FAIL hbgd accepts --completion=no-such-mode"; fails=$((fails + 1))
elif [[ $why != *"${modes// /, }"* ]]; then
        echo "  FAIL hbgd's refusal names other modes than '$modes': $why"; fails=$((fails + 1))
fi
expect _hbgd "$modes" "" -- "$hbgd" --completion ""
for m in $modes; do
        "$hbgd" --check-config --completion="$m" >/dev/null ||
                { echo "  FAIL hbgd refuses --completion=$m"; fails=$((fails + 1)); }
done
[ "$fails" -eq 0 ] && echo "test-completion: ok" && exit 0
echo "test-completion: $fails failed"
exit 1
