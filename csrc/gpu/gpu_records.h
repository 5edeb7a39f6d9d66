/* Turning CUPTI's activity buffers into ap_gpu_events, on whatever thread
 * CUPTI hands them over. Internal to csrc/gpu. */
#ifndef AP_GPU_RECORDS_H
#define AP_GPU_RECORDS_H

#include "gpu_libs.h"
#include "gpu_trace.h"

#ifdef AP_HAVE_CUPTI
/* Starts collecting into a fresh, empty trace. AP_ERR_NOMEM. */
ap_status ap_gpu_records_begin(const ap_cupti_fns *fns);

/* CUPTI's buffer callbacks: give buffers out and take them back. */
void CUPTIAPI ap_gpu_buffer_requested(uint8_t **buffer, size_t *size,
                                      size_t *max_records);
void CUPTIAPI ap_gpu_buffer_completed(CUcontext ctx, uint32_t stream,
                                      uint8_t *buffer, size_t size,
                                      size_t valid);

/* Ends collecting and hands the trace over (NULL if begin was not
 * called). Records that could not be kept for want of memory are counted
 * in its `dropped`. */
ap_gpu_trace *ap_gpu_records_take(void);
#endif

#endif
