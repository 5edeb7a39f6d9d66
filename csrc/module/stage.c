/* aquaprof.stage(): a context manager and a decorator. With no profiler
 * active, entering and leaving cost one flag test each. */
#include "module.h"

#include <structmember.h>
#include <string.h>

#include "../core/session.h"

typedef struct {
    PyObject_HEAD
    PyObject *name;        /* str, or NULL for a decorator-only stage */
    uint32_t name_id;
    int64_t items;
    vectorcallfunc vectorcall;
} StageObject;

/* CPython's 'with' looks __enter__ and __exit__ up on the type and binds
 * them, allocating two method objects per block, most of a stage pair's
 * cost (docs/benchmarks.md, "Overhead of a stage").
 * Here both resolve, through a descriptor, to the stage itself (no
 * allocation), and calling a stage dispatches on the argument count:
 * () enters, (exc_type, exc, tb) exits, (function) decorates. */

enum { PROTOCOL_ENTER, PROTOCOL_EXIT };

typedef struct {
    PyObject_HEAD
    int kind;
} ProtocolObject;

/* The stage's name id in a running session: interned at the first entry
 * in one that can still record a new path, else AP_NAME_OVER, not kept
 * (a stage without a name is named after where it is entered). */
static AP_NOINLINE int
stage_intern(StageObject *self, uint32_t *id)
{
    if (self->name == NULL) {
        return ap_stage_name_here(id);
    }
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    ap_name_slot *slot;
    if (module == NULL ||
        ap_stage_name(ap_state(module), self->name, AP_NAME_ENTER, id,
                      &slot) < 0) {
        return -1;
    }
    if (*id != AP_NAME_OVER) {
        self->name_id = *id;
    }
    return 0;
}

static AP_NOINLINE PyObject *
stage_enter_on(StageObject *self)
{
    uint32_t id = self->name_id;
    if (id == AP_NAME_UNSET && stage_intern(self, &id) < 0) {
        /* out of memory for the name: never the program's error; the
         * call is filed, and counted, with the stages past max_stages */
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
            return NULL;
        }
        PyErr_Clear();
        id = AP_NAME_OVER;
    }
    if (id != AP_NAME_UNSET) {    /* else no session to enter it in */
        ap_context_enter((PyObject *)self, id, self->items);
    }
    return Py_NewRef(self);
}

static inline PyObject *
stage_enter(StageObject *self)
{
    if (ap_active()) {
        return stage_enter_on(self);
    }
    return Py_NewRef(self);
}

static AP_NOINLINE PyObject *
stage_exit_on(StageObject *self, PyObject *exc_type)
{
    if (ap_context_exit((PyObject *)self, exc_type != Py_None) ==
        AP_MISNESTED) {
        ap_warn_misnested(self->name);
    }
    Py_RETURN_FALSE;
}

static inline PyObject *
stage_exit(StageObject *self, PyObject *exc_type)
{
    if (ap_active()) {
        return stage_exit_on(self, exc_type);
    }
    Py_RETURN_FALSE;
}

/* Decorating, and any call that is not the 'with' protocol. */
static AP_NOINLINE PyObject *
stage_call_rare(StageObject *self, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    if (nargs == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        PyObject *module = PyType_GetModule(Py_TYPE(self));
        if (module == NULL) {
            return NULL;
        }
        return ap_wrap_function(ap_state(module), args[0], self->name,
                             self->name_id, self->items);
    }
    PyErr_SetString(PyExc_TypeError,
                    "a stage used as a decorator takes the function only");
    return NULL;
}

static PyObject *
stage_call(PyObject *self, PyObject *const *args, size_t nargsf,
           PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL) {
        if (nargs == 0) {
            return stage_enter((StageObject *)self);
        }
        if (nargs == 3) {
            return stage_exit((StageObject *)self, args[0]);
        }
    }
    return stage_call_rare((StageObject *)self, args, nargs, kwnames);
}

static PyObject *
protocol_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    return Py_NewRef(obj ? obj : self);
}

/* type(stage).__enter__(stage) and type(stage).__exit__(stage, t, v, tb),
 * as contextlib.ExitStack calls them. */
static PyObject *
protocol_call(ProtocolObject *self, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    int want = self->kind == PROTOCOL_ENTER ? 1 : 4;
    if ((kwargs && PyDict_GET_SIZE(kwargs)) || n != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %d positional arguments "
                     "(%zd given)", self->kind == PROTOCOL_ENTER
                     ? "__enter__" : "__exit__", want, n);
        return NULL;
    }
    PyObject *stage = PyTuple_GET_ITEM(args, 0);
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    if (module == NULL) {
        return NULL;
    }
    if (!Py_IS_TYPE(stage, ap_state(module)->stage_type)) {
        PyErr_Format(PyExc_TypeError, "expected an aquaprof stage, got "
                     "%.100s", Py_TYPE(stage)->tp_name);
        return NULL;
    }
    return self->kind == PROTOCOL_ENTER
               ? stage_enter((StageObject *)stage)
               : stage_exit((StageObject *)stage, PyTuple_GET_ITEM(args, 1));
}

static PyObject *
protocol_repr(ProtocolObject *self)
{
    return PyUnicode_FromFormat("<aquaprof stage %s>",
                                self->kind == PROTOCOL_ENTER ? "__enter__"
                                                             : "__exit__");
}

static void
protocol_dealloc(ProtocolObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot protocol_slots[] = {
    {Py_tp_descr_get, protocol_get},
    {Py_tp_call, protocol_call},
    {Py_tp_repr, protocol_repr},
    {Py_tp_dealloc, protocol_dealloc},
    {0, NULL},
};

static PyType_Spec protocol_spec = {
    .name = "aquaprof._core.StageProtocol",
    .basicsize = sizeof(ProtocolObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = protocol_slots,
};

static PyObject *
stage_repr(StageObject *self)
{
    if (self->name == NULL) {
        return PyUnicode_FromString("<aquaprof.stage (named by decoration)>");
    }
    return PyUnicode_FromFormat("<aquaprof.stage %R items=%lld>", self->name,
                                (long long)self->items);
}

/* A stage holds a str and nothing else: it cannot be part of a cycle, so
 * it is not tracked by the garbage collector. */
static void
stage_dealloc(StageObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(self->name);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
stage_get_items(StageObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(self->items);
}

static PyObject *
stage_get_name(StageObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->name ? self->name : Py_None);
}

static PyMemberDef stage_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(StageObject, vectorcall),
     READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef stage_getset[] = {
    {"name", (getter)stage_get_name, NULL, "Stage name, or None.", NULL},
    {"items", (getter)stage_get_items, NULL,
     "Items processed per pass, for throughput.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot stage_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, stage_dealloc},
    {Py_tp_repr, stage_repr},
    {Py_tp_members, stage_members},
    {Py_tp_getset, stage_getset},
    {Py_tp_doc, "A named stage: 'with' it, or decorate a function with it. "
                "Made by aquaprof.stage()."},
    {0, NULL},
};

static PyType_Spec stage_spec = {
    .name = "aquaprof._core.Stage",
    .basicsize = sizeof(StageObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = stage_slots,
};

static StageObject *
new_stage(ap_module_state *st, PyObject *name, uint32_t name_id,
          int64_t items)
{
    StageObject *self = PyObject_New(StageObject, st->stage_type);
    if (self == NULL) {
        return NULL;
    }
    self->name = Py_XNewRef(name);
    self->name_id = name_id;
    self->items = items;
    self->vectorcall = stage_call;
    return self;
}

PyObject *
ap_stage_function(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
    PyObject *name = NULL, *items_obj = NULL;
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError,
                     "stage() takes the name as its only positional "
                     "argument (%zd given); pass items=...", nargs);
        return NULL;
    }
    if (nargs == 1) {
        name = args[0];
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(key, "items") == 0) {
            items_obj = args[nargs + i];
        } else if (PyUnicode_CompareWithASCIIString(key, "name") == 0 &&
                   name == NULL) {
            name = args[nargs + i];
        } else {
            PyErr_Format(PyExc_TypeError,
                         "stage() got an unexpected keyword argument %R", key);
            return NULL;
        }
    }
    ap_module_state *st = ap_state(module);
    int64_t items;
    if (ap_parse_items(items_obj, &items) < 0) {
        return NULL;
    }
    if (name == Py_None) {
        name = NULL;
    }
    if (name != NULL && !PyUnicode_Check(name)) {
        if (PyCallable_Check(name)) {    /* bare @aquaprof.stage */
            return ap_wrap_function(st, name, NULL, 0, items);
        }
        PyErr_Format(PyExc_TypeError,
                     "stage() takes a name (str) or a function to decorate, "
                     "got %.100s", Py_TYPE(name)->tp_name);
        return NULL;
    }
    if (name == NULL) {
        return (PyObject *)new_stage(st, NULL, AP_NAME_UNSET, items);
    }
    uint32_t name_id;
    ap_name_slot *slot;
    /* the name is interned at the stage's first entry, when it can
     * become a path (the cache slot may hold its id already) */
    if (ap_stage_name(st, name, AP_NAME_CHECK, &name_id, &slot) < 0) {
        return NULL;
    }
    /* Reuse the slot's stage when only the cache holds it: nobody else can
     * see it, so changing its items is invisible. */
    if (slot && slot->stage && Py_REFCNT(slot->stage) == 1) {
        ((StageObject *)slot->stage)->items = items;
        ((StageObject *)slot->stage)->name_id = name_id;
        return Py_NewRef(slot->stage);
    }
    StageObject *self = new_stage(st, name, name_id, items);
    if (self && slot) {
        Py_XSETREF(slot->stage, Py_NewRef(self));
    }
    return (PyObject *)self;
}

static int
add_protocol(ap_module_state *st, const char *attr, int kind)
{
    ProtocolObject *p = PyObject_New(ProtocolObject, st->protocol_type);
    if (p == NULL) {
        return -1;
    }
    p->kind = kind;
    int rc = PyObject_SetAttrString((PyObject *)st->stage_type, attr,
                                    (PyObject *)p);
    Py_DECREF(p);
    return rc;
}

int
ap_stage_types_init(PyObject *module, ap_module_state *st)
{
    st->stage_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &stage_spec, NULL);
    st->protocol_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &protocol_spec, NULL);
    if (st->stage_type == NULL || st->protocol_type == NULL) {
        return -1;
    }
    if (add_protocol(st, "__enter__", PROTOCOL_ENTER) < 0 ||
        add_protocol(st, "__exit__", PROTOCOL_EXIT) < 0) {
        return -1;
    }
    return PyModule_AddType(module, st->stage_type);
}
