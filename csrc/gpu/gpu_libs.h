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
    int (*DevicePrimaryCtxGetState)(int device, unsigned *flags,
                                    int *active);
    int (*DevicePrimaryCtxRetain)(void **ctx, int device);
    int (*DevicePrimaryCtxRelease)(int device);
    int (*CtxPushCurrent)(void *ctx);
    int (*CtxPopCurrent)(void **ctx);
    int (*CtxSynchronize)(void);
    int (*GetErrorName)(int error, const char **name);
} ap_cuda_fns;

/* The driver's answer when asked before cuInit. */
#define AP_CUDA_ERROR_NOT_INITIALIZED 3

/* Opens the driver (path, e.g. "libcuda.so.1") without initializing it,
 * once per process. AP_ERR_SYSTEM with why filled: no driver, or one
 * too old. */
ap_status ap_cuda_load_driver(const char *path, const ap_cuda_fns **fns,
                              char *why, size_t size);

/* Counts the devices of a driver the program has initialized, never
 * initializing it: a process that forks after cuInit leaves its children
 * unable to use CUDA, so aquaprof's own cuda="auto" must not be what
 * initialized it. AP_OK with *devices (0 or more), AP_IGNORED when the
 * program has not initialized CUDA, AP_ERR_SYSTEM with why filled. */
ap_status ap_cuda_devices_if_initialized(const ap_cuda_fns *fns,
                                         int *devices, char *why,
                                         size_t size);

/* Initializes the driver (cuda=True, cuda_sync=True) and counts its
 * devices. AP_ERR_SYSTEM with why filled: the driver refused to start, or
 * sees no device. */
ap_status ap_cuda_init(const ap_cuda_fns *fns, int *devices, char *why,
                       size_t size);

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

/* The external correlation kind aquaprof pushes its stage tags under:
 * torch.profiler (Kineto) pushes CUSTOM0 and CUSTOM1, so a third keeps
 * each tool's ids on a stack of its own. */
#define AP_CORRELATION_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2

/* Opens CUPTI, once per process: a copy already loaded in the process
 * (torch's), else the first of the n candidate paths whose API major
 * version is this build's. A loaded copy of another major version is
 * never joined by a second copy (two CUPTIs would fight over the device):
 * AP_ERR_INVALID, why saying so. On success `where` holds the path
 * opened. AP_ERR_SYSTEM with why listing every path tried and why it
 * failed. */
ap_status ap_cupti_open(const char *const *candidates, size_t n,
                        const ap_cupti_fns **fns, char *where,
                        size_t where_size, char *why, size_t size);

/* "CUPTI_ERROR_...: text" for a CUPTI result. */
void ap_cupti_error(CUptiResult rc, char *out, size_t size);
#endif

#endif
