/* The trace being collected, which the backend's buffer callbacks fill
 * with events already turned from its records, on whatever thread it
 * hands them over. Knows nothing of CUPTI. Internal to csrc/gpu. */
#ifndef AP_GPU_RECORDS_H
#define AP_GPU_RECORDS_H

#include "gpu_trace.h"

/* Most events the next trace keeps (set before ap_gpu_start); those past
 * it are counted in the trace's over_max. */
#define AP_GPU_DEFAULT_MAX_EVENTS 1000000
void ap_gpu_records_set_max_events(int64_t max_events);

/* Starts collecting into a fresh, empty trace. AP_ERR_NOMEM. */
ap_status ap_gpu_records_begin(void);

/* Ends collecting and hands the trace over (NULL if begin was not
 * called). Records that could not be kept for want of memory are counted
 * in its `dropped`; records delivered after this call, in the next
 * trace's `late`. */
ap_gpu_trace *ap_gpu_records_take(void);

/* A buffer's records are added under this lock, all of them at once. */
void ap_gpu_records_lock(void);
void ap_gpu_records_unlock(void);

/* The functions below need the lock held. */

/* The trace being collected, NULL when none: records delivered then
 * belong to a trace already taken, and count as the next one's late. */
ap_gpu_trace *ap_gpu_records_trace_unlocked(void);
void ap_gpu_records_late_unlocked(int64_t n);

/* A 32-bit correlation id placed in its epoch (see gpu_records.c). */
uint64_t ap_gpu_records_correlation_unlocked(uint32_t id);

/* The index of a kernel name in the trace, copied the first time (the
 * backend owns its strings): -1 for want of memory. */
int64_t ap_gpu_records_name_unlocked(const char *name);

/* Keeps event e in the trace, or counts why not (incomplete, over_max):
 * 0, or -1 for want of memory. */
int ap_gpu_records_event_unlocked(const ap_gpu_event *e);

/* Keeps a stage's tag tied to an API call: 0, or -1 for want of memory. */
int ap_gpu_records_link_unlocked(uint64_t tag, uint64_t correlation);

#endif
