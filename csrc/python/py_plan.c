/*
 * py_plan.c - the plan handle of the binding (py_plan.h says the rules it implements):
 * creation and ownership through a capsule, the buffers of a call (NumPy for a CPU plan,
 * DeviceArray for a CUDA plan), the GIL and lock around a call, and the execute binding
 * shared by every family whose execute is (plan, in, out).
 */
#include "python/py_plan.h"

#include "python/device/py_device.h"

static void plan_free(usbeam_py_plan *h)
{
    if (!h) return;
    if (h->plan) h->type->destroy(h->plan);
    if (h->lock) PyThread_free_lock(h->lock);
    PyMem_Free(h);
}

/* One destructor serves every type: the capsule's own name is the one it was created with. */
static void plan_capsule_destroy(PyObject *capsule)
{
    plan_free(PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule)));
}

usbeam_py_plan *usbeam_py_plan_new(const usbeam_py_plan_type *type)
{
    usbeam_py_plan *h = PyMem_Calloc(1, sizeof *h);
    if (!h) return (usbeam_py_plan *)PyErr_NoMemory();
    h->type = type;
    if (!(type->rules & USBEAM_PY_PLAN_REENTRANT)) {
        h->lock = PyThread_allocate_lock();
        if (!h->lock) {
            PyMem_Free(h);
            return (usbeam_py_plan *)PyErr_NoMemory();
        }
    }
    return h;
}

PyObject *usbeam_py_plan_wrap(usbeam_py_plan *h, usbeam_status st, void *plan)
{
    h->plan = plan; /* from here on destroyed with h, whatever st says */
    if (st != USBEAM_OK) {
        plan_free(h);
        return usbeam_py_raise(st);
    }
    PyObject *capsule = usbeam_py_plan_capsule(h, h->type->capsule_name, plan_capsule_destroy);
    if (!capsule) plan_free(h);
    return capsule;
}

usbeam_py_plan *usbeam_py_plan_from(PyObject *capsule, const usbeam_py_plan_type *type)
{
    return usbeam_py_plan_from_capsule(capsule, type->capsule_name, type->argument);
}

usbeam_cuda_exec *usbeam_py_plan_cuda(const usbeam_py_plan *h)
{
    return h->type->cuda ? h->type->cuda(h->plan) : NULL;
}

void *usbeam_py_plan_buffer(PyObject *obj, const char *name, int npy_type, size_t n_elements, int writable,
                            usbeam_cuda_exec *exec)
{
    if (!exec) return usbeam_py_array_data(obj, name, npy_type, n_elements, writable);
    /* a CUDA plan reads device memory only: a host array would be a fault, not a slow copy */
    if (!PyObject_TypeCheck(obj, &usbeam_DeviceArrayType)) {
        PyErr_Format(PyExc_TypeError, "%s must be a usbeam.DeviceArray for a CUDA plan (got %s)", name,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    DeviceArrayObject *a = (DeviceArrayObject *)obj;
    if (a->device_type != kDLCUDA || a->device_id != usbeam_cuda_exec_device(exec)) {
        PyErr_Format(PyExc_ValueError, "%s must be in the memory of CUDA device %d, the plan's", name,
                     usbeam_cuda_exec_device(exec));
        return NULL;
    }
    if (a->dtype->npy_type != npy_type) {
        const dtype_entry *want = usbeam_da_dtype_by_npy(npy_type);
        PyErr_Format(PyExc_TypeError, "%s must have dtype %s", name, want ? want->typestr : "?");
        return NULL;
    }
    if (array_size(a) != n_elements) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zu elements (got %zu)", name, n_elements, array_size(a));
        return NULL;
    }
    if (writable && a->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", name);
        return NULL;
    }
    return array_data(a);
}

PyObject *usbeam_py_plan_cuda_exec(PyObject *capsule, const usbeam_py_plan_type *type)
{
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, type);
    if (!h) return NULL;
    return usbeam_py_cuda_exec_capsule(usbeam_py_plan_cuda(h), capsule);
}

usbeam_py_plan_call usbeam_py_plan_enter(usbeam_py_plan *h, usbeam_cuda_exec *cuda)
{
    usbeam_py_plan_call call = {h, NULL, 0, 0};
    if (cuda && (h->type->rules & USBEAM_PY_PLAN_CUDA_KEEPS_GIL)) return call;
    const int interruptible = usbeam_py_interrupt_wanted();
    call.released = PyEval_SaveThread();
    if (interruptible) {
        usbeam_py_interrupt_begin(call.released);
        call.interruptible = 1;
    }
    /* with the GIL released first, a thread waiting here stalls no other Python thread */
    if (h->lock) {
        PyThread_acquire_lock(h->lock, WAIT_LOCK);
        call.locked = 1;
    }
    return call;
}

void usbeam_py_plan_leave(usbeam_py_plan_call *call)
{
    if (call->interruptible) usbeam_py_interrupt_end();
    if (call->locked) PyThread_release_lock(call->handle->lock);
    if (call->released) PyEval_RestoreThread(call->released);
    call->interruptible = 0;
    call->locked = 0;
    call->released = NULL;
}

PyObject *usbeam_py_plan_finish(usbeam_py_plan_call *call, usbeam_status st)
{
    usbeam_py_plan_leave(call);
    return usbeam_py_none_or_raise(st);
}

PyObject *usbeam_py_plan_execute(PyObject *args, const usbeam_py_plan_type *type, const char *in_name,
                                 usbeam_py_plan_run run)
{
    PyObject *capsule, *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &in_obj, &out_obj)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const void *in = usbeam_py_plan_buffer(in_obj, in_name, h->npy_in, h->n_in, 0, cuda);
    if (!in) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", h->npy_out, h->n_out, 1, cuda);
    if (!out) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = run(h->plan, in, out);
    return usbeam_py_plan_finish(&call, st);
}
