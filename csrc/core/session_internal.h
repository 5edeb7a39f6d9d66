/* Internals shared by session.c (recording) and session_report.c
 * (merging into an ap_report). Not part of the core's interface. */
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

typedef struct {
    uint32_t name;
    uint32_t parent;
    ap_stats stats;
    ap_span *recent;       /* ring of the last config.window calls, or NULL */
    uint32_t recent_at;    /* next slot to write */
    uint32_t nrecent;      /* slots filled, up to config.window */
} ap_node;

typedef struct ap_thread {
    struct ap_thread *next;
    uint32_t index;
    int64_t native_id;
    ap_stack *stacks;      /* all of them, the thread's own first made */
    ap_stack *home;        /* the thread's own: ap_enter's */
    ap_stack *spare;       /* released and empty: reused by new contexts */
    ap_stack *cur;         /* the current context's */
    uint64_t cur_key;      /* its key (AP_NO_KEY: none chosen yet) */
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
} ap_thread;

struct ap_session {
    uint64_t gen;
    int64_t pid;
    ap_config config;
    ap_clock_anchor start, stop;
    int64_t cpu_resolution_ticks;
    int stopped;
    _Atomic int64_t reserved;     /* spans granted to threads */
    int64_t unclosed;
    pthread_mutex_t threads_lock; /* protects threads, nthreads */
    ap_thread *threads;
    uint32_t nthreads;
    ap_rss rss;
};

/* The calling thread's index in s, -1 when it has recorded nothing. */
int64_t ap_session_thread_index(ap_session *s);

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

/* A recorded span (ticks, thread-local node) as a report's span. */
ap_span report_span(const ap_session *s, const ap_clock_anchor *end,
                    const uint32_t *map, ap_span sp);

/* A report of s up to end, its threads and merged stages but no spans or
 * memory; *threads (by index, freed by the caller) lists s's threads.
 * AP_ERR_NOMEM, leaving nothing allocated. */
ap_status report_new(const ap_session *s, const ap_clock_anchor *end,
                     ap_thread ***threads, ap_report **out);

#endif
