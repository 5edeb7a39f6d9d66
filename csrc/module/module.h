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
    uint32_t id;         /* interned id of name, or AP_NAME_UNSET */
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
    PyTypeObject *context_stack_type;
    PyObject *stack_var;             /* ContextVar: the context's stack */
    PyObject *wrap_suspendable;      /* aquaprof._suspendable.wrap, loaded
                                      * at the first such decoration */
    PyObject *seen_threads;          /* {thread index: its note
                                      * (thread_names.c)} of session
                                      * seen_gen, or NULL */
    uint64_t seen_gen;
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
int ap_contexts_init(PyObject *module, ap_module_state *st);
int ap_sampler_type_init(PyObject *module);

/* Raises the exception for a core status other than AP_OK, met while
 * `doing` (e.g. "build the report"), and returns NULL: MemoryError for
 * AP_ERR_NOMEM, RuntimeError saying another Profiler runs for
 * AP_ERR_ACTIVE, OSError "cannot <doing>" for AP_ERR_SYSTEM, RuntimeError
 * "cannot <doing> (status N)" for the rest. */
PyObject *ap_status_error(ap_status st, const char *doing);

/* The current execution context's key for ap_enter_in/ap_exit_in:
 * CPython's context version, which changes at every switch of context
 * (an asyncio task's step entering its context, and leaving it). */
static inline uint64_t
ap_context_key(void)
{
    return PyThreadState_Get()->context_ver;
}

/* Chooses the current context's stage stack after ap_enter_in or
 * ap_exit_in answered AP_NEED_STACK: the one it made before, or a new
 * one. owner is a stage or staged function, whose type names the module.
 * Never fails: without memory the thread's own stack is used. Leaves the
 * caller's pending exception, if any, as it was. */
void ap_choose_stack(PyObject *owner);

/* A RuntimeWarning, once per run, that stage name's exit closed stages
 * left open inside it; never raises (warnings as errors are cleared) and
 * leaves a pending exception as it was. */
void ap_warn_misnested(PyObject *name);

/* The stage stack that a context (another thread's, for a sampler) has
 * recorded on in the active session, NULL for none. Needs the GIL; never
 * raises. */
const ap_stack *ap_context_stack_in(PyObject *module, PyObject *context);

/* Opens or closes owner's stage on the current context's stack:
 * ap_enter_in or ap_exit_in, choosing the stack first when the context
 * changed. */
static inline ap_status
ap_context_enter(PyObject *owner, uint32_t name, int64_t items)
{
    ap_status r = ap_enter_in(ap_context_key(), name, items, owner);
    if (r != AP_NEED_STACK) {
        return r;
    }
    ap_choose_stack(owner);
    return ap_enter_in(ap_context_key(), name, items, owner);
}

static inline ap_status
ap_context_exit(PyObject *owner, int raised)
{
    ap_status r = ap_exit_in(ap_context_key(), owner, raised);
    if (r != AP_NEED_STACK) {
        return r;
    }
    ap_choose_stack(owner);
    return ap_exit_in(ap_context_key(), owner, raised);
}

/* Builds a NumPy dtype from spec (a new reference, stolen; NULL passes
 * the caller's error on), checks that it is `size` bytes like its C
 * struct, keeps it in *out and adds it to module as name. 0 or -1. */
int ap_add_dtype(PyObject *module, const char *name, PyObject *spec,
                 size_t size, PyObject **out);

/* A core report (a stopped session's, or a running one's snapshot) as a
 * dict of plain Python objects and a NumPy span array, with a "gpu" entry
 * built from gpu when it is not NULL, and a "name" in each thread whose
 * note `threads` holds ({index: note}, ap_threads_noted or
 * ap_threads_take; may be NULL); r is freed. NULL with an exception set leaves r to the caller,
 * to free or to try again (out of memory, say): whole, or at worst without
 * its spans, then counted as shed. */
PyObject *ap_report_to_python(ap_module_state *st, ap_report *r,
                              ap_gpu_trace *gpu, PyObject *threads);

/* thread_names.c: the Python names of the threads that record.
 *
 * Notes the calling thread's threading.Thread as the thread of record
 * index in the active session, whose record was just made. Never raises;
 * leaves a pending exception as it was. */
void ap_threads_note(ap_module_state *st, int64_t index);

/* A new reference to the active session's notes ({index: note}), or
 * NULL (no exception) for none. ap_threads_take also lets go of them: the
 * session's owner takes them at stop, as the threads' names then
 * ({index: str}, no thread referred to). */
PyObject *ap_threads_noted(ap_module_state *st);
PyObject *ap_threads_take(ap_module_state *st);
/* Lets go of the active session's notes, for a report none will ask. */
void ap_threads_forget(ap_module_state *st);

/* A new reference to the name of the thread a note stands for (its
 * Thread.name, as an exact str, while the thread's object lives, else
 * the name it had when noted), or NULL (no exception) when it has none.
 * Runs no Python code; leaves a pending exception as it was. */
PyObject *ap_thread_name(PyObject *note);

/* A new reference to a note (as ap_threads_note makes, for
 * ap_thread_name) of the thread threading knows by this ident, or NULL
 * (no exception) for none: what the sampler names a thread by that
 * records no stage. Runs no Python code; leaves a pending exception as
 * it was. */
PyObject *ap_thread_note_by_ident(uint64_t ident);

/* The aggregates of a stage dict besides its histogram, in the order
 * report_data() writes them: where ap_stats keeps each and how a merge
 * combines it. One table, so that the report and merge_stage cannot
 * disagree on a field. */
typedef enum {
    AP_FIELD_SUM,          /* int64, merged by addition */
    AP_FIELD_EXTREME,      /* int64, merged by min or max */
    AP_FIELD_DOUBLE        /* double, merged by Chan's formula */
} ap_field_kind;

/* What a stage dict lacking a field (written before it existed, or by a
 * run that did not measure it) says of it. */
typedef enum {
    AP_ALWAYS,             /* every stage dict holds it */
    AP_OR_ZERO,            /* read as 0; a merge of two stage dicts
                            * that both lack it leaves it out */
    AP_WHOLE               /* a sum over every call or nothing: merged
                            * with calls that lack it, unknown (a sum of
                            * some calls' would pass for all of theirs) */
} ap_field_presence;

typedef struct {
    const char *key;
    size_t offset;         /* in ap_stats */
    ap_field_kind kind;
    ap_field_presence absent;  /* what a dict without it says */
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

/* The id of a stage name not interned yet: a stage interns its name at
 * its first entry in a session, and only while that session can still
 * record a new path (ap_stage_name_id), so that names a program makes
 * without a profiler, or past max_stages, are never held for the
 * process's life. */
#define AP_NAME_UNSET UINT32_MAX

/* How ap_stage_name treats a name's id. */
enum {
    AP_NAME_CHECK,   /* checks only: *id is the cached one or UNSET */
    AP_NAME_INTERN,  /* interns it (decorated functions: few) */
    AP_NAME_ENTER,   /* for an entry in the active session: interns it
                      * only if it can become a path, else *id is
                      * AP_NAME_OVER (never cached); AP_NAME_UNSET when no
                      * session is active */
};

/* Checks a stage name (non-empty str without '/') and gets its id as
 * `intern` says. Returns 0, sets *id and *slot (the cache slot now
 * holding name, NULL for str subclasses), or -1 with an exception set. */
int ap_stage_name(ap_module_state *st, PyObject *name, int intern,
                  uint32_t *id, ap_name_slot **slot);

/* The name for a 'with aquaprof.stage()' without one: where the block is,
 * the running function's qualified name (or, at module level, the file's
 * name) and the line; its id as AP_NAME_ENTER gives it. 0, or -1 with an
 * exception set. */
int ap_stage_name_here(uint32_t *id);

/* items=: None means 0, else an int in [0, 2**63). 0 or -1 with an
 * exception set. */
int ap_parse_items(PyObject *obj, int64_t *items);

/* A StagedFunction calling func under the stage name (name NULL: func's
 * __qualname__); for coroutine and generator functions a wrapper from
 * aquaprof._suspendable that times their awaited run or their steps. New
 * reference or NULL with an exception set. */
PyObject *ap_wrap_function(ap_module_state *st, PyObject *func,
                           PyObject *name, uint32_t name_id, int64_t items);

/* _core._restage(func, name, items): func staged again, as an unpickled
 * staged function is rebuilt (staged_function.c). */
PyObject *ap_restage(PyObject *module, PyObject *args);

/* Module-level functions defined in stage.c. */
PyObject *ap_stage_function(PyObject *module, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames);

#endif
