/* One GPU activity as reports keep it: 96 bytes, the layout of the NumPy
 * dtype aquaprof._core.GPU_DTYPE. */
#ifndef AP_GPU_EVENT_H
#define AP_GPU_EVENT_H

#include <stdint.h>

enum {
    AP_GPU_KERNEL = 1,
    AP_GPU_MEMCPY = 2,
    AP_GPU_MEMSET = 3,
    AP_GPU_ALLOC = 4,  /* device memory allocated (bytes), at start_ns */
    AP_GPU_FREE = 5,   /* released */
    AP_GPU_SYNC = 6    /* host blocked on the device (start..end host time) */
};

enum { AP_COPY_OTHER, AP_COPY_H2D, AP_COPY_D2H, AP_COPY_D2D };

typedef struct {
    int64_t start_ns;      /* CLOCK_MONOTONIC, the spans' clock */
    int64_t end_ns;
    int64_t bytes;         /* memcpy, memset, alloc, free */
    int64_t span;          /* report span that launched it, -1 for none */
    /* CUPTI's 32-bit id of the launching API call in the low half, how
     * often those ids wrapped before it in the high half: unique in a
     * run however long (see gpu_records.c) */
    uint64_t correlation;
    int32_t stage;         /* report stage that launched it, -1 for none */
    uint32_t name;         /* kernel: index into the kernel names */
    uint32_t device;
    uint32_t stream;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared;       /* kernel: shared memory per block, bytes */
    uint16_t registers;    /* kernel: registers per thread */
    uint8_t kind;
    uint8_t copy;          /* memcpy: AP_COPY_* */
    uint8_t pinned;        /* memcpy: 1 when its host side is pinned */
    uint8_t pad[7];
} ap_gpu_event;

_Static_assert(sizeof(ap_gpu_event) == 96, "GPU event must stay 96 bytes");

#endif
