/* The call-stack sampler: every interval, the Python call stack of every
 * thread of the interpreter is recorded, each filed under the innermost
 * stage open in the context that thread runs (csrc/core/where.h; a
 * round: sample_round.c).
 *
 * Frames can only be walked safely while their threads cannot change
 * them, that is with the GIL; a sampler must never crash the program it
 * watches, so no signal handler walks frames and no raw memory is read.
 * Waiting for the GIL would make the samples lie: a thread running Python
 * hands it over only after its switch interval (5 ms), or at its next
 * blocking call, so short bursts of Python would go unseen and the waits
 * after them be over-counted; forcing a switch every round costs two
 * context switches. So two threads:
 * - the ticker, which holds no GIL and never waits for it, asks each
 *   round of the main thread, which runs it between two bytecodes within
 *   microseconds while it runs Python (sampler_cpython.c), at no switch;
 * - the taker, which the ticker wakes when the main thread left a round
 *   unanswered (it waited, or ran C code without the GIL), takes the
 *   round with the GIL, which is then free or soon is. While it waits
 *   for the GIL, the ticker ticks on.
 * A round is taken once, by whichever side claims it first; each sample
 * stands for the wall time since the previous round, so shares stay
 * right when a round comes late. */
#include "sampler.h"

#include "../core/quiet_thread.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

void
ap_mailbox_release(ap_mailbox *box)
{
    if (atomic_fetch_sub(&box->refs, 1) == 1) {
        free(box);
    }
}

/* Runs on the main thread between two bytecodes, with the GIL. */
static int
on_main_thread(void *arg)
{
    ap_mailbox *box = arg;
    atomic_store(&box->queued, 0);
    ap_sampler *self = box->sampler;
#ifdef __linux__
    if (self && !atomic_load(&self->main_tid)) {
        atomic_store(&self->main_tid, (int64_t)syscall(SYS_gettid));
    }
#endif
    if (self && ap_take_round(self, atomic_load(&self->want))) {
        atomic_store(&self->main_idle, 0);
    }
    ap_mailbox_release(box);
    return 0;   /* never an error: it would raise in the program */
}

/* Asks the main thread for the round wanted; a call still queued takes
 * it when it runs. */
static void
ask_main_thread(ap_mailbox *box)
{
    if (atomic_exchange(&box->queued, 1)) {
        return;
    }
    atomic_fetch_add(&box->refs, 1);
    if (ap_ask_main_thread(on_main_thread, box) != 0) {   /* queue full */
        atomic_store(&box->queued, 0);
        ap_mailbox_release(box);
    }
}

/* Sleeps until deadline (CLOCK_MONOTONIC ns); 1 when stop() asked. */
static int
wait_until(ap_sampler *self, int64_t deadline)
{
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
    pthread_mutex_lock(&self->lock);
    while (!self->quit &&
           pthread_cond_timedwait(&self->wake, &self->lock, &ts) !=
               ETIMEDOUT) {
    }
    int quit = self->quit;
    pthread_mutex_unlock(&self->lock);
    return quit;
}

/* Rounds hold the GIL at most HELD_SHARE of the time: 1/12.5, so that
 * with the thread switches a round taken by the taker costs, sampling
 * costs the program at most a tenth (many threads to walk make long
 * rounds: docs/benchmarks.md, "What the first-law fixes cost and
 * saved"). */
#define HELD_SPACING 12      /* a round's time to the next round */

/* The tick after one at t: an interval on, missed ticks not owed, and far
 * enough that the last round and all rounds keep to the share. */
static int64_t
next_tick(ap_sampler *self, int64_t next, int64_t t, int64_t started)
{
    next += self->interval_ns;
    if (next <= t) {
        next = t + self->interval_ns;
    }
    int64_t after_last = t + HELD_SPACING * atomic_load(&self->round_ns);
    int64_t after_all = started + atomic_load(&self->held_sum_ns) * 25 / 2;
    next = next < after_last ? after_last : next;
    return next < after_all ? after_all : next;
}

/* Where the main thread sleeps (on the GIL, a lock, elsewhere) as the
 * ticker asks it for round. A main thread that answers the round once it
 * has the GIL back, or its lock, runs as it takes it, so only the ticker,
 * which holds no GIL, can see where it waited until then
 * (sample_round.c, sleeps_where). */
static void
note_main_sleeps(ap_sampler *self, uint64_t round)
{
    int64_t tid = atomic_load(&self->main_tid);
    if (!self->gil_hi || tid <= 0) {
        return;
    }
    if (!self->main_files_open) {
        ap_wait_call_open(&self->main_files, tid);
        self->main_files_open = 1;
    }
    int sleeps = ap_sleeps_on(&self->main_files, self->gil_lo, self->gil_hi);
    atomic_store(&self->main_sleeps, round << 2 | (uint64_t)(sleeps + 1));
}

/* The ticker: no Python thread state, never the GIL. */
static void *
ticker_main(void *arg)
{
    ap_sampler *self = arg;
    uint64_t round = 0;
    int64_t started = ap_now_ns();
    int64_t next = started + self->interval_ns;
    while (!wait_until(self, next)) {
        int64_t overslept = ap_now_ns() - next;
        if (overslept > self->interval_ns / 2) {
            atomic_fetch_add(&self->unseen_ns, overslept);
        }
        note_main_sleeps(self, round + 1);
        /* a round still wanted is replaced: one sample a tick */
        uint64_t unanswered = atomic_exchange(&self->want, ++round);
        if (unanswered) {
            atomic_fetch_add(&self->unanswered, 1);
        }
        ask_main_thread(self->box);
        if (unanswered || atomic_load(&self->main_idle)) {
            pthread_mutex_lock(&self->lock);
            self->take_asked = 1;
            pthread_cond_signal(&self->take);
            pthread_mutex_unlock(&self->lock);
        }
        next = next_tick(self, next, ap_now_ns(), started);
    }
    return NULL;
}

/* Waits for the ticker's word; 1 when stop() asked. */
static int
wait_for_word(ap_sampler *self)
{
    pthread_mutex_lock(&self->lock);
    while (!self->quit && !self->take_asked) {
        pthread_cond_wait(&self->take, &self->lock);
    }
    self->take_asked = 0;
    int quit = self->quit;
    pthread_mutex_unlock(&self->lock);
    return quit;
}

/* The taker: the GIL, for the rounds the main thread leaves. */
static void *
taker_main(void *arg)
{
    ap_sampler *self = arg;
#ifdef __linux__
    atomic_store(&self->taker_tid, (int64_t)syscall(SYS_gettid));
#endif
    PyGILState_STATE gil = PyGILState_Ensure();
    PyThreadState *saved = PyEval_SaveThread();
    while (!wait_for_word(self)) {
        PyEval_RestoreThread(saved);
        if (ap_take_round(self, atomic_load(&self->want))) {
            atomic_store(&self->main_idle, 1);
        }
        saved = PyEval_SaveThread();
    }
    PyEval_RestoreThread(saved);
    PyGILState_Release(gil);
    return NULL;
}

/* Where the GIL's condition variable and mutex lie, [lo, hi): the taker
 * asks for the GIL as it starts, while start() holds it, and sleeps in a
 * futex on the condition variable, the mutex next to it. The address is
 * taken once it holds for two reads; the process keeps it (a forked child
 * has the same). 0, 0 when not found within GIL_SEEK_NS. */
#define GIL_SEEK_NS 50000000
#define GIL_SPAN 64   /* the condition variable and mutex about it */

static void
find_gil(ap_sampler *self)
{
    static PyInterpreterState *known_interp;
    static uintptr_t known_lo, known_hi;
    PyInterpreterState *interp =
        PyThreadState_GetInterpreter(PyThreadState_Get());
    if (known_interp != interp) {
        uintptr_t last = 0, addr;
        int64_t until = ap_now_ns() + GIL_SEEK_NS;
        known_lo = known_hi = 0;
        while (ap_now_ns() < until) {
            int64_t tid = atomic_load(&self->taker_tid);
            int found = tid > 0 ? ap_futex_of(tid, &addr) : 0;
            if (found < 0) {
                break;      /* no such file here: nothing to wait for */
            }
            if (found) {
                if (addr == last) {
                    known_lo = addr - GIL_SPAN;
                    known_hi = addr + GIL_SPAN;
                    break;
                }
                last = addr;
            }
            nanosleep(&(struct timespec){0, 200000}, NULL);
        }
        known_interp = interp;
    }
    self->gil_lo = known_lo;
    self->gil_hi = known_hi;
}

int
ap_sampler_start_threads(ap_sampler *self)
{
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (!err) {
        err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (!err) {
            err = pthread_cond_init(&self->wake, &attr);
        }
        pthread_condattr_destroy(&attr);
    }
    if (!err && (err = pthread_cond_init(&self->take, NULL)) != 0) {
        pthread_cond_destroy(&self->wake);
    }
    if (err) {
        return err;
    }
    pthread_mutex_init(&self->lock, NULL);
    self->quit = 0;
    self->pid = getpid();
    err = ap_quiet_thread(&self->taker, taker_main, self);
    if (!err) {
        find_gil(self);
        err = ap_quiet_thread(&self->ticker, ticker_main, self);
        if (err) {
            pthread_mutex_lock(&self->lock);
            self->quit = 1;
            pthread_cond_signal(&self->take);
            pthread_mutex_unlock(&self->lock);
            Py_BEGIN_ALLOW_THREADS
            pthread_join(self->taker, NULL);
            Py_END_ALLOW_THREADS
        }
    }
    if (err) {
        pthread_cond_destroy(&self->wake);
        pthread_cond_destroy(&self->take);
        pthread_mutex_destroy(&self->lock);
        return err;
    }
    Py_INCREF(self);   /* the threads', until stop() joins them */
    self->box->sampler = self;
    self->state = 1;
    return 0;
}

/* Ends the threads and waits for them, without the GIL the taker needs to
 * end. In a forked child there are none: only the state changes. On the
 * taker itself (a finalizer run in a round) they are only asked to end:
 * stop() cannot wait for its own thread. */
void
ap_sampler_end_threads(ap_sampler *self)
{
    if (self->state != 1) {
        return;
    }
    int own = self->pid == getpid();
    int taker = own && pthread_equal(pthread_self(), self->taker);
    if (own) {
        pthread_mutex_lock(&self->lock);
        self->quit = 1;
        pthread_cond_signal(&self->wake);
        pthread_cond_signal(&self->take);
        pthread_mutex_unlock(&self->lock);
    }
    if (taker) {
        return;
    }
    self->state = 2;
    self->box->sampler = NULL;   /* a call still queued finds no one */
    if (!own) {
        return;
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->ticker, NULL);
    pthread_join(self->taker, NULL);
    Py_END_ALLOW_THREADS
    pthread_cond_destroy(&self->wake);
    pthread_cond_destroy(&self->take);
    pthread_mutex_destroy(&self->lock);
    Py_DECREF(self);
}

/* The threads' /proc files, closed once no round can come: a stopped
 * sampler kept by its report holds no file descriptor. */
void
ap_sampler_close_files(ap_sampler *self)
{
    for (uint32_t i = 0; i < self->nseen; i++) {
        ap_wait_files_close(&self->seen[i].files);
    }
    self->nfiles = 0;
    if (self->main_files_open) {
        ap_wait_files_close(&self->main_files);
        self->main_files_open = 0;
    }
}

