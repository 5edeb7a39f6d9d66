/* Shared declarations of the aquaprof._core binding. */
#ifndef AP_MODULE_H
#define AP_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "../core/session.h"
#include "../gpu/gpu_trace.h"

/* Python 3.9 lacks these; the project supports 3.9+. */
#if PY_VERSION_HEX < 0x030A0000
#define Py_NewRef(o) (Py_INCREF(o), (PyObject *)(o))
#define Py_XNewRef(o) (Py_XINCREF(o), (PyObject *)(o))
#define Py_TPFLAGS_DISALLOW_INSTANTIATION 0
static inline int
PyModule_AddObjectRef(PyObject *module, const char *name, PyObject *value)
{
    Py_INCREF(value);
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}
#endif

/* Returns 1 and a new reference in *out, 0 (and *out NULL) when obj has no
 * such attribute, -1 with an exception set on any other error. */
static inline int
ap_getattr_optional(PyObject *obj, const char *name, PyObject **out)
{
    *out = PyObject_GetAttrString(obj, name);
    if (*out) {
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Keeps rare paths out of hot functions, so these need not save
 * registers the rare path uses. */
#define AP_NOINLINE __attribute__((noinline))

#define AP_NAME_CACHE 256

typedef struct {
    PyObject *name;      /* exact str, held so its address is not reused */
    uint32_t id;         /* interned id of name */
    PyObject *stage;     /* a Stage of this name for reuse, or NULL */
} ap_name_slot;

typedef struct {
    PyTypeObject *stage_type;
    PyTypeObject *staged_function_type;
    PyTypeObject *profiler_type;
    PyObject *update_wrapper;        /* functools.update_wrapper */
    PyObject *span_dtype;            /* numpy.dtype of ap_span */
    PyObject *gpu_dtype;             /* numpy.dtype of ap_gpu_event */
    PyTypeObject *protocol_type;
    /* Direct-mapped cache: str object -> interned id, and a Stage that
     * 'with aquaprof.stage(name)' may reuse instead of allocating. */
    ap_name_slot names[AP_NAME_CACHE];
} ap_module_state;

extern PyModuleDef ap_module_def;

static inline ap_module_state *
ap_state(PyObject *module)
{
    return (ap_module_state *)PyModule_GetState(module);
}

/* Each returns 0 on success, -1 with an exception set. */
int ap_stage_types_init(PyObject *module, ap_module_state *st);
int ap_staged_function_type_init(PyObject *module, ap_module_state *st);
int ap_profiler_type_init(PyObject *module, ap_module_state *st);
int ap_report_init(PyObject *module, ap_module_state *st);
int ap_gpu_dtype_init(PyObject *module, ap_module_state *st);

/* Builds a NumPy dtype from spec (a new reference, stolen; NULL passes
 * the caller's error on), checks that it is `size` bytes like its C
 * struct, keeps it in *out and adds it to module as name. 0 or -1. */
int ap_add_dtype(PyObject *module, const char *name, PyObject *spec,
                 size_t size, PyObject **out);

/* A core report (a stopped session's, or a running one's snapshot) as a
 * dict of plain Python objects and a NumPy span array, with a "gpu" entry
 * built from gpu when it is not NULL; r is freed. NULL with an exception
 * set leaves r to the caller, to free or to try again (out of memory, say):
 * whole, or at worst without its spans, then counted as shed. */
PyObject *ap_report_to_python(ap_module_state *st, ap_report *r,
                              ap_gpu_trace *gpu);

/* The aggregates of a stage dict besides its histogram, in the order
 * report_data() writes them: where ap_stats keeps each and how a merge
 * combines it. One table, so that the report and merge_stage cannot
 * disagree on a field. */
typedef enum {
    AP_FIELD_SUM,          /* int64, merged by addition */
    AP_FIELD_EXTREME,      /* int64, merged by min or max */
    AP_FIELD_DOUBLE        /* double, merged by Chan's formula */
} ap_field_kind;

typedef struct {
    const char *key;
    size_t offset;         /* in ap_stats */
    ap_field_kind kind;
} ap_stage_field;

extern const ap_stage_field ap_stage_fields[];
extern const size_t ap_stage_nfields;

/* Sets every aggregate of a stage dict, histogram included (a list of
 * (bucket, count) pairs, buckets in order, empty ones left out), from s;
 * min_ns is 0 for a stage never closed. 0, or -1 with an exception set. */
int ap_stats_set_items(PyObject *d, const ap_stats *s);

/* _core.merge_stage(into, other) (merge_stage.c). */
PyObject *ap_merge_stage(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargs);

/* A run's GPU events (their stages and spans resolved against r), kernel
 * names and devices as a dict; NULL with an exception set. */
PyObject *ap_gpu_trace_to_python(ap_module_state *st, ap_gpu_trace *t,
                                 const ap_report *r);

/* Checks a stage name (non-empty str without '/') and interns it. Returns
 * 0, sets *id and *slot (the cache slot now holding name, NULL for str
 * subclasses), or -1 with an exception set. */
int ap_stage_name(ap_module_state *st, PyObject *name, uint32_t *id,
                  ap_name_slot **slot);

/* items=: None means 0, else an int in [0, 2**63). 0 or -1 with an
 * exception set. */
int ap_parse_items(PyObject *obj, int64_t *items);

/* A StagedFunction calling func under the stage name (name NULL: func's
 * __qualname__); refuses generators and coroutines. New reference or NULL
 * with an exception set. */
PyObject *ap_wrap_function(ap_module_state *st, PyObject *func,
                           PyObject *name, uint32_t name_id, int64_t items);

/* Module-level functions defined in stage.c. */
PyObject *ap_stage_function(PyObject *module, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames);

#endif
