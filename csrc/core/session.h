/* A profiling session: per-thread stage stacks, span buffers and
 * aggregates, merged into an ap_report after stop. At most one session is
 * active per process; the hot path takes no lock.
 *
 * Threading contract: ap_enter/ap_exit may run on any thread at any time.
 * ap_session_stop closes other threads' open stages, so it must not run
 * while another thread is inside ap_enter/ap_exit; the Python binding
 * guarantees this by holding the GIL around all of them.
 *
 * When a thread that recorded exits, its record is merged into its
 * session and trimmed to its spans and counters (stages it left open are
 * closed then, flagged AP_SPAN_UNCLOSED): a thread per request costs
 * little once it is gone. That runs on the exiting thread, without the
 * GIL, at any time; it locks out stop, snapshot, report and free, which
 * need no more care from their callers than before. */
#ifndef AP_SESSION_H
#define AP_SESSION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rss.h"
#include "span.h"
#include "stats.h"
#include "status.h"

typedef struct ap_session ap_session;

/* Called on the recording thread at each stage edge, before the edge's
 * time is read, so that their own cost stays out of the stage's time. The
 * GPU layer uses them to tag device work with the stage that launched it
 * (CUPTI external correlation ids), for NVTX ranges, or to synchronize the
 * device; the core knows nothing of CUDA. enter gets the span's tag (see
 * AP_TAG_THREAD_BITS below) and the stage's interned name. */
typedef struct {
    void (*enter)(uint64_t tag, uint32_t name);
    void (*exit)(void);
} ap_stage_hooks;

typedef struct {
    int64_t max_spans;          /* raw spans kept, 0..INT32_MAX */
    int memory;                 /* sample host RSS */
    int64_t memory_interval_ns;
    int64_t cpu_resolution_ns;  /* thread CPU clock read at most this often */
    const ap_stage_hooks *hooks; /* NULL for none; must outlive the session */
    uint32_t window;            /* recent calls kept per stage and thread for
                                 * ap_session_snapshot, 0..AP_WINDOW_MAX */
    uint32_t max_stages;        /* distinct stage paths recorded,
                                 * 0..AP_MAX_STAGES (0: AP_MAX_STAGES);
                                 * entries of new paths past it fold into
                                 * their parent's AP_OVERFLOW_NAME path */
} ap_config;

#define AP_WINDOW_MAX (1u << 20)
#define AP_MAX_STAGES (1u << 30)
#define AP_DEFAULT_MAX_STAGES 100000u   /* the binding's default */

/* The path that entries of new paths past config.max_stages fold into,
 * one under each parent that has them; its own children fold into it. */
#define AP_OVERFLOW_NAME "(over max_stages)"

/* The name id of an entry whose name was left out of the process-wide
 * table (ap_stage_name_id): ap_enter files it as an entry of a new path
 * past config.max_stages, in its parent's AP_OVERFLOW_NAME path, counted
 * in the report's `overflowed`. Never an interned id. */
#define AP_NAME_OVER (UINT32_MAX - 1)

/* The id to enter stage name[0:len] (UTF-8, len > 0) under in the active
 * session, interning the name only when it can still become a path:
 * names already in the process-wide table (ap_intern) keep their id; a
 * new one is added while the session's table of paths has room and the
 * session has added fewer than config.max_stages names, so that the
 * table, never freed, grows by at most max_stages names a session;
 * otherwise *id is AP_NAME_OVER and nothing is kept. A caller may cache
 * an interned id for good, never AP_NAME_OVER (a later session may have
 * room). AP_IGNORED for a name not held when no session is active
 * (nothing interned), AP_ERR_INVALID for an empty name, AP_ERR_NOMEM
 * (nothing kept). Same threading contract as ap_enter. */
ap_status ap_stage_name_id(const char *name, size_t len, uint32_t *id);

/* The deepest a path may be (a top-level stage has depth 0): what the
 * report reader accepts (aquaprof.limits.MAX_DEPTH), so that no run writes
 * a file its own reader refuses. An entry deeper folds into its parent's
 * AP_TOO_DEEP_NAME path, at this depth; that path's children fold into
 * it. */
#define AP_MAX_DEPTH 4096u
#define AP_TOO_DEEP_NAME "(over max depth)"

/* A span's tag names its thread, its thread-local stage node and its span
 * slot (0 when the span was dropped) in 64 bits, so that work recorded
 * elsewhere (on the GPU) can be traced back to it after the run with
 * ap_report_resolve_tag. 0 is never a tag. Threads past 16383 and nodes
 * past 262143 get tag 0: their work counts as outside any stage. Records
 * of threads past 16383 are the ones a new thread may take over once
 * their thread ended (session_internal.h, AP_KEPT_THREADS). */
#define AP_TAG_THREAD_BITS 14
#define AP_TAG_NODE_BITS 18

extern _Atomic(ap_session *) ap_current_session;

/* The one flag the hot path tests when no profiler runs. */
static inline int
ap_active(void)
{
    return atomic_load_explicit(&ap_current_session, memory_order_relaxed)
           != NULL;
}

/* Starts and activates a session. AP_ERR_ACTIVE if one is active,
 * AP_ERR_INVALID for a bad config, AP_ERR_NOMEM, AP_ERR_SYSTEM when the
 * memory sampler cannot start. */
ap_status ap_session_start(const ap_config *cfg, ap_session **out);

/* Opens stage `name` on the calling thread's current stack. owner
 * identifies the caller's object so that ap_exit can match it. AP_IGNORED
 * when no session is active; AP_ERR_NOMEM when it could not be recorded
 * (counted in the report's `lost`, never fatal). */
ap_status ap_enter(uint32_t name, int64_t items, const void *owner);

/* Closes owner's stage on the calling thread. Stages opened inside it and
 * still open are closed with it, flagged AP_SPAN_UNCLOSED and counted:
 * AP_MISNESTED. AP_IGNORED when owner has no open stage on this thread in
 * the active session (entered while off, or before this session). */
ap_status ap_exit(const void *owner, int raised);

/* Execution contexts. A thread may run several interleaved contexts (the
 * tasks of an asyncio event loop), each needing its own stage stack. The
 * caller names the context current at each edge by a key that changes
 * whenever the thread switches context (CPython's context version);
 * while the key stays the thread's current one, ap_enter_in/ap_exit_in
 * cost what ap_enter/ap_exit do. Otherwise they answer AP_NEED_STACK and
 * the caller chooses the context's stack (ap_stack_use), opening one the
 * first time a context records (ap_stack_open), and tries again. A call
 * on a suspendable stack whose exit comes under another key than its
 * entry's was suspended: flagged AP_SPAN_SUSPENDED, its CPU time (the
 * thread's, which ran other contexts meanwhile) left out. */
typedef struct ap_stack ap_stack;

#define AP_NO_KEY UINT64_MAX

ap_status ap_enter_in(uint64_t key, uint32_t name, int64_t items,
                      const void *owner);
ap_status ap_exit_in(uint64_t key, const void *owner, int raised);

/* A new stack on the calling thread whose outermost stages nest under the
 * innermost stage open on `under` now (under NULL, or of another thread:
 * at the top level). suspendable: its context may be left while its
 * stages are open (an asyncio task's, entered at each step), so a key
 * change under an open stage means it was suspended; otherwise key
 * changes come from contexts run inside its stages, whose work is
 * theirs. AP_IGNORED when no session is active. Stacks live as long as
 * their session. */
ap_status ap_stack_open(ap_stack *under, int suspendable, ap_stack **out);

/* Makes k (NULL: the thread's own) the calling thread's current stack,
 * under key. */
void ap_stack_use(uint64_t key, ap_stack *k);

/* k's context is gone: its stack may be reused once empty. Ignored unless
 * the active session is the one of generation gen, so a stack of a
 * session already stopped or freed is never touched. */
void ap_stack_release(uint64_t gen, ap_stack *k);

/* The active session's generation (0: none), and the calling thread's
 * index in it (-1: none yet): what a stack's owner keeps to tell whether
 * the stack is still usable on this thread. */
uint64_t ap_session_gen(void);
int64_t ap_thread_index_now(void);

/* Deactivates s and closes stages still open, flagged AP_SPAN_UNCLOSED,
 * and AP_SPAN_SUSPENDED with no CPU time where their context was left
 * since they were entered (a task parked at an await). key: the calling
 * thread's context key now (AP_NO_KEY: that of its last stage edge).
 * AP_IGNORED if already stopped, AP_ERR_FORKED in a forked child. */
ap_status ap_session_stop(ap_session *s, uint64_t key);

/* Frees s. In a forked child, discards the parent's data. */
void ap_session_free(ap_session *s);

int ap_session_is_foreign(const ap_session *s);

/* Bytes s holds, as allocated, for its threads' records (stacks, trees,
 * histograms, span buffers) and its table of paths: what the memory
 * bounds speak of, for tests and benchmarks. Not the sampler's nor the
 * report's. Same threading contract as ap_session_snapshot. */
int64_t ap_session_footprint(ap_session *s);

typedef struct {
    uint32_t name;     /* interned name id */
    int32_t parent;    /* index of the parent path, -1 for top level */
    uint32_t depth;    /* 0 for top level */
    ap_stats stats;
} ap_report_stage;

typedef struct {
    uint32_t index;
    int64_t native_id;
    int64_t spans;     /* kept in the report */
    int64_t recorded;  /* recorded: more than kept when spans were shed */
    int64_t dropped;
    int64_t cpu_reads; /* real thread CPU clock readings */
    uint32_t *stage_of_node; /* thread-local node -> report stage, owned;
                              * node 0, the root, maps to no stage */
    uint32_t nnodes;
    int64_t first_span;      /* its spans' offset in the report's spans */
    int64_t folded;          /* > 0: not a thread, but the sum of this many
                              * ended threads whose index a new thread took
                              * (AP_KEPT_THREADS) */
    uint64_t serial;         /* tells the threads that held one index apart
                              * (0: the fold) */
    int ended;               /* its thread had ended */
} ap_report_thread;

typedef struct {
    int64_t start_ns, stop_ns; /* CLOCK_MONOTONIC */
    const char *clock;     /* tick source: "tsc" or "monotonic" */
    int64_t pid;
    ap_config config;
    int64_t dropped;       /* spans over max_spans: aggregates still count */
    int64_t unclosed;      /* stages closed by stop() or their thread's end */
    int64_t lost;          /* calls not recorded in full for want of
                            * memory: entries, or histogram samples filed
                            * in the nearest bucket held */
    int64_t overflowed;    /* entries folded past config.max_stages */
    int64_t too_deep;      /* entries folded past AP_MAX_DEPTH */
    int64_t shed;          /* spans recorded but left out of the report
                            * for want of memory: aggregates count them */
    ap_report_stage *stages;
    uint32_t nstages;
    ap_report_thread *threads;
    uint32_t nthreads;
    ap_span *spans;        /* owned; a caller may take it, leaving NULL */
    int64_t nspans;
    ap_rss_sample *memory; /* host RSS over time (memory on), owned */
    uint32_t nmemory;
} ap_report;

/* The merged report of a stopped session, built once: it takes the
 * session's aggregates and spans, and a second call gives AP_ERR_INVALID.
 * Needs no memory but the span array's: when that cannot be had, as many
 * spans as fit are kept and the rest counted in `shed`. AP_ERR_RUNNING
 * before stop, AP_ERR_FORKED in a forked child. */
ap_status ap_session_report(ap_session *s, ap_report **out);

void ap_report_free(ap_report *r);

/* The figures of a running session so far, as a report: stage aggregates
 * of the calls closed until now, no memory log but the current RSS, and as
 * spans (parent -1) the last config.window calls closed of each stage on
 * each thread still running followed by the calls open now, flagged
 * AP_SPAN_UNCLOSED and ending now, with the CPU time of the caller's own
 * open calls only, and as ap_session_stop flags them, under the caller's
 * context key.
 * Same threading contract as ap_session_stop: other threads must not be
 * inside ap_enter/ap_exit meanwhile. AP_ERR_INVALID when the session is
 * stopped, AP_ERR_FORKED, AP_ERR_NOMEM. */
ap_status ap_session_snapshot(ap_session *s, uint64_t key, ap_report **out);


/* The report stage and span index of a tag given out during the run: AP_OK
 * with *span -1 when the span itself was dropped or shed; AP_ERR_INVALID
 * for a tag that names no thread or node of this report (0 among them). */
ap_status ap_report_resolve_tag(const ap_report *r, uint64_t tag,
                                uint32_t *stage, int64_t *span);

#endif
