#include "cuda_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

const char *
ap_cuda_driver_path(void)
{
    const char *path = getenv("AQUAPROF_LIBCUDA");
    return path ? path : AP_LIBCUDA_DEFAULT;
}

ap_status
ap_dl_bind(void *lib, const ap_dl_symbol *symbols, size_t n,
           const char *what, char *why, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        *symbols[i].slot = dlsym(lib, symbols[i].name);
        if (!*symbols[i].slot) {
            snprintf(why, size, "%s lacks %s: too old", what,
                     symbols[i].name);
            return AP_ERR_SYSTEM;
        }
    }
    return AP_OK;
}

ap_status
ap_cuda_load(const char *path, const ap_dl_symbol *symbols, size_t n,
             void **lib, char *why, size_t size)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(why, size, "no CUDA driver: cannot open %s (%s)", path,
                 dlerror());
        return AP_ERR_SYSTEM;
    }
    if (ap_dl_bind(handle, symbols, n, "the CUDA driver", why, size) !=
        AP_OK) {
        dlclose(handle);
        return AP_ERR_SYSTEM;
    }
    *lib = handle;
    return AP_OK;
}
