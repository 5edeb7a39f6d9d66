/* A stand-in for libcupti in tests: the Activity API calls aquaprof makes,
 * with the real record layouts of cupti.h, and fake_* functions that play
 * a GPU: each one is an API call (a new correlation id, an external
 * correlation record for the id the calling thread pushed last) and the
 * activity it caused. Records are handed over in buffers at
 * cuptiActivityFlushAll, as CUPTI does at the latest.
 * FAKE_CUPTI_BUSY=1: cuptiActivityEnable refuses as when another
 * profiler holds CUPTI. FAKE_CUPTI_VERSION: the version reported. */
#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SLOT 512           /* every record fits in one slot */
#define MAX_PENDING 100000

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_TimestampCallbackFunc now;
static int enabled[CUPTI_ACTIVITY_KIND_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char (*pending)[SLOT];
static size_t npending;
static uint32_t next_correlation = 1;
static _Thread_local uint64_t stack[256];
static _Thread_local int depth;

CUptiResult cuptiGetVersion(uint32_t *v)
{
    const char *e = getenv("FAKE_CUPTI_VERSION");
    *v = e ? (uint32_t)atoi(e) : CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **text)
{
    *text = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                : "CUPTI_ERROR_UNKNOWN";
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc req,
    CUpti_BuffersCallbackCompleteFunc done)
{
    requested = req;
    completed = done;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(
    CUpti_TimestampCallbackFunc f)
{
    now = f;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if (getenv("FAKE_CUPTI_BUSY")) {
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    enabled[kind] = 1;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    enabled[kind] = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(
    CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    (void)kind;
    if (depth < 256) {
        stack[depth] = id;
    }
    depth++;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(
    CUpti_ExternalCorrelationKind kind, uint64_t *id)
{
    (void)kind;
    if (depth == 0) {
        return CUPTI_ERROR_QUEUE_EMPTY;
    }
    depth--;
    if (id) {
        *id = depth < 256 ? stack[depth] : 0;
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s,
                                              size_t *n)
{
    (void)c;
    (void)s;
    *n = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                       CUpti_Activity **record)
{
    uint8_t *next = *record ? (uint8_t *)*record + SLOT : buffer;
    if (next + SLOT > buffer + valid) {
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&lock);
    size_t sent = 0;
    while (sent < npending) {
        uint8_t *buffer;
        size_t size, max;
        requested(&buffer, &size, &max);
        size_t n = size / SLOT;
        n = n < npending - sent ? n : npending - sent;
        memcpy(buffer, pending[sent], n * SLOT);
        sent += n;
        completed(NULL, 0, buffer, size, n * SLOT);
    }
    npending = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

/* One API call: its correlation id, and the external correlation record
 * that ties it to the pushed id. */
static uint32_t
api_call(void)
{
    pthread_mutex_lock(&lock);
    if (!pending) {
        pending = malloc(MAX_PENDING * SLOT);
    }
    uint32_t id = next_correlation++;
    if (enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] && depth > 0 &&
        npending < MAX_PENDING) {
        CUpti_ActivityExternalCorrelation x;
        memset(&x, 0, sizeof(x));
        x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
        x.externalId = stack[depth - 1];
        x.correlationId = id;
        memcpy(pending[npending++], &x, sizeof(x));
    }
    pthread_mutex_unlock(&lock);
    return id;
}

static void
emit(CUpti_ActivityKind kind, const void *record, size_t size)
{
    pthread_mutex_lock(&lock);
    if (enabled[kind] && npending < MAX_PENDING) {
        memcpy(pending[npending++], record, size);
    }
    pthread_mutex_unlock(&lock);
}

/* A kernel that ran for `ns` on `stream`, starting `delay` ns after its
 * launch (GPU work runs after the host has moved on). */
void fake_kernel(const char *name, uint64_t delay, uint64_t ns,
                 uint32_t stream, int grid, int block, uint16_t registers,
                 int shared)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = api_call();
    k.start = now() + delay;
    k.end = k.start + ns;
    k.streamId = stream;
    k.gridX = grid;
    k.gridY = k.gridZ = k.blockY = k.blockZ = 1;
    k.blockX = block;
    k.registersPerThread = registers;
    k.staticSharedMemory = shared;
    k.name = strdup(name);     /* CUPTI's strings outlive the record */
    emit(k.kind, &k, sizeof(k));
}

void fake_memcpy(int copy_kind, uint64_t bytes, uint64_t ns, int pinned,
                 uint32_t stream)
{
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.correlationId = api_call();
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
    m.start = now();
    m.end = m.start + ns;
    m.streamId = stream;
    emit(m.kind, &m, sizeof(m));
}

void fake_memset(uint64_t bytes, uint64_t ns)
{
    CUpti_ActivityMemset4 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.correlationId = api_call();
    m.bytes = bytes;
    m.start = now();
    m.end = m.start + ns;
    emit(m.kind, &m, sizeof(m));
}

/* cudaMalloc (bytes > 0) or cudaFree (bytes < 0) of device memory. */
void fake_malloc(int64_t bytes)
{
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.correlationId = api_call();
    m.memoryOperationType =
        bytes > 0 ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = (uint64_t)(bytes > 0 ? bytes : -bytes);
    m.timestamp = now();
    emit(m.kind, &m, sizeof(m));
}

/* The host blocked for `ns` in cudaStreamSynchronize. */
void fake_sync(uint64_t ns)
{
    CUpti_ActivitySynchronization2 s;
    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.correlationId = api_call();
    s.start = now();
    s.end = s.start + ns;
    emit(s.kind, &s, sizeof(s));
}
