/* aquaprof._core.Profiler: owns one core session from start to report,
 * or, started while another runs, a nest in that one's session (nest.h). */
#include "module.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "../core/session.h"
#include "../common/cuda_loader.h"
#include "../gpu/gpu_records.h"
#include "nest.h"

enum { NEW, RUNNING, STOPPED, FORKED };

typedef struct {
    PyObject_HEAD
    ap_session *session;
    ap_config config;
    int state;
    PyObject *report;      /* cached report data, built once */
    ap_report *core_report; /* the session's, until report holds it */
    ap_gpu_config gpu;
    PyObject *gpu_strings; /* (libcuda, *cupti_paths): gpu's strings */
    const char **cupti_paths;
    PyObject *gpu_status;  /* str, once started */
    ap_gpu_trace *gpu_trace;
    int64_t max_gpu_events;
    int nested;            /* started in another's session: nest, not
                            * session, gpu_*, report, threads */
    PyObject *threads;     /* {index: threading.Thread} of its session's
                            * threads, taken at stop for the report */
    ap_nest nest;
} ProfilerObject;

static const char *
utf8(PyObject *obj, const char *what)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, got %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8(obj);
}

/* cuda: AP_CUDA_*; libcuda: str, or NULL for the driver the loader names
 * ($AQUAPROF_LIBCUDA, else libcuda.so.1), read now and kept, so that the
 * environment changing later cannot move it; cupti_paths: a sequence of
 * str. */
static int
parse_gpu(ProfilerObject *self, int cuda, int sync, PyObject *libcuda,
          PyObject *cupti_paths)
{
    if (cuda < AP_CUDA_OFF || cuda > AP_CUDA_REQUIRED) {
        PyErr_Format(PyExc_ValueError, "cuda must be 0, 1 or 2, got %d",
                     cuda);
        return -1;
    }
    PyObject *paths = cupti_paths ? PySequence_Tuple(cupti_paths)
                                  : PyTuple_New(0);
    if (!paths) {
        return -1;
    }
    PyObject *driver = libcuda ? libcuda
                               : PyUnicode_DecodeFSDefault(
                                     ap_cuda_driver_path());
    PyObject *strings = driver ? PyTuple_Pack(2, driver, paths) : NULL;
    Py_DECREF(paths);
    if (driver != libcuda) {
        Py_XDECREF(driver);
    }
    if (!strings) {
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(paths);
    const char **array = PyMem_Calloc(n ? n : 1, sizeof(*array));
    if (!array) {
        Py_DECREF(strings);
        PyErr_NoMemory();
        return -1;
    }
    const char *lib = utf8(PyTuple_GET_ITEM(strings, 0), "libcuda");
    for (Py_ssize_t i = 0; lib && i < n; i++) {
        array[i] = utf8(PyTuple_GET_ITEM(paths, i), "cupti_paths items");
        if (!array[i]) {
            lib = NULL;
        }
    }
    if (!lib) {
        PyMem_Free(array);
        Py_DECREF(strings);
        return -1;
    }
    self->gpu = (ap_gpu_config){cuda, sync, lib, array, (size_t)n};
    self->gpu_strings = strings;
    self->cupti_paths = array;
    return 0;
}

static int
parse_between(PyObject *obj, const char *what, long long min, long long max,
              int64_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, got %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if ((v == -1 && PyErr_Occurred()) || v < min || v > max) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be between %lld and %lld, "
                     "got %R", what, min, max, obj);
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_count(PyObject *obj, const char *what, long long max, int64_t *out)
{
    return parse_between(obj, what, 0, max, out);
}

static int
parse_seconds(PyObject *obj, const char *what, double min,
              const char *min_text, int64_t *ns)
{
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be a number of seconds, "
                     "got %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (!isfinite(v) || v < min || v > 3600.0) {
        PyErr_Format(PyExc_ValueError, "%s must be between %s and 3600 "
                     "seconds, got %R", what, min_text, obj);
        return -1;
    }
    *ns = (int64_t)llround(v * 1e9);
    return 0;
}

static int
profiler_init(ProfilerObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"max_spans", "memory", "memory_interval",
                               "cpu_resolution", "cuda", "cuda_sync",
                               "libcuda", "cupti_paths", "window",
                               "max_stages", "max_gpu_events", NULL};
    PyObject *max_spans = NULL, *interval = NULL, *resolution = NULL;
    PyObject *libcuda = NULL, *cupti_paths = NULL, *window = NULL;
    PyObject *max_stages = NULL, *max_gpu_events = NULL;
    int memory = 1, cuda = AP_CUDA_OFF, sync = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OpOOipOOOOO:Profiler",
                                     keywords, &max_spans, &memory,
                                     &interval, &resolution, &cuda, &sync,
                                     &libcuda, &cupti_paths, &window,
                                     &max_stages, &max_gpu_events)) {
        return -1;
    }
    if (self->state != NEW || self->session || self->gpu_strings) {
        PyErr_SetString(PyExc_RuntimeError, "Profiler.__init__ called twice");
        return -1;
    }
    ap_config c = {.max_spans = 1000000, .memory = memory,
                   .memory_interval_ns = 1000000,
                   .cpu_resolution_ns = 20000,
                   .max_stages = AP_DEFAULT_MAX_STAGES};
    int64_t window_value = 0, stages_value = c.max_stages;
    int64_t gpu_events = AP_GPU_DEFAULT_MAX_EVENTS;
    if ((max_spans && parse_count(max_spans, "max_spans", INT32_MAX,
                                  &c.max_spans) < 0) ||
        (max_gpu_events && parse_count(max_gpu_events, "max_gpu_events",
                                       INT32_MAX, &gpu_events) < 0) ||
        (window && parse_count(window, "window", AP_WINDOW_MAX,
                               &window_value) < 0) ||
        (max_stages && parse_between(max_stages, "max_stages", 1,
                                     AP_MAX_STAGES, &stages_value) < 0)) {
        return -1;
    }
    c.window = (uint32_t)window_value;
    c.max_stages = (uint32_t)stages_value;
    if (interval &&
        parse_seconds(interval, "memory_interval", 1e-5, "1e-05",
                      &c.memory_interval_ns) < 0) {
        return -1;
    }
    if (resolution &&
        parse_seconds(resolution, "cpu_resolution", 0.0, "0",
                      &c.cpu_resolution_ns) < 0) {
        return -1;
    }
    if (parse_gpu(self, cuda, sync, libcuda, cupti_paths) < 0) {
        return -1;
    }
    self->config = c;
    self->max_gpu_events = gpu_events;
    return 0;
}

static PyObject *
busy(void)
{
    return ap_status_error(AP_ERR_ACTIVE, "start the Profiler");
}

static ap_module_state *
profiler_state(ProfilerObject *self)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    return module ? ap_state(module) : NULL;
}

/* A nested Profiler records nothing of its own: the running session's
 * figures at its start and stop make its report. */
static PyObject *
start_nested(ProfilerObject *self)
{
    ap_module_state *st = profiler_state(self);
    if (st == NULL || ap_nest_start(st, &self->nest, (PyObject *)self) < 0) {
        return NULL;
    }
    self->nested = 1;
    self->state = RUNNING;
    Py_RETURN_NONE;
}

/* RUNNING, made STOPPED where the session's owner ended the nest. */
static int
is_running(ProfilerObject *self)
{
    if (self->state == RUNNING && self->nested &&
        self->nest.session == NULL && self->nest.pid == (int64_t)getpid()) {
        self->state = STOPPED;
    }
    return self->state == RUNNING;
}

/* Stops a GPU trace started for a session that then could not start. */
static void
undo_gpu(void)
{
    ap_gpu_trace *none;
    char note[8];
    ap_gpu_stop(&none, NULL, note, sizeof(note));
    ap_gpu_trace_free(none);
}

static PyObject *
profiler_start(ProfilerObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"nest", "neighbor", NULL};
    int nest = 1;
    const char *neighbor = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$pz:start", keywords,
                                     &nest, &neighbor)) {
        return NULL;
    }
    if (self->state != NEW) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this Profiler has already run; a Profiler runs "
                        "once, create a new one");
        return NULL;
    }
    if (ap_active()) {
        return nest ? start_nested(self) : busy();
    }
    char status[2048];
    ap_gpu_records_set_max_events(self->max_gpu_events);
    ap_status st = ap_gpu_start(&self->gpu, neighbor, &self->config.hooks,
                                status, sizeof(status));
    if (st == AP_ERR_ACTIVE) {
        return busy();
    }
    if (st != AP_OK) {
        /* the option that asked for the GPU: cuda_sync needs it whatever
         * cuda says */
        PyErr_Format(PyExc_RuntimeError, "%s: %s",
                     self->gpu.mode == AP_CUDA_REQUIRED ? "cuda=True"
                                                        : "cuda_sync=True",
                     status);
        return NULL;
    }
    self->gpu_status = PyUnicode_DecodeUTF8(status, strlen(status),
                                            "backslashreplace");
    if (!self->gpu_status) {
        undo_gpu();
        return NULL;
    }
    st = ap_session_start(&self->config, &self->session);
    if (st != AP_OK) {
        undo_gpu();
        return ap_status_error(st, "sample host memory (/proc/self/statm "
                               "is unreadable or no thread could start); "
                               "pass memory=False");
    }
    self->state = RUNNING;
    Py_RETURN_NONE;
}

/* "<start status>; <note>" as the run's GPU status; None, or NULL with
 * an exception set. */
static PyObject *
add_gpu_note(ProfilerObject *self, const char *note)
{
    PyObject *full = self->gpu_status && PyUnicode_GET_LENGTH(
                                              self->gpu_status)
                         ? PyUnicode_FromFormat("%U; %s", self->gpu_status,
                                                note)
                         : PyUnicode_FromString(note);
    if (!full) {
        return NULL;
    }
    Py_XSETREF(self->gpu_status, full);
    Py_RETURN_NONE;
}

/* Stops the run; neighbor names another CUPTI client tracing now. */
static PyObject *
stop_run(ProfilerObject *self, const char *neighbor)
{
    if (self->state == NEW) {
        PyErr_SetString(PyExc_RuntimeError, "this Profiler was never started");
        return NULL;
    }
    if (!is_running(self)) {
        Py_RETURN_NONE;
    }
    ap_module_state *mst = profiler_state(self);
    if (mst == NULL) {
        return NULL;
    }
    if (self->nested) {
        int rc = ap_nest_stop(mst, &self->nest);
        self->state = rc == 1 ? FORKED : STOPPED;
        return rc < 0 ? NULL : Py_NewRef(Py_None);
    }
    if (!ap_session_is_foreign(self->session)) {
        ap_nests_end(mst, self->session);
    }
    Py_XSETREF(self->threads, ap_threads_take(mst));
    if (ap_session_stop(self->session, ap_context_key()) ==
        AP_ERR_FORKED) {
        /* a forked child's copy of the parent's data: discard it */
        ap_session_free(self->session);
        self->session = NULL;
        self->state = FORKED;
        Py_RETURN_NONE;
    }
    self->state = STOPPED;
    char note[1024];
    ap_status st;
    /* waiting for the device must not hold up the program's threads */
    Py_BEGIN_ALLOW_THREADS
    st = ap_gpu_stop(&self->gpu_trace, neighbor, note, sizeof(note));
    Py_END_ALLOW_THREADS
    if (st != AP_OK) {
        return ap_status_error(st, "stop the GPU trace");
    }
    return note[0] ? add_gpu_note(self, note) : Py_NewRef(Py_None);
}

static PyObject *
profiler_stop(ProfilerObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"neighbor", NULL};
    const char *neighbor = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$z:stop", keywords,
                                     &neighbor)) {
        return NULL;
    }
    return stop_run(self, neighbor);
}

/* A core report as Python data (r freed), or NULL with an exception set
 * and r left to the caller. */
static PyObject *
report_dict(ProfilerObject *self, ap_report *r, ap_gpu_trace *gpu,
            PyObject *threads)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    if (module == NULL) {
        return NULL;
    }
    return ap_report_to_python(ap_state(module), r, gpu, threads);
}

static PyObject *
profiler_report_data(ProfilerObject *self, PyObject *unused)
{
    (void)unused;
    if (self->state == RUNNING &&
        (self->nested ? self->nest.pid != (int64_t)getpid()
                      : ap_session_is_foreign(self->session))) {
        PyObject *none = stop_run(self, NULL);
        if (none == NULL) {
            return NULL;
        }
        Py_DECREF(none);
    }
    is_running(self);
    switch (self->state) {
    case NEW:
        PyErr_SetString(PyExc_RuntimeError, "this Profiler was never started");
        return NULL;
    case RUNNING:
        PyErr_SetString(PyExc_RuntimeError,
                        "the Profiler is still running: stop() it (or leave "
                        "its 'with' block) before asking for the report");
        return NULL;
    case FORKED:
        PyErr_SetString(PyExc_RuntimeError,
                        "this Profiler was started in the parent process; a "
                        "forked child has no report of its own (start a new "
                        "Profiler in the child)");
        return NULL;
    }
    if (self->nested) {
        if (self->nest.end == NULL) {
            PyErr_SetString(PyExc_RuntimeError,
                            "this nested Profiler's figures at its stop "
                            "could not be taken (out of memory)");
            return NULL;
        }
        return Py_NewRef(self->nest.end);
    }
    if (self->report == NULL) {
        if (self->core_report == NULL) {
            /* needs no memory but the spans', which it sheds if it must */
            ap_status st = ap_session_report(self->session,
                                             &self->core_report);
            if (st != AP_OK) {
                return ap_status_error(st, "build the report");
            }
        }
        /* out of memory here keeps the core's report for another try:
         * the run is not lost */
        self->report = report_dict(self, self->core_report,
                                   self->gpu_trace, self->threads);
        if (self->report == NULL) {
            return NULL;
        }
        self->core_report = NULL;
        ap_gpu_trace_free(self->gpu_trace);
        self->gpu_trace = NULL;
        Py_CLEAR(self->threads);
        /* the report holds everything now */
        ap_session_free(self->session);
        self->session = NULL;
    }
    if (PyDict_SetItemString(self->report, "gpu_status",
                             self->gpu_status) < 0) {
        return NULL;
    }
    return Py_NewRef(self->report);
}

static PyObject *
profiler_snapshot_data(ProfilerObject *self, PyObject *unused)
{
    (void)unused;
    if (!is_running(self) ||
        (self->nested ? !ap_nest_running(&self->nest)
                      : ap_session_is_foreign(self->session))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "snapshot() needs a running Profiler (started in "
                        "this process); after stop(), use report()");
        return NULL;
    }
    if (self->config.window == 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "snapshot() needs rolling windows: create the "
                        "Profiler with window=N (the last N calls of each "
                        "stage are kept)");
        return NULL;
    }
    if (self->nested) {
        ap_module_state *st = profiler_state(self);
        return st ? ap_nest_snapshot(st, &self->nest, self->config.window)
                  : NULL;
    }
    ap_module_state *mst = profiler_state(self);
    if (mst == NULL) {
        return NULL;
    }
    ap_report *r = NULL;
    ap_status st = ap_session_snapshot(self->session, ap_context_key(),
                                       &r);
    if (st != AP_OK) {
        return ap_status_error(st, "build the report");
    }
    PyObject *threads = ap_threads_noted(mst);
    PyObject *d = report_dict(self, r, NULL, threads);
    Py_XDECREF(threads);
    if (d == NULL) {
        ap_report_free(r);
    }
    return d;
}

static PyObject *
profiler_footprint(ProfilerObject *self, PyObject *unused)
{
    (void)unused;
    if (self->session == NULL || ap_session_is_foreign(self->session)) {
        PyErr_SetString(PyExc_RuntimeError, "_footprint() needs a session "
                        "started in this process and not yet reported");
        return NULL;
    }
    return PyLong_FromLongLong(ap_session_footprint(self->session));
}

static PyObject *
profiler_get_running(ProfilerObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(is_running(self));
}

static PyObject *
profiler_get_nested(ProfilerObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->nested);
}

static PyObject *
profiler_get_nests_running(ProfilerObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(
        self->nested || self->state != RUNNING
            ? 0 : ap_nests_running(self->session));
}

static PyObject *
profiler_get_nest_base(ProfilerObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->nest.base ? self->nest.base : Py_None);
}

static int
profiler_traverse(ProfilerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->report);
    Py_VISIT(self->gpu_strings);
    Py_VISIT(self->gpu_status);
    Py_VISIT(self->nest.base);
    Py_VISIT(self->nest.end);
    Py_VISIT(self->threads);
    return 0;
}

static void
profiler_dealloc(ProfilerObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    ap_module_state *st = profiler_state(self);
    if (self->state == RUNNING && !self->nested &&
        !ap_session_is_foreign(self->session)) {
        if (st) {
            ap_nests_end(st, self->session);
            ap_threads_forget(st);
        }
        undo_gpu();
    }
    ap_nest_clear(&self->nest);
    ap_report_free(self->core_report);
    ap_session_free(self->session);  /* also deactivates it if running */
    ap_gpu_trace_free(self->gpu_trace);
    PyMem_Free(self->cupti_paths);
    Py_CLEAR(self->report);
    Py_CLEAR(self->gpu_strings);
    Py_CLEAR(self->gpu_status);
    Py_CLEAR(self->threads);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef profiler_methods[] = {
    {"start", (PyCFunction)(void (*)(void))profiler_start,
     METH_VARARGS | METH_KEYWORDS,
     "start(*, nest=True, neighbor=None)\n\nStart recording stages. A "
     "Profiler runs once. While another runs, it nests in that one's "
     "session (nest=False raises RuntimeError instead). neighbor names "
     "another CUPTI client tracing now: the GPU is then left to it."},
    {"stop", (PyCFunction)(void (*)(void))profiler_stop,
     METH_VARARGS | METH_KEYWORDS,
     "stop(*, neighbor=None)\n\nStop recording; stages still open are "
     "closed and flagged. neighbor names another CUPTI client tracing "
     "now, whose trace is then left whole."},
    {"report_data", (PyCFunction)profiler_report_data, METH_NOARGS,
     "The recorded data as a dict (built once, after stop()); for a "
     "nested Profiler, the session's figures at its stop (see "
     "nest_base)."},
    {"_footprint", (PyCFunction)profiler_footprint, METH_NOARGS,
     "Bytes the session holds for its threads and paths, as the core "
     "counts them (for tests and benchmarks of the memory bounds)."},
    {"snapshot_data", (PyCFunction)profiler_snapshot_data, METH_NOARGS,
     "The data recorded so far, while running (needs window > 0): the "
     "spans are the last `window` calls of each stage and thread, then the "
     "calls open now."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef profiler_getset[] = {
    {"running", (getter)profiler_get_running, NULL, "True between start "
     "and stop (a nested one's stop, or its session's end).", NULL},
    {"nested", (getter)profiler_get_nested, NULL, "True when started "
     "inside another Profiler's session.", NULL},
    {"nest_base", (getter)profiler_get_nest_base, NULL, "A nested "
     "Profiler's figures of the session at its start, else None.", NULL},
    {"nests_running", (getter)profiler_get_nests_running, NULL, "The "
     "Profilers nested in this running one's session (in this process), "
     "which its stop would end.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot profiler_slots[] = {
    {Py_tp_init, profiler_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_traverse, profiler_traverse},
    {Py_tp_dealloc, profiler_dealloc},
    {Py_tp_methods, profiler_methods},
    {Py_tp_getset, profiler_getset},
    {Py_tp_doc, "Profiler(*, max_spans=1000000, memory=True, "
                "memory_interval=0.001, cpu_resolution=2e-05, window=0, "
                "max_stages=100000, max_gpu_events=1000000)\n\n"
                "Low-level session owner; use aquaprof.Profiler."},
    {0, NULL},
};

static PyType_Spec profiler_spec = {
    .name = "aquaprof._core.Profiler",
    .basicsize = sizeof(ProfilerObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = profiler_slots,
};

int
ap_profiler_type_init(PyObject *module, ap_module_state *st)
{
    st->profiler_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &profiler_spec, NULL);
    if (st->profiler_type == NULL) {
        return -1;
    }
    return PyModule_AddType(module, st->profiler_type);
}
