/* A Profiler started while another runs: the core keeps one session, so
 * the inner one shares the running session and takes its figures when it
 * starts and when it stops (aquaprof/nesting.py reports the difference).
 * The session goes on recording untouched. Running nests are listed, so
 * that the session's owner, stopping, first takes the figures of those
 * still running: a nest never outlives the session it marks. All of it
 * runs under the GIL. */
#ifndef AP_NEST_H
#define AP_NEST_H

#include "module.h"

#include "../core/session_since.h"

typedef struct ap_nest {
    struct ap_nest *prev, *next; /* in the list of running nests */
    ap_session *session;         /* borrowed while running, else NULL */
    ap_mark mark;
    int64_t pid;                 /* the process that started it */
    PyObject *owner;             /* borrowed: the object holding n */
    PyObject *base;              /* the figures at its start */
    PyObject *end;               /* at its stop; NULL before, or when they
                                  * could not be taken */
} ap_nest;

/* Starts n, held by owner, in the active session (one must be active):
 * takes its base figures and lists n. 0, or -1 with an exception set and
 * n untouched. */
int ap_nest_start(ap_module_state *st, ap_nest *n, PyObject *owner);

/* Ends n, taking its end figures unless it has ended already. 0; 1 when
 * n belongs to the parent of this forked process (nothing taken); -1
 * with an exception set when the figures could not be taken (n has ended
 * all the same). */
int ap_nest_stop(ap_module_state *st, ap_nest *n);

/* 1 while n records: started, not ended, in this process. */
int ap_nest_running(const ap_nest *n);

/* n's figures now, as a snapshot keeping the latest keep calls of each
 * stage (n must be running). NULL with an exception set. */
PyObject *ap_nest_snapshot(ap_module_state *st, ap_nest *n, uint32_t keep);

/* Ends every running nest of s, taking their figures now: the owner's
 * last word before s stops or is freed. Keeps any pending exception; a
 * nest whose figures cannot be taken ends without them. */
void ap_nests_end(ap_module_state *st, ap_session *s);

/* How many nests of s run in this process. */
int ap_nests_running(const ap_session *s);

/* Unlists n and drops its figures. */
void ap_nest_clear(ap_nest *n);

#endif
