/* What a running session recorded since a mark: the figures of a profiler
 * nested in another. The session is one (the outer's) and goes on
 * recording untouched; an inner one marks the session at its start and,
 * at its stop, takes the figures since that mark and the difference of
 * the aggregates.
 *
 * Same threading contract as ap_session_snapshot: other threads must not
 * be inside ap_enter/ap_exit meanwhile. */
#ifndef AP_SESSION_SINCE_H
#define AP_SESSION_SINCE_H

#include <stdint.h>

#include "session.h"

typedef struct {
    int64_t ticks;     /* a call entered at or after it is "since" */
    uint64_t rss_seq;  /* RSS samples taken until then */
    int64_t rss;       /* RSS then, bytes; 0 with memory off */
} ap_mark;

/* The mark of now in s. */
ap_mark ap_session_mark(ap_session *s);

typedef struct {
    /* Aggregates: every call closed so far (as ap_session_snapshot), and
     * the calls open now that were entered since the mark, closed now as
     * ap_session_stop closes them (flagged unclosed, counted in
     * report->unclosed, CPU time for the caller's own calls only, and
     * suspended where their context was left).
     * Spans: with keep 0, every kept span entered since the mark, in
     * order on each thread, parents among them (else -1), those still
     * open flagged AP_SPAN_UNCLOSED and ending now; with keep > 0, as a
     * snapshot: of each stage on each thread the latest `keep` closed
     * calls entered since the mark that the session's window still holds,
     * then the open calls entered since, parents -1. Threads: all, their
     * spans counted here, dropped and cpu_reads totals so far. Memory: the
     * RSS now (memory on). */
    ap_report *report;
    int64_t since_ns;      /* the mark on the report's clock */
    int32_t caller_stage;  /* the caller's innermost call open since before
                            * the mark, as a report stage; -1 for none */
    int64_t rss_peak;      /* highest RSS at the mark or sampled since;
                            * 0 with memory off */
} ap_since;

/* Fills *out (its report to be freed with ap_report_free) with s's
 * figures since m, a mark of s; key: the calling thread's context key
 * now, as ap_session_stop takes it. AP_ERR_INVALID when s is stopped,
 * AP_ERR_FORKED, AP_ERR_NOMEM (nothing left allocated). */
ap_status ap_session_since(ap_session *s, const ap_mark *m, uint32_t keep,
                           uint64_t key, ap_since *out);

#endif
