#!/bin/sh
# make install into a temporary DESTDIR (PREFIX=/usr): every expected file
# is there; examples/gemm_softmax.c builds with the installed hbgclient.pc
# and header, links the installed library and runs against the installed
# hbgd; the installed hbgctl finds its library; make uninstall leaves only
# empty directories, keeps a modified hbgd.conf and install never
# overwrites it. Exit 0 passed, 1 failed, 77 skipped (cc, pkg-config or
# make missing, or B is not the plain build that make install installs).
# Environment: B (build directory, default build). Runs under
# tests/run-tests.sh from `make test` (not for sanitizer builds).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case $B in
build|"$root/build"|./build) ;;
*) echo "test-install: SKIP: make install installs build/, not $B"; exit 77 ;;
esac
for tool in cc pkg-config make; do
        command -v "$tool" >/dev/null 2>&1 ||
                { echo "test-install: SKIP: $tool not found"; exit 77; }
done

# A make above us must not leak its settings into ours.
unset MAKEFLAGS MFLAGS MAKELEVEL DESTDIR PREFIX BINDIR LIBDIR INCLUDEDIR DOCDIR \
      MANDIR SYSCONFDIR UNITDIR SYSUSERSDIR SANITIZE

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hbg-install.XXXXXX") || exit 1
dest=$tmp/dest
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
die()  { echo "test-install: FAIL: $*"; exit 1; }
show() { [ -s "$1" ] && sed 's/^/    | /' "$1"; }

mk() {  # mk TARGET: make TARGET into $dest, output in $tmp/make.log
        if ! make --no-print-directory -C "$root" "$1" DESTDIR="$dest" PREFIX=/usr SANITIZE= \
                >"$tmp/make.log" 2>&1; then
                show "$tmp/make.log"
                die "make $1 DESTDIR=$dest PREFIX=/usr failed"
        fi
}

echo "test-install: make install DESTDIR=$dest PREFIX=/usr"
mk install

usr=$dest/usr
# The version comes from the public header, as the Makefile takes it.
ver=$(sed -n 's/^#define HBG_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
        "$root/libclient/include/hbg/hbg.h" | paste -sd.)
major=${ver%%.*}
so=libhbgclient.so.$ver
for f in usr/bin/hbgd usr/bin/hbgctl usr/lib/$so usr/include/hbg/hbg.h \
         usr/lib/pkgconfig/hbgclient.pc \
         usr/lib/systemd/system/hbgd.service usr/lib/systemd/system/hbgd.socket \
         usr/lib/sysusers.d/hbg.conf etc/hbg/hbgd.conf \
         usr/share/doc/hbg/hbgd.conf.example usr/share/doc/hbg/OPERATIONS.md \
         usr/share/doc/hbg/README.md usr/share/doc/hbg/LICENSE \
         usr/share/man/man1/hbgctl.1 usr/share/man/man3/libhbgclient.3 \
         usr/share/man/man5/hbgd.conf.5 usr/share/man/man8/hbgd.8; do
        if [ -f "$dest/$f" ] && [ ! -L "$dest/$f" ]; then ok "file $f"; else bad "file $f missing"; fi
done
for f in usr/bin/hbgd usr/bin/hbgctl; do
        [ -x "$dest/$f" ] && ok "executable $f" || bad "$f is not executable"
done
for l in libhbgclient.so.$major libhbgclient.so; do
        t=$(readlink "$usr/lib/$l" 2>/dev/null)
        if [ "$t" = "$so" ] && [ -f "$usr/lib/$l" ]; then ok "link usr/lib/$l -> $t"
        else bad "usr/lib/$l is not a link to $so (${t:-none})"; fi
done
grep -qx 'libdir=/usr/lib' "$usr/lib/pkgconfig/hbgclient.pc" &&
grep -qx 'includedir=/usr/include' "$usr/lib/pkgconfig/hbgclient.pc" &&
        ok "hbgclient.pc names /usr/lib and /usr/include" ||
        { bad "hbgclient.pc does not name PREFIX=/usr:"; show "$usr/lib/pkgconfig/hbgclient.pc"; }
grep -q '^ExecStart=/usr/bin/hbgd --config /etc/hbg/hbgd.conf' "$usr/lib/systemd/system/hbgd.service" &&
        ! grep -q '@[A-Z]*@' "$usr/lib/systemd/system/hbgd.service" &&
        ok "hbgd.service: ExecStart=/usr/bin/hbgd --config /etc/hbg/hbgd.conf" ||
        bad "hbgd.service: ExecStart or an unreplaced @VAR@"
cmp -s "$root/systemd/hbgd.conf.example" "$dest/etc/hbg/hbgd.conf" &&
        ok "etc/hbg/hbgd.conf is the example" || bad "etc/hbg/hbgd.conf differs from the example"
[ "$fails" -eq 0 ] || die "$fails missing or wrong installed files"

# Build the example the way a user would: the installed .pc (its /usr paths
# prefixed with the DESTDIR by the sysroot), header and library.
flags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$usr/lib/pkgconfig \
        PKG_CONFIG_PATH='' PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 \
        pkg-config --cflags --libs hbgclient) || die "pkg-config --cflags --libs hbgclient failed"
echo "test-install: pkg-config --cflags --libs hbgclient: $flags"
case " $flags " in
*" -I$usr/include "*) ok "cflags name the installed include directory" ;;
*) bad "cflags do not name $usr/include" ;;
esac
case " $flags " in
*" -L$usr/lib "*) ok "libs name the installed library directory" ;;
*) bad "libs do not name $usr/lib" ;;
esac
# shellcheck disable=SC2086 # $flags is a list of words
if cc -std=gnu11 -O2 -o "$tmp/example" "$root/examples/gemm_softmax.c" $flags -lm \
        >"$tmp/cc.log" 2>&1; then
        ok "examples/gemm_softmax.c builds against the installed files"
else
        show "$tmp/cc.log"
        die "examples/gemm_softmax.c does not build against the installed files"
fi

# The installed hbgd, on a private socket.
sock=$tmp/s.sock
"$usr/bin/hbgd" --socket "$sock" 2>"$tmp/hbgd.log" &
pid=$!
i=0
until [ -S "$sock" ] && grep -q 'ready:' "$tmp/hbgd.log"; do
        kill -0 "$pid" 2>/dev/null || { show "$tmp/hbgd.log"; pid=; die "installed hbgd exited before it was ready"; }
        i=$((i + 1))
        [ $i -le 500 ] || { show "$tmp/hbgd.log"; die "installed hbgd not ready after 5 s"; }
        sleep 0.01
done
ok "installed hbgd (pid $pid) ready on $sock"

if command -v ldd >/dev/null 2>&1; then
        if LD_LIBRARY_PATH=$usr/lib ldd "$tmp/example" | grep -q "$usr/lib/libhbgclient.so.$major"; then
                ok "the example loads $usr/lib/libhbgclient.so.$major"
        else
                bad "the example does not load the installed library:"
                LD_LIBRARY_PATH=$usr/lib ldd "$tmp/example" | sed 's/^/    | /'
        fi
fi
HBG_SOCKET=$sock LD_LIBRARY_PATH=$usr/lib "$tmp/example" >"$tmp/example.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -qx ok "$tmp/example.out"; then
        ok "the example exits 0 and prints ok"
else
        show "$tmp/example.out"
        bad "the example: exit $rc, expected 0 and \"ok\""
fi
# hbgctl finds the library through its rpath ($ORIGIN/../lib).
if env -u LD_LIBRARY_PATH "$usr/bin/hbgctl" --socket "$sock" status >"$tmp/hbgctl.out" 2>&1; then
        ok "installed hbgctl status (library found through its rpath)"
else
        show "$tmp/hbgctl.out"
        bad "installed hbgctl status failed"
fi
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
[ $rc -eq 0 ] && ok "installed hbgd stopped by SIGTERM, exit 0" ||
        { show "$tmp/hbgd.log"; bad "installed hbgd exit $rc after SIGTERM"; }
[ "$fails" -eq 0 ] || die "$fails checks failed"

leftovers() {  # leftovers: files (not directories) left below $dest
        find "$dest" ! -type d | sed "s|^$dest/||" | sort
}

echo "test-install: make uninstall DESTDIR=$dest PREFIX=/usr"
mk uninstall
left=$(leftovers)
if [ -z "$left" ]; then ok "nothing but empty directories left"
else bad "left after uninstall:"; echo "$left" | sed 's/^/    | /'; fi

echo "test-install: a modified hbgd.conf: install keeps it, uninstall keeps it"
mk install
echo '; changed by the administrator' >>"$dest/etc/hbg/hbgd.conf"
cp "$dest/etc/hbg/hbgd.conf" "$tmp/conf.modified"
mk install
cmp -s "$tmp/conf.modified" "$dest/etc/hbg/hbgd.conf" &&
        ok "make install does not overwrite a modified etc/hbg/hbgd.conf" ||
        bad "make install overwrote a modified etc/hbg/hbgd.conf"
mk uninstall
left=$(leftovers)
if [ "$left" = "etc/hbg/hbgd.conf" ] && cmp -s "$tmp/conf.modified" "$dest/etc/hbg/hbgd.conf"; then
        ok "uninstall kept only the modified etc/hbg/hbgd.conf"
else
        bad "after uninstall with a modified config, expected only etc/hbg/hbgd.conf, found:"
        echo "${left:-(nothing)}" | sed 's/^/    | /'
fi

if [ "$fails" -ne 0 ]; then
        echo "test-install: $fails checks failed"
        exit 1
fi
echo "test-install: install, use and uninstall work"
exit 0
