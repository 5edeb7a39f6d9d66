/* The CUDA driver API, opened at run time (csrc/common/cuda_loader.h): the
 * package builds without CUDA headers and imports where there is no
 * driver. Only what the plane sweep uses is declared; the values are the
 * driver's stable ABI. */
#ifndef AP_CUDA_DRIVER_H
#define AP_CUDA_DRIVER_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define AP_CUDA_SUCCESS 0
#define AP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
/* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
#define AP_CU_DEVICE_ATTRIBUTE_SHARED_OPTIN 97
/* cuPointerGetAttribute's attributes (CUpointer_attribute) and the
 * memory types it answers (CUmemorytype) */
#define AP_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define AP_CU_MEMORYTYPE_DEVICE 2
#define AP_CU_MEMORYTYPE_UNIFIED 4

typedef struct {
    CUresult (*Init)(unsigned flags);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *device, int ordinal);
    CUresult (*DeviceGetAttribute)(int *value, int attribute,
                                   CUdevice device);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice device);
    CUresult (*CtxPushCurrent)(CUcontext ctx);
    CUresult (*CtxPopCurrent)(CUcontext *ctx);
    CUresult (*ModuleLoadData)(CUmodule *module, const void *image);
    CUresult (*ModuleUnload)(CUmodule module);
    CUresult (*ModuleGetFunction)(CUfunction *f, CUmodule module,
                                  const char *name);
    CUresult (*FuncSetAttribute)(CUfunction f, int attribute, int value);
    CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy,
                             unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, CUstream stream,
                             void **params, void **extra);
    CUresult (*GetErrorString)(CUresult error, const char **text);
    CUresult (*PointerGetAttribute)(void *data, int attribute,
                                    unsigned long long ptr);
} ap_cuda_api;

/* Radii with a strip NCC kernel of their own: AP_STRIP_RADII
 * (csrc/mvs/cuda/gpu_strip.h, which cuda_sweep.c checks against it). */
#define AP_CUDA_STRIP_RADII 7

/* The kernels of one device, loaded on first use. */
typedef struct {
    CUcontext ctx;
    CUfunction rays, warp, cost, extract;
    /* depth without the volume: a chunk of planes folded (gpu_depth.h) */
    CUfunction depth_fold;
    /* the sources' planes warped first, then their costs */
    CUfunction warp_planes, cost_planes;
    /* AquaMVS parity's three passes and its strip kernels, NCC's and
     * SSIM's (parity_sweep.cuh) */
    CUfunction parity_warp, parity_centre, parity_cost;
    CUfunction parity_strip_ncc, parity_strip_ssim;
    /* the most dynamic shared memory a block may ask for */
    int shared_optin;
    /* the strip cost kernels (gpu_strip.h): NCC's by radius, [0] the one
     * that reads it at run time; SAD's and SSIM's (gpu_ssim_strip.h) at
     * any radius */
    CUfunction strip_ncc[AP_CUDA_STRIP_RADII + 1], strip_sad, strip_ssim;
} ap_cuda_device;

/* Opens the driver (once: $AQUAPROF_LIBCUDA, else libcuda.so.1) and
 * counts its devices. 0, or -1 with a message in error: no fat binary
 * built in, no driver, no device. */
int ap_cuda_device_count(int *count, char *error, size_t size);

/* Opens the driver and loads the kernels onto device `ordinal` (the
 * driver stays open, the device's primary context retained, for the
 * process's life, as every CUDA library does). Returns the device, or
 * NULL with a message in error: no fat binary built in, no driver, no
 * such device, or a driver error. Not thread-safe: call with the GIL. */
const ap_cuda_device *ap_cuda_device_get(int ordinal, const ap_cuda_api **api,
                                         char *error, size_t size);

/* Message for a failed call, e.g. "cuLaunchKernel: out of memory (2)". */
void ap_cuda_error(const ap_cuda_api *api, const char *call, CUresult rc,
                   char *error, size_t size);

/* Whether a kernel may touch device address ptr: the driver knows it as
 * device (or managed) memory. Call with a context current. 0, or -1 with
 * a sentence in error that starts with name. */
int ap_cuda_check_buffer(const ap_cuda_api *api, unsigned long long ptr,
                         const char *name, char *error, size_t size);

#endif
