/* One sampling round, with the GIL held: every thread's Python stack,
 * filed under the innermost stage open in the context it runs.
 *
 * The thread states are read under the lock of the interpreter's thread
 * list (a thread joining from C is put on it before the GIL is its), and
 * only what the round needs is kept of them: after the lock, a C thread
 * may free its state. The collector is off for the round: an allocation
 * in it (a frame object) could otherwise run a finalizer, which may
 * release the GIL and let the frames being walked go. */
#include "sampler.h"

#include <time.h>

#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>   /* PyFrame_GetBack */
#endif

#include "../core/where.h"

/* A thread that has not run is asked its run delay after 4 rounds, then
 * after twice as many each time it still has not, up to 64: an idle
 * server's threads would otherwise cost more than the rest of the round.
 * Nothing is lost: the delay is a running total, read in full when the
 * thread next runs or is next asked, and all of it waited at the stack
 * the thread still has. */
#define IDLE_DELAY_FIRST 4
#define IDLE_DELAY_MOST 64

/* A thread as the round found it under the lock: references to its
 * innermost frame and its context, and its ids. */
typedef struct {
    PyFrameObject *top;
    PyObject *context;
    uint64_t context_ver;
    uint64_t thread_id;      /* PyThread_get_thread_ident's */
    int64_t tid;             /* native, -1 where Python does not keep it */
} thread_now;

/* The thread's CPU clock in ns, -1 when it cannot be read. A clock made
 * from a thread id fails cleanly for a thread gone, unlike
 * pthread_getcpuclockid on a stale handle. */
static int64_t
thread_cpu_ns(int64_t tid)
{
#ifdef __linux__
    struct timespec ts;
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6);
    if (tid > 0 && clock_gettime(clock, &ts) == 0) {
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
#else
    (void)tid;
#endif
    return -1;
}

/* The key of a native thread id in a path map. */
static void
tid_key(int64_t tid, uint32_t *high, uint32_t *low)
{
    *high = (uint32_t)((uint64_t)tid >> 32);
    *low = (uint32_t)tid;
}

/* tid's entry, added when new; NULL for want of memory (the thread is
 * then walked every round). A lookup, not a scan: a round looks up every
 * thread, and a server may run thousands. */
static ap_thread_seen *
seen_of(ap_sampler *self, int64_t tid)
{
    uint32_t high, low, i;
    tid_key(tid, &high, &low);
    if (!self->seen_index_ok) {
        return NULL;
    }
    if (ap_path_map_find(&self->seen_index, high, low, &i)) {
        return &self->seen[i];
    }
    if (self->nseen == self->seen_cap) {
        uint32_t cap = self->seen_cap ? self->seen_cap * 2 : 16;
        ap_thread_seen *grown = PyMem_RawRealloc(self->seen,
                                                 cap * sizeof(*grown));
        if (!grown) {
            return NULL;
        }
        self->seen = grown;
        self->seen_cap = cap;
    }
    if (ap_path_map_reserve(&self->seen_index) != AP_OK) {
        return NULL;
    }
    ap_path_map_put(&self->seen_index, high, low, self->nseen);
    ap_thread_seen *t = &self->seen[self->nseen++];
    *t = (ap_thread_seen){.tid = tid, .cpu_ns = thread_cpu_ns(tid),
                          .stack = -1, .files = {-1, -1}, .delay_ns = -1,
                          .delay_round = self->rounds,
                          .delay_every = IDLE_DELAY_FIRST, .sleeps = -1,
                          .path_ns = -1};
    return t;
}

/* Opens the thread's /proc files once it has run while sampled, if this
 * round may still open some: a thread that never runs neither waits for
 * a CPU nor leaves the place it sleeps, and a server's hundreds of
 * threads given their files at once would make one round cost
 * milliseconds, the rounds after it waiting for the sampler's share of
 * the GIL to come back. What a thread waited before is not measured. */
static void
files_for(ap_sampler *self, ap_thread_seen *seen)
{
    if (seen->files_tried || self->nfiles >= AP_WAIT_FILES_MAX ||
        self->opened >= AP_WAIT_OPENS_PER_ROUND) {
        return;
    }
    seen->files_tried = 1;
    self->opened++;
    ap_wait_files_open(&seen->files, seen->tid);
    self->nfiles += seen->files.stat_fd >= 0 || seen->files.call_fd >= 0;
    seen->delay_ns = ap_run_delay_ns(&seen->files);
    seen->delay_round = self->rounds;
}

/* Forgets the threads this round did not see (they ended), so that a
 * thread per request costs nothing once gone; the index is made again
 * when one went (for want of memory, the cache is off from then on). */
static void
forget_ended(ap_sampler *self)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < self->nseen; i++) {
        if (self->seen[i].round == self->rounds) {
            self->seen[kept++] = self->seen[i];
        } else {
            ap_wait_files *files = &self->seen[i].files;
            self->nfiles -= files->stat_fd >= 0 || files->call_fd >= 0;
            ap_wait_files_close(files);
        }
    }
    if (kept == self->nseen || !self->seen_index_ok) {
        return;
    }
    self->nseen = kept;
    ap_path_map_free(&self->seen_index);
    self->seen_index_ok = ap_path_map_init(&self->seen_index, kept) == AP_OK;
    for (uint32_t i = 0; self->seen_index_ok && i < kept; i++) {
        uint32_t high, low;
        tid_key(self->seen[i].tid, &high, &low);
        ap_path_map_put(&self->seen_index, high, low, i);
    }
}

/* The threads running Python code now, into *out (PyMem_Raw, which runs
 * no collection); their number, those that did not fit counted as lost. */
static uint32_t
threads_now(ap_sampler *self, thread_now **out, uint32_t *cap)
{
    uint32_t n = 0;
    PyInterpreterState *interp =
        PyThreadState_GetInterpreter(PyThreadState_Get());
    ap_threads_lock();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts;
         ts = PyThreadState_Next(ts)) {
        PyFrameObject *top = PyThreadState_GetFrame(ts);
        if (top == NULL) {
            continue;   /* runs no Python code: the sampler among them */
        }
        if (n == *cap) {
            uint32_t more = *cap ? *cap * 2 : 64;
            thread_now *grown = PyMem_RawRealloc(*out, more * sizeof(**out));
            if (grown == NULL) {
                Py_DECREF(top);
                self->store.lost++;
                continue;
            }
            *out = grown;
            *cap = more;
        }
        int64_t tid = -1;
#if PY_VERSION_HEX >= 0x030B0000
        tid = (int64_t)ts->native_thread_id;
#endif
        Py_XINCREF(ts->context);
        (*out)[n++] = (thread_now){top, ts->context, ts->context_ver,
                                   ts->thread_id, tid};
    }
    ap_threads_unlock();
    return n;
}

#if PY_VERSION_HEX >= 0x030B0000
#define CODE_NAME(code) ((code)->co_qualname)
#else
#define CODE_NAME(code) ((code)->co_name)
#endif

/* Notes thread tid, new to the store, as threading knows it: in the
 * report, a thread that recorded no stage is named by this alone. A
 * note that cannot be kept (memory) leaves the thread labelled by its
 * tid; nothing is raised. */
static void
note_name(ap_sampler *self, int64_t tid, uint64_t thread_id)
{
    PyObject *name = self->thread_note(thread_id);
    if (name == NULL) {
        return;
    }
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *key = PyLong_FromLongLong(tid);
    if (key != NULL && self->names == NULL) {
        self->names = PyDict_New();
    }
    if (key != NULL && self->names != NULL) {
        (void)PyDict_SetItem(self->names, key, name);
    }
    Py_XDECREF(key);
    Py_DECREF(name);
    PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
}

/* Whether a frame's entry (function, file, line) still describes code:
 * the same strings (held by the entry, so never another's at their
 * address) and first line. */
static int
entry_is(PyObject *entry, PyCodeObject *code)
{
    return PyTuple_GET_ITEM(entry, 0) == CODE_NAME(code) &&
           PyTuple_GET_ITEM(entry, 1) == code->co_filename &&
           PyLong_AsLong(PyTuple_GET_ITEM(entry, 2)) == code->co_firstlineno;
}

/* The frame id of code: what it was, copied at first sight, never the
 * code object itself, whose constants (and a generated module's whole
 * data) the sampler would keep alive. 0, or -1 out of memory. */
static int
frame_id(ap_sampler *self, PyCodeObject *code, uint32_t *id)
{
    if (ap_sample_frame_find(&self->store, code, id) &&
        entry_is((PyObject *)self->store.entries[*id], code)) {
        return 0;
    }
    PyObject *entry = Py_BuildValue("(OOi)", CODE_NAME(code),
                                    code->co_filename, code->co_firstlineno);
    if (entry == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (ap_sample_frame_add(&self->store, code, entry, id) != AP_OK) {
        Py_DECREF(entry);
        return -1;
    }
    return 0;
}

/* The frame ids of the stack whose innermost frame is f (a reference,
 * taken), outermost first; 0 when a frame could not be added (counted as
 * lost). */
static uint32_t
stack_from(ap_sampler *self, PyFrameObject *f, uint32_t *ids)
{
    uint32_t n = 0;
    int failed = 0;
    while (f && n < AP_SAMPLE_DEPTH && !failed) {
        PyCodeObject *code = PyFrame_GetCode(f);
        failed = frame_id(self, code, &ids[n]) < 0;
        n += !failed;
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (failed) {
        self->store.lost++;
        return 0;
    }
    for (uint32_t i = 0; i < n / 2; i++) {
        uint32_t id = ids[i];
        ids[i] = ids[n - 1 - i];
        ids[n - 1 - i] = id;
    }
    return n;
}

/* The run delay of a thread since it was last read, within the off-CPU
 * time sampled and not yet explained by a delay; 0 when unknown or not
 * read this round. Linux adds a wait to the count only once it ends, so
 * a thread read while it waits tells it a round later: the off-CPU time
 * it stood in is carried over for it, not forgotten. */
static int64_t
delay_since(ap_sampler *self, ap_thread_seen *seen, int64_t off_cpu,
            int ran)
{
    seen->unread_ns += off_cpu;
    if (ran) {
        seen->delay_every = IDLE_DELAY_FIRST;
    } else if (self->rounds - seen->delay_round < seen->delay_every) {
        return 0;
    } else if (seen->delay_every < IDLE_DELAY_MOST) {
        seen->delay_every *= 2;
    }
    int64_t now = ap_run_delay_ns(&seen->files);
    int64_t delay = now >= 0 && seen->delay_ns >= 0 ? now - seen->delay_ns
                                                    : 0;
    int64_t room = seen->unread_ns;
    delay = delay < 0 ? 0 : delay < room ? delay : room;
    seen->delay_ns = now;
    seen->delay_round = self->rounds;
    seen->unread_ns = room - delay;
    self->delay_known |= now >= 0;
    return delay;
}

/* Where the thread sleeps now: on the GIL (AP_SLEEPS_IN_RANGE), on
 * another futex (a lock, a condition, another thread), elsewhere. The
 * thread taking the round holds the GIL: the main thread, answering once
 * it has it back, slept where the ticker saw it as it asked (on the GIL,
 * or on a lock taken before the GIL). One that has not run since the
 * last round sleeps where it slept then, once known. Without the GIL's
 * address no futex is told from it: elsewhere. */
static int
sleeps_where(ap_sampler *self, ap_thread_seen *seen, thread_now *th,
             int ran)
{
    if (!self->gil_hi) {
        return AP_SLEEPS_ELSEWHERE;
    }
    if (th->thread_id == PyThread_get_thread_ident()) {
        self->gil_known |= self->taking_sleeps >= 0;
        return self->taking_sleeps;
    }
    if (ran || seen->sleeps < 0) {
        seen->sleeps = ap_sleeps_on(&seen->files, self->gil_lo,
                                    self->gil_hi);
        self->gil_known |= seen->sleeps >= 0;
    }
    return seen->sleeps;
}

/* Splits a sample's times at its last `wall` ns, in which the thread
 * used `cpu` ns of CPU (its clock since the stage's call entered): *time
 * keeps those, *before gets the rest. A thread waits for a CPU when it
 * wants one, so the run delay is shared out as the CPU time was (as the
 * wall time where it used none), up to the last part's time off the
 * CPU: what is past it began earlier (a wait Linux counts once it ends,
 * such as the wake from a sleep before the stage), and goes before;
 * the GIL is a wait the thread is in now, kept up to what is left. */
static void
split_time(ap_sample_time *time, int64_t wall, int64_t cpu,
           ap_sample_time *before)
{
    ap_sample_time whole = *time;
    cpu = cpu < 0 ? 0 : cpu < whole.cpu_ns ? cpu : whole.cpu_ns;
    cpu = cpu < wall ? cpu : wall;
    double share = whole.cpu_ns > 0
                       ? (double)cpu / (double)whole.cpu_ns
                       : (double)wall / (double)whole.wall_ns;
    int64_t delay = (int64_t)((double)whole.delay_ns * share);
    int64_t room = wall - cpu;
    delay = delay < room ? delay : room;
    room -= delay;
    time->wall_ns = wall;
    time->cpu_ns = cpu;
    time->delay_ns = delay;
    time->gil_ns = whole.gil_ns < room ? whole.gil_ns : room;
    room -= time->gil_ns;
    time->lock_ns = whole.lock_ns < room ? whole.lock_ns : room;
    *before = (ap_sample_time){
        .wall_ns = whole.wall_ns - time->wall_ns,
        .cpu_ns = whole.cpu_ns - time->cpu_ns,
        .delay_ns = whole.delay_ns - time->delay_ns,
        .gil_ns = whole.gil_ns - time->gil_ns,
        .lock_ns = whole.lock_ns - time->lock_ns,
    };
}

/* Of the time since `seen` was last sampled, how long its thread spent
 * in the stage path of its open call (*in_ns) and the CPU time it used
 * there (*cpu_ns, -1 unknown): seen in the same path then, from the
 * path's own clock, its calls' time since (the open one's so far
 * included), and 1; else the open call's alone, and 0. Notes the path's
 * clock for the next sample. */
static int
time_in_stage(ap_thread_seen *seen, const ap_open_call *call,
              int64_t cpu_now, int64_t *in_ns, int64_t *cpu_ns)
{
    int open = call->open_ns >= 0;
    int64_t call_cpu = open && cpu_now >= 0 ? cpu_now - call->cpu0_ns : -1;
    int same = seen && open && seen->path_ns >= 0 &&
               seen->node == call->node;
    *in_ns = call->open_ns;
    *cpu_ns = call_cpu;
    if (same) {
        *in_ns = call->path_ns - seen->path_ns;
        *cpu_ns = call_cpu >= 0 && seen->path_cpu_ns >= 0
                      ? call->path_cpu_ns + call_cpu - seen->path_cpu_ns
                      : -1;
    }
    if (seen) {
        seen->node = call->node;
        seen->path_ns = open ? call->path_ns : -1;
        seen->path_cpu_ns = call_cpu >= 0 ? call->path_cpu_ns + call_cpu
                                          : -1;
    }
    return same;
}

/* Samples thread th at t, standing for wall ns; takes its references. */
static void
sample_thread(ap_sampler *self, thread_now *th, int64_t t, int64_t wall,
              uint32_t *ids)
{
    ap_thread_seen *seen = th->tid > 0 ? seen_of(self, th->tid) : NULL;
    int64_t cpu = -1, cpu_now = -1, before_stack = -1;
    ap_sample_time time = {.wall_ns = wall};
    if (seen) {
        seen->round = self->rounds;
        cpu_now = thread_cpu_ns(th->tid);
        cpu = cpu_now >= 0 && seen->cpu_ns >= 0 ? cpu_now - seen->cpu_ns
                                                 : -1;
        seen->cpu_ns = cpu_now;
        time.cpu_ns = cpu < 0 ? 0 : cpu < wall ? cpu : wall;
        time.tick_cpu_ns = time.cpu_ns;
        if (cpu != 0) {
            files_for(self, seen);
        }
        time.delay_ns = delay_since(self, seen, wall - time.cpu_ns,
                                    cpu != 0);
        int64_t asleep = wall - time.cpu_ns - time.delay_ns;
        int where = sleeps_where(self, seen, th, cpu != 0);
        if (asleep > 0 && where == AP_SLEEPS_IN_RANGE) {
            time.gil_ns = asleep;
        } else if (asleep > 0 && where == AP_SLEEPS_ON_FUTEX) {
            time.lock_ns = asleep;
        }
        self->delay_total += time.delay_ns;
        self->gil_total += time.gil_ns;
        self->lock_total += time.lock_ns;
        if (cpu == 0 && seen->top == (const void *)th->top &&
            seen->stack >= 0) {
            /* it has not run: same stack, same stage, the open call's
             * time grown by the sample's */
            ap_sample_again(&self->store, t, (uint32_t)seen->stack, &time);
            if (seen->path_ns >= 0) {
                seen->path_ns += wall;
            }
            Py_DECREF(th->top);
            Py_XDECREF(th->context);
            return;
        }
        seen->top = th->top;
        before_stack = seen->stack;
        seen->stack = -1;
    }
    int64_t tid = th->tid;
    ap_open_call call;
    int64_t stage = ap_stage_now(th->thread_id, th->context_ver,
                                 self->context_stack(self->module,
                                                     th->context), &tid,
                                 &call);
    Py_XDECREF(th->context);
    ap_sample_time before = {.wall_ns = 0};
    int64_t in_ns, in_cpu;
    int same = time_in_stage(seen, &call, cpu_now, &in_ns, &in_cpu);
    if (call.open_ns >= 0 && in_ns < time.wall_ns) {
        /* a thread that ran since its last sample may have been out of
         * its stage part of the time: what it did and waited there is
         * not the stage's (a late round on a starved machine filed the
         * code and run delay before a sleep under the sleep). Seen in
         * the same path before, the rest was outside it, where is not
         * known; else it goes to the stack the thread was last seen in */
        split_time(&time, in_ns < 0 ? 0 : in_ns,
                   in_cpu < 0 ? time.cpu_ns : in_cpu, &before);
        if (same) {
            before_stack = -1;
        }
    }
    int64_t off_cpu = time.wall_ns - time.cpu_ns;
    if (time.delay_ns > off_cpu && before_stack >= 0) {
        /* more run delay than the sample was off the CPU: a wait Linux
         * told a round late, which ended before this sample began, in
         * the stack the thread was last seen in */
        before.delay_ns += time.delay_ns - off_cpu;
        time.delay_ns = off_cpu;
    }
    if (tid < 0) {
        tid = (int64_t)th->thread_id;   /* 3.9/3.10, never recorded */
    }
    uint32_t n = stack_from(self, th->top, ids);
    uint32_t stack, ntids = self->store.ntids;
    if (n && ap_sample_add(&self->store, t, tid, stage, ids, n, &time,
                           &stack) == AP_OK && seen) {
        seen->stack = stack;
    }
    if (self->store.ntids > ntids) {
        note_name(self, tid, th->thread_id);
    }
    if ((before.wall_ns > 0 || before.delay_ns > 0) && before_stack >= 0) {
        ap_sample_fold(&self->store, (uint32_t)before_stack, &before);
    }
}

/* Turns the collector off for the round; whether it was on. */
static int
collector_off(ap_sampler *self)
{
#if PY_VERSION_HEX >= 0x030A0000
    (void)self;
    return PyGC_Disable();
#else
    PyObject *on = PyObject_CallNoArgs(PyTuple_GET_ITEM(self->gc_switches,
                                                        0));
    int was = on ? PyObject_IsTrue(on) == 1 : 0;
    Py_XDECREF(on);
    Py_XDECREF(PyObject_CallNoArgs(PyTuple_GET_ITEM(self->gc_switches, 1)));
    PyErr_Clear();
    return was;
#endif
}

static void
collector_on(ap_sampler *self)
{
#if PY_VERSION_HEX >= 0x030A0000
    (void)self;
    PyGC_Enable();
#else
    Py_XDECREF(PyObject_CallNoArgs(PyTuple_GET_ITEM(self->gc_switches, 2)));
    PyErr_Clear();
#endif
}

static void
sample_round(ap_sampler *self)
{
    int64_t t = ap_now_ns();
    int64_t wall = self->rounds ? t - self->last_ns : self->interval_ns;
    if (self->rounds && wall > 2 * self->interval_ns) {
        self->late++;
    }
    /* A sampler woken late by a busy machine still charges each thread
     * the whole interval: the stages' own clocks split it where the
     * thread changed stage meanwhile, and a thread starved beside the
     * sampler would otherwise lose the run delay that says so. How late
     * the ticker woke is kept as a sign of that machine. */
    self->unseen_total += atomic_exchange(&self->unseen_ns, 0);
    wall = wall > self->interval_ns / 2 ? wall : self->interval_ns / 2;
    self->rounds++;
    self->last_ns = t;
    self->opened = 0;
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);   /* the interrupted code's */
    int collecting = collector_off(self);
    thread_now *threads = self->threads;   /* kept between rounds */
    uint32_t n = threads_now(self, &threads, &self->threads_cap);
    self->threads = threads;
    uint32_t ids[AP_SAMPLE_DEPTH];
    for (uint32_t i = 0; i < n; i++) {
        sample_thread(self, &threads[i], t, wall, ids);
    }
    if (collecting) {
        collector_on(self);
    }
    PyErr_Restore(exc_type, exc, tb);
    forget_ended(self);
    int64_t took = ap_now_ns() - t;
    self->held_ns += took;
    atomic_store(&self->round_ns, took);
    atomic_fetch_add(&self->held_sum_ns, took);
}

int
ap_take_round(ap_sampler *self, uint64_t round)
{
    uint64_t expected = round;
    if (!round ||
        !atomic_compare_exchange_strong(&self->want, &expected, 0)) {
        return 0;
    }
    /* the main thread answering: where the ticker saw it as it asked */
    uint64_t seen = atomic_load(&self->main_sleeps);
    self->taking_sleeps =
        pthread_equal(pthread_self(), self->taker) || seen >> 2 != round
            ? -1
            : (int)(seen & 3) - 1;
    sample_round(self);
    return 1;
}
