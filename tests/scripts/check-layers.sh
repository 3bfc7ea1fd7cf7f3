#!/bin/sh
# The stated call order holds in the built objects: reads the rank list
# (tests/scripts/layers.txt), finds who calls whom from `nm` of the product's
# objects under $B/obj and $B/pic (file A calls file B when A needs a
# global symbol that B alone defines) and fails on any call from a file to
# one of a higher rank, and on a product file the list does not rank.
# First it runs the same check on two fixtures compiled here: a call down
# must pass, a deliberate call up must fail (the checker can fail).
# Exit 0 passed, 1 failed, 77 skipped (no cc or nm). Environment: B
# (build directory, default build).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$root/$B ;; esac
command -v nm >/dev/null && command -v cc >/dev/null || { echo "check-layers: SKIP: no nm or cc"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hbg-layers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# check RANKS DIR...: the objects under each DIR, named by their path
# below it (obj/daemon/x.o is daemon/x.c; the first one found wins).
# Prints every call up and every unranked file; exit 1 if any.
check() {
        ranks=$1
        shift
        for d in "$@"; do
                [ -d "$d" ] && find "$d" -name '*.o' | sort | while read -r o; do
                        key=${o#"$d"/}
                        echo "$key ${key%.o}.c"
                done
        done | awk '!seen[$2]++' | while read -r o src; do
                # only files of the tree (a stale object of a removed file is not)
                [ -z "${src_root:-}" ] || [ -f "$src_root/$src" ] || continue
                for d in "$@"; do
                        [ -f "$d/$o" ] && { nm -P "$d/$o" | awk -v f="$src" '{ print f, $1, $2 }'; break; }
                done
        done >"$tmp/syms"
        awk '
        function rx(p) { gsub(/\./, "\\.", p); gsub(/\*/, "[^/]*", p); return "^" p "$" }
        FNR == NR {
                sub(/#.*/, "")
                if (NF == 0) next
                nr++
                for (i = 1; i <= NF; i++) { pat[++np] = rx($i); prank[np] = nr; ptext[np] = $i }
                next
        }
        {
                f = $1
                if (!(f in rank)) {
                        rank[f] = 0
                        for (i = 1; i <= np; i++) if (f ~ pat[i]) { rank[f] = prank[i]; break }
                }
                if ($3 == "U") need[f, $2] = 1
                else if ($3 ~ /^[TDBRVW]$/) { defs[$2]++; def[$2] = f }
        }
        END {
                bad = 0
                for (f in rank) if (!rank[f]) { printf "  %s: not in the rank list\n", f; bad++ }
                for (k in need) {
                        split(k, p, SUBSEP)
                        a = p[1]; s = p[2]
                        if (defs[s] != 1) continue
                        b = def[s]
                        if (a == b || !rank[a] || !rank[b]) continue
                        if (rank[b] < rank[a]) { printf "  %s -> %s (%s): a call up\n", a, b, s; bad++ }
                }
                exit bad > 0
        }' "$ranks" "$tmp/syms"
}

# The fixtures: high/top.c above low/base.c.
mkdir -p "$tmp/fix/high" "$tmp/fix/low"
printf 'high/*.c\nlow/*.c\n' >"$tmp/fix/ranks"
cat >"$tmp/fix/top.c" <<'C'
int base(void);
int top(void) { return base() + 1; }
C
cat >"$tmp/fix/down.c" <<'C'
int base(void) { return 1; }
C
cat >"$tmp/fix/up.c" <<'C'
int top(void);
int base(void) { return top(); }
C
cc -c -o "$tmp/fix/high/top.o" "$tmp/fix/top.c" && cc -c -o "$tmp/fix/low/base.o" "$tmp/fix/down.c" ||
        { echo "check-layers: FAIL: cannot compile the fixtures"; exit 1; }
check "$tmp/fix/ranks" "$tmp/fix" >"$tmp/out" ||
        { cat "$tmp/out"; echo "check-layers: FAIL: a call down was refused"; exit 1; }
cc -c -o "$tmp/fix/low/base.o" "$tmp/fix/up.c" || exit 1
if check "$tmp/fix/ranks" "$tmp/fix" >"$tmp/out"; then
        echo "check-layers: FAIL: a call up (low/base.c -> high/top.c) passed"
        exit 1
fi
grep -q "low/base.c -> high/top.c (top): a call up" "$tmp/out" ||
        { cat "$tmp/out"; echo "check-layers: FAIL: the call up was not named"; exit 1; }

# The product, from its objects (tests, bench, examples and the generated
# protocol code are not product files).
[ -d "$B/obj" ] || { echo "check-layers: FAIL: no $B/obj (build first)"; exit 1; }
mkdir -p "$tmp/prod"
for dir in ctl daemon libclient proto common shm; do
        [ -d "$B/obj/$dir" ] && mkdir -p "$tmp/prod/obj" && cp -r "$B/obj/$dir" "$tmp/prod/obj/"
        [ -d "$B/pic/$dir" ] && mkdir -p "$tmp/prod/pic" && cp -r "$B/pic/$dir" "$tmp/prod/pic/"
done
if ! src_root=$root check "$root/tests/scripts/layers.txt" "$tmp/prod/obj" "$tmp/prod/pic" >"$tmp/out"; then
        cat "$tmp/out"
        echo "check-layers: FAIL: the product breaks the call order of tests/scripts/layers.txt"
        exit 1
fi
echo "check-layers: ok ($(awk '{ print $1 }' "$tmp/syms" | sort -u | wc -l) files in order, a call up refused)"
