#include "gpu_libs.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

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

/* Counts the devices: AP_OK, or AP_ERR_SYSTEM when there is none. */
static ap_status
count_devices(const ap_cuda_fns *fns, int rc, int count, int *devices,
              char *why, size_t size)
{
    if (rc != 0) {
        driver_error(fns, rc, "no CUDA device: cuDeviceGetCount failed",
                     why, size);
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
        driver_error(fns, rc, "no CUDA device: cuInit failed", why, size);
        return AP_ERR_SYSTEM;
    }
    int count = 0;
    rc = fns->DeviceGetCount(&count);
    return count_devices(fns, rc, count, devices, why, size);
}

#ifdef AP_HAVE_CUPTI
static ap_cupti_fns cupti;
static int cupti_open;
static char cupti_where[512];

/* Appends "path (reason); " to why, as room allows. */
static void
note(char *why, size_t size, const char *path, const char *reason)
{
    size_t used = strlen(why);
    if (used < size) {
        snprintf(why + used, size - used, "%s%s (%s)", used ? "; " : "",
                 path, reason);
    }
}

static ap_status
adopt(void *lib, const char *path, char *why, size_t size)
{
    const ap_dl_symbol symbols[] = {
        {(void **)&cupti.GetVersion, "cuptiGetVersion"},
        {(void **)&cupti.GetResultString, "cuptiGetResultString"},
        {(void **)&cupti.ActivityRegisterCallbacks,
         "cuptiActivityRegisterCallbacks"},
        {(void **)&cupti.ActivityRegisterTimestampCallback,
         "cuptiActivityRegisterTimestampCallback"},
        {(void **)&cupti.ActivityEnable, "cuptiActivityEnable"},
        {(void **)&cupti.ActivityDisable, "cuptiActivityDisable"},
        {(void **)&cupti.ActivityFlushAll, "cuptiActivityFlushAll"},
        {(void **)&cupti.ActivityGetNextRecord,
         "cuptiActivityGetNextRecord"},
        {(void **)&cupti.ActivityGetNumDroppedRecords,
         "cuptiActivityGetNumDroppedRecords"},
        {(void **)&cupti.ActivityPushExternalCorrelationId,
         "cuptiActivityPushExternalCorrelationId"},
        {(void **)&cupti.ActivityPopExternalCorrelationId,
         "cuptiActivityPopExternalCorrelationId"},
    };
    char what[600];
    snprintf(what, sizeof(what), "CUPTI at %s", path);
    if (ap_dl_bind(lib, symbols, sizeof(symbols) / sizeof(symbols[0]), what,
                   why, size) != AP_OK) {
        return AP_ERR_SYSTEM;
    }
    /* records are read with this build's struct layouts, which hold
     * within one CUDA major version */
    uint32_t version = 0;
    if (cupti.GetVersion(&version) != CUPTI_SUCCESS ||
        version / 10000 != CUPTI_API_VERSION / 10000) {
        snprintf(why, size, "CUPTI at %s has API version %u; aquaprof was "
                 "built with CUPTI %d headers and reads only that major "
                 "version's records (rebuild aquaprof against this CUDA)",
                 path, version, CUPTI_API_VERSION);
        return AP_ERR_INVALID;
    }
    snprintf(cupti_where, sizeof(cupti_where), "%s", path);
    cupti_open = 1;
    return AP_OK;
}

/* The path of a CUPTI already mapped into the process, any version. */
static int
find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(base, "libcupti.so", 11) != 0) {
        return 0;
    }
    snprintf(data, 512, "%s", info->dlpi_name);
    return 1;
}

/* Adopts lib if its major version is this build's; closes it otherwise.
 * AP_OK, AP_ERR_INVALID (wrong version, why says so), AP_ERR_SYSTEM. */
static ap_status
try_library(void *lib, const char *path, char *why, size_t size)
{
    ap_status st = adopt(lib, path, why, size);
    if (st != AP_OK) {
        dlclose(lib);
    }
    return st;
}

ap_status
ap_cupti_open(const char *const *candidates, size_t n,
              const ap_cupti_fns **fns, char *where, size_t where_size,
              char *why, size_t size)
{
    why[0] = '\0';
    char loaded[512] = "";
    if (!cupti_open && dl_iterate_phdr(find_loaded, loaded)) {
        /* one CUPTI per process: two copies would fight over the device */
        void *lib = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD);
        ap_status st = lib ? try_library(lib, loaded, why, size)
                           : AP_ERR_SYSTEM;
        if (st != AP_OK) {
            char reason[1024];
            snprintf(reason, sizeof(reason), "%s", lib ? why : dlerror());
            snprintf(why, size, "not traced: the process already holds a "
                     "CUPTI that aquaprof cannot use, and a second copy "
                     "would fight it over the device: %s", reason);
            return AP_ERR_INVALID;
        }
    }
    char wrong[1024] = "";
    for (size_t i = 0; i < n && !cupti_open; i++) {
        void *lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            /* dlerror repeats the path: keep only what follows it */
            const char *colon = e ? strrchr(e, ':') : NULL;
            note(why, size, candidates[i],
                 colon ? colon + 2 : "cannot open");
            continue;
        }
        char reason[1024];
        if (try_library(lib, candidates[i], reason, sizeof(reason)) ==
            AP_ERR_INVALID) {
            if (!wrong[0]) {
                snprintf(wrong, sizeof(wrong), "%s", reason);
            }
            note(why, size, candidates[i], "another CUDA major version");
        } else if (!cupti_open) {
            note(why, size, candidates[i], reason);
        }
    }
    if (!cupti_open) {
        char tried[2048];
        snprintf(tried, sizeof(tried), "%s", why);
        if (wrong[0]) {
            snprintf(why, size, "%s; tried: %s", wrong, tried);
            return AP_ERR_INVALID;
        }
        snprintf(why, size, "CUPTI not found; tried: %s. Set AQUAPROF_CUPTI "
                 "to the path of libcupti.so", n ? tried : "no path");
        return AP_ERR_SYSTEM;
    }
    snprintf(where, where_size, "%s", cupti_where);
    *fns = &cupti;
    return AP_OK;
}

void
ap_cupti_error(CUptiResult rc, char *out, size_t size)
{
    const char *text = NULL;
    if (!cupti_open || cupti.GetResultString(rc, &text) != CUPTI_SUCCESS ||
        !text) {
        text = "unknown CUPTI error";
    }
    snprintf(out, size, "%s (%d)", text, (int)rc);
}
#endif
