#!/bin/sh
# The Python package's tests (python/tests, pytest) against the build $B:
# its extension module ($B/python), libhbgclient, hbgd and example module.
# Under sanitizers the runtime is preloaded into the interpreter (which is
# not built with it) and the tests shrink their loops (HBG_PY_TEST_SCALE).
set -eu
B=${B:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
case $B in
*san-address*)
        LD_PRELOAD=$($CC -print-file-name=libasan.so)
        # CPython keeps what it allocates until exit: leaks are not ours to count.
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
        # Python objects from malloc, not CPython's pools: a use after free
        # of one (a host call, a block) is seen.
        PYTHONMALLOC=malloc
        HBG_PY_TEST_SCALE=0.25
        export LD_PRELOAD ASAN_OPTIONS PYTHONMALLOC HBG_PY_TEST_SCALE ;;
*san-thread*)
        LD_PRELOAD=$($CC -print-file-name=libtsan.so)
        TSAN_OPTIONS="halt_on_error=1 suppressions=$(pwd)/tests/scripts/tsan-python.supp"
        HBG_PY_TEST_SCALE=0.125
        export LD_PRELOAD TSAN_OPTIONS HBG_PY_TEST_SCALE ;;
esac
PYTHONPATH="$B/python" HBG_BUILD="$B" PYTHONDONTWRITEBYTECODE=1 \
        exec "$PYTHON" -m pytest -q -p no:cacheprovider python/tests
