# SPDX-License-Identifier: MIT
"""Fixtures: a real hbgd on a private socket (killed at the end, whatever
happened), and clients of it. The package under test is the one on
PYTHONPATH (make test puts the build tree's there); hbgd and the example
kernel module come from $HBG_BUILD (default: the tree's build/)."""
import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import hbg

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("HBG_BUILD", os.path.join(HERE, "..", "..", "build")))
HBGD = os.path.join(BUILD, "bin", "hbgd")
NN_MODULE = os.path.join(BUILD, "lib", "hbg", "kernels", "hbg-nn.so")

# Sanitizer builds are slower: the tests size their loops by this fraction.
SCALE = float(os.environ.get("HBG_PY_TEST_SCALE", "1"))

_running = set()


@atexit.register
def _kill_leftovers():
    for proc in list(_running):
        proc.kill()


class Hbgd:
    """One hbgd on a socket in a temporary directory, with the example
    kernel module (hbg-nn: relu_f32, rownorm_f32) loaded."""

    def __init__(self, threads=2, conf=""):
        self.dir = tempfile.mkdtemp(prefix="hbg-py-")
        os.chmod(self.dir, 0o755)  # hbgd checks the module's directory
        self.socket = os.path.join(self.dir, "hbgd.sock")
        self.log_path = os.path.join(self.dir, "hbgd.log")
        conf_path = os.path.join(self.dir, "hbgd.conf")
        module = os.path.join(self.dir, "hbg-nn.so")
        shutil.copyfile(NN_MODULE, module)
        os.chmod(module, 0o644)
        with open(conf_path, "w") as f:
            f.write("[scheduler]\nthreads = %d\n\n[kernels]\nmodules = %s\n%s" % (threads, module, conf))
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([HBGD, "--socket", self.socket, "--config", conf_path],
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        _running.add(self.proc)
        deadline = time.monotonic() + 20
        while "ready:" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log()
                self.stop()
                raise RuntimeError("hbgd did not become ready:\n" + log)
            time.sleep(0.01)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _running.discard(self.proc)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_child(code, *args, timeout=90):
    """Run Python code in a child interpreter (a crash or a hang there
    fails the test instead of killing or stalling pytest); its stdout."""
    import sys
    import textwrap
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ))
    assert r.returncode == 0, "exit %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr)
    return r.stdout


@pytest.fixture(scope="module")
def hbgd():
    d = Hbgd()
    try:
        yield d
    finally:
        # No test stops this hbgd: if it exited, say so with its log (a
        # sanitizer's report is there), which stop() removes.
        status, log = d.proc.poll(), d.log()
        d.stop()
        if status is not None:
            pytest.fail("hbgd exited by itself (status %d) while the module's tests ran; its log:\n%s"
                        % (status, log[-8000:]), pytrace=False)


@pytest.fixture
def client(hbgd):
    c = hbg.connect(hbgd.socket)
    try:
        yield c
    finally:
        c.close()
