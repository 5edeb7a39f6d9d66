/* A captured child's SIGTERM, with a deadline (aquaprof/record/processes/child.py).
 *
 * CPython runs a signal's Python handler on the main thread, between
 * bytecodes: a main thread busy in one long C call (a numpy operation, a
 * library's wait that signals do not interrupt) does not get there, and
 * the SIGTERM that ends such a process unprofiled would leave it running,
 * with Pool.terminate() joined on it for as long as the call lasts.
 *
 * Our C handler passes the signal on to Python's and wakes a native
 * watcher, which needs no GIL. The watcher sends the signal again to the
 * main thread a few times (a lock wait that began just after the first
 * one wakes only for a signal that interrupts it), and when Python's
 * handler has not started by the deadline, it creates the marks that
 * tell the parent why no report came and ends the process by SIGTERM's
 * default action, as it would have ended without the profiler. Once
 * Python's handler has started (or Python holds the deadline while it
 * delivers the report at exit), the watcher leaves it all the time it
 * takes.
 *
 * A thread of the program's may wait to save in the main thread's place
 * (_sigterm_rescue: a Profiler(save=...) run whose main thread waits in a
 * collective that a dead rank never joins, the GIL let go): at the
 * deadline the watcher wakes it instead of ending the process, and waits
 * another deadline for it to hold the signal, then at most RESCUE_S
 * while it saves. A rescuer names the watch it was started for
 * (_sigterm_watch): one that reaches its wait after that watch ended,
 * as a busy machine may schedule it, waits in no later watch, whose run
 * it would not save.
 *
 * One watch per process: a forked copy inherits our handler but no
 * watcher, and its handler takes the default action at once (Python's
 * handler would only have re-raised there) until the copy starts a
 * watch of its own. */
#include "term_deadline.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the handler touches these: a lock would not be async-signal-safe */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "lock-free int atomics");

/* Read by the handler: both are set before our handler is installed in
 * the process, and not changed while it is. */
static struct sigaction python_action;
static _Atomic(pid_t) owner;          /* the process watching */

/* Shared by the handler, the watcher and Python (any thread). */
static sem_t wake;                    /* posted for each SIGTERM */
static atomic_int noted;              /* a SIGTERM came */
static atomic_int held;               /* Python at work on it: no deadline */
static atomic_int stopping;           /* the watch ends */
static _Atomic int64_t deadline_ns;

/* The rescue: a watcher and a thread waiting in _sigterm_rescue, each
 * watch by its id (never 0, never given twice in a process). Under
 * rescue_lock, made afresh in a forked copy (its parent's waiter is not
 * there, and a lock taken at the fork would never be let go). */
#define RESCUE_S 60
static pthread_mutex_t rescue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rescue_call = PTHREAD_COND_INITIALIZER;
static pthread_once_t rescue_forks = PTHREAD_ONCE_INIT;
static uint64_t watch_now;            /* the watch going on; 0 none */
static uint64_t rescuer_of;           /* the watch a rescuer waits in */
static uint64_t rescue_asked;         /* the watch that called it */

/* Under the GIL. The watcher reads marks and main_thread while it runs:
 * they change only when no watcher runs in this process. */
static int watching;                  /* a watcher runs in `owner` */
static uint64_t watches;              /* ids given */
static pthread_t watcher;
static pthread_t main_thread;
static char **marks;
static size_t nmarks;

static void
on_sigterm(int signum)
{
    int saved = errno;
    if (getpid() != atomic_load(&owner)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(signum, &dfl, NULL);
        raise(signum);      /* blocked until we return, then the end */
    } else {
        python_action.sa_handler(signum);
        atomic_store(&noted, 1);
        sem_post(&wake);
    }
    errno = saved;
}

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
nap(void)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Ends the process by SIGTERM's default action, after creating the
 * marks; returns only where the handler is no longer ours (the
 * program's own now decides). */
static void
die_by_sigterm(void)
{
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) != 0 || now.sa_handler != on_sigterm) {
        return;
    }
    for (size_t i = 0; i < nmarks; i++) {
        /* a parent gone took its folder: nothing to tell it */
        int fd = open(marks[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
        }
    }
    struct sigaction dfl = now;
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &dfl, NULL);
    /* on this thread, whatever the others block */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &term, NULL);
    raise(SIGTERM);
}

/* Waits, after a SIGTERM, until Python's handler holds it for good (1),
 * or the watch ends (1), or the deadline passes without Python holding
 * it (0). */
static int
wait_for_python(void)
{
    int64_t limit = atomic_load(&deadline_ns);
    int64_t since = now_ns();
    int resent = 0;
    for (;;) {
        if (atomic_load(&stopping)) {
            return 1;
        }
        int64_t now = now_ns();
        if (atomic_load(&held) > 0) {
            /* Python runs: its handler, or the exit's delivery the
             * handler will follow; a release starts the clock again */
            since = now;
            resent = 0;
        } else if (now - since >= limit) {
            return 0;
        } else if (resent < 3 && now - since >= (resent + 1) * limit / 4) {
            pthread_kill(main_thread, SIGTERM);
            resent++;
        }
        nap();
    }
}

/* After a rescue was asked: waits for its thread to hold the signal
 * within the deadline, then while it holds it, at most RESCUE_S. 1 when
 * it let go in time or the watch ends, 0 to end the process. */
static int
wait_for_rescue(void)
{
    int64_t began = now_ns();
    int seen_held = 0;
    for (;;) {
        if (atomic_load(&stopping)) {
            return 1;
        }
        int64_t waited = now_ns() - began;
        if (atomic_load(&held) > 0) {
            seen_held = 1;
            if (waited >= (int64_t)RESCUE_S * 1000000000) {
                return 0;
            }
        } else if (seen_held) {
            return 1;
        } else if (waited >= atomic_load(&deadline_ns)) {
            return 0;
        }
        nap();
    }
}

static void *
watch(void *unused)
{
    (void)unused;
    for (;;) {
        if (sem_wait(&wake) != 0) {
            if (errno == EINTR) {
                continue;
            }
            return NULL;
        }
        if (atomic_load(&stopping)) {
            return NULL;
        }
        /* a wake left by a signal sent again while Python held it
         * finds it held still, and waits with it */
        if (atomic_load(&noted) && !wait_for_python()) {
            pthread_mutex_lock(&rescue_lock);
            int ask = rescuer_of == watch_now && rescue_asked != watch_now;
            if (ask) {
                rescue_asked = watch_now;
                pthread_cond_broadcast(&rescue_call);
            }
            pthread_mutex_unlock(&rescue_lock);
            if (ask && wait_for_rescue()) {
                continue;
            }
            die_by_sigterm();
        }
    }
}

static void
free_marks(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(list[i]);
    }
    free(list);
}

/* paths (a sequence of str or bytes) as C strings in *out. 0, or -1
 * with an exception set and nothing held. */
static int
copy_marks(PyObject *paths, char ***out, size_t *n_out)
{
    PyObject *seq = PySequence_Fast(paths, "marks must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    char **list = calloc(n ? n : 1, sizeof *list);
    size_t done = 0;
    if (list == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (; done < n; done++) {
        PyObject *bytes = NULL;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, done),
                                   &bytes)) {
            goto error;
        }
        list[done] = strdup(PyBytes_AS_STRING(bytes));
        Py_DECREF(bytes);
        if (list[done] == NULL) {
            PyErr_NoMemory();
            goto error;
        }
    }
    Py_DECREF(seq);
    *out = list;
    *n_out = n;
    return 0;
error:
    if (list != NULL) {
        free_marks(list, done);
    }
    Py_DECREF(seq);
    return -1;
}

static void
set_watch_now(uint64_t id)
{
    pthread_mutex_lock(&rescue_lock);
    watch_now = id;
    pthread_cond_broadcast(&rescue_call);
    pthread_mutex_unlock(&rescue_lock);
}

static void
rescue_after_fork(void)
{
    pthread_mutex_init(&rescue_lock, NULL);
    pthread_cond_init(&rescue_call, NULL);
    watch_now = 0;
    rescuer_of = 0;
}

static void
watch_forks(void)
{
    pthread_atfork(NULL, NULL, rescue_after_fork);
}

/* Ends this process's watcher and frees its marks; the GIL is let go
 * while it ends (it never takes the GIL). */
static void
stop_watcher(void)
{
    atomic_store(&stopping, 1);
    sem_post(&wake);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(watcher, NULL);
    Py_END_ALLOW_THREADS
    watching = 0;
    set_watch_now(0);           /* a rescuer's wait ends, not asked */
    free_marks(marks, nmarks);
    marks = NULL;
    nmarks = 0;
}

/* Starts a watcher with every signal blocked, so that none is taken from
 * the program's threads. 0, or an errno value. */
static int
start_watcher(void)
{
    sigset_t all, old;
    sigfillset(&all);
    int rc = pthread_sigmask(SIG_BLOCK, &all, &old);
    if (rc != 0) {
        return rc;
    }
    rc = pthread_create(&watcher, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static PyObject *
os_error(int err)
{
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

PyObject *
ap_sigterm_deadline(PyObject *module, PyObject *args)
{
    (void)module;
    double seconds;
    PyObject *paths;
    if (!PyArg_ParseTuple(args, "dO:_sigterm_deadline", &seconds, &paths)) {
        return NULL;
    }
    if (!(seconds > 0 && seconds <= 1e6)) {
        PyErr_SetString(PyExc_ValueError,
                        "_sigterm_deadline: seconds must be in (0, 1e6]");
        return NULL;
    }
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    int ours = now.sa_handler == on_sigterm;
    if (!ours && ((now.sa_flags & SA_SIGINFO) || now.sa_handler == SIG_DFL ||
                  now.sa_handler == SIG_IGN)) {
        Py_RETURN_FALSE;    /* not Python's: nothing to wrap */
    }
    pid_t pid = getpid();
    atomic_store(&deadline_ns, (int64_t)(seconds * 1e9));
    if (!(watching && atomic_load(&owner) == pid)) {
        char **list;
        size_t n;
        if (copy_marks(paths, &list, &n) < 0) {
            return NULL;
        }
        /* a fresh watch: what a forked copy holds is its parent's (its
         * handler leaves all this alone until `owner` names it) */
        atomic_store(&noted, 0);
        atomic_store(&held, 0);
        atomic_store(&stopping, 0);
        if (sem_init(&wake, 0, 0) != 0) {
            int err = errno;
            free_marks(list, n);
            return os_error(err);
        }
        if (!ours) {
            python_action = now;
        }
        main_thread = pthread_self();
        pthread_once(&rescue_forks, watch_forks);
        set_watch_now(++watches);
        int rc = start_watcher();
        if (rc != 0) {
            set_watch_now(0);
            free_marks(list, n);
            return os_error(rc);
        }
        /* the parent's, copied by the fork: ours to free */
        free_marks(marks, nmarks);
        marks = list;
        nmarks = n;
        watching = 1;
        atomic_store(&owner, pid);
    } else if (!ours) {
        /* the watch runs; the program put Python's handler back */
        python_action = now;
    }
    if (!ours) {
        struct sigaction wrap = now;
        wrap.sa_handler = on_sigterm;
        if (sigaction(SIGTERM, &wrap, NULL) != 0) {
            int err = errno;
            stop_watcher();
            return os_error(err);
        }
    }
    Py_RETURN_TRUE;
}

PyObject *
ap_sigterm_hold(PyObject *module, PyObject *on)
{
    (void)module;
    int hold = PyObject_IsTrue(on);
    if (hold < 0) {
        return NULL;
    }
    if (hold) {
        atomic_fetch_add(&held, 1);
    } else {
        /* a release whose hold an interrupt cut short takes none */
        int h = atomic_load(&held);
        while (h > 0 && !atomic_compare_exchange_weak(&held, &h, h - 1)) {
        }
    }
    Py_RETURN_NONE;
}

PyObject *
ap_sigterm_release(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int restored = 0;
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == on_sigterm) {
        struct sigaction dfl = now;
        dfl.sa_handler = SIG_DFL;
        restored = sigaction(SIGTERM, &dfl, NULL) == 0;
    }
    int mine = watching && atomic_load(&owner) == getpid();
    if (mine) {
        stop_watcher();
    }
    if (restored && mine && atomic_load(&noted) && atomic_load(&held) == 0) {
        /* Python never took it: the end it would have had */
        kill(getpid(), SIGTERM);
    }
    return PyBool_FromLong(restored);
}

PyObject *
ap_sigterm_watch(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    pthread_mutex_lock(&rescue_lock);
    uint64_t id = watch_now;    /* 0 in a forked copy: its parent's */
    pthread_mutex_unlock(&rescue_lock);
    return PyLong_FromUnsignedLongLong(id);
}

PyObject *
ap_sigterm_rescue(PyObject *module, PyObject *arg)
{
    (void)module;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    int asked = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&rescue_lock);
    /* one rescuer a watch, and none once it ended */
    if (id != 0 && watch_now == id && rescuer_of != id) {
        rescuer_of = id;
        while (watch_now == id && rescue_asked != id) {
            pthread_cond_wait(&rescue_call, &rescue_lock);
        }
        asked = rescue_asked == id;
    }
    pthread_mutex_unlock(&rescue_lock);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(asked);
}
