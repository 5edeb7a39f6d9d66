/* Merging a stopped session's per-thread trees and span buffers into one
 * ap_report. */
#include <stdlib.h>
#include <unistd.h>

#include "session_internal.h"

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
            t->index, t->native_id, t->nspans, t->dropped, t->cpu_reads,
            NULL, t->nnodes, 0,
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
        r->threads[k].first_span = offset;
        copy_spans(s, threads[k], maps[k], r->spans, offset);
        offset += threads[k]->nspans;
    }
    /* the run's samples: the sampler starts just before the run and may
     * take one more between stop and its join */
    r->memory = malloc((s->rss.log_len ? s->rss.log_len : 1) *
                       sizeof(ap_rss_sample));
    if (!r->memory) {
        goto error;
    }
    for (uint32_t i = 0; i < s->rss.log_len; i++) {
        ap_rss_sample m = s->rss.log[i];
        if (m.t_ns <= r->stop_ns) {
            m.t_ns = m.t_ns < r->start_ns ? r->start_ns : m.t_ns;
            r->memory[r->nmemory++] = m;
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        r->threads[k].stage_of_node = maps[k];   /* handed over */
        maps[k] = NULL;
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
