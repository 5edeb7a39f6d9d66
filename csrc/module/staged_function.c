/* Functions decorated with aquaprof.stage: each call is a stage. With no
 * profiler running a call costs one flag test over calling func. */
#include "module.h"

#include <string.h>
#include <structmember.h>

#include "../core/session.h"

/* Flags of code objects that must not be wrapped (CPython's values). */
#define AP_CO_GENERATOR 0x0020
#define AP_CO_COROUTINE 0x0080
#define AP_CO_ITERABLE_COROUTINE 0x0100
#define AP_CO_ASYNC_GENERATOR 0x0200

typedef struct {
    PyObject_HEAD
    PyObject *func;
    vectorcallfunc func_call;  /* func's own vectorcall, or the generic */
    PyObject *name;
    uint32_t name_id;
    int64_t items;
    vectorcallfunc vectorcall;
    PyObject *dict;
    /* weakly referenced, as functions are: IPython's autoreload finds
     * the objects a module held by weak references */
    PyObject *weakrefs;
} StagedFunctionObject;

static PyObject *
staged_call(PyObject *self, PyObject *const *args, size_t nargsf,
            PyObject *kwnames)
{
    StagedFunctionObject *sf = (StagedFunctionObject *)self;
    if (!ap_active()) {
        return sf->func_call(sf->func, args, nargsf, kwnames);
    }
    int entered = ap_context_enter(self, sf->name_id, sf->items) == AP_OK;
    PyObject *result = sf->func_call(sf->func, args, nargsf, kwnames);
    if (entered && ap_context_exit(self, result == NULL) == AP_MISNESTED) {
        ap_warn_misnested(sf->name);
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
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
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

/* The object module.qualname names, or NULL (no error) when there is
 * none. */
static PyObject *
lookup_global(PyObject *modname, PyObject *qualname)
{
    PyObject *obj = PyImport_Import(modname);
    PyObject *parts = obj ? PyObject_CallMethod(qualname, "split", "s", ".")
                          : NULL;
    for (Py_ssize_t i = 0; parts && obj && i < PyList_GET_SIZE(parts); i++) {
        Py_SETREF(obj, PyObject_GetAttr(obj, PyList_GET_ITEM(parts, i)));
    }
    Py_XDECREF(parts);
    if (obj == NULL) {
        PyErr_Clear();
    }
    return obj;
}

/* Pickled by reference, like a functools.wraps wrapper, when its module
 * holds it under its qualified name (a decorated module-level function
 * or method): process pools and spawned workers import it. Otherwise as
 * the function it wraps, staged again on loading. */
static PyObject *
staged_reduce(StagedFunctionObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *modname = NULL, *qualname = NULL;
    if (ap_getattr_optional((PyObject *)self, "__module__", &modname) < 0 ||
        ap_getattr_optional((PyObject *)self, "__qualname__", &qualname) < 0) {
        Py_XDECREF(modname);
        return NULL;
    }
    if (modname && qualname && PyUnicode_Check(modname) &&
        PyUnicode_Check(qualname)) {
        PyObject *found = lookup_global(modname, qualname);
        Py_XDECREF(found);
        if (found == (PyObject *)self) {
            Py_DECREF(modname);
            return qualname;
        }
    }
    Py_XDECREF(modname);
    Py_XDECREF(qualname);
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    PyObject *restage = module ? PyObject_GetAttrString(module, "_restage")
                               : NULL;
    if (restage == NULL) {
        return NULL;
    }
    return Py_BuildValue("N(OOL)", restage, self->func, self->name,
                         (long long)self->items);
}

PyObject *
ap_restage(PyObject *module, PyObject *args)
{
    PyObject *func, *name;
    long long items;
    if (!PyArg_ParseTuple(args, "OUL:_restage", &func, &name, &items)) {
        return NULL;
    }
    ap_module_state *st = ap_state(module);
    uint32_t name_id;
    ap_name_slot *slot;
    if (items < 0 ||
        ap_stage_name(st, name, AP_NAME_INTERN, &name_id, &slot) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "_restage: items < 0");
        }
        return NULL;
    }
    return ap_wrap_function(st, func, name, name_id, items);
}

/* Calls other's function under other's stage name and items from now
 * on: how a module reload (IPython's autoreload) brings up to date the
 * decorated function that old references (`from mod import f`) hold.
 * Every field is set before the old ones are released, whose release may
 * run code that calls self. */
static PyObject *
staged_update_from(StagedFunctionObject *self, PyObject *other)
{
    if (Py_TYPE(other) != Py_TYPE(self)) {
        PyErr_Format(PyExc_TypeError,
                     "_update_from takes a staged function, got %.100s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    StagedFunctionObject *src = (StagedFunctionObject *)other;
    PyObject *old_func = self->func, *old_name = self->name;
    self->func = Py_NewRef(src->func);
    self->func_call = src->func_call;
    self->name = Py_NewRef(src->name);
    self->name_id = src->name_id;
    self->items = src->items;
    Py_DECREF(old_func);
    Py_DECREF(old_name);
    Py_RETURN_NONE;
}

static PyMethodDef staged_methods[] = {
    {"__reduce__", (PyCFunction)staged_reduce, METH_NOARGS,
     "Pickles by reference when the function's module holds it."},
    {"_update_from", (PyCFunction)staged_update_from, METH_O,
     "Calls another staged function's function, under its stage name and "
     "items, from now on (a module reload's update)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef staged_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET,
     offsetof(StagedFunctionObject, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(StagedFunctionObject, dict),
     READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET,
     offsetof(StagedFunctionObject, weakrefs), READONLY, NULL},
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
    {Py_tp_methods, staged_methods},
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

/* What func returns when called, as aquaprof._suspendable numbers it: 0
 * for a plain result, else a coroutine, an async generator or a
 * generator, which a stage must follow through its steps. Looks through
 * bound methods and functools.partial, as inspect does. -1 with an
 * exception set. */
enum { PLAIN = 0, COROUTINE = 1, ASYNC_GENERATOR = 2, GENERATOR = 3 };

static int
suspension_kind(PyObject *func)
{
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError,
                     "aquaprof.stage decorates callables, got %.100s",
                     Py_TYPE(func)->tp_name);
        return -1;
    }
    Py_INCREF(func);
    for (int hops = 0; hops < 32; hops++) {
        PyObject *inner = NULL;
        if (PyMethod_Check(func)) {
            inner = Py_NewRef(PyMethod_GET_FUNCTION(func));
        } else if (!PyFunction_Check(func) &&
                   strcmp(Py_TYPE(func)->tp_name, "functools.partial") == 0 &&
                   ap_getattr_optional(func, "func", &inner) < 0) {
            Py_DECREF(func);
            return -1;
        }
        if (inner == NULL) {
            break;
        }
        Py_SETREF(func, inner);
    }
    PyObject *code = NULL, *co_flags = NULL;
    int rc = ap_getattr_optional(func, "__code__", &code);
    Py_DECREF(func);
    if (rc < 0) {
        return -1;
    }
    if (code && ap_getattr_optional(code, "co_flags", &co_flags) < 0) {
        Py_DECREF(code);
        return -1;
    }
    Py_XDECREF(code);
    long flags = co_flags && PyLong_Check(co_flags) ? PyLong_AsLong(co_flags)
                                                    : 0;
    Py_XDECREF(co_flags);
    if (flags == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        flags = 0;
    }
    if (flags & AP_CO_ASYNC_GENERATOR) {
        return ASYNC_GENERATOR;
    }
    if (flags & (AP_CO_COROUTINE | AP_CO_ITERABLE_COROUTINE)) {
        return COROUTINE;
    }
    return flags & AP_CO_GENERATOR ? GENERATOR : PLAIN;
}

/* func wrapped by aquaprof._suspendable.wrap, imported at its first use. */
static PyObject *
wrap_suspendable(ap_module_state *st, PyObject *func, PyObject *name,
                 int64_t items, int kind)
{
    if (st->wrap_suspendable == NULL) {
        PyObject *mod = PyImport_ImportModule("aquaprof.record.suspendable");
        if (mod == NULL) {
            return NULL;
        }
        st->wrap_suspendable = PyObject_GetAttrString(mod, "wrap");
        Py_DECREF(mod);
        if (st->wrap_suspendable == NULL) {
            return NULL;
        }
    }
    return PyObject_CallFunction(st->wrap_suspendable, "OOLi", func, name,
                                 (long long)items, kind);
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
PyObject *
ap_wrap_function(ap_module_state *st, PyObject *func, PyObject *name,
              uint32_t name_id, int64_t items)
{
    int kind = suspension_kind(func);
    if (kind < 0) {
        return NULL;
    }
    PyObject *owned_name = NULL;
    ap_name_slot *slot;
    if (name == NULL) {
        name = owned_name = default_name(func);
        if (name == NULL ||
            ap_stage_name(st, name, AP_NAME_INTERN, &name_id, &slot) < 0) {
            Py_XDECREF(owned_name);
            return NULL;
        }
    } else if (name_id == AP_NAME_UNSET &&
               ap_stage_name(st, name, AP_NAME_INTERN, &name_id, &slot) <
                   0) {
        /* a stage made while no session ran, now decorating: functions
         * are few, their names interned at once */
        return NULL;
    }
    if (kind != PLAIN) {
        PyObject *wrapped = wrap_suspendable(st, func, name, items, kind);
        Py_XDECREF(owned_name);
        return wrapped;
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
    sf->weakrefs = NULL;
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

int
ap_staged_function_type_init(PyObject *module, ap_module_state *st)
{
    st->staged_function_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &staged_spec, NULL);
    if (st->staged_function_type == NULL) {
        return -1;
    }
    return PyModule_AddType(module, st->staged_function_type);
}
