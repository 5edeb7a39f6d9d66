#include "gpu_records.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t max_events = AP_GPU_DEFAULT_MAX_EVENTS;

void
ap_gpu_records_set_max_events(int64_t n)
{
    pthread_mutex_lock(&lock);
    max_events = n;
    pthread_mutex_unlock(&lock);
}

#ifdef AP_HAVE_CUPTI
#include "gpu_buffers.h"

static const ap_cupti_fns *cupti;
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

ap_status
ap_gpu_records_begin(const ap_cupti_fns *fns)
{
    ap_gpu_trace *fresh = calloc(1, sizeof(*fresh));
    if (!fresh) {
        return AP_ERR_NOMEM;
    }
    pthread_mutex_lock(&lock);
    ap_gpu_trace *old = trace;
    cupti = fns;
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

/* CUPTI's 32-bit correlation ids wrap after 2^32 API calls (hours at a
 * high launch rate), and records arrive out of order (per-stream buffers,
 * kernels ending out of launch order): an id is placed in the epoch that
 * puts it nearest the highest id seen, as serial-number arithmetic does.
 * Events and links extended alike join within their own epoch only. */
static uint64_t
extend_correlation(uint32_t id)
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

/* The index of a kernel name, copied the first time: CUPTI owns its
 * strings. -1 for want of memory. */
static int64_t
name_index(const char *name)
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

static uint8_t
copy_kind(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return AP_COPY_H2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return AP_COPY_D2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return AP_COPY_D2D;
    default: return AP_COPY_OTHER;
    }
}

/* Fields that CUPTI's record types name alike wherever they have them. */
#define TIMES(e, r) \
    ((e).start_ns = (int64_t)(r)->start, (e).end_ns = (int64_t)(r)->end)
#define ORIGIN(e, r)                                  \
    ((e).correlation = extend_correlation((r)->correlationId), \
     (e).device = (r)->deviceId, (e).stream = (r)->streamId)

/* One handler per CUPTI record kind: each fills e from its record and
 * returns 1 to keep e, 0 to keep nothing, -1 for want of memory. */
typedef int (*record_handler)(const CUpti_Activity *record, ap_gpu_event *e);

static int
on_kernel(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivityKernel10 *k = (const void *)record;
    int64_t name = name_index(k->name);
    if (name < 0) {
        return -1;
    }
    e->kind = AP_GPU_KERNEL;
    TIMES(*e, k);
    ORIGIN(*e, k);
    e->name = (uint32_t)name;
    e->grid[0] = (uint32_t)k->gridX;
    e->grid[1] = (uint32_t)k->gridY;
    e->grid[2] = (uint32_t)k->gridZ;
    e->block[0] = (uint32_t)k->blockX;
    e->block[1] = (uint32_t)k->blockY;
    e->block[2] = (uint32_t)k->blockZ;
    e->shared = (uint32_t)(k->staticSharedMemory + k->dynamicSharedMemory);
    e->registers = k->registersPerThread;
    return 1;
}

static int
on_memcpy(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivityMemcpy6 *m = (const void *)record;
    e->kind = AP_GPU_MEMCPY;
    TIMES(*e, m);
    ORIGIN(*e, m);
    e->bytes = (int64_t)m->bytes;
    e->copy = copy_kind(m->copyKind);
    e->pinned = m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED ||
                m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    return 1;
}

static int
on_memset(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivityMemset4 *m = (const void *)record;
    e->kind = AP_GPU_MEMSET;
    TIMES(*e, m);
    ORIGIN(*e, m);
    e->bytes = (int64_t)m->bytes;
    return 1;
}

/* Device memory allocated or released; host-side memory is the host
 * sampler's. */
static int
on_memory(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivityMemory4 *m = (const void *)record;
    if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
        return 0;
    }
    if (m->memoryOperationType ==
        CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
        e->kind = AP_GPU_ALLOC;
    } else if (m->memoryOperationType ==
               CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        e->kind = AP_GPU_FREE;
    } else {
        return 0;
    }
    e->start_ns = e->end_ns = (int64_t)m->timestamp;
    ORIGIN(*e, m);
    e->bytes = (int64_t)m->bytes;
    return 1;
}

/* Only the calls that block the host: cudaStreamWaitEvent makes a stream
 * wait on the device and returns at once. */
static int
on_sync(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivitySynchronization2 *s = (const void *)record;
    switch (s->type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
        break;
    default:
        return 0;
    }
    e->kind = AP_GPU_SYNC;
    TIMES(*e, s);
    /* it names no device */
    e->correlation = extend_correlation(s->correlationId);
    e->stream = s->streamId;
    return 1;
}

/* A stage's tag tied to an API call: kept as a link, not as an event. */
static int
on_external_correlation(const CUpti_Activity *record, ap_gpu_event *e)
{
    (void)e;
    const CUpti_ActivityExternalCorrelation *x = (const void *)record;
    if (x->externalKind != AP_CORRELATION_KIND) {
        return 0;
    }
    if (reserve((void **)&trace->links, &links_cap, trace->nlinks,
                sizeof(ap_gpu_link)) != 0) {
        return -1;
    }
    trace->links[trace->nlinks++] = (ap_gpu_link){
        x->externalId, extend_correlation(x->correlationId)};
    return 0;
}

static record_handler
handler_for(CUpti_ActivityKind kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
        return on_kernel;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return on_memcpy;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return on_memset;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return on_memory;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return on_sync;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        return on_external_correlation;
    default:       /* API records: only needed to make the links above */
        return NULL;
    }
}

/* A record that may become an event (not a link, not an API call). */
static int
is_activity(CUpti_ActivityKind kind)
{
    record_handler handle = handler_for(kind);
    return handle && handle != on_external_correlation;
}

/* One record into the trace; -1 for want of memory. */
static int
add(const CUpti_Activity *record)
{
    record_handler handle = handler_for(record->kind);
    if (!handle) {
        return 0;
    }
    ap_gpu_event e;
    memset(&e, 0, sizeof(e));
    e.span = -1;
    e.stage = -1;
    int keep = handle(record, &e);
    if (keep <= 0) {
        return keep;
    }
    /* CUPTI writes 0 where it could take no timestamp (work still in
     * flight at a flush): such times would stretch a stage to the epoch */
    if (e.start_ns <= 0 || e.end_ns < e.start_ns) {
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
    trace->events[trace->nevents++] = e;
    return 0;
}

void CUPTIAPI
ap_gpu_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = ap_gpu_buffer_new();
    *size = *buffer ? AP_GPU_BUFFER_SIZE : 0;
    *max_records = 0;
}

void CUPTIAPI
ap_gpu_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                        size_t size, size_t valid)
{
    (void)size;
    pthread_mutex_lock(&lock);
    if (cupti && valid) {
        CUpti_Activity *record = NULL;
        while (cupti->ActivityGetNextRecord(buffer, valid, &record) ==
               CUPTI_SUCCESS) {
            if (!trace) {
                late += is_activity(record->kind);
            } else if (add(record) != 0) {
                trace->dropped++;
            }
        }
    }
    size_t dropped = 0;
    if (cupti && cupti->ActivityGetNumDroppedRecords(ctx, stream,
                                                     &dropped) ==
                     CUPTI_SUCCESS) {
        if (trace) {
            trace->dropped += (int64_t)dropped;
        } else {
            late += (int64_t)dropped;
        }
    }
    pthread_mutex_unlock(&lock);
    ap_gpu_buffer_release(buffer);
}
#endif
