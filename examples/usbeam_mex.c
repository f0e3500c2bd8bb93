/*
 * usbeam_mex.c - MEX gateway of the `usbeam serve` client (csrc/shm/usbeam_client.h) for
 * MATLAB and GNU Octave: the calls a Verasonics Vantage External process function needs.
 *
 *   h  = usbeam_mex('open', '/usbeam', timeout_ms)        attach to a running server
 *   usbeam_mex('set_params', h, json, [rows cols])         publish parameters; the optional
 *                                                          size is the int16 frame push checks
 *   id = usbeam_mex('push', h, RData, timeout_ms)          one frame: int16 rows x channels
 *   [img, info] = usbeam_mex('result', h, id, timeout_ms)  that frame's image
 *   [img, info] = usbeam_mex('latest', h, after_id, timeout_ms)  newest image after after_id
 *   s  = usbeam_mex('info', h)                             region counters, server pid/state
 *   usbeam_mex('close', h)
 * Timeouts in ms (defaults 1000; < 0 waits forever).  Handles are small integers; every
 * client still open is closed when the MEX file is cleared.
 *
 * Layouts: RData is MATLAB's column-major int16 (rows = samples x acquisitions, channels),
 * whose bytes go unchanged into the server's slot (the server applies the channel map, see
 * usbeam/live/serve.py): push copies straight from the mxArray's data into shared memory,
 * no intermediate copy.  An image of C-order shape (d0, ..., dk) (e.g. (1, nz, nx)) comes
 * back with MATLAB size [dk ... d0] (nx x nz), the same bytes: img.' is nz x nx.
 * Element types: usbeam_dtype (csrc/include/usbeam/core.h): int16, single, complex single,
 * uint8, (float16 as uint16 bits), int32, double.
 *
 * Errors are MATLAB/Octave errors with an identifier (usbeam:<what>) and the client
 * library's or the server's message: a frame of the wrong class or size (checked here,
 * before anything is written), a server that is not running, one that was restarted
 * (the handle belongs to the old region: the message says to open again), a frame the
 * server refused or failed on.
 *
 * Build: MATLAB  `mex -Icsrc examples/usbeam_mex.c csrc/shm/client.c -lrt`
 *        Octave  `mkoctfile --mex -Icsrc examples/usbeam_mex.c csrc/shm/client.c -lrt`
 *        (`make mex` does the latter into build/mex/).
 */
#include "mex.h"
#include "shm/usbeam_client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLIENTS 16
#define DEFAULT_TIMEOUT_MS 1000

typedef struct mex_client {
    usbeam_client *client;
    char name[256];
    unsigned char *scratch;            /* one result image (the region's result capacity) */
    unsigned long long scratch_bytes;
    double frame_rows, frame_cols;     /* expected int16 frame size, 0 = unchecked */
    int server_pid;
} mex_client;

static mex_client clients[MAX_CLIENTS];
static int exit_registered = 0;

static void close_slot(mex_client *m)
{
    if (m->client) usbeam_client_close(m->client);
    free(m->scratch);
    memset(m, 0, sizeof *m);
}

static void close_all(void)
{
    for (int i = 0; i < MAX_CLIENTS; ++i) close_slot(&clients[i]);
}

/* --- argument helpers (each raises a MATLAB error naming the argument) --------------- */

static void fail(const char *id, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3), noreturn))
#endif
    ;

static void fail(const char *id, const char *format, ...)
{
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    mexErrMsgIdAndTxt(id, "%s", message);
    __builtin_unreachable(); /* mexErrMsgIdAndTxt unwinds to MATLAB/Octave and never returns */
}

static double scalar_arg(const mxArray *a, const char *what)
{
    if (!a || mxIsEmpty(a) || mxGetNumberOfElements(a) != 1 || !mxIsNumeric(a) || mxIsComplex(a))
        fail("usbeam:argument", "%s must be a real number", what);
    double v = mxGetScalar(a);
    if (v != v) fail("usbeam:argument", "%s must not be NaN", what);
    return v;
}

static int timeout_arg(int nrhs, const mxArray *prhs[], int k, const char *what)
{
    if (nrhs <= k) return DEFAULT_TIMEOUT_MS;
    double v = scalar_arg(prhs[k], what);
    if (v > 2147483647.0) v = 2147483647.0;
    return v < 0 ? -1 : (int)v;
}

static char *string_arg(const mxArray *a, const char *what)
{
    if (!a || !mxIsChar(a)) fail("usbeam:argument", "%s must be a character vector", what);
    char *s = mxArrayToString(a);
    if (!s) fail("usbeam:argument", "%s could not be read as text", what);
    return s;
}

static mex_client *handle_arg(int nrhs, const mxArray *prhs[])
{
    if (nrhs < 2) fail("usbeam:argument", "this call needs the handle from usbeam_mex('open', ...)");
    double h = scalar_arg(prhs[1], "the handle");
    int i = (int)h;
    if (h != (double)i || i < 1 || i > MAX_CLIENTS || !clients[i - 1].client)
        fail("usbeam:handle", "%g is not an open usbeam handle (open one with usbeam_mex('open', name))",
             h);
    return &clients[i - 1];
}

/* An error from the client library, with a word on a restarted server: the old region is
 * still mapped by this handle, so the client says "stopped or died"; if a server runs
 * under the same name now, it is a new one and the handle must be reopened.  The probe waits
 * up to RESTART_PROBE_MS for it: a server that was just started creates its region's file
 * before it publishes the region, and a probe without a wait called that "gone" (seen once
 * in CI).  Only this error path waits. */
#define RESTART_PROBE_MS 1000
static void client_error(mex_client *m, int status, const char *during)
{
    char message[512];
    snprintf(message, sizeof message, "%s", usbeam_client_last_error());
    if (status == USBEAM_CLIENT_ERR_SERVER_GONE && m) {
        usbeam_client *probe = usbeam_client_open(m->name, RESTART_PROBE_MS);
        if (probe) {
            usbeam_client_info info;
            int pid = usbeam_client_info_get(probe, &info) == USBEAM_CLIENT_OK ? info.server_pid : -1;
            usbeam_client_close(probe);
            fail("usbeam:serverRestarted",
                 "usbeam %s: the server of %s was restarted (old pid %d, now pid %d): this handle belongs to the "
                 "stopped one; close it and open %s again (vantage_shm('start', ...))",
                 during, m->name, m->server_pid, pid, m->name);
        }
        fail("usbeam:serverGone", "usbeam %s: %s (%s, pid %d); start `python -m usbeam serve` and open again",
             during, message, m->name, m->server_pid);
    }
    static const char *ids[] = {"usbeam:ok", "usbeam:argument", "usbeam:system", "usbeam:layout", "usbeam:timeout",
                                "usbeam:dropped", "usbeam:rejected", "usbeam:failed", "usbeam:evicted",
                                "usbeam:serverGone", "usbeam:tooLarge", "usbeam:abandoned"};
    const char *id = status >= 0 && status < (int)(sizeof ids / sizeof ids[0]) ? ids[status] : "usbeam:error";
    fail(id, "usbeam %s: %s", during, message);
}

/* --- results ----------------------------------------------------------------------------- */

static mxArray *image_array(const usbeam_client_result *r, const unsigned char *data)
{
    mwSize dims[4] = {1, 1, 1, 1};
    int ndim = r->ndim < 1 ? 1 : (r->ndim > 4 ? 4 : r->ndim);
    for (int d = 0; d < ndim; ++d) dims[d] = (mwSize)r->shape[ndim - 1 - d];  /* C order reversed */
    mwSize nd = ndim < 2 ? 2 : (mwSize)ndim;
    size_t count = 1;
    for (int d = 0; d < ndim; ++d) count *= (size_t)r->shape[d];
    mxClassID cls;
    size_t item;
    switch (r->dtype) {
    case 0: cls = mxINT16_CLASS; item = 2; break;
    case 1: cls = mxSINGLE_CLASS; item = 4; break;
    case 2: cls = mxSINGLE_CLASS; item = 8; break;
    case 3: cls = mxUINT8_CLASS; item = 1; break;
    case 4: cls = mxUINT16_CLASS; item = 2; break;
    case 5: cls = mxINT32_CLASS; item = 4; break;
    case 6: cls = mxDOUBLE_CLASS; item = 8; break;
    default: fail("usbeam:result", "usbeam result: unknown element type %d", r->dtype);
    }
    if (count * item != r->bytes)
        fail("usbeam:result", "usbeam result: %llu bytes for %zu elements of %zu bytes", r->bytes, count, item);
    if (r->dtype == 2) {   /* interleaved complex64 -> MATLAB's separate real and imaginary parts */
        mxArray *out = mxCreateNumericArray(nd, dims, mxSINGLE_CLASS, mxCOMPLEX);
        float *re = (float *)mxGetData(out), *im = (float *)mxGetImagData(out);
        const float *src = (const float *)data;
        for (size_t i = 0; i < count; ++i) {
            re[i] = src[2 * i];
            im[i] = src[2 * i + 1];
        }
        return out;
    }
    mxArray *out = mxCreateNumericArray(nd, dims, cls, mxREAL);
    if (count) memcpy(mxGetData(out), data, count * item);
    return out;
}

static mxArray *result_info(const usbeam_client_result *r)
{
    static const char *fields[] = {"frame_id", "status", "status_text", "message", "latency_s", "shape", "dtype"};
    mxArray *s = mxCreateStructMatrix(1, 1, 7, fields);
    mxSetField(s, 0, "frame_id", mxCreateDoubleScalar((double)r->frame_id));
    mxSetField(s, 0, "status", mxCreateDoubleScalar(r->status));
    mxSetField(s, 0, "status_text", mxCreateString(usbeam_client_status_string(r->status)));
    mxSetField(s, 0, "message", mxCreateString(r->message));
    mxSetField(s, 0, "latency_s", mxCreateDoubleScalar(r->latency_s));
    int ndim = r->ndim < 0 ? 0 : (r->ndim > 4 ? 4 : r->ndim);
    mxArray *shape = mxCreateDoubleMatrix(1, (mwSize)ndim, mxREAL);
    for (int d = 0; d < ndim; ++d) mxGetPr(shape)[d] = (double)r->shape[d];
    mxSetField(s, 0, "shape", shape);
    mxSetField(s, 0, "dtype", mxCreateDoubleScalar(r->dtype));
    return s;
}

/* --- the calls ------------------------------------------------------------------------------ */

static void do_open(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    char *name = nrhs > 1 ? string_arg(prhs[1], "name") : NULL;
    int timeout = timeout_arg(nrhs, prhs, 2, "timeout_ms");
    int slot = -1;
    for (int i = 0; i < MAX_CLIENTS && slot < 0; ++i)
        if (!clients[i].client) slot = i;
    if (slot < 0) {
        mxFree(name);
        fail("usbeam:handle", "usbeam open: all %d handles are in use (close some)", MAX_CLIENTS);
    }
    mex_client *m = &clients[slot];
    snprintf(m->name, sizeof m->name, "%s", name ? name : "/usbeam");
    mxFree(name);
    m->client = usbeam_client_open(m->name, timeout);
    if (!m->client) {
        char message[512];
        snprintf(message, sizeof message, "%s", usbeam_client_last_error());
        char region[256];
        snprintf(region, sizeof region, "%s", m->name);
        memset(m, 0, sizeof *m);
        fail("usbeam:noServer", "usbeam open: %s (is `python -m usbeam serve --name %s` running?)", message, region);
    }
    usbeam_client_info info;
    if (usbeam_client_info_get(m->client, &info) != USBEAM_CLIENT_OK) {
        close_slot(m);
        client_error(NULL, USBEAM_CLIENT_ERR_SYSTEM, "open");
    }
    m->server_pid = info.server_pid;
    m->scratch_bytes = info.result_capacity;
    m->scratch = malloc(info.result_capacity ? (size_t)info.result_capacity : 1);
    if (!m->scratch) {
        close_slot(m);
        fail("usbeam:memory", "usbeam open: cannot allocate %llu bytes for results", info.result_capacity);
    }
    if (!exit_registered) {
        mexAtExit(close_all);
        exit_registered = 1;
    }
    plhs[0] = mxCreateDoubleScalar(slot + 1);
    (void)nlhs;
}

static void do_set_params(int nrhs, const mxArray *prhs[])
{
    mex_client *m = handle_arg(nrhs, prhs);
    if (nrhs < 3) fail("usbeam:argument", "usbeam set_params: give the parameters as JSON text (jsonencode(params))");
    double rows = 0, cols = 0;
    if (nrhs > 3) {
        const mxArray *size = prhs[3];
        if (!mxIsDouble(size) || mxIsComplex(size) || mxGetNumberOfElements(size) != 2)
            fail("usbeam:argument", "usbeam set_params: the frame size must be [rows channels]");
        rows = mxGetPr(size)[0];
        cols = mxGetPr(size)[1];
        if (!(rows >= 1 && cols >= 1) || rows != (double)(long long)rows || cols != (double)(long long)cols)
            fail("usbeam:argument", "usbeam set_params: the frame size must be positive integers [rows channels]");
    }
    char *json = string_arg(prhs[2], "the parameters (JSON text)");
    int status = usbeam_client_set_params(m->client, json);
    mxFree(json);
    if (status != USBEAM_CLIENT_OK) client_error(m, status, "set_params");
    m->frame_rows = rows;
    m->frame_cols = cols;
}

static const char *class_name(const mxArray *a)
{
    return mxGetClassName(a);
}

static void do_push(mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    mex_client *m = handle_arg(nrhs, prhs);
    if (nrhs < 3) fail("usbeam:argument", "usbeam push: give the frame (RData, int16 rows x channels)");
    const mxArray *frame = prhs[2];
    int timeout = timeout_arg(nrhs, prhs, 3, "timeout_ms");
    if (mxGetClassID(frame) != mxINT16_CLASS || mxIsComplex(frame) || mxIsSparse(frame))
        fail("usbeam:frameType", "usbeam push: RData must be a real int16 array, as the Vantage's RcvData (got %s%s)",
             mxIsComplex(frame) ? "complex " : "", class_name(frame));
    const mwSize *dims = mxGetDimensions(frame);
    mwSize ndim = mxGetNumberOfDimensions(frame);
    if (ndim != 2 && !(ndim == 3 && dims[2] == 1))
        fail("usbeam:frameSize", "usbeam push: RData must be one frame, rows x channels (got %d dimensions); "
             "index a frame with RcvData{1}(:, :, k)", (int)ndim);
    if (m->frame_rows > 0 && ((double)dims[0] != m->frame_rows || (double)dims[1] != m->frame_cols))
        fail("usbeam:frameSize", "usbeam push: RData is %llu x %llu but the parameters say %.0f x %.0f int16 "
             "(Resource.RcvBuffer rowsPerFrame x colsPerFrame)", (unsigned long long)dims[0],
             (unsigned long long)dims[1], m->frame_rows, m->frame_cols);
    unsigned long long bytes = (unsigned long long)mxGetNumberOfElements(frame) * 2ull;
    if (bytes == 0) fail("usbeam:frameSize", "usbeam push: RData is empty");
    unsigned long long frame_id = 0;
    /* straight from MATLAB's array into the shared-memory slot: the one copy a push needs */
    int status = usbeam_client_push(m->client, mxGetData(frame), bytes, timeout, &frame_id);
    if (status != USBEAM_CLIENT_OK) client_error(m, status, "push");
    plhs[0] = mxCreateDoubleScalar((double)frame_id);
}

static void do_result(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[], int latest)
{
    mex_client *m = handle_arg(nrhs, prhs);
    double id = 0;
    if (!latest) {
        if (nrhs < 3) fail("usbeam:argument", "usbeam result: give the frame id push returned");
        id = scalar_arg(prhs[2], "frame id");
    } else if (nrhs > 2) {
        id = scalar_arg(prhs[2], "after_id");
    }
    if (id < 0 || id != (double)(unsigned long long)id)
        fail("usbeam:argument", "usbeam %s: the frame id must be a non-negative integer (got %g)",
             latest ? "latest" : "result", id);
    int timeout = timeout_arg(nrhs, prhs, 3, "timeout_ms");
    usbeam_client_result r;
    memset(&r, 0, sizeof r);
    int status = latest
        ? usbeam_client_latest(m->client, (unsigned long long)id, m->scratch, m->scratch_bytes, timeout, &r)
        : usbeam_client_get_result(m->client, (unsigned long long)id, m->scratch, m->scratch_bytes, timeout, &r);
    if (status != USBEAM_CLIENT_OK) client_error(m, status, latest ? "latest" : "result");
    plhs[0] = image_array(&r, m->scratch);
    if (nlhs > 1) plhs[1] = result_info(&r);
}

static void do_info(mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    mex_client *m = handle_arg(nrhs, prhs);
    usbeam_client_info i;
    int status = usbeam_client_info_get(m->client, &i);
    if (status != USBEAM_CLIENT_OK) client_error(m, status, "info");
    static const char *fields[] = {"name", "server_pid", "server_running", "n_slots", "n_results", "policy",
                                   "slot_capacity", "result_capacity", "pushed", "dropped", "rejected",
                                   "abandoned", "processed", "failed", "stalled", "discarded"};
    mxArray *s = mxCreateStructMatrix(1, 1, 16, fields);
    mxSetField(s, 0, "name", mxCreateString(m->name));
    mxSetField(s, 0, "server_pid", mxCreateDoubleScalar(i.server_pid));
    mxSetField(s, 0, "server_running", mxCreateLogicalScalar(i.server_running != 0));
    mxSetField(s, 0, "n_slots", mxCreateDoubleScalar(i.n_slots));
    mxSetField(s, 0, "n_results", mxCreateDoubleScalar(i.n_results));
    mxSetField(s, 0, "policy", mxCreateString(i.policy == 0 ? "drop_oldest" : "block"));
    mxSetField(s, 0, "slot_capacity", mxCreateDoubleScalar((double)i.slot_capacity));
    mxSetField(s, 0, "result_capacity", mxCreateDoubleScalar((double)i.result_capacity));
    mxSetField(s, 0, "pushed", mxCreateDoubleScalar((double)i.pushed));
    mxSetField(s, 0, "dropped", mxCreateDoubleScalar((double)i.dropped));
    mxSetField(s, 0, "rejected", mxCreateDoubleScalar((double)i.rejected));
    mxSetField(s, 0, "abandoned", mxCreateDoubleScalar((double)i.abandoned));
    mxSetField(s, 0, "processed", mxCreateDoubleScalar((double)i.processed));
    mxSetField(s, 0, "failed", mxCreateDoubleScalar((double)i.failed));
    mxSetField(s, 0, "stalled", mxCreateDoubleScalar((double)i.stalled));
    mxSetField(s, 0, "discarded", mxCreateDoubleScalar((double)i.discarded));
    plhs[0] = s;
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    if (nrhs < 1 || !mxIsChar(prhs[0]))
        fail("usbeam:argument", "the first argument is the call: 'open', 'set_params', 'push', "
             "'result', 'latest', 'info' or 'close'");
    char *call = mxArrayToString(prhs[0]);
    char name[32];
    snprintf(name, sizeof name, "%s", call ? call : "");
    mxFree(call);
    if (!strcmp(name, "open")) do_open(nlhs, plhs, nrhs, prhs);
    else if (!strcmp(name, "set_params")) do_set_params(nrhs, prhs);
    else if (!strcmp(name, "push")) do_push(plhs, nrhs, prhs);
    else if (!strcmp(name, "result")) do_result(nlhs, plhs, nrhs, prhs, 0);
    else if (!strcmp(name, "latest")) do_result(nlhs, plhs, nrhs, prhs, 1);
    else if (!strcmp(name, "info")) do_info(plhs, nrhs, prhs);
    else if (!strcmp(name, "close")) {
        if (nrhs > 1) close_slot(handle_arg(nrhs, prhs));
    } else {
        fail("usbeam:argument", "unknown call '%s' (open, set_params, push, result, latest, info, close)",
             name);
    }
}
