/* Which stage stack a stage edge goes on: the current execution
 * context's. asyncio runs each task in its own contextvars.Context, so a
 * ContextVar tells the task's stack; contexts copied from another (a task
 * created inside a stage) inherit its value, so their stages nest under
 * the stage that was open where they began. The lookup runs only when the
 * thread has switched context since the last edge (csrc/core/session.h). */
#include "module.h"

#include "../core/session.h"

typedef struct {
    PyObject_HEAD
    const PyObject *context; /* identity only: the context it was made in */
    uint64_t gen;            /* its session */
    int64_t thread;          /* its thread's index in that session */
    ap_stack *stack;
} ContextStackObject;

static void
context_stack_dealloc(ContextStackObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    ap_stack_release(self->gen, self->stack);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot context_stack_slots[] = {
    {Py_tp_dealloc, context_stack_dealloc},
    {Py_tp_doc, "The stage stack of one execution context (internal)."},
    {0, NULL},
};

static PyType_Spec context_stack_spec = {
    .name = "aquaprof._core.ContextStack",
    .basicsize = sizeof(ContextStackObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = context_stack_slots,
};

/* Whether the current context was entered by Context.run, as each step of
 * an asyncio (or trio) task enters its task's: such a context is left at
 * every await. A thread's own context never is: entering it again is
 * allowed, and undone at once. */
static int
context_entered(void)
{
    PyObject *ctx = PyThreadState_Get()->context;
    if (ctx == NULL) {
        return 0;
    }
    if (PyContext_Enter(ctx) < 0) {
        PyErr_Clear();   /* "already entered" */
        return 1;
    }
    PyContext_Exit(ctx);
    return 0;
}

/* Whether the code running is a greenlet other than its thread's main one
 * (gevent's workers and hub, eventlet's): each runs in a context of its
 * own that it leaves at every switch, as a task does at an await. Asked
 * once a context, where its stack is made; greenlet is looked up, never
 * imported. */
static int
in_child_greenlet(void)
{
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *name = PyUnicode_FromString("greenlet");
    PyObject *module = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *current = module ? PyObject_CallMethod(module, "getcurrent",
                                                     NULL)
                               : NULL;
    PyObject *parent = current ? PyObject_GetAttrString(current, "parent")
                               : NULL;
    int child = parent != NULL && parent != Py_None;
    Py_XDECREF(parent);
    Py_XDECREF(current);
    Py_XDECREF(module);
    /* a greenlet that cannot tell is taken for none */
    PyErr_Restore(exc_type, exc, tb);
    return child;
}

/* A stack for the current context, made in it and kept in its variable. */
static int
open_stack(ap_module_state *st, ContextStackObject *under)
{
    ap_stack *k;
    if (ap_stack_open(under ? under->stack : NULL,
                      context_entered() || in_child_greenlet(),
                      &k) != AP_OK) {
        return -1;
    }
    ContextStackObject *fresh = PyObject_New(ContextStackObject,
                                             st->context_stack_type);
    if (fresh == NULL) {
        ap_stack_release(ap_session_gen(), k);
        return -1;
    }
    fresh->gen = ap_session_gen();
    fresh->thread = ap_thread_index_now();
    fresh->stack = k;
    fresh->context = NULL;
    PyObject *token = PyContextVar_Set(st->stack_var, (PyObject *)fresh);
    /* setting made the thread's context if it had none */
    fresh->context = PyThreadState_Get()->context;
    Py_DECREF(fresh);   /* the context holds it, or it is released */
    if (token == NULL) {
        return -1;
    }
    Py_DECREF(token);
    ap_stack_use(ap_context_key(), k);
    return 0;
}

/* Notes the calling thread's Python thread when it was not known
 * before (known -1) and now is. */
static void
note_if_new(ap_module_state *st, int64_t known)
{
    int64_t now = ap_thread_index_now();
    if (known < 0 && now >= 0) {
        ap_threads_note(st, now);
    }
}

void
ap_choose_stack(PyObject *owner)
{
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    /* -1: the thread has no record in this session until it opens a
     * stack below; its first stage entry comes here, so this is where a
     * thread is first seen */
    int64_t known = ap_thread_index_now();
    PyObject *module = PyType_GetModule(Py_TYPE(owner));
    PyObject *value = NULL;
    if (module == NULL) {
        goto fail;
    }
    ap_module_state *st = ap_state(module);
    if (PyContextVar_Get(st->stack_var, NULL, &value) < 0) {
        goto fail;
    }
    ContextStackObject *cs = NULL;
    if (value && Py_IS_TYPE(value, st->context_stack_type)) {
        cs = (ContextStackObject *)value;
        int64_t me = ap_thread_index_now();
        if (cs->gen != ap_session_gen() || me < 0 || cs->thread != me) {
            cs = NULL;   /* another run's, or another thread's */
        }
    }
    if (cs && cs->context == PyThreadState_Get()->context) {
        ap_stack_use(ap_context_key(), cs->stack);
    } else if (open_stack(st, cs) < 0) {
        Py_XDECREF(value);
        goto fail;
    }
    Py_XDECREF(value);
    note_if_new(st, known);
    PyErr_Restore(exc_type, exc, tb);
    return;
fail:
    /* never into user code: the edge goes on the thread's own stack */
    PyErr_Clear();
    ap_stack_use(ap_context_key(), NULL);
    if (module != NULL) {
        note_if_new(ap_state(module), known);
    }
    PyErr_Restore(exc_type, exc, tb);
}

void
ap_warn_misnested(PyObject *name)
{
    static uint64_t warned_gen;
    uint64_t gen = ap_session_gen();
    if (warned_gen == gen) {
        return;
    }
    warned_gen = gen;
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                         "aquaprof: stage %R closed while stages opened "
                         "inside it were still open (an abandoned generator "
                         "or a context manager closed out of order); they "
                         "were closed with it and are counted as unclosed "
                         "in the report. Said once per run.", name) < 0) {
        PyErr_Clear();  /* warnings as errors must not fail the program */
    }
    PyErr_Restore(exc_type, exc, tb);
}

int
ap_contexts_init(PyObject *module, ap_module_state *st)
{
    st->context_stack_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &context_stack_spec, NULL);
    if (st->context_stack_type == NULL) {
        return -1;
    }
    st->stack_var = PyContextVar_New("aquaprof.stage_stack", NULL);
    return st->stack_var == NULL ? -1 : 0;
}

const ap_stack *
ap_context_stack_in(PyObject *module, PyObject *context)
{
    if (context == NULL || !PyContext_CheckExact(context)) {
        return NULL;
    }
    ap_module_state *st = ap_state(module);
    PyObject *value = PyObject_GetItem(context, st->stack_var);
    if (value == NULL) {
        PyErr_Clear();   /* KeyError: the context never recorded */
        return NULL;
    }
    const ap_stack *k = NULL;
    if (Py_IS_TYPE(value, st->context_stack_type)) {
        ContextStackObject *cs = (ContextStackObject *)value;
        if (cs->gen == ap_session_gen()) {
            k = cs->stack;   /* stacks live as long as their session */
        }
    }
    Py_DECREF(value);   /* the context holds it */
    return k;
}
