/* GPU activity traced with CUPTI and tied to the stages that launched it,
 * without synchronizing the device: each stage edge pushes or pops its
 * span's tag as CUPTI's external correlation id, CUPTI hands back records
 * that carry the launching API call's correlation id, and after the run
 * the two are joined (ap_gpu_trace_resolve). One trace per process at a
 * time, as there is one session. */
#ifndef AP_GPU_TRACE_H
#define AP_GPU_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/intern.h"
#include "../core/session.h"
#include "gpu_event.h"

enum { AP_CUDA_OFF, AP_CUDA_AUTO, AP_CUDA_REQUIRED };

typedef struct {
    int mode;                        /* AP_CUDA_* */
    int sync;                        /* synchronize at every stage edge */
    const char *libcuda;             /* e.g. "libcuda.so.1" */
    const char *const *cupti_paths;  /* tried in order */
    size_t ncupti;
} ap_gpu_config;

typedef struct {
    char name[128];
    int sms, threads_per_sm, blocks_per_sm, registers_per_sm;
    int shared_per_sm, warp_size;
} ap_gpu_device;

typedef struct {
    uint64_t tag;                    /* the span's: AP_TAG_THREAD_BITS */
    uint64_t correlation;            /* an API call in it, as events' */
} ap_gpu_link;

typedef struct {
    ap_gpu_event *events;
    size_t nevents;
    ap_intern_table names;           /* kernel names, by event.name */
    int64_t dropped;                 /* records CUPTI could not keep */
    int64_t incomplete;              /* records without both timestamps */
    int64_t over_max;                /* events past max_events */
    int64_t late;                    /* an earlier run's, after its take */
    int64_t max_events;              /* the cap the run was given */
    int64_t unattributed;            /* events no stage launched */
    ap_gpu_device *devices;          /* by CUPTI device id */
    uint32_t ndevices;
    ap_gpu_link *links;              /* sorted by ap_gpu_trace_resolve */
    size_t nlinks;
    uint64_t run_mark;               /* the tags' run bit of this run */
} ap_gpu_trace;

/* Starts what config asks for and fills status with one line: what is
 * traced, or exactly what was missing. neighbor names another CUPTI
 * client tracing now (NULL for none): CUPTI is then left to it. *hooks
 * gets the stage hooks for
 * the session (NULL when none are needed). AP_OK when tracing or when
 * mode is AUTO and something is missing; AP_ERR_SYSTEM when mode is
 * REQUIRED (or sync is asked) and the driver or CUPTI is missing;
 * AP_ERR_ACTIVE when a trace already runs. */
ap_status ap_gpu_start(const ap_gpu_config *config, const char *neighbor,
                       const ap_stage_hooks **hooks, char *status,
                       size_t size);

/* Stops tracing: waits for every device the program used (so that work
 * launched during the run is measured, whatever thread launched it), a
 * forced flush, then hands the records over in *out (NULL when nothing
 * was traced), and fills note with what the report must add to the
 * start's status line (empty when nothing): a device that could not be
 * synchronized, another CUPTI client that took over mid-run (neighbor
 * names one tracing now, NULL for none), a program that never used CUDA.
 * Needs no GIL. AP_ERR_NOMEM. */
ap_status ap_gpu_stop(ap_gpu_trace **out, const char *neighbor, char *note,
                      size_t size);

/* Hands every activity buffer filled so far to aquaprof, while the
 * buffer callbacks are still its own: called just before another CUPTI
 * client (torch.profiler) registers its callbacks, so that the records
 * of the run until then reach aquaprof and the other client's reach it.
 * Nothing when no trace runs. Needs no GIL. */
void ap_gpu_flush(void);

/* Fills each event's stage and span from the report of the same run. */
void ap_gpu_trace_resolve(ap_gpu_trace *t, const ap_report *r);

void ap_gpu_trace_free(ap_gpu_trace *t);

/* 1 when this build can trace GPU activity (it has CUPTI's headers). */
int ap_gpu_can_trace(void);

#endif
