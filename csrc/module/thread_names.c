/* The Python name of each thread that records: its threading.Thread is
 * noted once, when the core makes the thread's record in a session (the
 * first stage it enters there), and its name read when a report is
 * built. Holding the object, not the name, is what lets a thread renamed
 * later, or ended before the report, be named as it is at the end. A
 * thread that threading did not start (a C thread) gets no name: a
 * report labels it by its tid.
 *
 * The notes of the active session live in the module state until its
 * owner takes them at stop. Neither noting nor reading runs Python code
 * (threading's own tables and the name Thread.name stores, _name): they
 * happen inside a stage's entry and while a report is built, where code
 * of the program's must not run. */
#include "module.h"

/* obj.name, or NULL with an exception set. Names are interned: lookups
 * keep them in caches, where a fresh string each time would pile up. */
static PyObject *
interned_attr(PyObject *obj, const char *name)
{
    PyObject *key = PyUnicode_InternFromString(name);
    PyObject *value = key ? PyObject_GetAttr(obj, key) : NULL;
    Py_XDECREF(key);
    return value;
}

/* A new reference to the calling thread's threading.Thread, or NULL
 * (no exception) when threading does not know it as one of its own: not
 * imported, a thread it did not start, or one it only made a stand-in
 * for (_DummyThread). Runs no Python code: dict and attribute lookups. */
static PyObject *
thread_object(void)
{
    /* interned, as in interned_attr */
    PyObject *name = PyUnicode_InternFromString("threading");
    if (name == NULL) {
        return NULL;
    }
    PyObject *threading = PyImport_GetModule(name);
    Py_DECREF(name);
    if (threading == NULL) {
        return NULL;
    }
    PyObject *active = interned_attr(threading, "_active");
    PyObject *dummy = interned_attr(threading, "_DummyThread");
    PyObject *ident = NULL, *thread = NULL;
    if (!active || !PyDict_Check(active) || !dummy || !PyType_Check(dummy)) {
        goto done;
    }
    ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (ident == NULL) {
        goto done;
    }
    thread = PyDict_GetItemWithError(active, ident);   /* borrowed */
    if (thread != NULL &&
        !PyObject_TypeCheck(thread, (PyTypeObject *)dummy)) {
        Py_INCREF(thread);
    } else {
        thread = NULL;
    }
done:
    Py_XDECREF(ident);
    Py_XDECREF(dummy);
    Py_XDECREF(active);
    Py_DECREF(threading);
    return thread;
}

void
ap_threads_note(ap_module_state *st, int64_t index)
{
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    uint64_t gen = ap_session_gen();
    if (st->seen_gen != gen) {
        /* an earlier session's that no owner took (a forked child's copy
         * of its parent's) */
        Py_CLEAR(st->seen_threads);
        st->seen_gen = gen;
    }
    PyObject *thread = thread_object();
    PyObject *key = thread ? PyLong_FromLongLong(index) : NULL;
    if (key != NULL && st->seen_threads == NULL) {
        st->seen_threads = PyDict_New();
    }
    if (key != NULL && st->seen_threads != NULL) {
        (void)PyDict_SetItem(st->seen_threads, key, thread);
    }
    Py_XDECREF(key);
    Py_XDECREF(thread);
    /* a thread left unnamed is labelled by its tid: never an error */
    PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
}

PyObject *
ap_threads_noted(ap_module_state *st)
{
    if (st->seen_threads == NULL || st->seen_gen != ap_session_gen()) {
        return NULL;
    }
    return Py_NewRef(st->seen_threads);
}

PyObject *
ap_threads_take(ap_module_state *st)
{
    PyObject *seen = ap_threads_noted(st);
    Py_CLEAR(st->seen_threads);
    st->seen_gen = 0;
    return seen;
}

PyObject *
ap_thread_name(PyObject *thread)
{
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *name = NULL;
    PyObject *dict = PyObject_GenericGetDict(thread, NULL);
    PyObject *key = PyUnicode_InternFromString("_name");
    PyObject *held = dict && key && PyDict_Check(dict)
                         ? PyDict_GetItemWithError(dict, key)
                         : NULL;
    Py_XDECREF(key);
    if (held != NULL && PyUnicode_Check(held)) {
        /* an exact str, so that the report holds plain data */
        name = PyUnicode_FromObject(held);
    }
    Py_XDECREF(dict);
    PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
    return name;
}
