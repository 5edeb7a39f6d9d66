/* One raw span: 48 bytes, the layout of the NumPy dtype the binding
 * exposes (aquaprof._core.SPAN_DTYPE). */
#ifndef AP_SPAN_H
#define AP_SPAN_H

#include <stdint.h>

enum {
    AP_SPAN_RAISED = 1,   /* left by an exception */
    AP_SPAN_UNCLOSED = 2, /* closed by stop() or by an enclosing stage's
                           * exit, not by its own */
    AP_SPAN_SUSPENDED = 4 /* its context was left while it was open (an
                           * await): its CPU time is the thread's, which
                           * ran other contexts meanwhile */
};

typedef struct {
    uint32_t stage;   /* stage path id (thread-local node while recording) */
    uint32_t thread;  /* thread index within the session */
    int32_t parent;   /* index of the enclosing span, -1 for none */
    uint32_t flags;
    int64_t start_ns; /* CLOCK_MONOTONIC in reports; ticks while recording */
    int64_t end_ns;
    int64_t cpu_ns;   /* thread CPU time while open */
    int64_t items;
} ap_span;

_Static_assert(sizeof(ap_span) == 48, "span record must stay 48 bytes");

#endif
