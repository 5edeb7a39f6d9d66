#include "gpu_records.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t max_events = AP_GPU_DEFAULT_MAX_EVENTS;
static ap_gpu_trace *trace;          /* NULL when not collecting */
static size_t events_cap, links_cap;
/* The highest extended correlation seen in this trace, 0 for none yet */
static uint64_t front;
/* Records of a trace already taken: its report may be built already and
 * a report is never changed after, so they cannot join it. They go
 * uncounted nowhere: the next trace says how many came late. (The forced
 * flushes at stop make them rare: a buffer CUPTI's own thread still held.)
 */
static int64_t late;

void
ap_gpu_records_set_max_events(int64_t n)
{
    pthread_mutex_lock(&lock);
    max_events = n;
    pthread_mutex_unlock(&lock);
}

ap_status
ap_gpu_records_begin(void)
{
    ap_gpu_trace *fresh = calloc(1, sizeof(*fresh));
    if (!fresh) {
        return AP_ERR_NOMEM;
    }
    pthread_mutex_lock(&lock);
    ap_gpu_trace *old = trace;
    trace = fresh;
    trace->max_events = max_events;
    trace->late = late;
    late = 0;
    events_cap = links_cap = 0;
    front = 0;
    pthread_mutex_unlock(&lock);
    ap_gpu_trace_free(old);
    return AP_OK;
}

ap_gpu_trace *
ap_gpu_records_take(void)
{
    pthread_mutex_lock(&lock);
    ap_gpu_trace *t = trace;
    trace = NULL;
    pthread_mutex_unlock(&lock);
    return t;
}

void
ap_gpu_records_lock(void)
{
    pthread_mutex_lock(&lock);
}

void
ap_gpu_records_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

ap_gpu_trace *
ap_gpu_records_trace_unlocked(void)
{
    return trace;
}

void
ap_gpu_records_late_unlocked(int64_t n)
{
    late += n;
}

/* CUPTI's 32-bit correlation ids wrap after 2^32 API calls (hours at a
 * high launch rate), and records arrive out of order (per-stream buffers,
 * kernels ending out of launch order): an id is placed in the epoch that
 * puts it nearest the highest id seen, as serial-number arithmetic does.
 * Events and links extended alike join within their own epoch only. */
uint64_t
ap_gpu_records_correlation_unlocked(uint32_t id)
{
    if (front == 0) {
        front = id;
        return id;
    }
    int32_t step = (int32_t)(id - (uint32_t)front);
    /* a straggler from before the wrap, seen before the first record */
    if (step < 0 && front < (uint64_t)-(int64_t)step) {
        return id;
    }
    uint64_t extended = front + (uint64_t)(int64_t)step;
    if (extended > front) {
        front = extended;
    }
    return extended;
}

/* Grows *array (of *cap items of `item` bytes) to hold one more. */
static int
reserve(void **array, size_t *cap, size_t used, size_t item)
{
    if (used < *cap) {
        return 0;
    }
    size_t fresh_cap = *cap ? *cap * 2 : 1024;
    void *fresh = realloc(*array, fresh_cap * item);
    if (!fresh) {
        return -1;
    }
    *array = fresh;
    *cap = fresh_cap;
    return 0;
}

int64_t
ap_gpu_records_name_unlocked(const char *name)
{
    if (!name) {
        name = "?";
    }
    uint32_t id;
    if (ap_intern_table_add(&trace->names, name, strlen(name), &id) !=
        AP_OK) {
        return -1;
    }
    return id;
}

int
ap_gpu_records_event_unlocked(const ap_gpu_event *e)
{
    /* CUPTI writes 0 where it could take no timestamp (work still in
     * flight at a flush): such times would stretch a stage to the epoch */
    if (e->start_ns <= 0 || e->end_ns < e->start_ns) {
        trace->incomplete++;
        return 0;
    }
    if ((int64_t)trace->nevents >= trace->max_events) {
        trace->over_max++;
        return 0;
    }
    if (reserve((void **)&trace->events, &events_cap, trace->nevents,
                sizeof(ap_gpu_event)) != 0) {
        return -1;
    }
    trace->events[trace->nevents++] = *e;
    return 0;
}

int
ap_gpu_records_link_unlocked(uint64_t tag, uint64_t correlation)
{
    if (reserve((void **)&trace->links, &links_cap, trace->nlinks,
                sizeof(ap_gpu_link)) != 0) {
        return -1;
    }
    trace->links[trace->nlinks++] = (ap_gpu_link){tag, correlation};
    return 0;
}
