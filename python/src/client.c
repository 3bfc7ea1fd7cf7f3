/* SPDX-License-Identifier: MIT */
/*
 * hbg.Client: one session with hbgd. Connect, close, the lock around the
 * library's calls (hbgpy.h), and the session's end once it is closed and
 * no array of its heap is left.
 */
#include "hbgpy.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

unsigned hbgpy_forks;

static void count_fork(void) {
        hbgpy_forks++;
}

int hbgpy_fork_watch(void) {
        return -pthread_atfork(NULL, NULL, count_fork);
}

int hbgpy_client_check(ClientObject *cl, const char *what) {
        if (hbgpy_client_foreign(cl)) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s: this hbg.Client was connected by process %ld; a forked child must "
                             "connect its own (hbg.connect())",
                             what, (long)cl->pid);
                return -1;
        }
        if (cl->closed || !cl->c) {
                PyErr_Format(PyExc_ValueError, "%s: the client is closed", what);
                return -1;
        }
        return 0;
}

int hbgpy_client_enter(ClientObject *cl, const char *what, int host_ok) {
        if (hbgpy_client_check(cl, what) < 0)
                return -1;
        if (hbgpy_client_held_here(cl)) {
                /* A host function of cl without worker threads runs on
                 * the thread that holds the lock, inside a wait: it may
                 * allocate and read the kernel table (as hbg.h allows),
                 * nothing else (a host function of another client nested
                 * in it is not seen by the library's own guard). Any
                 * other code run inside a call of cl may not use it. */
                if (cl->inline_hosts > 0 && host_ok)
                        return 1;
                if (cl->inline_hosts > 0) {
                        PyErr_Format(PyExc_RuntimeError,
                                     "%s: not from a host function of the same client (it runs inside the "
                                     "client's wait)",
                                     what);
                        return -1;
                }
                PyErr_Format(PyExc_RuntimeError,
                             "%s: re-entered from code run inside a call of the same client "
                             "(a __del__, a weakref callback, another client's host function)",
                             what);
                return -1;
        }
        if (hbgpy_host_client() == cl) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s: not from a host function running on the client's worker threads "
                             "(it would race the thread that uses the client)",
                             what);
                return -1;
        }
        if (pthread_mutex_trylock(&cl->lock) != 0) {
                /* Wait without the GIL: the holder may need it back. */
                Py_BEGIN_ALLOW_THREADS
                pthread_mutex_lock(&cl->lock);
                Py_END_ALLOW_THREADS
        }
        if (cl->closed || !cl->c) { /* closed by another thread meanwhile */
                pthread_mutex_unlock(&cl->lock);
                PyErr_Format(PyExc_ValueError, "%s: the client is closed", what);
                return -1;
        }
        cl->owner = pthread_self();
        cl->owned = 1;
        if (cl->n_deferred)
                hbgpy_free_deferred(cl);
        if (cl->orphan_recording) { /* before anything is added to it */
                uint32_t id;
                (void)hbg_graph_record_end(cl->c, &id);
                cl->orphan_recording = 0;
        }
        return 0;
}

void hbgpy_client_leave(ClientObject *cl, int held) {
        if (held == 0) {
                cl->owned = 0;
                pthread_mutex_unlock(&cl->lock);
        }
}

/* hbg_disconnect() with the GIL released (a running host function needs
 * it to finish), on the main thread (a pending call) when the session
 * ended where it cannot: inside a host function, where hbg_disconnect()
 * does nothing or (a host function of another client) would free what a
 * wait below it still uses. Not while a host function runs on this
 * thread: then it asks to be called again. */
static int disconnect_raw(void *arg) {
        if (hbgpy_host_depth() > 0) {
                (void)Py_AddPendingCall(disconnect_raw, arg); /* full: the session ends with the process */
                return 0;
        }
        Py_BEGIN_ALLOW_THREADS
        hbg_disconnect(arg);
        Py_END_ALLOW_THREADS
        return 0;
}

/* End the session. In a forked child the session is the parent's: it is
 * left alone. */
static void client_disconnect(ClientObject *cl) {
        hbg_client *c = cl->c;
        if (!c)
                return;
        cl->c = NULL;
        cl->active_graph = NULL;
        cl->n_deferred = 0;
        if (!hbgpy_client_foreign(cl)) {
                if (hbgpy_host_depth() > 0 || hbgpy_client_held_here(cl)) {
                        if (Py_AddPendingCall(disconnect_raw, c) != 0)
                                c = NULL; /* the queue is full: the session ends with the process */
                } else {
                        disconnect_raw(c);
                }
        }
        hbgpy_host_calls_drop_all(cl);
}

void hbgpy_client_block_gone(ClientObject *cl) {
        cl->live_blocks--;
        if (cl->closed && cl->live_blocks == 0)
                client_disconnect(cl);
}

/* ---------------------------------------------------------------- connect */

static int opt_positive(PyObject *v, const char *name, uint64_t *ret) {
        if (!v || v == Py_None)
                return 0;
        PyObject *i = hbgpy_index(v);
        if (!i) {
                PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", name, Py_TYPE(v)->tp_name);
                return -1;
        }
        unsigned long long x = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
        if (x == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "%s must be a positive int", name);
                return -1;
        }
        if (x == 0) {
                PyErr_Format(PyExc_ValueError, "%s must be positive, not 0", name);
                return -1;
        }
        *ret = x;
        return 0;
}

/* A failed connect as Python says it, with hbgd's reason: a refusal of
 * this user (EACCES, EPERM) is PermissionError; any other refusal by hbgd
 * (a limit, a geometry above its maximum, hbgd shutting down: the
 * library's message then begins "hbgd refused") ConnectionRefusedError,
 * keeping hbgd's errno; anything else the OSError subclass of its errno
 * (ConnectionRefusedError where nothing listens, FileNotFoundError where
 * there is no socket). */
static void connect_error(int err, const char *why) {
        PyObject *type = PyExc_OSError;
        if (err == -EACCES || err == -EPERM)
                type = PyExc_PermissionError;
        else if (strncmp(why, "hbgd refused", strlen("hbgd refused")) == 0)
                type = PyExc_ConnectionRefusedError;
        PyObject *exc_args = Py_BuildValue("(is)", -err, why);
        if (exc_args) {
                PyErr_SetObject(type, exc_args);
                Py_DECREF(exc_args);
        }
}

static int client_init(ClientObject *cl, PyObject *args, PyObject *kwds) {
        static char *kwlist[] = { "socket", "heap", "window", "stall_timeout", "host_threads", "name", NULL };
        PyObject *socket = Py_None, *heap = Py_None, *window = Py_None, *stall = Py_None, *threads = NULL;
        const char *name = NULL;
        if (cl->c || cl->closed) {
                PyErr_SetString(PyExc_RuntimeError, "hbg.Client.__init__: already connected");
                return -1;
        }
        if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OOOOz:Client", kwlist, &socket, &heap, &window, &stall,
                                         &threads, &name))
                return -1;
        hbg_connect_options o = HBG_CONNECT_OPTIONS_INIT;
        PyObject *path = NULL;
        if (socket != Py_None) {
                if (!PyUnicode_FSConverter(socket, &path)) {
                        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                                PyErr_Clear();
                                PyErr_Format(PyExc_TypeError, "socket must be a path (str, bytes or os.PathLike), "
                                             "not %.80s", Py_TYPE(socket)->tp_name);
                        }
                        return -1;
                }
                o.socket_path = PyBytes_AS_STRING(path);
        }
        int ok = opt_positive(heap, "heap", &o.heap_bytes) == 0 && opt_positive(window, "window", &o.task_window) == 0;
        if (ok && o.task_window && (o.task_window & (o.task_window - 1))) {
                PyErr_Format(PyExc_ValueError, "window must be a power of two, not %llu",
                             (unsigned long long)o.task_window);
                ok = 0;
        }
        o.flag_window = o.task_window;
        if (ok && stall != Py_None) {
                double s = PyFloat_AsDouble(stall);
                if (s == -1.0 && PyErr_Occurred()) {
                        PyErr_Clear();
                        PyErr_Format(PyExc_TypeError, "stall_timeout must be a number of seconds, not %.80s",
                                     Py_TYPE(stall)->tp_name);
                        ok = 0;
                } else if (!(s > 0) || !isfinite(s) || s > 1e9) {
                        PyErr_Format(PyExc_ValueError, "stall_timeout must be a positive number of seconds, not %R",
                                     stall);
                        ok = 0;
                } else {
                        o.stall_timeout_ms = (uint64_t)ceil(s * 1000.0);
                }
        }
        if (ok && threads && threads != Py_None) {
                PyObject *i = hbgpy_index(threads);
                long n = i ? PyLong_AsLong(i) : 0;
                Py_XDECREF(i);
                if (!i) {
                        PyErr_Format(PyExc_TypeError, "host_threads must be an int, not %.80s",
                                     Py_TYPE(threads)->tp_name);
                        ok = 0;
                } else if ((n == -1 && PyErr_Occurred()) || n < 0 || n > HBG_MAX_HOST_THREADS) {
                        PyErr_Clear();
                        PyErr_Format(PyExc_ValueError, "host_threads must be 0 to %d, not %R", HBG_MAX_HOST_THREADS,
                                     threads);
                        ok = 0;
                } else {
                        o.host_threads = (uint64_t)n;
                }
        }
        if (!ok) {
                Py_XDECREF(path);
                return -1;
        }
        o.name = name;

        hbg_client *c = NULL;
        int err;
        char why[256];
        Py_BEGIN_ALLOW_THREADS
        err = hbg_connect_opts(&c, &o);
        /* hbg_last_error(NULL) is this thread's: read it here. */
        snprintf(why, sizeof(why), "%s", err < 0 ? hbg_last_error(NULL) : "");
        Py_END_ALLOW_THREADS
        Py_XDECREF(path);
        if (err < 0) {
                connect_error(err, *why ? why : hbg_strerror(err));
                return -1;
        }
        cl->c = c;
        cl->pid = getpid();
        cl->forks = hbgpy_forks;
        cl->host_threads = (int)o.host_threads;
        int64_t room = hbg_graph_room(c); /* no task yet: the whole window */
        cl->window = room > 0 ? (uint64_t)room : 0;
        if (hbgpy_kernels_load(cl) < 0) {
                client_disconnect(cl);
                hbgpy_kernels_free(cl);
                return -1;
        }
        return 0;
}

static PyObject *client_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
        (void)args;
        (void)kwds;
        ClientObject *cl = (ClientObject *)type->tp_alloc(type, 0);
        if (!cl)
                return NULL;
        pthread_mutex_init(&cl->lock, NULL);
        cl->pid = getpid();
        cl->forks = hbgpy_forks;
        cl->host_calls = PyList_New(0);
        cl->recorded_calls = PyList_New(0);
        if (!cl->host_calls || !cl->recorded_calls) {
                Py_DECREF(cl);
                return NULL;
        }
        return (PyObject *)cl;
}

static int client_traverse(ClientObject *cl, visitproc visit, void *arg) {
        Py_VISIT(cl->host_calls);
        Py_VISIT(cl->recorded_calls);
        Py_VISIT(cl->last_host_exc);
        Py_VISIT(cl->host_interrupt);
        return 0;
}

static int client_clear(ClientObject *cl) {
        /* A cycle through a host function: end the session first, so that
         * no host function runs on what is cleared. */
        if (cl->c)
                client_disconnect(cl);
        Py_CLEAR(cl->host_calls);
        Py_CLEAR(cl->recorded_calls);
        Py_CLEAR(cl->last_host_exc);
        Py_CLEAR(cl->host_interrupt);
        return 0;
}

static void client_dealloc(ClientObject *cl) {
        PyObject_GC_UnTrack(cl);
        if (cl->weakrefs)
                PyObject_ClearWeakRefs((PyObject *)cl);
        client_clear(cl);
        hbgpy_kernels_free(cl);
        free(cl->deferred);
        pthread_mutex_destroy(&cl->lock);
        Py_TYPE(cl)->tp_free((PyObject *)cl);
}

static PyObject *client_close(ClientObject *cl, PyObject *unused) {
        (void)unused;
        if (cl->closed || !cl->c || hbgpy_client_foreign(cl)) {
                cl->closed = 1;
                Py_RETURN_NONE;
        }
        if (hbgpy_host_client() == cl) {
                PyErr_SetString(PyExc_RuntimeError, "Client.close: not from one of the client's host functions");
                return NULL;
        }
        int held = hbgpy_client_enter(cl, "Client.close", 0);
        if (held < 0)
                return NULL;
        cl->closed = 1;
        hbgpy_client_leave(cl, held);
        /* Host functions and their exceptions may hold arrays of the
         * client (a closure, a traceback): let go of them, or the arrays
         * keep the session open for ever. Late runs find no code. */
        hbgpy_host_calls_forget_code(cl);
        if (cl->live_blocks == 0)
                client_disconnect(cl);
        Py_RETURN_NONE;
}

static PyObject *client_enter_ctx(ClientObject *cl, PyObject *unused) {
        (void)unused;
        if (hbgpy_client_check(cl, "Client.__enter__") < 0)
                return NULL;
        Py_INCREF(cl);
        return (PyObject *)cl;
}

static PyObject *client_exit_ctx(ClientObject *cl, PyObject *args) {
        (void)args;
        return client_close(cl, NULL);
}

static PyObject *client_repr(ClientObject *cl) {
        const char *state = hbgpy_client_foreign(cl) ? "of another process"
                            : !cl->c            ? "closed"
                            : cl->closed        ? "closing once its arrays are gone"
                                                : "connected";
        return PyUnicode_FromFormat("<hbg.Client %s, %zd arrays, %d host threads>", state, cl->live_blocks,
                                    cl->host_threads);
}

static PyObject *client_get_closed(ClientObject *cl, void *unused) {
        (void)unused;
        return PyBool_FromLong(cl->closed || !cl->c);
}

static PyObject *client_get_host_threads(ClientObject *cl, void *unused) {
        (void)unused;
        return PyLong_FromLong(cl->host_threads);
}

static PyMethodDef client_methods[] = {
        { "close", (PyCFunction)client_close, METH_NOARGS,
          "close($self, /)\n--\n\nEnd the session. Graphs not waited for are abandoned (hbgd fails them). Arrays of\n"
          "the client stay valid: the session ends once the last of them is gone. Calling it\n"
          "again does nothing." },
        { "__enter__", (PyCFunction)client_enter_ctx, METH_NOARGS, "__enter__($self, /)\n--\n\nThe client itself." },
        { "__exit__", (PyCFunction)client_exit_ctx, METH_VARARGS,
          "__exit__($self, exc_type=None, exc_value=None, traceback=None, /)\n--\n\nclose()." },
        { "empty", (PyCFunction)(void (*)(void))hbgpy_client_empty, METH_VARARGS | METH_KEYWORDS,
          "empty($self, /, shape, dtype=None)\n--\n\n"
          "empty(shape, dtype=numpy.float32) -> numpy.ndarray\n\n"
          "A new C-contiguous array in the session heap (64-byte aligned), not initialised;\n"
          "dtype None is numpy.float32.\n"
          "Its memory goes back to the heap when the array and every view of it are gone\n"
          "and the tasks added before then have completed. MemoryError when the heap is full;\n"
          "TypeError for dtypes holding Python objects." },
        { "zeros", (PyCFunction)(void (*)(void))hbgpy_client_zeros, METH_VARARGS | METH_KEYWORDS,
          "zeros($self, /, shape, dtype=None)\n--\n\n"
          "zeros(shape, dtype=numpy.float32) -> numpy.ndarray\n\nLike empty(), filled with zeros." },
        { "asarray", (PyCFunction)(void (*)(void))hbgpy_client_asarray, METH_VARARGS | METH_KEYWORDS,
          "asarray($self, /, array, dtype=None)\n--\n\n"
          "asarray(array, dtype=None) -> numpy.ndarray\n\n"
          "array in the session heap: itself when it is a C-contiguous array of this client's\n"
          "heap (and of dtype, if given), else a copy there (one copy, C order)." },
        { "graph", (PyCFunction)hbgpy_client_graph, METH_NOARGS,
          "graph($self, /)\n--\n\n"
          "graph() -> hbg.Graph\n\nA new graph to add tasks to. One graph of a client takes tasks at a time:\n"
          "submit it before adding to another." },
        { "record", (PyCFunction)hbgpy_client_record, METH_NOARGS,
          "record($self, /)\n--\n\n"
          "record() -> hbg.Recording\n\n"
          "with client.record() as rec: rec.graph.add(...)  records a graph that hbgd validates\n"
          "once; rec.launch() then runs it (any number of times) for a record per 64 tasks." },
        { "kernels", (PyCFunction)hbgpy_client_kernels, METH_NOARGS,
          "kernels($self, /)\n--\n\n"
          "kernels() -> list[hbg.Kernel]\n\nThe kernels of the hbgd this client is connected to (built-in and\n"
          "from modules), with their signatures, in id order." },
        { NULL, NULL, 0, NULL },
};

static PyGetSetDef client_getset[] = {
        { "closed", (getter)client_get_closed, NULL, "True once close() was called.", NULL },
        { "host_threads", (getter)client_get_host_threads, NULL,
          "Worker threads running host functions (connect(host_threads=N)).", NULL },
        { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject hbgpy_ClientType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hbg.Client",
        .tp_basicsize = sizeof(ClientObject),
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
        .tp_doc = "Client(socket=None, *, heap=None, window=None, stall_timeout=None, host_threads=0, name=None)\n--\n\n"
                  "A session with hbgd; hbg.connect() makes one. socket: hbgd's socket path (None:\n"
                  "$HBG_SOCKET, else /run/hbgd/hbgd.sock); heap: the session heap in bytes; window:\n"
                  "tasks in flight, a power of two; stall_timeout: seconds hbgd waits for a host\n"
                  "task; host_threads: library threads running host functions in parallel (0: they\n"
                  "run inside the waits, on the waiting thread); name: the session's name in\n"
                  "hbgctl. None means hbgd's default. A context manager: close() at the end.\n\n"
                  "A client may be shared by threads: its calls take turns (a wait lets the others in\n"
                  "between its 50 ms slices). One graph of a client takes tasks at a time.",
        .tp_new = client_new,
        .tp_init = (initproc)client_init,
        .tp_dealloc = (destructor)client_dealloc,
        .tp_traverse = (traverseproc)client_traverse,
        .tp_clear = (inquiry)client_clear,
        .tp_repr = (reprfunc)client_repr,
        .tp_methods = client_methods,
        .tp_getset = client_getset,
        .tp_weaklistoffset = offsetof(ClientObject, weakrefs),
};
