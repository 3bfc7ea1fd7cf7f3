/* SPDX-License-Identifier: MIT */
/*
 * hbg.Recording: a graph recorded once and launched many times.
 */
#include "hbgpy.h"

#include <pthread.h>

enum recording_state { REC_NEW, REC_OPEN, REC_DONE, REC_FAILED };

typedef struct {
        PyObject_HEAD
        ClientObject *client;
        PyObject *graph;                /* its hbg.Graph, once entered */
        enum recording_state state;
        uint32_t id;
} RecordingObject;

PyObject *hbgpy_client_record(ClientObject *cl, PyObject *unused) {
        (void)unused;
        if (hbgpy_client_check(cl, "Client.record") < 0)
                return NULL;
        RecordingObject *r = PyObject_New(RecordingObject, &hbgpy_RecordingType);
        if (!r)
                return NULL;
        Py_INCREF(cl);
        r->client = cl;
        r->graph = NULL;
        r->state = REC_NEW;
        r->id = 0;
        return (PyObject *)r;
}

static PyObject *recording_enter(RecordingObject *r, PyObject *unused) {
        static const char what[] = "Recording.__enter__";
        (void)unused;
        ClientObject *cl = r->client;
        if (r->state != REC_NEW) {
                PyErr_Format(PyExc_RuntimeError, "%s: a Recording is used once", what);
                return NULL;
        }
        PyObject *g = hbgpy_graph_new_recording(cl);
        if (!g)
                return NULL;
        int held = hbgpy_client_enter(cl, what, 0);
        if (held < 0) {
                Py_DECREF(g);
                return NULL;
        }
        if (cl->recording || cl->active_graph) {
                PyErr_Format(PyExc_RuntimeError, "%s: %s", what,
                             cl->recording ? "another recording of this client is open"
                                           : "a graph of this client has tasks not submitted; submit it first");
                hbgpy_client_leave(cl, held);
                Py_DECREF(g);
                return NULL;
        }
        int err = hbg_graph_record_begin(cl->c);
        if (err < 0) {
                hbgpy_raise(cl, err, what);
                hbgpy_client_leave(cl, held);
                Py_DECREF(g);
                return NULL;
        }
        cl->recording = 1;
        hbgpy_client_leave(cl, held);
        r->graph = g;
        r->state = REC_OPEN;
        Py_INCREF(r);
        return (PyObject *)r;
}

static PyObject *recording_exit(RecordingObject *r, PyObject *args) {
        static const char what[] = "Recording.__exit__";
        PyObject *et = Py_None, *ev = Py_None, *tb = Py_None;
        if (!PyArg_UnpackTuple(args, "__exit__", 0, 3, &et, &ev, &tb))
                return NULL;
        if (r->state != REC_OPEN)
                Py_RETURN_FALSE;
        ClientObject *cl = r->client;
        hbgpy_graph_recorded(r->graph);
        r->state = REC_FAILED;
        int held = hbgpy_client_enter(cl, what, 0);
        if (held < 0) {
                cl->recording = 0;
                return et == Py_None ? NULL : (PyErr_Clear(), Py_NewRef(Py_False));
        }
        uint32_t id = 0;
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = hbg_graph_record_end(cl->c, &id); /* sends it to hbgd: one round trip */
        Py_END_ALLOW_THREADS
        cl->recording = 0;
        if (err == 0) {
                r->state = REC_DONE;
                r->id = id;
        } else if (et == Py_None) {
                const char *why = hbg_last_error(cl->c);
                const char *message = why && *why ? why : hbg_strerror(err);
                PyObject *exc = hbgpy_graph_error_new(PyUnicode_FromString(message), Py_NewRef(Py_None),
                                                      Py_NewRef(Py_None), "", message, -err);
                if (exc) {
                        PyErr_SetObject(hbgpy_GraphError, exc);
                        Py_DECREF(exc);
                }
                hbgpy_client_leave(cl, held);
                return NULL;
        }
        hbgpy_client_leave(cl, held);
        Py_RETURN_FALSE; /* an exception of the body goes on */
}

static PyObject *recording_launch(RecordingObject *r, PyObject *unused) {
        static const char what[] = "Recording.launch";
        (void)unused;
        ClientObject *cl = r->client;
        if (r->state != REC_DONE) {
                PyErr_Format(PyExc_RuntimeError, "%s: %s", what,
                             r->state == REC_FAILED ? "the recording failed"
                                                    : "the recording is not finished (leave the with block first)");
                return NULL;
        }
        int held = hbgpy_client_enter(cl, what, 0);
        if (held < 0)
                return NULL;
        if (cl->active_graph || cl->recording) {
                PyErr_Format(PyExc_RuntimeError, "%s: %s", what,
                             cl->recording ? "a recording of this client is open"
                                           : "a graph of this client has tasks not submitted; submit it first");
                hbgpy_client_leave(cl, held);
                return NULL;
        }
        uint64_t graph;
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = hbg_graph_launch(cl->c, r->id, &graph);
        Py_END_ALLOW_THREADS
        if (err < 0) {
                hbgpy_raise(cl, err, what);
                hbgpy_client_leave(cl, held);
                return NULL;
        }
        PyObject *dropped = hbgpy_host_calls_sweep(cl);
        hbgpy_client_leave(cl, held);
        Py_XDECREF(dropped);
        return hbgpy_handle_new(cl, graph);
}

static void recording_dealloc(RecordingObject *r) {
        ClientObject *cl = r->client;
        if (r->state == REC_OPEN && cl) {
                /* Dropped inside its with block (a generator left
                 * unfinished): end it, or the client's adds would go on
                 * being recorded. */
                if (cl->c && !hbgpy_client_foreign(cl) && !hbgpy_client_busy_here(cl) &&
                    pthread_mutex_trylock(&cl->lock) == 0) {
                        uint32_t id;
                        (void)hbg_graph_record_end(cl->c, &id);
                        pthread_mutex_unlock(&cl->lock);
                } else {
                        cl->orphan_recording = 1; /* the client's next call ends it */
                }
                cl->recording = 0;
        }
        Py_XDECREF(r->graph);
        Py_XDECREF(r->client);
        Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *recording_get_graph(RecordingObject *r, void *unused) {
        (void)unused;
        if (!r->graph) {
                PyErr_SetString(PyExc_RuntimeError, "Recording.graph: enter the recording first (with ... as rec)");
                return NULL;
        }
        return Py_NewRef(r->graph);
}

static PyObject *recording_get_id(RecordingObject *r, void *unused) {
        (void)unused;
        if (r->state != REC_DONE)
                Py_RETURN_NONE;
        return PyLong_FromUnsignedLong(r->id);
}

static PyMethodDef recording_methods[] = {
        { "__enter__", (PyCFunction)recording_enter, METH_NOARGS,
          "__enter__($self, /)\n--\n\nThe recording itself: add to rec.graph." },
        { "__exit__", (PyCFunction)recording_exit, METH_VARARGS,
          "__exit__($self, exc_type=None, exc_value=None, traceback=None, /)\n--\n\nEnd the recording (hbgd validates it)." },
        { "launch", (PyCFunction)recording_launch, METH_NOARGS,
          "launch($self, /)\n--\n\n"
          "launch() -> hbg.Handle\n\nRun the recorded graph once more: its tasks as if added now (after the\n"
          "earlier users of their arrays), for a record per 64 tasks instead of one per task." },
        { NULL, NULL, 0, NULL },
};

static PyGetSetDef recording_getset[] = {
        { "graph", (getter)recording_get_graph, NULL, "The hbg.Graph whose add() calls are recorded.", NULL },
        { "id", (getter)recording_get_id, NULL, "hbgd's number of the recording (None until it ended).", NULL },
        { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject hbgpy_RecordingType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hbg.Recording",
        .tp_basicsize = sizeof(RecordingObject),
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "A graph recorded once and launched many times (client.record()).\n\n"
                  "    with client.record() as rec:\n"
                  "        rec.graph.add(\"add_f32\", a, b, a)\n"
                  "    rec.launch().wait()\n\n"
                  "hbgd validates the recorded tasks once, when the with block ends (hbg.GraphError if\n"
                  "it refuses one). Arrays a recording uses are kept until the client disconnects.",
        .tp_dealloc = (destructor)recording_dealloc,
        .tp_methods = recording_methods,
        .tp_getset = recording_getset,
};
