#include "gpu_libs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Successes are kept for the process's life, as every CUDA library keeps
 * its driver; failures are retried at the next start (cheap, and the user
 * may have fixed the path meanwhile). */
static ap_cuda_fns cuda;
static int cuda_open, cuda_devices;

ap_status
ap_cuda_open(const char *path, const ap_cuda_fns **fns, int *devices,
             char *why, size_t size)
{
    if (cuda_open) {
        *fns = &cuda;
        *devices = cuda_devices;
        return AP_OK;
    }
    const ap_dl_symbol symbols[] = {
        {(void **)&cuda.Init, "cuInit"},
        {(void **)&cuda.DriverGetVersion, "cuDriverGetVersion"},
        {(void **)&cuda.DeviceGetCount, "cuDeviceGetCount"},
        {(void **)&cuda.DeviceGet, "cuDeviceGet"},
        {(void **)&cuda.DeviceGetName, "cuDeviceGetName"},
        {(void **)&cuda.DeviceGetAttribute, "cuDeviceGetAttribute"},
        {(void **)&cuda.CtxSynchronize, "cuCtxSynchronize"},
        {(void **)&cuda.GetErrorName, "cuGetErrorName"},
    };
    void *lib;
    if (ap_cuda_load(path, symbols, sizeof(symbols) / sizeof(symbols[0]),
                     &lib, why, size) != AP_OK) {
        return AP_ERR_SYSTEM;
    }
    int rc = cuda.Init(0);
    int count = 0;
    if (rc == 0) {
        rc = cuda.DeviceGetCount(&count);
    }
    if (rc != 0 || count == 0) {
        const char *name = NULL;
        if (rc == 0) {
            snprintf(why, size, "no CUDA device: the driver sees none");
        } else if (cuda.GetErrorName(rc, &name) != 0 || !name) {
            snprintf(why, size, "no CUDA device: cuInit failed (error %d)",
                     rc);
        } else {
            snprintf(why, size, "no CUDA device: cuInit failed (%s)", name);
        }
        dlclose(lib);
        return AP_ERR_SYSTEM;
    }
    cuda_open = 1;
    cuda_devices = count;
    *fns = &cuda;
    *devices = count;
    return AP_OK;
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

ap_status
ap_cupti_open(const char *const *candidates, size_t n,
              const ap_cupti_fns **fns, char *where, size_t where_size,
              char *why, size_t size)
{
    why[0] = '\0';
    if (!cupti_open) {
        /* one CUPTI per process: two copies would fight over the device */
        static const char *const loaded[] = {"libcupti.so.13",
                                             "libcupti.so"};
        for (size_t i = 0; i < 2 && !cupti_open; i++) {
            void *lib = dlopen(loaded[i], RTLD_NOW | RTLD_NOLOAD);
            if (lib) {
                ap_status st = adopt(lib, loaded[i], why, size);
                if (st != AP_OK) {
                    dlclose(lib);
                    return st;
                }
            }
        }
    }
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
        why[0] = '\0';
        ap_status st = adopt(lib, candidates[i], why, size);
        if (st != AP_OK) {
            dlclose(lib);
            return st;
        }
    }
    if (!cupti_open) {
        char tried[2048];
        snprintf(tried, sizeof(tried), "%s", why);
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
