#!/bin/sh
# The man pages of the C API (docs/man/*.3) cover every call: fails when
#  - a function exported by libclient/libhbgclient.map (any version node)
#    has no page whose NAME section lists it, no page file of its own name
#    (the page or a `.so` link to it), is not declared in the public header,
#    or `man -M` over the pages laid out as installed does not find it;
#  - a page documenting calls lacks NAME, SYNOPSIS (with the #include and
#    the pkg-config line), DESCRIPTION, RETURN VALUE, THREAD SAFETY,
#    VERSIONS or SEE ALSO, does not declare its calls in its SYNOPSIS, or
#    lacks ERRORS while one of its calls returns int (a negative errno);
#    an ERRORS section names something that is not an errno;
#  - a `.so` link points to a missing page, to another link, or to a page
#    whose NAME does not list the link's name;
#  - a page refers to an hbg page, BR hbg_x (3), that does not exist;
#  - libhbgclient(3) does not refer to every exported call's page;
#  - a page's footer (.TH) is not "hbg @VERSION@": the Makefile puts the
#    version of hbg.h there, and the paths of the prefix in place of
#    @SYSCONFDIR@, @DOCDIR@, @UNITDIR@, @SYSUSERSDIR@ (so no page names a
#    version or an install path that could fall behind);
#  - man-db (`man --warnings -E UTF-8 -l`) or groff (`groff -man -ww -z`)
#    warns about any page of docs/man/, or lexgrog cannot read its NAME.
# man-db and groff-base are build dependencies (Makefile BUILD_DEPS): a
# missing tool is a failure, not a skip. Runs under tests/scripts/run-tests.sh.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
map=$root/libclient/libhbgclient.map
header=$root/libclient/include/hbg/hbg.h
mandir=$root/docs/man

fail=0
bad() { echo "check-man: $*"; fail=1; }

for tool in man:man-db lexgrog:man-db groff:groff-base cpp:cpp; do
        if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
                echo "check-man: ${tool%%:*} not found (Debian package ${tool#*:}; make deps installs it)" >&2
                exit 1
        fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------ inputs
# Exported functions: the globals of every version node of the map.
sed -e 's,/\*.*\*/,,g' "$map" | awk '
        /\/\*/ { incomment = 1 }
        incomment { if (/\*\//) incomment = 0; next }
        /global:/ { g = 1; sub(/.*global:/, "") }
        /local:/ { g = 0 }
        /}/ { g = 0 }
        g { n = split($0, w, /[ \t;]+/); for (i = 1; i <= n; i++) if (w[i] ~ /^[A-Za-z_][A-Za-z0-9_]*$/) print w[i] }
' | sort -u >"$tmp/symbols"
if [ ! -s "$tmp/symbols" ]; then
        echo "check-man: no exported symbols found in $map" >&2
        exit 1
fi

# Return type of each exported declaration of the header: "name type".
sed -n 's/^HBG_EXPORT \(.*[^A-Za-z0-9_]\)\([A-Za-z_][A-Za-z0-9_]*\)(.*/\2 \1/p' "$header" |
        sed 's/ *$//' | sort -u >"$tmp/decls"
awk '$2 == "int" && NF == 2 { print $1 }' "$tmp/decls" >"$tmp/int-decls"

# Known errno names, for the ERRORS sections.
printf '#include <errno.h>\n' | cpp -dM - | sed -n 's/^#define \(E[A-Z0-9]*\) .*/\1/p' | sort -u >"$tmp/errnos"

# The pages, split into real pages and `.so` links.
awk 'FNR == 1 { n = FILENAME; sub(/.*\//, "", n); print n > (/^\.so / ? L : P) }' \
        L="$tmp/links" P="$tmp/pages" "$mandir"/*.3
touch "$tmp/links" "$tmp/pages"

# Each page's sections, one file each: $tmp/sec/PAGE/TITLE (an unquoted
# .SH title, spaces as _), without the .SH line.
awk -v dir="$tmp/sec" '
        FNR == 1 { n = FILENAME; sub(/.*\//, "", n); system("mkdir -p \"" dir "/" n "\""); out = "" }
        /^\.SH / { t = $0; sub(/^\.SH +/, "", t); gsub(/"/, "", t); sub(/[ \t]+$/, "", t); gsub(/ /, "_", t)
                   if (out != "") close(out); out = dir "/" n "/" t; printf "" > out; next }
        out != "" { print > out }' "$mandir"/*.3
section() { cat "$tmp/sec/$(basename "$1")/$(echo "$2" | tr ' ' _)" 2>/dev/null; }
has_section() { [ -f "$tmp/sec/$(basename "$1")/$(echo "$2" | tr ' ' _)" ]; }

# Names in each real page's NAME section, as mandb reads them: "page name".
(cd "$mandir" && xargs lexgrog <"$tmp/pages") >"$tmp/lexgrog" 2>&1
sed -n 's/^\([^:]*\): "\([^ ]*\) - .*/\1 \2/p' "$tmp/lexgrog" | sort -u >"$tmp/names"
while read -r p; do
        grep -q "^$p " "$tmp/names" || bad "$p: lexgrog cannot read its NAME section: $(grep "^$p:" "$tmp/lexgrog")"
done <"$tmp/pages"

# ------------------------------------------------------------ every call has its page
while read -r sym; do
        page=$(awk -v s="$sym" '$2 == s { print $1; exit }' "$tmp/names")
        if [ -z "$page" ]; then
                bad "$sym (libhbgclient.map) has no page in docs/man/ whose NAME lists it"
                continue
        fi
        [ -e "$mandir/$sym.3" ] ||
                bad "$sym: no docs/man/$sym.3 (the page, or a link: .so man3/$page)"
        grep -q "^$sym " "$tmp/decls" ||
                bad "$sym: exported, but not declared HBG_EXPORT in libclient/include/hbg/hbg.h"
        grep -Eq "^\.BR +$sym +\(3\)" "$mandir/libhbgclient.3" ||
                bad "$sym: libhbgclient.3 does not refer to its page (.BR $sym (3))"
done <"$tmp/symbols"

# ------------------------------------------------------------ the pages of calls
while read -r p; do
        f=$mandir/$p
        calls=$(awk -v p="$p" '$1 == p { print $2 }' "$tmp/names" | grep -Fx -f "$tmp/symbols")
        [ -n "$calls" ] || continue
        for s in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" "THREAD SAFETY" VERSIONS "SEE ALSO"; do
                has_section "$f" "$s" || bad "$p: no $s section"
        done
        section "$f" SYNOPSIS >"$tmp/synopsis"
        grep -q '#include <hbg/hbg.h>' "$tmp/synopsis" || bad "$p: SYNOPSIS lacks #include <hbg/hbg.h>"
        grep -q 'pkg\\-config \\-\\-cflags \\-\\-libs hbgclient' "$tmp/synopsis" ||
                bad "$p: SYNOPSIS lacks the pkg-config --cflags --libs hbgclient line"
        section "$f" "SEE ALSO" | grep -Eq '^\.BR +libhbgclient +\(3\)' ||
                bad "$p: SEE ALSO does not name libhbgclient (3)"
        can_fail=
        for c in $calls; do
                grep -Eq "(^|[ *\"])$c\(" "$tmp/synopsis" || bad "$p: SYNOPSIS does not declare $c()"
                grep -qx "$c" "$tmp/int-decls" && can_fail="$can_fail $c"
        done
        if [ -n "$can_fail" ]; then
                if ! has_section "$f" ERRORS; then
                        bad "$p: no ERRORS section, but$can_fail can fail (return int)"
                else
                        section "$f" ERRORS >"$tmp/errors"
                        grep -Eo '\\-E[A-Z0-9]+' "$tmp/errors" | sed 's/^\\-//' | sort -u >"$tmp/named"
                        [ -s "$tmp/named" ] || bad "$p: its ERRORS section names no error code"
                        for e in $(comm -23 "$tmp/named" "$tmp/errnos"); do
                                bad "$p: ERRORS names $e, which is not an errno"
                        done
                fi
        fi
done <"$tmp/pages"

# ------------------------------------------------------------ links
# (the loop reads the list of links, grep only reads it again)
# shellcheck disable=SC2094
while read -r l; do
        n=${l%.3}
        read -r so target rest <"$mandir/$l"
        case "$so $target $rest" in
        ".so man3/"*.3" ") ;;
        *) bad "$l: link '$so $target $rest' is not of the form .so man3/PAGE.3"; continue ;;
        esac
        t=${target#man3/}
        if [ ! -e "$mandir/$t" ]; then
                bad "$l: links to $target, which does not exist"
        elif grep -qx "$t" "$tmp/links"; then
                bad "$l: links to $target, which is itself a link"
        elif ! awk -v p="$t" -v n="$n" '$1 == p && $2 == n { f = 1 } END { exit !f }' "$tmp/names"; then
                bad "$l: the NAME section of $t does not list $n"
        fi
        [ "$(wc -l <"$mandir/$l")" -eq 1 ] || bad "$l: a link page holds only its .so line"
done <"$tmp/links"

# ------------------------------------------------------------ references
for f in "$mandir"/*.[1358]; do
        grep -Eo '^\.BR +(hbg_[A-Za-z0-9_]+|HBG_[A-Z_]+|libhbgclient) +\(3\)' "$f" |
                awk '{ print $2 }' | sort -u | while read -r r; do
                [ -e "$mandir/$r.3" ] || echo "check-man: $(basename "$f"): refers to $r(3), which has no page"
        done
done >"$tmp/refs"
[ -s "$tmp/refs" ] && { cat "$tmp/refs"; fail=1; }

# ------------------------------------------------------------ version
for f in "$mandir"/*.[1358]; do
        grep -q '^\.so ' "$f" && continue
        head -1 "$f" | grep -q '^\.TH .* "hbg @VERSION@" ' ||
                bad "$(basename "$f"): its .TH footer is not \"hbg @VERSION@\" (the Makefile fills it in): $(head -1 "$f")"
done

# ------------------------------------------------------------ formatting
# Every page as installed (MANDIR/manN/...), so that `.so` links resolve.
for f in "$mandir"/*.[1358]; do
        b=$(basename "$f")
        mkdir -p "$tmp/tree/man${b##*.}"
        cp "$f" "$tmp/tree/man${b##*.}/"
done
# groff over all of them at once (it names the file of each warning; its
# .so requests resolve from the tree's root), man-db page by page (its
# warnings say "<standard input>"); links are rendered through their
# target, and looked up by name below.
out=$(cd "$tmp/tree" && groff -man -ww -z man*/* 2>&1)
[ -z "$out" ] || bad "groff -man -ww -z:
$out"
for f in "$tmp"/tree/man*/*; do
        rel=${f#"$tmp/tree/"}
        grep -qx "$(basename "$f")" "$tmp/links" && continue
        out=$(cd "$tmp/tree" && LC_ALL=C.UTF-8 MANWIDTH=80 MANPAGER=cat PAGER=cat \
                man --warnings -E UTF-8 -l "$rel" 2>&1 >/dev/null)
        [ -z "$out" ] || bad "$rel: man --warnings -E UTF-8 -l:
$out"
done
# Every call found by name, as `man 3 NAME` finds it once installed.
while read -r sym; do
        if ! out=$(man -M "$tmp/tree" -w 3 "$sym" 2>&1) || [ ! -f "$out" ]; then
                bad "man -M DIR 3 $sym finds no page: $out"
        fi
done <"$tmp/symbols"

if [ "$fail" -ne 0 ]; then
        echo "check-man: FAILED"
        exit 1
fi
echo "check-man: $(wc -l <"$tmp/symbols") exported calls documented in $(wc -l <"$tmp/pages") pages" \
        "and $(wc -l <"$tmp/links") links of docs/man/, no warnings"
exit 0
