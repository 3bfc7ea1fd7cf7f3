/* SPDX-License-Identifier: MIT */
/*
 * The _hbg module: its types, hbg.GraphError, and how a negative errno of
 * libhbgclient becomes a Python exception.
 */
#define HBGPY_IMPORTS_NUMPY
#include "hbgpy.h"

#include <errno.h>
#include <string.h>

PyObject *hbgpy_GraphError;

/* The exception class for err: the OSError subclasses Python users catch
 * by errno (OSError(err, msg) picks them), a few builtin ones where the
 * errno says what kind of mistake it was. */
static PyObject *exception_for(int err) {
        switch (err) {
        case EINVAL:
        case ENOENT:
        case E2BIG:
        case EOVERFLOW:
                return PyExc_ValueError;
        case ENOMEM:
                return PyExc_MemoryError;
        case EDEADLK:
        case EBUSY:
                return PyExc_RuntimeError;
        default:
                return NULL;
        }
}

PyObject *hbgpy_raise_msg(int err, const char *msg) {
        if (err < 0)
                err = -err;
        PyObject *type = exception_for(err);
        if (type) {
                PyErr_SetString(type, msg);
                return NULL;
        }
        PyObject *args = Py_BuildValue("(is)", err, msg);
        if (args) {
                PyErr_SetObject(PyExc_OSError, args);
                Py_DECREF(args);
        }
        return NULL;
}

PyObject *hbgpy_index(PyObject *v) {
        if (!v || PyBool_Check(v) || !PyIndex_Check(v))
                return NULL;
        PyObject *i = PyNumber_Index(v);
        if (!i)
                PyErr_Clear();
        return i;
}

PyObject *hbgpy_raise(ClientObject *cl, int err, const char *what) {
        const char *why = cl && cl->c ? hbg_last_error(cl->c) : "";
        if (!why || !*why)
                why = hbg_strerror(err);
        char msg[512];
        snprintf(msg, sizeof(msg), "%s: %s", what, why);
        return hbgpy_raise_msg(err, msg);
}

static void set_attr(PyObject *o, const char *name, PyObject *v) {
        if (v) {
                if (PyObject_SetAttrString(o, name, v) < 0)
                        PyErr_Clear();
                Py_DECREF(v);
        } else {
                PyErr_Clear();
        }
}

PyObject *hbgpy_graph_error_new(PyObject *text, PyObject *graph, PyObject *task, const char *kernel,
                                const char *message, int errnum) {
        /* Any of them NULL: its MemoryError stays the exception. */
        PyObject *exc = text && graph && task ? PyObject_CallOneArg(hbgpy_GraphError, text) : NULL;
        Py_XDECREF(text);
        if (!exc) {
                Py_XDECREF(graph);
                Py_XDECREF(task);
                return NULL;
        }
        set_attr(exc, "graph", graph);
        set_attr(exc, "task", task);
        set_attr(exc, "kernel", PyUnicode_FromString(kernel));
        set_attr(exc, "message", PyUnicode_FromString(message));
        set_attr(exc, "errno", PyLong_FromLong(errnum));
        return exc;
}

static PyObject *mod_version(PyObject *self, PyObject *unused) {
        (void)self;
        (void)unused;
        return PyUnicode_FromString(hbg_version());
}

static PyMethodDef module_methods[] = {
        { "version", mod_version, METH_NOARGS,
          "version($module, /)\n--\n\nversion() -> str\n\nThe version of the libhbgclient this module runs with, \"MAJOR.MINOR.PATCH\"." },
        { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module_def = {
        PyModuleDef_HEAD_INIT,
        .m_name = "hbg._hbg",
        .m_doc = "The C extension of the hbg package (use the package hbg, not this module).",
        .m_size = -1,
        .m_methods = module_methods,
};

static const char graph_error_doc[] =
        "A graph failed (or hbgd refused a recording).\n\n"
        "Attributes: graph (its number, None for a recording), task (the first failing\n"
        "task's id, None if unknown), kernel (its kernel's name, '' for a task without\n"
        "kernel), message (hbgd's or the library's reason), errno (a positive errno,\n"
        "e.g. errno.ETIME when hbgd's stall limit failed it). When a host function\n"
        "raised, its exception is the __cause__.";

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
        if (PyType_Ready(t) < 0)
                return -1;
        Py_INCREF(t);
        if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
                Py_DECREF(t);
                return -1;
        }
        return 0;
}

PyMODINIT_FUNC PyInit__hbg(void); /* found by name by the interpreter */
PyMODINIT_FUNC PyInit__hbg(void) {
        import_array();
        if (hbg_version_check(HBG_VERSION_MAJOR, HBG_VERSION_MINOR) < 0) {
                PyErr_Format(PyExc_ImportError, "libhbgclient %s is older than the %d.%d this module needs",
                             hbg_version(), HBG_VERSION_MAJOR, HBG_VERSION_MINOR);
                return NULL;
        }
        if (hbgpy_fork_watch() < 0)
                return PyErr_NoMemory();
        PyObject *m = PyModule_Create(&module_def);
        if (!m)
                return NULL;
        if (add_type(m, &hbgpy_ClientType, "Client") < 0 || add_type(m, &hbgpy_GraphType, "Graph") < 0 ||
            add_type(m, &hbgpy_HandleType, "Handle") < 0 || add_type(m, &hbgpy_RecordingType, "Recording") < 0 ||
            PyType_Ready(&hbgpy_HeapBlockType) < 0 || PyType_Ready(&hbgpy_HostCallType) < 0)
                goto fail;
        hbgpy_GraphError = PyErr_NewExceptionWithDoc("hbg.GraphError", graph_error_doc, PyExc_RuntimeError, NULL);
        if (!hbgpy_GraphError)
                goto fail;
        Py_INCREF(hbgpy_GraphError);
        if (PyModule_AddObject(m, "GraphError", hbgpy_GraphError) < 0) {
                Py_DECREF(hbgpy_GraphError);
                goto fail;
        }
        if (hbgpy_kernels_init(m) < 0 || hbgpy_host_init(m) < 0)
                goto fail;
        if (PyModule_AddIntConstant(m, "MAX_TASK_TENSORS", HBG_MAX_TASK_TENSORS) < 0 ||
            PyModule_AddIntConstant(m, "MAX_TASK_SCALARS", HBG_MAX_TASK_SCALARS) < 0 ||
            PyModule_AddIntConstant(m, "MAX_TASK_DEPS", HBG_MAX_TASK_DEPS) < 0 ||
            PyModule_AddIntConstant(m, "MAX_HOST_THREADS", HBG_MAX_HOST_THREADS) < 0)
                goto fail;
        return m;
fail:
        Py_DECREF(m);
        return NULL;
}
