# SPDX-License-Identifier: MIT
"""Builds hbg's extension module against an installed libhbgclient.

    pip install --no-build-isolation ./python

libhbgclient is found in HBG_INCLUDE_DIR / HBG_LIB_DIR when they are set
(a staged install, say), else by pkg-config (hbgclient.pc, which `make
install` installs), else in the source tree this directory belongs to
once `make` has built it there (libclient/include, build/lib). A library
outside the loader's default directories is found at run time by an rpath
to its directory.
"""
import glob
import os
import subprocess

import numpy
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_LIBDIRS = {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"}


def pkg_config(*args):
    try:
        return subprocess.run(["pkg-config", *args, "hbgclient"], check=True, capture_output=True,
                              text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


def build_tree():
    """The source tree's headers and built library, when this is python/ of
    a tree where `make` ran: (include dirs, library dirs), or None."""
    top = os.path.dirname(HERE)
    inc, lib = os.path.join(top, "libclient", "include"), os.path.join(top, "build", "lib")
    if os.path.isfile(os.path.join(inc, "hbg", "hbg.h")) and os.path.isfile(os.path.join(lib, "libhbgclient.so")):
        return [inc], [lib]
    return None


def libhbgclient():
    """(include dirs, library dirs) of libhbgclient: HBG_INCLUDE_DIR and
    HBG_LIB_DIR, else pkg-config's (an installed hbg), else the source tree's
    own build (`make` run, nothing installed)."""
    inc, lib = os.environ.get("HBG_INCLUDE_DIR"), os.environ.get("HBG_LIB_DIR")
    if inc and lib:
        return [os.path.abspath(inc)], [os.path.abspath(lib)]
    cflags, libdir = pkg_config("--cflags-only-I"), pkg_config("--variable=libdir")
    if cflags is not None and libdir:
        return [f[2:] for f in cflags if f.startswith("-I")], libdir
    tree = build_tree()
    if tree:
        return tree
    raise SystemExit("hbg: libhbgclient not found: `make install` it (pkg-config finds its hbgclient.pc), "
                     "run `make` in the source tree this python/ belongs to, or set HBG_INCLUDE_DIR and HBG_LIB_DIR")


include_dirs, library_dirs = libhbgclient()
rpath = [d for d in library_dirs if os.path.normpath(d) not in SYSTEM_LIBDIRS]

setup(
    ext_modules=[Extension(
        "hbg._hbg",
        sources=sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "src", "*.c"))),
        depends=[os.path.relpath(os.path.join(HERE, "src", "hbgpy.h"), HERE)],
        include_dirs=include_dirs + [numpy.get_include()],
        library_dirs=library_dirs,
        runtime_library_dirs=rpath,
        libraries=["hbgclient"],
        extra_compile_args=["-std=gnu11", "-D_GNU_SOURCE", "-pthread"],
        extra_link_args=["-pthread"],
    )],
)
