/* The CUPTI backend (cupti_api.h): CUPTI opened at run time, its
 * activity records turned into events, and the table gpu_trace.c calls.
 * The only file that sees cupti.h; a build without it gets the null
 * backend instead. */
#include "cupti_api.h"

#ifdef AP_HAVE_CUPTI

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "../common/cuda_loader.h"
#include "gpu_buffers.h"
#include "gpu_records.h"

/* ---------------------------------------------------------------------
 * Opening CUPTI */

typedef struct {
    CUptiResult (*GetVersion)(uint32_t *version);
    CUptiResult (*GetResultString)(CUptiResult result, const char **text);
    CUptiResult (*ActivityRegisterCallbacks)(
        CUpti_BuffersCallbackRequestFunc requested,
        CUpti_BuffersCallbackCompleteFunc completed);
    CUptiResult (*ActivityRegisterTimestampCallback)(
        CUpti_TimestampCallbackFunc now);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind kind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind kind);
    CUptiResult (*ActivityFlushAll)(uint32_t flag);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *buffer, size_t valid,
                                         CUpti_Activity **record);
    CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext ctx,
                                                uint32_t stream,
                                                size_t *dropped);
    CUptiResult (*ActivityPushExternalCorrelationId)(
        CUpti_ExternalCorrelationKind kind, uint64_t id);
    CUptiResult (*ActivityPopExternalCorrelationId)(
        CUpti_ExternalCorrelationKind kind, uint64_t *id);
} cupti_fns;

/* The external correlation kind aquaprof pushes its stage tags under:
 * torch.profiler (Kineto) pushes CUSTOM0 and CUSTOM1, so a third keeps
 * each tool's ids on a stack of its own. */
#define CORRELATION_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2

/* CUPTI stays open for the process's life once opened: the driver keeps
 * it loaded, and a second copy would fight the first. */
static cupti_fns cupti;
static int cupti_open;
static char cupti_where[512];

/* Appends "path (reason); " to why, as room allows. */
static void
note(char *why, size_t size, const char *path, const char *reason)
{
    size_t used = strlen(why);
    if (used < size) {
        snprintf(why + used, size - used, "%s%s (%s)", used ? "; " : "",
                 path, reason);
    }
}

static ap_status
adopt(void *lib, const char *path, char *why, size_t size)
{
    const ap_dl_symbol symbols[] = {
        {(void **)&cupti.GetVersion, "cuptiGetVersion"},
        {(void **)&cupti.GetResultString, "cuptiGetResultString"},
        {(void **)&cupti.ActivityRegisterCallbacks,
         "cuptiActivityRegisterCallbacks"},
        {(void **)&cupti.ActivityRegisterTimestampCallback,
         "cuptiActivityRegisterTimestampCallback"},
        {(void **)&cupti.ActivityEnable, "cuptiActivityEnable"},
        {(void **)&cupti.ActivityDisable, "cuptiActivityDisable"},
        {(void **)&cupti.ActivityFlushAll, "cuptiActivityFlushAll"},
        {(void **)&cupti.ActivityGetNextRecord,
         "cuptiActivityGetNextRecord"},
        {(void **)&cupti.ActivityGetNumDroppedRecords,
         "cuptiActivityGetNumDroppedRecords"},
        {(void **)&cupti.ActivityPushExternalCorrelationId,
         "cuptiActivityPushExternalCorrelationId"},
        {(void **)&cupti.ActivityPopExternalCorrelationId,
         "cuptiActivityPopExternalCorrelationId"},
    };
    char what[600];
    snprintf(what, sizeof(what), "CUPTI at %s", path);
    if (ap_dl_bind(lib, symbols, sizeof(symbols) / sizeof(symbols[0]), what,
                   why, size) != AP_OK) {
        return AP_ERR_SYSTEM;
    }
    /* records are read with this build's struct layouts, which hold
     * within one CUDA major version */
    uint32_t version = 0;
    if (cupti.GetVersion(&version) != CUPTI_SUCCESS ||
        version / 10000 != CUPTI_API_VERSION / 10000) {
        snprintf(why, size, "CUPTI at %s has API version %u; aquaprof was "
                 "built with CUPTI %d headers and reads only that major "
                 "version's records (rebuild aquaprof against this CUDA)",
                 path, version, CUPTI_API_VERSION);
        return AP_ERR_INVALID;
    }
    snprintf(cupti_where, sizeof(cupti_where), "%s", path);
    cupti_open = 1;
    return AP_OK;
}

/* The path of a CUPTI already mapped into the process, any version. */
static int
find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(base, "libcupti.so", 11) != 0) {
        return 0;
    }
    snprintf(data, 512, "%s", info->dlpi_name);
    return 1;
}

/* Adopts lib if its major version is this build's; closes it otherwise.
 * AP_OK, AP_ERR_INVALID (wrong version, why says so), AP_ERR_SYSTEM. */
static ap_status
try_library(void *lib, const char *path, char *why, size_t size)
{
    ap_status st = adopt(lib, path, why, size);
    if (st != AP_OK) {
        dlclose(lib);
    }
    return st;
}

static ap_status
open_cupti(const char *const *candidates, size_t n, char *where,
           size_t where_size, char *why, size_t size)
{
    why[0] = '\0';
    char loaded[512] = "";
    if (!cupti_open && dl_iterate_phdr(find_loaded, loaded)) {
        /* one CUPTI per process: two copies would fight over the device */
        void *lib = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD);
        ap_status st = lib ? try_library(lib, loaded, why, size)
                           : AP_ERR_SYSTEM;
        if (st != AP_OK) {
            char reason[1024];
            snprintf(reason, sizeof(reason), "%s", lib ? why : dlerror());
            snprintf(why, size, "not traced: the process already holds a "
                     "CUPTI that aquaprof cannot use, and a second copy "
                     "would fight it over the device: %s", reason);
            return AP_ERR_INVALID;
        }
    }
    char wrong[1024] = "";
    for (size_t i = 0; i < n && !cupti_open; i++) {
        void *lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            /* dlerror repeats the path: keep only what follows it */
            const char *colon = e ? strrchr(e, ':') : NULL;
            note(why, size, candidates[i],
                 colon ? colon + 2 : "cannot open");
            continue;
        }
        char reason[1024];
        if (try_library(lib, candidates[i], reason, sizeof(reason)) ==
            AP_ERR_INVALID) {
            if (!wrong[0]) {
                snprintf(wrong, sizeof(wrong), "%s", reason);
            }
            note(why, size, candidates[i], "another CUDA major version");
        } else if (!cupti_open) {
            note(why, size, candidates[i], reason);
        }
    }
    if (!cupti_open) {
        char tried[2048];
        snprintf(tried, sizeof(tried), "%s", why);
        if (wrong[0]) {
            snprintf(why, size, "%s; tried: %s", wrong, tried);
            return AP_ERR_INVALID;
        }
        snprintf(why, size, "CUPTI not found; tried: %s. Set AQUAPROF_CUPTI "
                 "to the path of libcupti.so", n ? tried : "no path");
        return AP_ERR_SYSTEM;
    }
    snprintf(where, where_size, "%s", cupti_where);
    return AP_OK;
}

/* "text (number)" for a CUPTI result. */
static void
result_text(CUptiResult rc, char *out, size_t size)
{
    const char *text = NULL;
    if (!cupti_open || cupti.GetResultString(rc, &text) != CUPTI_SUCCESS ||
        !text) {
        text = "unknown CUPTI error";
    }
    snprintf(out, size, "%s (%d)", text, (int)rc);
}

/* ---------------------------------------------------------------------
 * Its activity records, turned into events */

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
    ((e).correlation =                                                 \
         ap_gpu_records_correlation_unlocked((r)->correlationId),      \
     (e).device = (r)->deviceId, (e).stream = (r)->streamId)

/* One handler per CUPTI record kind: each fills e from its record and
 * returns 1 to keep e, 0 to keep nothing, -1 for want of memory. */
typedef int (*record_handler)(const CUpti_Activity *record, ap_gpu_event *e);

static int
on_kernel(const CUpti_Activity *record, ap_gpu_event *e)
{
    const CUpti_ActivityKernel10 *k = (const void *)record;
    int64_t name = ap_gpu_records_name_unlocked(k->name);
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
    e->correlation = ap_gpu_records_correlation_unlocked(s->correlationId);
    e->stream = s->streamId;
    return 1;
}

/* A stage's tag tied to an API call: kept as a link, not as an event. */
static int
on_external_correlation(const CUpti_Activity *record, ap_gpu_event *e)
{
    (void)e;
    const CUpti_ActivityExternalCorrelation *x = (const void *)record;
    if (x->externalKind != CORRELATION_KIND) {
        return 0;
    }
    return ap_gpu_records_link_unlocked(
               x->externalId,
               ap_gpu_records_correlation_unlocked(x->correlationId));
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
    return ap_gpu_records_event_unlocked(&e);
}

static void CUPTIAPI
buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = ap_gpu_buffer_new();
    *size = *buffer ? AP_GPU_BUFFER_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI
buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                 size_t size, size_t valid)
{
    (void)size;
    ap_gpu_records_lock();
    ap_gpu_trace *trace = ap_gpu_records_trace_unlocked();
    if (cupti_open && valid) {
        CUpti_Activity *record = NULL;
        while (cupti.ActivityGetNextRecord(buffer, valid, &record) ==
               CUPTI_SUCCESS) {
            if (!trace) {
                ap_gpu_records_late_unlocked(is_activity(record->kind));
            } else if (add(record) != 0) {
                trace->dropped++;
            }
        }
    }
    size_t dropped = 0;
    if (cupti_open && cupti.ActivityGetNumDroppedRecords(ctx, stream,
                                                         &dropped) ==
                          CUPTI_SUCCESS) {
        if (trace) {
            trace->dropped += (int64_t)dropped;
        } else {
            ap_gpu_records_late_unlocked((int64_t)dropped);
        }
    }
    ap_gpu_records_unlock();
    ap_gpu_buffer_release(buffer);
}

/* ---------------------------------------------------------------------
 * The backend */

/* Activity timestamps on the spans' clock, so that no offset is guessed. */
static uint64_t CUPTIAPI
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const CUpti_ActivityKind kinds[] = {
    /* the API records make CUPTI emit the external correlations */
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* why = what CUPTI refused, and what to do where the user may not
 * profile. */
static ap_status
refused(CUptiResult rc, char *why, size_t size)
{
    char text[256];
    result_text(rc, text, sizeof(text));
    if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
        snprintf(why, size, "CUPTI refused: this user may not profile the "
                 "GPU (%s); see NVreg_RestrictProfilingToAdminUsers", text);
    } else {
        snprintf(why, size, "CUPTI refused to start tracing: %s", text);
    }
    return AP_ERR_SYSTEM;
}

static ap_status
take_callbacks(char *why, size_t size)
{
    CUptiResult rc = cupti.ActivityRegisterTimestampCallback(monotonic_ns);
    if (rc == CUPTI_SUCCESS) {
        rc = cupti.ActivityRegisterCallbacks(buffer_requested,
                                             buffer_completed);
    }
    return rc == CUPTI_SUCCESS ? AP_OK : refused(rc, why, size);
}

static void
disable_first(size_t n)
{
    while (n--) {
        cupti.ActivityDisable(kinds[n]);
    }
}

static ap_status
enable(char *why, size_t size)
{
    for (size_t enabled = 0; enabled < NKINDS; enabled++) {
        CUptiResult rc = cupti.ActivityEnable(kinds[enabled]);
        if (rc != CUPTI_SUCCESS) {
            disable_first(enabled);
            return refused(rc, why, size);
        }
    }
    return AP_OK;
}

static void
disable(void)
{
    disable_first(NKINDS);
}

static void
flush(void)
{
    cupti.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static int
push_tag(uint64_t tag)
{
    return cupti.ActivityPushExternalCorrelationId(CORRELATION_KIND, tag) ==
           CUPTI_SUCCESS;
}

static void
pop_tag(void)
{
    cupti.ActivityPopExternalCorrelationId(CORRELATION_KIND, NULL);
}

static const ap_cupti_api api = {
    .lacking = NULL,
    .open = open_cupti,
    .take_callbacks = take_callbacks,
    .enable = enable,
    .disable = disable,
    .flush = flush,
    .push_tag = push_tag,
    .pop_tag = pop_tag,
};

const ap_cupti_api *
ap_cupti_default(void)
{
    return &api;
}

#else

const ap_cupti_api *
ap_cupti_default(void)
{
    return &ap_cupti_null;
}

#endif
