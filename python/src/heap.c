/* SPDX-License-Identifier: MIT */
/*
 * numpy arrays in the session heap: a HeapBlock owns one tensor of
 * hbg_tensor_alloc() and is the base of the arrays made on it; an array
 * passed to a task becomes the tensor of its bytes.
 */
#include "hbgpy.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- blocks */

static void defer_free(ClientObject *cl, hbg_tensor t) {
        if (cl->n_deferred == cl->cap_deferred) {
                size_t cap = cl->cap_deferred ? 2 * cl->cap_deferred : 16;
                void *v = realloc(cl->deferred, cap * sizeof(*cl->deferred));
                if (!v)
                        return; /* the bytes stay taken until the session ends */
                cl->deferred = v;
                cl->cap_deferred = cap;
        }
        cl->deferred[cl->n_deferred++].t = t;
}

/* With cl's lock held (or as its host function on the waiting thread). */
void hbgpy_free_deferred(ClientObject *cl) {
        size_t n = cl->n_deferred;
        cl->n_deferred = 0;
        for (size_t i = 0; i < n; i++)
                (void)hbg_tensor_free(cl->c, cl->deferred[i].t); /* -EBUSY: a recording keeps it */
}

/* The last array on the block is gone: its bytes go back to the heap,
 * at once if the client is free, else at its next call (the holder may be
 * this very thread, inside a wait running a host function). */
static void heap_block_dealloc(HeapBlockObject *b) {
        ClientObject *cl = b->client;
        if (cl) {
                if (cl->c && !hbgpy_client_foreign(cl)) {
                        int freed = 0;
                        if (!hbgpy_client_busy_here(cl) && pthread_mutex_trylock(&cl->lock) == 0) {
                                freed = hbg_tensor_free(cl->c, b->t) != -EDEADLK;
                                pthread_mutex_unlock(&cl->lock);
                        }
                        if (!freed)
                                defer_free(cl, b->t);
                }
                hbgpy_client_block_gone(cl);
                Py_DECREF(cl);
        }
        Py_TYPE(b)->tp_free((PyObject *)b);
}

PyTypeObject hbgpy_HeapBlockType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hbg._HeapBlock",
        .tp_basicsize = sizeof(HeapBlockObject),
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "The session-heap memory under hbg arrays (their .base).",
        .tp_dealloc = (destructor)heap_block_dealloc,
};

/* ---------------------------------------------------------------- arrays */

/* A new array of shape and descr (stolen) in cl's heap, zeroed if asked. */
static PyObject *new_array(ClientObject *cl, int nd, npy_intp *dims, PyArray_Descr *descr, int zero,
                           const char *what) {
        if (PyDataType_REFCHK(descr)) {
                PyErr_Format(PyExc_TypeError,
                             "%s: dtype %R holds Python objects; the session heap holds plain data only", what,
                             (PyObject *)descr);
                Py_DECREF(descr);
                return NULL;
        }
        size_t bytes = (size_t)descr->elsize;
        for (int i = 0; i < nd; i++) {
                if (dims[i] < 0) {
                        PyErr_Format(PyExc_ValueError, "%s: negative dimension %zd in shape", what,
                                     (Py_ssize_t)dims[i]);
                        Py_DECREF(descr);
                        return NULL;
                }
                if (__builtin_mul_overflow(bytes, (size_t)dims[i], &bytes)) {
                        PyErr_Format(PyExc_ValueError, "%s: the shape is too large", what);
                        Py_DECREF(descr);
                        return NULL;
                }
        }
        int held = hbgpy_client_enter(cl, what, HBGPY_HOST_OK);
        if (held < 0) {
                Py_DECREF(descr);
                return NULL;
        }
        hbg_tensor t;
        int err = hbg_tensor_alloc(cl->c, bytes ? bytes : 1, &t);
        char *data = err == 0 ? hbg_tensor_data(cl->c, t) : NULL;
        if (err < 0 || !data) {
                hbgpy_raise(cl, err < 0 ? err : -EPROTO, what);
                hbgpy_client_leave(cl, held);
                Py_DECREF(descr);
                return NULL;
        }
        hbgpy_client_leave(cl, held);
        HeapBlockObject *b = PyObject_New(HeapBlockObject, &hbgpy_HeapBlockType);
        if (!b) {
                defer_free(cl, t);
                Py_DECREF(descr);
                return NULL;
        }
        Py_INCREF(cl);
        b->client = cl;
        b->t = t;
        b->data = data;
        cl->live_blocks++;
        if (zero)
                memset(data, 0, bytes);
        PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, data, NPY_ARRAY_CARRAY, NULL);
        if (!arr) {
                Py_DECREF(b);
                return NULL;
        }
        if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)b) < 0) { /* steals b */
                Py_DECREF(arr);
                return NULL;
        }
        return arr;
}

/* numpy's converter of argument `arg` failed: its error again, of the same
 * type, saying which argument ("Client.empty: shape: ..."). */
static void arg_error(const char *what, const char *arg) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *msg = value ? PyObject_Str(value) : NULL;
        if (msg)
                PyErr_Format(type ? type : PyExc_TypeError, "%s: %s: %U", what, arg, msg);
        Py_XDECREF(msg);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
}

/* dtype (NULL or None: float32) as numpy's converter takes it, its error
 * naming the argument. */
static int dtype_arg(PyObject *dtype, PyArray_Descr **ret, const char *what) {
        *ret = NULL;
        if (dtype && !PyArray_DescrConverter2(dtype, ret)) {
                arg_error(what, "dtype");
                return -1;
        }
        return 0;
}

static PyObject *shaped(ClientObject *cl, PyObject *args, PyObject *kwds, int zero, const char *fmt,
                        const char *what) {
        static char *kwlist[] = { "shape", "dtype", NULL };
        PyArray_Dims shape = { NULL, 0 };
        PyArray_Descr *descr = NULL;
        PyObject *shape_arg, *dtype = NULL;
        if (!PyArg_ParseTupleAndKeywords(args, kwds, fmt, kwlist, &shape_arg, &dtype))
                return NULL;
        if (!PyArray_IntpConverter(shape_arg, &shape)) {
                arg_error(what, "shape");
                return NULL;
        }
        if (dtype_arg(dtype, &descr, what) < 0) {
                PyDimMem_FREE(shape.ptr);
                return NULL;
        }
        if (!descr)
                descr = PyArray_DescrFromType(NPY_FLOAT32);
        PyObject *arr = new_array(cl, shape.len, shape.ptr, descr, zero, what);
        PyDimMem_FREE(shape.ptr);
        return arr;
}

PyObject *hbgpy_client_empty(ClientObject *cl, PyObject *args, PyObject *kwds) {
        return shaped(cl, args, kwds, 0, "O|O:empty", "Client.empty");
}

PyObject *hbgpy_client_zeros(ClientObject *cl, PyObject *args, PyObject *kwds) {
        return shaped(cl, args, kwds, 1, "O|O:zeros", "Client.zeros");
}

/* The HeapBlock under arr, if it is one of cl's: numpy keeps a view's
 * base at the array that owns the memory, or at its non-array owner. */
static HeapBlockObject *block_of(PyArrayObject *arr) {
        PyObject *base = PyArray_BASE(arr);
        for (int depth = 0; base && PyArray_Check(base) && depth < 64; depth++)
                base = PyArray_BASE((PyArrayObject *)base);
        return base && Py_TYPE(base) == &hbgpy_HeapBlockType ? (HeapBlockObject *)base : NULL;
}

PyObject *hbgpy_client_asarray(ClientObject *cl, PyObject *args, PyObject *kwds) {
        static char *kwlist[] = { "array", "dtype", NULL };
        PyObject *obj, *dtype = NULL;
        PyArray_Descr *descr = NULL;
        if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:asarray", kwlist, &obj, &dtype) ||
            dtype_arg(dtype, &descr, "Client.asarray") < 0)
                return NULL;
        if (hbgpy_client_check(cl, "Client.asarray") < 0) {
                Py_XDECREF(descr);
                return NULL;
        }
        if (PyArray_Check(obj)) {
                PyArrayObject *a = (PyArrayObject *)obj;
                HeapBlockObject *b = block_of(a);
                if (b && b->client == cl && PyArray_IS_C_CONTIGUOUS(a) &&
                    (!descr || PyArray_EquivTypes(descr, PyArray_DESCR(a)))) {
                        Py_XDECREF(descr);
                        Py_INCREF(obj);
                        return obj;
                }
        }
        PyArrayObject *src = (PyArrayObject *)PyArray_FromAny(obj, descr, 0, 0, NPY_ARRAY_FORCECAST, NULL); /* steals descr; casts as numpy.asarray */
        if (!src)
                return NULL;
        PyArray_Descr *d = PyArray_DESCR(src);
        Py_INCREF(d);
        PyObject *dst = new_array(cl, PyArray_NDIM(src), PyArray_DIMS(src), d, 0, "Client.asarray");
        if (dst && PyArray_CopyInto((PyArrayObject *)dst, src) < 0)
                Py_CLEAR(dst);
        Py_DECREF(src);
        return dst;
}

/* ---------------------------------------------------------------- tensors */

static const char *dir_word(int write) {
        return write ? "written" : "read";
}

/* obj as the tensor of its bytes for a task of cl: a C-contiguous array
 * in cl's heap, writable if the task writes it, float32 for a _f32
 * kernel. `what` names the argument in messages (a str). */
int hbgpy_array_tensor(ClientObject *cl, PyObject *obj, int write, int f32_only, PyObject *what,
                       hbg_tensor *ret) {
        if (!PyArray_Check(obj)) {
                PyErr_Format(PyExc_TypeError,
                             "%U must be a numpy array of the session heap (client.empty(), zeros(), "
                             "asarray()), not %.80s",
                             what, Py_TYPE(obj)->tp_name);
                return -1;
        }
        PyArrayObject *a = (PyArrayObject *)obj;
        HeapBlockObject *b = block_of(a);
        if (!b || b->client != cl) {
                PyErr_Format(PyExc_ValueError,
                             "%U is not in this client's session heap (client.asarray(x) copies it there)", what);
                return -1;
        }
        if (!PyArray_IS_C_CONTIGUOUS(a)) {
                PyErr_Format(PyExc_ValueError, "%U must be C-contiguous (a task takes a range of bytes)", what);
                return -1;
        }
        if (f32_only && PyArray_TYPE(a) != NPY_FLOAT32) {
                PyErr_Format(PyExc_TypeError, "%U must be float32, not %R", what, (PyObject *)PyArray_DESCR(a));
                return -1;
        }
        if (write && !PyArray_ISWRITEABLE(a)) {
                PyErr_Format(PyExc_ValueError, "%U is %s by the task but is read-only", what, dir_word(write));
                return -1;
        }
        char *p = PyArray_DATA(a);
        npy_intp n = PyArray_NBYTES(a);
        if (n <= 0) {
                PyErr_Format(PyExc_ValueError, "%U is empty (0 bytes)", what);
                return -1;
        }
        /* A view lies inside its block; checked, not assumed. */
        if (p < b->data || (uint64_t)(p - b->data) + (uint64_t)n > b->t.bytes) {
                PyErr_Format(PyExc_ValueError, "%U is not inside its heap block", what);
                return -1;
        }
        ret->offset = b->t.offset + (uint64_t)(p - b->data);
        ret->bytes = (uint64_t)n;
        return 0;
}
