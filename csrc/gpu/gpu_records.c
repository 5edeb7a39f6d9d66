#include "gpu_records.h"

#ifdef AP_HAVE_CUPTI
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_buffers.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const ap_cupti_fns *cupti;
static ap_gpu_trace *trace;          /* NULL when not collecting */
static size_t events_cap, links_cap;

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
    events_cap = links_cap = 0;
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
#define ORIGIN(e, r)                                                   \
    ((e).correlation = (r)->correlationId, (e).device = (r)->deviceId, \
     (e).stream = (r)->streamId)

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

static int
on_sync(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivitySynchronization2 *s = (const void *)record;
    e->kind = AP_GPU_SYNC;
    TIMES(*e, s);
    e->correlation = s->correlationId;   /* it names no device */
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
    trace->links[trace->nlinks++] = (ap_gpu_link){x->externalId,
                                                  x->correlationId};
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
    if (trace && valid) {
        CUpti_Activity *record = NULL;
        while (cupti->ActivityGetNextRecord(buffer, valid, &record) ==
               CUPTI_SUCCESS) {
            if (add(record) != 0) {
                trace->dropped++;
            }
        }
        size_t dropped = 0;
        if (cupti->ActivityGetNumDroppedRecords(ctx, stream, &dropped) ==
            CUPTI_SUCCESS) {
            trace->dropped += (int64_t)dropped;
        }
    }
    pthread_mutex_unlock(&lock);
    ap_gpu_buffer_release(buffer);
}
#endif
