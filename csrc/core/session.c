#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "intern.h"
#include "rss.h"

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
} ap_frame;

typedef struct {
    uint32_t name;
    uint32_t parent;
    ap_stats stats;
} ap_node;

typedef struct ap_thread {
    struct ap_thread *next;
    uint32_t index;
    int64_t native_id;
    ap_frame *stack;
    uint32_t depth, stack_cap;
    ap_node *nodes;
    uint32_t nnodes, nodes_cap;
    uint64_t *keys;        /* (parent << 32 | name) + 1, 0 = empty */
    uint32_t *vals;        /* node index */
    uint32_t keys_mask;
    ap_span **chunks;
    uint32_t nchunks, chunks_cap;
    int64_t nspans, span_cap;
    int exhausted;
    int64_t dropped;
    int64_t lost;
    int64_t cpu_last;      /* last real thread CPU reading, ns */
    int64_t cpu_wall;      /* ticks when it was read */
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

_Atomic(ap_session *) ap_current_session;

/* Full span chunks kept from finished sessions: fresh memory costs a page
 * fault per 85 spans (about 20 ns a span in a VM), reused memory none. */
#define POOL_MAX 85       /* chunks, about 16 MiB */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static ap_span *pool[POOL_MAX]; /* protected by pool_lock */
static int pool_len;            /* protected by pool_lock */

static _Atomic uint64_t next_gen = 1;
static _Thread_local ap_thread *tls_thread;
static _Thread_local uint64_t tls_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* ---------------------------------------------------------------- fork */

static void
fork_child(void)
{
    /* The child has a copy of the parent's data and none of its threads:
     * stop recording into the copy; its owner discards it. A lock another
     * thread held at the fork stays held in the child: start afresh. */
    atomic_store(&ap_current_session, NULL);
    pthread_mutex_init(&pool_lock, NULL);
    ap_intern_after_fork();
}

static void
install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

/* ------------------------------------------------------------- threads */

static ap_status
grow_keys(ap_thread *t)
{
    uint32_t cap = t->keys ? (t->keys_mask + 1) * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof(*keys));
    uint32_t *vals = malloc(cap * sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return AP_ERR_NOMEM;
    }
    for (uint32_t n = 1; n < t->nnodes; n++) {
        uint64_t key = ((uint64_t)t->nodes[n].parent << 32 | t->nodes[n].name)
                       + 1;
        uint32_t i = (uint32_t)(key * 0x9E3779B97F4A7C15ULL >> 32) & (cap - 1);
        while (keys[i]) {
            i = (i + 1) & (cap - 1);
        }
        keys[i] = key;
        vals[i] = n;
    }
    free(t->keys);
    free(t->vals);
    t->keys = keys;
    t->vals = vals;
    t->keys_mask = cap - 1;
    return AP_OK;
}

static ap_status
add_node(ap_thread *t, uint32_t parent, uint32_t name)
{
    if (t->nnodes == t->nodes_cap) {
        uint32_t cap = t->nodes_cap ? t->nodes_cap * 2 : 8;
        ap_node *nodes = realloc(t->nodes, cap * sizeof(*nodes));
        if (!nodes) {
            return AP_ERR_NOMEM;
        }
        t->nodes = nodes;
        t->nodes_cap = cap;
    }
    ap_node *n = &t->nodes[t->nnodes++];
    n->name = name;
    n->parent = parent;
    ap_stats_init(&n->stats);
    return AP_OK;
}

/* Finds or creates the child of parent named name. */
static ap_status
child_node(ap_thread *t, uint32_t parent, uint32_t name, uint32_t *node)
{
    uint64_t key = ((uint64_t)parent << 32 | name) + 1;
    uint32_t i = (uint32_t)(key * 0x9E3779B97F4A7C15ULL >> 32) & t->keys_mask;
    for (; t->keys[i]; i = (i + 1) & t->keys_mask) {
        if (t->keys[i] == key) {
            *node = t->vals[i];
            return AP_OK;
        }
    }
    if ((t->nnodes + 1) * 2 > t->keys_mask + 1) {
        if (grow_keys(t) != AP_OK) {
            return AP_ERR_NOMEM;
        }
        return child_node(t, parent, name, node);
    }
    if (add_node(t, parent, name) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    t->keys[i] = key;
    t->vals[i] = *node = t->nnodes - 1;
    return AP_OK;
}

static ap_span *
pool_take(void)
{
    ap_span *chunk = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_len) {
        chunk = pool[--pool_len];
    }
    pthread_mutex_unlock(&pool_lock);
    return chunk ? chunk : malloc(CHUNK * sizeof(ap_span));
}

static void
pool_give(ap_span *chunk)
{
    pthread_mutex_lock(&pool_lock);
    if (pool_len < POOL_MAX) {
        pool[pool_len++] = chunk;
        chunk = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(chunk);
}

static void
free_thread(ap_thread *t)
{
    for (uint32_t c = 0; c < t->nchunks; c++) {
        pool_give(t->chunks[c]);
    }
    free(t->chunks);
    free(t->stack);
    free(t->nodes);
    free(t->keys);
    free(t->vals);
    free(t);
}

static ap_status
register_thread(ap_session *s, ap_thread **out)
{
    ap_thread *t = calloc(1, sizeof(*t));
    if (!t) {
        return AP_ERR_NOMEM;
    }
    t->stack_cap = 32;
    t->stack = malloc(t->stack_cap * sizeof(*t->stack));
    if (!t->stack || add_node(t, ROOT_NODE, 0) != AP_OK ||
        grow_keys(t) != AP_OK) {
        free_thread(t);
        return AP_ERR_NOMEM;
    }
    t->native_id = (int64_t)syscall(SYS_gettid);
    t->cpu_wall = INT64_MIN / 2;
    pthread_mutex_lock(&s->threads_lock);
    t->index = s->nthreads++;
    t->next = s->threads;
    s->threads = t;
    pthread_mutex_unlock(&s->threads_lock);
    tls_thread = t;
    tls_gen = s->gen;
    *out = t;
    return AP_OK;
}

/* ---------------------------------------------------------------- spans */

static int
grant_chunk(ap_session *s, ap_thread *t)
{
    int64_t got = atomic_fetch_add(&s->reserved, CHUNK);
    if (got >= s->config.max_spans) {
        t->exhausted = 1;
        return 0;
    }
    int64_t n = s->config.max_spans - got < CHUNK ? s->config.max_spans - got
                                                  : CHUNK;
    /* every chunk is full-size, so any may go back to the pool */
    if (t->nchunks == t->chunks_cap) {
        uint32_t cap = t->chunks_cap ? t->chunks_cap * 2 : 16;
        ap_span **chunks = realloc(t->chunks, cap * sizeof(*chunks));
        if (!chunks) {
            t->exhausted = 1;
            return 0;
        }
        t->chunks = chunks;
        t->chunks_cap = cap;
    }
    ap_span *chunk = pool_take();
    if (!chunk) {
        t->exhausted = 1;
        return 0;
    }
    t->chunks[t->nchunks++] = chunk;
    t->span_cap += n;
    return 1;
}

static inline ap_span *
span_at(ap_thread *t, int64_t i)
{
    return &t->chunks[i >> CHUNK_BITS][i & (CHUNK - 1)];
}

/* ---------------------------------------------------------------- public */

static int
config_ok(const ap_config *c)
{
    return c->max_spans >= 0 && c->max_spans <= INT32_MAX &&
           c->cpu_resolution_ns >= 0 &&
           (!c->memory || c->memory_interval_ns > 0);
}

ap_status
ap_session_start(const ap_config *cfg, ap_session **out)
{
    if (!config_ok(cfg)) {
        return AP_ERR_INVALID;
    }
    pthread_once(&fork_once, install_fork_handler);
    if (atomic_load(&ap_current_session)) {
        return AP_ERR_ACTIVE;
    }
    ap_session *s = calloc(1, sizeof(*s));
    if (!s) {
        return AP_ERR_NOMEM;
    }
    s->config = *cfg;
    s->gen = atomic_fetch_add(&next_gen, 1);
    s->pid = (int64_t)getpid();
    if (pthread_mutex_init(&s->threads_lock, NULL) != 0) {
        free(s);
        return AP_ERR_SYSTEM;
    }
    if (cfg->memory) {
        ap_status st = ap_rss_start(&s->rss, cfg->memory_interval_ns);
        if (st != AP_OK) {
            pthread_mutex_destroy(&s->threads_lock);
            free(s);
            return st;
        }
    }
    ap_clock_init();
    s->cpu_resolution_ticks =
        (int64_t)((double)cfg->cpu_resolution_ns / ap_clock_ns_per_tick);
    s->start = ap_clock_anchor_now();
    ap_session *expected = NULL;
    if (!atomic_compare_exchange_strong(&ap_current_session, &expected, s)) {
        ap_rss_stop(&s->rss);
        pthread_mutex_destroy(&s->threads_lock);
        free(s);
        return AP_ERR_ACTIVE;
    }
    *out = s;
    return AP_OK;
}

static inline ap_thread *
current_thread(ap_session *s)
{
    return tls_gen == s->gen ? tls_thread : NULL;
}

ap_status
ap_enter(uint32_t name, int64_t items, const void *owner)
{
    ap_session *s = atomic_load_explicit(&ap_current_session,
                                         memory_order_acquire);
    if (!s) {
        return AP_IGNORED;
    }
    ap_thread *t = current_thread(s);
    if (!t && register_thread(s, &t) != AP_OK) {
        return AP_ERR_NOMEM;  /* uncounted: no thread state to count in */
    }
    if (t->depth == t->stack_cap) {
        ap_frame *stack = realloc(t->stack, 2 * t->stack_cap * sizeof(*stack));
        if (!stack) {
            t->lost++;
            return AP_ERR_NOMEM;
        }
        t->stack = stack;
        t->stack_cap *= 2;
    }
    uint32_t parent = t->depth ? t->stack[t->depth - 1].node : ROOT_NODE;
    ap_frame *f = &t->stack[t->depth];
    if (child_node(t, parent, name, &f->node) != AP_OK) {
        t->lost++;
        return AP_ERR_NOMEM;
    }
    f->owner = owner;
    f->items = items;
    f->child_ns = 0;
    if (t->nspans < t->span_cap || (!t->exhausted && grant_chunk(s, t))) {
        f->span = (int32_t)t->nspans++;
    } else {
        f->span = -1;
        t->dropped++;
    }
    if (s->config.memory) {
        f->rss_seq0 = atomic_load_explicit(&s->rss.seq, memory_order_acquire);
        f->rss0 = atomic_load_explicit(&s->rss.current, memory_order_relaxed);
    }
    int64_t w = ap_ticks();
    if (w - t->cpu_wall >= s->cpu_resolution_ticks) {
        /* the system call goes before the start time, not inside the span */
        t->cpu_last = ap_thread_cpu_ns();
        w = ap_ticks();
        t->cpu_wall = w;
        f->cpu0 = t->cpu_last;
    } else {
        f->cpu0 = t->cpu_last + ap_ticks_to_ns(w - t->cpu_wall);
    }
    f->t0 = w;
    if (f->span >= 0) {
        int32_t up = t->depth ? t->stack[t->depth - 1].span : -1;
        *span_at(t, f->span) = (ap_span){
            f->node, t->index, up, 0, w, w, 0, items,
        };
    }
    t->depth++;
    return AP_OK;
}

/* Records the innermost frame of t as closed at tick w. */
static void
close_frame(ap_session *s, ap_thread *t, int64_t w, int64_t cpu1,
            uint32_t flags)
{
    ap_frame *f = &t->stack[t->depth - 1];
    int64_t wall = ap_ticks_to_ns(w - f->t0);
    wall = wall < 0 ? 0 : wall;
    int64_t cpu = cpu1 - f->cpu0;
    cpu = cpu < 0 ? 0 : (cpu > wall ? wall : cpu);
    ap_stats *st = &t->nodes[f->node].stats;
    ap_stats_add(st, wall, wall - f->child_ns, cpu, f->items);
    st->raised += (flags & AP_SPAN_RAISED) != 0;
    st->unclosed += (flags & AP_SPAN_UNCLOSED) != 0;
    if (s->config.memory) {
        uint64_t seq = atomic_load_explicit(&s->rss.seq, memory_order_acquire);
        int64_t rss = atomic_load_explicit(&s->rss.current,
                                           memory_order_relaxed);
        int64_t peak = rss > f->rss0 ? rss : f->rss0;
        if (seq != f->rss_seq0) {
            int64_t seen = ap_rss_peak_since(&s->rss, f->rss_seq0);
            peak = seen > peak ? seen : peak;
        }
        st->mem_peak = peak > st->mem_peak ? peak : st->mem_peak;
        st->mem_delta += rss - f->rss0;
    }
    if (f->span >= 0) {
        ap_span *sp = span_at(t, f->span);
        sp->end_ns = w;
        sp->cpu_ns = cpu;
        sp->flags = flags;
    }
    t->depth--;
    if (t->depth) {
        t->stack[t->depth - 1].child_ns += wall;
    }
}

ap_status
ap_exit(const void *owner, int raised)
{
    ap_session *s = atomic_load_explicit(&ap_current_session,
                                         memory_order_acquire);
    if (!s) {
        return AP_IGNORED;
    }
    ap_thread *t = current_thread(s);
    if (!t || t->depth == 0) {
        return AP_IGNORED;
    }
    int64_t w = ap_ticks();
    if (t->stack[t->depth - 1].owner != owner) {
        for (uint32_t d = t->depth - 1; d-- > 0;) {
            if (t->stack[d].owner == owner) {
                return AP_ERR_NOT_INNERMOST;
            }
        }
        return AP_IGNORED;
    }
    int64_t cpu;
    if (w - t->cpu_wall >= s->cpu_resolution_ticks) {
        cpu = t->cpu_last = ap_thread_cpu_ns();
        t->cpu_wall = w;
    } else {
        cpu = t->cpu_last + ap_ticks_to_ns(w - t->cpu_wall);
    }
    close_frame(s, t, w, cpu, raised ? AP_SPAN_RAISED : 0);
    return AP_OK;
}

int
ap_session_is_foreign(const ap_session *s)
{
    return s->pid != (int64_t)getpid();
}

ap_status
ap_session_stop(ap_session *s)
{
    if (ap_session_is_foreign(s)) {
        return AP_ERR_FORKED;
    }
    ap_session *expected = s;
    if (!atomic_compare_exchange_strong(&ap_current_session, &expected,
                                        NULL)) {
        return AP_IGNORED;
    }
    s->stop = ap_clock_anchor_now();
    ap_thread *self = current_thread(s);
    int64_t cpu_now = self ? ap_thread_cpu_ns() : 0;
    for (ap_thread *t = s->threads; t; t = t->next) {
        while (t->depth) {
            /* another thread's CPU clock is not ours to read: its open
             * stages get the CPU time they had when they entered */
            int64_t cpu = t == self ? cpu_now : t->stack[t->depth - 1].cpu0;
            close_frame(s, t, s->stop.ticks, cpu, AP_SPAN_UNCLOSED);
            s->unclosed++;
        }
    }
    ap_rss_stop(&s->rss);
    s->stopped = 1;
    return AP_OK;
}

void
ap_session_free(ap_session *s)
{
    if (!s) {
        return;
    }
    if (ap_session_is_foreign(s)) {
        ap_rss_forget(&s->rss);
    } else {
        ap_session *expected = s;
        atomic_compare_exchange_strong(&ap_current_session, &expected, NULL);
        ap_rss_stop(&s->rss);
    }
    ap_thread *t = s->threads;
    while (t) {
        ap_thread *next = t->next;
        free_thread(t);
        t = next;
    }
    pthread_mutex_destroy(&s->threads_lock);
    free(s);
}

/* --------------------------------------------------------------- report */

typedef struct {
    uint64_t *keys;        /* (parent + 1) << 32 | name, + 1; 0 = empty */
    uint32_t *vals;
    uint32_t mask;
} path_map;

static ap_status
report_add_stage(ap_report *r, path_map *m, uint32_t *cap, int32_t parent,
                 uint32_t name, uint32_t *out)
{
    uint64_t key = (((uint64_t)(uint32_t)(parent + 1) << 32) | name) + 1;
    uint32_t i = (uint32_t)(key * 0x9E3779B97F4A7C15ULL >> 32) & m->mask;
    for (; m->keys[i]; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *out = m->vals[i];
            return AP_OK;
        }
    }
    if (r->nstages == *cap) {
        uint32_t fresh_cap = *cap ? *cap * 2 : 16;
        ap_report_stage *fresh = realloc(r->stages,
                                         fresh_cap * sizeof(*fresh));
        if (!fresh) {
            return AP_ERR_NOMEM;
        }
        r->stages = fresh;
        *cap = fresh_cap;
    }
    ap_report_stage *st = &r->stages[r->nstages];
    st->name = name;
    st->parent = parent;
    st->depth = parent < 0 ? 0 : r->stages[parent].depth + 1;
    ap_stats_init(&st->stats);
    m->keys[i] = key;
    m->vals[i] = *out = r->nstages++;
    return AP_OK;
}

/* Merges every thread's tree into one table of paths; map[t][node] gives
 * the path id of a thread's node. */
static ap_status
merge_stages(const ap_session *s, ap_thread **threads, ap_report *r,
             uint32_t **maps)
{
    uint32_t total = 0;
    for (uint32_t k = 0; k < s->nthreads; k++) {
        total += threads[k]->nnodes;
    }
    uint32_t size = 64;
    while (size < 2 * total) {
        size *= 2;
    }
    path_map m = {calloc(size, sizeof(uint64_t)),
                  malloc(size * sizeof(uint32_t)), size - 1};
    uint32_t cap = 0;
    ap_status st = AP_ERR_NOMEM;
    if (!m.keys || !m.vals) {
        goto done;
    }
    for (uint32_t k = 0; k < s->nthreads; k++) {
        ap_thread *t = threads[k];
        /* parents are created before their children */
        for (uint32_t n = 1; n < t->nnodes; n++) {
            ap_node *node = &t->nodes[n];
            int32_t parent = node->parent == ROOT_NODE
                                 ? -1
                                 : (int32_t)maps[k][node->parent];
            if (report_add_stage(r, &m, &cap, parent, node->name,
                                 &maps[k][n]) != AP_OK) {
                goto done;
            }
            ap_stats_merge(&r->stages[maps[k][n]].stats, &node->stats);
        }
    }
    st = AP_OK;
done:
    free(m.keys);
    free(m.vals);
    return st;
}

/* Maps a tick of the session onto CLOCK_MONOTONIC ns, exactly at the two
 * anchors and linearly between them, so spans line up with other clocks
 * whatever the error of the process-wide calibration. */
static int64_t
ticks_to_monotonic(const ap_session *s, int64_t t)
{
    if (!ap_clock_tsc) {
        return t;
    }
    int64_t span_ticks = s->stop.ticks - s->start.ticks;
    if (span_ticks <= 0) {
        return s->start.ns;
    }
    __extension__ __int128 num = (__int128)(t - s->start.ticks) *
                                 (s->stop.ns - s->start.ns);
    return s->start.ns + (int64_t)(num / span_ticks);
}

static void
copy_spans(const ap_session *s, ap_thread *t, const uint32_t *map,
           ap_span *out, int64_t offset)
{
    for (int64_t i = 0; i < t->nspans; i++) {
        ap_span sp = *span_at(t, i);
        sp.stage = map[sp.stage];
        sp.start_ns = ticks_to_monotonic(s, sp.start_ns);
        sp.end_ns = ticks_to_monotonic(s, sp.end_ns);
        /* the anchors' scale differs from the calibration that clamped
         * cpu at exit by about 1e-6: keep cpu within the span as mapped */
        if (sp.cpu_ns > sp.end_ns - sp.start_ns) {
            sp.cpu_ns = sp.end_ns - sp.start_ns;
        }
        if (sp.parent >= 0) {
            sp.parent += (int32_t)offset;
        }
        out[offset + i] = sp;
    }
}

ap_status
ap_session_report(const ap_session *s, ap_report **out)
{
    if (ap_session_is_foreign(s)) {
        return AP_ERR_FORKED;
    }
    if (!s->stopped) {
        return AP_ERR_RUNNING;
    }
    ap_status st = AP_ERR_NOMEM;
    uint32_t n = s->nthreads;
    ap_thread **threads = calloc(n ? n : 1, sizeof(*threads));
    uint32_t **maps = calloc(n ? n : 1, sizeof(*maps));
    ap_report *r = calloc(1, sizeof(*r));
    if (!threads || !maps || !r) {
        goto error;
    }
    r->start_ns = ticks_to_monotonic(s, s->start.ticks);
    r->stop_ns = ticks_to_monotonic(s, s->stop.ticks);
    r->clock = ap_clock_name();
    r->pid = s->pid;
    r->config = s->config;
    r->unclosed = s->unclosed;
    r->nthreads = n;
    r->threads = calloc(n ? n : 1, sizeof(*r->threads));
    if (!r->threads) {
        goto error;
    }
    for (ap_thread *t = s->threads; t; t = t->next) {
        threads[t->index] = t;
        maps[t->index] = malloc(t->nnodes * sizeof(uint32_t));
        if (!maps[t->index]) {
            goto error;
        }
        r->threads[t->index] = (ap_report_thread){
            t->index, t->native_id, t->nspans, t->dropped,
        };
        r->nspans += t->nspans;
        r->dropped += t->dropped;
        r->lost += t->lost;
    }
    if (merge_stages(s, threads, r, maps) != AP_OK) {
        goto error;
    }
    r->spans = malloc((size_t)(r->nspans ? r->nspans : 1) * sizeof(ap_span));
    if (!r->spans) {
        goto error;
    }
    int64_t offset = 0;
    for (uint32_t k = 0; k < n; k++) {
        copy_spans(s, threads[k], maps[k], r->spans, offset);
        offset += threads[k]->nspans;
    }
    *out = r;
    r = NULL;
    st = AP_OK;
error:
    for (uint32_t k = 0; maps && k < n; k++) {
        free(maps[k]);
    }
    free(maps);
    free(threads);
    ap_report_free(r);
    return st;
}

void
ap_report_free(ap_report *r)
{
    if (!r) {
        return;
    }
    free(r->stages);
    free(r->threads);
    free(r->spans);
    free(r);
}
