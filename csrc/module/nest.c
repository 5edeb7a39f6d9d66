/* Nested profilers (nest.h): marks in the shared session, their figures
 * as Python data, and the list of those running. */
#include "nest.h"

#include <unistd.h>

/* The running nests of this process; the GIL protects it. */
static ap_nest *running;
static int64_t running_pid;

/* The list, emptied in a forked child: the nests it names are the
 * parent's, and the child's copies of them end on their own. */
static ap_nest *
list_head(void)
{
    if (running_pid != (int64_t)getpid()) {
        running = NULL;
        running_pid = (int64_t)getpid();
    }
    return running;
}

/* n must be listed, in this process. */
static void
unlist(ap_nest *n)
{
    if (n->prev) {
        n->prev->next = n->next;
    } else if (list_head() == n) {
        running = n->next;
    }
    if (n->next) {
        n->next->prev = n->prev;
    }
    n->prev = n->next = NULL;
    n->session = NULL;
}

/* Steals value; -1 where it is NULL (its error already set). */
static int
set_owned(PyObject *d, const char *key, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* Each thread row's serial (which thread held the row's index), or
 * with `ended` whether that thread had ended: for nesting.py to tell a
 * row taken over since the mark, and from which thread. */
static PyObject *
row_list(const ap_report *r, int ended)
{
    PyObject *list = PyList_New(r->nthreads);
    for (uint32_t i = 0; list != NULL && i < r->nthreads; i++) {
        const ap_report_thread *t = &r->threads[i];
        PyObject *v = ended ? PyBool_FromLong(t->ended)
                            : PyLong_FromUnsignedLongLong(t->serial);
        if (v == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, v);
    }
    return list;
}

/* The figures of s since n's mark as report_data() gives a report, and
 * since_ns, caller_stage, rss_peak (session_since.h), thread_serials
 * and thread_ended (row_list above). */
static PyObject *
figures(ap_module_state *st, ap_session *s, const ap_mark *m, uint32_t keep)
{
    ap_since since;
    ap_status status = ap_session_since(s, m, keep, ap_context_key(),
                                        &since);
    if (status != AP_OK) {
        return ap_status_error(status, "take the session's figures");
    }
    PyObject *serials = row_list(since.report, 0);
    PyObject *ended = row_list(since.report, 1);
    PyObject *threads = ap_threads_noted(st);
    PyObject *d = serials && ended
                      ? ap_report_to_python(st, since.report, NULL, threads)
                      : NULL;
    Py_XDECREF(threads);
    if (d == NULL) {
        Py_XDECREF(serials);
        Py_XDECREF(ended);
        ap_report_free(since.report);   /* left to us on failure */
        return NULL;
    }
    /* each call takes its value, whatever happens */
    int failed = set_owned(d, "thread_serials", serials) < 0;
    failed |= set_owned(d, "thread_ended", ended) < 0;
    if (failed ||
        set_owned(d, "since_ns", PyLong_FromLongLong(since.since_ns)) < 0 ||
        set_owned(d, "caller_stage", PyLong_FromLong(since.caller_stage))
            < 0 ||
        set_owned(d, "rss_peak", PyLong_FromLongLong(since.rss_peak)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

int
ap_nest_start(ap_module_state *st, ap_nest *n, PyObject *owner)
{
    ap_session *s = atomic_load(&ap_current_session);
    if (s == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no aquaprof session is "
                        "running to nest in");
        return -1;
    }
    ap_mark mark = ap_session_mark(s);
    PyObject *base = figures(st, s, &mark, 0);
    if (base == NULL) {
        return -1;
    }
    *n = (ap_nest){NULL, list_head(), s, mark, (int64_t)getpid(), owner,
                   base, NULL};
    if (running) {
        running->prev = n;
    }
    running = n;
    return 0;
}

int
ap_nest_running(const ap_nest *n)
{
    return n->session != NULL && n->pid == (int64_t)getpid();
}

int
ap_nest_stop(ap_module_state *st, ap_nest *n)
{
    if (n->pid != (int64_t)getpid()) {
        /* a forked child's copy: the list holds the parent's nests */
        n->session = NULL;
        return 1;
    }
    if (n->session == NULL) {
        return 0;
    }
    PyObject *end = figures(st, n->session, &n->mark, 0);
    unlist(n);
    if (end == NULL) {
        return -1;
    }
    n->end = end;
    return 0;
}

PyObject *
ap_nest_snapshot(ap_module_state *st, ap_nest *n, uint32_t keep)
{
    return figures(st, n->session, &n->mark, keep);
}

void
ap_nests_end(ap_module_state *st, ap_session *s)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    /* from the top each time: taking figures allocates, so the collector
     * may run and free other nests meanwhile */
    for (;;) {
        ap_nest *n = list_head();
        while (n && n->session != s) {
            n = n->next;
        }
        if (n == NULL) {
            break;
        }
        PyObject *owner = Py_NewRef(n->owner);
        if (ap_nest_stop(st, n) < 0) {
            PyErr_Clear();   /* its report says its figures are missing */
        }
        Py_DECREF(owner);
    }
    PyErr_Restore(type, value, tb);
}

int
ap_nests_running(const ap_session *s)
{
    int count = 0;
    for (const ap_nest *n = list_head(); n; n = n->next) {
        count += s != NULL && n->session == s;
    }
    return count;
}

void
ap_nest_clear(ap_nest *n)
{
    if (n->session && n->pid == (int64_t)getpid()) {
        unlist(n);
    }
    Py_CLEAR(n->base);
    Py_CLEAR(n->end);
}
