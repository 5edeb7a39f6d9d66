/* aquaprof.stage: a context manager and a decorator. With no profiler
 * active, entering, leaving or calling costs one flag test. */
#include "module.h"

#include <structmember.h>

#include "../core/intern.h"
#include "../core/session.h"

/* Flags of code objects that must not be wrapped (CPython's values). */
#define AP_CO_GENERATOR 0x0020
#define AP_CO_COROUTINE 0x0080
#define AP_CO_ITERABLE_COROUTINE 0x0100
#define AP_CO_ASYNC_GENERATOR 0x0200

typedef struct {
    PyObject_HEAD
    PyObject *name;        /* str, or NULL for a decorator-only stage */
    uint32_t name_id;
    int64_t items;
    vectorcallfunc vectorcall;
} StageObject;

typedef struct {
    PyObject_HEAD
    PyObject *func;
    vectorcallfunc func_call;  /* func's own vectorcall, or the generic */
    PyObject *name;
    uint32_t name_id;
    int64_t items;
    vectorcallfunc vectorcall;
    PyObject *dict;
} StagedFunctionObject;

/* ------------------------------------------------------------ names */

/* Interns a stage name given as str after checking it is non-empty and has
 * no '/'. Returns 0, sets *id and *slot (the cache slot now holding name,
 * NULL for str subclasses), or -1 with an exception set. */
static int
intern_name(ap_module_state *st, PyObject *name, uint32_t *id,
            ap_name_slot **slot)
{
    int exact = PyUnicode_CheckExact(name);
    ap_name_slot *s = &st->names[((uintptr_t)name >> 4) % AP_NAME_CACHE];
    *slot = NULL;
    if (exact && s->name == name) {
        *id = s->id;
        *slot = s;
        return 0;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "stage name must be a str, got %.100s",
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(name, &len);
    if (!text) {
        return -1;
    }
    if (len == 0) {
        PyErr_SetString(PyExc_ValueError, "stage name must not be empty");
        return -1;
    }
    if (memchr(text, '/', (size_t)len)) {
        PyErr_Format(PyExc_ValueError,
                     "stage name %R contains '/', which separates nested "
                     "stages in report paths", name);
        return -1;
    }
    if (ap_intern(text, (size_t)len, id) != AP_OK) {
        PyErr_NoMemory();
        return -1;
    }
    if (exact) {
        Py_INCREF(name);
        Py_XSETREF(s->name, name);
        Py_CLEAR(s->stage);
        s->id = *id;
        *slot = s;
    }
    return 0;
}

static int
parse_items(PyObject *obj, int64_t *items)
{
    if (obj == NULL || obj == Py_None) {
        *items = 0;
        return 0;
    }
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "items must be an int (items processed by one pass "
                     "through the stage), got %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || overflow) {
        PyErr_Format(PyExc_ValueError,
                     "items must be >= 0 and < 2**63, got %R", obj);
        return -1;
    }
    *items = v;
    return 0;
}

/* --------------------------------------------------- staged function */

static PyObject *
staged_call(PyObject *self, PyObject *const *args, size_t nargsf,
            PyObject *kwnames)
{
    StagedFunctionObject *sf = (StagedFunctionObject *)self;
    if (!ap_active()) {
        return sf->func_call(sf->func, args, nargsf, kwnames);
    }
    int entered = ap_enter(sf->name_id, sf->items, self) == AP_OK;
    PyObject *result = sf->func_call(sf->func, args, nargsf, kwnames);
    if (entered && ap_exit(self, result == NULL) == AP_ERR_NOT_INNERMOST &&
        result != NULL) {
        Py_DECREF(result);
        PyErr_Format(PyExc_RuntimeError,
                     "%R returned while a stage it entered is still open; "
                     "close inner stages first (use 'with')", sf->name);
        return NULL;
    }
    return result;
}

static PyObject *
staged_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static int
staged_traverse(StagedFunctionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->func);
    Py_VISIT(self->name);
    Py_VISIT(self->dict);
    return 0;
}

static int
staged_clear(StagedFunctionObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->name);
    Py_CLEAR(self->dict);
    return 0;
}

static void
staged_dealloc(StagedFunctionObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    staged_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
staged_repr(StagedFunctionObject *self)
{
    return PyUnicode_FromFormat("<aquaprof staged function %R of %R>",
                                self->name, self->func);
}

static PyMemberDef staged_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET,
     offsetof(StagedFunctionObject, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(StagedFunctionObject, dict),
     READONLY, NULL},
    {"stage_name", T_OBJECT, offsetof(StagedFunctionObject, name), READONLY,
     "Name of the stage each call is recorded under."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef staged_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL,
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot staged_slots[] = {
    {Py_tp_getset, staged_getset},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, staged_get},
    {Py_tp_traverse, staged_traverse},
    {Py_tp_clear, staged_clear},
    {Py_tp_dealloc, staged_dealloc},
    {Py_tp_repr, staged_repr},
    {Py_tp_members, staged_members},
    {Py_tp_doc, "A function whose calls are recorded as an aquaprof stage."},
    {0, NULL},
};

static PyType_Spec staged_spec = {
    .name = "aquaprof._core.StagedFunction",
    .basicsize = sizeof(StagedFunctionObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = staged_slots,
};

/* Refuses what a stage cannot time as one call: generators and
 * coroutines return at their first suspension. */
static int
check_wrappable(PyObject *func)
{
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError,
                     "aquaprof.stage decorates callables, got %.100s",
                     Py_TYPE(func)->tp_name);
        return -1;
    }
    PyObject *code = NULL;
    if (ap_getattr_optional(func, "__code__", &code) < 0) {
        return -1;
    }
    if (code == NULL) {
        return 0;
    }
    long flags = 0;
    PyObject *co_flags = NULL;
    if (ap_getattr_optional(code, "co_flags", &co_flags) < 0) {
        Py_DECREF(code);
        return -1;
    }
    Py_DECREF(code);
    if (co_flags && PyLong_Check(co_flags)) {
        flags = PyLong_AsLong(co_flags);
    }
    Py_XDECREF(co_flags);
    const char *kind = NULL;
    if (flags & (AP_CO_GENERATOR | AP_CO_ITERABLE_COROUTINE)) {
        kind = "a generator function";
    } else if (flags & AP_CO_ASYNC_GENERATOR) {
        kind = "an async generator function";
    } else if (flags & AP_CO_COROUTINE) {
        kind = "a coroutine function";
    }
    if (kind) {
        PyErr_Format(PyExc_TypeError,
                     "aquaprof.stage cannot decorate %R: it is %s, which "
                     "returns at its first suspension, so the stage would "
                     "not cover its work; use 'with aquaprof.stage(...):' "
                     "inside it instead", func, kind);
        return -1;
    }
    return 0;
}

static PyObject *
default_name(PyObject *func)
{
    PyObject *name = NULL;
    if (ap_getattr_optional(func, "__qualname__", &name) < 0) {
        return NULL;
    }
    if (name == NULL &&
        ap_getattr_optional(func, "__name__", &name) < 0) {
        return NULL;
    }
    if (name == NULL || !PyUnicode_Check(name)) {
        Py_XDECREF(name);
        PyErr_Format(PyExc_TypeError,
                     "cannot name a stage after %R (no __qualname__): pass "
                     "a name, aquaprof.stage(\"name\")", func);
        return NULL;
    }
    return name;
}

/* Wraps func; name NULL means func's __qualname__. */
static PyObject *
wrap_function(ap_module_state *st, PyObject *func, PyObject *name,
              uint32_t name_id, int64_t items)
{
    if (check_wrappable(func) < 0) {
        return NULL;
    }
    PyObject *owned_name = NULL;
    if (name == NULL) {
        ap_name_slot *slot;
        name = owned_name = default_name(func);
        if (name == NULL || intern_name(st, name, &name_id, &slot) < 0) {
            Py_XDECREF(owned_name);
            return NULL;
        }
    }
    StagedFunctionObject *sf = PyObject_GC_New(StagedFunctionObject,
                                               st->staged_function_type);
    if (sf == NULL) {
        Py_XDECREF(owned_name);
        return NULL;
    }
    sf->func = Py_NewRef(func);
    sf->func_call = PyVectorcall_Function(func);
    if (sf->func_call == NULL) {
        sf->func_call = PyObject_Vectorcall;
    }
    sf->name = owned_name ? owned_name : Py_NewRef(name);
    sf->name_id = name_id;
    sf->items = items;
    sf->vectorcall = staged_call;
    sf->dict = NULL;
    PyObject_GC_Track(sf);
    PyObject *done = PyObject_CallFunctionObjArgs(st->update_wrapper,
                                                  (PyObject *)sf, func, NULL);
    if (done == NULL) {
        Py_DECREF(sf);
        return NULL;
    }
    Py_DECREF(done);
    return (PyObject *)sf;
}

/* --------------------------------------------------------------- stage */

/* CPython's 'with' looks __enter__ and __exit__ up on the type and binds
 * them, allocating two method objects per block: 40 ns of a 70 ns pair.
 * Here both resolve, through a descriptor, to the stage itself (no
 * allocation), and calling a stage dispatches on the argument count:
 * () enters, (exc_type, exc, tb) exits, (function) decorates. */

enum { PROTOCOL_ENTER, PROTOCOL_EXIT };

typedef struct {
    PyObject_HEAD
    int kind;
} ProtocolObject;

static AP_NOINLINE PyObject *
stage_enter_on(StageObject *self)
{
    if (self->name == NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "aquaprof.stage() without a name can only decorate "
                        "a function; give it a name to use it with 'with'");
        return NULL;
    }
    ap_enter(self->name_id, self->items, self);
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
    if (ap_exit(self, exc_type != Py_None) == AP_ERR_NOT_INNERMOST) {
        PyErr_Format(PyExc_RuntimeError,
                     "stage %R exited while a stage entered after it is "
                     "still open; stages must close innermost first",
                     self->name);
        return NULL;
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
        return wrap_function(ap_state(module), args[0], self->name,
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

static int
stage_traverse(StageObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->name);
    return 0;
}

static void
stage_dealloc(StageObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
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
    {Py_tp_traverse, stage_traverse},
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
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = stage_slots,
};

static StageObject *
new_stage(ap_module_state *st, PyObject *name, uint32_t name_id,
          int64_t items)
{
    StageObject *self = PyObject_GC_New(StageObject, st->stage_type);
    if (self == NULL) {
        return NULL;
    }
    self->name = Py_XNewRef(name);
    self->name_id = name_id;
    self->items = items;
    self->vectorcall = stage_call;
    PyObject_GC_Track(self);
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
    if (parse_items(items_obj, &items) < 0) {
        return NULL;
    }
    if (name == Py_None) {
        name = NULL;
    }
    if (name != NULL && !PyUnicode_Check(name)) {
        if (PyCallable_Check(name)) {    /* bare @aquaprof.stage */
            return wrap_function(st, name, NULL, 0, items);
        }
        PyErr_Format(PyExc_TypeError,
                     "stage() takes a name (str) or a function to decorate, "
                     "got %.100s", Py_TYPE(name)->tp_name);
        return NULL;
    }
    if (name == NULL) {
        return (PyObject *)new_stage(st, NULL, 0, items);
    }
    uint32_t name_id;
    ap_name_slot *slot;
    if (intern_name(st, name, &name_id, &slot) < 0) {
        return NULL;
    }
    /* Reuse the slot's stage when only the cache holds it: nobody else can
     * see it, so changing its items is invisible. */
    if (slot && slot->stage && Py_REFCNT(slot->stage) == 1) {
        ((StageObject *)slot->stage)->items = items;
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
    if (st->stage_type == NULL) {
        return -1;
    }
    st->staged_function_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &staged_spec, NULL);
    st->protocol_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &protocol_spec, NULL);
    if (st->staged_function_type == NULL || st->protocol_type == NULL) {
        return -1;
    }
    if (add_protocol(st, "__enter__", PROTOCOL_ENTER) < 0 ||
        add_protocol(st, "__exit__", PROTOCOL_EXIT) < 0) {
        return -1;
    }
    if (PyModule_AddType(module, st->stage_type) < 0 ||
        PyModule_AddType(module, st->staged_function_type) < 0) {
        return -1;
    }
    return 0;
}
