/*
 * py_plan.h - the one plan handle of the binding: how a library plan (or another object the
 * library creates and destroys: the shared-memory server, the CUDA slot ring) lives in Python
 * and how a call on it runs.  Every py_<family>.c builds on it, so these rules are written once:
 *
 *   - Ownership.  A plan reaches Python as a capsule named "usbeam.<family>_plan" owning a
 *     usbeam_py_plan; the capsule's destructor destroys the plan.  A plan therefore lives as
 *     long as anything holds the capsule: the Python wrapper, a cuda_exec capsule on its CUDA
 *     state, a frame view.  A capsule of another kind is refused with a TypeError naming the
 *     argument, so one family's plan can never reach another family's execute.
 *   - The GIL.  An execute runs with the GIL released: CPU kernels take milliseconds to
 *     seconds and the other Python threads (a live session's reader, a server) must run
 *     meanwhile.  The one exception is a CUDA execute of a USBEAM_PY_PLAN_CUDA_KEEPS_GIL type,
 *     which only queues kernels: it keeps the GIL, and the GIL alone serialises it.  Reads of
 *     what a plan fixed at creation (sizes, taps) also keep the GIL, and take no lock.
 *   - The lock.  Plans are not re-entrant (scratch, IIR and persistence state), so each handle
 *     carries a lock held for the whole call.  It is taken after the GIL is released: a thread
 *     waiting for a busy plan must not hold the GIL, or every Python thread would stall behind
 *     the plan.  A USBEAM_PY_PLAN_REENTRANT type (no state written by a call) has no lock.
 *   - Buffers.  A CPU plan takes NumPy arrays, a CUDA plan usbeam.DeviceArrays on its device;
 *     usbeam_py_plan_buffer checks either against the dtype and element count the handle
 *     recorded at creation, so the library only ever sees buffers of the planned size.
 *   - Errors.  A failed call returns its usbeam_status, which becomes the exception the status
 *     table assigns (usbeam_py_raise), with the library's detailed message.
 *
 * A family file declares its plan type once, USBEAM_PY_PLAN_TYPE(das, 0), creates plans with
 * usbeam_py_plan_new + usbeam_py_plan_wrap, and runs them with usbeam_py_plan_execute (an
 * execute taking (plan, in, out); USBEAM_PY_PLAN_EXECUTE_BINDING writes the binding) or, for
 * other signatures, usbeam_py_plan_enter / _finish around the library call.
 */
#ifndef USBEAM_PY_PLAN_H
#define USBEAM_PY_PLAN_H

#include "python/py_common.h"

#include <pythread.h>

/* How calls on a plan type are serialised (usbeam_py_plan_type.rules); 0: every call takes the
 * plan's lock, with the GIL released, on either backend. */
enum {
    /* calls write no shared state: no lock (the GIL is still released) */
    USBEAM_PY_PLAN_REENTRANT = 1u << 0,
    /* a CUDA execute only queues kernels: it runs with the GIL held and takes no lock */
    USBEAM_PY_PLAN_CUDA_KEEPS_GIL = 1u << 1,
};

typedef struct usbeam_py_plan_type {
    const char *capsule_name;              /* "usbeam.<family>_plan" */
    const char *argument;                  /* how a TypeError names the capsule argument */
    void (*destroy)(void *plan);           /* called once, on a created plan */
    usbeam_cuda_exec *(*cuda)(void *plan); /* the plan's CUDA state, NULL on the CPU; NULL: no CUDA twin */
    unsigned rules;                        /* USBEAM_PY_PLAN_* */
} usbeam_py_plan_type;

/* The plan type of a family with a CUDA twin: family_plan_type, capsule "usbeam.<family>_plan",
 * destroyed by usbeam_<family>_plan_destroy, CUDA state from usbeam_<family>_plan_cuda.  The
 * adapters give the library's typed functions the void * signature the table calls through. */
#define USBEAM_PY_PLAN_TYPE(family, rules)                                                  \
    static void family##_plan_destroy_any(void *plan) { usbeam_##family##_plan_destroy(plan); } \
    static usbeam_cuda_exec *family##_plan_cuda_any(void *plan)                                 \
    {                                                                                           \
        return usbeam_##family##_plan_cuda(plan);                                               \
    }                                                                                           \
    static const usbeam_py_plan_type family##_plan_type = {"usbeam." #family "_plan", "plan",   \
                                                           family##_plan_destroy_any,           \
                                                           family##_plan_cuda_any, (rules)}

/* The same for a family that runs on the host only. */
#define USBEAM_PY_HOST_PLAN_TYPE(family, rules)                                                 \
    static void family##_plan_destroy_any(void *plan) { usbeam_##family##_plan_destroy(plan); } \
    static const usbeam_py_plan_type family##_plan_type = {"usbeam." #family "_plan", "plan",   \
                                                           family##_plan_destroy_any, NULL, (rules)}

/* What the binding keeps of a plan: the plan, its lock, and what its executes check the
 * caller's buffers against (set by the family at creation; unused fields stay 0). */
typedef struct usbeam_py_plan {
    const usbeam_py_plan_type *type;
    void *plan;
    PyThread_type_lock lock;    /* NULL for a USBEAM_PY_PLAN_REENTRANT type */
    usbeam_backend backend;     /* the backend asked for at creation */
    int npy_in, npy_out;        /* NumPy dtypes of the main input and the main output */
    size_t n_in, n_out, n_aux;  /* elements of the main input, the main output and a second buffer */
    size_t n_outer;             /* the family's outer count: frames per call (DAS), ensemble length
                                   (clutter), lines (rf2iq), rows (live gather), images (AI) */
} usbeam_py_plan;

/* A handle for a plan of `type` about to be created: no plan yet, its lock allocated.  NULL
 * with MemoryError set. */
usbeam_py_plan *usbeam_py_plan_new(const usbeam_py_plan_type *type);

/* Finish a creation: plan is what the library's create gave, st its status.  Returns the
 * capsule that owns h, or NULL with the exception set, h and the plan freed. */
PyObject *usbeam_py_plan_wrap(usbeam_py_plan *h, usbeam_status st, void *plan);

/* The handle behind a capsule of `type`; NULL with a TypeError naming type->argument. */
usbeam_py_plan *usbeam_py_plan_from(PyObject *capsule, const usbeam_py_plan_type *type);

/* The plan's CUDA state, NULL for a CPU plan (or a type without a CUDA twin). */
usbeam_cuda_exec *usbeam_py_plan_cuda(const usbeam_py_plan *h);

/* The data pointer of one buffer of a call: for a CPU plan (exec NULL) a NumPy array as
 * usbeam_py_array_data checks it; for a CUDA plan a usbeam.DeviceArray on the plan's device,
 * checked the same way (type, dtype, element count, writable).  NULL with the exception set. */
void *usbeam_py_plan_buffer(PyObject *obj, const char *name, int npy_type, size_t n_elements, int writable,
                            usbeam_cuda_exec *exec);

/* The <family>_cuda_exec binding: a capsule on the CUDA state of the plan behind `capsule`
 * that keeps the plan alive, or None for a CPU plan. */
PyObject *usbeam_py_plan_cuda_exec(PyObject *capsule, const usbeam_py_plan_type *type);

/* One call on a plan, between usbeam_py_plan_enter and usbeam_py_plan_leave / _finish:
 *     usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
 *     usbeam_status st = usbeam_<family>_execute(h->plan, ...);   (no Python API in between)
 *     return usbeam_py_plan_finish(&call, st);
 * enter releases the GIL and takes the lock as the type's rules say, and on the main thread
 * registers the Ctrl-C check (usbeam_py_interrupt_begin: a long CPU execute stops with
 * KeyboardInterrupt within ~50 ms plus a tile); cuda is the plan's CUDA
 * state for an execute (usbeam_py_plan_cuda) and NULL for a call that runs on the host
 * (reset, info), which always takes the lock. */
typedef struct {
    usbeam_py_plan *handle;
    PyThreadState *released; /* the thread state the GIL was released from; NULL: GIL kept */
    int locked;
    int interruptible;       /* a check for Ctrl-C is registered (main thread, GIL released) */
} usbeam_py_plan_call;

usbeam_py_plan_call usbeam_py_plan_enter(usbeam_py_plan *h, usbeam_cuda_exec *cuda);
/* Release the lock, then take the GIL back. */
void usbeam_py_plan_leave(usbeam_py_plan_call *call);
/* leave, then None, or the exception for st. */
PyObject *usbeam_py_plan_finish(usbeam_py_plan_call *call, usbeam_status st);

/* The whole execute binding of a family whose execute is (plan, in, out): parses
 * (plan, in, out), checks in (named in_name) against npy_in / n_in and out against
 * npy_out / n_out, and runs run under the type's rules.  Returns None or NULL with the
 * exception set. */
typedef usbeam_status (*usbeam_py_plan_run)(void *plan, const void *in, void *out);
PyObject *usbeam_py_plan_execute(PyObject *args, const usbeam_py_plan_type *type, const char *in_name,
                                 usbeam_py_plan_run run);

/* Two bindings most families have, defined from the family's plan type (after it):
 *   py_<family>_cuda_exec(plan): usbeam_py_plan_cuda_exec, the <family>_cuda_exec function;
 *   py_<family>_execute(plan, in, out): usbeam_py_plan_execute over
 *       usbeam_<family>_execute(plan, in, out), the input named in_name in errors. */
#define USBEAM_PY_PLAN_CUDA_EXEC_BINDING(family)                              \
    static PyObject *py_##family##_cuda_exec(PyObject *self, PyObject *plan) \
    {                                                                         \
        return usbeam_py_plan_cuda_exec(plan, &family##_plan_type);           \
    }

#define USBEAM_PY_PLAN_EXECUTE_BINDING(family, in_name)                                \
    static usbeam_status family##_run_any(void *plan, const void *in, void *out)       \
    {                                                                                  \
        return usbeam_##family##_execute(plan, in, out);                               \
    }                                                                                  \
    static PyObject *py_##family##_execute(PyObject *self, PyObject *args)             \
    {                                                                                  \
        return usbeam_py_plan_execute(args, &family##_plan_type, in_name, family##_run_any); \
    }

/* The geometry arguments of the DAS-family plans (das_plan, das_sparse_plan, adaptive_plan),
 * parsed once for all of them (py_das.c): the params point into the arrays and transmits held
 * here until usbeam_py_das_args_release. */
typedef struct usbeam_py_das_args {
    usbeam_das_params p;
    usbeam_backend backend;
    int in_type, out_type; /* NumPy types of the data and the image */
    usbeam_transmit *transmits;
    PyObject *keep;
    PyArrayObject *elements, *normals, *points;
} usbeam_py_das_args;
int usbeam_py_das_args_parse(PyObject *args, PyObject *kwargs, usbeam_py_das_args *a);
void usbeam_py_das_args_release(usbeam_py_das_args *a);
/* Their buffers, (n_frames, n_transmits, n_elements, n_samples) to (n_frames, n_points), and
 * their execute (plan, data, out[, n_frames]) with up to the plan's capacity of frames. */
typedef usbeam_status (*usbeam_py_das_frames_run)(void *plan, size_t n_frames, const void *in, void *out);
void usbeam_py_das_plan_shape(usbeam_py_plan *h, const usbeam_das_params *p, int in_type, int out_type);
PyObject *usbeam_py_das_frames_execute(PyObject *args, const usbeam_py_plan_type *type, usbeam_py_das_frames_run run);

#endif
