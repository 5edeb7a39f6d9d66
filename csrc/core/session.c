#include "session_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "intern.h"
#include "rss.h"

_Atomic(ap_session *) ap_current_session;

/* Full span chunks kept from finished sessions and exited threads: fresh
 * memory costs a page fault per 85 spans, reused memory none. */
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
    pthread_mutex_init(&ap_link_lock, NULL);
    ap_intern_after_fork();
    ap_alloc_after_fork();
}

static void
install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

/* ------------------------------------------------------------- threads */

static ap_status
add_node(ap_thread *t, uint32_t parent, uint32_t name, uint32_t path)
{
    if (t->nnodes == t->nodes_cap) {
        uint32_t cap = t->nodes_cap ? t->nodes_cap * 2 : 8;
        ap_node *nodes = ap_realloc(t->nodes, cap * sizeof(*nodes));
        if (!nodes) {
            return AP_ERR_NOMEM;
        }
        t->nodes = nodes;
        uint32_t *paths = ap_realloc(t->paths, cap * sizeof(*paths));
        if (!paths) {
            return AP_ERR_NOMEM;    /* nodes stays larger: harmless */
        }
        t->paths = paths;
        t->nodes_cap = cap;
    }
    ap_node *n = &t->nodes[t->nnodes];
    *n = (ap_node){.name = name, .parent = parent};
    ap_stats_init(&n->stats);
    if (t->window && t->nnodes != ROOT_NODE) {
        n->recent = ap_malloc(t->window * sizeof(ap_span));
        if (!n->recent) {
            return AP_ERR_NOMEM;
        }
    }
    t->paths[t->nnodes] = path;
    t->nnodes++;
    return AP_OK;
}

ap_status
ap_thread_add_root(ap_thread *t)
{
    return add_node(t, ROOT_NODE, 0, NO_PATH);
}

/* A node new to t: the session's path for it first (folded past
 * max_stages), then t's node, filed under the name the session gave. */
static AP_CORE_COLD ap_status
new_child(ap_session *s, ap_thread *t, uint32_t parent, uint32_t name,
          uint32_t *node)
{
    uint32_t path, filed;
    pthread_mutex_lock(&s->lock);
    ap_status st = ap_path_resolve_locked(s, t->paths[parent], name, &path,
                                          &filed);
    pthread_mutex_unlock(&s->lock);
    if (st != AP_OK) {
        return st;
    }
    if (filed != name) {
        if (path == t->paths[parent]) {
            *node = parent;     /* inside an overflow path: itself */
            return AP_OK;
        }
        if (ap_path_map_find(&t->children, parent, filed, node)) {
            return AP_OK;
        }
    }
    /* the key's room first: a node left without its key would be made
     * again at the next entry */
    if (ap_path_map_reserve(&t->children) != AP_OK ||
        add_node(t, parent, filed, path) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    *node = t->nnodes - 1;
    ap_path_map_put(&t->children, parent, filed, *node);
    return AP_OK;
}

/* Finds or creates the child of parent named name. */
static inline ap_status
child_node(ap_session *s, ap_thread *t, uint32_t parent, uint32_t name,
           uint32_t *node)
{
    if (ap_path_map_find(&t->children, parent, name, node)) {
        return AP_OK;
    }
    return new_child(s, t, parent, name, node);
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
    return chunk ? chunk : ap_malloc(CHUNK * sizeof(ap_span));
}

void
ap_pool_give(ap_span *chunk)
{
    pthread_mutex_lock(&pool_lock);
    if (pool_len < POOL_MAX) {
        pool[pool_len++] = chunk;
        chunk = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(chunk);
}

void
ap_pool_trim(void)
{
    pthread_mutex_lock(&pool_lock);
    while (pool_len) {
        free(pool[--pool_len]);
    }
    pthread_mutex_unlock(&pool_lock);
}

/* ------------------------------------------------------------- stacks */

ap_status
ap_stack_new(ap_thread *t, uint32_t node, int32_t span, ap_stack **out)
{
    ap_stack *k = t->spare;
    if (k) {
        t->spare = k->next_spare;
    } else {
        k = ap_calloc(1, sizeof(*k));
        if (!k) {
            return AP_ERR_NOMEM;
        }
        k->cap = 8;
        k->frames = ap_malloc(k->cap * sizeof(*k->frames));
        if (!k->frames) {
            free(k);
            return AP_ERR_NOMEM;
        }
        k->thread = t;
        k->next = t->stacks;
        t->stacks = k;
    }
    k->next_spare = NULL;
    k->released = 0;
    k->base_node = node;
    k->base_span = span;
    k->suspendable = 0;
    *out = k;
    return AP_OK;
}

void
ap_stacks_trim(ap_thread *t)
{
    for (ap_stack *k = t->stacks; k; k = k->next) {
        free(k->frames);
        k->frames = NULL;
        k->depth = k->cap = 0;
    }
}

void
ap_stacks_free(ap_thread *t)
{
    ap_stack *k = t->stacks;
    while (k) {
        ap_stack *next = k->next;
        free(k->frames);
        free(k);
        k = next;
    }
    t->stacks = t->home = t->cur = t->spare = NULL;
}

/* ---------------------------------------------------------------- spans */

/* Room for up to CHUNK more spans from the session's max_spans; 0 when
 * there is none (t is then exhausted: it drops spans from now on). */
static int
grant_chunk(ap_session *s, ap_thread *t)
{
    int64_t got = atomic_load(&s->reserved), n;
    do {
        if (got >= s->config.max_spans) {
            t->exhausted = 1;
            return 0;
        }
        n = s->config.max_spans - got < CHUNK ? s->config.max_spans - got
                                              : CHUNK;
    } while (!atomic_compare_exchange_weak(&s->reserved, &got, got + n));
    if (t->nchunks == t->chunks_cap) {
        uint32_t cap = t->chunks_cap ? t->chunks_cap * 2 : 16;
        ap_span **chunks = ap_realloc(t->chunks, cap * sizeof(*chunks));
        if (!chunks) {
            goto none;
        }
        t->chunks = chunks;
        t->chunks_cap = cap;
    }
    /* full-size even when n is smaller, so any chunk may go to the pool */
    ap_span *chunk = pool_take();
    if (!chunk) {
        goto none;
    }
    t->chunks[t->nchunks++] = chunk;
    t->span_cap += n;
    return 1;
none:
    atomic_fetch_sub(&s->reserved, n);
    t->exhausted = 1;
    return 0;
}

/* ---------------------------------------------------------------- public */

static int
config_ok(const ap_config *c)
{
    return c->max_spans >= 0 && c->max_spans <= INT32_MAX &&
           c->cpu_resolution_ns >= 0 && c->window <= AP_WINDOW_MAX &&
           c->max_stages <= AP_MAX_STAGES &&
           (!c->memory || c->memory_interval_ns > 0);
}

/* The memory sampler's cue to poll fast: a stage was entered since its
 * last look. A stage held open while nothing else happens (a server's
 * `serve`, the script `aquaprof run` wraps) lets it rest; the next entry
 * wakes it (ap_rss_wake_if_idle). */
static int
session_busy(void *arg)
{
    ap_session *s = arg;
    uint64_t entries = 0;
    pthread_mutex_lock(&s->lock);
    for (ap_thread *t = s->threads; t; t = t->next) {
        entries += atomic_load_explicit(&t->entries, memory_order_relaxed);
    }
    int busy = entries != s->entries_seen;
    s->entries_seen = entries;
    pthread_mutex_unlock(&s->lock);
    return busy;
}

static void
session_release(ap_session *s)
{
    ap_path_map_free(&s->path_ids);
    ap_report_free(s->report);
    pthread_mutex_destroy(&s->lock);
    free(s);
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
    ap_session *s = ap_calloc(1, sizeof(*s));
    if (!s) {
        return AP_ERR_NOMEM;
    }
    s->config = *cfg;
    s->gen = atomic_fetch_add(&next_gen, 1);
    s->pid = (int64_t)getpid();
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return AP_ERR_SYSTEM;
    }
    s->report = ap_calloc(1, sizeof(*s->report));
    if (!s->report ||
        ap_path_map_init(&s->path_ids, 0) != AP_OK ||
        ap_intern(AP_OVERFLOW_NAME, strlen(AP_OVERFLOW_NAME),
                  &s->overflow_name) != AP_OK ||
        ap_intern(AP_TOO_DEEP_NAME, strlen(AP_TOO_DEEP_NAME),
                  &s->too_deep_name) != AP_OK) {
        session_release(s);
        return AP_ERR_NOMEM;
    }
    ap_clock_init();    /* before the memory sampler reads ticks */
    if (cfg->memory) {
        ap_status st = ap_rss_start(&s->rss, cfg->memory_interval_ns,
                                    session_busy, s);
        if (st != AP_OK) {
            session_release(s);
            return st;
        }
    }
    s->cpu_resolution_ticks =
        (int64_t)((double)cfg->cpu_resolution_ns / ap_clock_ns_per_tick);
    s->start = ap_clock_anchor_now();
    ap_session *expected = NULL;
    if (!atomic_compare_exchange_strong(&ap_current_session, &expected, s)) {
        ap_rss_stop(&s->rss);
        ap_rss_free_log(&s->rss);
        session_release(s);
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

int64_t
ap_session_thread_index(ap_session *s)
{
    ap_thread *t = current_thread(s);
    return t ? (int64_t)t->index : -1;
}

void
ap_session_thread_forget(void)
{
    tls_thread = NULL;
    tls_gen = 0;
}

static AP_CORE_COLD ap_thread *
register_thread(ap_session *s)
{
    ap_thread *t;
    if (ap_thread_register(s, &t) != AP_OK) {
        /* no record to count it in: the session counts it */
        atomic_fetch_add(&s->lost, 1);
        return NULL;
    }
    tls_thread = t;
    tls_gen = s->gen;
    return t;
}

static uint64_t
span_tag(uint32_t thread, uint32_t node, int32_t span)
{
    if (thread >> AP_TAG_THREAD_BITS || node >> AP_TAG_NODE_BITS) {
        return 0;
    }
    return (uint64_t)thread << (64 - AP_TAG_THREAD_BITS) |
           (uint64_t)node << 32 | (uint32_t)(span + 1);
}

/* Opens stage name on stack k of thread t. */
static inline __attribute__((always_inline)) ap_status
enter_on(ap_session *s, ap_thread *t, ap_stack *k, uint32_t name,
         int64_t items, const void *owner)
{
    if (k->depth == k->cap) {
        ap_frame *frames = ap_realloc(k->frames,
                                      2 * k->cap * sizeof(*frames));
        if (!frames) {
            t->lost++;
            return AP_ERR_NOMEM;
        }
        k->frames = frames;
        k->cap *= 2;
    }
    uint32_t parent = k->depth ? k->frames[k->depth - 1].node : k->base_node;
    ap_frame *f = &k->frames[k->depth];
    if (child_node(s, t, parent, name, &f->node) != AP_OK) {
        t->lost++;
        return AP_ERR_NOMEM;
    }
    f->owner = owner;
    f->key0 = t->cur_key;
    f->items = items;
    f->child_ns = 0;
    if (t->nspans < t->span_cap || (!t->exhausted && grant_chunk(s, t))) {
        f->span = (int32_t)t->nspans++;
    } else {
        f->span = -1;
        t->dropped++;
    }
    if (s->config.memory) {
        ap_rss_wake_if_idle(&s->rss);
        f->rss_seq0 = atomic_load_explicit(&s->rss.seq, memory_order_acquire);
        f->rss0 = atomic_load_explicit(&s->rss.current, memory_order_relaxed);
        f->proc0 = ap_rss_cpu_mark(&s->rss);
    }
    if (s->config.hooks) {
        /* a name left out of the table is the overflow path's */
        s->config.hooks->enter(span_tag(t->index, f->node, f->span),
                               name == AP_NAME_OVER ? s->overflow_name
                                                    : name);
    }
    int64_t w = ap_ticks();
    if (w - t->cpu_wall >= s->cpu_resolution_ticks) {
        /* the system call goes before the start time, not inside the span */
        t->cpu_last = ap_thread_cpu_ns();
        t->cpu_reads++;
        w = ap_ticks();
        t->cpu_wall = w;
        f->cpu0 = t->cpu_last;
    } else {
        f->cpu0 = t->cpu_last + ap_ticks_to_ns(w - t->cpu_wall);
    }
    f->t0 = w;
    if (f->span >= 0) {
        int32_t up = k->depth ? k->frames[k->depth - 1].span : k->base_span;
        *span_at(t, f->span) = (ap_span){
            f->node, t->index, up, 0, w, w, 0, items,
        };
    }
    k->depth++;
    atomic_store_explicit(
        &t->open, atomic_load_explicit(&t->open, memory_order_relaxed) + 1,
        memory_order_relaxed);
    atomic_store_explicit(
        &t->entries,
        atomic_load_explicit(&t->entries, memory_order_relaxed) + 1,
        memory_order_relaxed);
    return AP_OK;
}

static inline ap_session *
active_session(void)
{
    return atomic_load_explicit(&ap_current_session, memory_order_acquire);
}

/* The active session and the calling thread's record in it, made at its
 * first entry: AP_IGNORED when no session is active, AP_ERR_NOMEM when
 * the record could not be made (counted by register_thread). */
static inline ap_status
recording_thread(ap_session **s, ap_thread **t)
{
    *s = active_session();
    if (!*s) {
        return AP_IGNORED;
    }
    *t = current_thread(*s);
    if (!*t && !(*t = register_thread(*s))) {
        return AP_ERR_NOMEM;
    }
    return AP_OK;
}

ap_status
ap_enter(uint32_t name, int64_t items, const void *owner)
{
    ap_session *s;
    ap_thread *t;
    ap_status st = recording_thread(&s, &t);
    return st == AP_OK ? enter_on(s, t, t->cur, name, items, owner) : st;
}

ap_status
ap_enter_in(uint64_t key, uint32_t name, int64_t items, const void *owner)
{
    ap_session *s = active_session();
    if (!s) {
        return AP_IGNORED;
    }
    ap_thread *t = current_thread(s);
    if (!t || key != t->cur_key) {
        return AP_NEED_STACK;
    }
    return enter_on(s, t, t->cur, name, items, owner);
}

/* Records the innermost frame of stack k of thread t as closed at tick w.
 * Inlined into the exit: a call less at every stage exit. */
static inline __attribute__((always_inline)) void
close_frame(ap_session *s, ap_thread *t, ap_stack *k, int64_t w,
            int64_t cpu1, uint32_t flags)
{
    ap_frame *f = &k->frames[k->depth - 1];
    int64_t wall = ap_ticks_to_ns(w - f->t0);
    wall = wall < 0 ? 0 : wall;
    int64_t cpu = cpu1 - f->cpu0;
    cpu = cpu < 0 ? 0 : (cpu > wall ? wall : cpu);
    if (flags & AP_SPAN_SUSPENDED) {
        cpu = 0;   /* the thread's, not the call's: unknown */
    }
    ap_node *node = &t->nodes[f->node];
    ap_stats *st = &node->stats;
    if (ap_stats_add(st, wall, wall - f->child_ns, cpu, f->items) != AP_OK) {
        t->lost++;
    }
    if (node->recent) {
        node->recent[node->recent_at] = (ap_span){
            f->node, t->index, -1, flags, f->t0, w, cpu, f->items,
        };
        node->recent_at = node->recent_at + 1 == t->window
                              ? 0 : node->recent_at + 1;
        node->nrecent += node->nrecent < t->window;
    }
    st->raised += (flags & AP_SPAN_RAISED) != 0;
    st->unclosed += (flags & AP_SPAN_UNCLOSED) != 0;
    st->suspended += (flags & AP_SPAN_SUSPENDED) != 0;
    if (s->config.memory) {
        uint64_t seq = atomic_load_explicit(&s->rss.seq, memory_order_acquire);
        int64_t rss = wall >= s->rss.interval_ns ? ap_rss_refresh(&s->rss)
                                                 : -1;
        if (rss < 0) {
            rss = atomic_load_explicit(&s->rss.current,
                                       memory_order_relaxed);
        }
        frame_memory(s, f, seq, rss, w, st);
    }
    if (f->span >= 0) {
        ap_span *sp = span_at(t, f->span);
        sp->end_ns = w;
        sp->cpu_ns = cpu;
        sp->flags = flags;
    }
    k->depth--;
    atomic_store_explicit(
        &t->open, atomic_load_explicit(&t->open, memory_order_relaxed) - 1,
        memory_order_relaxed);
    if (k->depth) {
        k->frames[k->depth - 1].child_ns += wall;
    }
}

/* close_frame for the thread records' code; ap_exit keeps its own copy
 * inlined. */
void
ap_close_frame(ap_session *s, ap_thread *t, ap_stack *k, int64_t w,
               int64_t cpu1, uint32_t flags)
{
    close_frame(s, t, k, w, cpu1, flags);
}

/* The thread CPU clock now, read for real at most every
 * cpu_resolution_ticks and interpolated from the wall clock between. */
static inline int64_t
cpu_at(ap_session *s, ap_thread *t, int64_t w)
{
    if (w - t->cpu_wall >= s->cpu_resolution_ticks) {
        t->cpu_last = ap_thread_cpu_ns();
        t->cpu_reads++;
        t->cpu_wall = w;
        return t->cpu_last;
    }
    return t->cpu_last + ap_ticks_to_ns(w - t->cpu_wall);
}

/* The flags of a call closed by its own exit under key. */
static inline uint32_t
exit_flags(const ap_stack *k, uint64_t key, int raised)
{
    return (raised ? AP_SPAN_RAISED : 0) |
           ap_open_flags(k, &k->frames[k->depth - 1], key, 0);
}

/* exit_on when owner's frame is not k's innermost: AP_IGNORED when k
 * holds none; else the frames opened above it and left open (a generator
 * abandoned inside it) close with it, flagged unclosed: AP_MISNESTED. */
static AP_CORE_COLD ap_status
exit_below(ap_session *s, ap_thread *t, ap_stack *k, uint64_t key,
           const void *owner, int raised)
{
    uint32_t d = k->depth;
    while (d > 0 && k->frames[d - 1].owner != owner) {
        d--;
    }
    if (d == 0) {
        return AP_IGNORED;
    }
    int64_t w = ap_ticks();
    int64_t cpu = cpu_at(s, t, w);
    while (k->depth > d) {
        if (s->config.hooks) {
            s->config.hooks->exit();
        }
        ap_close_frame(s, t, k, w, cpu,
                       ap_open_flags(k, &k->frames[k->depth - 1], key,
                                     AP_SPAN_UNCLOSED));
        s->unclosed++;
    }
    if (s->config.hooks) {
        s->config.hooks->exit();
    }
    ap_close_frame(s, t, k, w, cpu, exit_flags(k, key, raised));
    return AP_MISNESTED;
}

/* Closes owner's frame on stack k (see exit_below when it is not the
 * innermost). */
static inline __attribute__((always_inline)) ap_status
exit_on(ap_session *s, ap_thread *t, ap_stack *k, uint64_t key,
        const void *owner, int raised)
{
    uint32_t d = k->depth;
    if (d == 0 || k->frames[d - 1].owner != owner) {
        return exit_below(s, t, k, key, owner, raised);
    }
    if (s->config.hooks) {
        s->config.hooks->exit();
    }
    int64_t w = ap_ticks();
    close_frame(s, t, k, w, cpu_at(s, t, w), exit_flags(k, key, raised));
    return AP_OK;
}

/* An exit in another context than its entry's (an async generator
 * stepped by several tasks): owner's frame is looked for on every stack
 * of the thread. */
static ap_status
exit_elsewhere(ap_session *s, ap_thread *t, uint64_t key, const void *owner,
               int raised)
{
    for (ap_stack *k = t->stacks; k; k = k->next) {
        if (k != t->cur && k->depth &&
            exit_on(s, t, k, key, owner, raised) != AP_IGNORED) {
            return AP_OK;
        }
    }
    return AP_IGNORED;
}

ap_status
ap_exit(const void *owner, int raised)
{
    ap_session *s = active_session();
    if (!s) {
        return AP_IGNORED;
    }
    ap_thread *t = current_thread(s);
    if (!t) {
        return AP_IGNORED;
    }
    ap_status st = exit_on(s, t, t->cur, t->cur_key, owner, raised);
    return st == AP_IGNORED ? exit_elsewhere(s, t, t->cur_key, owner, raised)
                            : st;
}

ap_status
ap_exit_in(uint64_t key, const void *owner, int raised)
{
    ap_session *s = active_session();
    if (!s) {
        return AP_IGNORED;
    }
    ap_thread *t = current_thread(s);
    if (!t) {
        return AP_IGNORED;
    }
    if (key != t->cur_key) {
        return AP_NEED_STACK;
    }
    ap_status st = exit_on(s, t, t->cur, key, owner, raised);
    return st == AP_IGNORED ? exit_elsewhere(s, t, key, owner, raised) : st;
}

/* ------------------------------------------------------------ contexts */

uint64_t
ap_session_gen(void)
{
    ap_session *s = active_session();
    return s ? s->gen : 0;
}

int64_t
ap_thread_index_now(void)
{
    ap_session *s = active_session();
    return s ? ap_session_thread_index(s) : -1;
}

ap_status
ap_stack_open(ap_stack *under, int suspendable, ap_stack **out)
{
    ap_session *s;
    ap_thread *t;
    ap_status st = recording_thread(&s, &t);
    if (st != AP_OK) {
        return st;
    }
    uint32_t node = ROOT_NODE;
    int32_t span = -1;
    if (under && under->thread == t) {
        if (under->depth) {
            node = under->frames[under->depth - 1].node;
            span = under->frames[under->depth - 1].span;
        } else {
            node = under->base_node;
            span = under->base_span;
        }
    }
    st = ap_stack_new(t, node, span, out);
    if (st == AP_OK) {
        (*out)->suspendable = suspendable;
    }
    return st;
}

void
ap_stack_use(uint64_t key, ap_stack *k)
{
    ap_session *s = active_session();
    ap_thread *t = s ? current_thread(s) : NULL;
    if (t) {
        t->cur = k && k->thread == t ? k : t->home;
        t->cur_key = key;
    }
}

void
ap_stack_release(uint64_t gen, ap_stack *k)
{
    ap_session *s = active_session();
    if (!s || s->gen != gen) {
        return;
    }
    /* a thread's exit trims its stacks (on that thread, without the GIL) */
    pthread_mutex_lock(&s->lock);
    ap_thread *t = k->thread;
    if (!k->released) {
        k->released = 1;
        if (t->retired) {
            /* its thread ended while this context lived on */
            ap_thread_released_locked(s, t);
        } else {
            if (t->cur == k) {
                t->cur = t->home;
                t->cur_key = AP_NO_KEY;
            }
            /* a stack left with open stages keeps them for stop() to
             * close */
            if (k->depth == 0 && k != t->home) {
                k->next_spare = t->spare;
                t->spare = k;
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
}

int
ap_session_is_foreign(const ap_session *s)
{
    return s->pid != (int64_t)getpid();
}

ap_status
ap_session_stop(ap_session *s, uint64_t key)
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
    int64_t self_index = self ? (int64_t)self->index : -1;
    pthread_mutex_lock(&s->lock);
    for (ap_thread *t = s->threads; t; t = t->next) {
        uint64_t now_key = ap_thread_key_now(t, self_index, key);
        for (ap_stack *k = t->stacks; k; k = k->next) {
            while (k->depth) {
                /* another thread's CPU clock is not ours to read: its
                 * open stages get the CPU time they had when they
                 * entered */
                ap_frame *f = &k->frames[k->depth - 1];
                close_frame(s, t, k, s->stop.ticks,
                            t == self ? cpu_now : f->cpu0,
                            ap_open_flags(k, f, now_key, AP_SPAN_UNCLOSED));
                s->unclosed++;
            }
        }
    }
    s->stopped = 1;
    pthread_mutex_unlock(&s->lock);
    /* after the lock: the sampler takes it to see whether stages are open */
    ap_rss_stop(&s->rss);
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
        ap_rss_free_log(&s->rss);
    }
    ap_thread_free_all(s);
    ap_paths_free(s);
    session_release(s);
}
