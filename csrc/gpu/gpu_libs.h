/* libcuda, opened at run time with dlopen so that aquaprof builds,
 * imports and profiles where it does not exist (CUPTI is the backend's:
 * cupti_api.h). Each opener says in `why` exactly what was missing. */
#ifndef AP_GPU_LIBS_H
#define AP_GPU_LIBS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "../common/cuda_loader.h"

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
/* ... and on a machine with no device. */
#define AP_CUDA_ERROR_NO_DEVICE 100

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

#endif
