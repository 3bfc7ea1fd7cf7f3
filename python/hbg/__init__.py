# SPDX-License-Identifier: MIT
"""hbg: task graphs run by hbgd, built from Python on numpy arrays in shared memory.

    import numpy, hbg
    with hbg.connect() as client:                 # $HBG_SOCKET or /run/hbgd/hbgd.sock
        a = client.asarray(numpy.arange(1024, dtype=numpy.float32))
        b = client.zeros(1024)                    # float32 by default
        g = client.graph()
        g.add("add_f32", a, a, b)                 # b = a + a, run by hbgd
        g.run()
        print(b[:4])

Arrays made by client.empty(), zeros() and asarray() live in the session heap that
hbgd's kernels read and write: no copy either way. Dependencies between tasks are
derived from the arrays they use. See docs/PYTHON.md.
"""
from ._hbg import (  # noqa: F401
    Client,
    Graph,
    GraphError,
    Handle,
    Kernel,
    Recording,
    MAX_HOST_THREADS,
    MAX_TASK_DEPS,
    MAX_TASK_SCALARS,
    MAX_TASK_TENSORS,
    version as _library_version,
)

__all__ = [
    "connect",
    "Client",
    "Graph",
    "GraphError",
    "Handle",
    "Kernel",
    "Recording",
    "library_version",
]

__version__ = "1.6.1"


def library_version():
    """The version of the libhbgclient this package runs with ("MAJOR.MINOR.PATCH")."""
    return _library_version()


def connect(socket=None, *, heap=None, window=None, stall_timeout=None, host_threads=0, name=None):
    """Connect to hbgd and open a session: an hbg.Client, also a context manager.

    socket: hbgd's socket path (None: $HBG_SOCKET, else /run/hbgd/hbgd.sock).
    heap: the session heap in bytes; window: tasks in flight (a power of two);
    stall_timeout: seconds hbgd waits for a host task before failing it;
    host_threads: library threads that run host functions in parallel (0: they run
    inside the waits, on the waiting thread); name: the session's name in hbgctl.
    None means hbgd's default; hbgd refuses sizes above its limits.

    Raises PermissionError (this user is not let in) or ConnectionRefusedError
    (nobody listens, or hbgd refused the session: a limit, a size, shutting down;
    .errno is hbgd's) with hbgd's reason, FileNotFoundError when no socket is
    there; TypeError/ValueError for bad arguments, before anything is sent.
    """
    return Client(socket, heap=heap, window=window, stall_timeout=stall_timeout,
                  host_threads=host_threads, name=name)
