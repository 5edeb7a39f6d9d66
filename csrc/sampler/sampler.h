/* The call-stack sampler behind aquaprof._core.Sampler, shared by its
 * files: sampler.c (its two threads), sample_round.c (one round: every
 * thread's stack, filed by stage), sample_store.c (what it keeps, plain
 * C), thread_wait.c (what a thread waited for, from /proc) and
 * sampler_cpython.c (what it needs of CPython's internals). The Python
 * object's methods are csrc/module/sampler_type.c's, the data as Python
 * objects csrc/module/sample_data.c's. docs/sampling.md says how it
 * samples and why. */
#ifndef AP_SAMPLER_H
#define AP_SAMPLER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>

#include "../core/session.h"
#include "sample_store.h"
#include "thread_wait.h"

/* Frames kept per sample, innermost first: deeper stacks lose their
 * outermost frames (a runaway recursion costs no more than this). */
#define AP_SAMPLE_DEPTH 256

/* What the sampler last saw of a thread: a thread that has not run since
 * (its CPU clock has not moved) still has the same stack, so it is
 * counted again without a walk; a server's idle threads cost little. */
typedef struct {
    int64_t tid;
    int64_t cpu_ns;         /* its CPU clock then */
    const void *top;        /* its innermost frame then (identity only) */
    int64_t stack;          /* the aggregate it was filed in, -1: none */
    int64_t round;          /* the last round that saw it */
    ap_wait_files files;    /* its /proc files, -1 when not open */
    int files_tried;        /* they were opened (or failed to) */
    int64_t delay_ns;       /* its run delay when last read, -1 unknown */
    int64_t delay_round;    /* the round that read it */
    int64_t delay_every;    /* rounds until an idle thread's next read */
    int64_t unread_ns;      /* off-CPU time sampled since */
    int sleeps;             /* where it slept then: AP_SLEEPS_ (the GIL's
                             * futex the range), -1 unknown */
    uint64_t node;          /* the stage path (ap_open_call's) it was in */
    int64_t path_ns;        /* that path's time on it then, -1 for none */
    int64_t path_cpu_ns;    /* ... and CPU time, its open call's included */
} ap_thread_seen;

struct ap_sampler;

static inline int64_t
ap_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What a round asked of the main thread reaches: the call may run after
 * the Sampler is gone, so this is freed by the last of its owners (the
 * Sampler, and the call queued). sampler is set and cleared with the
 * GIL held. */
typedef struct {
    _Atomic int refs;
    _Atomic int queued;      /* a call is waiting for the main thread */
    struct ap_sampler *sampler;
} ap_mailbox;

typedef struct ap_sampler {
    PyObject_HEAD
    PyObject *module;
    /* the stage stack an asyncio context records on, NULL for none: the
     * binding's, which owns the contexts (needs the GIL, never raises) */
    const ap_stack *(*context_stack)(PyObject *module, PyObject *context);
    /* a note of the thread threading knows by this ident (a weak
     * reference to it and its name then), NULL for none (the binding's:
     * runs no Python code, never raises) */
    PyObject *(*thread_note)(uint64_t ident);
    /* {tid: note} of the threads the store holds, each noted when first
     * sampled and named from it at the end: a pool's workers record no
     * stage that would name them */
    PyObject *names;
    ap_mailbox *box;
    _Atomic uint64_t want;   /* the round asked for, 0 when none */
    _Atomic int64_t unseen_ns;   /* time the sampler thread was kept off
                                  * the CPU past its ticks, not charged */
    _Atomic int64_t round_ns;    /* what the last round took */
    _Atomic int64_t unanswered;  /* ticks that found the last round not
                                  * yet taken (the GIL busy): replaced */
    _Atomic int64_t held_sum_ns; /* what all rounds took, for the ticker */
    int64_t interval_ns;
    ap_sample_store store;
    _Atomic int main_idle;   /* the main thread left the last round
                              * to the taker: the next is its too */
    _Atomic int64_t main_tid;    /* the main thread's, once it answered */
    _Atomic uint64_t main_sleeps;  /* (round << 2) | 1 + where the
                                    * main thread slept (AP_SLEEPS_, -1
                                    * unknown) as the ticker asked it
                                    * for that round */
    ap_wait_files main_files;    /* the ticker's, of the main thread */
    int main_files_open;         /* they were opened: closed with the
                                  * threads' (the memory starts zeroed,
                                  * and fd 0 is not ours) */
    pthread_mutex_t lock;
    pthread_cond_t wake;     /* the ticker's, stop() signals it */
    pthread_cond_t take;     /* the taker's */
    int quit;                /* lock: stop() asks the threads to end */
    int take_asked;          /* lock: the ticker asks the taker */
    int state;               /* 0 new, 1 running, 2 stopped */
    pid_t pid;               /* the process that started the threads */
    pthread_t ticker, taker;
    /* with the GIL: */
    int64_t rounds, late, last_ns;
    int64_t unseen_total;    /* unseen_ns, summed */
    int64_t held_ns;         /* what all rounds took */
    ap_thread_seen *seen;    /* each thread at its last sample */
    uint32_t nseen, seen_cap;
    uint32_t nfiles;         /* seen threads with their files open */
    uint32_t opened;         /* threads given their files this round */
    /* the GIL's condition variable and mutex, [lo, hi); 0, 0 unknown */
    uintptr_t gil_lo, gil_hi;
    _Atomic int64_t taker_tid;   /* set by the taker as it starts */
    int64_t delay_total, gil_total, lock_total;  /* what the samples
                                                  * stand for */
    int delay_known;         /* some thread's run delay could be read */
    int gil_known;           /* and where some thread slept */
    int taking_sleeps;       /* where the round's taker slept until it
                              * answered (the main thread): AP_SLEEPS_,
                              * -1 unknown */
    ap_path_map seen_index;  /* native id (high, low) -> its seen entry */
    int seen_index_ok;       /* the index could be made */
    void *threads;           /* a round's threads (sample_round.c) */
    uint32_t threads_cap;
    PyObject *gc_switches;   /* 3.9: (isenabled, disable, enable) */
} ap_sampler;

/* Takes round `round` unless taken already (GIL held); 1 when taken. */
int ap_take_round(ap_sampler *self, uint64_t round);

/* The sampler's figures as a dict (docs/report-format.md, samples). */
PyObject *ap_sample_data(ap_sampler *self);

/* Starts the ticker and the taker (GIL held): 0, or an errno value with
 * nothing started and nothing held. The threads hold a reference to self
 * until ap_sampler_end_threads joins them. */
int ap_sampler_start_threads(ap_sampler *self);

/* Ends the threads and waits for them, without the GIL the taker needs to
 * end; nothing when they do not run. */
void ap_sampler_end_threads(ap_sampler *self);

/* Closes every seen thread's /proc files. */
void ap_sampler_close_files(ap_sampler *self);

/* Drops one owner's hold on box, freeing it with the last. */
void ap_mailbox_release(ap_mailbox *box);

/* sampler_cpython.c. Queues func(arg) for the main thread to run at its
 * next bytecode boundary, from any thread, without the GIL: 0, or -1
 * when the queue is full. */
int ap_ask_main_thread(int (*func)(void *), void *arg);

/* Has the main thread look for its queued calls again soon. */
void ap_wake_main_thread(void);

/* Holds the lock under which threads join and leave the interpreter's
 * list (what sys._current_frames holds): a thread state seen under it is
 * whole. Nothing that may take it again (a new thread) may run while it
 * is held. */
void ap_threads_lock(void);
void ap_threads_unlock(void);

#endif
