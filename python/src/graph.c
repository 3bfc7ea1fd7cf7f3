/* SPDX-License-Identifier: MIT */
/*
 * hbg.Graph: adding tasks to a graph and submitting it. A recording's
 * graph (recording.c) is one too, in its own states.
 */
#include "hbgpy.h"

#include <errno.h>
#include <string.h>

enum graph_state { GRAPH_OPEN, GRAPH_SUBMITTED, GRAPH_RECORDING, GRAPH_RECORDED };

typedef struct {
        PyObject_HEAD
        ClientObject *client;
        enum graph_state state;
        uint64_t n_tasks;
} GraphObject;

static PyObject *kw_scalars, *kw_after, *kw_blocks;

static int intern_keywords(void) {
        if (kw_scalars)
                return 0;
        kw_scalars = PyUnicode_InternFromString("scalars");
        kw_after = PyUnicode_InternFromString("after");
        kw_blocks = PyUnicode_InternFromString("blocks");
        return kw_scalars && kw_after && kw_blocks ? 0 : -1;
}

static int kw_is(PyObject *name, PyObject *interned) {
        return name == interned || PyUnicode_Compare(name, interned) == 0;
}

/* ---------------------------------------------------------------- adding */

/* May g take a task now? Exactly one graph of a client takes tasks. */
static int graph_may_add(GraphObject *g, const char *what) {
        ClientObject *cl = g->client;
        if (hbgpy_client_check(cl, what) < 0)
                return -1;
        switch (g->state) {
        case GRAPH_SUBMITTED:
                PyErr_Format(PyExc_RuntimeError, "%s: the graph was submitted; client.graph() starts another", what);
                return -1;
        case GRAPH_RECORDED:
                PyErr_Format(PyExc_RuntimeError, "%s: the recording is over; rec.launch() runs it", what);
                return -1;
        case GRAPH_RECORDING:
                return 0;
        case GRAPH_OPEN:
                break;
        }
        if (cl->recording) {
                PyErr_Format(PyExc_RuntimeError, "%s: a recording of this client is open: add to its rec.graph",
                             what);
                return -1;
        }
        if (cl->active_graph && cl->active_graph != (PyObject *)g) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s: another graph of this client has tasks not submitted; submit it first", what);
                return -1;
        }
        return 0;
}

/* An integer (int, numpy's, anything with __index__) as a u64. */
static int index_u64(PyObject *v, uint64_t *ret) {
        PyObject *i = PyNumber_Index(v);
        if (!i)
                return -1;
        unsigned long long x = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
        if (x == (unsigned long long)-1 && PyErr_Occurred())
                return -1;
        *ret = x;
        return 0;
}

static int index_i64(PyObject *v, int64_t *ret) {
        PyObject *i = PyNumber_Index(v);
        if (!i)
                return -1;
        long long x = PyLong_AsLongLong(i);
        Py_DECREF(i);
        if (x == -1 && PyErr_Occurred())
                return -1;
        *ret = x;
        return 0;
}

/* after=: ids of earlier tasks (an int or a sequence of them). */
static int parse_after(PyObject *after, hbg_task *t, const char *what) {
        if (!after || after == Py_None)
                return 0;
        if (PyIndex_Check(after)) { /* one id: an int, numpy's integers */
                if (index_u64(after, &t->deps[0]) < 0)
                        goto bad_id;
                t->n_deps = 1;
                return 0;
        }
        PyObject *seq = PySequence_Fast(after, "after must be a task id or a sequence of them");
        if (!seq)
                return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > HBG_MAX_TASK_DEPS) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "%s: after has %zd task ids; at most %d", what, n, HBG_MAX_TASK_DEPS);
                return -1;
        }
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t i = 0; i < n; i++) {
                if (!PyIndex_Check(items[i])) {
                        PyErr_Format(PyExc_TypeError, "%s: after[%zd] must be a task id (int), not %.80s", what, i,
                                     Py_TYPE(items[i])->tp_name);
                        Py_DECREF(seq);
                        return -1;
                }
                if (index_u64(items[i], &t->deps[i]) < 0) {
                        Py_DECREF(seq);
                        goto bad_id;
                }
        }
        t->n_deps = (uint8_t)n;
        Py_DECREF(seq);
        return 0;
bad_id:
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: after holds a negative or too large task id", what);
        return -1;
}

/* scalars=: as the kernel's signature types them. */
static int parse_scalars(const struct hbgpy_kernel *k, PyObject *scalars, hbg_task *t, const char *what) {
        Py_ssize_t n = 0;
        PyObject *seq = NULL;
        if (scalars && scalars != Py_None) {
                seq = PySequence_Fast(scalars, "scalars must be a sequence of numbers");
                if (!seq)
                        return -1;
                n = PySequence_Fast_GET_SIZE(seq);
        }
        unsigned want = k ? k->n_scalars : 0;
        if (n != (Py_ssize_t)want) {
                PyErr_Format(PyExc_ValueError, "%s: %S takes %u scalars, %zd given", what,
                             k ? k->name : Py_None, want, n);
                Py_XDECREF(seq);
                return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *v = PySequence_Fast_GET_ITEM(seq, i);
                switch (k->scalar_types[i]) {
                case HBG_SCALAR_TYPE_F32: {
                        double d = PyFloat_AsDouble(v);
                        if (d == -1.0 && PyErr_Occurred())
                                goto bad;
                        t->scalars[i] = hbg_f32((float)d);
                        break;
                }
                case HBG_SCALAR_TYPE_I64: {
                        int64_t x;
                        if (index_i64(v, &x) < 0)
                                goto bad;
                        t->scalars[i] = hbg_i64(x);
                        break;
                }
                default:
                        if (index_u64(v, &t->scalars[i]) < 0)
                                goto bad;
                        break;
                }
                continue;
        bad:
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "%s: %U must be %s, not %R", what, k->scalar_names[i],
                             k->scalar_types[i] == HBG_SCALAR_TYPE_F32 ? "a number"
                             : k->scalar_types[i] == HBG_SCALAR_TYPE_I64 ? "an int"
                                                                          : "a non-negative int",
                             v);
                Py_DECREF(seq);
                return -1;
        }
        t->n_scalars = (uint8_t)n;
        Py_XDECREF(seq);
        return 0;
}

/* Hand t to the library. The GIL stays held while the window has room
 * for certain: a task takes its own id and one joining dummy per 15
 * dependencies beyond 16 (hbg_graph_room(3); the bound below allows one
 * per 14), and its derived dependencies are on pending tasks
 * (at most window - room of them) plus 16 explicit ones. Else it is
 * released: the add may wait, and host functions need the GIL. */
static int add_task(GraphObject *g, const hbg_task *t, uint64_t *ret_id, const char *what) {
        ClientObject *cl = g->client;
        int held = hbgpy_client_enter(cl, what, 0);
        if (held < 0)
                return -1;
        /* Again under the lock: entering may have let another thread add. */
        if (graph_may_add(g, what) < 0) {
                hbgpy_client_leave(cl, held);
                return -1;
        }
        int err;
        int64_t room = hbg_graph_room(cl->c);
        if (g->state == GRAPH_RECORDING || (room >= 0 && (uint64_t)room * 15 >= cl->window + 58)) {
                err = hbg_graph_add(cl->c, t, ret_id);
        } else {
                Py_BEGIN_ALLOW_THREADS
                err = hbg_graph_add(cl->c, t, ret_id);
                Py_END_ALLOW_THREADS
        }
        if (err < 0) {
                if (hbgpy_host_interrupt_raise(cl) == 0) /* not added: the interrupt now */
                        hbgpy_raise(cl, err, what);
                hbgpy_client_leave(cl, held);
                return -1;
        }
        g->n_tasks++;
        if (g->state == GRAPH_OPEN)
                cl->active_graph = (PyObject *)g;
        /* An interrupt a host function raised meanwhile waits for the
         * next wait or done(): the task is added, and its id returned. */
        hbgpy_client_leave(cl, held);
        return 0;
}

/* hbg_task(3): 1 to 4096 blocks (the library refuses more). */
#define HBGPY_MAX_BLOCKS 4096

static PyObject *graph_add(GraphObject *g, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames) {
        static const char what[] = "Graph.add";
        Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
        if (nargs < 1) {
                PyErr_SetString(PyExc_TypeError, "Graph.add() needs a kernel (its name, or None for an empty task)");
                return NULL;
        }
        PyObject *scalars = NULL, *after = NULL, *blocks = NULL;
        Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        for (Py_ssize_t i = 0; i < nkw; i++) {
                PyObject *name = PyTuple_GET_ITEM(kwnames, i), *v = args[nargs + i];
                if (kw_is(name, kw_scalars))
                        scalars = v;
                else if (kw_is(name, kw_after))
                        after = v;
                else if (kw_is(name, kw_blocks))
                        blocks = v;
                else {
                        PyErr_Format(PyExc_TypeError, "Graph.add() got an unexpected keyword argument %R", name);
                        return NULL;
                }
        }
        ClientObject *cl = g->client; /* graph_may_add() runs under its lock */
        hbg_task t = HBG_TASK_INIT(NULL);
        const struct hbgpy_kernel *k = NULL;
        Py_ssize_t n_arrays = nargs - 1;
        if (args[0] != Py_None) {
                if (!(k = hbgpy_kernel_lookup(cl, args[0])))
                        return NULL;
                if (n_arrays != (Py_ssize_t)k->n_tensors) {
                        PyErr_Format(PyExc_TypeError, "%s: %S takes %u arrays, %zd given", what, k->name,
                                     k->n_tensors, n_arrays);
                        return NULL;
                }
                t.kernel_id = (uint16_t)k->id;
                for (unsigned i = 0; i < k->n_tensors; i++) {
                        if (hbgpy_array_tensor(cl, args[1 + i], k->dirs[i] & HBG_OUT, k->f32_only,
                                               k->tensor_names[i], &t.args[i].tensor) < 0)
                                return NULL;
                        t.args[i].dir = k->dirs[i];
                }
                t.n_args = (uint8_t)k->n_tensors;
        } else if (n_arrays) {
                PyErr_Format(PyExc_TypeError, "%s: an empty task (kernel None) takes no arrays, %zd given", what,
                             n_arrays);
                return NULL;
        }
        if (parse_scalars(k, scalars, &t, what) < 0 || parse_after(after, &t, what) < 0)
                return NULL;
        if (blocks && blocks != Py_None) {
                PyObject *i = hbgpy_index(blocks);
                long b = i ? PyLong_AsLong(i) : -1;
                Py_XDECREF(i);
                if (b < 1 || b > HBGPY_MAX_BLOCKS) {
                        PyErr_Clear();
                        PyErr_Format(PyExc_ValueError, "%s: blocks must be an int from 1 to %d, not %R", what,
                                     HBGPY_MAX_BLOCKS, blocks);
                        return NULL;
                }
                t.blocks = (uint16_t)b;
        }
        uint64_t id;
        if (add_task(g, &t, &id, what) < 0)
                return NULL;
        return PyLong_FromUnsignedLongLong(id);
}

/* reads= / writes= of a host function: heap arrays, as tensors. */
static int host_tensors(ClientObject *cl, PyObject *arrays, int write, hbg_tensor *v, uint8_t *ret_n,
                        PyObject **ret_seq) {
        const char *kw = write ? "writes" : "reads";
        *ret_n = 0;
        *ret_seq = NULL;
        if (!arrays || arrays == Py_None)
                return 0;
        if (PyArray_Check(arrays)) {
                PyErr_Format(PyExc_TypeError, "Graph.add_host: %s must be a sequence of arrays (a tuple or list)",
                             kw);
                return -1;
        }
        PyObject *seq = PySequence_Fast(arrays, "reads and writes must be sequences of arrays");
        if (!seq)
                return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > 255) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "Graph.add_host: %s has %zd arrays; at most 255", kw, n);
                return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *what = PyUnicode_FromFormat("%s[%zd] of Graph.add_host", kw, i);
                int rc = what ? hbgpy_array_tensor(cl, PySequence_Fast_GET_ITEM(seq, i), write, 0, what, &v[i]) : -1;
                Py_XDECREF(what);
                if (rc < 0) {
                        Py_DECREF(seq);
                        return -1;
                }
        }
        *ret_n = (uint8_t)n;
        *ret_seq = seq;
        return 0;
}

static PyObject *graph_add_host(GraphObject *g, PyObject *args, PyObject *kwds) {
        static const char what[] = "Graph.add_host";
        static char *kwlist[] = { "fn", "reads", "writes", "after", NULL };
        PyObject *fn, *reads = NULL, *writes = NULL, *after = NULL;
        if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOO:add_host", kwlist, &fn, &reads, &writes, &after))
                return NULL;
        if (!PyCallable_Check(fn)) {
                PyErr_Format(PyExc_TypeError, "%s: fn must be callable, not %.80s", what, Py_TYPE(fn)->tp_name);
                return NULL;
        }
        if (graph_may_add(g, what) < 0)
                return NULL;
        ClientObject *cl = g->client;
        hbg_tensor rv[255], wv[255];
        hbg_task t = HBG_TASK_INIT(NULL);
        PyObject *rseq = NULL, *wseq = NULL;
        /* The sequences keep their arrays (and so the bytes) alive until
         * the task is added. */
        if (host_tensors(cl, reads, 0, rv, &t.n_host_reads, &rseq) < 0 ||
            host_tensors(cl, writes, 1, wv, &t.n_host_writes, &wseq) < 0 || parse_after(after, &t, what) < 0) {
                Py_XDECREF(rseq);
                Py_XDECREF(wseq);
                return NULL;
        }
        t.host_reads = rv;
        t.host_writes = wv;
        t.host_fn = hbgpy_host_fn;
        PyObject *call = hbgpy_host_call_new(cl, fn, g->state == GRAPH_RECORDING, &t.host_userdata);
        uint64_t id;
        int added = call ? add_task(g, &t, &id, what) : -1;
        Py_XDECREF(rseq);
        Py_XDECREF(wseq);
        if (!call)
                return NULL;
        if (added < 0) {
                PyObject *list = g->state == GRAPH_RECORDING ? cl->recorded_calls : cl->host_calls;
                PyObject *exc_type, *exc_value, *exc_tb;
                PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
                if (list && PyList_GET_SIZE(list) && PyList_GET_ITEM(list, PyList_GET_SIZE(list) - 1) == call)
                        (void)PyList_SetSlice(list, PyList_GET_SIZE(list) - 1, PyList_GET_SIZE(list), NULL);
                PyErr_Restore(exc_type, exc_value, exc_tb);
                return NULL;
        }
        hbgpy_host_calls_set_task(call, id);
        return PyLong_FromUnsignedLongLong(id);
}

/* ---------------------------------------------------------------- submit */

static PyObject *graph_submit(GraphObject *g, PyObject *unused) {
        static const char what[] = "Graph.submit";
        (void)unused;
        if (g->state == GRAPH_RECORDING || g->state == GRAPH_RECORDED) {
                PyErr_Format(PyExc_RuntimeError, "%s: a recorded graph runs with rec.launch()", what);
                return NULL;
        }
        if (g->state == GRAPH_SUBMITTED) {
                PyErr_Format(PyExc_RuntimeError, "%s: the graph was submitted already", what);
                return NULL;
        }
        if (g->n_tasks == 0) {
                PyErr_Format(PyExc_ValueError, "%s: the graph is empty (add tasks first)", what);
                return NULL;
        }
        ClientObject *cl = g->client;
        int held = hbgpy_client_enter(cl, what, 0);
        if (held < 0)
                return NULL;
        uint64_t graph;
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = hbg_graph_submit(cl->c, &graph);
        Py_END_ALLOW_THREADS
        if (err < 0) {
                hbgpy_raise(cl, err, what);
                hbgpy_client_leave(cl, held);
                return NULL;
        }
        g->state = GRAPH_SUBMITTED;
        cl->active_graph = NULL;
        hbgpy_host_calls_submitted(cl, graph);
        PyObject *dropped = hbgpy_host_calls_sweep(cl);
        hbgpy_client_leave(cl, held);
        Py_XDECREF(dropped); /* may run any code: not under the lock */
        return hbgpy_handle_new(cl, graph);
}

static PyObject *graph_run(GraphObject *g, PyObject *args, PyObject *kwds) {
        static char *kwlist[] = { "timeout", NULL };
        PyObject *timeout = Py_None;
        if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:run", kwlist, &timeout))
                return NULL;
        PyObject *h = graph_submit(g, NULL);
        if (!h)
                return NULL;
        PyObject *r = hbgpy_handle_wait(h, timeout);
        Py_DECREF(h);
        return r;
}

static void graph_dealloc(GraphObject *g) {
        ClientObject *cl = g->client;
        /* Tasks added but never submitted: hbgd has them; submit them so
         * that the client's next graph does not take them in. */
        if (cl && g->state == GRAPH_OPEN && cl->active_graph == (PyObject *)g) {
                /* Not where the client cannot submit (closed, a forked
                 * child's, busy on this very thread): its next graph or
                 * its end deals with them. */
                int can = cl->c && !cl->closed && !hbgpy_client_foreign(cl) && !hbgpy_client_busy_here(cl);
                if (can) {
                        PyObject *exc_type, *exc_value, *exc_tb;
                        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
                        PyObject *h = graph_submit(g, NULL);
                        if (!h)
                                PyErr_WriteUnraisable(NULL); /* g is being freed: not it */
                        Py_XDECREF(h);
                        PyErr_Restore(exc_type, exc_value, exc_tb);
                }
                if (cl->active_graph == (PyObject *)g)
                        cl->active_graph = NULL;
        }
        Py_XDECREF(cl);
        Py_TYPE(g)->tp_free((PyObject *)g);
}

static Py_ssize_t graph_len(GraphObject *g) {
        return (Py_ssize_t)g->n_tasks;
}

static PyObject *graph_repr(GraphObject *g) {
        static const char *states[] = { "open", "submitted", "being recorded", "recorded" };
        return PyUnicode_FromFormat("<hbg.Graph %s, %llu tasks>", states[g->state], (unsigned long long)g->n_tasks);
}

static PyObject *graph_new(ClientObject *cl, enum graph_state state) {
        if (intern_keywords() < 0)
                return NULL;
        GraphObject *g = PyObject_New(GraphObject, &hbgpy_GraphType);
        if (!g)
                return NULL;
        Py_INCREF(cl);
        g->client = cl;
        g->state = state;
        g->n_tasks = 0;
        return (PyObject *)g;
}

PyObject *hbgpy_graph_new_recording(ClientObject *cl) {
        return graph_new(cl, GRAPH_RECORDING);
}

void hbgpy_graph_recorded(PyObject *g) {
        ((GraphObject *)g)->state = GRAPH_RECORDED;
}

PyObject *hbgpy_client_graph(ClientObject *cl, PyObject *unused) {
        (void)unused;
        if (hbgpy_client_check(cl, "Client.graph") < 0)
                return NULL;
        return graph_new(cl, GRAPH_OPEN);
}

static PyMethodDef graph_methods[] = {
        { "add", (PyCFunction)(void (*)(void))graph_add, METH_FASTCALL | METH_KEYWORDS,
          "add($self, kernel, /, *arrays, scalars=(), after=(), blocks=1)\n--\n\n"
          "add(kernel, *arrays, scalars=(), after=(), blocks=1) -> int\n\n"
          "Add a task running kernel (a name from client.kernels(), an hbg.Kernel, or None for an\n"
          "empty task) on arrays of the session heap, in the order of the kernel's signature; an\n"
          "output may be the very array of an input for in-place kernels, as numpy's out=.\n"
          "Dependencies on earlier tasks are derived from the arrays (read after write, write\n"
          "after read or write); after= adds task ids (at most 16). scalars= as the signature\n"
          "types them. Returns the task's id. TypeError/ValueError name the bad argument before\n"
          "anything reaches hbgd. The GIL is released when the task window is nearly full (the\n"
          "add may wait for room)." },
        { "add_host", (PyCFunction)(void (*)(void))graph_add_host, METH_VARARGS | METH_KEYWORDS,
          "add_host($self, /, fn, reads=(), writes=(), after=())\n--\n\n"
          "add_host(fn, reads=(), writes=(), after=()) -> int\n\n"
          "Add a task that calls fn() in this process once its dependencies completed; reads and\n"
          "writes are the heap arrays it touches (for dependencies). fn runs with the GIL, inside\n"
          "a wait of this client (host_threads=0) or on one of its worker threads. If it raises,\n"
          "the task fails (errno: an OSError's, else EIO) and the GraphError's __cause__ is the\n"
          "exception. Returns the task's id." },
        { "submit", (PyCFunction)graph_submit, METH_NOARGS,
          "submit($self, /)\n--\n\n"
          "submit() -> hbg.Handle\n\nHand the graph to hbgd; wait on the handle. Waits (without the GIL)\n"
          "while too many graphs are in flight." },
        { "run", (PyCFunction)(void (*)(void))graph_run, METH_VARARGS | METH_KEYWORDS,
          "run($self, /, timeout=None)\n--\n\n"
          "run(timeout=None) -> None\n\nsubmit() and wait(timeout)." },
        { NULL, NULL, 0, NULL },
};

static PySequenceMethods graph_as_sequence = {
        .sq_length = (lenfunc)graph_len,
};

PyTypeObject hbgpy_GraphType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hbg.Graph",
        .tp_basicsize = sizeof(GraphObject),
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "A task graph being built (client.graph(), or rec.graph of a recording).\n\n"
                  "len(graph) is the number of tasks added. A graph dropped with tasks not submitted\n"
                  "is submitted then (hbgd has its tasks already).",
        .tp_dealloc = (destructor)graph_dealloc,
        .tp_repr = (reprfunc)graph_repr,
        .tp_methods = graph_methods,
        .tp_as_sequence = &graph_as_sequence,
};
