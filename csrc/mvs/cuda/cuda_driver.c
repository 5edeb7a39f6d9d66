#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>

#include "../../common/cuda_loader.h"

/* ap_fatbin, ap_fatbin_size: generated at build time (setup.py) from
 * csrc/mvs/cuda/sweep.cu, empty where nvcc was not found */
#include "ap_fatbin.h"

#define MAX_DEVICES 64

static ap_cuda_api api;
static int api_state;            /* 0 not tried, 1 open, -1 failed */
static char api_error[256];
static ap_cuda_device devices[MAX_DEVICES];
static int device_ready[MAX_DEVICES];

void
ap_cuda_error(const ap_cuda_api *a, const char *call, CUresult rc,
              char *error, size_t size)
{
    const char *text = NULL;
    if (a == NULL || a->GetErrorString == NULL ||
        a->GetErrorString(rc, &text) != AP_CUDA_SUCCESS || text == NULL) {
        text = "unknown error";
    }
    snprintf(error, size, "%s: %s (%d)", call, text, rc);
}

static int
open_api(void)
{
    if (ap_fatbin_size == 0) {
        snprintf(api_error, sizeof(api_error), "aquaprof was built without "
                 "its CUDA kernels (nvcc was not found at build time)");
        return -1;
    }
    const ap_dl_symbol symbols[] = {
        {(void **)&api.Init, "cuInit"},
        {(void **)&api.DeviceGetCount, "cuDeviceGetCount"},
        {(void **)&api.DeviceGet, "cuDeviceGet"},
        {(void **)&api.DeviceGetAttribute, "cuDeviceGetAttribute"},
        {(void **)&api.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {(void **)&api.DevicePrimaryCtxRelease,
         "cuDevicePrimaryCtxRelease_v2"},
        {(void **)&api.CtxPushCurrent, "cuCtxPushCurrent_v2"},
        {(void **)&api.CtxPopCurrent, "cuCtxPopCurrent_v2"},
        {(void **)&api.ModuleLoadData, "cuModuleLoadData"},
        {(void **)&api.ModuleUnload, "cuModuleUnload"},
        {(void **)&api.ModuleGetFunction, "cuModuleGetFunction"},
        {(void **)&api.FuncSetAttribute, "cuFuncSetAttribute"},
        {(void **)&api.LaunchKernel, "cuLaunchKernel"},
        {(void **)&api.GetErrorString, "cuGetErrorString"},
        {(void **)&api.PointerGetAttribute, "cuPointerGetAttribute"},
    };
    void *lib;
    if (ap_cuda_load(ap_cuda_driver_path(), symbols,
                     sizeof(symbols) / sizeof(symbols[0]), &lib, api_error,
                     sizeof(api_error)) != AP_OK) {
        return -1;
    }
    CUresult rc = api.Init(0);
    if (rc != AP_CUDA_SUCCESS) {
        ap_cuda_error(&api, "cuInit", rc, api_error, sizeof(api_error));
        dlclose(lib);
        return -1;
    }
    return 0;
}

static int
load_device(int ordinal, char *error, size_t size)
{
    ap_cuda_device *d = &devices[ordinal];
    CUdevice device;
    CUmodule module;
    CUresult rc;
    const char *call = "cuDeviceGet";
    if ((rc = api.DeviceGet(&device, ordinal)) != AP_CUDA_SUCCESS ||
        (call = "cuDeviceGetAttribute",
         rc = api.DeviceGetAttribute(&d->shared_optin,
                                     AP_CU_DEVICE_ATTRIBUTE_SHARED_OPTIN,
                                     device)) != AP_CUDA_SUCCESS ||
        (call = "cuDevicePrimaryCtxRetain",
         rc = api.DevicePrimaryCtxRetain(&d->ctx, device)) !=
            AP_CUDA_SUCCESS) {
        ap_cuda_error(&api, call, rc, error, size);
        return -1;
    }
    if ((rc = api.CtxPushCurrent(d->ctx)) != AP_CUDA_SUCCESS) {
        ap_cuda_error(&api, "cuCtxPushCurrent", rc, error, size);
        api.DevicePrimaryCtxRelease(device);
        return -1;
    }
    call = "cuModuleLoadData";
    rc = api.ModuleLoadData(&module, ap_fatbin);
    int loaded = rc == AP_CUDA_SUCCESS;
    struct {
        CUfunction *slot;
        const char *name;
    } kernels[] = {{&d->rays, "ap_rays_kernel"},
                   {&d->warp, "ap_warp_kernel"},
                   {&d->cost, "ap_cost_kernel"},
                   {&d->extract, "ap_extract_kernel"},
                   {&d->depth_fold, "ap_depth_fold_kernel"},
                   {&d->warp_planes, "ap_warp_planes_kernel"},
                   {&d->cost_planes, "ap_cost_planes_kernel"},
                   {&d->parity_warp, "ap_parity_warp_kernel"},
                   {&d->parity_centre, "ap_parity_centre_kernel"},
                   {&d->parity_cost, "ap_parity_cost_kernel"},
                   {&d->parity_strip_ncc, "ap_parity_strip_ncc_kernel"},
                   {&d->parity_strip_ssim, "ap_parity_strip_ssim_kernel"},
                   {&d->strip_ncc[0], "ap_strip_ncc_kernel"},
                   {&d->strip_ncc[1], "ap_strip_ncc_r1_kernel"},
                   {&d->strip_ncc[2], "ap_strip_ncc_r2_kernel"},
                   {&d->strip_ncc[3], "ap_strip_ncc_r3_kernel"},
                   {&d->strip_ncc[4], "ap_strip_ncc_r4_kernel"},
                   {&d->strip_ncc[5], "ap_strip_ncc_r5_kernel"},
                   {&d->strip_ncc[6], "ap_strip_ncc_r6_kernel"},
                   {&d->strip_ncc[7], "ap_strip_ncc_r7_kernel"},
                   {&d->strip_sad, "ap_strip_sad_kernel"},
                   {&d->strip_ssim, "ap_strip_ssim_kernel"}};
    _Static_assert(AP_CUDA_STRIP_RADII == 7,
                   "a strip NCC kernel by name for every radius");
    size_t count = sizeof(kernels) / sizeof(kernels[0]);
    for (size_t i = 0; rc == AP_CUDA_SUCCESS && i < count; i++) {
        call = kernels[i].name;
        rc = api.ModuleGetFunction(kernels[i].slot, module, kernels[i].name);
    }
    if (rc != AP_CUDA_SUCCESS && loaded) {
        api.ModuleUnload(module);
    }
    CUcontext popped;
    api.CtxPopCurrent(&popped);
    if (rc != AP_CUDA_SUCCESS) {
        ap_cuda_error(&api, call, rc, error, size);
        api.DevicePrimaryCtxRelease(device);
        return -1;
    }
    return 0;
}

int
ap_cuda_device_count(int *count, char *error, size_t size)
{
    if (api_state == 0) {
        api_state = open_api() == 0 ? 1 : -1;
    }
    if (api_state < 0) {
        snprintf(error, size, "%s", api_error);
        return -1;
    }
    CUresult rc = api.DeviceGetCount(count);
    if (rc != AP_CUDA_SUCCESS) {
        ap_cuda_error(&api, "cuDeviceGetCount", rc, error, size);
        return -1;
    }
    if (*count < 1) {
        snprintf(error, size, "no CUDA device found");
        return -1;
    }
    return 0;
}

const ap_cuda_device *
ap_cuda_device_get(int ordinal, const ap_cuda_api **out_api, char *error,
                   size_t size)
{
    int count;
    if (ap_cuda_device_count(&count, error, size) < 0) {
        return NULL;
    }
    if (ordinal < 0 || ordinal >= count || ordinal >= MAX_DEVICES) {
        snprintf(error, size, "no CUDA device %d (%d found)", ordinal,
                 count);
        return NULL;
    }
    if (!device_ready[ordinal]) {
        if (load_device(ordinal, error, size) < 0) {
            return NULL;
        }
        device_ready[ordinal] = 1;
    }
    *out_api = &api;
    return &devices[ordinal];
}
