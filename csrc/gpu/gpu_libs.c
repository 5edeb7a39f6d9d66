#include "gpu_libs.h"

#include <stdio.h>

/* The driver stays open for the process's life once opened, as every
 * CUDA library keeps it; a failure is retried at the next start (cheap,
 * and the user may have fixed the path meanwhile). */
static ap_cuda_fns cuda;
static int cuda_open;

ap_status
ap_cuda_load_driver(const char *path, const ap_cuda_fns **fns, char *why,
                    size_t size)
{
    if (!cuda_open) {
        const ap_dl_symbol symbols[] = {
            {(void **)&cuda.Init, "cuInit"},
            {(void **)&cuda.DriverGetVersion, "cuDriverGetVersion"},
            {(void **)&cuda.DeviceGetCount, "cuDeviceGetCount"},
            {(void **)&cuda.DeviceGet, "cuDeviceGet"},
            {(void **)&cuda.DeviceGetName, "cuDeviceGetName"},
            {(void **)&cuda.DeviceGetAttribute, "cuDeviceGetAttribute"},
            {(void **)&cuda.DevicePrimaryCtxGetState,
             "cuDevicePrimaryCtxGetState"},
            {(void **)&cuda.DevicePrimaryCtxRetain,
             "cuDevicePrimaryCtxRetain"},
            {(void **)&cuda.DevicePrimaryCtxRelease,
             "cuDevicePrimaryCtxRelease_v2"},
            {(void **)&cuda.CtxPushCurrent, "cuCtxPushCurrent_v2"},
            {(void **)&cuda.CtxPopCurrent, "cuCtxPopCurrent_v2"},
            {(void **)&cuda.CtxSynchronize, "cuCtxSynchronize"},
            {(void **)&cuda.GetErrorName, "cuGetErrorName"},
        };
        void *lib;
        if (ap_cuda_load(path, symbols, sizeof(symbols) / sizeof(symbols[0]),
                         &lib, why, size) != AP_OK) {
            return AP_ERR_SYSTEM;
        }
        cuda_open = 1;
    }
    *fns = &cuda;
    return AP_OK;
}

/* why = "<prefix> (<CUDA_ERROR_...>)", or the number where the driver
 * has no name for it. */
static void
driver_error(const ap_cuda_fns *fns, int rc, const char *prefix, char *why,
             size_t size)
{
    const char *name = NULL;
    if (fns->GetErrorName(rc, &name) != 0 || !name) {
        snprintf(why, size, "%s (error %d)", prefix, rc);
    } else {
        snprintf(why, size, "%s (%s)", prefix, name);
    }
}

/* The words before a failed call's: a machine with no device says
 * so, as a CPU machine's ordinary state; any other failure is the
 * driver's, and must not read as that. */
static const char *
failed(int rc)
{
    return rc == AP_CUDA_ERROR_NO_DEVICE ? "no CUDA device"
                                         : "the CUDA driver failed";
}

/* Counts the devices: AP_OK, or AP_ERR_SYSTEM when there is none. */
static ap_status
count_devices(const ap_cuda_fns *fns, int rc, int count, int *devices,
              char *why, size_t size)
{
    if (rc != 0) {
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "%s: cuDeviceGetCount failed",
                 failed(rc));
        driver_error(fns, rc, prefix, why, size);
        return AP_ERR_SYSTEM;
    }
    if (count == 0) {
        snprintf(why, size, "no CUDA device: the driver sees none");
        return AP_ERR_SYSTEM;
    }
    *devices = count;
    return AP_OK;
}

ap_status
ap_cuda_devices_if_initialized(const ap_cuda_fns *fns, int *devices,
                               char *why, size_t size)
{
    int count = 0;
    int rc = fns->DeviceGetCount(&count);
    if (rc == AP_CUDA_ERROR_NOT_INITIALIZED) {
        return AP_IGNORED;
    }
    return count_devices(fns, rc, count, devices, why, size);
}

ap_status
ap_cuda_init(const ap_cuda_fns *fns, int *devices, char *why, size_t size)
{
    int rc = fns->Init(0);
    if (rc != 0) {
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "%s: cuInit failed", failed(rc));
        driver_error(fns, rc, prefix, why, size);
        return AP_ERR_SYSTEM;
    }
    int count = 0;
    rc = fns->DeviceGetCount(&count);
    return count_devices(fns, rc, count, devices, why, size);
}
