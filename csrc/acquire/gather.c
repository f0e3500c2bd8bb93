/*
 * live.c - channel mapping of live frames (the CPU half of "map while copying").
 *
 * Layout: raw  (n_rows, n_channels) with arbitrary element strides; a Vantage RcvData
 *              frame is column-major int16 (rows = samples x acquisitions).
 *         out  [n_acquisitions][n_elements][n_samples], C order, same element type.
 * out[a][e][k] = raw[acquisition_row[a] + k][element_channel[e]]: Trans.Connector picks
 * the channel of each element, Receive(a).startSample the first row of each acquisition.
 * Each (acquisition, element) row of out is one contiguous copy when the raw rows are
 * contiguous (column-major), else a strided gather the compiler vectorises.
 */
#include "common/usbeam_internal.h"

#include <string.h>

struct usbeam_live_gather_plan {
    usbeam_live_gather_params params;
    int32_t *element_channel;
    int64_t *acquisition_row;
    size_t element_size;
};

usbeam_status usbeam_live_gather_plan_create(const usbeam_live_gather_params *params,
                                             usbeam_live_gather_plan **plan)
{
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    const usbeam_live_gather_params *p = params;
    if (p->n_rows == 0 || p->n_channels == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "raw_shape must be positive (got %zu x %zu)", p->n_rows,
                           p->n_channels);
    if (p->n_acquisitions == 0 || p->n_elements == 0 || p->n_samples == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "n_acquisitions, n_elements and n_samples must be > 0 (got %zu, %zu, %zu)",
                           p->n_acquisitions, p->n_elements, p->n_samples);
    if (!p->element_channel || !p->acquisition_row)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "element_channel and acquisition_row must not be NULL");
    size_t element_size = usbeam_dtype_size(p->dtype);
    if (p->dtype != USBEAM_DTYPE_INT16 && p->dtype != USBEAM_DTYPE_FLOAT32 && p->dtype != USBEAM_DTYPE_FLOAT64)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "dtype must be int16, float32 or float64");
    for (size_t e = 0; e < p->n_elements; ++e)
        if (p->element_channel[e] < 0 || (size_t)p->element_channel[e] >= p->n_channels)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "element_channel[%zu] = %d is outside the %zu raw channels", e,
                               (int)p->element_channel[e], p->n_channels);
    for (size_t a = 0; a < p->n_acquisitions; ++a)
        if (p->acquisition_row[a] < 0 || (uint64_t)p->acquisition_row[a] + p->n_samples > p->n_rows)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "acquisition_row[%zu] = %lld: rows %lld..%lld exceed the %zu raw rows", a,
                               (long long)p->acquisition_row[a], (long long)p->acquisition_row[a],
                               (long long)(p->acquisition_row[a] + (int64_t)p->n_samples - 1), p->n_rows);
    size_t out_count;
    if (usbeam_mul_size3(p->n_acquisitions, p->n_elements, p->n_samples, &out_count) ||
        usbeam_mul_size(out_count, element_size, &out_count) || out_count > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "mapped frame size overflows");

    usbeam_live_gather_plan *g = usbeam_alloc(sizeof *g);
    int32_t *channels = usbeam_alloc(p->n_elements * sizeof *channels);
    int64_t *rows = usbeam_alloc(p->n_acquisitions * sizeof *rows);
    if (!g || !channels || !rows) {
        usbeam_free(g);
        usbeam_free(channels);
        usbeam_free(rows);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "gather plan tables");
    }
    memcpy(channels, p->element_channel, p->n_elements * sizeof *channels);
    memcpy(rows, p->acquisition_row, p->n_acquisitions * sizeof *rows);
    g->params = *p;
    g->params.element_channel = channels;
    g->params.acquisition_row = rows;
    g->element_channel = channels;
    g->acquisition_row = rows;
    g->element_size = element_size;
    *plan = g;
    return USBEAM_OK;
}

void usbeam_live_gather_plan_destroy(usbeam_live_gather_plan *plan)
{
    if (!plan) return;
    usbeam_free(plan->element_channel);
    usbeam_free(plan->acquisition_row);
    usbeam_free(plan);
}

#define GATHER_ROW(type)                                                       \
    do {                                                                       \
        const type *s = (const type *)src;                                     \
        type *d = (type *)dst;                                                 \
        for (size_t k = 0; k < n; ++k) d[k] = s[(ptrdiff_t)k * row_stride];    \
    } while (0)

usbeam_status usbeam_live_gather_execute(const usbeam_live_gather_plan *plan, const void *raw,
                                         ptrdiff_t row_stride, ptrdiff_t channel_stride, void *out)
{
    if (!plan || !raw || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, raw and out must not be NULL");
    const usbeam_live_gather_params *p = &plan->params;
    const size_t n = p->n_samples, es = plan->element_size;
    const ptrdiff_t pairs = (ptrdiff_t)(p->n_acquisitions * p->n_elements);
    const int contiguous_rows = row_stride == 1;
    /* One thread copies at memory speed for typical frames (a few MB); a team only pays
     * off for large frames, and in a live session it competes with the compute thread. */
#pragma omp parallel for schedule(static) if ((size_t)pairs * n * es > ((size_t)16 << 20))
    for (ptrdiff_t pair = 0; pair < pairs; ++pair) {
        size_t a = (size_t)pair / p->n_elements, e = (size_t)pair % p->n_elements;
        const char *src = (const char *)raw +
                          ((ptrdiff_t)plan->acquisition_row[a] * row_stride +
                           (ptrdiff_t)plan->element_channel[e] * channel_stride) * (ptrdiff_t)es;
        char *dst = (char *)out + (size_t)pair * n * es;
        if (contiguous_rows)
            memcpy(dst, src, n * es);
        else if (es == 2)
            GATHER_ROW(int16_t);
        else if (es == 4)
            GATHER_ROW(float);
        else
            GATHER_ROW(double);
    }
    return USBEAM_OK;
}

