/* What the driver says of a device pointer, asked before any launch (the
 * C side of the kit's CUDA path): a kernel that reads or writes memory
 * the driver does not know faults, and a fault leaves the context
 * unusable for every later CUDA call of the process (the caller's torch
 * too). */
#include <stdio.h>

#include "cuda_driver.h"

int
ap_cuda_check_buffer(const ap_cuda_api *api, unsigned long long ptr,
                     const char *name, char *error, size_t size)
{
    /* The allocation's extent is not asked: the driver's ranges are
     * physical chunks where memory is mapped through its virtual memory
     * API (torch's expandable segments, compute-sanitizer's pools), and a
     * buffer may span several, so a short range proves nothing. */
    unsigned type = 0;
    char why[256];
    CUresult rc = api->PointerGetAttribute(
        &type, AP_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
    if (rc != AP_CUDA_SUCCESS) {
        ap_cuda_error(api, "cuPointerGetAttribute", rc, why, sizeof(why));
        snprintf(error, size, "%s (0x%llx) is not memory the CUDA driver "
                 "knows (%s)", name, ptr, why);
        return -1;
    }
    if (type != AP_CU_MEMORYTYPE_DEVICE && type != AP_CU_MEMORYTYPE_UNIFIED) {
        snprintf(error, size, "%s (0x%llx) is not device memory (the "
                 "driver's memory type %u)", name, ptr, type);
        return -1;
    }
    return 0;
}
