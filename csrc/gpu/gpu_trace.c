#include "gpu_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/intern.h"
#include "gpu_libs.h"
#include "gpu_records.h"

#ifdef AP_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

/* What the hooks do in this run; set before the session starts and not
 * changed while it records. */
static const ap_cuda_fns *cuda;
static int hook_sync, hook_nvtx, running;
#ifdef AP_HAVE_CUPTI
static const ap_cupti_fns *cupti;
static int hook_cupti;
#endif

static void
hook_enter(uint64_t tag, uint32_t name)
{
    if (hook_sync) {
        cuda->CtxSynchronize();   /* the last stage's work stays its own */
    }
#ifdef AP_HAVE_CUPTI
    if (hook_cupti) {
        cupti->ActivityPushExternalCorrelationId(
            CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, tag);
    }
#else
    (void)tag;
#endif
#ifdef AP_HAVE_NVTX
    if (hook_nvtx) {
        nvtxRangePushA(ap_intern_name(name, NULL));
    }
#else
    (void)name;
#endif
}

static void
hook_exit(void)
{
    if (hook_sync) {
        cuda->CtxSynchronize();   /* the stage's work ends inside it */
    }
#ifdef AP_HAVE_CUPTI
    if (hook_cupti) {
        cupti->ActivityPopExternalCorrelationId(
            CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, NULL);
    }
#endif
#ifdef AP_HAVE_NVTX
    if (hook_nvtx) {
        nvtxRangePop();
    }
#endif
}

static const ap_stage_hooks hooks = {hook_enter, hook_exit};

#ifdef AP_HAVE_CUPTI
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

static void
disable(size_t n)
{
    while (n--) {
        cupti->ActivityDisable(kinds[n]);
    }
}

/* Registers the callbacks (once per process) and enables every kind, or
 * none: fills why and fails. */
static ap_status
start_cupti(char *why, size_t size)
{
    static int registered;
    char text[256];
    CUptiResult rc = CUPTI_SUCCESS;
    if (!registered) {
        rc = cupti->ActivityRegisterTimestampCallback(monotonic_ns);
        if (rc == CUPTI_SUCCESS) {
            rc = cupti->ActivityRegisterCallbacks(ap_gpu_buffer_requested,
                                                  ap_gpu_buffer_completed);
        }
        registered = rc == CUPTI_SUCCESS;
    }
    size_t enabled = 0;
    if (rc == CUPTI_SUCCESS) {
        if (ap_gpu_records_begin(cupti) != AP_OK) {
            snprintf(why, size, "out of memory");
            return AP_ERR_NOMEM;
        }
        for (; enabled < NKINDS; enabled++) {
            rc = cupti->ActivityEnable(kinds[enabled]);
            if (rc != CUPTI_SUCCESS) {
                break;
            }
        }
    }
    if (rc == CUPTI_SUCCESS) {
        return AP_OK;
    }
    disable(enabled);
    ap_gpu_trace_free(ap_gpu_records_take());
    ap_cupti_error(rc, text, sizeof(text));
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
        rc == CUPTI_ERROR_NOT_INITIALIZED) {
        snprintf(why, size, "CUPTI refused: another profiler holds it "
                 "(Nsight, torch.profiler or a second CUPTI client): %s",
                 text);
    } else if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
        snprintf(why, size, "CUPTI refused: this user may not profile the "
                 "GPU (%s); see NVreg_RestrictProfilingToAdminUsers", text);
    } else {
        snprintf(why, size, "CUPTI refused to start tracing: %s", text);
    }
    return AP_ERR_SYSTEM;
}
#endif

/* Starts CUPTI's activity tracing: AP_OK with traced saying what is
 * traced, or with status saying what was missing and traced left empty;
 * AP_ERR_SYSTEM (status filled) when tracing is required. */
static ap_status
start_activity(const ap_gpu_config *c, int devices, int required,
               char *traced, size_t traced_size, char *status, size_t size)
{
#ifdef AP_HAVE_CUPTI
    char why[2048], where[512];
    ap_status st = ap_cupti_open(c->cupti_paths, c->ncupti, &cupti, where,
                                 sizeof(where), why, sizeof(why));
    if (st == AP_OK) {
        st = start_cupti(why, sizeof(why));
    }
    if (st != AP_OK) {
        snprintf(status, size, "%s", why);
        return required ? AP_ERR_SYSTEM : AP_OK;
    }
    hook_cupti = 1;
    snprintf(traced, traced_size, "tracing %d device%s with CUPTI (%s)",
             devices, devices == 1 ? "" : "s", where);
    return AP_OK;
#else
    (void)c;
    (void)devices;
    (void)traced;
    (void)traced_size;
    snprintf(status, size, "aquaprof was built without the CUPTI "
             "headers: GPU activity cannot be traced (rebuild with "
             "CUDA_HOME set)");
    return required ? AP_ERR_SYSTEM : AP_OK;
#endif
}

/* The status line of a started trace: what is traced (or what was
 * missing, already in status), and whether stage edges synchronize. */
static void
started_status(const char *traced, char *status, size_t size)
{
    if (traced[0]) {
        snprintf(status, size, "%s%s", traced,
                 hook_sync ? "; synchronizing at every stage edge" : "");
    } else if (hook_sync) {
        size_t used = strlen(status);
        snprintf(status + used, size - used, "%ssynchronizing at every "
                 "stage edge", used ? "; " : "");
    }
}

/* The session needs hooks only when one of them has work to do. */
static const ap_stage_hooks *
needed_hooks(void)
{
    int any = hook_sync || hook_nvtx;
#ifdef AP_HAVE_CUPTI
    any = any || hook_cupti;
#endif
    return any ? &hooks : NULL;
}

ap_status
ap_gpu_start(const ap_gpu_config *c, const ap_stage_hooks **out,
             char *status, size_t size)
{
    *out = NULL;
    status[0] = '\0';
    if (running) {
        snprintf(status, size, "a GPU trace already runs");
        return AP_ERR_ACTIVE;
    }
    hook_sync = hook_nvtx = 0;
#ifdef AP_HAVE_CUPTI
    hook_cupti = 0;
#endif
    if (c->mode == AP_CUDA_OFF && !c->sync) {
        snprintf(status, size, "off (cuda=False)");
        return AP_OK;
    }
    int required = c->mode == AP_CUDA_REQUIRED || c->sync;
    int devices = 0;
    char why[2048];
    if (ap_cuda_open(c->libcuda, &cuda, &devices, why, sizeof(why)) !=
        AP_OK) {
        snprintf(status, size, "%s", why);
        return required ? AP_ERR_SYSTEM : AP_OK;
    }
    hook_sync = c->sync;
    /* NVTX ranges only when a tool (Nsight) injected itself: free else */
    hook_nvtx = getenv("NVTX_INJECTION64_PATH") != NULL;
    char traced[1024] = "";
    if (c->mode != AP_CUDA_OFF &&
        start_activity(c, devices, required, traced, sizeof(traced), status,
                       size) != AP_OK) {
        hook_sync = hook_nvtx = 0;
        return AP_ERR_SYSTEM;
    }
    started_status(traced, status, size);
    running = 1;
    *out = needed_hooks();
    return AP_OK;
}

#ifdef AP_HAVE_CUPTI
static void
describe_devices(ap_gpu_trace *t)
{
    uint32_t n = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        if (t->events[i].device + 1 > n && t->events[i].kind != AP_GPU_SYNC) {
            n = t->events[i].device + 1;
        }
    }
    t->devices = calloc(n ? n : 1, sizeof(*t->devices));
    if (!t->devices) {
        return;
    }
    t->ndevices = n;
    /* the driver's attribute numbers, a stable ABI */
    enum { SMS = 16, THREADS_PER_SM = 39, SHARED_PER_SM = 81,
           REGISTERS_PER_SM = 82, BLOCKS_PER_SM = 106, WARP = 10 };
    for (uint32_t d = 0; d < n; d++) {
        ap_gpu_device *g = &t->devices[d];
        int dev;
        if (cuda->DeviceGet(&dev, (int)d) != 0 ||
            cuda->DeviceGetName(g->name, sizeof(g->name), dev) != 0) {
            snprintf(g->name, sizeof(g->name), "device %u", d);
            continue;
        }
        cuda->DeviceGetAttribute(&g->sms, SMS, dev);
        cuda->DeviceGetAttribute(&g->threads_per_sm, THREADS_PER_SM, dev);
        cuda->DeviceGetAttribute(&g->shared_per_sm, SHARED_PER_SM, dev);
        cuda->DeviceGetAttribute(&g->registers_per_sm, REGISTERS_PER_SM,
                                 dev);
        cuda->DeviceGetAttribute(&g->blocks_per_sm, BLOCKS_PER_SM, dev);
        cuda->DeviceGetAttribute(&g->warp_size, WARP, dev);
    }
}
#endif

ap_status
ap_gpu_stop(ap_gpu_trace **out)
{
    *out = NULL;
    if (!running) {
        return AP_OK;
    }
    running = 0;
    hook_sync = hook_nvtx = 0;
#ifdef AP_HAVE_CUPTI
    if (!hook_cupti) {
        return AP_OK;
    }
    hook_cupti = 0;
    cuda->CtxSynchronize();   /* no context on this thread: a no-op */
    cupti->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable(NKINDS);
    cupti->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    ap_gpu_trace *t = ap_gpu_records_take();
    if (!t) {
        return AP_ERR_NOMEM;
    }
    describe_devices(t);
    if (!t->devices) {
        ap_gpu_trace_free(t);
        return AP_ERR_NOMEM;
    }
    *out = t;
#endif
    return AP_OK;
}

static int
by_correlation(const void *a, const void *b)
{
    uint64_t x = ((const ap_gpu_link *)a)->correlation;
    uint64_t y = ((const ap_gpu_link *)b)->correlation;
    return (x > y) - (x < y);
}

void
ap_gpu_trace_resolve(ap_gpu_trace *t, const ap_report *r)
{
    qsort(t->links, t->nlinks, sizeof(*t->links), by_correlation);
    t->unattributed = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        ap_gpu_event *e = &t->events[i];
        ap_gpu_link key = {0, e->correlation};
        const ap_gpu_link *link = bsearch(&key, t->links, t->nlinks,
                                          sizeof(key), by_correlation);
        uint32_t stage;
        int64_t span;
        if (link && ap_report_resolve_tag(r, link->tag, &stage, &span) ==
                        AP_OK) {
            e->stage = (int32_t)stage;
            e->span = span;
        } else {
            e->stage = -1;
            e->span = -1;
            t->unattributed++;
        }
    }
}

void
ap_gpu_trace_free(ap_gpu_trace *t)
{
    if (!t) {
        return;
    }
    ap_intern_table_free(&t->names);
    free(t->events);
    free(t->links);
    free(t->devices);
    free(t);
}
