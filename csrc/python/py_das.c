/*
 * py_das.c - Python bindings of delay-and-sum beamforming (see beamform/das_setup.c, das.c);
 * plans, buffers, the GIL and the lock follow py_plan.h.
 *   das_plan(element_positions, transmits, points, n_frames, n_samples, fs, fc, c, t0,
 *            f_number, window, tukey_alpha, interpolation, dtype, max_table_bytes, backend,
 *            element_normals=None, surface=0)
 *       element_positions, element_normals: float64 (n_elements, 3); points: float64 (n_points, 3);
 *       transmits: sequence of (kind, angle, x, z, element[, sources (3 or 4, n) float64 or
 *       None[, y, angle_y, axis_x, axis_y, axis_z]]) tuples (kind: usbeam_transmit_kind,
 *       include/usbeam/beamform.h; a 4-row sources array holds x, y, z, offset);
 *       window: 'rect' | 'hann' | 'tukey'; interpolation: 'nearest' | 'linear' | 'cubic';
 *       dtype: 'int16' | 'float32' | 'complex64'.
 *   das_execute(plan, data, out[, n_frames])   data (n_frames, n_tx, n_el, n_samples)
 *       C-contiguous, out (n_frames, n_points) float32 or complex64; n_frames defaults to
 *       the plan's capacity and may be smaller.  Runs with the GIL released, under a
 *       per-plan lock (a plan's scratch is not re-entrant).
 *   das_table_bytes(plan) -> int;  das_auto_f_number(width, fc, bandwidth, c) -> float
 *   das_transmit_times(plan, rows) -> float64 (len(rows), n_transmits): the plan's transmit
 *       times (s) of the points rows (int64, in [0, n_points)), or None (a CUDA plan)
 *   das_lane_rows(plan) -> int: rows of the lane table (das_lanes.c), 0 without one
 *   das_lane_fixed_bits(plan) -> int: its fixed-point unit 2^-bits sample, 0 if in double / none
 *   das_lane_quarter(plan) -> int: 1 if it sums 1-frame IQ staged in quarter turns (fs = 4 fc),
 *       2 if its table also holds each lane's first tap and fraction, else 0
 *   das_lane_mirrored(plan) -> int: groups whose formed rows are another's in mirror image
 *   das_aperture_counts(plan) -> int32 (n_points): receive elements per point, or None (CUDA)
 *   das_staging(plan, n_frames) -> (windows, ring_rows, staged_samples): how execute stages n_frames frames
 *   das_tile_samples(plan) -> int32 (n_tiles, 2): each tile's [first, end) samples, or None
 *   das_coverage(plan, rows, transmits, t0, t_end) -> bool (len(rows)): usbeam_das_coverage,
 *       or None (a CUDA plan); rows and transmits int64
 *   das_sparse_plan(<das_plan's arguments>), das_sparse_execute(plan, data, out[, n_frames]),
 *   das_sparse_bytes(plan) -> int, das_sparse_csr(plan) -> (row_offsets, columns, values,
 *       (n_rows, n_columns)) or None (CUDA): the sparse-matrix formulation (das_sparse.c).
 */
#include "python/py_plan.h"

/* An execute works in the plan's scratch (CPU) or device state (CUDA): one at a time, on
 * either backend. */
USBEAM_PY_PLAN_TYPE(das, 0);
USBEAM_PY_PLAN_TYPE(das_sparse, 0);

/* A C-contiguous float64 array of shape (n, 3); returns a new reference or NULL. */
static PyArrayObject *xyz_array(PyObject *obj, const char *name)
{
    PyArrayObject *arr = (PyArrayObject *)PyArray_FromAny(obj, PyArray_DescrFromType(NPY_FLOAT64), 2, 2,
                                                          NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!arr) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a 2-D float array of shape (n, 3)", name);
        return NULL;
    }
    if (PyArray_DIM(arr, 1) != 3 || PyArray_DIM(arr, 0) < 1) {
        PyErr_Format(PyExc_ValueError, "%s must have shape (n, 3) with n >= 1", name);
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* Transmit tuples (kind, angle, x, z, element[, sources]) -> usbeam_transmit; sources is
 * a float64 (3, n) array for USBEAM_TRANSMIT_SOURCES.  *keep receives a list holding the
 * source arrays alive until the plan has copied them. */
static int parse_transmits(PyObject *seq_obj, usbeam_transmit **out, size_t *count, PyObject **keep)
{
    PyObject *seq = PySequence_Fast(seq_obj, "transmits must be a sequence of tuples");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "transmits: the sequence is empty");
        Py_DECREF(seq);
        return -1;
    }
    usbeam_transmit *tx = PyMem_Calloc((size_t)n, sizeof *tx);
    PyObject *arrays = PyList_New(0);
    if (!tx || !arrays) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; ++k) {
        int kind;
        Py_ssize_t element;
        PyObject *sources = Py_None;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "idddn|Oddddd", &kind, &tx[k].angle, &tx[k].x, &tx[k].z,
                              &element, &sources, &tx[k].y, &tx[k].angle_y, &tx[k].axis[0], &tx[k].axis[1],
                              &tx[k].axis[2])) {
            PyErr_Format(PyExc_TypeError,
                         "transmits[%zd] must be a tuple (kind, angle, x, z, element[, sources[, y, angle_y, axis_x, axis_y, axis_z]])", k);
            goto fail;
        }
        if (element < 0) {
            PyErr_Format(PyExc_ValueError, "transmits[%zd].element must be >= 0", k);
            goto fail;
        }
        tx[k].kind = (usbeam_transmit_kind)kind;
        tx[k].element = (size_t)element;
        if (sources != Py_None) {
            PyArrayObject *arr = (PyArrayObject *)PyArray_FromAny(sources, PyArray_DescrFromType(NPY_FLOAT64), 2, 2,
                                                                  NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
            if (!arr || (PyArray_DIM(arr, 0) != 3 && PyArray_DIM(arr, 0) != 4) || PyList_Append(arrays, (PyObject *)arr) < 0) {
                Py_XDECREF(arr);
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "transmits[%zd] sources must be a float array of shape (3, n) or (4, n)", k);
                goto fail;
            }
            Py_DECREF(arr); /* the list holds it */
            tx[k].source_rows = (int)PyArray_DIM(arr, 0);
            tx[k].n_sources = (size_t)PyArray_DIM(arr, 1);
            tx[k].sources = PyArray_DATA(arr);
        }
    }
    Py_DECREF(seq);
    *out = tx;
    *count = (size_t)n;
    *keep = arrays;
    return 0;
fail:
    Py_DECREF(seq);
    Py_XDECREF(arrays);
    PyMem_Free(tx);
    return -1;
}

static int lookup(const char *name, const char *value, const char *const *options, int *code)
{
    for (int k = 0; options[k]; ++k)
        if (strcmp(value, options[k]) == 0) {
            *code = k;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "%s: unknown value '%s'", name, value);
    return -1;
}

/* The parameters of das_plan / das_sparse_plan / adaptive_plan (the same keywords; layout in
 * py_plan.h).  On success the caller releases them (das_args_release) after plan creation. */
typedef usbeam_py_das_args das_args;

static void das_args_release(das_args *a)
{
    PyMem_Free(a->transmits);
    Py_XDECREF(a->keep);
    Py_XDECREF(a->elements);
    Py_XDECREF(a->normals);
    Py_XDECREF(a->points);
}

static int das_args_parse(PyObject *args, PyObject *kwargs, das_args *a)
{
    /* keyword order = das_plan's positional order (the module comment above) */
    static char *keywords[] = {"element_positions", "transmits", "points", "n_frames", "n_samples", "fs", "fc",
                               "c", "t0", "f_number", "window", "tukey_alpha", "interpolation", "dtype",
                               "max_table_bytes", "backend", "element_normals", "surface", NULL};
    static const char *const windows[] = {"rect", "hann", "tukey", NULL};
    static const char *const methods[] = {"nearest", "linear", "cubic", NULL};
    memset(a, 0, sizeof *a);
    PyObject *elements_obj, *transmits_obj, *points_obj, *normals_obj = Py_None;
    int surface = 0;
    Py_ssize_t n_frames, n_samples, max_table_bytes = 0;
    double fs, fc, c, t0, f_number, tukey_alpha = 0.5;
    const char *window = "rect", *interpolation = "nearest", *dtype = "complex64", *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOnndddddsdss|nsOi", keywords, &elements_obj, &transmits_obj,
                                     &points_obj, &n_frames, &n_samples, &fs, &fc, &c, &t0, &f_number, &window,
                                     &tukey_alpha, &interpolation, &dtype, &max_table_bytes, &backend_name,
                                     &normals_obj, &surface))
        return -1;
    if (usbeam_py_backend(backend_name, &a->backend) < 0) return -1;
    if (n_frames < 1 || n_samples < 1 || max_table_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "n_frames and n_samples must be >= 1, max_table_bytes >= 0");
        return -1;
    }
    usbeam_das_params *p = &a->p;
    int window_code, method_code;
    if (lookup("window", window, windows, &window_code) < 0) return -1;
    if (lookup("interpolation", interpolation, methods, &method_code) < 0) return -1;
    if (strcmp(dtype, "int16") == 0) {
        p->input_dtype = USBEAM_DTYPE_INT16, a->in_type = NPY_INT16, a->out_type = NPY_FLOAT32;
    } else if (strcmp(dtype, "float32") == 0) {
        p->input_dtype = USBEAM_DTYPE_FLOAT32, a->in_type = NPY_FLOAT32, a->out_type = NPY_FLOAT32;
    } else if (strcmp(dtype, "complex64") == 0) {
        p->input_dtype = USBEAM_DTYPE_COMPLEX64, a->in_type = NPY_COMPLEX64, a->out_type = NPY_COMPLEX64;
    } else {
        PyErr_Format(PyExc_TypeError, "dtype must be 'int16', 'float32' or 'complex64' (got '%s')", dtype);
        return -1;
    }
    if (!(a->elements = xyz_array(elements_obj, "element_positions"))) return -1;
    if (normals_obj != Py_None) {
        if (!(a->normals = xyz_array(normals_obj, "element_normals"))) {
            das_args_release(a);
            return -1;
        }
        if (PyArray_DIM(a->normals, 0) != PyArray_DIM(a->elements, 0)) {
            PyErr_Format(PyExc_ValueError, "element_normals must have the shape of element_positions (%zd, 3)",
                         PyArray_DIM(a->elements, 0));
            das_args_release(a);
            return -1;
        }
    }
    if (!(a->points = xyz_array(points_obj, "points"))) {
        das_args_release(a);
        return -1;
    }
    if (parse_transmits(transmits_obj, &a->transmits, &p->n_transmits, &a->keep) < 0) {
        das_args_release(a);
        return -1;
    }
    p->n_elements = (size_t)PyArray_DIM(a->elements, 0);
    p->element_positions = PyArray_DATA(a->elements);
    p->element_normals = a->normals ? PyArray_DATA(a->normals) : NULL;
    p->surface = surface;
    p->transmits = a->transmits;
    p->n_points = (size_t)PyArray_DIM(a->points, 0);
    p->points = PyArray_DATA(a->points);
    p->n_frames = (size_t)n_frames;
    p->n_samples = (size_t)n_samples;
    p->fs = fs, p->fc = fc, p->c = c, p->t0 = t0, p->f_number = f_number;
    p->window = (usbeam_das_window)window_code;
    p->tukey_alpha = tukey_alpha;
    p->interpolation = (usbeam_das_interpolation)method_code;
    p->max_table_bytes = (size_t)max_table_bytes;
    return 0;
}

/* The buffers of a plan taking (n_frames, n_transmits, n_elements, n_samples) to (n_frames,
 * n_points), frames up to the capacity: the gather, sparse and adaptive plans (py_adaptive.c). */
void usbeam_py_das_plan_shape(usbeam_py_plan *h, const usbeam_das_params *p, int in_type, int out_type)
{
    h->npy_in = in_type;
    h->npy_out = out_type;
    h->n_outer = p->n_frames;                                /* frames the plan can take per call */
    h->n_in = p->n_transmits * p->n_elements * p->n_samples; /* per frame */
    h->n_out = p->n_points;                                  /* per frame */
}

/* (plan, data, out[, n_frames]) of those plans: n_frames defaults to the capacity. */
PyObject *usbeam_py_das_frames_execute(PyObject *args, const usbeam_py_plan_type *type, usbeam_py_das_frames_run run)
{
    PyObject *capsule, *in_obj, *out_obj;
    Py_ssize_t n_frames = -1;
    if (!PyArg_ParseTuple(args, "OOO|n", &capsule, &in_obj, &out_obj, &n_frames)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, type);
    if (!h) return NULL;
    if (n_frames == -1) n_frames = (Py_ssize_t)h->n_outer;
    if (n_frames < 1 || (size_t)n_frames > h->n_outer) {
        PyErr_Format(PyExc_ValueError, "n_frames must be in [1, %zu] for this plan (got %zd)", h->n_outer, n_frames);
        return NULL;
    }
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const void *in = usbeam_py_plan_buffer(in_obj, "data", h->npy_in, (size_t)n_frames * h->n_in, 0, cuda);
    if (!in) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", h->npy_out, (size_t)n_frames * h->n_out, 1, cuda);
    if (!out) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = run(h->plan, (size_t)n_frames, in, out);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_das_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    das_args a;
    if (das_args_parse(args, kwargs, &a) < 0) return NULL;
    /* building the delay tables of a large grid takes long: other threads run meanwhile */
    usbeam_py_plan *h = usbeam_py_plan_new(&das_plan_type);
    usbeam_das_plan *plan = NULL;
    usbeam_status st = USBEAM_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_das_plan_create(&a.p, a.backend, &plan);
        Py_END_ALLOW_THREADS
    }
    das_args_release(&a);
    if (!h) return NULL;
    usbeam_py_das_plan_shape(h, &a.p, a.in_type, a.out_type);
    return usbeam_py_plan_wrap(h, st, plan);
}

static usbeam_status usbeam_das_execute_frames_run(void *plan, size_t n_frames, const void *in, void *out)
{
    return usbeam_das_execute_frames(plan, n_frames, in, out);
}

static PyObject *py_das_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return usbeam_py_das_frames_execute(args, &das_plan_type, usbeam_das_execute_frames_run);
}

static PyObject *py_das_table_bytes(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    return PyLong_FromSize_t(usbeam_das_table_bytes(h->plan));
}

static PyObject *py_das_lane_rows(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    return PyLong_FromSize_t(usbeam_das_lane_rows(h->plan));
}

static PyObject *py_das_lane_fixed_bits(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    return PyLong_FromLong(usbeam_das_lane_fixed_bits(h->plan));
}

static PyObject *py_das_lane_quarter(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    return PyLong_FromLong(usbeam_das_lane_quarter(h->plan));
}

static PyObject *py_das_lane_mirrored(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    return PyLong_FromLong(usbeam_das_lane_mirrored(h->plan));
}

static PyObject *py_das_aperture_counts(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    size_t n_points = 0;
    const int32_t *counts = usbeam_das_aperture_counts(h->plan, &n_points);
    if (!counts) Py_RETURN_NONE;
    npy_intp dims[1] = {(npy_intp)n_points};
    PyArrayObject *arr = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT32);
    if (arr) memcpy(PyArray_DATA(arr), counts, n_points * sizeof(int32_t));
    return (PyObject *)arr;
}

static PyObject *py_das_tile_samples(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    size_t n_tiles = 0;
    const int32_t *bounds = usbeam_das_tile_samples(h->plan, &n_tiles);
    if (!bounds) Py_RETURN_NONE;
    npy_intp dims[2] = {(npy_intp)n_tiles, 2};
    PyArrayObject *arr = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_INT32);
    if (arr) memcpy(PyArray_DATA(arr), bounds, 2 * n_tiles * sizeof(int32_t));
    return (PyObject *)arr;
}

static PyObject *py_das_staging(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    Py_ssize_t n_frames;
    if (!PyArg_ParseTuple(args, "On", &capsule, &n_frames)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    if (n_frames < 1) return PyErr_Format(PyExc_ValueError, "n_frames must be >= 1 (got %zd)", n_frames);
    size_t windows = 0, ring_rows = 0, staged = 0;
    const usbeam_status st = usbeam_das_staging(h->plan, (size_t)n_frames, &windows, &ring_rows, &staged);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return Py_BuildValue("nnn", (Py_ssize_t)windows, (Py_ssize_t)ring_rows, (Py_ssize_t)staged);
}

static PyObject *py_das_coverage(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *rows_obj, *tx_obj;
    double t0, t_end;
    if (!PyArg_ParseTuple(args, "OOOdd", &capsule, &rows_obj, &tx_obj, &t0, &t_end)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    if (!usbeam_das_transmit_times(h->plan, NULL, NULL)) Py_RETURN_NONE;
    PyArrayObject *rows = (PyArrayObject *)PyArray_FromAny(rows_obj, PyArray_DescrFromType(NPY_INT64), 1, 1,
                                                           NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!rows) return NULL;
    PyArrayObject *tx = (PyArrayObject *)PyArray_FromAny(tx_obj, PyArray_DescrFromType(NPY_INT64), 1, 1,
                                                         NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!tx) {
        Py_DECREF(rows);
        return NULL;
    }
    npy_intp dims[1] = {PyArray_DIM(rows, 0)};
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_BOOL);
    usbeam_status st = USBEAM_OK;
    if (out) {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_das_coverage(h->plan, (const int64_t *)PyArray_DATA(rows), (size_t)dims[0],
                                 (const int64_t *)PyArray_DATA(tx), (size_t)PyArray_DIM(tx, 0), t0, t_end,
                                 (uint8_t *)PyArray_DATA(out));
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(rows);
    Py_DECREF(tx);
    if (out && st != USBEAM_OK) {
        Py_DECREF(out);
        return usbeam_py_raise(st);
    }
    return (PyObject *)out;
}

static PyObject *py_das_transmit_times(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *rows_obj;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &rows_obj)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_plan_type);
    if (!h) return NULL;
    size_t n_points = 0, n_transmits = 0;
    const double *times = usbeam_das_transmit_times(h->plan, &n_points, &n_transmits);
    if (!times) Py_RETURN_NONE;
    PyArrayObject *rows = (PyArrayObject *)PyArray_FromAny(rows_obj, PyArray_DescrFromType(NPY_INT64), 1, 1,
                                                           NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!rows) return NULL;
    const npy_intp n_rows = PyArray_DIM(rows, 0);
    const int64_t *row = (const int64_t *)PyArray_DATA(rows);
    for (npy_intp i = 0; i < n_rows; ++i)
        if (row[i] < 0 || (uint64_t)row[i] >= n_points) {
            Py_DECREF(rows);
            return PyErr_Format(PyExc_IndexError, "rows: point %lld is out of range (n_points = %zu)",
                                (long long)row[i], n_points);
        }
    npy_intp dims[2] = {n_rows, (npy_intp)n_transmits};
    PyArrayObject *arr = (PyArrayObject *)PyArray_SimpleNew(2, dims, NPY_FLOAT64);
    if (arr) {
        double *dst = (double *)PyArray_DATA(arr);
        for (npy_intp i = 0; i < n_rows; ++i)
            memcpy(dst + (size_t)i * n_transmits, times + (size_t)row[i] * n_transmits, n_transmits * sizeof(double));
    }
    Py_DECREF(rows);
    return (PyObject *)arr;
}

static PyObject *py_das_auto_f_number(PyObject *self, PyObject *args)
{
    (void)self;
    double width, fc, bandwidth, c, f_number = 0;
    if (!PyArg_ParseTuple(args, "dddd", &width, &fc, &bandwidth, &c)) return NULL;
    usbeam_status st = usbeam_das_auto_f_number(width, fc, bandwidth, c, &f_number);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return PyFloat_FromDouble(f_number);
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(das)

/* ---- the sparse-matrix formulation (beamform/das_sparse.c) ------------------------------ */

static PyObject *py_das_sparse_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    das_args a;
    if (das_args_parse(args, kwargs, &a) < 0) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_new(&das_sparse_plan_type);
    usbeam_das_sparse_plan *plan = NULL;
    usbeam_status st = USBEAM_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_das_sparse_plan_create(&a.p, a.backend, &plan);
        Py_END_ALLOW_THREADS
    }
    das_args_release(&a);
    if (!h) return NULL;
    usbeam_py_das_plan_shape(h, &a.p, a.in_type, a.out_type);
    return usbeam_py_plan_wrap(h, st, plan);
}

static usbeam_status usbeam_das_sparse_execute_frames_run(void *plan, size_t n_frames, const void *in, void *out)
{
    return usbeam_das_sparse_execute_frames(plan, n_frames, in, out);
}

static PyObject *py_das_sparse_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return usbeam_py_das_frames_execute(args, &das_sparse_plan_type, usbeam_das_sparse_execute_frames_run);
}

static PyObject *py_das_sparse_bytes(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_sparse_plan_type);
    if (!h) return NULL;
    return PyLong_FromSize_t(usbeam_das_sparse_bytes(h->plan));
}

/* (row_offsets int32 (n_rows + 1), columns int32 (nnz), values float32 (nnz) or complex64,
 * (n_rows, n_columns)): copies of a CPU plan's operator; None for a CUDA plan. */
static PyObject *py_das_sparse_csr(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &das_sparse_plan_type);
    if (!h) return NULL;
    usbeam_das_sparse_view v;
    usbeam_das_sparse_csr(h->plan, &v);
    if (!v.row_offsets) Py_RETURN_NONE;
    npy_intp n_off = (npy_intp)v.n_rows + 1, nnz = (npy_intp)v.nnz;
    PyArrayObject *off = (PyArrayObject *)PyArray_SimpleNew(1, &n_off, NPY_INT32);
    PyArrayObject *col = (PyArrayObject *)PyArray_SimpleNew(1, &nnz, NPY_INT32);
    PyArrayObject *val = (PyArrayObject *)PyArray_SimpleNew(1, &nnz, v.is_complex ? NPY_COMPLEX64 : NPY_FLOAT32);
    if (!off || !col || !val) {
        Py_XDECREF(off);
        Py_XDECREF(col);
        Py_XDECREF(val);
        return NULL;
    }
    memcpy(PyArray_DATA(off), v.row_offsets, (size_t)n_off * sizeof(int32_t));
    memcpy(PyArray_DATA(col), v.columns, (size_t)nnz * sizeof(int32_t));
    memcpy(PyArray_DATA(val), v.values, (size_t)nnz * (v.is_complex ? 2 : 1) * sizeof(float));
    return Py_BuildValue("NNN(nn)", off, col, val, (Py_ssize_t)v.n_rows, (Py_ssize_t)v.n_columns);
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(das_sparse)

PyMethodDef usbeam_py_das_methods[] = {
    {"das_cuda_exec", py_das_cuda_exec, METH_O, "CUDA state of a DAS plan (None for the CPU)."},
    {"das_plan", (PyCFunction)(void (*)(void))py_das_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a delay-and-sum plan."},
    {"das_execute", py_das_execute, METH_VARARGS, "Run a delay-and-sum plan: (plan, data, out[, n_frames])."},
    {"das_table_bytes", py_das_table_bytes, METH_O, "Bytes of a plan's precomputed receive table."},
    {"das_lane_rows", py_das_lane_rows, METH_O, "Rows of a plan's lane table (1-frame AVX-512 path), 0 if none."},
    {"das_lane_fixed_bits", py_das_lane_fixed_bits, METH_O, "The lane table's fixed-point unit 2^-bits sample, 0 if none."},
    {"das_lane_quarter", py_das_lane_quarter, METH_O, "1 if the lane path sums 1-frame IQ staged in quarter turns (fs = 4 fc), 2 with a direct table."},
    {"das_lane_mirrored", py_das_lane_mirrored, METH_O, "Groups of a plan without a table whose formed rows are another's in mirror image."},
    {"das_aperture_counts", py_das_aperture_counts, METH_O, "A CPU plan's receive elements per point, or None."},
    {"das_staging", py_das_staging, METH_VARARGS, "How a CPU plan stages n_frames frames: (windows, ring_rows, staged_samples)."},
    {"das_tile_samples", py_das_tile_samples, METH_O, "A CPU plan's [first, end) samples per tile of points, or None."},
    {"das_coverage", py_das_coverage, METH_VARARGS, "Which points of a CPU plan receive a recorded sample, or None."},
    {"das_transmit_times", py_das_transmit_times, METH_VARARGS, "A CPU plan's transmit times (s) of some points, or None."},
    {"das_sparse_cuda_exec", py_das_sparse_cuda_exec, METH_O, "CUDA state of a sparse DAS plan (None for the CPU)."},
    {"das_sparse_plan", (PyCFunction)(void (*)(void))py_das_sparse_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a sparse-matrix delay-and-sum plan (das_plan's arguments)."},
    {"das_sparse_execute", py_das_sparse_execute, METH_VARARGS, "Run a sparse DAS plan: (plan, data, out[, n_frames])."},
    {"das_sparse_bytes", py_das_sparse_bytes, METH_O, "Bytes of a sparse DAS plan's operator."},
    {"das_sparse_csr", py_das_sparse_csr, METH_O, "A CPU sparse DAS plan's CSR operator (copies)."},
    {"das_auto_f_number", py_das_auto_f_number, METH_VARARGS,
     "PyMUST's automatic f-number: (element_width, fc, bandwidth fraction, c)."},
    {NULL, NULL, 0, NULL},
};

/* The DAS plan's geometry arguments, parsed the same way for the adaptive plans (py_adaptive.c). */
int usbeam_py_das_args_parse(PyObject *args, PyObject *kwargs, usbeam_py_das_args *a)
{
    return das_args_parse(args, kwargs, a);
}
void usbeam_py_das_args_release(usbeam_py_das_args *a) { das_args_release(a); }
