/* libcuda and libcupti, opened at run time with dlopen so that aquaprof
 * builds, imports and profiles where neither exists. Each opener says in
 * `why` exactly what was missing. */
#ifndef AP_GPU_LIBS_H
#define AP_GPU_LIBS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "cuda_loader.h"

#ifdef AP_HAVE_CUPTI
#include <cupti.h>
#endif

typedef struct {
    int (*Init)(unsigned flags);
    int (*DriverGetVersion)(int *version);
    int (*DeviceGetCount)(int *count);
    int (*DeviceGet)(int *device, int ordinal);
    int (*DeviceGetName)(char *name, int len, int device);
    int (*DeviceGetAttribute)(int *value, int attribute, int device);
    int (*CtxSynchronize)(void);
    int (*GetErrorName)(int error, const char **name);
} ap_cuda_fns;

/* Opens the driver (path, e.g. "libcuda.so.1") and counts its devices,
 * once per process; later calls give the first call's outcome.
 * AP_ERR_SYSTEM with why filled: no driver, driver refused to start, no
 * device. */
ap_status ap_cuda_open(const char *path, const ap_cuda_fns **fns,
                       int *devices, char *why, size_t size);

#ifdef AP_HAVE_CUPTI
typedef struct {
    CUptiResult (*GetVersion)(uint32_t *version);
    CUptiResult (*GetResultString)(CUptiResult result, const char **text);
    CUptiResult (*ActivityRegisterCallbacks)(
        CUpti_BuffersCallbackRequestFunc requested,
        CUpti_BuffersCallbackCompleteFunc completed);
    CUptiResult (*ActivityRegisterTimestampCallback)(
        CUpti_TimestampCallbackFunc now);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind kind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind kind);
    CUptiResult (*ActivityFlushAll)(uint32_t flag);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *buffer, size_t valid,
                                         CUpti_Activity **record);
    CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext ctx,
                                                uint32_t stream,
                                                size_t *dropped);
    CUptiResult (*ActivityPushExternalCorrelationId)(
        CUpti_ExternalCorrelationKind kind, uint64_t id);
    CUptiResult (*ActivityPopExternalCorrelationId)(
        CUpti_ExternalCorrelationKind kind, uint64_t *id);
} ap_cupti_fns;

/* Opens CUPTI, once per process: a copy already loaded in the process
 * (torch's) first, then each of the n candidate paths in order. On
 * success `where` holds the path opened. AP_ERR_SYSTEM with why listing
 * every path tried and why it failed; AP_ERR_INVALID when the CUPTI found
 * is older than the headers aquaprof was built with. */
ap_status ap_cupti_open(const char *const *candidates, size_t n,
                        const ap_cupti_fns **fns, char *where,
                        size_t where_size, char *why, size_t size);

/* "CUPTI_ERROR_...: text" for a CUPTI result. */
void ap_cupti_error(CUptiResult rc, char *out, size_t size);
#endif

#endif
