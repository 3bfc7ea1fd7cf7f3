/* SPDX-License-Identifier: MIT */
/*
 * Host functions: a Python callable as a task's hbg_host_fn.
 *
 * The library gets a token, not a pointer: a host task may run after its
 * graph was given up (hbgd's stall limit failed it, or it was handed over
 * before a cancel), when its HostCall may be gone. The module's table maps
 * live tokens to their HostCall (borrowed: a HostCall leaves the table as
 * it dies) and a token never comes back, so a late run finds nothing and
 * does nothing. Table and HostCalls are touched with the GIL held only.
 *
 * A client keeps the HostCalls of its graphs (dropped once the graph
 * finished) and of its recordings (until it disconnects).
 */
#include "hbgpy.h"

#include <errno.h>

typedef struct {
        PyObject_HEAD
        ClientObject *client;   /* strong */
        PyObject *fn;
        uint64_t token;
        uint64_t task;          /* its id: the graph's, or the recording's number */
        uint64_t graph;         /* GRAPH_PENDING until submitted */
        PyObject *exc;          /* what it raised last */
} HostCallObject;

#define GRAPH_PENDING UINT64_MAX

static PyObject *token_table; /* int token -> int address of the HostCall */
static uint64_t next_token = 1;
static _Thread_local ClientObject *current_host_client;
static _Thread_local int host_depth;

ClientObject *hbgpy_host_client(void) {
        return current_host_client;
}

int hbgpy_host_depth(void) {
        return host_depth;
}

static int host_call_traverse(HostCallObject *h, visitproc visit, void *arg) {
        Py_VISIT(h->client);
        Py_VISIT(h->fn);
        Py_VISIT(h->exc);
        return 0;
}

static int host_call_clear(HostCallObject *h) {
        Py_CLEAR(h->fn);
        Py_CLEAR(h->exc);
        Py_CLEAR(h->client);
        return 0;
}

static void host_call_dealloc(HostCallObject *h) {
        PyObject_GC_UnTrack(h);
        if (h->token && token_table) {
                PyObject *key = PyLong_FromUnsignedLongLong(h->token);
                if (!key || PyDict_DelItem(token_table, key) < 0)
                        PyErr_Clear();
                Py_XDECREF(key);
        }
        host_call_clear(h);
        Py_TYPE(h)->tp_free((PyObject *)h);
}

PyTypeObject hbgpy_HostCallType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hbg._HostCall",
        .tp_basicsize = sizeof(HostCallObject),
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
        .tp_doc = "A host function added to a graph.",
        .tp_dealloc = (destructor)host_call_dealloc,
        .tp_traverse = (traverseproc)host_call_traverse,
        .tp_clear = (inquiry)host_call_clear,
};

int hbgpy_host_init(PyObject *module) {
        (void)module;
        token_table = PyDict_New();
        return token_table ? 0 : -1;
}

/* A new HostCall of cl for fn, in the client's list; *ret_userdata is
 * what hbg_task.host_userdata carries. Returns it (borrowed) or NULL. */
PyObject *hbgpy_host_call_new(ClientObject *cl, PyObject *fn, int recorded, void **ret_userdata) {
        HostCallObject *h = PyObject_GC_New(HostCallObject, &hbgpy_HostCallType);
        if (!h)
                return NULL;
        Py_INCREF(cl);
        Py_INCREF(fn);
        h->client = cl;
        h->fn = fn;
        h->token = 0;
        h->task = 0;
        h->graph = GRAPH_PENDING;
        h->exc = NULL;
        PyObject_GC_Track(h);
        uint64_t token = next_token++;
        PyObject *key = PyLong_FromUnsignedLongLong(token), *addr = PyLong_FromVoidPtr(h);
        int rc = key && addr ? PyDict_SetItem(token_table, key, addr) : -1;
        Py_XDECREF(key);
        Py_XDECREF(addr);
        if (rc == 0) {
                h->token = token;
                rc = PyList_Append(recorded ? cl->recorded_calls : cl->host_calls, (PyObject *)h);
        }
        Py_DECREF(h); /* the list holds it, or it goes (and leaves the table) */
        if (rc < 0)
                return NULL;
        *ret_userdata = (void *)(uintptr_t)token;
        return (PyObject *)h;
}

void hbgpy_host_calls_set_task(PyObject *call, uint64_t task) {
        ((HostCallObject *)call)->task = task;
}

/* The graph just submitted takes the calls added since the last submit:
 * they are the list's tail. */
void hbgpy_host_calls_submitted(ClientObject *cl, uint64_t graph) {
        for (Py_ssize_t i = PyList_GET_SIZE(cl->host_calls) - 1; i >= 0; i--) {
                HostCallObject *h = (HostCallObject *)PyList_GET_ITEM(cl->host_calls, i);
                if (h->graph != GRAPH_PENDING)
                        break;
                h->graph = graph;
        }
}

/* Drop the calls of finished graphs from the front (with the lock held,
 * not from a host function). Bounded: a few graphs' worth per call, the
 * rest at the next. A status that is not an outcome (running, or the
 * library refusing to tell) stops it. */
PyObject *hbgpy_host_calls_sweep(ClientObject *cl) {
        Py_ssize_t n = PyList_GET_SIZE(cl->host_calls), done = 0;
        uint64_t checked = GRAPH_PENDING;
        int graphs = 0;
        while (done < n && graphs < 64) {
                HostCallObject *h = (HostCallObject *)PyList_GET_ITEM(cl->host_calls, done);
                if (h->graph == GRAPH_PENDING)
                        break;
                if (h->graph != checked) {
                        int st = hbg_graph_status(cl->c, h->graph, NULL);
                        if (st == 1 || st == -EDEADLK || st == -EINVAL)
                                break;
                        checked = h->graph;
                        graphs++;
                }
                done++;
        }
        if (!done)
                return NULL;
        PyObject *dropped = PyList_GetSlice(cl->host_calls, 0, done);
        if (!dropped || PyList_SetSlice(cl->host_calls, 0, done, NULL) < 0) {
                PyErr_Clear();
                Py_XDECREF(dropped);
                return NULL;
        }
        return dropped;
}

/* The client closed: its calls' code and exceptions go (they may hold
 * its arrays); the calls stay, so that a late run finds no code. */
static void forget_list(PyObject *list) {
        for (Py_ssize_t i = 0; list && i < PyList_GET_SIZE(list); i++) {
                /* Dropping the code may drop the client's last array, end
                 * its session and empty the list: h is held meanwhile. */
                HostCallObject *h = (HostCallObject *)Py_NewRef(PyList_GET_ITEM(list, i));
                Py_CLEAR(h->fn);
                Py_CLEAR(h->exc);
                Py_DECREF(h);
        }
}

void hbgpy_host_calls_forget_code(ClientObject *cl) {
        forget_list(cl->host_calls);
        forget_list(cl->recorded_calls);
        Py_CLEAR(cl->last_host_exc);
}

/* The exception the host function of task `task` of `graph` raised, or
 * the latest any raised when its task is not known (a recording's);
 * a new reference or NULL. */
PyObject *hbgpy_host_exception_for(ClientObject *cl, uint64_t graph, uint64_t task) {
        for (Py_ssize_t i = PyList_GET_SIZE(cl->host_calls) - 1; i >= 0; i--) {
                HostCallObject *h = (HostCallObject *)PyList_GET_ITEM(cl->host_calls, i);
                if (h->graph == graph && h->task == task) {
                        Py_XINCREF(h->exc);
                        return h->exc;
                }
        }
        Py_XINCREF(cl->last_host_exc);
        return cl->last_host_exc;
}

void hbgpy_host_calls_drop_all(ClientObject *cl) {
        if (cl->host_calls && PyList_SetSlice(cl->host_calls, 0, PY_SSIZE_T_MAX, NULL) < 0)
                PyErr_Clear();
        if (cl->recorded_calls && PyList_SetSlice(cl->recorded_calls, 0, PY_SSIZE_T_MAX, NULL) < 0)
                PyErr_Clear();
}

/* The errno a host function's exception fails its task with: an OSError's
 * own, else EIO (the exception itself becomes GraphError's __cause__). */
static int exception_errno(PyObject *exc) {
        if (PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_OSError)) {
                PyObject *e = PyObject_GetAttrString(exc, "errno");
                long v = e && PyLong_Check(e) ? PyLong_AsLong(e) : 0;
                Py_XDECREF(e);
                PyErr_Clear();
                if (v > 0 && v < 4096)
                        return (int)-v;
        }
        return -EIO;
}

/* The exception being raised, normalised, with its traceback. */
static PyObject *raised_exception(void) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value && tb)
                PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        return value ? value : Py_NewRef(Py_None);
}

int hbgpy_host_interrupt_raise(ClientObject *cl) {
        PyObject *exc = cl->host_interrupt;
        if (!exc)
                return 0;
        cl->host_interrupt = NULL;
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
        return -1;
}

/* The hbg_host_fn of every Python host task. */
int hbgpy_host_fn(void *userdata) {
        if (_Py_IsFinalizing())
                return -ECANCELED;
        PyGILState_STATE gil = PyGILState_Ensure();
        int ret = -ECANCELED; /* its HostCall is gone: the graph was given up */
        PyObject *key = PyLong_FromUnsignedLongLong((uint64_t)(uintptr_t)userdata);
        PyObject *addr = key ? PyDict_GetItemWithError(token_table, key) : NULL;
        Py_XDECREF(key);
        HostCallObject *h = addr ? PyLong_AsVoidPtr(addr) : NULL;
        /* No code (the client closed, or the collector cleared a cycle
         * through it) or no session (it is ending): nothing runs. */
        if (h && h->fn && h->client && h->client->c) {
                Py_INCREF(h);
                ClientObject *cl = h->client, *outer = current_host_client;
                Py_INCREF(cl);
                PyObject *fn = Py_NewRef(h->fn); /* close() may drop h->fn meanwhile */
                /* Run inside a call of cl on this thread (no worker threads):
                 * cl's calls may re-enter (hbgpy_client_enter). */
                int inline_run = hbgpy_client_held_here(cl);
                cl->inline_hosts += inline_run;
                current_host_client = cl;
                host_depth++;
                PyObject *r = PyObject_CallNoArgs(fn);
                /* Still "in" the host function until the references it
                 * leaves are dropped: the last of an array may go with
                 * them, and end a closed client's session. */
                Py_DECREF(fn);
                if (r) {
                        ret = 0;
                        Py_DECREF(r);
                } else {
                        PyObject *exc = raised_exception();
                        /* The program is asked to stop, not the task to
                         * fail: the next wait or done() raises it again. */
                        int stop = PyErr_GivenExceptionMatches(exc, PyExc_KeyboardInterrupt) ||
                                   PyErr_GivenExceptionMatches(exc, PyExc_SystemExit);
                        ret = stop ? -EINTR : exception_errno(exc);
                        if (cl->closed) { /* nobody will ask for it */
                                Py_DECREF(exc);
                        } else {
                                if (stop)
                                        Py_XSETREF(cl->host_interrupt, Py_NewRef(exc));
                                Py_XSETREF(h->exc, Py_NewRef(exc));
                                Py_XSETREF(cl->last_host_exc, exc);
                        }
                }
                Py_DECREF(h);
                host_depth--;
                current_host_client = outer;
                cl->inline_hosts -= inline_run;
                Py_DECREF(cl);
        }
        PyErr_Clear();
        PyGILState_Release(gil);
        return ret;
}
