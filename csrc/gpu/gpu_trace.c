#include "gpu_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/intern.h"
#include "gpu_buffers.h"
#include "gpu_libs.h"
#include "gpu_records.h"

#ifdef AP_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

/* What the hooks do in this run; set before the session starts and not
 * changed while it records. */
static const ap_cuda_fns *cuda;
static int hook_sync, hook_nvtx, running;
/* torch.profiler was about to take CUPTI during this run (ap_gpu_flush) */
static int handed_over;
/* This process opened the driver or CUPTI, or is a fork child of one that
 * did: neither works in a forked child. */
static int opened, forked;
static uint32_t runs;            /* starts so far: which run a push is of */
/* A tag's bit 31 is always clear (a span slot is below 2^31 - 1): it
 * carries the parity of the run that pushed it, so that work a later run
 * launches under a tag still pushed is not filed under that run's stage
 * of the same number. */
#define RUN_BIT (UINT64_C(1) << 31)
#define run_mark(run) ((run) & 1 ? RUN_BIT : 0)
#ifdef AP_HAVE_CUPTI
static const ap_cupti_fns *cupti;
static int hook_cupti;
/* The tags this thread pushed in run `run` and has not popped: a stage
 * left open at stop keeps its tag on CUPTI's per-thread stack, and the
 * thread's first edge in a later run pops it. */
static _Thread_local struct {
    uint32_t run, pushed;
} here;

/* Pops what this thread pushed in an earlier run. */
static void
drop_stale(void)
{
    for (; here.pushed; here.pushed--) {
        cupti->ActivityPopExternalCorrelationId(AP_CORRELATION_KIND, NULL);
    }
    here.run = runs;
}
#endif

static void
hook_enter(uint64_t tag, uint32_t name)
{
    if (hook_sync) {
        cuda->CtxSynchronize();   /* the last stage's work stays its own */
    }
#ifdef AP_HAVE_CUPTI
    if (hook_cupti) {
        if (here.run != runs) {
            drop_stale();
        }
        if (cupti->ActivityPushExternalCorrelationId(
                AP_CORRELATION_KIND, tag | run_mark(runs)) ==
            CUPTI_SUCCESS) {
            here.pushed++;
        }
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
    if (hook_cupti && here.run == runs && here.pushed) {
        cupti->ActivityPopExternalCorrelationId(AP_CORRELATION_KIND, NULL);
        here.pushed--;
    }
#endif
#ifdef AP_HAVE_NVTX
    if (hook_nvtx) {
        nvtxRangePop();
    }
#endif
}

static const ap_stage_hooks hooks = {hook_enter, hook_exit};

/* A fork child inherits the parent's flags but none of its threads, and
 * CUDA and CUPTI do not work in it: it may start a Profiler of its own,
 * without the GPU. */
static void
in_child(void)
{
    running = hook_sync = hook_nvtx = 0;
#ifdef AP_HAVE_CUPTI
    hook_cupti = 0;
#endif
    forked = forked || opened;
}

static void
install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

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

/* Registers the callbacks and enables every kind, or none: fills why and
 * fails. The callbacks are registered at every start, since CUPTI keeps
 * one pair per process and another client may have replaced ours. */
static ap_status
start_cupti(char *why, size_t size)
{
    char text[256];
    CUptiResult rc = cupti->ActivityRegisterTimestampCallback(monotonic_ns);
    if (rc == CUPTI_SUCCESS) {
        rc = cupti->ActivityRegisterCallbacks(ap_gpu_buffer_requested,
                                              ap_gpu_buffer_completed);
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
    if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
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
 * AP_ERR_SYSTEM (status filled) when tracing is required. devices is 0
 * when the program has not initialized CUDA yet. */
static ap_status
start_activity(const ap_gpu_config *c, const char *neighbor, int devices,
               int required, char *traced, size_t traced_size, char *status,
               size_t size)
{
#ifdef AP_HAVE_CUPTI
    char why[2048], where[512];
    ap_status st = AP_ERR_ACTIVE;
    if (neighbor) {
        /* CUPTI serves one client: taking it would cut the other's trace */
        snprintf(why, sizeof(why), "not traced: %s is tracing the GPU with "
                 "CUPTI, which serves one client at a time, and aquaprof "
                 "leaves it to it; start the Profiler outside that run to "
                 "trace the GPU", neighbor);
    } else {
        st = ap_cupti_open(c->cupti_paths, c->ncupti, &cupti, where,
                           sizeof(where), why, sizeof(why));
    }
    if (st == AP_OK) {
        st = start_cupti(why, sizeof(why));
    }
    if (st != AP_OK) {
        snprintf(status, size, "%s", why);
        return required ? AP_ERR_SYSTEM : AP_OK;
    }
    hook_cupti = 1;
    if (devices) {
        snprintf(traced, traced_size, "tracing %d device%s with CUPTI (%s)",
                 devices, devices == 1 ? "" : "s", where);
    } else {
        snprintf(traced, traced_size, "tracing with CUPTI (%s) from the "
                 "program's first use of CUDA", where);
    }
    return AP_OK;
#else
    (void)c;
    (void)neighbor;
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
ap_gpu_start(const ap_gpu_config *c, const char *neighbor,
             const ap_stage_hooks **out, char *status, size_t size)
{
    static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;
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
    if (forked) {
        snprintf(status, size, "not traced: this process was forked from "
                 "one that opened CUDA, which does not work in a forked "
                 "child (start it with the 'spawn' method)");
        return required ? AP_ERR_SYSTEM : AP_OK;
    }
    pthread_once(&fork_handler, install_fork_handler);
    char why[2048];
    int devices = 0;
    ap_status st = ap_cuda_load_driver(c->libcuda, &cuda, why, sizeof(why));
    if (st == AP_OK) {
        opened = 1;
        /* cuda="auto" leaves cuInit to the program: a process that forks
         * after it (DataLoader workers) leaves its children without CUDA */
        st = required ? ap_cuda_init(cuda, &devices, why, sizeof(why))
                      : ap_cuda_devices_if_initialized(cuda, &devices, why,
                                                       sizeof(why));
    }
    if (st != AP_OK && st != AP_IGNORED) {
        snprintf(status, size, "%s", why);
        return required ? AP_ERR_SYSTEM : AP_OK;
    }
    hook_sync = c->sync;
    /* NVTX ranges only when a tool (Nsight) injected itself: free else */
    hook_nvtx = getenv("NVTX_INJECTION64_PATH") != NULL;
    runs++;
    char traced[1024] = "";
    if (c->mode != AP_CUDA_OFF &&
        start_activity(c, neighbor, devices, required, traced,
                       sizeof(traced), status, size) != AP_OK) {
        hook_sync = hook_nvtx = 0;
        return AP_ERR_SYSTEM;
    }
    started_status(traced, status, size);
    handed_over = 0;
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

#ifdef AP_HAVE_CUPTI
/* Appends "; text" (or text) to note, as room allows. */
static void
add_note(char *note, size_t size, const char *text)
{
    size_t used = strlen(note);
    if (used + 1 < size) {
        snprintf(note + used, size - used, "%s%s", used ? "; " : "", text);
    }
}

/* Waits for the work of every device whose primary context is active,
 * whatever thread launched it: a stop on any thread must not leave work
 * in flight, without times. Never creates a context. */
static void
synchronize_devices(int devices, char *note, size_t size)
{
    for (int d = 0; d < devices; d++) {
        int dev, active = 0;
        unsigned flags;
        void *ctx;
        if (cuda->DeviceGet(&dev, d) != 0 ||
            cuda->DevicePrimaryCtxGetState(dev, &flags, &active) != 0 ||
            !active || cuda->DevicePrimaryCtxRetain(&ctx, dev) != 0) {
            continue;
        }
        int rc = -1;
        if (cuda->CtxPushCurrent(ctx) == 0) {
            rc = cuda->CtxSynchronize();
            cuda->CtxPopCurrent(&ctx);
        }
        cuda->DevicePrimaryCtxRelease(dev);
        if (rc != 0) {
            const char *name = NULL;
            char text[256];
            if (rc < 0 || cuda->GetErrorName(rc, &name) != 0 || !name) {
                name = "its context could not be made current";
            }
            snprintf(text, sizeof(text), "device %d could not be "
                     "synchronized at stop (%s): its work still in flight "
                     "is missing", d, name);
            add_note(note, size, text);
        }
    }
}

/* Ends tracing; note gets what the report must say of it. */
static ap_gpu_trace *
stop_cupti(const char *neighbor, char *note, size_t size)
{
    drop_stale();     /* the stopping thread's stages left open */
    int devices = 0;
    char why[512];
    int used_cuda = ap_cuda_devices_if_initialized(cuda, &devices, why,
                                                   sizeof(why)) == AP_OK;
    if (used_cuda) {
        synchronize_devices(devices, note, size);
    }
    /* a client that started during the run keeps its kinds enabled */
    cupti->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (!neighbor) {
        disable(NKINDS);
        cupti->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    size_t lost = ap_gpu_buffers_out();
    if (neighbor || lost || handed_over) {
        char text[512];
        snprintf(text, sizeof(text), "another CUPTI client (%s) took CUPTI "
                 "over during this run: GPU work from its start on is "
                 "missing%s", neighbor      ? neighbor
                              : handed_over ? "torch.profiler"
                                            : "torch.profiler or Nsight",
                 lost ? " (activity buffers went to it)" : "");
        add_note(note, size, text);
    }
    ap_gpu_trace *t = ap_gpu_records_take();
    if (!t) {
        return NULL;
    }
    t->run_mark = run_mark(runs);
    if (!used_cuda) {
        if (!t->nevents) {
            add_note(note, size, "no GPU work: the program did not use "
                     "CUDA");
        }
        return t;
    }
    describe_devices(t);
    if (!t->devices) {
        ap_gpu_trace_free(t);
        return NULL;
    }
    return t;
}
#endif

ap_status
ap_gpu_stop(ap_gpu_trace **out, const char *neighbor, char *note,
            size_t size)
{
    *out = NULL;
    note[0] = '\0';
    if (!running) {
        return AP_OK;
    }
    ap_status st = AP_OK;
    hook_sync = hook_nvtx = 0;
#ifdef AP_HAVE_CUPTI
    if (hook_cupti) {
        hook_cupti = 0;
        *out = stop_cupti(neighbor, note, size);
        st = *out ? AP_OK : AP_ERR_NOMEM;
    }
#else
    (void)neighbor;
    (void)size;
#endif
    running = 0;   /* last: no trace starts while this one flushes */
    return st;
}

void
ap_gpu_flush(void)
{
#ifdef AP_HAVE_CUPTI
    if (running && hook_cupti) {
        handed_over = 1;
        cupti->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
#endif
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
    if (t->nlinks) {     /* links is NULL when there are none */
        qsort(t->links, t->nlinks, sizeof(*t->links), by_correlation);
    }
    t->unattributed = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        ap_gpu_event *e = &t->events[i];
        ap_gpu_link key = {0, e->correlation};
        const ap_gpu_link *link =
            t->nlinks ? bsearch(&key, t->links, t->nlinks, sizeof(key),
                                by_correlation)
                      : NULL;
        uint32_t stage;
        int64_t span;
        /* a tag of another run is still pushed by a stage left open */
        if (link && (link->tag & RUN_BIT) == t->run_mark &&
            ap_report_resolve_tag(r, link->tag & ~RUN_BIT, &stage, &span) ==
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
