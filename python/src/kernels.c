/* SPDX-License-Identifier: MIT */
/*
 * The connected hbgd's kernels: read once at connect into what graph.add()
 * checks per task, and listed by client.kernels() as hbg.Kernel.
 */
#include "hbgpy.h"

#include <errno.h>
#include <string.h>

PyTypeObject *hbgpy_KernelType;

static PyStructSequence_Field kernel_fields[] = {
        { "id", "the kernel's id (module kernels from 256)" },
        { "name", "its name, as graph.add() takes it" },
        { "summary", "what it computes, one line" },
        { "module", "the module that defines it, None for a built-in" },
        { "tensors", "its array arguments in order: tuples (name, 'in' | 'out' | 'inout')" },
        { "scalars", "its scalar arguments in order: tuples (name, 'f32' | 'u64' | 'i64')" },
        { "length", "how its arrays' lengths relate: 'any', 'equal' or 'shape'" },
        { "length_rule", "that rule in words" },
        { "in_place", "True: an output may be the very array of an input (numpy's out=)" },
        { "splittable", "True: graph.add(..., blocks=N) splits its work" },
        { NULL, NULL },
};

static PyStructSequence_Desc kernel_desc = {
        "hbg.Kernel",
        "A kernel of the connected hbgd and its signature (client.kernels()).",
        kernel_fields,
        10,
};

int hbgpy_kernels_init(PyObject *module) {
        hbgpy_KernelType = PyStructSequence_NewType(&kernel_desc);
        if (!hbgpy_KernelType)
                return -1;
        Py_INCREF(hbgpy_KernelType);
        if (PyModule_AddObject(module, "Kernel", (PyObject *)hbgpy_KernelType) < 0) {
                Py_DECREF(hbgpy_KernelType);
                return -1;
        }
        return 0;
}

static int ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && strcmp(s + n - k, suffix) == 0;
}

int hbgpy_kernels_load(ClientObject *cl) {
        size_t n = hbg_client_kernel_count(cl->c);
        cl->kernels = calloc(n ? n : 1, sizeof(*cl->kernels));
        cl->kernel_by_name = PyDict_New();
        if (!cl->kernels || !cl->kernel_by_name) {
                PyErr_NoMemory();
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                hbg_kernel_desc d = HBG_KERNEL_DESC_INIT;
                int err = hbg_client_kernel_info(cl->c, i, &d);
                if (err < 0) {
                        hbgpy_raise(cl, err, "hbg.connect: reading the kernel table");
                        return -1;
                }
                struct hbgpy_kernel *k = &cl->kernels[cl->n_kernels++];
                k->id = d.id;
                k->n_tensors = d.n_tensors <= HBG_MAX_TASK_TENSORS ? d.n_tensors : HBG_MAX_TASK_TENSORS;
                k->n_scalars = d.n_scalars <= HBG_MAX_TASK_SCALARS ? d.n_scalars : HBG_MAX_TASK_SCALARS;
                k->in_place = d.in_place;
                k->f32_only = ends_with(d.name, "_f32");
                if (!(k->name = PyUnicode_FromString(d.name)))
                        return -1;
                for (unsigned j = 0; j < k->n_tensors; j++) {
                        k->dirs[j] = d.tensor_dirs[j];
                        k->tensor_names[j] = PyUnicode_FromFormat("argument %u (%s) of %s", j + 1,
                                                                  d.tensor_names[j] ? d.tensor_names[j] : "?", d.name);
                        if (!k->tensor_names[j])
                                return -1;
                }
                for (unsigned j = 0; j < k->n_scalars; j++) {
                        k->scalar_types[j] = d.scalar_types[j];
                        k->scalar_names[j] = PyUnicode_FromFormat("scalar %u (%s) of %s", j + 1,
                                                                  d.scalar_names[j] ? d.scalar_names[j] : "?", d.name);
                        if (!k->scalar_names[j])
                                return -1;
                }
                PyObject *idx = PyLong_FromSize_t(cl->n_kernels - 1);
                int rc = idx ? PyDict_SetItem(cl->kernel_by_name, k->name, idx) : -1;
                Py_XDECREF(idx);
                if (rc < 0)
                        return -1;
        }
        return 0;
}

void hbgpy_kernels_free(ClientObject *cl) {
        for (size_t i = 0; i < cl->n_kernels; i++) {
                struct hbgpy_kernel *k = &cl->kernels[i];
                Py_CLEAR(k->name);
                for (unsigned j = 0; j < HBG_MAX_TASK_TENSORS; j++)
                        Py_CLEAR(k->tensor_names[j]);
                for (unsigned j = 0; j < HBG_MAX_TASK_SCALARS; j++)
                        Py_CLEAR(k->scalar_names[j]);
        }
        Py_CLEAR(cl->last_kernel_key);
        cl->last_kernel = NULL;
        free(cl->kernels);
        cl->kernels = NULL;
        cl->n_kernels = 0;
        Py_CLEAR(cl->kernel_by_name);
}

/* A kernel by name (str), id (int) or hbg.Kernel; NULL with an exception
 * set when unknown or of another type. */
const struct hbgpy_kernel *hbgpy_kernel_lookup(ClientObject *cl, PyObject *kernel) {
        if (kernel == cl->last_kernel_key) /* the very object: a str is immutable */
                return cl->last_kernel;
        if (PyUnicode_Check(kernel)) {
                PyObject *idx = PyDict_GetItemWithError(cl->kernel_by_name, kernel);
                if (idx) {
                        Py_INCREF(kernel);
                        Py_XSETREF(cl->last_kernel_key, kernel);
                        return cl->last_kernel = &cl->kernels[PyLong_AsSize_t(idx)];
                }
                if (!PyErr_Occurred())
                        PyErr_Format(PyExc_ValueError, "unknown kernel %R: client.kernels() lists this hbgd's",
                                     kernel);
                return NULL;
        }
        if (PyLong_Check(kernel) && !PyBool_Check(kernel)) {
                long id = PyLong_AsLong(kernel);
                for (size_t i = 0; i < cl->n_kernels; i++)
                        if (cl->kernels[i].id == id)
                                return &cl->kernels[i];
                if (!PyErr_Occurred())
                        PyErr_Format(PyExc_ValueError, "unknown kernel id %R: client.kernels() lists this hbgd's",
                                     kernel);
                return NULL;
        }
        if (Py_TYPE(kernel) == hbgpy_KernelType)
                return hbgpy_kernel_lookup(cl, PyStructSequence_GetItem(kernel, 1));
        PyErr_Format(PyExc_TypeError, "kernel must be a name (str), an id (int), an hbg.Kernel or None, not %.80s",
                     Py_TYPE(kernel)->tp_name);
        return NULL;
}

static const char *dir_name(enum hbg_dir d) {
        return d == HBG_IN ? "in" : d == HBG_OUT ? "out" : "inout";
}

static const char *scalar_type_name(enum hbg_scalar_type t) {
        return t == HBG_SCALAR_TYPE_F32 ? "f32" : t == HBG_SCALAR_TYPE_I64 ? "i64" : "u64";
}

static const char *length_name(enum hbg_length_rule_kind k) {
        return k == HBG_LENGTH_RULE_EQUAL ? "equal" : k == HBG_LENGTH_RULE_SHAPE ? "shape" : "any";
}

static PyObject *str_or_none(const char *s) {
        if (s)
                return PyUnicode_FromString(s);
        Py_RETURN_NONE;
}

static PyObject *kernel_object(const hbg_kernel_desc *d) {
        PyObject *k = PyStructSequence_New(hbgpy_KernelType);
        PyObject *tensors = PyTuple_New(d->n_tensors), *scalars = PyTuple_New(d->n_scalars);
        if (!k || !tensors || !scalars)
                goto fail;
        for (unsigned j = 0; j < d->n_tensors && j < HBG_MAX_TASK_TENSORS; j++) {
                PyObject *t = Py_BuildValue("(ss)", d->tensor_names[j] ? d->tensor_names[j] : "",
                                            dir_name(d->tensor_dirs[j]));
                if (!t)
                        goto fail;
                PyTuple_SET_ITEM(tensors, j, t);
        }
        for (unsigned j = 0; j < d->n_scalars && j < HBG_MAX_TASK_SCALARS; j++) {
                PyObject *t = Py_BuildValue("(ss)", d->scalar_names[j] ? d->scalar_names[j] : "",
                                            scalar_type_name(d->scalar_types[j]));
                if (!t)
                        goto fail;
                PyTuple_SET_ITEM(scalars, j, t);
        }
        PyObject *items[10] = {
                PyLong_FromLong(d->id),
                PyUnicode_FromString(d->name),
                str_or_none(d->summary),
                str_or_none(d->module),
                tensors,
                scalars,
                PyUnicode_FromString(length_name(d->length)),
                str_or_none(d->length_rule),
                PyBool_FromLong(d->in_place),
                PyBool_FromLong(d->splittable),
        };
        tensors = scalars = NULL;
        int bad = 0;
        for (int i = 0; i < 10; i++) {
                if (!items[i])
                        bad = 1;
                PyStructSequence_SetItem(k, i, items[i] ? items[i] : Py_NewRef(Py_None));
        }
        if (bad)
                goto fail;
        return k;
fail:
        Py_XDECREF(k);
        Py_XDECREF(tensors);
        Py_XDECREF(scalars);
        return NULL;
}

PyObject *hbgpy_client_kernels(ClientObject *cl, PyObject *unused) {
        (void)unused;
        int held = hbgpy_client_enter(cl, "Client.kernels", HBGPY_HOST_OK);
        if (held < 0)
                return NULL;
        size_t n = hbg_client_kernel_count(cl->c);
        PyObject *list = PyList_New(0);
        for (size_t i = 0; list && i < n; i++) {
                hbg_kernel_desc d = HBG_KERNEL_DESC_INIT;
                int err = hbg_client_kernel_info(cl->c, i, &d);
                if (err < 0) {
                        hbgpy_raise(cl, err, "Client.kernels");
                        Py_CLEAR(list);
                        break;
                }
                PyObject *k = kernel_object(&d);
                if (!k || PyList_Append(list, k) < 0)
                        Py_CLEAR(list);
                Py_XDECREF(k);
        }
        hbgpy_client_leave(cl, held);
        return list;
}
