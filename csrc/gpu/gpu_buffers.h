/* The activity buffers aquaprof hands CUPTI. CUPTI keeps one pair of
 * buffer callbacks per process, so when another client (torch.profiler,
 * Nsight) registers its own during a run, buffers of each can come back
 * to the other's callback: aquaprof frees only the buffers it made, and
 * counts those that never came back. Internal to csrc/gpu. */
#ifndef AP_GPU_BUFFERS_H
#define AP_GPU_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#define AP_GPU_BUFFER_SIZE (4u << 20)

/* A fresh buffer of AP_GPU_BUFFER_SIZE bytes, remembered as ours, or NULL
 * for want of memory. */
uint8_t *ap_gpu_buffer_new(void);

/* Frees buffer and returns 1 if it is one of ours; returns 0 and leaves
 * it alone if another client made it. */
int ap_gpu_buffer_release(uint8_t *buffer);

/* How many of our buffers CUPTI holds now. */
size_t ap_gpu_buffers_out(void);

#endif
