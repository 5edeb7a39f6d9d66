#include "gpu_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/intern.h"
#include "cupti_api.h"
#include "gpu_buffers.h"
#include "gpu_libs.h"
#include "gpu_nvtx.h"
#include "gpu_records.h"

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
/* CUPTI's calls, or the null backend's; chosen at the first start */
static const ap_cupti_api *api;
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
        api->pop_tag();
    }
    here.run = runs;
}

static void
hook_enter(uint64_t tag, uint32_t name)
{
    if (hook_sync) {
        cuda->CtxSynchronize();   /* the last stage's work stays its own */
    }
    if (hook_cupti) {
        if (here.run != runs) {
            drop_stale();
        }
        if (api->push_tag(tag | run_mark(runs))) {
            here.pushed++;
        }
    }
    if (hook_nvtx) {
        ap_nvtx_push(ap_intern_name(name, NULL));
    }
}

static void
hook_exit(void)
{
    if (hook_sync) {
        cuda->CtxSynchronize();   /* the stage's work ends inside it */
    }
    if (hook_cupti && here.run == runs && here.pushed) {
        api->pop_tag();
        here.pushed--;
    }
    if (hook_nvtx) {
        ap_nvtx_pop();
    }
}

static const ap_stage_hooks hooks = {hook_enter, hook_exit};

/* A fork child inherits the parent's flags but none of its threads, and
 * CUDA and CUPTI do not work in it: it may start a Profiler of its own,
 * without the GPU. */
static void
in_child(void)
{
    running = hook_sync = hook_nvtx = hook_cupti = 0;
    forked = forked || opened;
}

static void
install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

/* Takes CUPTI's callbacks, starts a fresh trace and enables every kind,
 * or none: fills why and fails. */
static ap_status
start_cupti(char *why, size_t size)
{
    ap_status st = api->take_callbacks(why, size);
    if (st != AP_OK) {
        return st;
    }
    if (ap_gpu_records_begin() != AP_OK) {
        snprintf(why, size, "out of memory");
        return AP_ERR_NOMEM;
    }
    st = api->enable(why, size);
    if (st != AP_OK) {
        ap_gpu_trace_free(ap_gpu_records_take());
    }
    return st;
}

/* Starts CUPTI's activity tracing: AP_OK with traced saying what is
 * traced, or with status saying what was missing and traced left empty;
 * AP_ERR_SYSTEM (status filled) when tracing is required. devices is 0
 * when the program has not initialized CUDA yet. */
static ap_status
start_activity(const ap_gpu_config *c, const char *neighbor, int devices,
               int required, char *traced, size_t traced_size, char *status,
               size_t size)
{
    char why[2048], where[512];
    ap_status st = AP_ERR_ACTIVE;
    if (api->lacking) {
        snprintf(why, sizeof(why), "%s", api->lacking);
    } else if (neighbor) {
        /* CUPTI serves one client: taking it would cut the other's trace */
        snprintf(why, sizeof(why), "not traced: %s is tracing the GPU with "
                 "CUPTI, which serves one client at a time, and aquaprof "
                 "leaves it to it; start the Profiler outside that run to "
                 "trace the GPU", neighbor);
    } else {
        st = api->open(c->cupti_paths, c->ncupti, where, sizeof(where), why,
                       sizeof(why));
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
    return hook_sync || hook_nvtx || hook_cupti ? &hooks : NULL;
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
    hook_sync = hook_nvtx = hook_cupti = 0;
    if (!api) {
        api = ap_cupti_default();
    }
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
    ap_status found = ap_cuda_devices_if_initialized(cuda, &devices, why,
                                                     sizeof(why));
    int used_cuda = found == AP_OK;
    if (used_cuda) {
        synchronize_devices(devices, note, size);
    }
    /* a client that started during the run keeps its kinds enabled */
    api->flush();
    if (!neighbor) {
        api->disable();
        api->flush();
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
            /* a driver that answers with an error was started, and
             * failed: the program did use CUDA */
            char text[600];
            snprintf(text, sizeof(text), "no GPU work: %s",
                     found == AP_IGNORED ? "the program did not use CUDA"
                                         : why);
            add_note(note, size, text);
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
    if (hook_cupti) {
        hook_cupti = 0;
        *out = stop_cupti(neighbor, note, size);
        st = *out ? AP_OK : AP_ERR_NOMEM;
    }
    running = 0;   /* last: no trace starts while this one flushes */
    return st;
}

void
ap_gpu_flush(void)
{
    if (running && hook_cupti) {
        handed_over = 1;
        api->flush();
    }
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

int
ap_gpu_can_trace(void)
{
    return ap_cupti_default()->lacking == NULL;
}
