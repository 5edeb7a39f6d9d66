/* Records a fake GPU hands over through the fake CUPTI (fake_cupti.c):
 * each fake_* function is one API call and the activity it caused. */
#include "fake_cupti.h"

#include <stdlib.h>
#include <string.h>

/* A kernel that ran for `ns` on `stream`, starting `delay` ns after its
 * launch (GPU work runs after the host has moved on). */
void fake_kernel(const char *name, uint64_t delay, uint64_t ns,
                 uint32_t stream, int grid, int block, uint16_t registers,
                 int shared)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = fake_api_call();
    k.start = fake_now() + delay;
    k.end = k.start + ns;
    k.streamId = stream;
    k.gridX = grid;
    k.gridY = k.gridZ = k.blockY = k.blockZ = 1;
    k.blockX = block;
    k.registersPerThread = registers;
    k.staticSharedMemory = shared;
    k.name = strdup(name);     /* CUPTI's strings outlive the record */
    fake_emit(k.kind, &k, sizeof(k));
}

void fake_memcpy(int copy_kind, uint64_t bytes, uint64_t ns, int pinned,
                 uint32_t stream)
{
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.correlationId = fake_api_call();
    m.copyKind = (uint8_t)copy_kind;
    m.srcKind = m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    if (copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) {
        m.srcKind = pinned ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
                           : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    } else if (copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) {
        m.dstKind = pinned ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
                           : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    }
    m.bytes = bytes;
    m.start = fake_now();
    m.end = m.start + ns;
    m.streamId = stream;
    fake_emit(m.kind, &m, sizeof(m));
}

void fake_memset(uint64_t bytes, uint64_t ns)
{
    CUpti_ActivityMemset4 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.correlationId = fake_api_call();
    m.bytes = bytes;
    m.start = fake_now();
    m.end = m.start + ns;
    fake_emit(m.kind, &m, sizeof(m));
}

/* cudaMalloc (bytes > 0) or cudaFree (bytes < 0) of device memory. */
void fake_malloc(int64_t bytes)
{
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.correlationId = fake_api_call();
    m.memoryOperationType =
        bytes > 0 ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = (uint64_t)(bytes > 0 ? bytes : -bytes);
    m.timestamp = fake_now();
    fake_emit(m.kind, &m, sizeof(m));
}

void fake_sync_of(int type, uint64_t ns);

/* The host blocked for `ns` in cudaStreamSynchronize. */
void fake_sync(uint64_t ns)
{
    fake_sync_of(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, ns);
}

/* The host blocked (or, for STREAM_WAIT_EVENT, did not) in a
 * synchronization of `type` (CUpti_ActivitySynchronizationType). */
void fake_sync_of(int type, uint64_t ns)
{
    CUpti_ActivitySynchronization2 s;
    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = (CUpti_ActivitySynchronizationType)type;
    s.correlationId = fake_api_call();
    s.start = fake_now();
    s.end = s.start + ns;
    fake_emit(s.kind, &s, sizeof(s));
}

/* A kernel with the raw timestamps given: CUPTI writes 0 for one it
 * could not take. */
void fake_kernel_times(const char *name, uint64_t start, uint64_t end)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = fake_api_call();
    k.start = start;
    k.end = end;
    k.gridX = k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
    k.name = strdup(name);
    fake_emit(k.kind, &k, sizeof(k));
}

/* An API call whose correlation id is `id`, as when CUPTI's counter has
 * come that far (2^32 real calls would take minutes): the external
 * correlation record ties it to the id the calling thread pushed last. */
void fake_link_at(uint32_t id)
{
    uint64_t tag;
    if (cuptiActivityPopExternalCorrelationId(
            CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &tag) != CUPTI_SUCCESS) {
        return;   /* no stage: CUPTI emits no external correlation */
    }
    cuptiActivityPushExternalCorrelationId(
        CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, tag);
    CUpti_ActivityExternalCorrelation x;
    memset(&x, 0, sizeof(x));
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
    x.externalId = tag;
    x.correlationId = id;
    fake_emit(x.kind, &x, sizeof(x));
}

/* The kernel record of the API call `id` (see fake_link_at), which may
 * arrive long after the call: kernels end out of launch order. */
void fake_kernel_at(uint32_t id, const char *name)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = id;
    k.start = fake_now();
    k.end = k.start + 1000;
    k.gridX = k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
    k.name = strdup(name);
    fake_emit(k.kind, &k, sizeof(k));
}

/* A kernel whose buffer CUPTI hands over on its own, after tracing
 * stopped (CUPTI's worker thread may still hold a buffer then). */
void fake_late_kernel(const char *name)
{
    int was = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    fake_kernel(name, 0, 1000, 1, 1, 32, 8, 0);
    cuptiActivityFlushAll(0);
    if (was == CUPTI_SUCCESS) {
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
}

/* Records CUPTI itself dropped (no buffer to put them in), for the next
 * cuptiActivityGetNumDroppedRecords to report. */
void fake_set_dropped(size_t n) { fake_cupti_dropped = n; }
