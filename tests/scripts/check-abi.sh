#!/bin/sh
# The functions libhbgclient.so exports must be exactly the globals of
# libclient/libhbgclient.map: prints both differences, exits 1 if any.
# And no internal object (hbgd's, hbgctl's, the code they share) defines
# a global hbg_ symbol: that prefix is the public API's.
# Usage: tests/scripts/check-abi.sh [LIBRARY]   (default $B/lib/libhbgclient.so,
# B defaulting to build; relative paths are tried from here and from the
# repository root). Runs under tests/scripts/run-tests.sh like the test binaries.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
map=$root/libclient/libhbgclient.map
lib=${1:-${B:-build}/lib/libhbgclient.so}
[ -e "$lib" ] || case $lib in /*) ;; *) lib=$root/$lib ;; esac
if [ ! -e "$lib" ]; then
        echo "check-abi: $lib not found (build it: make $lib)" >&2
        exit 1
fi
if [ ! -r "$map" ]; then
        echo "check-abi: $map not found" >&2
        exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-abi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic function symbols (T text, W weak, i ifunc), without
# the @VERSION / @@VERSION suffix nm prints.
if ! nm -D --defined-only "$lib" >"$tmp/nm"; then
        echo "check-abi: nm -D failed on $lib" >&2
        exit 1
fi
awk 'NF >= 3 && $(NF-1) ~ /^[TWi]$/ { sub(/@.*/, "", $NF); print $NF }' "$tmp/nm" | sort -u >"$tmp/lib"
# The same with the version node each is bound to ("-" if none).
awk 'NF >= 3 && $(NF-1) ~ /^[TWi]$/ { n = split($NF, p, /@+/); print p[1], (n > 1 ? p[n] : "-") }' \
        "$tmp/nm" | sort -u >"$tmp/lib-nodes"

# Globals of every version node: the names between "global:" and
# "local:" (or the node's end), comments removed.
sed -e 's,/\*.*\*/,,g' -e 's,//.*,,' -e 's,#.*,,' "$map" | awk '
        /\/\*/ { incomment = 1 }
        incomment { if (/\*\//) incomment = 0; next }
        {
                line = $0
                while (line != "") {
                        if (!g && match(line, /^[ \t]*[A-Za-z_][A-Za-z0-9_.]*[ \t]*\{/)) {
                                node = substr(line, RSTART, RLENGTH - 1); gsub(/[ \t]/, "", node)
                                line = substr(line, RSTART + RLENGTH); continue
                        }
                        if (match(line, /global:/)) {
                                pre = substr(line, 1, RSTART - 1); rest = substr(line, RSTART + 7)
                                if (g) emit(pre)
                                g = 1; line = rest; continue
                        }
                        if (match(line, /local:/)) {
                                pre = substr(line, 1, RSTART - 1)
                                if (g) emit(pre)
                                g = 0; line = substr(line, RSTART + 6); continue
                        }
                        if (match(line, /}/)) {
                                pre = substr(line, 1, RSTART - 1)
                                if (g) emit(pre)
                                g = 0; line = ""; continue
                        }
                        if (g) emit(line)
                        line = ""
                }
        }
        function emit(s,   n, i, parts) {
                n = split(s, parts, /[ \t;]+/)
                for (i = 1; i <= n; i++)
                        if (parts[i] ~ /^[A-Za-z_][A-Za-z0-9_]*$/)
                                print parts[i], node
        }' | sort -u >"$tmp/map-nodes"
cut -d' ' -f1 "$tmp/map-nodes" | sort -u >"$tmp/map"

if [ ! -s "$tmp/map" ]; then
        echo "check-abi: no global symbols found in $map" >&2
        exit 1
fi

# Exported non-function symbols are worth a look, but the map only lists
# functions today.
awk 'NF >= 3 && $(NF-1) ~ /^[BDGRSuV]$/ { sub(/@.*/, "", $NF); print $NF }' "$tmp/nm" |
        sort -u >"$tmp/data"
if [ -s "$tmp/data" ]; then
        echo "check-abi: warning: $lib exports data symbols:"
        sed 's/^/  /' "$tmp/data"
fi

comm -23 "$tmp/lib" "$tmp/map" >"$tmp/extra"
comm -13 "$tmp/lib" "$tmp/map" >"$tmp/missing"
if [ -s "$tmp/extra" ] || [ -s "$tmp/missing" ]; then
        echo "check-abi: $lib differs from $map"
        [ -s "$tmp/extra" ] && { echo "exported but not in the map:"; sed 's/^/  + /' "$tmp/extra"; }
        [ -s "$tmp/missing" ] && { echo "in the map but not exported:"; sed 's/^/  - /' "$tmp/missing"; }
        exit 1
fi
# Each function is bound to the node that lists it (symbol versioning).
if ! cmp -s "$tmp/lib-nodes" "$tmp/map-nodes"; then
        echo "check-abi: symbol versions of $lib differ from the nodes of $map:"
        diff "$tmp/map-nodes" "$tmp/lib-nodes" | sed -n 's/^[<>]/  &/p'
        exit 1
fi

# The version: the header's HBG_VERSION_MAJOR.MINOR names the newest node
# (HBG_MAJOR.MINOR) and every node has that major; the SONAME carries the
# major (an ABI break bumps both).
header=$root/libclient/include/hbg/hbg.h
major=$(sed -n 's/^#define HBG_VERSION_MAJOR \([0-9]*\)$/\1/p' "$header")
minor=$(sed -n 's/^#define HBG_VERSION_MINOR \([0-9]*\)$/\1/p' "$header")
if [ -z "$major" ] || [ -z "$minor" ]; then
        echo "check-abi: no HBG_VERSION_MAJOR/MINOR in $header" >&2
        exit 1
fi
if ! grep -q " HBG_$major\.$minor\$" "$tmp/map-nodes"; then
        echo "check-abi: $map has no node HBG_$major.$minor for the header's version $major.$minor"
        exit 1
fi
if cut -d' ' -f2 "$tmp/map-nodes" | grep -v "^HBG_$major\.[0-9]*\$" | sort -u | grep .; then
        echo "check-abi: the nodes above do not belong to major version $major"
        exit 1
fi
soname=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" != "libhbgclient.so.$major" ]; then
        echo "check-abi: SONAME of $lib is '$soname', not libhbgclient.so.$major"
        exit 1
fi

# Internal code carries no hbg_ prefix (docs/ARCHITECTURE.md, "Names"):
# no object of hbgd, hbgctl or the code they share defines a global
# hbg_ symbol (protobuf-c's generated hbg__ aside).
obj=$(dirname "$(dirname "$lib")")/obj
internal="internal objects not checked (no $obj/daemon: not a build tree)"
if [ -d "$obj/daemon" ]; then
        find "$obj/daemon" "$obj/common" "$obj/shm" "$obj/proto" "$obj/ctl" -name '*.o' 2>/dev/null >"$tmp/objs"
        if [ ! -s "$tmp/objs" ]; then
                echo "check-abi: no objects under $obj" >&2
                exit 1
        fi
        xargs nm -g --defined-only <"$tmp/objs" 2>/dev/null |
                awk 'NF >= 3 && $NF ~ /^hbg_/ && $NF !~ /^hbg__/ { print "  " $NF }' | sort -u >"$tmp/internal"
        if [ -s "$tmp/internal" ]; then
                echo "check-abi: internal objects define public-looking hbg_ symbols:"
                cat "$tmp/internal"
                exit 1
        fi
        internal="no hbg_ symbol in $(wc -l <"$tmp/objs") internal objects"
fi
echo "check-abi: $(wc -l <"$tmp/lib") exported functions match $map (versions HBG_$major.x, SONAME $soname);" \
        "$internal"
exit 0
