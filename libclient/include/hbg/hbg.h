/* SPDX-License-Identifier: MIT */
/*
 * libhbgclient: build task graphs in hbgd's shared memory and run them.
 *
 *   hbg_client *c;
 *   hbg_connect(&c, NULL);                       // $HBG_SOCKET or /run/hbgd/hbgd.sock
 *   hbg_tensor a, b;
 *   hbg_tensor_alloc(c, 4096 * sizeof(float), &a);
 *   float *pa = hbg_tensor_data(c, a);           // fill it in place
 *   ...
 *   hbg_task t = HBG_TASK_INIT("add_f32");       // kernel by name (or id)
 *   t.n_args = 3;                                // out = a + b
 *   t.args[0].tensor = a; t.args[0].dir = HBG_IN;
 *   t.args[1].tensor = b; t.args[1].dir = HBG_IN;
 *   t.args[2].tensor = a; t.args[2].dir = HBG_OUT;  // in place: a += b
 *   hbg_graph_add(c, &t, NULL);                  // dependencies derived from tensors
 *   uint64_t g; hbg_graph_submit(c, &g);
 *   hbg_graph_wait(c, g, 10000);                 // 0, or the graph's error
 *   hbg_disconnect(c);
 *
 * Errors: every function returns 0 (or a documented non-negative value) or
 * a negative errno; hbg_strerror() explains it, hbg_last_error() gives the
 * daemon's or the library's message for the last failing call of this
 * client. The library never prints.
 *
 * Thread safety: a hbg_client is used by one thread at a time (calls from
 * several threads need the caller's lock), except hbg_client_fd(),
 * hbg_client_host_threads(), hbg_strerror() and hbg_version(), which any
 * thread may call at any time. Different clients are independent. The
 * library's own worker threads (below) run beside that one thread: it may
 * call anything meanwhile, hbg_graph_wait() included.
 *
 * Host functions (hbg_task.host_fn), without workers (host_threads 0, the
 * default), run inside hbg_graph_wait(), hbg_tensor_wait_ready(),
 * hbg_client_process() and the waits of hbg_graph_add()/hbg_graph_submit(),
 * on the calling thread. They may use hbg_tensor_data() (and
 * hbg_tensor_alloc()) but must not add, submit or wait on the same client:
 * those calls fail with -EDEADLK there.
 *
 * Host functions in parallel (since 1.5): with
 * hbg_connect_options.host_threads = N, N library threads run host
 * functions as soon as hbgd makes them ready, up to N at once; the waits
 * then run none (hbg_graph_wait() sleeps until its graph is done, using no
 * CPU), hbg_client_process() still runs ready ones on its caller's thread,
 * and hbg_client_fd() still becomes readable. A host function on a worker
 * may call hbg_tensor_data(), hbg_tensor_slice_f32(), hbg_f32(),
 * hbg_i64(), hbg_kernel_id(), the hbg_client_kernel_*() lookups,
 * hbg_client_fd(), hbg_client_host_threads(), hbg_strerror(),
 * hbg_version() and hbg_last_error(c) (that thread's own message); every
 * other call on the same client, hbg_tensor_alloc() included, fails with
 * -EDEADLK (it would race the caller's thread), and hbg_disconnect() there
 * does nothing. Host functions of independent tasks run concurrently:
 * they must not share unsynchronised data beyond what their tasks'
 * dependencies order. What a host function wrote is visible to the
 * caller's thread once a wait saw its task or graph complete.
 *  - A host function that blocks holds its worker until it returns; the
 *    other workers go on, and hbgd fails its task with -ETIME after the
 *    stall limit (its late result is dropped).
 *  - hbg_disconnect() stops the workers: it waits for the host functions
 *    running to return, then joins the threads. When hbgd goes away,
 *    every waiting call returns -ECONNRESET and no worker stays blocked.
 *  - Signals: the library's threads block every asynchronous signal, so
 *    handlers run on the program's own threads; a fault a host function
 *    causes on a worker (SIGSEGV, SIGBUS, SIGFPE, ...) is delivered there.
 *  - fork(): a child of a process with workers must not use the client
 *    (its threads do not exist in the child); it may exec, exit, or
 *    hbg_disconnect() it, which frees the child's copy and leaves the
 *    parent's session and threads alone. There is no pthread_atfork()
 *    handler.
 */
#ifndef HBG_HBG_H
#define HBG_HBG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#  define HBG_EXPORT __attribute__((visibility("default")))
#else
#  define HBG_EXPORT
#endif

/* The API version this header declares. Within a major version the
 * library only grows (new functions in a new symbol version node, new
 * fields at the end of size-carrying structs): a program built against
 * MAJOR.MINOR runs with any library MAJOR.M, M >= MINOR. */
#define HBG_VERSION_MAJOR 1
#define HBG_VERSION_MINOR 6
#define HBG_VERSION_PATCH 1

typedef struct hbg_client hbg_client;

/* A tensor: a byte range of the session heap. Plain value, copy freely. */
typedef struct hbg_tensor {
        uint64_t offset;
        uint64_t bytes;
} hbg_tensor;

enum hbg_dir { HBG_IN = 1, HBG_OUT = 2, HBG_INOUT = 3 };

enum hbg_lanes {
        HBG_LANES_AIC = 1,      /* the cluster's one "cube" slot */
        HBG_LANES_AIV = 2,      /* one of its two vector slots (the default) */
        HBG_LANES_MIX = 7,      /* a whole cluster, all three lanes */
};

#define HBG_MAX_TASK_TENSORS 8
#define HBG_MAX_TASK_SCALARS 8
#define HBG_MAX_TASK_DEPS 16

/* A host function: runs in the producer process when its task's
 * dependencies are complete. Returns 0 or a negative errno (fails the
 * task's graph). hbgd fails a host task that is not done within the
 * session's stall limit (hbg_connect_options.stall_timeout_ms, else hbgd's
 * stall_timeout_ms, 10 s by default) with -ETIME. */
typedef int (*hbg_host_fn)(void *userdata);

/* Zero-initialised fields of hbg_task keep working across minor versions:
 * `size` is sizeof(hbg_task) of the header the caller was built with
 * (HBG_TASK_INIT sets it; 0 means this version's size), and a later minor
 * version reads fields it added only when `size` covers them.
 *
 * Arguments follow the kernel's signature (libhbgclient(3), KERNELS):
 * args[i].dir must be the kernel's direction for argument i. An output may
 * be the very same range (offset and bytes) as an input for the kernels
 * that run in place (copy_f32, add_f32, mul_f32, axpy_f32: numpy's out=);
 * any other overlap of an output with another argument is refused
 * (-EINVAL, naming both arguments), and elementwise kernels need every
 * tensor exactly as long as the output.
 *
 * Tasks without a kernel (dummies, host_inline, host_fn) take no args and
 * no scalars; a host_fn declares what it touches in host_reads/host_writes
 * instead. Lanes (slots of a cluster, all run on the CPU: docs/GLOSSARY.md):
 * 0 or HBG_LANES_AIV a vector slot, HBG_LANES_AIC the "cube" slot,
 * HBG_LANES_MIX (or any mask of 2+ bits) the same kernel on
 * every lane of the mask, a block using a whole cluster. */
typedef struct hbg_task {
        uint32_t size;          /* sizeof(hbg_task), or 0: see above */
        uint32_t reserved;      /* must be zero */
        const char *kernel;     /* kernel name; NULL with kernel_id 0: dummy */
        uint16_t kernel_id;     /* used when kernel is NULL */
        uint8_t lanes;          /* enum hbg_lanes or a lane mask; 0 = AIV */
        uint16_t blocks;        /* SPMD blocks, 0 = 1 */
        uint8_t n_args, n_scalars, n_deps;
        struct {
                hbg_tensor tensor;
                enum hbg_dir dir;
        } args[HBG_MAX_TASK_TENSORS];
        uint64_t scalars[HBG_MAX_TASK_SCALARS];   /* hbg_f32() for floats */
        uint64_t deps[HBG_MAX_TASK_DEPS];         /* explicit: ids of earlier tasks */
        int has_predicate;      /* run only if predicate (one f32) != 0 */
        hbg_tensor predicate;   /* 4 bytes */
        int host_inline;        /* completes at once, nothing runs */
        hbg_host_fn host_fn;    /* run in this process (a host task) */
        void *host_userdata;    /* kept until host_fn ran (hbg_graph_add(3), Lifetimes) */
        /* host_writes, host_reads: read during hbg_graph_add() only */
        const hbg_tensor *host_writes; /* tensors host_fn writes (for deps) */
        uint8_t n_host_writes;
        const hbg_tensor *host_reads;
        uint8_t n_host_reads;
} hbg_task;

#define HBG_TASK_INIT(name) ((hbg_task){ .size = sizeof(hbg_task), .kernel = (name) })

/* Options of hbg_connect_opts(). Set `size` (HBG_CONNECT_OPTIONS_INIT
 * does) so that later minor versions can add fields at the end: a
 * library older than the caller's header refuses bytes it does not know
 * unless they are zero (-E2BIG). Zeros mean hbgd's defaults; hbgd checks
 * the sizes against its limits (hbgd.conf) and refuses what exceeds them. */
typedef struct hbg_connect_options {
        size_t size;             /* sizeof(hbg_connect_options) */
        const char *socket_path; /* NULL: $HBG_SOCKET, else /run/hbgd/hbgd.sock */
        const char *name;        /* session name in hbgctl; NULL: the program's */
        uint64_t heap_bytes;     /* session heap */
        uint64_t task_window;    /* tasks in flight (D), a power of two */
        uint64_t flag_window;    /* completion flags (F), a power of two <= D */
        uint64_t graph_table;    /* graphs in flight, a power of two */
        uint64_t mailbox;        /* host-task completions in flight, a power of two */
        /* Since 1.2: how long hbgd waits for a host task (or a task never
         * submitted) before it fails its graph with -ETIME. 0: hbgd's
         * stall_timeout_ms; above its [limits] max_stall_timeout_ms the
         * connection is refused (-E2BIG). */
        uint64_t stall_timeout_ms;
        /* Since 1.5: host worker threads the library starts for this
         * client (0: none, host functions run inside the waits and
         * hbg_client_process() on the calling thread, as before 1.5). With
         * N > 0, up to N host functions run at once on the library's
         * threads, as soon as hbgd makes them ready; see "Host functions
         * in parallel" above. At most HBG_MAX_HOST_THREADS (-EINVAL). */
        uint64_t host_threads;
} hbg_connect_options;

#define HBG_MAX_HOST_THREADS 256

#define HBG_CONNECT_OPTIONS_INIT ((hbg_connect_options){ .size = sizeof(hbg_connect_options) })

/* The library's version, "MAJOR.MINOR.PATCH". */
HBG_EXPORT const char *hbg_version(void);
/* 0 when this library serves a program built against major.minor (the
 * same major, a minor at least as new), else -ENOTSUP: not a boolean,
 * test it with `if (HBG_VERSION_CHECK() < 0)`. Call it as
 * HBG_VERSION_CHECK() at start-up. */
HBG_EXPORT int hbg_version_check(unsigned major, unsigned minor);
#define HBG_VERSION_CHECK() hbg_version_check(HBG_VERSION_MAJOR, HBG_VERSION_MINOR)
/* Our message for the errors of this API, else strerror()'s. The string is
 * constant, or (unknown codes) valid until this thread's next call. */
HBG_EXPORT const char *hbg_strerror(int err);
/* The message of the last failing call on c ("" if none). With c NULL:
 * the calling thread's last failing hbg_connect(). */
HBG_EXPORT const char *hbg_last_error(const hbg_client *c);

/* Connect and open a session with hbgd's default sizes: path NULL means
 * $HBG_SOCKET, else /run/hbgd/hbgd.sock. On failure *ret is NULL and
 * hbg_last_error(NULL) says why (hbgd's own message when it refused). */
HBG_EXPORT int hbg_connect(hbg_client **ret, const char *path);
/* hbg_connect() with options (opts NULL: the defaults). -EINVAL for a
 * size smaller than version 1.0's struct. */
HBG_EXPORT int hbg_connect_opts(hbg_client **ret, const hbg_connect_options *opts);
/* Pending graphs are abandoned (the daemon fails them). NULL is fine.
 * Host worker threads are stopped and joined: running host functions
 * finish first. From a host function of c it does nothing (since 1.5). */
HBG_EXPORT void hbg_disconnect(hbg_client *c);

/* Tensors in the session heap (64-byte aligned). -ENOMEM when full (what
 * is freed comes back once the tasks added before its free completed).
 * Tensors not freed live until hbg_disconnect(). */
HBG_EXPORT int hbg_tensor_alloc(hbg_client *c, size_t bytes, hbg_tensor *ret);
/* Free t, exactly as hbg_tensor_alloc() returned it (a slice, a freed or
 * unknown tensor: -EINVAL). Never waits: its bytes are reused by a later
 * hbg_tensor_alloc() only once every task added before the free
 * completed, and later tasks take no dependency on its earlier users.
 * A tensor a recorded graph (or the one being recorded) uses: -EBUSY.
 * Since 1.6. */
HBG_EXPORT int hbg_tensor_free(hbg_client *c, hbg_tensor t);
/* Where t is in this process (shared with hbgd); NULL if t is empty or
 * not inside the heap. Read results after the writer completed
 * (hbg_graph_wait(), hbg_tensor_wait_ready()). */
HBG_EXPORT void *hbg_tensor_data(hbg_client *c, hbg_tensor t);
/* Elements [lo, hi) of an f32 tensor, as a tensor (for slices). */
HBG_EXPORT int hbg_tensor_slice_f32(hbg_tensor t, uint64_t lo, uint64_t hi, hbg_tensor *ret);
HBG_EXPORT uint64_t hbg_f32(float v);
/* A signed 64-bit scalar as the raw 64 bits a task carries, for kernels
 * that take an i64 (fail's code: hbg_i64(-EIO)). Since 1.3. */
HBG_EXPORT uint64_t hbg_i64(int64_t v);

/* Add a task to the graph being built; dependencies are the explicit ones
 * plus those derived from its tensors (RAW, WAR, WAW; the predicate counts
 * as a read). Waits (back-pressure) while the task window is full, running
 * host tasks meanwhile (those the workers do not: without host_threads).
 * *ret_id (may be NULL) gets the task id. A bad task
 * is refused here: -EINVAL, or -ENOENT for an unknown kernel name. Tasks
 * are handed to hbgd in batches: hbg_graph_submit() or any wait sends the
 * rest. More than 16 dependencies cost extra dummy tasks (ids in between). */
HBG_EXPORT int hbg_graph_add(hbg_client *c, const hbg_task *t, uint64_t *ret_id);
/* hbg_graph_add() for tasks[0..n), in order; *ret_ids (may be NULL) gets
 * their ids. 0 when all were added; else the error of the first task that
 * was not (hbg_last_error() names its index): the ones before it were
 * added, as with n calls of hbg_graph_add(). */
HBG_EXPORT int hbg_graph_add_n(hbg_client *c, const hbg_task *tasks, size_t n, uint64_t *ret_ids);
/* How many tasks hbg_graph_add() can add now without waiting for window
 * space (0: the next add waits), or a negative errno: -EINVAL for NULL,
 * -EDEADLK from a host function of c, -ECONNRESET once hbgd went away. A
 * task with more than 16 dependencies takes one more id per 15 beyond
 * them (the joining dummies), and adds while a graph is being recorded
 * never wait. For a caller holding a lock of its own (a language
 * binding's interpreter lock): add without releasing it while the room
 * suffices. Never waits, no system call. Since 1.6. */
HBG_EXPORT int64_t hbg_graph_room(hbg_client *c);
/* A built-in kernel's id by name (for hbg_task.kernel_id: no name lookup
 * per task), or -ENOENT, from the table compiled into this library: it
 * knows no module kernel (hbg_client_kernel_id() does). Ids of built-ins
 * are stable within a major version. */
HBG_EXPORT int hbg_kernel_id(const char *name);

/*
 * The kernels of the hbgd a client is connected to (since 1.4): its
 * built-ins and the kernels of the modules it loaded, as hbgd sent them
 * at connect. hbg_graph_add() checks tasks and resolves names with this
 * table. An hbgd older than protocol 1.3 sends none: then only the
 * built-ins of this library are known. Strings stay valid until
 * hbg_disconnect().
 */
/* How a kernel's tensor lengths relate. */
enum hbg_length_rule_kind {
        HBG_LENGTH_RULE_ANY = 0,   /* no relation */
        HBG_LENGTH_RULE_EQUAL = 1, /* every tensor exactly as long as the last (the output) */
        HBG_LENGTH_RULE_SHAPE = 2, /* what the scalar shape needs (the kernel's own check) */
};
/* How a scalar's 64 raw bits are read (hbg_f32(), hbg_i64()). */
enum hbg_scalar_type { HBG_SCALAR_TYPE_F32 = 1, HBG_SCALAR_TYPE_U64 = 2, HBG_SCALAR_TYPE_I64 = 3 };

typedef struct hbg_kernel_desc {
        size_t size;            /* sizeof(hbg_kernel_desc): HBG_KERNEL_DESC_INIT */
        int id;                 /* for hbg_task.kernel_id; module kernels from 256 */
        const char *name;
        const char *summary;    /* what it computes, one line */
        const char *module;     /* the module that defines it (as hbgd names it); NULL: built-in */
        unsigned n_tensors;     /* tensor arguments (hbg_task.args), in order */
        const char *tensor_names[HBG_MAX_TASK_TENSORS];
        enum hbg_dir tensor_dirs[HBG_MAX_TASK_TENSORS];
        unsigned n_scalars;     /* scalar arguments (hbg_task.scalars), in order */
        const char *scalar_names[HBG_MAX_TASK_SCALARS];
        enum hbg_scalar_type scalar_types[HBG_MAX_TASK_SCALARS];
        enum hbg_length_rule_kind length;
        const char *length_rule; /* the rule in words */
        int in_place;           /* 1: an output may be the very range of an input */
        int splittable;         /* 1: hbg_task.blocks split its work; 0: it runs as one block */
} hbg_kernel_desc;

#define HBG_KERNEL_DESC_INIT ((hbg_kernel_desc){ .size = sizeof(hbg_kernel_desc) })

/* Kernel `name`'s id in c's table, or -ENOENT (-EINVAL: c or name NULL). */
HBG_EXPORT int hbg_client_kernel_id(hbg_client *c, const char *name);
/* How many kernels c's table holds (0 if c is NULL). */
HBG_EXPORT size_t hbg_client_kernel_count(hbg_client *c);
/* Kernel i (0 <= i < hbg_client_kernel_count(), in id order) into *ret:
 * 0, -ENOENT past the end, -EINVAL for NULL arguments or ret->size smaller
 * than this struct's first version. */
HBG_EXPORT int hbg_client_kernel_info(hbg_client *c, size_t i, hbg_kernel_desc *ret);
/* Close the graph of the tasks added since the last submit and hand it to
 * hbgd. *ret_graph identifies it (graphs are numbered 0, 1, 2, ...).
 * -EINVAL if it is empty; -ECONNRESET once hbgd has gone (it knows without
 * a system call where the kernel allows io_uring). Waits while too many
 * graphs are in flight. */
HBG_EXPORT int hbg_graph_submit(hbg_client *c, uint64_t *ret_graph);
/* Wait for a graph (timeout_ms < 0: for ever). A client's graphs finish
 * in submission order: one whose tasks are done is reported finished only
 * once every graph submitted before it is (hbg_graph_wait(3)). Runs host tasks while
 * waiting on a client without worker threads (with host_threads, the
 * workers run them and the wait sleeps). 0 if it succeeded, its negative errno if it failed (-ETIME:
 * hbgd's stall limit failed it; hbg_last_error() and hbg_graph_error()
 * say which task, kernel and why), -ETIMEDOUT if it is still running
 * after timeout_ms, or -ECONNRESET if hbgd went away. */
HBG_EXPORT int hbg_graph_wait(hbg_client *c, uint64_t graph, int timeout_ms);
/* Status without waiting: 1 running, 0 ok, negative errno failed (also
 * -ECONNRESET if it is running and hbgd went away, -EINVAL for a graph
 * never submitted). *ret_task (may be NULL) gets the first failing task
 * when it failed. Runs no host tasks: without worker threads, a graph
 * with host tasks needs hbg_graph_wait() or hbg_client_process() to
 * finish (with host_threads, the workers run them). */
HBG_EXPORT int hbg_graph_status(hbg_client *c, uint64_t graph, uint64_t *ret_task);

/* Why a graph failed (since 1.2). */
typedef struct hbg_graph_error_info {
        size_t size;            /* sizeof(hbg_graph_error_info): HBG_GRAPH_ERROR_INFO_INIT */
        int code;               /* 0 succeeded, else the graph's negative errno */
        uint64_t task;          /* first failing task's id (when code != 0) */
        int kernel_id;          /* its kernel's id, -1 for a task without kernel */
        const char *kernel;     /* its kernel's name, "" without kernel (valid until hbg_disconnect()) */
        char message[128];      /* why: hbgd's validator/kernel/stall reason or the library's */
} hbg_graph_error_info;

#define HBG_GRAPH_ERROR_INFO_INIT ((hbg_graph_error_info){ .size = sizeof(hbg_graph_error_info) })

/* The outcome of a finished graph, without waiting: 0 and *ret_info filled
 * (code 0 when it succeeded; else its status as hbg_graph_status() returns
 * it, the first failing task, its kernel and the message: hbgd's
 * validator, kernel or stall reason, or "host task returned -ENOSPC" for a
 * host function's error); 1 while it runs (*ret_info untouched);
 * -EINVAL for bad arguments (ret_info->size smaller than this struct's
 * first version) or a graph never submitted; -ENOENT when the graph's
 * status is forgotten (this library keeps every graph's until
 * hbg_disconnect(), so it does not happen today); -EDEADLK from a host
 * function of c; -ECONNRESET when it runs and hbgd went away. Runs no
 * host tasks. */
HBG_EXPORT int hbg_graph_error(hbg_client *c, uint64_t graph, hbg_graph_error_info *ret_info);
/* Cancel one of this client's submitted graphs (since 1.3): hbgd fails its
 * tasks not started with -ECANCELED and stops its running kernels at their
 * next check; the waiting call then returns -ECANCELED and
 * hbg_graph_error() gives "cancelled by uid N". Host tasks already handed
 * to this process run to their end. 0: hbgd took the cancel (unless a task
 * failed first or the graph finished meanwhile, the graph fails with
 * -ECANCELED); -EALREADY: the graph had finished, or was cancelled before;
 * -EINVAL: never submitted; -EBUSY: 8 cancels of this session pending;
 * -ECONNRESET: hbgd went away. One round trip to hbgd; not from a host
 * function (-EDEADLK). */
HBG_EXPORT int hbg_graph_cancel(hbg_client *c, uint64_t graph);
/* Wait until the tasks writing t (added so far) have completed
 * (timeout_ms < 0: for ever). 0 even if they failed; -ETIMEDOUT,
 * -ECONNRESET. */
HBG_EXPORT int hbg_tensor_wait_ready(hbg_client *c, hbg_tensor t, int timeout_ms);

/*
 * Graph replay (since 1.1): record a graph once, launch it many times.
 * hbgd validates the recorded tasks once and keeps them for the session
 * (within [limits] max_recorded_graphs and max_recorded_tasks); a launch
 * costs the producer a gate task and a launch record per 64 tasks, not
 * one descriptor per task.
 *
 * Between hbg_graph_record_begin() and hbg_graph_record_end(),
 * hbg_graph_add() records instead of adding: ids are the recording's task
 * numbers (0, 1, ...), explicit deps name them, and dependencies derived
 * from tensors are those among the recorded tasks. Host functions,
 * host_inline tasks and predicates may be recorded. hbg_graph_submit() is
 * refused meanwhile (-EBUSY). hbg_graph_record_end() sends the recording
 * to hbgd: 0 and its number in *ret_recorded, or the error (hbgd's
 * message names the bad task, counting the dummies that join more than 16
 * dependencies); either way the recording is over.
 *
 * hbg_graph_launch() adds the recorded tasks as if they were added now,
 * one by one (after the earlier writers and readers of their tensors, and
 * before later ones), and submits them, with the tasks added since the
 * last submit, as one graph: *ret_graph as from hbg_graph_submit(). A
 * launch waits for window space like hbg_graph_add() when the recorded
 * graph is larger than the window. Recorded graphs live until
 * hbg_disconnect().
 */
HBG_EXPORT int hbg_graph_record_begin(hbg_client *c);
HBG_EXPORT int hbg_graph_record_end(hbg_client *c, uint32_t *ret_recorded);
HBG_EXPORT int hbg_graph_launch(hbg_client *c, uint32_t recorded, uint64_t *ret_graph);

/* For the caller's own event loop: readable when graphs finished or host
 * tasks are ready; then call hbg_client_process(). */
HBG_EXPORT int hbg_client_fd(const hbg_client *c);
/* How many host worker threads c has (hbg_connect_options.host_threads;
 * 0: none), or -EINVAL for NULL. Any thread, any time. Since 1.5. */
HBG_EXPORT int hbg_client_host_threads(const hbg_client *c);
/* Run ready host tasks and note finished graphs; never waits (except
 * ~0.2 ms when the completion mailbox is full). Returns the number of host
 * tasks run, or -ECONNRESET once hbgd went away. */
HBG_EXPORT int hbg_client_process(hbg_client *c);

#ifdef __cplusplus
}
#endif
#endif
