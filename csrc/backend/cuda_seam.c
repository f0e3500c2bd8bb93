/*
 * cuda_seam.c - usbeam._core's half of the CUDA seam (csrc/cuda_seam.h): every CUDA entry point
 * the C library calls is defined here as a forwarder through one table of function pointers,
 * which the optional module usbeam._cuda fills when Python loads it on first use.  Until then
 * (or for ever, on a machine without CUDA or in the plain-C tests) each gives its fallback:
 * USBEAM_ERR_NO_BACKEND with the reason the backend is absent, so asking for CUDA is an error,
 * never a crash, and the CPU library never needs a CUDA library to load.
 */
#include "backend/cuda_seam.h"

#include <stdio.h>
#include <string.h>

/* Written once, by usbeam_cuda_install under the GIL, before any CUDA plan can exist; read
 * afterwards without a lock (a pointer-sized store published before any caller can see a
 * CUDA plan or device array). */
static usbeam_cuda_api seam;
static const usbeam_cuda_api *installed;
static char unavailable_reason[256] = "usbeam was built without CUDA, or its CUDA module is not loaded";

usbeam_status usbeam_vfail(usbeam_status status, const char *format, va_list args);

static const usbeam_host_services host_services = {usbeam_vfail, usbeam_alloc, usbeam_free};

usbeam_status usbeam_cuda_missing(const char *function)
{
    const char *short_name = strncmp(function, "usbeam_", 7) == 0 ? function + 7 : function;
    return usbeam_fail(USBEAM_ERR_NO_BACKEND, "%s: the CUDA backend is not available (%s)", short_name,
                       unavailable_reason);
}

void usbeam_cuda_set_unavailable(const char *reason)
{
    snprintf(unavailable_reason, sizeof unavailable_reason, "%s", reason ? reason : "unknown reason");
}

const char *usbeam_cuda_unavailable_reason(void) { return unavailable_reason; }

usbeam_status usbeam_cuda_install(const usbeam_cuda_api *api)
{
    static const char expected[] = USBEAM_CUDA_SEAM_SIGNATURE;
    if (!api) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "api is NULL");
    if (installed) return USBEAM_OK;
    if (!api->signature || strcmp(api->signature, expected) != 0)
        return usbeam_fail(USBEAM_ERR_NO_BACKEND,
                           "usbeam._cuda was built from other sources than usbeam._core (its entry points "
                           "differ): rebuild usbeam");
    api->connect(&host_services);
    seam = *api;
    installed = &seam;
    return USBEAM_OK;
}

const usbeam_cuda_api *usbeam_cuda_installed(void) { return installed; }

int usbeam_built_with_cuda(void) { return installed != NULL; }

#define USBEAM_SEAM_FORWARD(ret, name, params, args, fallback) \
    ret name params                                             \
    {                                                           \
        if (installed) return seam.name args;                   \
        return fallback;                                        \
    }
#define USBEAM_SEAM_FORWARD_V(name, params, args) \
    void name params                               \
    {                                              \
        if (installed) seam.name args;             \
    }
USBEAM_CUDA_ENTRY_POINTS(USBEAM_SEAM_FORWARD, USBEAM_SEAM_FORWARD_V)
