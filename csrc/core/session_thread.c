/* Thread records: made at a thread's first entry in a session, merged
 * into the session and trimmed when the thread exits, freed with the
 * session.
 *
 * A record has two owners: its session, and its thread, whose exit hook
 * (a pthread key destructor, run on the exiting thread without the GIL)
 * merges it. The thread holds its link in tls_owned; a session being
 * freed, or a newer session of the same thread, clears the link first.
 * ap_link_lock orders those: a hook that finds its link set knows the
 * session is alive until it lets go of the lock. */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"
#include "session_internal.h"

pthread_mutex_t ap_link_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local ap_thread *tls_owned;   /* ap_link_lock */
static _Thread_local int tls_hooked;         /* the key holds a value */
static pthread_key_t exit_key;
static int exit_key_ok;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void thread_exit_hook(void *unused);

static void
make_exit_key(void)
{
    exit_key_ok = pthread_key_create(&exit_key, thread_exit_hook) == 0;
}

/* Everything of t but what the report reads from an exited thread: its
 * counters, its spans and its node -> path table. */
static void
free_tree(ap_thread *t)
{
    for (uint32_t n = 0; t->nodes && n < t->nnodes; n++) {
        ap_stats_free(&t->nodes[n].stats);
        free(t->nodes[n].recent);
    }
    free(t->nodes);
    t->nodes = NULL;
    ap_stacks_trim(t);
    ap_path_map_free(&t->children);
}

void
ap_thread_free(ap_thread *t)
{
    free_tree(t);
    ap_stacks_free(t);
    for (uint32_t c = 0; c < t->nchunks; c++) {
        if (c + 1 == t->nchunks && t->last_chunk_exact) {
            free(t->chunks[c]);
        } else {
            ap_pool_give(t->chunks[c]);
        }
    }
    free(t->chunks);
    free(t->paths);
    free(t);
}

/* Room in the report made at start for one more thread, so that the
 * report needs none later. */
static ap_status
reserve_report_thread(ap_session *s)
{
    if (s->nthreads < s->report_threads_cap) {
        return AP_OK;
    }
    uint32_t cap = s->report_threads_cap ? s->report_threads_cap * 2 : 8;
    ap_report_thread *threads = ap_realloc(s->report->threads,
                                           cap * sizeof(*threads));
    if (!threads) {
        return AP_ERR_NOMEM;
    }
    s->report->threads = threads;
    s->report_threads_cap = cap;
    return AP_OK;
}

/* Links t to the calling thread, so that its exit merges t. */
static void
link_to_thread(ap_thread *t)
{
    pthread_once(&exit_once, make_exit_key);
    pthread_mutex_lock(&ap_link_lock);
    if (tls_owned) {
        tls_owned->owner = NULL;    /* an older session keeps it whole */
    }
    tls_owned = t;
    t->owner = &tls_owned;
    pthread_mutex_unlock(&ap_link_lock);
    if (exit_key_ok && !tls_hooked) {
        /* any non-NULL value: the hook reads tls_owned */
        tls_hooked = pthread_setspecific(exit_key, &tls_owned) == 0;
    }
}

/* A fresh record for the calling thread, in no list yet. */
static ap_status
new_record(ap_session *s, ap_thread **out)
{
    ap_thread *t = ap_calloc(1, sizeof(*t));
    if (!t) {
        return AP_ERR_NOMEM;
    }
    t->session = s;
    t->window = s->config.window;
    if (ap_thread_add_root(t) != AP_OK ||
        ap_path_map_init(&t->children, 0) != AP_OK ||
        ap_stack_new(t, ROOT_NODE, -1, &t->home) != AP_OK) {
        ap_thread_free(t);
        return AP_ERR_NOMEM;
    }
    t->cur = t->home;
    t->cur_key = AP_NO_KEY;
    t->native_id = (int64_t)syscall(SYS_gettid);
    t->pthread = (uint64_t)pthread_self();
    t->cpu_wall = INT64_MIN / 2;
    *out = t;
    return AP_OK;
}

/* Gives t the next index, at the head of s->all. Under s->lock. */
static ap_status
add_record_locked(ap_session *s, ap_thread *t)
{
    ap_status st = reserve_report_thread(s);
    if (st == AP_OK) {
        t->index = s->nthreads++;
        t->next_all = s->all;
        s->all = t;
    }
    return st;
}

/* Fresh record t takes vacant record v's index and place in s->all (so
 * that it stays in index order): their contents are swapped, and v's
 * old ones, folded into s->fold, are left in t to be freed. Under
 * s->lock. */
static void
take_over_locked(ap_session *s, ap_thread *v, ap_thread *t)
{
    ap_thread *fold = s->fold;
    fold->dropped += v->dropped;
    fold->cpu_reads += v->cpu_reads;
    fold->lost += v->lost;
    fold->folded++;
    ap_thread old;
    memcpy(&old, v, sizeof old);
    memcpy(v, t, sizeof *v);
    memcpy(t, &old, sizeof *t);
    v->index = old.index;
    v->next_all = old.next_all;
    for (ap_stack *k = v->stacks; k; k = k->next) {
        k->thread = v;
    }
}

ap_status
ap_thread_register(ap_session *s, ap_thread **out)
{
    ap_thread *t, *old = NULL;
    if (new_record(s, &t) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    pthread_mutex_lock(&s->lock);
    ap_status st = AP_OK;
    t->serial = ++s->serials;
    if (s->vacant) {
        ap_thread *v = s->vacant;
        s->vacant = v->next;
        take_over_locked(s, v, t);
        old = t;
        t = v;
    } else {
        st = add_record_locked(s, t);
    }
    if (st == AP_OK) {
        t->next = s->threads;
        s->threads = t;
    }
    pthread_mutex_unlock(&s->lock);
    if (st != AP_OK) {
        ap_thread_free(t);
        return st;
    }
    if (old) {
        ap_thread_free(old);
    }
    link_to_thread(t);
    *out = t;
    return AP_OK;
}

/* Whether t, retiring, may be taken over: nothing can name it any more.
 * Tags name threads below AP_KEPT_THREADS; spans name their thread; a
 * context's ContextStack points at its stack, and that at the record,
 * until it is released. */
static int
vacates(const ap_thread *t)
{
    if (t->index < AP_KEPT_THREADS || t->nspans) {
        return 0;
    }
    for (const ap_stack *k = t->stacks; k; k = k->next) {
        if (k != t->home && !k->released) {
            return 0;
        }
    }
    return 1;
}

/* s->fold, made at the first vacancy: a retired record of no thread.
 * NULL when memory is short (records are then kept whole). Under
 * s->lock. */
static ap_thread *
fold_locked(ap_session *s)
{
    if (s->fold) {
        return s->fold;
    }
    ap_thread *f;
    if (new_record(s, &f) != AP_OK) {
        return NULL;
    }
    if (add_record_locked(s, f) != AP_OK) {
        ap_thread_free(f);
        return NULL;
    }
    f->native_id = 0;
    f->pthread = 0;
    f->retired = 1;
    free_tree(f);
    s->fold = f;
    return f;
}

/* Retired record t joins those a new thread may take over. */
static void
vacate_locked(ap_session *s, ap_thread *t)
{
    t->next = s->vacant;
    s->vacant = t;
    t->vacant = 1;
}

/* Keeps only the spans of t's last chunk, and gives the capacity it had
 * reserved past them back to the session's max_spans. */
static void
trim_spans(ap_session *s, ap_thread *t)
{
    atomic_fetch_sub(&s->reserved, t->span_cap - t->nspans);
    t->span_cap = t->nspans;
    if (t->nchunks == 0) {
        return;
    }
    int64_t used = t->nspans - (int64_t)(t->nchunks - 1) * CHUNK;
    if (used == CHUNK) {
        return;
    }
    ap_span *last = t->chunks[t->nchunks - 1];
    if (used == 0) {
        t->nchunks--;
        ap_pool_give(last);
        return;
    }
    ap_span *exact = ap_malloc((size_t)used * sizeof(ap_span));
    if (!exact) {
        return;                 /* kept whole: it only costs memory */
    }
    memcpy(exact, last, (size_t)used * sizeof(ap_span));
    t->chunks[t->nchunks - 1] = exact;
    t->last_chunk_exact = 1;
    ap_pool_give(last);
}

/* The calls of ring node (oldest first) and of into->calls merged by end
 * time into out, keeping the latest `window`; their stage becomes path,
 * their thread `thread`. */
static uint32_t
merge_recent(const ap_node *node, uint32_t window, uint32_t path,
             uint32_t thread, const ap_recent *into, ap_span *out)
{
    uint32_t first = node->nrecent < window ? 0 : node->recent_at;
    uint32_t i = node->nrecent, j = into->n, k = window;
    /* from the newest down, so that the oldest are the ones left out */
    while (k && (i || j)) {
        const ap_span *a = NULL;
        if (i) {
            uint32_t at = first + i - 1;
            a = &node->recent[at < window ? at : at - window];
        }
        const ap_span *b = j ? &into->calls[j - 1] : NULL;
        if (a && (!b || a->end_ns >= b->end_ns)) {
            out[--k] = *a;
            out[k].stage = path;
            out[k].thread = thread;
            i--;
        } else {
            out[--k] = *b;
            j--;
        }
    }
    uint32_t n = window - k;
    memmove(out, out + k, n * sizeof(*out));
    return n;
}

/* Keeps the recent calls of an exiting thread for snapshots, merged by
 * path, as calls of thread `as`. Out of memory, they are let go: only
 * live figures lose them. */
static void
keep_recent_locked(ap_session *s, ap_thread *t, uint32_t as)
{
    if (s->ended_recent_cap < s->npaths) {
        ap_recent *fresh = ap_realloc(s->ended_recent,
                                      s->npaths * sizeof(*fresh));
        if (!fresh) {
            return;
        }
        memset(fresh + s->ended_recent_cap, 0,
               (s->npaths - s->ended_recent_cap) * sizeof(*fresh));
        s->ended_recent = fresh;
        s->ended_recent_cap = s->npaths;
    }
    ap_span *spare = NULL;
    for (uint32_t n = 1; n < t->nnodes; n++) {
        if (!t->nodes[n].nrecent) {
            continue;
        }
        spare = spare ? spare : ap_malloc(t->window * sizeof(ap_span));
        if (!spare) {
            return;
        }
        ap_recent *into = &s->ended_recent[t->paths[n]];
        uint32_t kept = merge_recent(&t->nodes[n], t->window, t->paths[n],
                                     as, into, spare);
        ap_span *old = into->calls;
        into->calls = spare;
        into->n = kept;
        spare = old;
    }
    free(spare);
}

/* Merges an exited thread's record into s and trims it. Under s->lock. */
static void
retire_locked(ap_session *s, ap_thread *t)
{
    if (atomic_load_explicit(&t->open, memory_order_relaxed)) {
        /* the thread ended with stages open: they end with it, and
         * every context that could be left was (a task's, parked at an
         * await when its loop ended) */
        int64_t w = ap_ticks(), cpu = ap_thread_cpu_ns();
        for (ap_stack *k = t->stacks; k; k = k->next) {
            while (k->depth) {
                ap_close_frame(s, t, k, w, cpu,
                               AP_SPAN_UNCLOSED |
                                   (k->suspendable ? AP_SPAN_SUSPENDED : 0));
                s->unclosed++;
            }
        }
    }
    for (uint32_t n = 1; n < t->nnodes; n++) {
        if (ap_stats_absorb(&s->paths[t->paths[n]].stats,
                            &t->nodes[n].stats) != AP_OK) {
            t->lost++;
        }
    }
    /* a record taken over keeps no thread's recent calls: the fold's */
    ap_thread *fold = vacates(t) ? fold_locked(s) : NULL;
    if (t->window) {
        keep_recent_locked(s, t, fold ? fold->index : t->index);
    }
    free_tree(t);
    trim_spans(s, t);
    ap_thread **at = &s->threads;
    while (*at != t) {
        at = &(*at)->next;
    }
    *at = t->next;
    t->next = NULL;
    t->retired = 1;
    if (fold) {
        vacate_locked(s, t);
    }
}

void
ap_thread_released_locked(ap_session *s, ap_thread *t)
{
    /* its recent calls stay filed under its index: a snapshot may show
     * them on the thread that takes it over */
    if (!t->vacant && vacates(t) && fold_locked(s)) {
        vacate_locked(s, t);
    }
}

static void
thread_exit_hook(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&ap_link_lock);
    ap_thread *t = tls_owned;
    tls_owned = NULL;
    tls_hooked = 0;
    if (t) {
        t->owner = NULL;
        ap_session *s = t->session;
        pthread_mutex_lock(&s->lock);
        /* once a report took the session's paths and this thread's
         * figures, the record stays as it is until the session goes */
        if (!s->reported) {
            retire_locked(s, t);
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&ap_link_lock);
    /* a later key's destructor that records makes a new record */
    ap_session_thread_forget();
}

void
ap_thread_free_all(ap_session *s)
{
    pthread_mutex_lock(&ap_link_lock);
    for (ap_thread *t = s->all; t; t = t->next_all) {
        if (t->owner) {
            *t->owner = NULL;
            t->owner = NULL;
        }
    }
    pthread_mutex_unlock(&ap_link_lock);
    ap_thread *t = s->all;
    while (t) {
        ap_thread *next = t->next_all;
        ap_thread_free(t);
        t = next;
    }
    s->all = s->threads = NULL;
}

static int64_t
map_bytes(const ap_path_map *m)
{
    return m->keys ? ((int64_t)m->mask + 1) *
                         (int64_t)(sizeof(*m->keys) + sizeof(*m->vals))
                   : 0;
}

static int64_t
record_bytes(const ap_thread *t)
{
    int64_t b = (int64_t)sizeof(*t) + t->chunks_cap * sizeof(ap_span *) +
                (int64_t)t->nodes_cap * sizeof(uint32_t);
    for (uint32_t c = 0; c < t->nchunks; c++) {
        int exact = c + 1 == t->nchunks && t->last_chunk_exact;
        b += (exact ? t->nspans - (int64_t)c * CHUNK : CHUNK) *
             (int64_t)sizeof(ap_span);
    }
    for (const ap_stack *k = t->stacks; k; k = k->next) {
        b += (int64_t)sizeof(*k) + (int64_t)k->cap * sizeof(ap_frame);
    }
    if (t->nodes) {
        b += (int64_t)t->nodes_cap * sizeof(ap_node) +
             map_bytes(&t->children);
        for (uint32_t n = 0; n < t->nnodes; n++) {
            b += t->nodes[n].stats.hist_n * (int64_t)sizeof(uint64_t) +
                 (t->nodes[n].recent ? t->window * (int64_t)sizeof(ap_span)
                                     : 0);
        }
    }
    return b;
}

int64_t
ap_session_footprint(ap_session *s)
{
    pthread_mutex_lock(&s->lock);
    int64_t b = (int64_t)s->paths_cap * sizeof(ap_report_stage) +
                map_bytes(&s->path_ids);
    for (uint32_t i = 0; s->paths && i < s->npaths; i++) {
        b += s->paths[i].stats.hist_n * (int64_t)sizeof(uint64_t);
    }
    b += (int64_t)s->ended_recent_cap * sizeof(ap_recent);
    for (uint32_t i = 0; i < s->ended_recent_cap; i++) {
        b += s->ended_recent[i].calls ? s->config.window *
                                            (int64_t)sizeof(ap_span)
                                      : 0;
    }
    for (const ap_thread *t = s->all; t; t = t->next_all) {
        b += record_bytes(t);
    }
    pthread_mutex_unlock(&s->lock);
    return b;
}
