/* The figures of a running session since a mark (session_since.h): the
 * merged aggregates as a snapshot has them, the calls opened since the
 * mark and still open closed on the report's copy only, and the spans
 * entered since the mark. */
#include "session_since.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "session_internal.h"

ap_mark
ap_session_mark(ap_session *s)
{
    ap_mark m = {0, 0, 0};
    if (s->config.memory) {
        m.rss_seq = atomic_load_explicit(&s->rss.seq, memory_order_acquire);
        m.rss = atomic_load_explicit(&s->rss.current, memory_order_relaxed);
    }
    m.ticks = ap_ticks();
    return m;
}

/* The first of t's span slots entered at or after tick since: slots are
 * handed out in the order calls are entered. */
static int64_t
first_since(ap_thread *t, int64_t since)
{
    int64_t lo = 0, hi = t->nspans;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (span_at(t, mid)->start_ns < since) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Adds to r's aggregates t's calls open now that were entered at or after
 * since, innermost first, each one's wall time taken from its parent's
 * self time as stop() does. */
static void
close_open_calls(ap_session *s, const ap_thread *t, const uint32_t *map,
                 int64_t since, int64_t now, int64_t cpu_now, uint64_t key,
                 ap_report *r)
{
    int64_t rss = 0;
    uint64_t seq = 0;
    if (s->config.memory) {
        seq = atomic_load_explicit(&s->rss.seq, memory_order_acquire);
        rss = atomic_load_explicit(&s->rss.current, memory_order_relaxed);
    }
    for (const ap_stack *k = t->stacks; k; k = k->next) {
        int64_t above = 0;
        for (uint32_t d = k->depth; d-- > 0;) {
            const ap_frame *f = &k->frames[d];
            if (f->t0 < since) {
                break;   /* and so were the calls below it */
            }
            ap_span sp = ap_open_span(t, k, f, now, cpu_now, key);
            int64_t wall = ap_ticks_to_ns(sp.end_ns - sp.start_ns);
            wall = wall < 0 ? 0 : wall;
            ap_stats *st = &r->stages[map[f->node]].stats;
            if (ap_stats_add(st, wall, wall - f->child_ns - above, sp.cpu_ns,
                             f->items) != AP_OK) {
                r->lost++;
            }
            st->unclosed++;
            st->suspended += (sp.flags & AP_SPAN_SUSPENDED) != 0;
            if (s->config.memory) {
                frame_memory(s, f, seq, rss, now, st);
            }
            r->unclosed++;
            above = wall;
        }
    }
}

/* Copies t's spans from slot `first` on into out: parents before first
 * become -1, the calls still open end now, flagged. */
static void
copy_spans_since(const ap_session *s, const ap_clock_anchor *now,
                 ap_thread *t, const uint32_t *map, int64_t first,
                 int64_t cpu_now, uint64_t key, ap_span *out, int64_t offset)
{
    for (int64_t i = first; i < t->nspans; i++) {
        out[offset + i - first] = *span_at(t, i);
    }
    for (const ap_stack *k = t->stacks; k; k = k->next) {
        for (uint32_t d = 0; d < k->depth; d++) {
            const ap_frame *f = &k->frames[d];
            if (f->span >= first) {
                ap_span *sp = &out[offset + f->span - first];
                ap_span open = ap_open_span(t, k, f, now->ticks, cpu_now, key);
                sp->end_ns = open.end_ns;
                sp->cpu_ns = open.cpu_ns;
                sp->flags = open.flags;
            }
        }
    }
    for (int64_t i = offset; i < offset + t->nspans - first; i++) {
        ap_span sp = report_span(s, now, map, out[i]);
        sp.parent = sp.parent >= first ? (int32_t)(sp.parent - first + offset)
                                       : -1;
        out[i] = sp;
    }
}

static const ap_span *
ring_at(const ap_thread *t, const ap_node *node, uint32_t i)
{
    uint32_t first = node->nrecent < t->window ? 0 : node->recent_at;
    uint32_t at = first + i < t->window ? first + i : first + i - t->window;
    return &node->recent[at];
}

/* Of the window's calls of node entered at or after since, the latest
 * keep into out, oldest first (with out NULL, only counts them). */
static int64_t
recent_since(const ap_session *s, const ap_clock_anchor *now,
             const ap_thread *t, const ap_node *node, const uint32_t *map,
             int64_t since, uint32_t keep, ap_span *out)
{
    int64_t found = 0;
    for (uint32_t i = 0; i < node->nrecent; i++) {
        found += ring_at(t, node, i)->start_ns >= since;
    }
    int64_t skip = found > (int64_t)keep ? found - (int64_t)keep : 0;
    if (!out) {
        return found - skip;
    }
    int64_t k = 0, seen = 0;
    for (uint32_t i = 0; i < node->nrecent; i++) {
        const ap_span *sp = ring_at(t, node, i);
        if (sp->start_ns >= since && seen++ >= skip) {
            out[k++] = report_span(s, now, map, *sp);
        }
    }
    return k;
}

/* keep > 0: the latest calls of each stage kept in the window, then the
 * open calls; returns how many (with out NULL, only counts them). */
static int64_t
snapshot_since(const ap_session *s, const ap_clock_anchor *now,
               const ap_thread *t, const uint32_t *map, int64_t since,
               uint32_t keep, int64_t cpu_now, uint64_t key, ap_span *out)
{
    int64_t k = 0;
    for (uint32_t n = 1; t->window && t->nodes && n < t->nnodes; n++) {
        k += recent_since(s, now, t, &t->nodes[n], map, since, keep,
                          out ? out + k : NULL);
    }
    for (const ap_stack *st = t->stacks; st; st = st->next) {
        for (uint32_t d = 0; d < st->depth; d++) {
            const ap_frame *f = &st->frames[d];
            if (f->t0 < since) {
                continue;
            }
            if (out) {
                out[k] = report_span(s, now, map,
                                     ap_open_span(t, st, f, now->ticks,
                                                  cpu_now, key));
            }
            k++;
        }
    }
    return k;
}

/* The report stage of the calling context's innermost call entered before
 * since and open now, -1 for none. */
static int32_t
caller_stage(const ap_thread *t, const uint32_t *map, int64_t since)
{
    const ap_stack *k = t->cur;
    for (uint32_t d = k->depth; d-- > 0;) {
        if (k->frames[d].t0 < since) {
            return (int32_t)map[k->frames[d].node];
        }
    }
    return k->base_node == ROOT_NODE ? -1 : (int32_t)map[k->base_node];
}

ap_status
ap_session_since(ap_session *s, const ap_mark *m, uint32_t keep,
                 uint64_t key, ap_since *out)
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
    /* a thread's exit merges and trims its record under this lock */
    pthread_mutex_lock(&s->lock);
    int64_t self = ap_session_thread_index(s);
    int64_t cpu_now = self >= 0 ? ap_thread_cpu_ns() : -1;
    ap_thread **threads = ap_calloc(s->nthreads ? s->nthreads : 1,
                                    sizeof(*threads));
    int64_t *first = ap_calloc(s->nthreads ? s->nthreads : 1,
                               sizeof(*first));
    if (!threads || !first || ap_snapshot_base_locked(s, &now, r) != AP_OK) {
        goto nomem;
    }
    for (ap_thread *t = s->all; t; t = t->next_all) {
        threads[t->index] = t;
    }
    for (uint32_t k = 0; k < r->nthreads; k++) {
        ap_thread *t = threads[k];
        const uint32_t *map = r->threads[k].stage_of_node;
        int64_t cpu = (int64_t)k == self ? cpu_now : -1;
        uint64_t now_key = ap_thread_key_now(t, self, key);
        close_open_calls(s, t, map, m->ticks, now.ticks, cpu, now_key, r);
        first[k] = first_since(t, m->ticks);
        r->threads[k].spans =
            keep ? snapshot_since(s, &now, t, map, m->ticks, keep, cpu,
                                  now_key, NULL)
                 : t->nspans - first[k];
        r->threads[k].recorded = r->threads[k].spans;
        r->nspans += r->threads[k].spans;
    }
    r->spans = ap_malloc((size_t)(r->nspans ? r->nspans : 1) *
                         sizeof(ap_span));
    r->memory = ap_malloc(sizeof(ap_rss_sample));
    if (!r->spans || !r->memory) {
        goto nomem;
    }
    int64_t offset = 0;
    for (uint32_t k = 0; k < r->nthreads; k++) {
        ap_thread *t = threads[k];
        const uint32_t *map = r->threads[k].stage_of_node;
        int64_t cpu = (int64_t)k == self ? cpu_now : -1;
        uint64_t now_key = ap_thread_key_now(t, self, key);
        r->threads[k].first_span = offset;
        if (keep) {
            snapshot_since(s, &now, t, map, m->ticks, keep, cpu, now_key,
                           r->spans + offset);
        } else {
            copy_spans_since(s, &now, t, map, first[k], cpu, now_key,
                             r->spans, offset);
        }
        offset += r->threads[k].spans;
    }
    *out = (ap_since){r, ticks_to_monotonic(s, &now, m->ticks),
                      self >= 0 ? caller_stage(threads[self],
                                               r->threads[self].stage_of_node,
                                               m->ticks)
                                : -1,
                      0};
    pthread_mutex_unlock(&s->lock);
    if (s->config.memory) {
        int64_t rss = atomic_load_explicit(&s->rss.current,
                                           memory_order_relaxed);
        int64_t peak = rss > m->rss ? rss : m->rss;
        int64_t seen = ap_rss_peak_since(&s->rss, m->rss_seq);
        out->rss_peak = seen > peak ? seen : peak;
        r->memory[r->nmemory++] = (ap_rss_sample){r->stop_ns, rss};
    }
    free(first);
    free(threads);
    return AP_OK;
nomem:
    pthread_mutex_unlock(&s->lock);
    free(first);
    free(threads);
    ap_report_free(r);
    return AP_ERR_NOMEM;
}
