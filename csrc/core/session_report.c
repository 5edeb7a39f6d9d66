/* Merging a session's per-thread trees into one ap_report: with the span
 * buffers once it has stopped, with the recent-call rings and the open
 * calls for a snapshot while it runs. */
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"

#include "session_internal.h"

static ap_status
report_add_stage(ap_report *r, ap_path_map *m, uint32_t *cap, int32_t parent,
                 uint32_t name, uint32_t *out)
{
    uint32_t above = (uint32_t)(parent + 1);   /* 0: the top level */
    if (ap_path_map_find(m, above, name, out)) {
        return AP_OK;
    }
    if (ap_path_map_reserve(m) != AP_OK) {
        return AP_ERR_NOMEM;
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
    ap_path_map_put(m, above, name, r->nstages);
    *out = r->nstages++;
    return AP_OK;
}

/* Merges every thread's tree into one table of paths; the threads'
 * stage_of_node give the path id of each of their nodes. */
static ap_status
merge_stages(const ap_session *s, ap_thread **threads, ap_report *r)
{
    uint32_t total = 0;
    for (uint32_t k = 0; k < s->nthreads; k++) {
        total += threads[k]->nnodes;
    }
    ap_path_map m;
    if (ap_path_map_init(&m, total) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    uint32_t cap = 0;
    ap_status st = AP_ERR_NOMEM;
    for (uint32_t k = 0; k < s->nthreads; k++) {
        ap_thread *t = threads[k];
        uint32_t *map = r->threads[k].stage_of_node;
        /* parents are created before their children */
        for (uint32_t n = 1; n < t->nnodes; n++) {
            ap_node *node = &t->nodes[n];
            int32_t parent = node->parent == ROOT_NODE
                                 ? -1
                                 : (int32_t)map[node->parent];
            if (report_add_stage(r, &m, &cap, parent, node->name,
                                 &map[n]) != AP_OK) {
                goto done;
            }
            ap_stats_merge(&r->stages[map[n]].stats, &node->stats);
        }
    }
    st = AP_OK;
done:
    ap_path_map_free(&m);
    return st;
}

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

/* A recorded span (ticks, thread-local node) as a report's span. */
ap_span
report_span(const ap_session *s, const ap_clock_anchor *end,
            const uint32_t *map, ap_span sp)
{
    sp.stage = map[sp.stage];
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

static void
copy_spans(const ap_session *s, ap_thread *t, const uint32_t *map,
           ap_span *out, int64_t offset)
{
    for (int64_t i = 0; i < t->nspans; i++) {
        ap_span sp = report_span(s, &s->stop, map, *span_at(t, i));
        if (sp.parent >= 0) {
            sp.parent += (int32_t)offset;
        }
        out[offset + i] = sp;
    }
}

/* A report of s up to `end` with its threads (indexed in *threads, to be
 * freed by the caller) and merged stages: everything but spans and
 * memory. */
ap_status
report_new(const ap_session *s, const ap_clock_anchor *end,
           ap_thread ***threads, ap_report **out)
{
    uint32_t n = s->nthreads;
    ap_report *r = calloc(1, sizeof(*r));
    *threads = calloc(n ? n : 1, sizeof(**threads));
    if (!r || !*threads) {
        goto error;
    }
    r->start_ns = ticks_to_monotonic(s, end, s->start.ticks);
    r->stop_ns = ticks_to_monotonic(s, end, end->ticks);
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
        (*threads)[t->index] = t;
        r->threads[t->index] = (ap_report_thread){
            t->index, t->native_id, t->nspans, t->dropped, t->cpu_reads,
            malloc(t->nnodes * sizeof(uint32_t)), t->nnodes, 0,
        };
        if (!r->threads[t->index].stage_of_node) {
            goto error;
        }
        r->dropped += t->dropped;
        r->lost += t->lost;
    }
    if (merge_stages(s, *threads, r) != AP_OK) {
        goto error;
    }
    *out = r;
    return AP_OK;
error:
    free(*threads);
    *threads = NULL;
    ap_report_free(r);
    return AP_ERR_NOMEM;
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
    ap_thread **threads;
    ap_report *r;
    if (report_new(s, &s->stop, &threads, &r) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    for (uint32_t k = 0; k < r->nthreads; k++) {
        r->nspans += threads[k]->nspans;
    }
    r->spans = malloc((size_t)(r->nspans ? r->nspans : 1) * sizeof(ap_span));
    /* the run's samples: the sampler starts just before the run and may
     * take one more between stop and its join */
    r->memory = malloc((s->rss.log_len ? s->rss.log_len : 1) *
                       sizeof(ap_rss_sample));
    if (!r->spans || !r->memory) {
        free(threads);
        ap_report_free(r);
        return AP_ERR_NOMEM;
    }
    int64_t offset = 0;
    for (uint32_t k = 0; k < r->nthreads; k++) {
        r->threads[k].first_span = offset;
        copy_spans(s, threads[k], r->threads[k].stage_of_node, r->spans,
                   offset);
        offset += threads[k]->nspans;
    }
    free(threads);
    for (uint32_t i = 0; i < s->rss.log_len; i++) {
        ap_rss_sample m = s->rss.log[i];
        if (m.t_ns <= r->stop_ns) {
            m.t_ns = m.t_ns < r->start_ns ? r->start_ns : m.t_ns;
            r->memory[r->nmemory++] = m;
        }
    }
    *out = r;
    return AP_OK;
}

static int64_t
open_calls(const ap_thread *t)
{
    int64_t n = 0;
    for (const ap_stack *k = t->stacks; k; k = k->next) {
        n += k->depth;
    }
    return n;
}

/* Appends thread t's recent calls, oldest first, then its open calls. */
static int64_t
snapshot_spans(const ap_session *s, const ap_clock_anchor *now,
               const ap_thread *t, const uint32_t *map, int64_t cpu_now,
               ap_span *out)
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
            const ap_frame *f = &st->frames[d];
            /* another thread's CPU clock is not ours to read */
            out[k++] = report_span(s, now, map, (ap_span){
                f->node, t->index, -1, AP_SPAN_UNCLOSED, f->t0, now->ticks,
                cpu_now >= 0 ? cpu_now - f->cpu0 : 0, f->items,
            });
        }
    }
    return k;
}

ap_status
ap_session_snapshot(ap_session *s, ap_report **out)
{
    if (ap_session_is_foreign(s)) {
        return AP_ERR_FORKED;
    }
    if (s->stopped) {
        return AP_ERR_INVALID;
    }
    ap_clock_anchor now = ap_clock_anchor_now();
    ap_thread **threads;
    ap_report *r;
    if (report_new(s, &now, &threads, &r) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    for (uint32_t k = 0; k < r->nthreads; k++) {
        r->threads[k].spans = open_calls(threads[k]);
        for (uint32_t n = 1; n < threads[k]->nnodes; n++) {
            r->threads[k].spans += threads[k]->nodes[n].nrecent;
        }
        r->nspans += r->threads[k].spans;
    }
    r->spans = malloc((size_t)(r->nspans ? r->nspans : 1) * sizeof(ap_span));
    r->memory = malloc(sizeof(ap_rss_sample));
    if (!r->spans || !r->memory) {
        free(threads);
        ap_report_free(r);
        return AP_ERR_NOMEM;
    }
    int64_t self = ap_session_thread_index(s);
    int64_t offset = 0;
    for (uint32_t k = 0; k < r->nthreads; k++) {
        r->threads[k].first_span = offset;
        offset += snapshot_spans(s, &now, threads[k],
                                 r->threads[k].stage_of_node,
                                 k == self ? ap_thread_cpu_ns() : -1,
                                 r->spans + offset);
    }
    free(threads);
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

void
ap_report_free(ap_report *r)
{
    if (!r) {
        return;
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
    if (node == ROOT_NODE || node >= t->nnodes || slot >= t->spans) {
        return AP_ERR_INVALID;
    }
    *stage = t->stage_of_node[node];
    *span = slot < 0 ? -1 : t->first_span + slot;
    return AP_OK;
}
