/* A stand-in for libcupti in tests: the Activity API calls aquaprof makes,
 * with the real record layouts of cupti.h and the real library's ways:
 * - one pair of buffer callbacks per process: a buffer is asked of the
 *   requester registered when the first record needs it, and handed to
 *   the completer registered when it is full or flushed, which may belong
 *   to another client by then;
 * - buffers are handed over on a thread of the fake's own (CUPTI's worker
 *   thread), at any time a buffer fills, and at cuptiActivityFlushAll;
 * - one external correlation stack per kind and thread; an API call gets
 *   one external correlation record for each kind whose stack is not
 *   empty;
 * - one subscriber at a time (cuptiSubscribe);
 * - only the error codes the real API documents.
 * fake_other_* play a second client, as torch.profiler's Kineto drives
 * CUPTI: its own callbacks, buffers, kinds and correlation kind (CUSTOM0).
 * FAKE_CUPTI_VERSION, or FAKE_CUPTI_BUILT_VERSION at build time: the
 * version reported. */
#include "fake_cupti.h"

#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT 512           /* every record fits in one slot */
#define KINDS 8            /* external correlation kinds */
#define DEPTH 256

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_TimestampCallbackFunc now;
static int enabled[CUPTI_ACTIVITY_KIND_COUNT];
static int subscribed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *buffer;            /* being filled, NULL when none */
static size_t buffer_size, used;
static uint32_t next_correlation = 1;
static _Thread_local uint64_t stacks[KINDS][DEPTH];
static _Thread_local int depths[KINDS];
/* records the next cuptiActivityGetNumDroppedRecords reports */
size_t fake_cupti_dropped;

CUptiResult cuptiGetVersion(uint32_t *v)
{
#ifdef FAKE_CUPTI_BUILT_VERSION
    *v = FAKE_CUPTI_BUILT_VERSION;     /* a copy from another CUDA */
#else
    const char *e = getenv("FAKE_CUPTI_VERSION");
    *v = e ? (uint32_t)atoi(e) : CUPTI_API_VERSION;
#endif
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **text)
{
    switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *text = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        *text = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
        break;
    case CUPTI_ERROR_QUEUE_EMPTY:
        *text = "CUPTI_ERROR_QUEUE_EMPTY";
        break;
    default:
        *text = "CUPTI_ERROR_UNKNOWN";
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber,
                           CUpti_CallbackFunc callback, void *data)
{
    (void)callback;
    (void)data;
    pthread_mutex_lock(&lock);
    int taken = subscribed;
    subscribed = 1;
    pthread_mutex_unlock(&lock);
    if (taken) {
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    *subscriber = (CUpti_SubscriberHandle)&subscribed;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    if (subscriber != (CUpti_SubscriberHandle)&subscribed) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    pthread_mutex_lock(&lock);
    subscribed = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc req,
    CUpti_BuffersCallbackCompleteFunc done)
{
    if (!req || !done) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    pthread_mutex_lock(&lock);
    requested = req;
    completed = done;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(
    CUpti_TimestampCallbackFunc f)
{
    if (!f) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    now = f;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
        return CUPTI_ERROR_INVALID_KIND;
    }
    enabled[kind] = 1;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
        return CUPTI_ERROR_INVALID_KIND;
    }
    enabled[kind] = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPushExternalCorrelationId(
    CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    if ((int)kind <= 0 || kind >= KINDS) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (depths[kind] < DEPTH) {
        stacks[kind][depths[kind]] = id;
    }
    depths[kind]++;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityPopExternalCorrelationId(
    CUpti_ExternalCorrelationKind kind, uint64_t *id)
{
    if ((int)kind <= 0 || kind >= KINDS) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (depths[kind] == 0) {
        return CUPTI_ERROR_QUEUE_EMPTY;
    }
    depths[kind]--;
    if (id) {
        *id = depths[kind] < DEPTH ? stacks[kind][depths[kind]] : 0;
    }
    return CUPTI_SUCCESS;
}

/* How many ids of `kind` the calling thread has pushed and not popped. */
int fake_correlation_depth(int kind)
{
    return kind > 0 && kind < KINDS ? depths[kind] : -1;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s,
                                              size_t *n)
{
    (void)c;
    (void)s;
    pthread_mutex_lock(&lock);
    *n = fake_cupti_dropped;
    fake_cupti_dropped = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *start, size_t valid,
                                       CUpti_Activity **record)
{
    uint8_t *next = *record ? (uint8_t *)*record + SLOT : start;
    if (next + SLOT > start + valid) {
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = (CUpti_Activity *)next;
    return CUPTI_SUCCESS;
}

typedef struct {
    CUpti_BuffersCallbackCompleteFunc done;
    uint8_t *buffer;
    size_t size, valid;
} handover;

static void *
hand_over(void *arg)
{
    handover *h = arg;
    h->done(NULL, 0, h->buffer, h->size, h->valid);
    return NULL;
}

/* Hands the buffer being filled to whoever is registered now, on a thread
 * of the fake's own; the caller holds the lock. */
static void
complete_locked(void)
{
    if (!buffer) {
        return;
    }
    handover h = {completed, buffer, buffer_size, used};
    buffer = NULL;
    used = 0;
    pthread_t worker;
    pthread_mutex_unlock(&lock);
    if (pthread_create(&worker, NULL, hand_over, &h) == 0) {
        pthread_join(worker, NULL);
    } else {
        hand_over(&h);
    }
    pthread_mutex_lock(&lock);
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&lock);
    complete_locked();
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

/* Appends one record slot, asking for a buffer when none is being
 * filled; a record with no room is dropped and counted. Holds the lock. */
static void
append_locked(const void *record, size_t size)
{
    if (buffer && used + SLOT > buffer_size) {
        complete_locked();
    }
    if (!buffer) {
        size_t max = 0;
        requested(&buffer, &buffer_size, &max);
        used = 0;
        if (!buffer || buffer_size < SLOT) {
            buffer = NULL;
            fake_cupti_dropped++;
            return;
        }
    }
    memset(buffer + used, 0, SLOT);
    memcpy(buffer + used, record, size);
    used += SLOT;
}

uint32_t
fake_api_call(void)
{
    pthread_mutex_lock(&lock);
    uint32_t id = next_correlation++;
    for (int kind = 1; kind < KINDS; kind++) {
        if (enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] &&
            depths[kind] > 0) {
            CUpti_ActivityExternalCorrelation x;
            memset(&x, 0, sizeof(x));
            x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
            x.externalKind = (CUpti_ExternalCorrelationKind)kind;
            x.externalId = stacks[kind][depths[kind] - 1];
            x.correlationId = id;
            append_locked(&x, sizeof(x));
        }
    }
    pthread_mutex_unlock(&lock);
    return id;
}

void
fake_emit(CUpti_ActivityKind kind, const void *record, size_t size)
{
    pthread_mutex_lock(&lock);
    if (enabled[kind]) {
        append_locked(record, size);
    }
    pthread_mutex_unlock(&lock);
}

uint64_t
fake_now(void)
{
    if (now) {
        return now();
    }
    struct timespec ts;          /* CUPTI's own clock, as no client set one */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- a second CUPTI client, as torch.profiler drives CUPTI ---------- */

/* Its buffers come from a static pool: a free() of one by anyone else
 * aborts the process, as a double free in a real program would. */
#define OTHER_BUFFERS 16
#define OTHER_SIZE (64 * SLOT)
static uint8_t other_pool[OTHER_BUFFERS][OTHER_SIZE];
static int other_lent[OTHER_BUFFERS];
static CUpti_SubscriberHandle other_subscriber;
static int other_records, other_foreign;
static const CUpti_ActivityKind other_kinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
};

static uint64_t CUPTIAPI
other_now(void)
{
    return 42;      /* Kineto's clock is not aquaprof's */
}

static void CUPTIAPI
other_requested(uint8_t **out, size_t *size, size_t *max)
{
    *out = NULL;
    *size = *max = 0;
    for (int i = 0; i < OTHER_BUFFERS; i++) {
        if (!other_lent[i]) {
            other_lent[i] = 1;
            *out = other_pool[i];
            *size = OTHER_SIZE;
            return;
        }
    }
}

static void CUPTIAPI
other_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    for (int i = 0; i < OTHER_BUFFERS; i++) {
        if (buf == other_pool[i]) {
            other_records += (int)(valid / SLOT);
            other_lent[i] = 0;
            return;
        }
    }
    other_foreign++;   /* as Kineto: logged, never freed */
}

static void CUPTIAPI
other_callback(void *data, CUpti_CallbackDomain domain, CUpti_CallbackId id,
               const void *info)
{
    (void)data;
    (void)domain;
    (void)id;
    (void)info;
}

/* Starts the other client: subscribes, registers its callbacks and clock,
 * enables its kinds. Returns a CUptiResult. */
int fake_other_start(void)
{
    CUptiResult rc = cuptiSubscribe(&other_subscriber, other_callback, NULL);
    if (rc != CUPTI_SUCCESS) {
        return rc;
    }
    cuptiActivityRegisterTimestampCallback(other_now);
    cuptiActivityRegisterCallbacks(other_requested, other_completed);
    for (size_t i = 0; i < sizeof(other_kinds) / sizeof(*other_kinds); i++) {
        cuptiActivityEnable(other_kinds[i]);
    }
    return CUPTI_SUCCESS;
}

/* Stops it: flushes, disables its kinds, unsubscribes. */
void fake_other_stop(void)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < sizeof(other_kinds) / sizeof(*other_kinds); i++) {
        cuptiActivityDisable(other_kinds[i]);
    }
    cuptiUnsubscribe(other_subscriber);
}

/* Records the other client received in its own buffers. */
int fake_other_records(void)
{
    return other_records;
}

/* Buffers not its own that reached its completion callback. */
int fake_other_foreign(void)
{
    return other_foreign;
}

/* Whether the given kind is enabled now. */
int fake_enabled(int kind)
{
    return kind > 0 && kind < CUPTI_ACTIVITY_KIND_COUNT && enabled[kind];
}
