/* The CUDA driver, opened at run time with dlopen by both extensions:
 * aquaprof._core (GPU tracing) and aquaprof._mvs (the CUDA plane sweep)
 * each bind the driver functions they call. Neither links against CUDA,
 * so both import and run where there is no driver and say what was
 * missing. */
#ifndef AP_CUDA_LOADER_H
#define AP_CUDA_LOADER_H

#include <stddef.h>

#include "../core/status.h"

#define AP_LIBCUDA_DEFAULT "libcuda.so.1"

/* One function to take from a library: where it goes, what it is called. */
typedef struct {
    void **slot;
    const char *name;
} ap_dl_symbol;

/* The driver to open: $AQUAPROF_LIBCUDA where it is set, else
 * libcuda.so.1: for the plane-sweep kit and, unless told otherwise, for
 * the profiler. */
const char *ap_cuda_driver_path(void);

/* Fills every slot from lib. AP_OK, or AP_ERR_SYSTEM with why "<what>
 * lacks <name>: too old"; lib stays open either way. */
ap_status ap_dl_bind(void *lib, const ap_dl_symbol *symbols, size_t n,
                     const char *what, char *why, size_t size);

/* Opens the driver at path and binds the n symbols from it. AP_OK with
 * *lib its handle, the caller's to keep or dlclose; AP_ERR_SYSTEM with
 * why "no CUDA driver: cannot open <path> (<reason>)" or "the CUDA driver
 * lacks <name>: too old", and nothing left open. */
ap_status ap_cuda_load(const char *path, const ap_dl_symbol *symbols,
                       size_t n, void **lib, char *why, size_t size);

#endif
