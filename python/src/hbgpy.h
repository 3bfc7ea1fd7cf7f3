/* SPDX-License-Identifier: MIT */
/*
 * The hbg extension module (_hbg): Python over libhbgclient's public API.
 *
 * Locking. A hbg_client is used by one thread at a time, and the GIL is
 * released around everything that may wait. Each Client therefore has a
 * mutex taken around every call into the library (client_enter() /
 * client_leave()); a thread that finds it taken waits for it without the
 * GIL, so the holder can take the GIL back (a host function needs it).
 * Lock order: the client mutex, then the GIL; never block on the mutex
 * while holding the GIL.
 *
 * Lifetimes. Every array made by a client holds a HeapBlock, which holds
 * the Client: close() ends the session at once when no such array is
 * alive, else when the last one goes (the arrays stay valid until then).
 */
#ifndef HBGPY_H
#define HBGPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <hbg/hbg.h>

/* Every translation unit shares the numpy API table module.c imports. */
#define PY_ARRAY_UNIQUE_SYMBOL hbgpy_numpy_api
#ifndef HBGPY_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* One kernel of the connected hbgd, as graph.add() checks its arguments. */
struct hbgpy_kernel {
        int id;
        unsigned n_tensors, n_scalars;
        enum hbg_dir dirs[HBG_MAX_TASK_TENSORS];
        enum hbg_scalar_type scalar_types[HBG_MAX_TASK_SCALARS];
        int in_place;
        int f32_only;           /* name ends in _f32: float32 arrays only */
        PyObject *name;         /* str */
        PyObject *tensor_names[HBG_MAX_TASK_TENSORS]; /* str, for messages */
        PyObject *scalar_names[HBG_MAX_TASK_SCALARS];
};

/* A tensor whose array died while the client was busy: freed later. */
struct hbgpy_deferred_free {
        hbg_tensor t;
};

typedef struct ClientObject {
        PyObject_HEAD
        hbg_client *c;                  /* NULL once disconnected */
        pthread_mutex_t lock;           /* around every call on c */
        pthread_t owner;                /* the thread holding lock, when owned (both under the GIL) */
        int owned;
        int inline_hosts;               /* host functions of c running inside the owner's call */
        pid_t pid;                      /* the process that connected */
        unsigned forks;                 /* hbgpy_forks then: differs in a child */
        int closed;                     /* close() was called */
        int host_threads;
        uint64_t window;                /* the task window (D) */
        Py_ssize_t live_blocks;         /* HeapBlocks of this client alive */
        struct hbgpy_kernel *kernels;
        size_t n_kernels;
        PyObject *kernel_by_name;       /* dict str -> int index */
        PyObject *last_kernel_key;      /* the str last looked up (a loop adds the same kernel) */
        const struct hbgpy_kernel *last_kernel;
        PyObject *active_graph;         /* Graph with tasks not submitted (borrowed) */
        int recording;                  /* a Recording is open */
        int orphan_recording;           /* one dropped open while the client was busy: end it */
        PyObject *host_calls;           /* list of HostCall of graphs, oldest first */
        PyObject *recorded_calls;       /* HostCalls of recordings: until disconnect */
        PyObject *last_host_exc;        /* latest exception a host function raised */
        PyObject *host_interrupt;       /* a KeyboardInterrupt or SystemExit one raised, not yet raised again */
        struct hbgpy_deferred_free *deferred;
        size_t n_deferred, cap_deferred;
        PyObject *weakrefs;
} ClientObject;

/* The owner of one hbg_tensor_alloc() range; the base of its arrays. */
typedef struct {
        PyObject_HEAD
        ClientObject *client;
        hbg_tensor t;
        char *data;
} HeapBlockObject;

extern PyTypeObject hbgpy_ClientType, hbgpy_HeapBlockType, hbgpy_GraphType, hbgpy_HandleType,
        hbgpy_RecordingType, hbgpy_HostCallType;
extern PyObject *hbgpy_GraphError;
extern PyTypeObject *hbgpy_KernelType;

/* module.c */
PyObject *hbgpy_raise(ClientObject *cl, int err, const char *what);
/* v as a Python int (a new reference) when it is an integer, int or not
 * (a numpy integer: __index__), but not a bool; else NULL, no exception
 * set. */
PyObject *hbgpy_index(PyObject *v);
PyObject *hbgpy_raise_msg(int err, const char *msg);
/* The hbg.GraphError for text, with the attributes its doc lists: text,
 * graph and task are new references (graph or task None when unknown),
 * taken over, NULL when making them failed. NULL with an exception set if
 * it cannot be made. */
PyObject *hbgpy_graph_error_new(PyObject *text, PyObject *graph, PyObject *task, const char *kernel,
                                const char *message, int errnum);

/* client.c */
/* Counts fork()s into this process's lineage (a pthread_atfork child
 * handler): a client of another process is told without a getpid()
 * system call per call. */
extern unsigned hbgpy_forks;
int hbgpy_fork_watch(void);
static inline int hbgpy_client_foreign(const struct ClientObject *cl) {
        return cl->forks != hbgpy_forks;
}
/* 0: locked; 1: this thread runs a host function of cl inside a call of
 * cl (a wait), the lock is its own already; -1: exception set (also for
 * any other re-entry of the thread holding the lock: a __del__, a weakref
 * callback or another client's host function run inside a call of cl).
 * Pass it to leave. */
int hbgpy_client_enter(ClientObject *cl, const char *what, int host_ok);
/* host_ok for hbgpy_client_enter(): what a host function of the client may
 * do inside its wait (allocate, read the kernel table); anything else is a
 * RuntimeError there. */
#define HBGPY_HOST_OK 1
/* Host functions running on this thread (any client's), nested or not. */
int hbgpy_host_depth(void);
void hbgpy_client_leave(ClientObject *cl, int held);
int hbgpy_client_check(ClientObject *cl, const char *what);
void hbgpy_client_block_gone(ClientObject *cl);
ClientObject *hbgpy_host_client(void);
/* This thread holds cl's lock: a call of cl is below on its stack. */
static inline int hbgpy_client_held_here(const ClientObject *cl) {
        return cl->owned && pthread_equal(cl->owner, pthread_self());
}
/* This thread is inside a call of cl or one of its host functions:
 * what would enter cl (or end it) must not run here. */
static inline int hbgpy_client_busy_here(const ClientObject *cl) {
        return hbgpy_client_held_here(cl) || hbgpy_host_client() == cl;
}

/* heap.c */
PyObject *hbgpy_client_empty(ClientObject *cl, PyObject *args, PyObject *kwds);
PyObject *hbgpy_client_zeros(ClientObject *cl, PyObject *args, PyObject *kwds);
PyObject *hbgpy_client_asarray(ClientObject *cl, PyObject *args, PyObject *kwds);
int hbgpy_array_tensor(ClientObject *cl, PyObject *obj, int write, int f32_only, PyObject *what,
                       hbg_tensor *ret);
void hbgpy_free_deferred(ClientObject *cl);

/* graph.c */
PyObject *hbgpy_client_graph(ClientObject *cl, PyObject *unused);
/* A recording's graph: takes tasks while recorded, until recorded. */
PyObject *hbgpy_graph_new_recording(ClientObject *cl);
void hbgpy_graph_recorded(PyObject *graph);

/* handle.c */
PyObject *hbgpy_handle_new(ClientObject *cl, uint64_t graph);
/* Handle.wait(timeout): None, or NULL with the graph's error raised. */
PyObject *hbgpy_handle_wait(PyObject *handle, PyObject *timeout);

/* recording.c */
PyObject *hbgpy_client_record(ClientObject *cl, PyObject *unused);

/* host.c */
int hbgpy_host_fn(void *token);
/* A KeyboardInterrupt or SystemExit that a host function of cl raised
 * (Ctrl-C while it ran inside a wait, or sys.exit() in it) fails its task
 * with -EINTR and is raised again by the next Handle.wait() or
 * Handle.done() of cl (the call it ran in, when it ran inside one of
 * those), or by an add that fails: -1 with it raised, else 0. */
int hbgpy_host_interrupt_raise(ClientObject *cl);
PyObject *hbgpy_host_call_new(ClientObject *cl, PyObject *fn, int recorded, void **ret_userdata);
void hbgpy_host_calls_set_task(PyObject *call, uint64_t task);
void hbgpy_host_calls_submitted(ClientObject *cl, uint64_t graph);
/* Drops the calls of finished graphs; returns them (a new list, or NULL)
 * for the caller to release once it let go of the lock: releasing them
 * may run any Python code (__del__, weakref callbacks). */
PyObject *hbgpy_host_calls_sweep(ClientObject *cl);
void hbgpy_host_calls_forget_code(ClientObject *cl);
PyObject *hbgpy_host_exception_for(ClientObject *cl, uint64_t graph, uint64_t task);
void hbgpy_host_calls_drop_all(ClientObject *cl);
int hbgpy_host_init(PyObject *module);

/* kernels.c */
int hbgpy_kernels_load(ClientObject *cl);
void hbgpy_kernels_free(ClientObject *cl);
const struct hbgpy_kernel *hbgpy_kernel_lookup(ClientObject *cl, PyObject *kernel);
PyObject *hbgpy_client_kernels(ClientObject *cl, PyObject *unused);
int hbgpy_kernels_init(PyObject *module);

#endif
