#!/bin/sh
# make install into a temporary DESTDIR (PREFIX=/usr): every expected file
# is there; every doc (README.md, LICENSE, docs/*.md, the example config)
# and every example (examples/*.c, *.json, Makefile, README.md) installed
# byte for byte as in the tree, and nothing else; the units' [Install]
# sections, enabled and disabled for real by `systemctl --root`; the
# installed examples/Makefile builds the examples with the installed
# hbgclient.pc, header and library, and they run against the installed
# hbgd (the MPI one under mpirun, when Open MPI is there); the installed
# hbgctl finds its library; make uninstall leaves only empty directories,
# keeps a modified hbgd.conf and install never overwrites it; a staged
# install runs no ldconfig; every installed man page carries the version
# of hbg.h in its footer and no @VAR@, and the FILES sections of hbgd(8),
# hbgd.conf(5) and hbgctl(1) name the prefix's paths.
# SYSCONFDIR follows PREFIX (/usr: /etc; /usr/local, /opt/hbg: PREFIX/etc).
# A real install into a temporary PREFIX with the default ldconfig (an
# ldconfig first in PATH records the calls and lets only the read-only
# ones through): nothing written outside the prefix, no cache refreshed,
# rpath and LD_LIBRARY_PATH advised instead of sudo ldconfig.
# Then, as root, a real install (DESTDIR empty) into a temporary PREFIX
# with LDCONFIG pointing at a private cache and configuration (the
# system's cache is never touched): ldconfig runs and the cache names the
# installed library; systemd-analyze verify passes on the installed units;
# uninstall runs ldconfig again and the cache forgets the library; with
# the PREFIX not in the configuration, install says how to add it; as
# another user (setpriv), install into a private prefix advises rpath or
# LD_LIBRARY_PATH, and into a directory the loader searches says to run
# ldconfig as root.
# Exit 0 passed, 1 failed, 77 skipped (cc, pkg-config or make missing, or
# B is not the plain build that make install installs).
# Environment: B (build directory, default build). Runs under
# tests/scripts/run-tests.sh from `make test` (not for sanitizer builds).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
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
      MANDIR SYSCONFDIR UNITDIR SYSUSERSDIR SANITIZE LDCONFIG

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

# ldconfig, whenever the Makefile runs it: the real one, with a private
# cache (-C) and configuration (-f) and no links (-X), so that
# /etc/ld.so.cache and the loader's configuration stay as they are
# (ldconfig rewrites only its auxiliary speed-up cache, as any run does).
conf=$tmp/ld.so.conf
cache=$tmp/ld.so.cache
ldc="ldconfig -X -C $cache -f $conf"

mk() {  # mk TARGET: make TARGET into $dest, output in $tmp/make.log
        if ! make --no-print-directory -C "$root" "$1" DESTDIR="$dest" PREFIX=/usr SANITIZE= LDCONFIG="$ldc" \
                >"$tmp/make.log" 2>&1; then
                show "$tmp/make.log"
                die "make $1 DESTDIR=$dest PREFIX=/usr failed"
        fi
}

echo "test-install: make install DESTDIR=$dest PREFIX=/usr"
mk install
# A staged install leaves the loader's cache to the package: every branch
# of the Makefile's ldconfig step prints a line naming ldconfig.
if grep -qi ldconfig "$tmp/make.log"; then
        bad "a staged install (DESTDIR set) ran the ldconfig step:"; show "$tmp/make.log"
else
        ok "a staged install (DESTDIR set) runs no ldconfig"
fi

usr=$dest/usr
# The version comes from the public header, as the Makefile takes it.
ver=$(sed -n 's/^#define HBG_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
        "$root/libclient/include/hbg/hbg.h" | paste -sd.)
major=${ver%%.*}
so=libhbgclient.so.$ver
for f in usr/bin/hbgd usr/bin/hbgctl usr/lib/$so usr/include/hbg/hbg.h usr/include/hbg/kernel.h \
         usr/lib/pkgconfig/hbgclient.pc usr/lib/hbg/kernels/hbg-nn.so usr/lib/python3/dist-packages/hbg/_hbg$(/usr/bin/python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null) usr/share/man/man3/hbg_kernel_module_init.3 \
         usr/lib/systemd/system/hbgd.service usr/lib/systemd/system/hbgd.socket \
         usr/lib/systemd/system/hbg-exporter.service usr/lib/sysusers.d/hbg.conf etc/hbg/hbgd.conf \
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
grep -q '^ExecStart=/usr/bin/hbgctl metrics --listen 127.0.0.1:9464$' "$usr/lib/systemd/system/hbg-exporter.service" &&
        grep -qx 'User=hbg-exporter' "$usr/lib/systemd/system/hbg-exporter.service" &&
        ! grep -q '@[A-Z]*@' "$usr/lib/systemd/system/hbg-exporter.service" &&
        ok "hbg-exporter.service: ExecStart=/usr/bin/hbgctl metrics --listen 127.0.0.1:9464 as hbg-exporter" ||
        bad "hbg-exporter.service: ExecStart, User or an unreplaced @VAR@"
cmp -s "$root/systemd/hbgd.conf.example" "$dest/etc/hbg/hbgd.conf" &&
        ok "etc/hbg/hbgd.conf is the example" || bad "etc/hbg/hbgd.conf differs from the example"
# The man pages as installed: every footer carries the version of hbg.h,
# no @VAR@ is left, and the FILES sections name the paths of this prefix.
mancheck() {  # mancheck MANDIR SYSCONFDIR DOCDIR UNITDIR
        for f in "$1"/man[1358]/*; do
                grep -q '^\.so ' "$f" && continue
                head -1 "$f" | grep -q "\"hbg $ver\"" || bad "${f#$dest/}: footer is not \"hbg $ver\": $(head -1 "$f")"
                ! grep -q '@[A-Z]*@' "$f" || bad "${f#$dest/}: an unreplaced @VAR@: $(grep -m1 '@[A-Z]*@' "$f")"
        done
        sect() {  # sect PAGE: its FILES section
                sed -n '/^\.SH FILES/,/^\.SH /p' "$1"
        }
        sect "$1/man8/hbgd.8" | grep -qxF ".I $2/hbg/hbgd.conf" &&
        sect "$1/man8/hbgd.8" | grep -qxF ".I $3/" &&
        sect "$1/man8/hbgd.8" | grep -qF ".IR $4/hbgd.service" &&
        sect "$1/man5/hbgd.conf.5" | grep -qxF ".I $2/hbg/hbgd.conf" &&
        sect "$1/man5/hbgd.conf.5" | grep -qxF ".I $3/hbgd.conf.example" &&
        sect "$1/man1/hbgctl.1" | grep -qxF ".I $3/GRAPH_FILES.md" &&
                ok "FILES of hbgd(8), hbgd.conf(5), hbgctl(1) name $2/hbg/hbgd.conf, $3, $4" ||
                bad "FILES of hbgd(8), hbgd.conf(5) or hbgctl(1) do not name $2/hbg/hbgd.conf, $3, $4"
}
mancheck "$usr/share/man" /etc /usr/share/doc/hbg /usr/lib/systemd/system
n=$(grep -l "\"hbg $ver\"" "$usr"/share/man/man[1358]/* | wc -l)
[ "$n" -gt 20 ] && ok "$n installed man pages carry \"hbg $ver\"" || bad "only $n man pages carry \"hbg $ver\""
[ "$fails" -eq 0 ] || die "$fails checks of the installed files failed"

doc=$usr/share/doc/hbg
# Every doc and example of the tree, installed as it is in the tree (this
# list is the tree's, not the Makefile's), and nothing else.
same() {  # same TREE-FILE INSTALLED-FILE
        if [ ! -f "$2" ]; then bad "${2#$dest/} missing (from ${1#$root/})"
        elif cmp -s "$1" "$2"; then ok "${2#$dest/} = ${1#$root/}"
        else bad "${2#$dest/} differs from ${1#$root/}"; fi
}
for f in "$root/README.md" "$root/LICENSE" "$root"/docs/*.md "$root/systemd/hbgd.conf.example"; do
        same "$f" "$doc/${f##*/}"
done
for f in "$root"/examples/*.c "$root"/examples/*.json "$root/examples/Makefile" "$root/examples/README.md"; do
        same "$f" "$doc/examples/${f##*/}"
done
for f in "$root"/examples/python/*.py; do
        same "$f" "$doc/examples/python/${f##*/}"
done
for f in "$root"/python/hbg/*.py "$root"/python/hbg/*.pyi "$root/python/hbg/py.typed"; do
        same "$f" "$usr/lib/python3/dist-packages/hbg/${f##*/}"
done
for f in "$doc"/* "$doc"/examples/* "$doc"/examples/python/*; do
        n=${f#$doc/}
        case $n in
        examples|examples/python) continue ;;
        examples/*) [ -f "$root/$n" ] ;;
        *) [ -f "$root/docs/$n" ] || [ -f "$root/$n" ] || [ -f "$root/systemd/$n" ] ;;
        esac || bad "${f#$dest/} is not a file of the tree"
done
[ -f "$doc/SECURITY.md" ] && [ -f "$doc/RUNTIME_LOGIC.md" ] && [ -f "$doc/examples/mpi_producer.c" ] ||
        bad "SECURITY.md, RUNTIME_LOGIC.md or examples/mpi_producer.c not installed"

# The units' [Install] sections: hbgd.service wanted by multi-user.target
# (and enabling it enables the socket), hbgd.socket by sockets.target.
install_keys() {  # install_keys UNIT: the keys of its [Install] section, one a line
        sed -n '/^\[Install\]/,/^\[/{/^[A-Za-z]/p}' "$1"
}
units=$usr/lib/systemd/system
install_keys "$units/hbgd.service" | grep -qx 'WantedBy=multi-user.target' &&
install_keys "$units/hbgd.service" | grep -qx 'Also=hbgd.socket' &&
        ok "hbgd.service: [Install] WantedBy=multi-user.target, Also=hbgd.socket" ||
        bad "hbgd.service: [Install] lacks WantedBy=multi-user.target or Also=hbgd.socket"
install_keys "$units/hbgd.socket" | grep -qx 'WantedBy=sockets.target' &&
        ok "hbgd.socket: [Install] WantedBy=sockets.target" ||
        bad "hbgd.socket: [Install] lacks WantedBy=sockets.target"
# ... as systemctl reads them: enabled and disabled below DESTDIR.
wants=$dest/etc/systemd/system
if command -v systemctl >/dev/null 2>&1; then
        if systemctl --root="$dest" enable hbgd.service >"$tmp/systemctl.log" 2>&1 &&
                [ -L "$wants/multi-user.target.wants/hbgd.service" ] &&
                [ -L "$wants/sockets.target.wants/hbgd.socket" ]; then
                ok "systemctl --root enable hbgd.service: multi-user.target and sockets.target want them"
        else
                show "$tmp/systemctl.log"
                bad "systemctl --root enable hbgd.service did not link both units"
        fi
        systemctl --root="$dest" disable hbgd.service >"$tmp/systemctl.log" 2>&1
        if [ -z "$(find "$wants" ! -type d 2>/dev/null)" ]; then
                ok "systemctl --root disable hbgd.service removes both links"
                rm -rf "$dest/etc/systemd"
        else
                show "$tmp/systemctl.log"
                bad "systemctl --root disable hbgd.service left links"
        fi
else
        echo "  skip systemctl not found (package systemd): [Install] not enabled for real"
fi
[ "$fails" -eq 0 ] || die "$fails checks of the installed docs, examples or units failed"

# Build the examples the way a user would: a copy of the installed
# examples directory, its Makefile, the installed .pc (its /usr paths
# prefixed with the DESTDIR by the sysroot), header and library.
with_pc() {  # with_pc COMMAND...: pkg-config finds only the installed hbgclient.pc
        env PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_LIBDIR="$usr/lib/pkgconfig" PKG_CONFIG_PATH='' \
            PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 "$@"
}
flags=$(with_pc pkg-config --cflags --libs hbgclient) || die "pkg-config --cflags --libs hbgclient failed"
echo "test-install: pkg-config --cflags --libs hbgclient: $flags"
case " $flags " in
*" -I$usr/include "*) ok "cflags name the installed include directory" ;;
*) bad "cflags do not name $usr/include" ;;
esac
case " $flags " in
*" -L$usr/lib "*) ok "libs name the installed library directory" ;;
*) bad "libs do not name $usr/lib" ;;
esac
cp -r "$doc/examples" "$tmp/ex"
if with_pc make --no-print-directory -C "$tmp/ex" >"$tmp/cc.log" 2>&1 && [ -x "$tmp/ex/gemm_softmax" ] &&
        [ -x "$tmp/ex/host_parallel" ] && [ -f "$tmp/ex/hbg-nn.so" ]; then
        ok "the installed examples/Makefile builds gemm_softmax, host_parallel and hbg-nn.so against the installed files"
else
        show "$tmp/cc.log"
        die "the installed examples/Makefile does not build gemm_softmax, host_parallel and hbg-nn.so"
fi
mpi=
if command -v mpicc >/dev/null 2>&1; then
        if with_pc make --no-print-directory -C "$tmp/ex" mpi >"$tmp/cc.log" 2>&1 && [ -x "$tmp/ex/mpi_producer" ]; then
                ok "the installed examples/Makefile builds mpi_producer with mpicc"
                mpi=$tmp/ex/mpi_producer
        else
                show "$tmp/cc.log"
                bad "the installed examples/Makefile does not build mpi_producer"
        fi
else
        echo "  skip mpicc not found (package libopenmpi-dev): mpi_producer not built"
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

example=$tmp/ex/gemm_softmax
if command -v ldd >/dev/null 2>&1; then
        if LD_LIBRARY_PATH=$usr/lib ldd "$example" | grep -q "$usr/lib/libhbgclient.so.$major"; then
                ok "the example loads $usr/lib/libhbgclient.so.$major"
        else
                bad "the example does not load the installed library:"
                LD_LIBRARY_PATH=$usr/lib ldd "$example" | sed 's/^/    | /'
        fi
fi
HBG_SOCKET=$sock LD_LIBRARY_PATH=$usr/lib "$example" >"$tmp/example.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -qx ok "$tmp/example.out"; then
        ok "the example exits 0 and prints ok"
else
        show "$tmp/example.out"
        bad "the example: exit $rc, expected 0 and \"ok\""
fi
if [ -n "$mpi" ] && command -v mpirun >/dev/null 2>&1; then
        # tests/scripts/test-mpi.sh says why these (a container without ssh).
        asroot=
        [ "$(id -u)" = 0 ] && asroot=--allow-run-as-root
        HBG_SOCKET=$sock LD_LIBRARY_PATH=$usr/lib OMPI_MCA_plm_rsh_agent='' OMPI_MCA_btl=self,vader \
                OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
                OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_orte_tmpdir_base="$tmp" \
                timeout --kill-after=5 60 mpirun $asroot --oversubscribe -np 2 "$mpi" --n 10000 \
                >"$tmp/mpi.out" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -q '^mpi_producer: 2 ranks, 10000 elements, .* ok$' "$tmp/mpi.out"; then
                ok "mpi_producer under mpirun -np 2 exits 0 with its sum checked"
        else
                show "$tmp/mpi.out"
                bad "mpi_producer under mpirun -np 2: exit $rc"
        fi
fi
# The installed Python package (PYTHONDIR: the prefix's dist-packages),
# its module linked at install time, and the installed numpy example run
# with it against the installed hbgd.
pyd=$usr/lib/python3/dist-packages
py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
        if PYTHONPATH=$pyd LD_LIBRARY_PATH=$usr/lib PYTHONDONTWRITEBYTECODE=1 "$py" -c \
                'import hbg, sys; sys.exit(0 if hbg.__file__.startswith(sys.argv[1]) else 1)' "$pyd" \
                >"$tmp/py.out" 2>&1; then
                ok "import hbg finds the installed package in $pyd"
        else
                show "$tmp/py.out"; bad "import hbg of the installed package failed"
        fi
        HBG_SOCKET=$sock PYTHONPATH=$pyd LD_LIBRARY_PATH=$usr/lib PYTHONDONTWRITEBYTECODE=1 \
                timeout 120 "$py" "$doc/examples/python/numpy_pipeline.py" --steps 5 >"$tmp/pyex.out" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -q 'all results match numpy' "$tmp/pyex.out"; then
                ok "the installed examples/python/numpy_pipeline.py runs with the installed package"
        else
                show "$tmp/pyex.out"; bad "the installed numpy_pipeline.py: exit $rc"
        fi
        # pip into a virtualenv, offline, from a copy of the package's
        # source, against the staged headers and library.
        if "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
                mkdir -p "$tmp/pysrc"
                (cd "$root/python" && tar --exclude=__pycache__ --exclude=build --exclude='*.egg-info' -cf - .) |
                        (cd "$tmp/pysrc" && tar -xf -)
                if HBG_INCLUDE_DIR=$usr/include HBG_LIB_DIR=$usr/lib PIP_NO_CACHE_DIR=1 \
                        "$tmp/venv/bin/pip" install --no-build-isolation --no-index "$tmp/pysrc" \
                        >"$tmp/pip.log" 2>&1 &&
                        HBG_SOCKET=$sock PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" -c '
import sys, numpy as np, hbg
assert hbg.__file__.startswith(sys.argv[1]), hbg.__file__
with hbg.connect() as c:
    x = c.asarray(np.arange(8, dtype=np.float32))
    g = c.graph(); g.add("add_f32", x, x, x); g.run()
    assert list(x) == [2 * i for i in range(8)], x
' "$tmp/venv/lib" >"$tmp/pyvenv.out" 2>&1; then
                        ok "pip install --no-build-isolation --no-index into a virtualenv: runs a graph"
                else
                        show "$tmp/pip.log"; show "$tmp/pyvenv.out"
                        bad "pip install --no-build-isolation of python/ into a virtualenv"
                fi
                # The command as the README gives it, from a source tree
                # where `make` ran and nothing is installed: no HBG_*_DIR,
                # and a pkg-config that finds no hbgclient.pc. setup.py then
                # takes libclient/include and build/lib (an rpath to it).
                # The tree is a copy of the parts it reads (pip builds in
                # the tree: nothing of it stays in the checkout, and no
                # earlier build of it is taken for this one).
                mkdir -p "$tmp/no-pc" "$tmp/tree/libclient" "$tmp/tree/build/lib"
                (cd "$root" && tar --exclude=__pycache__ --exclude=build --exclude='*.egg-info' -cf - python) |
                        (cd "$tmp/tree" && tar -xf -)
                cp -a "$root/libclient/include" "$tmp/tree/libclient/"
                cp -a "$root/build/lib/"libhbgclient.so* "$tmp/tree/build/lib/"
                if (cd "$tmp/tree" && env -u HBG_INCLUDE_DIR -u HBG_LIB_DIR -u LD_LIBRARY_PATH \
                        PKG_CONFIG_LIBDIR="$tmp/no-pc" PKG_CONFIG_PATH= PIP_NO_CACHE_DIR=1 \
                        "$tmp/venv/bin/pip" install --no-build-isolation --no-index --force-reinstall --no-deps ./python) \
                        >"$tmp/pip-tree.log" 2>&1 &&
                        env -u LD_LIBRARY_PATH HBG_SOCKET=$sock PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" -c '
import sys, numpy as np, hbg
assert hbg.__file__.startswith(sys.argv[1]), hbg.__file__
with hbg.connect() as c:
    x = c.zeros(4); g = c.graph(); g.add("scale_f32", x, scalars=(2.0,)); g.run()
' "$tmp/venv/lib" >"$tmp/pytree.out" 2>&1; then
                        ok "pip install --no-build-isolation ./python from the built source tree, nothing installed"
                else
                        show "$tmp/pip-tree.log"; show "$tmp/pytree.out"
                        bad "pip install --no-build-isolation ./python from the source tree"
                fi
        else
                show "$tmp/venv.log"; bad "python3 -m venv failed (package python3-venv)"
        fi
else
        echo "  skip /usr/bin/python3 with numpy not found: the Python package not tried"
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

# ---- A real install (DESTDIR empty): the dynamic loader's cache.
# The Makefile runs $(LDCONFIG) after installing (and after uninstalling)
# the library: here $ldc (above).
echo "test-install: a real install (DESTDIR empty) into a temporary PREFIX: ldconfig"
prefix=$tmp/prefix
realmk() {  # realmk TARGET [VAR=VALUE...]: make TARGET into $prefix, DESTDIR empty; log in $tmp/real.log
        t=$1
        shift
        make --no-print-directory -C "$root" "$t" DESTDIR= PREFIX="$prefix" \
                LDCONFIG="$ldc" SANITIZE= "$@" >"$tmp/real.log" 2>&1
}
in_cache() {  # in_cache: the private cache names $prefix/lib's library
        $ldc -p 2>/dev/null | grep -q "libhbgclient\.so\.$major .*=> $prefix/lib/libhbgclient\.so\.$major\$"
}
# The decision, as make would run it: the ldconfig step with DESTDIR
# empty, none with DESTDIR set.
make --no-print-directory -n -C "$root" install DESTDIR= PREFIX="$prefix" \
        LDCONFIG="$ldc" SANITIZE= >"$tmp/dry.log" 2>&1 || { show "$tmp/dry.log"; die "make -n install failed"; }
grep -qF "$ldc" "$tmp/dry.log" && ok "make -n install (DESTDIR empty) runs $ldc" ||
        bad "make -n install (DESTDIR empty) has no ldconfig step"
make --no-print-directory -n -C "$root" install DESTDIR="$dest" PREFIX=/usr LDCONFIG="$ldc" SANITIZE= \
        >"$tmp/dry-staged.log" 2>&1 || { show "$tmp/dry-staged.log"; die "make -n install DESTDIR=$dest failed"; }
grep -q ldconfig "$tmp/dry-staged.log" && bad "make -n install DESTDIR=$dest has an ldconfig step" ||
        ok "make -n install DESTDIR=$dest has no ldconfig step"
# Before installing anything for real: every path the install writes is
# below $tmp (the commands' absolute words), SYSCONFDIR following PREFIX.
outside=$(grep -E '^(install|ln|sed|chmod|\[ -e) ' "$tmp/dry.log" | tr ' ' '\n' | grep '^/' | grep -v "^$tmp/" | sort -u)
[ -z "$outside" ] || die "a real install with PREFIX=$prefix would write outside $tmp: $outside"
ok "make -n install PREFIX=$prefix writes nothing outside it (SYSCONFDIR=$prefix/etc)"
# SYSCONFDIR follows PREFIX (/etc only for the distribution's /usr), as
# make install would use it (a dry run, staged).
for p in /usr:/etc /usr/local:/usr/local/etc /opt/hbg:/opt/hbg/etc; do
        make --no-print-directory -n -C "$root" install DESTDIR="$dest" PREFIX="${p%%:*}" SANITIZE= \
                >"$tmp/dry-p.log" 2>&1
        if grep -qF "systemd/hbgd.conf.example $dest${p#*:}/hbg/hbgd.conf" "$tmp/dry-p.log"; then
                ok "PREFIX=${p%%:*}: the config goes to ${p#*:}/hbg/hbgd.conf"
        else
                grep -F hbgd.conf.example "$tmp/dry-p.log" | sed 's/^/    | /'
                bad "PREFIX=${p%%:*}: the config does not go to ${p#*:}/hbg/hbgd.conf"
        fi
done
# The Python package goes where Debian's python3 looks for that prefix's
# packages: /usr/lib/python3/dist-packages for /usr, and for /usr/local
# the directory of site.getsitepackages() under it (python3.X).
if [ -x /usr/bin/python3 ]; then
        for p in /usr /usr/local; do
                want=$(/usr/bin/python3 -c 'import site, sys
print(next((d for d in site.getsitepackages() if d.startswith(sys.argv[1] + "/lib/")), ""))' "$p")
                make --no-print-directory -n -C "$root" install DESTDIR="$dest" PREFIX="$p" SANITIZE= \
                        >"$tmp/dry-p.log" 2>&1
                if [ -n "$want" ] && grep -qE "^install -m 0644 .* $dest$want/hbg/\$" "$tmp/dry-p.log"; then
                        ok "PREFIX=$p: the Python package goes to $want, which python3 searches"
                else
                        grep -F "/hbg/" "$tmp/dry-p.log" | grep -F python | sed 's/^/    | /'
                        bad "PREFIX=$p: the Python package does not go to ${want:-a directory python3 searches}"
                fi
        done
fi

# A private PREFIX with the default LDCONFIG (ldconfig): the system's
# cache is not refreshed, and install says how programs find the library
# (rpath, LD_LIBRARY_PATH), not to run ldconfig. An ldconfig first in PATH
# records every call; listing the search path (-N, nothing written) and
# reading the cache (-p) go to the real one, a refresh would only be
# recorded (so that a failing run cannot touch the system).
realldconfig=$(command -v ldconfig)
if [ -n "$realldconfig" ]; then
        mkdir -p "$tmp/bin"
        cat >"$tmp/bin/ldconfig" <<EOS
#!/bin/sh
echo "ldconfig \$*" >>"$tmp/ldconfig.calls"
case " \$* " in *" -N "*|*" -p "*) exec "$realldconfig" "\$@" ;; esac
exit 0
EOS
        chmod 0755 "$tmp/bin/ldconfig"
        : >"$tmp/ldconfig.calls"
        if ! PATH=$tmp/bin:$PATH realmk install LDCONFIG=ldconfig; then
                show "$tmp/real.log"; die "make install PREFIX=$prefix failed"
        fi
        refreshes=$(grep -v -e ' -N' -e ' -p' "$tmp/ldconfig.calls")
        [ -z "$refreshes" ] && ok "install PREFIX=$prefix: ldconfig listed its search path, refreshed no cache" ||
                { bad "install PREFIX=$prefix ran ldconfig on the system's cache:"; echo "$refreshes" | sed 's/^/    | /'; }
        if grep -qF -- "-Wl,-rpath,$prefix/lib" "$tmp/real.log" &&
                grep -qF "LD_LIBRARY_PATH=$prefix/lib" "$tmp/real.log" && ! grep -q sudo "$tmp/real.log"; then
                ok "install PREFIX=$prefix names rpath and LD_LIBRARY_PATH, not sudo ldconfig"
        else
                show "$tmp/real.log"; bad "install PREFIX=$prefix: no rpath/LD_LIBRARY_PATH advice, or sudo"
        fi
        [ -f "$prefix/etc/hbg/hbgd.conf" ] && ok "the config is $prefix/etc/hbg/hbgd.conf" ||
                bad "no $prefix/etc/hbg/hbgd.conf"
        grep -q "^ExecStart=$prefix/bin/hbgd --config $prefix/etc/hbg/hbgd.conf" \
                "$prefix/lib/systemd/system/hbgd.service" && ok "hbgd.service reads $prefix/etc/hbg/hbgd.conf" ||
                bad "hbgd.service does not read $prefix/etc/hbg/hbgd.conf"
        mancheck "$prefix/share/man" "$prefix/etc" "$prefix/share/doc/hbg" "$prefix/lib/systemd/system"
        : >"$tmp/ldconfig.calls"
        PATH=$tmp/bin:$PATH realmk uninstall LDCONFIG=ldconfig ||
                { show "$tmp/real.log"; die "make uninstall PREFIX=$prefix failed"; }
        refreshes=$(grep -v -e ' -N' -e ' -p' "$tmp/ldconfig.calls")
        [ -z "$refreshes" ] &&
                ok "uninstall PREFIX=$prefix: no cache refreshed" ||
                bad "uninstall PREFIX=$prefix ran ldconfig on the system's cache"
        left=$(find "$prefix" ! -type d)
        [ -z "$left" ] || { bad "left after uninstall:"; echo "$left" | sed 's/^/    | /'; }
else
        echo "  skip ldconfig not found (not glibc?): private prefix not installed for real"
fi

if [ "$(id -u)" != 0 ]; then
        echo "  skip not root: the ldconfig step itself runs only as root"
elif ! command -v ldconfig >/dev/null 2>&1; then
        echo "  skip ldconfig not found (not glibc?)"
else
        echo "$prefix/lib" >"$conf"
        realmk install || { show "$tmp/real.log"; die "make install PREFIX=$prefix (DESTDIR empty) failed"; }
        grep -qxF "$ldc" "$tmp/real.log" && ok "install ran $ldc" ||
                { show "$tmp/real.log"; bad "install did not run $ldc"; }
        in_cache && ok "the loader's cache names $prefix/lib/libhbgclient.so.$major" ||
                { $ldc -p | grep hbg | sed 's/^/    | /'; bad "the cache does not name the installed library"; }
        grep -q "search path" "$tmp/real.log" &&
                { show "$tmp/real.log"; bad "install says $prefix/lib is not in the loader's path, but it is"; }
        # The units as installed here name real paths: systemd-analyze verify.
        if command -v systemd-analyze >/dev/null 2>&1; then
                if systemd-analyze verify "$prefix/lib/systemd/system/hbgd.socket" \
                        "$prefix/lib/systemd/system/hbgd.service" \
                        "$prefix/lib/systemd/system/hbg-exporter.service" >"$tmp/verify.log" 2>&1 &&
                        [ ! -s "$tmp/verify.log" ]; then
                        ok "systemd-analyze verify: the installed units, no warnings"
                else
                        show "$tmp/verify.log"
                        bad "systemd-analyze verify of the installed units failed or warned"
                fi
        else
                echo "  skip systemd-analyze not found (package systemd)"
        fi
        realmk uninstall || { show "$tmp/real.log"; die "make uninstall PREFIX=$prefix failed"; }
        grep -qxF "$ldc" "$tmp/real.log" && ok "uninstall ran $ldc" || bad "uninstall did not run $ldc"
        in_cache && bad "the cache still names the uninstalled library" ||
                ok "the cache no longer names the library"
        left=$(find "$prefix" ! -type d)
        [ -z "$left" ] && ok "nothing but empty directories left in $prefix" ||
                { bad "left after uninstall:"; echo "$left" | sed 's/^/    | /'; }

        # A PREFIX the loader does not search: install says what to do.
        : >"$conf"
        realmk install || { show "$tmp/real.log"; die "make install PREFIX=$prefix (not in ld.so.conf) failed"; }
        if grep -qF "$prefix/lib is not in the dynamic loader's search path" "$tmp/real.log" &&
                grep -qF "/etc/ld.so.conf.d/hbg.conf" "$tmp/real.log" &&
                grep -qF -- "-Wl,-rpath,$prefix/lib" "$tmp/real.log"; then
                ok "install names ld.so.conf.d and rpath for a PREFIX outside the loader's path"
        else
                show "$tmp/real.log"
                bad "install did not say how to reach a library outside the loader's path"
        fi
        realmk uninstall || { show "$tmp/real.log"; die "make uninstall PREFIX=$prefix failed"; }

        # Not root: no ldconfig, but the line to run.
        if command -v setpriv >/dev/null 2>&1; then
                user=$tmp/user
                mkdir "$user" && chown 65534:65534 "$user" && chmod 0755 "$tmp"
                asuser() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
                if asuser test -r "$root/Makefile" -a -x "$root/build/lib"; then
                        rm -f "$cache"
                        asmk() {  # asmk: install as uid 65534 into $user, log in $tmp/user.log
                                asuser make --no-print-directory -C "$root" install DESTDIR= PREFIX="$user" \
                                        LDCONFIG="$ldc" SANITIZE= >"$tmp/user.log" 2>&1
                        }
                        # A private prefix: sudo ldconfig would not help.
                        asmk
                        rc=$?
                        if [ $rc -eq 0 ] && grep -qF "LD_LIBRARY_PATH=$user/lib" "$tmp/user.log" &&
                                grep -qF -- "-Wl,-rpath,$user/lib" "$tmp/user.log" &&
                                ! grep -q sudo "$tmp/user.log" && [ ! -e "$cache" ]; then
                                ok "install as uid 65534 into a private prefix: rpath, LD_LIBRARY_PATH, no sudo ldconfig"
                        else
                                show "$tmp/user.log"
                                bad "install as uid 65534 into a private prefix: exit $rc, expected 0 and rpath/LD_LIBRARY_PATH advice"
                        fi
                        # A directory the loader searches: root's ldconfig would.
                        echo "$user/lib" >"$conf"
                        asmk
                        rc=$?
                        if [ $rc -eq 0 ] && grep -qF "ldconfig: not root; run 'sudo $ldc'" "$tmp/user.log" &&
                                [ ! -e "$cache" ]; then
                                ok "install as uid 65534 into a searched directory: no ldconfig run, says to run it as root"
                        else
                                show "$tmp/user.log"
                                bad "install as uid 65534: exit $rc, expected 0 and the ldconfig line"
                        fi
                else
                        echo "  skip uid 65534 cannot read $root: install as another user not tried"
                fi
        else
                echo "  skip setpriv not found: install as another user not tried"
        fi
fi

if [ "$fails" -ne 0 ]; then
        echo "test-install: $fails checks failed"
        exit 1
fi
echo "test-install: install, use and uninstall work"
exit 0
