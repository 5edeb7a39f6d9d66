/* Turning CUPTI's activity buffers into ap_gpu_events, on whatever thread
 * CUPTI hands them over. Internal to csrc/gpu. */
#ifndef AP_GPU_RECORDS_H
#define AP_GPU_RECORDS_H

#include "gpu_libs.h"
#include "gpu_trace.h"

/* Most events the next trace keeps (set before ap_gpu_start); those past
 * it are counted in the trace's over_max. */
#define AP_GPU_DEFAULT_MAX_EVENTS 1000000
void ap_gpu_records_set_max_events(int64_t max_events);

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
 * in its `dropped`; records CUPTI delivers after this call, in the next
 * trace's `late`. */
ap_gpu_trace *ap_gpu_records_take(void);
#endif

#endif
