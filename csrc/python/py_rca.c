/*
 * py_rca.c - Python bindings of row-column beamforming (see beamform/rca.c); plans, buffers,
 * the GIL and the lock follow py_plan.h.
 *   rca_plan(method, n_columns, n_rows, pitch_x, pitch_y, world_to_array, voxel_to_world,
 *            output_shape, tx_rows, rx_rows, n_frames, n_acquisitions, n_channels, n_samples,
 *            data_complex, fs, fc, c, t0, interpolation, angles, focal_depths,
 *            sparse_elements, f_number, window, tukey_alpha, coherence_factor, sum_frames,
 *            backend) -> plan
 *   rca_execute(plan, data, out)
 * Transforms are float64 (4, 4) arrays (row-major); output_shape is (n_k, n_j, n_i);
 * angles / focal_depths float64, sparse_elements int32 or None.
 */
#include "python/py_plan.h"

/* An execute works in the plan's per-thread scratch (CPU) or device state (CUDA): one at a
 * time, on either backend. */
USBEAM_PY_PLAN_TYPE(rca, 0);

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

    usbeam_py_plan *h = usbeam_py_plan_new(&rca_plan_type);
    if (!h) return NULL;
    h->npy_in = h->npy_out = p.data_complex ? NPY_COMPLEX64 : NPY_FLOAT32;
    /* kept only if plan_create accepts the sizes (it checks them against overflow) */
    h->n_in = p.n_frames * p.n_acquisitions * p.n_channels * p.n_samples;
    h->n_out = (p.sum_frames ? 1 : p.n_frames) * p.n_i * p.n_j * p.n_k;
    usbeam_rca_plan *plan = NULL;
    usbeam_status st = usbeam_rca_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_EXECUTE_BINDING(rca, "data")
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(rca)

PyMethodDef usbeam_py_rca_methods[] = {
    {"rca_plan", (PyCFunction)(void (*)(void))py_rca_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a row-column beamforming plan."},
    {"rca_execute", py_rca_execute, METH_VARARGS, "Run a row-column plan: (plan, data, out)."},
    {"rca_cuda_exec", py_rca_cuda_exec, METH_O, "CUDA state of a row-column plan (None for the CPU)."},
    {NULL, NULL, 0, NULL},
};
