/* aquaprof._core.Sampler: a thread that, every interval, has the Python
 * call stack of every thread of the interpreter recorded, each filed under
 * the innermost stage open in the context that thread runs
 * (csrc/core/where.h).
 *
 * Frames can only be walked safely while their threads cannot change
 * them, that is with the GIL; a sampler must never crash the program it
 * watches, so no signal handler walks frames and no raw memory is read.
 * Waiting for the GIL would make the samples lie: a thread running Python
 * hands the GIL over only after its switch interval (5 ms), or at its
 * next blocking call, so short bursts of Python would go unseen and the
 * waits after them be over-counted; forcing a switch every round costs
 * two context switches (about 100 us on a VM). So while the main thread
 * is on the CPU, a round is asked of it the way CPython delivers a
 * signal: PyErr_SetInterruptEx trips a signal number nobody handles
 * (the Python layer installs take() as its handler), and the main thread
 * runs take() between two bytecodes, within microseconds, with no real
 * signal sent and no system call interrupted. Otherwise, or when it does
 * not answer in a quarter of an interval (it runs C code), the sampler
 * takes the GIL itself, which is then free or soon is. A round is taken
 * once, by whichever side claims it first. Each sample stands for the
 * wall time since the previous round, so shares stay right when a round
 * comes late. */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/where.h"
#include "sample_store.h"
#include "sampler_wake.h"

/* Frames kept per sample, innermost first: deeper stacks lose their
 * outermost frames (a runaway recursion costs no more than this). */
#define AP_SAMPLE_DEPTH 256

typedef struct {
    int64_t tid;
    int64_t cpu_ns;
} cpu_seen;

typedef struct SamplerObject {
    PyObject_HEAD
    PyObject *module;
    _Atomic uint64_t want;  /* the round asked for, 0 when none */
    _Atomic int64_t unseen_ns;  /* time the sampler thread itself was
                                 * kept off the CPU past its tick */
    int signum;             /* tripped to ask the main thread, 0: never */
    int64_t main_tid;       /* the main thread's native id */
    int64_t main_cpu_ns, main_seen_ns;  /* its CPU clock when last read */
    int main_stat;          /* its /proc stat file, -1 when not open */
    int64_t interval_ns;
    ap_sample_store store;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int quit;               /* lock: stop() asks the thread to end */
    int state;              /* 0 new, 1 running, 2 stopped */
    pid_t pid;              /* the process that started the thread */
    pthread_t thread;
    int64_t rounds, late, last_ns;
    int64_t unseen_total;   /* unseen_ns, summed */
    uint64_t served;        /* lock: the last round taken */
    cpu_seen *cpu;          /* CPU clock of each thread at its last sample */
    uint32_t ncpu, cpu_cap;
} SamplerObject;

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPU time thread tid used since its last sample, 0 the first time or
 * where it cannot be read. A clock made from a thread id fails cleanly
 * for a thread gone, unlike pthread_getcpuclockid on a stale handle. */
static int64_t
cpu_since(SamplerObject *self, int64_t tid)
{
#ifdef __linux__
    struct timespec ts;
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6);
    if (tid <= 0 || clock_gettime(clock, &ts) != 0) {
        return 0;
    }
    int64_t cpu = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    for (uint32_t i = 0; i < self->ncpu; i++) {
        if (self->cpu[i].tid == tid) {
            int64_t used = cpu - self->cpu[i].cpu_ns;
            self->cpu[i].cpu_ns = cpu;
            return used > 0 ? used : 0;
        }
    }
    if (self->ncpu == self->cpu_cap) {
        uint32_t cap = self->cpu_cap ? self->cpu_cap * 2 : 16;
        cpu_seen *grown = PyMem_RawRealloc(self->cpu, cap * sizeof(*grown));
        if (!grown) {
            return 0;
        }
        self->cpu = grown;
        self->cpu_cap = cap;
    }
    self->cpu[self->ncpu++] = (cpu_seen){tid, cpu};
#else
    (void)self;
    (void)tid;
#endif
    return 0;
}

/* The frame ids of ts's Python stack, outermost first; 0 when it runs no
 * Python code, or when a frame could not be added (counted as lost).
 * Keeps a reference to each code object the store adds. */
static uint32_t
stack_of(SamplerObject *self, PyThreadState *ts, uint32_t *ids)
{
    uint32_t n = 0;
    int failed = 0;
    PyFrameObject *f = PyThreadState_GetFrame(ts);
    while (f && n < AP_SAMPLE_DEPTH && !failed) {
        PyCodeObject *code = PyFrame_GetCode(f);
        int added = 0;
        failed = ap_sample_frame(&self->store, code, &ids[n], &added) !=
                 AP_OK;
        n += !failed;
        if (!added) {
            Py_DECREF(code);   /* else the store's now */
        }
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

static void
sample_round(SamplerObject *self)
{
    int64_t t = now_ns();
    int64_t wall = self->rounds ? t - self->last_ns : self->interval_ns;
    if (self->rounds && wall > 2 * self->interval_ns) {
        self->late++;
    }
    /* A sampler woken late by a busy machine wakes when a CPU frees,
     * often because the program just blocked: what ran meanwhile is
     * unknown and is not charged to what runs now. */
    int64_t unseen = atomic_exchange(&self->unseen_ns, 0);
    self->unseen_total += unseen;
    wall = wall - unseen > self->interval_ns / 2 ? wall - unseen
                                                  : self->interval_ns / 2;
    self->rounds++;
    self->last_ns = t;
    uint32_t ids[AP_SAMPLE_DEPTH];
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);   /* the interrupted code's */
    PyInterpreterState *interp =
        PyThreadState_GetInterpreter(PyThreadState_Get());
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts;
         ts = PyThreadState_Next(ts)) {
        uint32_t n = stack_of(self, ts, ids);
        if (n == 0) {
            continue;   /* runs no Python code: the sampler among them */
        }
        int64_t tid = -1;
        int64_t stage = ap_stage_now(
            (uint64_t)ts->thread_id, ts->context_ver,
            ap_context_stack_in(self->module, ts->context), &tid);
#if PY_VERSION_HEX >= 0x030B0000
        tid = (int64_t)ts->native_thread_id;
#endif
        int64_t cpu = cpu_since(self, tid);
        if (tid < 0) {
            tid = (int64_t)ts->thread_id;   /* 3.9/3.10, never recorded */
        }
        ap_sample_add(&self->store, t, tid, stage, ids, n, wall,
                      cpu < wall ? cpu : wall);
    }
    PyErr_Restore(exc_type, exc, tb);
}

/* Takes round `round` unless the other side has (GIL held). */
static void
take_round(SamplerObject *self, uint64_t round)
{
    uint64_t expected = round;
    if (!round ||
        !atomic_compare_exchange_strong(&self->want, &expected, 0)) {
        return;
    }
    sample_round(self);
    pthread_mutex_lock(&self->lock);
    self->served = round;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
}

/* Whether the main thread is running now (Linux: its state in /proc),
 * or was mostly on the CPU since the last look: then it runs Python, or C
 * code, and is best asked. Else it waits with the GIL released, which the
 * sampler can take at once, and tripping a signal would only wake an
 * event loop that waits on signal.set_wakeup_fd. */
static int
main_thread_busy(SamplerObject *self)
{
#ifdef __linux__
    if (self->main_stat >= 0) {
        char buf[512];
        ssize_t n = pread(self->main_stat, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = 0;
            char *end = strrchr(buf, ')');   /* the name may hold one */
            return end && end[1] == ' ' && end[2] == 'R';
        }
    }
    struct timespec ts;
    clockid_t clock = (clockid_t)((~(unsigned)self->main_tid << 3) | 6);
    if (self->main_tid <= 0 || clock_gettime(clock, &ts) != 0) {
        return 0;
    }
    int64_t cpu = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t now = now_ns();
    int busy = 2 * (cpu - self->main_cpu_ns) > now - self->main_seen_ns;
    self->main_cpu_ns = cpu;
    self->main_seen_ns = now;
    return busy;
#else
    (void)self;
    return 0;
#endif
}

/* Asks the main thread for the round when it runs; 1 when asked. */
static int
ask_main_thread(SamplerObject *self)
{
    return self->signum && main_thread_busy(self) &&
           ap_wake_main_thread(self->signum) == 0;
}

/* Sleeps until deadline (CLOCK_MONOTONIC ns), or until round `round` is
 * served when round > 0; 1 when stop() asked. */
static int
wait_until(SamplerObject *self, int64_t deadline, uint64_t round)
{
    struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
    pthread_mutex_lock(&self->lock);
    while (!self->quit && (!round || self->served < round) &&
           pthread_cond_timedwait(&self->wake, &self->lock, &ts) !=
               ETIMEDOUT) {
    }
    int quit = self->quit;
    pthread_mutex_unlock(&self->lock);
    return quit;
}

static int
open_main_stat(int64_t tid)
{
#ifdef __linux__
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%lld/stat", (long long)tid);
    return tid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
#else
    (void)tid;
    return -1;
#endif
}

static void *
sampler_main(void *arg)
{
    SamplerObject *self = arg;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyThreadState *saved = PyEval_SaveThread();
    /* how long the main thread has to take a round before the sampler
     * takes the GIL: it runs the handler within microseconds when it
     * runs Python at all */
    int64_t patience = self->interval_ns / 4;
    self->main_stat = open_main_stat(self->main_tid);
    uint64_t round = 0;
    int64_t next = now_ns() + self->interval_ns;
    while (!wait_until(self, next, 0)) {
        int64_t overslept = now_ns() - next;
        if (overslept > self->interval_ns / 2) {
            atomic_fetch_add(&self->unseen_ns, overslept);
        }
        atomic_store(&self->want, ++round);
        /* asked again when it started running meanwhile: else the GIL
         * it now holds would be waited for until its next wait */
        int quit = 0;
        for (int ask = 0; ask < 2 && !quit &&
                          atomic_load(&self->want) == round; ask++) {
            if (ask_main_thread(self)) {
                quit = wait_until(self, now_ns() + patience, round);
            }
        }
        if (quit) {
            break;
        }
        if (atomic_load(&self->want) == round) {
            PyEval_RestoreThread(saved);
            take_round(self, round);
            saved = PyEval_SaveThread();
        }
        int64_t t = now_ns();
        next += self->interval_ns;
        if (next <= t) {
            next = t + self->interval_ns;   /* missed ticks are not owed */
        }
    }
    if (self->main_stat >= 0) {
        close(self->main_stat);
    }
    PyEval_RestoreThread(saved);
    PyGILState_Release(gil);
    return NULL;
}

static int
sampler_init(SamplerObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"interval_ns", "max_samples", "signum",
                               "main_tid", NULL};
    long long interval, max_samples, main_tid = 0;
    int signum = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LL|iL:Sampler",
                                     keywords, &interval, &max_samples,
                                     &signum, &main_tid)) {
        return -1;
    }
    if (self->state != 0 || self->module != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Sampler is made once");
        return -1;
    }
    if (interval < 10000 || interval > 60LL * 1000000000) {
        PyErr_Format(PyExc_ValueError, "interval_ns must be between 10 us "
                     "and 60 s, got %lld", interval);
        return -1;
    }
    if (max_samples < 0 || max_samples > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "max_samples must be between 0 and "
                     "%u, got %lld", UINT32_MAX, max_samples);
        return -1;
    }
    if (signum < 0 || signum >= 65) {
        PyErr_Format(PyExc_ValueError, "signum must be 0 (none) or a signal "
                     "number, got %d", signum);
        return -1;
    }
    if (ap_sample_store_init(&self->store, max_samples) != AP_OK) {
        PyErr_NoMemory();
        return -1;
    }
    self->signum = signum;
    self->main_tid = main_tid;
    self->interval_ns = interval;
    self->module = Py_NewRef(PyType_GetModule(Py_TYPE(self)));
    return 0;
}

static PyObject *
sampler_start(SamplerObject *self, PyObject *unused)
{
    (void)unused;
#ifdef Py_GIL_DISABLED
    PyErr_SetString(PyExc_RuntimeError, "sampling call stacks needs the "
                    "GIL: this free-threaded Python has none");
    return NULL;
#endif
    if (self->module == NULL || self->state != 0) {
        PyErr_SetString(PyExc_RuntimeError, "a Sampler starts once");
        return NULL;
    }
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (!err) {
        err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (!err) {
            err = pthread_cond_init(&self->wake, &attr);
        }
        pthread_condattr_destroy(&attr);
    }
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_mutex_init(&self->lock, NULL);
    self->quit = 0;
    self->pid = getpid();
    err = pthread_create(&self->thread, NULL, sampler_main, self);
    if (err) {
        pthread_cond_destroy(&self->wake);
        pthread_mutex_destroy(&self->lock);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_INCREF(self);   /* the thread's, until stop() joins it */
    self->state = 1;
    Py_RETURN_NONE;
}

/* Ends the thread and waits for it, without the GIL it needs to end. In
 * a forked child there is no thread: only the state changes. */
static void
end_thread(SamplerObject *self)
{
    if (self->state != 1) {
        return;
    }
    self->state = 2;
    if (self->pid != getpid()) {
        return;
    }
    pthread_mutex_lock(&self->lock);
    self->quit = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->lock);
    Py_DECREF(self);
}

static PyObject *
sampler_stop(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    end_thread(self);
    Py_RETURN_NONE;
}

/* [function, file, line] of a code object. */
static PyObject *
frame_entry(PyObject *code)
{
    PyObject *name = NULL, *file = NULL, *line = NULL;
    if (ap_getattr_optional(code, "co_qualname", &name) == 0) {
        name = PyObject_GetAttrString(code, "co_name");
    }
    if (name) {
        file = PyObject_GetAttrString(code, "co_filename");
    }
    if (file) {
        line = PyObject_GetAttrString(code, "co_firstlineno");
    }
    PyObject *entry = line ? PyList_New(3) : NULL;
    if (entry == NULL) {
        Py_XDECREF(name);
        Py_XDECREF(file);
        Py_XDECREF(line);
        return NULL;
    }
    PyList_SET_ITEM(entry, 0, name);
    PyList_SET_ITEM(entry, 1, file);
    PyList_SET_ITEM(entry, 2, line);
    return entry;
}

static PyObject *
frames_list(const ap_sample_store *s)
{
    PyObject *frames = PyList_New(s->ncodes);
    for (uint32_t i = 0; frames && i < s->ncodes; i++) {
        PyObject *entry = frame_entry((PyObject *)s->codes[i]);
        if (entry == NULL) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SET_ITEM(frames, i, entry);
    }
    return frames;
}

static PyObject *
stack_entry(const ap_sample_store *s, const ap_sample_stack *k)
{
    uint32_t ids[AP_SAMPLE_DEPTH];
    uint32_t n = ap_sample_frames_of(s, k->leaf, ids, AP_SAMPLE_DEPTH);
    PyObject *frames = PyList_New(n);
    for (uint32_t i = 0; frames && i < n; i++) {
        PyObject *id = PyLong_FromUnsignedLong(ids[i]);
        if (id == NULL) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SET_ITEM(frames, i, id);
    }
    if (frames == NULL) {
        return NULL;
    }
    return Py_BuildValue("[iLLNLLL]", 0, (long long)k->tid,
                         (long long)k->stage, frames, (long long)k->count,
                         (long long)k->wall_ns, (long long)k->cpu_ns);
}

static PyObject *
stacks_list(const ap_sample_store *s)
{
    PyObject *stacks = PyList_New(s->nstacks);
    for (uint32_t i = 0; stacks && i < s->nstacks; i++) {
        PyObject *entry = stack_entry(s, &s->stacks[i]);
        if (entry == NULL) {
            Py_CLEAR(stacks);
            break;
        }
        PyList_SET_ITEM(stacks, i, entry);
    }
    return stacks;
}

static PyObject *
sampler_data(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (self->state != 2) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler.data() needs a "
                        "stopped sampler");
        return NULL;
    }
    const ap_sample_store *s = &self->store;
    PyObject *frames = frames_list(s);
    PyObject *stacks = frames ? stacks_list(s) : NULL;
    if (stacks == NULL) {
        Py_XDECREF(frames);
        return NULL;
    }
    return Py_BuildValue(
        "{sLsLsLsLsLsNsNsy#sy#sL}", "interval_ns",
        (long long)self->interval_ns, "rounds", (long long)self->rounds,
        "late", (long long)self->late, "unseen_ns",
        (long long)self->unseen_total,
        "lost", (long long)s->lost, "frames", frames, "stacks", stacks,
        "timeline_t", (const char *)s->tick_t,
        (Py_ssize_t)(s->nticks * (int64_t)sizeof(int64_t)),
        "timeline_stack", (const char *)s->tick_stack,
        (Py_ssize_t)(s->nticks * (int64_t)sizeof(uint32_t)),
        "timeline_dropped", (long long)s->timeline_dropped);
}

/* The handler of the signal number tripped to ask the main thread for a
 * round: signal.signal(signum, sampler.take). */
static PyObject *
sampler_take(SamplerObject *self, PyObject *args)
{
    (void)args;   /* (signum, frame) */
    if (self->state == 1 && self->pid == getpid()) {
        take_round(self, atomic_load(&self->want));
    }
    Py_RETURN_NONE;
}

static void
sampler_dealloc(SamplerObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    /* a running thread holds a reference: state is never 1 here */
    for (uint32_t i = 0; i < self->store.ncodes; i++) {
        Py_DECREF((PyObject *)self->store.codes[i]);
    }
    ap_sample_store_free(&self->store);
    PyMem_RawFree(self->cpu);
    Py_XDECREF(self->module);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef sampler_methods[] = {
    {"start", (PyCFunction)sampler_start, METH_NOARGS,
     "Starts the sampling thread (once)."},
    {"stop", (PyCFunction)sampler_stop, METH_NOARGS,
     "Ends the sampling thread and waits for it; idempotent."},
    {"take", (PyCFunction)sampler_take, METH_VARARGS,
     "take(signum, frame): takes the round asked for, if any; the handler "
     "of the signal number given as signum."},
    {"data", (PyCFunction)sampler_data, METH_NOARGS,
     "What was sampled, as a dict (see docs/sampling.md), once stopped."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot sampler_slots[] = {
    {Py_tp_init, sampler_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, sampler_dealloc},
    {Py_tp_methods, sampler_methods},
    {Py_tp_doc, "Sampler(interval_ns, max_samples, signum=0, main_tid=0): "
                "samples every thread's Python call stack by stage "
                "(internal)."},
    {0, NULL},
};

static PyType_Spec sampler_spec = {
    .name = "aquaprof._core.Sampler",
    .basicsize = sizeof(SamplerObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = sampler_slots,
};

int
ap_sampler_type_init(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &sampler_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int r = PyModule_AddType(module, (PyTypeObject *)type);
    Py_DECREF(type);
    return r;
}
