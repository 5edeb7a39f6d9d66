/* A session as an ap_report: once stopped, the report made at start takes
 * the session's paths and spans (a thread still linked adds its own
 * aggregates first); while it runs, a snapshot copies them and adds the
 * recent-call rings and the open calls. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"

#include "session_internal.h"

/* Maps a tick of the session onto CLOCK_MONOTONIC ns, exactly at the
 * session's start and at `end` (its stop, or now) and linearly between
 * them, so spans line up with other clocks whatever the error of the
 * process-wide calibration. */
int64_t
ticks_to_monotonic(const ap_session *s, const ap_clock_anchor *end,
                   int64_t t)
{
    if (!ap_clock_tsc) {
        return t;
    }
    int64_t span_ticks = end->ticks - s->start.ticks;
    if (span_ticks <= 0) {
        return s->start.ns;
    }
    __extension__ __int128 num = (__int128)(t - s->start.ticks) *
                                 (end->ns - s->start.ns);
    return s->start.ns + (int64_t)(num / span_ticks);
}

/* A recorded span (ticks, thread-local node; with no map, the stage's
 * path already) as a report's span. */
ap_span
report_span(const ap_session *s, const ap_clock_anchor *end,
            const uint32_t *map, ap_span sp)
{
    sp.stage = map ? map[sp.stage] : sp.stage;
    sp.start_ns = ticks_to_monotonic(s, end, sp.start_ns);
    sp.end_ns = ticks_to_monotonic(s, end, sp.end_ns);
    /* the anchors' scale differs from the calibration that clamped cpu
     * at exit by about 1e-6: keep cpu within the span as mapped */
    if (sp.cpu_ns > sp.end_ns - sp.start_ns) {
        sp.cpu_ns = sp.end_ns - sp.start_ns;
    }
    sp.cpu_ns = sp.cpu_ns < 0 ? 0 : sp.cpu_ns;
    return sp;
}

/* The run-level figures common to a report and a snapshot. */
static void
report_head(const ap_session *s, const ap_clock_anchor *end, ap_report *r)
{
    r->start_ns = ticks_to_monotonic(s, end, s->start.ticks);
    r->stop_ns = ticks_to_monotonic(s, end, end->ticks);
    r->clock = ap_clock_name();
    r->pid = s->pid;
    r->config = s->config;
    r->unclosed = s->unclosed;
    r->overflowed = s->overflowed;
    r->too_deep = s->too_deep;
    r->lost = atomic_load(&s->lost);
    r->nthreads = s->nthreads;
}

/* Each record's entry in r->threads, but for its spans, first span and
 * node table. */
static void
report_thread(ap_report *r, const ap_thread *t)
{
    r->threads[t->index] = (ap_report_thread){
        .index = t->index, .native_id = t->native_id,
        .dropped = t->dropped, .cpu_reads = t->cpu_reads,
        .nnodes = t->nnodes, .folded = t->folded, .serial = t->serial,
        .ended = t->retired,
    };
    r->dropped += t->dropped;
    r->lost += t->lost;
}

/* ---------------------------------------------------------------- report */

/* A span array for up to *n spans: fewer when memory is short (the pool
 * of spare chunks is let go first), maybe none; *n says how many. */
static ap_span *
span_array(int64_t *n)
{
    int trimmed = 0;
    for (int64_t want = *n;; want /= 2) {
        ap_span *spans = ap_malloc((size_t)(want ? want : 1) *
                                   sizeof(ap_span));
        if (!spans && !trimmed) {
            trimmed = 1;
            ap_pool_trim();
            spans = ap_malloc((size_t)(want ? want : 1) * sizeof(ap_span));
        }
        if (spans || want == 0) {
            *n = spans ? want : 0;
            return spans;
        }
    }
}

/* Copies t's first `keep` spans to out + offset and lets its chunks go. */
static void
take_spans(const ap_session *s, ap_thread *t, const uint32_t *map,
           ap_span *out, int64_t offset, int64_t keep)
{
    for (int64_t i = 0; i < keep; i++) {
        ap_span sp = report_span(s, &s->stop, map, *span_at(t, i));
        if (sp.parent >= 0) {
            sp.parent += (int32_t)offset;
        }
        out[offset + i] = sp;
    }
    for (uint32_t c = 0; c < t->nchunks; c++) {
        if (c + 1 == t->nchunks && t->last_chunk_exact) {
            free(t->chunks[c]);
        } else {
            ap_pool_give(t->chunks[c]);
        }
    }
    t->nchunks = 0;
}

/* The spans of every record, threads in index order, as many of them as
 * a span array can hold (a prefix: a span's parent comes before it). */
static void
report_spans(const ap_session *s, ap_report *r)
{
    int64_t total = 0;
    for (const ap_thread *t = s->all; t; t = t->next_all) {
        total += t->nspans;
    }
    int64_t kept = total;
    r->spans = span_array(&kept);
    r->nspans = kept;
    r->shed = total - kept;
    /* s->all runs newest first, from the highest index down */
    int64_t after = total;
    for (ap_thread *t = s->all; t; t = t->next_all) {
        ap_report_thread *rt = &r->threads[t->index];
        after -= t->nspans;
        int64_t keep = kept - after;
        keep = keep < 0 ? 0 : (keep > t->nspans ? t->nspans : keep);
        rt->first_span = after < kept ? after : kept;
        rt->spans = keep;
        rt->recorded = t->nspans;
        take_spans(s, t, rt->stage_of_node, r->spans, after, keep);
    }
}

/* The run's RSS samples: the sampler starts just before the run and may
 * take one more between stop and its join. The log is taken, not copied. */
static void
report_memory(ap_session *s, ap_report *r)
{
    r->memory = s->rss.log;
    uint32_t n = s->rss.log_len;
    s->rss.log = NULL;
    s->rss.log_len = 0;
    for (uint32_t i = 0; i < n; i++) {
        ap_rss_sample m = r->memory[i];
        if (m.t_ns <= r->stop_ns) {
            m.t_ns = m.t_ns < r->start_ns ? r->start_ns : m.t_ns;
            r->memory[r->nmemory++] = m;
        }
    }
}

ap_status
ap_session_report(ap_session *s, ap_report **out)
{
    if (ap_session_is_foreign(s)) {
        return AP_ERR_FORKED;
    }
    if (!s->stopped) {
        return AP_ERR_RUNNING;
    }
    pthread_mutex_lock(&s->lock);
    if (s->reported) {
        pthread_mutex_unlock(&s->lock);
        return AP_ERR_INVALID;
    }
    s->reported = 1;
    ap_report *r = s->report;
    s->report = NULL;
    report_head(s, &s->stop, r);
    /* threads that did not exit: their aggregates join the paths */
    for (ap_thread *t = s->threads; t; t = t->next) {
        for (uint32_t n = 1; n < t->nnodes; n++) {
            if (ap_stats_absorb(&s->paths[t->paths[n]].stats,
                                &t->nodes[n].stats) != AP_OK) {
                t->lost++;
            }
        }
    }
    r->stages = s->paths;
    r->nstages = s->npaths;
    s->paths = NULL;
    s->npaths = s->paths_cap = 0;
    for (ap_thread *t = s->all; t; t = t->next_all) {
        report_thread(r, t);
        r->threads[t->index].stage_of_node = t->paths;
        t->paths = NULL;
    }
    report_spans(s, r);
    pthread_mutex_unlock(&s->lock);
    report_memory(s, r);
    *out = r;
    return AP_OK;
}

/* -------------------------------------------------------------- snapshot */

/* Appends thread t's recent calls, oldest first, then its open calls. */
static int64_t
snapshot_spans(const ap_session *s, const ap_clock_anchor *now,
               const ap_thread *t, const uint32_t *map, int64_t cpu_now,
               uint64_t key, ap_span *out)
{
    int64_t k = 0;
    for (uint32_t n = 1; n < t->nnodes; n++) {
        const ap_node *node = &t->nodes[n];
        uint32_t first = node->nrecent < t->window ? 0 : node->recent_at;
        for (uint32_t i = 0; i < node->nrecent; i++) {
            uint32_t at = first + i < t->window ? first + i
                                                : first + i - t->window;
            out[k++] = report_span(s, now, map, node->recent[at]);
        }
    }
    for (const ap_stack *st = t->stacks; st; st = st->next) {
        for (uint32_t d = 0; d < st->depth; d++) {
            out[k++] = report_span(s, now, map,
                                   ap_open_span(t, st, &st->frames[d],
                                                now->ticks, cpu_now, key));
        }
    }
    return k;
}

static int64_t
snapshot_span_count(const ap_thread *t)
{
    if (t->retired) {
        return 0;
    }
    int64_t n = atomic_load_explicit(&t->open, memory_order_relaxed);
    for (uint32_t k = 1; k < t->nnodes; k++) {
        n += t->nodes[k].nrecent;
    }
    return n;
}

/* Copies of the paths with the live threads' aggregates added. */
static ap_status
snapshot_stages(const ap_session *s, ap_report *r)
{
    r->stages = ap_calloc(s->npaths ? s->npaths : 1, sizeof(*r->stages));
    if (!r->stages) {
        return AP_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < s->npaths; i++) {
        r->stages[i] = s->paths[i];
        if (ap_stats_copy(&r->stages[i].stats, &s->paths[i].stats) !=
            AP_OK) {
            return AP_ERR_NOMEM;
        }
        r->nstages = i + 1;
    }
    for (const ap_thread *t = s->threads; t; t = t->next) {
        for (uint32_t n = 1; n < t->nnodes; n++) {
            if (ap_stats_merge(&r->stages[t->paths[n]].stats,
                               &t->nodes[n].stats) != AP_OK) {
                return AP_ERR_NOMEM;
            }
        }
    }
    return AP_OK;
}

/* The recent calls of threads that exited, after the others' (each
 * counted in its own thread's spans). */
static ap_status
snapshot_ended_recent(const ap_session *s, const ap_clock_anchor *now,
                      ap_report *r)
{
    int64_t n = 0;
    for (uint32_t p = 0; p < s->ended_recent_cap; p++) {
        n += s->ended_recent[p].n;
    }
    if (n == 0) {
        return AP_OK;
    }
    ap_span *spans = ap_realloc(r->spans,
                                (size_t)(r->nspans + n) * sizeof(ap_span));
    if (!spans) {
        return AP_ERR_NOMEM;
    }
    r->spans = spans;
    /* their stage is a path already: an identity map for report_span */
    for (uint32_t p = 0; p < s->ended_recent_cap; p++) {
        const ap_recent *rec = &s->ended_recent[p];
        for (uint32_t i = 0; i < rec->n; i++) {
            ap_span sp = report_span(s, now, NULL, rec->calls[i]);
            r->threads[sp.thread].spans++;
            r->threads[sp.thread].recorded++;
            r->spans[r->nspans++] = sp;
        }
    }
    return AP_OK;
}

ap_status
ap_snapshot_base_locked(ap_session *s, const ap_clock_anchor *now,
                        ap_report *r)
{
    report_head(s, now, r);
    r->threads = ap_calloc(s->nthreads ? s->nthreads : 1,
                           sizeof(*r->threads));
    if (!r->threads || snapshot_stages(s, r) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    for (const ap_thread *t = s->all; t; t = t->next_all) {
        report_thread(r, t);
        ap_report_thread *rt = &r->threads[t->index];
        rt->stage_of_node = ap_malloc(t->nnodes * sizeof(uint32_t));
        if (!rt->stage_of_node) {
            return AP_ERR_NOMEM;
        }
        memcpy(rt->stage_of_node, t->paths, t->nnodes * sizeof(uint32_t));
    }
    return AP_OK;
}

static ap_status
snapshot_locked(ap_session *s, const ap_clock_anchor *now, uint64_t key,
                ap_report *r)
{
    if (ap_snapshot_base_locked(s, now, r) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    for (const ap_thread *t = s->all; t; t = t->next_all) {
        ap_report_thread *rt = &r->threads[t->index];
        rt->spans = rt->recorded = snapshot_span_count(t);
        r->nspans += rt->spans;
    }
    r->spans = ap_malloc((size_t)(r->nspans ? r->nspans : 1) *
                         sizeof(ap_span));
    if (!r->spans) {
        return AP_ERR_NOMEM;
    }
    int64_t self = ap_session_thread_index(s);
    int64_t after = r->nspans;
    for (const ap_thread *t = s->all; t; t = t->next_all) {
        ap_report_thread *rt = &r->threads[t->index];
        after -= rt->spans;
        rt->first_span = after;
        if (!t->retired) {
            snapshot_spans(s, now, t, rt->stage_of_node,
                           t->index == self ? ap_thread_cpu_ns() : -1,
                           ap_thread_key_now(t, self, key), r->spans + after);
        }
    }
    return snapshot_ended_recent(s, now, r);
}

ap_status
ap_session_snapshot(ap_session *s, uint64_t key, ap_report **out)
{
    if (ap_session_is_foreign(s)) {
        return AP_ERR_FORKED;
    }
    if (s->stopped) {
        return AP_ERR_INVALID;
    }
    ap_clock_anchor now = ap_clock_anchor_now();
    ap_report *r = ap_calloc(1, sizeof(*r));
    if (!r) {
        return AP_ERR_NOMEM;
    }
    r->memory = ap_malloc(sizeof(ap_rss_sample));
    pthread_mutex_lock(&s->lock);
    ap_status st = r->memory ? snapshot_locked(s, &now, key, r)
                                : AP_ERR_NOMEM;
    pthread_mutex_unlock(&s->lock);
    if (st != AP_OK) {
        ap_report_free(r);
        return st;
    }
    if (s->config.memory) {
        /* stamped like the open calls' ends: with the monotonic tick
         * source now.ns and the mapped now.ticks may differ by a tick */
        r->memory[r->nmemory++] = (ap_rss_sample){
            r->stop_ns, atomic_load_explicit(&s->rss.current,
                                             memory_order_relaxed),
        };
    }
    *out = r;
    return AP_OK;
}

/* ------------------------------------------------------------------ both */

void
ap_report_free(ap_report *r)
{
    if (!r) {
        return;
    }
    for (uint32_t i = 0; r->stages && i < r->nstages; i++) {
        ap_stats_free(&r->stages[i].stats);
    }
    free(r->stages);
    for (uint32_t k = 0; r->threads && k < r->nthreads; k++) {
        free(r->threads[k].stage_of_node);
    }
    free(r->threads);
    free(r->spans);
    free(r->memory);
    free(r);
}

ap_status
ap_report_resolve_tag(const ap_report *r, uint64_t tag, uint32_t *stage,
                      int64_t *span)
{
    uint64_t thread = tag >> (64 - AP_TAG_THREAD_BITS);
    uint32_t node = (uint32_t)(tag >> 32) & ((1u << AP_TAG_NODE_BITS) - 1);
    int64_t slot = (int64_t)(uint32_t)tag - 1;
    if (thread >= r->nthreads) {
        return AP_ERR_INVALID;
    }
    const ap_report_thread *t = &r->threads[thread];
    if (node == ROOT_NODE || node >= t->nnodes || slot >= t->recorded) {
        return AP_ERR_INVALID;
    }
    *stage = t->stage_of_node[node];
    *span = slot < 0 || slot >= t->spans ? -1 : t->first_span + slot;
    return AP_OK;
}
