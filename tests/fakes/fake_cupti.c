/* A stand-in for libcupti in tests: the Activity API calls aquaprof makes,
 * with the real record layouts of cupti.h, and fake_* functions that play
 * a GPU: each one is an API call (a new correlation id, an external
 * correlation record for the id the calling thread pushed last) and the
 * activity it caused. Records are handed over in buffers at
 * cuptiActivityFlushAll, as CUPTI does at the latest.
 * FAKE_CUPTI_BUSY=1: cuptiActivityEnable refuses as when another
 * profiler holds CUPTI. FAKE_CUPTI_VERSION: the version reported. */
#include "fake_cupti.h"

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
uint32_t
fake_api_call(void)
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

void
fake_emit(CUpti_ActivityKind kind, const void *record, size_t size)
{
    pthread_mutex_lock(&lock);
    if (enabled[kind] && npending < MAX_PENDING) {
        memcpy(pending[npending++], record, size);
    }
    pthread_mutex_unlock(&lock);
}

uint64_t
fake_now(void)
{
    return now();
}
