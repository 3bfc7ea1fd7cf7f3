/* SPDX-License-Identifier: MIT */
/*
 * hbg.Handle: waiting for a submitted graph, its outcome as
 * hbg.GraphError, its cancel.
 */
#include "hbgpy.h"

#include <errno.h>
#include <math.h>
#include <time.h>

typedef struct {
        PyObject_HEAD
        ClientObject *client;
        uint64_t graph;
} HandleObject;

PyObject *hbgpy_handle_new(ClientObject *cl, uint64_t graph) {
        HandleObject *h = PyObject_New(HandleObject, &hbgpy_HandleType);
        if (!h)
                return NULL;
        Py_INCREF(cl);
        h->client = cl;
        h->graph = graph;
        return (PyObject *)h;
}

static void handle_dealloc(HandleObject *h) {
        Py_XDECREF(h->client);
        Py_TYPE(h)->tp_free((PyObject *)h);
}

/* Raise hbg.GraphError for graph's failure err (lock held). */
static PyObject *raise_graph_error(ClientObject *cl, uint64_t graph, int err) {
        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
        int have = hbg_graph_error(cl->c, graph, &info) == 0 && info.code != 0;
        const char *message = have && info.message[0] ? info.message : hbg_last_error(cl->c);
        if (!message || !*message)
                message = hbg_strerror(err);
        PyObject *text = have ? PyUnicode_FromFormat("graph %llu failed: task %llu%s%s%s: %s",
                                                     (unsigned long long)graph, (unsigned long long)info.task,
                                                     info.kernel && *info.kernel ? " (" : "",
                                                     info.kernel && *info.kernel ? info.kernel : "",
                                                     info.kernel && *info.kernel ? ")" : "", message)
                              : PyUnicode_FromString(message);
        if (!text)
                return NULL;
        PyObject *exc = hbgpy_graph_error_new(text, PyLong_FromUnsignedLongLong(graph),
                                              have ? PyLong_FromUnsignedLongLong(info.task) : Py_NewRef(Py_None),
                                              have && info.kernel ? info.kernel : "", message,
                                              have ? -info.code : -err);
        if (!exc)
                return NULL;
        if (have && info.kernel_id < 0) { /* a task without kernel: a host function's? */
                PyObject *cause = hbgpy_host_exception_for(cl, graph, info.task);
                if (cause && cause != Py_None)
                        PyException_SetCause(exc, cause);
                else
                        Py_XDECREF(cause);
        }
        PyErr_SetObject(hbgpy_GraphError, exc);
        Py_DECREF(exc);
        return NULL;
}

/* timeout: None (for ever) or seconds. */
static int parse_timeout(PyObject *timeout, double *ret) {
        *ret = -1.0;
        if (!timeout || timeout == Py_None)
                return 0;
        double s = PyFloat_AsDouble(timeout);
        if (s == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "timeout must be None or a number of seconds, not %.80s",
                             Py_TYPE(timeout)->tp_name);
                return -1;
        }
        if (!(s >= 0) || isnan(s)) {
                PyErr_Format(PyExc_ValueError, "timeout must be None or >= 0 seconds, not %R", timeout);
                return -1;
        }
        *ret = s;
        return 0;
}

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait in slices of at most 50 ms without the GIL (and with the client's
 * lock let go between them): Ctrl-C raises KeyboardInterrupt within one
 * slice, and other threads get the client in between. */
PyObject *hbgpy_handle_wait(PyObject *handle, PyObject *timeout) {
        HandleObject *h = (HandleObject *)handle;
        static const char what[] = "Handle.wait";
        ClientObject *cl = h->client;
        double limit;
        if (parse_timeout(timeout, &limit) < 0)
                return NULL;
        double deadline = limit >= 0 ? now_s() + limit : 0;
        for (;;) {
                int held = hbgpy_client_enter(cl, what, 0);
                if (held < 0)
                        return NULL;
                int slice = 50;
                if (limit >= 0) {
                        double left = deadline - now_s();
                        slice = left <= 0 ? 0 : left * 1000 < 50 ? (int)ceil(left * 1000) : 50;
                }
                int err;
                Py_BEGIN_ALLOW_THREADS
                err = hbg_graph_wait(cl->c, h->graph, slice);
                Py_END_ALLOW_THREADS
                if (hbgpy_host_interrupt_raise(cl) < 0) {
                        hbgpy_client_leave(cl, held);
                        return NULL;
                }
                int running = 0;
                if (err == -ETIMEDOUT) { /* a graph's own error may be -ETIMEDOUT too */
                        int st = hbg_graph_status(cl->c, h->graph, NULL);
                        running = st == 1;
                        err = st; /* or it finished since: its outcome */
                }
                if (!running) {
                        PyObject *r = NULL;
                        hbg_graph_error_info info = HBG_GRAPH_ERROR_INFO_INIT;
                        if (err == 0)
                                r = Py_NewRef(Py_None);
                        else if (hbg_graph_error(cl->c, h->graph, &info) == 0 && info.code != 0)
                                raise_graph_error(cl, h->graph, err); /* its errno, whatever it is */
                        else /* no outcome: hbgd went away, or not a graph of this client */
                                hbgpy_raise(cl, err, what);
                        PyObject *dropped = hbgpy_host_calls_sweep(cl);
                        hbgpy_client_leave(cl, held);
                        Py_XDECREF(dropped);
                        return r;
                }
                hbgpy_client_leave(cl, held);
                if (PyErr_CheckSignals() < 0)
                        return NULL;
                if (limit >= 0 && now_s() >= deadline) {
                        char secs[32]; /* PyErr_Format() has no %g */
                snprintf(secs, sizeof(secs), "%g", limit);
                PyErr_Format(PyExc_TimeoutError, "%s: graph %llu still running after %s s", what,
                             (unsigned long long)h->graph, secs);
                        return NULL;
                }
        }
}

static PyObject *handle_wait(HandleObject *h, PyObject *args, PyObject *kwds) {
        static char *kwlist[] = { "timeout", NULL };
        PyObject *timeout = Py_None;
        if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:wait", kwlist, &timeout))
                return NULL;
        return hbgpy_handle_wait((PyObject *)h, timeout);
}

static PyObject *handle_done(HandleObject *h, PyObject *unused) {
        (void)unused;
        ClientObject *cl = h->client;
        int held = hbgpy_client_enter(cl, "Handle.done", 0);
        if (held < 0)
                return NULL;
        /* Ready host functions run here, as in a wait (none run otherwise
         * without worker threads). */
        if (cl->host_threads == 0)
                (void)hbg_client_process(cl->c);
        int st = hbg_graph_status(cl->c, h->graph, NULL);
        int stop = hbgpy_host_interrupt_raise(cl);
        hbgpy_client_leave(cl, held);
        return stop < 0 ? NULL : PyBool_FromLong(st != 1);
}

static PyObject *handle_cancel(HandleObject *h, PyObject *unused) {
        (void)unused;
        ClientObject *cl = h->client;
        int held = hbgpy_client_enter(cl, "Handle.cancel", 0);
        if (held < 0)
                return NULL;
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = hbg_graph_cancel(cl->c, h->graph);
        Py_END_ALLOW_THREADS
        PyObject *r = err == 0 ? Py_NewRef(Py_True) : err == -EALREADY ? Py_NewRef(Py_False) : NULL;
        if (!r)
                hbgpy_raise(cl, err, "Handle.cancel");
        hbgpy_client_leave(cl, held);
        return r;
}

static PyObject *handle_get_id(HandleObject *h, void *unused) {
        (void)unused;
        return PyLong_FromUnsignedLongLong(h->graph);
}

static PyObject *handle_repr(HandleObject *h) {
        return PyUnicode_FromFormat("<hbg.Handle of graph %llu>", (unsigned long long)h->graph);
}

static PyMethodDef handle_methods[] = {
        { "wait", (PyCFunction)(void (*)(void))handle_wait, METH_VARARGS | METH_KEYWORDS,
          "wait($self, /, timeout=None)\n--\n\n"
          "wait(timeout=None) -> None\n\n"
          "Wait until the graph finished (timeout in seconds; None: for ever), without the GIL.\n"
          "Raises hbg.GraphError if it failed, TimeoutError if it still runs after timeout,\n"
          "ConnectionResetError if hbgd went away, KeyboardInterrupt on Ctrl-C (the graph goes\n"
          "on; wait again). Without host threads, host functions run inside it." },
        { "done", (PyCFunction)handle_done, METH_NOARGS,
          "done($self, /)\n--\n\n"
          "done() -> bool\n\nTrue once the graph finished (succeeded or failed); never waits." },
        { "cancel", (PyCFunction)handle_cancel, METH_NOARGS,
          "cancel($self, /)\n--\n\n"
          "cancel() -> bool\n\nAsk hbgd to cancel the graph: True if it took the cancel (wait() then raises\n"
          "GraphError with errno ECANCELED unless it finished first), False if it had finished or\n"
          "was cancelled before; RuntimeError while eight cancels of the client are pending." },
        { NULL, NULL, 0, NULL },
};

static PyGetSetDef handle_getset[] = {
        { "id", (getter)handle_get_id, NULL, "The graph's number (0, 1, 2, ... per client).", NULL },
        { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject hbgpy_HandleType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hbg.Handle",
        .tp_basicsize = sizeof(HandleObject),
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "A submitted graph (Graph.submit(), Recording.launch()).",
        .tp_dealloc = (destructor)handle_dealloc,
        .tp_repr = (reprfunc)handle_repr,
        .tp_methods = handle_methods,
        .tp_getset = handle_getset,
};
