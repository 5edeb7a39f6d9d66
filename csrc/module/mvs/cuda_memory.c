/* What the driver says of a device pointer, asked before any launch: a
 * kernel that reads or writes memory the driver does not know, or past
 * an allocation's end, faults, and a fault leaves the context unusable
 * for every later CUDA call of the process (the caller's torch too). */
#include <stdio.h>

#include "cuda_driver.h"

int
ap_cuda_check_buffer(const ap_cuda_api *api, unsigned long long ptr,
                     unsigned long long bytes, const char *name,
                     char *error, size_t size)
{
    unsigned type = 0;
    unsigned long long start = 0;
    size_t extent = 0;
    char why[256];
    CUresult rc = api->PointerGetAttribute(
        &type, AP_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
    if (rc == AP_CUDA_SUCCESS) {
        rc = api->PointerGetAttribute(
            &start, AP_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr);
    }
    if (rc == AP_CUDA_SUCCESS) {
        rc = api->PointerGetAttribute(&extent,
                                      AP_CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr);
    }
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
    /* the bytes from ptr to the end of the range the driver gave */
    unsigned long long left = ptr >= start && ptr - start <= extent
                                  ? extent - (ptr - start)
                                  : 0;
    if (left < bytes) {
        snprintf(error, size, "%s (0x%llx) needs %llu bytes, its "
                 "allocation holds %llu from there", name, ptr, bytes,
                 left);
        return -1;
    }
    return 0;
}
