/*
 * py_rca.c - Python bindings of the row-column family (see rca.c).
 *   rca_plan(method, n_columns, n_rows, pitch_x, pitch_y, world_to_array, voxel_to_world,
 *            output_shape, tx_rows, rx_rows, n_frames, n_acquisitions, n_channels, n_samples,
 *            data_complex, fs, fc, c, t0, interpolation, angles, focal_depths,
 *            sparse_elements, f_number, window, tukey_alpha, coherence_factor, sum_frames,
 *            backend) -> plan
 *   rca_execute(plan, data, out)
 * Transforms are float64 (4, 4) arrays (row-major); output_shape is (n_k, n_j, n_i);
 * angles / focal_depths float64, sparse_elements int32 or None.
 */
#include "python/py_common.h"

#define RCA_CAPSULE "usbeam.rca_plan"

typedef struct {
    usbeam_rca_plan *plan;
    size_t in_count, out_count;
    int data_complex;
    PyThread_type_lock lock;
} rca_handle;

static void rca_capsule_destroy(PyObject *capsule)
{
    rca_handle *h = PyCapsule_GetPointer(capsule, RCA_CAPSULE);
    if (h) {
        usbeam_rca_plan_destroy(h->plan);
        if (h->lock) PyThread_free_lock(h->lock);
        PyMem_Free(h);
    }
}

static PyObject *py_rca_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"method", "n_columns", "n_rows", "pitch_x", "pitch_y", "world_to_array",
                               "voxel_to_world", "output_shape", "tx_rows", "rx_rows", "n_frames",
                               "n_acquisitions", "n_channels", "n_samples", "data_complex", "fs", "fc", "c",
                               "t0", "interpolation", "angles", "focal_depths", "sparse_elements", "f_number",
                               "window", "tukey_alpha", "coherence_factor", "sum_frames", "backend", NULL};
    int method, tx_rows, rx_rows, data_complex, interpolation, window, coherence, sum_frames;
    Py_ssize_t n_columns, n_rows, n_frames, n_acq, n_ch, n_samples, nk, nj, ni;
    double pitch_x, pitch_y, fs, fc, c, t0, f_number, tukey_alpha;
    PyObject *w2a, *v2w, *angles_obj, *depths_obj, *sparse_obj;
    const char *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "innddOO(nnn)iinnnnpddddiOOOdidpp|s", keywords, &method,
                                     &n_columns, &n_rows, &pitch_x, &pitch_y, &w2a, &v2w, &nk, &nj, &ni,
                                     &tx_rows, &rx_rows, &n_frames, &n_acq, &n_ch, &n_samples, &data_complex, &fs,
                                     &fc, &c, &t0, &interpolation, &angles_obj, &depths_obj, &sparse_obj,
                                     &f_number, &window, &tukey_alpha, &coherence, &sum_frames, &backend_name))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (n_columns <= 0 || n_rows <= 0 || n_frames <= 0 || n_acq <= 0 || n_ch <= 0 || n_samples <= 0 || nk <= 0 ||
        nj <= 0 || ni <= 0) {
        PyErr_SetString(PyExc_ValueError, "array, data and output sizes must be >= 1");
        return NULL;
    }
    usbeam_rca_params p;
    memset(&p, 0, sizeof p);
    p.method = (usbeam_rca_method)method;
    p.n_columns = (size_t)n_columns;
    p.n_rows = (size_t)n_rows;
    p.pitch_x = pitch_x;
    p.pitch_y = pitch_y;
    const double *m = usbeam_py_array_data(w2a, "transform", NPY_FLOAT64, 16, 0);
    if (!m) return NULL;
    memcpy(p.world_to_array, m, sizeof p.world_to_array);
    m = usbeam_py_array_data(v2w, "voxel_transform", NPY_FLOAT64, 16, 0);
    if (!m) return NULL;
    memcpy(p.voxel_to_world, m, sizeof p.voxel_to_world);
    p.n_k = (size_t)nk;
    p.n_j = (size_t)nj;
    p.n_i = (size_t)ni;
    p.tx_rows = tx_rows != 0;
    p.rx_rows = rx_rows != 0;
    p.n_frames = (size_t)n_frames;
    p.n_acquisitions = (size_t)n_acq;
    p.n_channels = (size_t)n_ch;
    p.n_samples = (size_t)n_samples;
    p.data_complex = data_complex;
    p.fs = fs;
    p.fc = fc;
    p.c = c;
    p.t0 = t0;
    p.interpolation = interpolation;
    size_t n_waves = (method == USBEAM_RCA_HERCULES || method == USBEAM_RCA_UHERCULES) ? 1
                     : (method == USBEAM_RCA_FORCES || method == USBEAM_RCA_UFORCES) ? 0 : (size_t)n_acq;
    if (n_waves) {
        p.angles = usbeam_py_array_data(angles_obj, "angles", NPY_FLOAT64, n_waves, 0);
        if (!p.angles) return NULL;
        p.focal_depths = usbeam_py_array_data(depths_obj, "focal_depths", NPY_FLOAT64, n_waves, 0);
        if (!p.focal_depths) return NULL;
    }
    if (method == USBEAM_RCA_UFORCES || method == USBEAM_RCA_UHERCULES) {
        p.sparse_elements = usbeam_py_array_data(sparse_obj, "sparse_elements", NPY_INT32, (size_t)n_acq, 0);
        if (!p.sparse_elements) return NULL;
    }
    p.f_number = f_number;
    p.window = window;
    p.tukey_alpha = tukey_alpha;
    p.coherence_factor = coherence;
    p.sum_frames = sum_frames;

    rca_handle *h = PyMem_Calloc(1, sizeof *h);
    if (!h) return PyErr_NoMemory();
    h->lock = PyThread_allocate_lock();
    if (!h->lock) {
        PyMem_Free(h);
        return PyErr_NoMemory();
    }
    usbeam_status st = usbeam_rca_plan_create(&p, backend, &h->plan);
    if (st != USBEAM_OK) {
        PyThread_free_lock(h->lock);
        PyMem_Free(h);
        return usbeam_py_raise(st);
    }
    /* sizes were checked against overflow by plan_create */
    h->in_count = p.n_frames * p.n_acquisitions * p.n_channels * p.n_samples;
    h->out_count = (p.sum_frames ? 1 : p.n_frames) * p.n_i * p.n_j * p.n_k;
    h->data_complex = p.data_complex;
    PyObject *capsule = usbeam_py_plan_capsule(h, RCA_CAPSULE, rca_capsule_destroy);
    if (!capsule) {
        usbeam_rca_plan_destroy(h->plan);
        PyThread_free_lock(h->lock);
        PyMem_Free(h);
    }
    return capsule;
}

static PyObject *py_rca_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &in_obj, &out_obj)) return NULL;
    rca_handle *h = usbeam_py_plan_from_capsule(capsule, RCA_CAPSULE, "plan");
    if (!h) return NULL;
    const int type = h->data_complex ? NPY_COMPLEX64 : NPY_FLOAT32;
    usbeam_cuda_exec *cuda = usbeam_rca_plan_cuda(h->plan); /* NULL: CPU plan, NumPy arrays */
    const void *in = usbeam_py_plan_buffer(in_obj, "data", type, h->in_count, 0, cuda);
    if (!in) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", type, h->out_count, 1, cuda);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    st = usbeam_rca_execute(h->plan, in, out);
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_rca_cuda_exec(PyObject *self, PyObject *capsule)
{
    (void)self;
    rca_handle *h = usbeam_py_plan_from_capsule(capsule, RCA_CAPSULE, "plan");
    if (!h) return NULL;
    return usbeam_py_cuda_exec_capsule(usbeam_rca_plan_cuda(h->plan), capsule);
}

PyMethodDef usbeam_py_rca_methods[] = {
    {"rca_plan", (PyCFunction)(void (*)(void))py_rca_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a row-column beamforming plan."},
    {"rca_execute", py_rca_execute, METH_VARARGS, "Run a row-column plan: (plan, data, out)."},
    {"rca_cuda_exec", py_rca_cuda_exec, METH_O, "CUDA state of a row-column plan (None for the CPU)."},
    {NULL, NULL, 0, NULL},
};
