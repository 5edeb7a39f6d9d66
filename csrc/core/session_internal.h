/* Internals shared by session.c (recording), session_thread.c (thread
 * records: registration, exit, freeing) and session_report.c (reports).
 * Not part of the core's interface.
 *
 * Locks, always taken in this order: ap_link_lock (process-wide: which
 * thread record a thread's exit hook merges), then a session's lock (its
 * thread lists, its paths, the aggregates of exited threads), then the
 * sampler's. The hot path takes none of them; a thread takes its
 * session's lock only to record a path it has not recorded before. */
#ifndef AP_SESSION_INTERNAL_H
#define AP_SESSION_INTERNAL_H

#include <pthread.h>

#include "clock.h"
#include "path_map.h"
#include "rss.h"
#include "session.h"

#define CHUNK_BITS 12
#define CHUNK (1 << CHUNK_BITS)   /* spans per buffer chunk */
#define ROOT_NODE 0               /* per-thread tree root, not a stage */
#define NO_PATH UINT32_MAX        /* the root node's path */

/* Rare paths out of the hot functions, so that they stay small. */
#define AP_CORE_COLD __attribute__((noinline, cold))

typedef struct {
    uint32_t node;
    int32_t span;          /* local span index, -1 when dropped */
    const void *owner;
    int64_t t0;            /* ticks */
    int64_t cpu0;
    int64_t child_ns;      /* wall time of closed children */
    int64_t items;
    int64_t rss0;
    uint64_t rss_seq0;
    ap_cpu_mark proc0;     /* the memory sampler's process CPU at entry */
    uint64_t key0;         /* the context key at entry: a call whose exit
                            * comes under another key was suspended */
} ap_frame;

/* The stage stack of one execution context on one thread: a thread's own
 * code has one, each asyncio task running on it another, so that tasks
 * interleaved at their awaits never nest into each other. */
struct ap_stack {
    struct ap_stack *next;       /* in the thread's list of all stacks */
    struct ap_stack *next_spare; /* in the thread's reusable ones */
    struct ap_thread *thread;
    ap_frame *frames;
    uint32_t depth, cap;
    uint32_t base_node;          /* node its outermost stages nest under */
    int32_t base_span;           /* their parent span, -1 for none */
    int released;                /* its context is gone */
    int suspendable;             /* its context can be left while its
                                  * stages are open (an asyncio task) */
};

/* Whether frame f of stack k was left by its context since it was
 * entered (an await, a greenlet's switch), key being the context key of
 * k's thread now: then its CPU time is the thread's, which ran other
 * contexts meanwhile, not the call's. Every frame of a stack other than
 * the thread's current one was entered under an older key. */
static inline int
ap_frame_left(const ap_stack *k, const ap_frame *f, uint64_t key)
{
    return k->suspendable && f->key0 != key;
}

/* flags, with AP_SPAN_SUSPENDED where f was left (ap_frame_left). */
static inline uint32_t
ap_open_flags(const ap_stack *k, const ap_frame *f, uint64_t key,
              uint32_t flags)
{
    return flags | (ap_frame_left(k, f, key) ? AP_SPAN_SUSPENDED : 0);
}

typedef struct {
    uint32_t name;
    uint32_t parent;
    ap_stats stats;
    ap_span *recent;       /* ring of the last config.window calls, or NULL */
    uint32_t recent_at;    /* next slot to write */
    uint32_t nrecent;      /* slots filled, up to config.window */
} ap_node;

typedef struct {
    ap_span *calls;        /* oldest first; NULL before any */
    uint32_t n;
} ap_recent;

typedef struct ap_thread {
    /* what a stage edge touches first, in the order it touches it */
    struct ap_thread *next;      /* the session's live threads */
    uint32_t index;
    _Atomic uint32_t open;       /* stages open on all its stacks */
    _Atomic uint32_t entries;    /* stages entered: the memory sampler's
                                  * cue that the thread is active */
    int64_t native_id;
    uint64_t pthread;      /* pthread_self(): how a sampler names it */
    ap_stack *cur;         /* the current context's stack */
    uint64_t cur_key;      /* its key (AP_NO_KEY: none chosen yet) */
    ap_stack *stacks;      /* all of them, the thread's own first made */
    ap_stack *home;        /* the thread's own: ap_enter's */
    ap_stack *spare;       /* released and empty: reused by new contexts */
    ap_node *nodes;
    uint32_t nnodes, nodes_cap;
    ap_path_map children;  /* (parent node, name) -> node */
    ap_span **chunks;
    uint32_t nchunks, chunks_cap;
    int64_t nspans, span_cap;
    int exhausted;
    int64_t dropped;
    int64_t lost;
    int64_t cpu_last;      /* last real thread CPU reading, ns */
    int64_t cpu_wall;      /* ticks when it was read */
    int64_t cpu_reads;     /* real readings taken: overhead compensation */
    uint32_t window;       /* the session's config.window */
    /* then what new paths and the thread's end need */
    uint32_t *paths;             /* node -> session path; stage_of_node */
    struct ap_thread *next_all;  /* all its threads, newest first */
    ap_session *session;
    /* The recording thread's link to this record, which its exit hook
     * follows; NULL once unlinked. ap_link_lock. */
    struct ap_thread **owner;
    int retired;                 /* its thread exited; merged, trimmed */
    int last_chunk_exact;  /* the last chunk was trimmed to its spans */
    int64_t folded;        /* the fold record: ended threads it sums */
    uint64_t serial;       /* which record of the session's it is, from 1;
                            * an index taken over gets a new one */
    int vacant;            /* in s->vacant */
} ap_thread;

/* The ended threads kept whole, by index: past them (those a tag can
 * name), an ended thread that kept no span gives its index to the next
 * new thread (session_thread.c), so that a service starting a thread a
 * request holds a bounded number of records. */
#define AP_KEPT_THREADS (1u << AP_TAG_THREAD_BITS)

struct ap_session {
    uint64_t gen;
    int64_t pid;
    ap_config config;
    ap_clock_anchor start, stop;
    int64_t cpu_resolution_ticks;
    int stopped;
    _Atomic int64_t reserved;     /* spans granted to threads */
    _Atomic int64_t lost;         /* entries of threads left unregistered */
    pthread_mutex_t lock;         /* everything below but rss */
    int64_t unclosed;
    ap_thread *threads;           /* live: their thread may still record */
    ap_thread *all;               /* every record, retired ones too, by
                                   * index from the highest down */
    uint32_t nthreads;
    ap_thread *vacant;            /* retired records a new thread may take
                                   * the place of, linked by next */
    ap_thread *fold;              /* sums the records taken over; made at
                                   * the first vacancy */
    uint64_t serials;             /* records made, and taken over */
    /* Every distinct path recorded on any thread, parents first: the
     * report's stages. Their stats hold what exited threads recorded. */
    ap_report_stage *paths;
    uint32_t npaths, paths_cap;
    ap_path_map path_ids;         /* (parent path + 1, name) -> path */
    /* With config.window: by path, the latest calls of threads that
     * exited (window at most, by end time, stage holding the path), so
     * that a snapshot's rolling figures still see them. */
    ap_recent *ended_recent;
    uint32_t ended_recent_cap;
    uint32_t overflow_name;
    uint32_t too_deep_name;
    int64_t overflowed;           /* entries folded past max_stages */
    uint32_t names_added;         /* to the process-wide table, by
                                   * ap_stage_name_id: at most max_stages */
    int64_t too_deep;             /* entries folded past AP_MAX_DEPTH */
    uint64_t entries_seen;        /* the threads' entries at the memory
                                   * sampler's last look */
    /* Made at start (its threads array grown as threads register) and
     * handed out by ap_session_report, so that building it needs no
     * memory but the span array's, which may shrink. */
    ap_report *report;
    uint32_t report_threads_cap;
    int reported;                 /* the report took paths and spans */
    ap_rss rss;
};

extern pthread_mutex_t ap_link_lock;

/* The calling thread's index in s, -1 when it has recorded nothing. */
int64_t ap_session_thread_index(ap_session *s);

/* The context key now of thread t, asked on the thread of index self
 * (ap_session_thread_index) whose key now is key (AP_NO_KEY: not known):
 * another thread's is the key of its last stage edge, which is older
 * than the key of any stack it left since. */
static inline uint64_t
ap_thread_key_now(const ap_thread *t, int64_t self, uint64_t key)
{
    return (int64_t)t->index == self && key != AP_NO_KEY ? key : t->cur_key;
}

/* Frame f of t's stack k, open at tick now, as a span ending then
 * (parent -1), as ap_session_stop would close it: flagged unclosed, and
 * suspended with no CPU time where its context left it since (key: t's
 * key now); cpu_now: t's CPU clock now, < 0 for another thread's, which
 * is not ours to read (no CPU time). */
static inline ap_span
ap_open_span(const ap_thread *t, const ap_stack *k, const ap_frame *f,
             int64_t now, int64_t cpu_now, uint64_t key)
{
    uint32_t flags = ap_open_flags(k, f, key, AP_SPAN_UNCLOSED);
    int64_t wall = ap_ticks_to_ns(now - f->t0);
    wall = wall < 0 ? 0 : wall;
    int64_t cpu = cpu_now >= 0 && !(flags & AP_SPAN_SUSPENDED)
                      ? cpu_now - f->cpu0 : 0;
    cpu = cpu < 0 ? 0 : (cpu > wall ? wall : cpu);
    return (ap_span){f->node, t->index, -1, flags, f->t0, now, cpu,
                     f->items};
}

/* The calling thread records no more through the record it had: its exit
 * hook retired it, and another thread may take it over. */
void ap_session_thread_forget(void);

/* session_thread.c: a record for the calling thread in s, linked so that
 * its exit merges it into s. AP_ERR_NOMEM leaves nothing behind. */
ap_status ap_thread_register(ap_session *s, ap_thread **out);

/* A context's stack of retired record t was let go: t may be taken over
 * now. Under s->lock. */
void ap_thread_released_locked(ap_session *s, ap_thread *t);

/* Adds t's root node (session.c). */
ap_status ap_thread_add_root(ap_thread *t);

/* Unlinks every record of s from its thread and frees them all. */
void ap_thread_free_all(ap_session *s);

/* Closes the innermost frame of t's stack k at tick w (session.c). */
void ap_close_frame(ap_session *s, ap_thread *t, ap_stack *k, int64_t w,
                    int64_t cpu1, uint32_t flags);

/* A stack of t, reused or new, nesting under (node, span); linked into
 * t->stacks (session.c). */
ap_status ap_stack_new(ap_thread *t, uint32_t node, int32_t span,
                       ap_stack **out);

/* Frees the frames of t's stacks, all closed, keeping the stacks
 * themselves: a context's handle may still name one (its thread exited).
 * ap_stacks_free frees them all, with the session. */
void ap_stacks_trim(ap_thread *t);
void ap_stacks_free(ap_thread *t);

/* Gives a span chunk back to the pool kept across sessions. */
void ap_pool_give(ap_span *chunk);

/* Frees the pool's chunks, when memory is short. */
void ap_pool_trim(void);

/* Frees one record whatever its state; it must be unlinked. */
void ap_thread_free(ap_thread *t);

/* session_paths.c: the path an entry of `name` under path `parent`
 * (NO_PATH: the top level) is recorded in, added when new. Past
 * config.max_stages paths, or for name AP_NAME_OVER, the entry folds
 * into the parent's overflow path and is counted in s->overflowed, and
 * past AP_MAX_DEPTH into the parent's too-deep path, counted in
 * s->too_deep; *filed is the name the thread files it under (name, or
 * the folding path's). AP_ERR_NOMEM when a new path could not be added.
 * Under s->lock. */
ap_status ap_path_resolve_locked(ap_session *s, uint32_t parent,
                                 uint32_t name, uint32_t *path,
                                 uint32_t *filed);

/* Frees every path's aggregates and the paths table. */
void ap_paths_free(ap_session *s);

/* Folds into st the host memory of frame f closing now (tick w), when
 * RSS reads rss after seq samples: the peak it saw while open, how far
 * that rose above its entry, and its change; and what the process
 * computed meanwhile. */
static inline void
frame_memory(ap_session *s, const ap_frame *f, uint64_t seq, int64_t rss,
             int64_t w, ap_stats *st)
{
    /* held at the bound: calls open at once each add the whole
     * process's time, which a week of a thousand open a CPU could pass */
    st->proc_cpu_ns = ap_add_saturated(
        st->proc_cpu_ns, ap_rss_process_cpu(&s->rss, &f->proc0, f->t0, w));
    int64_t peak = rss > f->rss0 ? rss : f->rss0;
    if (seq != f->rss_seq0) {
        int64_t seen = ap_rss_peak_since(&s->rss, f->rss_seq0);
        peak = seen > peak ? seen : peak;
    }
    st->mem_peak = peak > st->mem_peak ? peak : st->mem_peak;
    st->mem_rise = peak - f->rss0 > st->mem_rise ? peak - f->rss0
                                                 : st->mem_rise;
    st->mem_delta += rss - f->rss0;
}

static inline ap_span *
span_at(ap_thread *t, int64_t i)
{
    return &t->chunks[i >> CHUNK_BITS][i & (CHUNK - 1)];
}

/* Shared by the builders of reports (session_report.c, session_since.c),
 * defined in session_report.c. */

/* A tick of s on CLOCK_MONOTONIC, anchored at s's start and at end. */
int64_t ticks_to_monotonic(const ap_session *s, const ap_clock_anchor *end,
                           int64_t t);

/* A recorded span (ticks, thread-local node; with no map, the stage's
 * path already) as a report's span. */
ap_span report_span(const ap_session *s, const ap_clock_anchor *end,
                    const uint32_t *map, ap_span sp);

/* The head of a snapshot of s at now: run figures, threads (but their
 * spans) with their node -> stage tables, and the stages merged from the
 * paths and the live threads' aggregates. AP_ERR_NOMEM leaves what it
 * made in r, for ap_report_free. Under s->lock. */
ap_status ap_snapshot_base_locked(ap_session *s, const ap_clock_anchor *now,
                                  ap_report *r);

#endif
