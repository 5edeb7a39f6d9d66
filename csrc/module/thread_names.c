/* The Python name of each thread that records: its threading.Thread is
 * noted once, when the core makes the thread's record in a session (the
 * first stage it enters there), as a weak reference and the name it had
 * then. While the thread's object lives, its name is read from it, so a
 * thread renamed later is named as it is at the end; an ended thread's
 * object is the program's to free (with all it holds: a service that
 * starts a thread per request must not keep every one of them), and the
 * name it had at its first stage stands. At stop the notes become the
 * names alone. A thread that threading did not start (a C thread) gets
 * no name: a report labels it by its tid.
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

/* A new reference to the threading.Thread of the thread whose ident
 * (PyThread_get_thread_ident's) this is, or NULL (no exception) when
 * threading does not know it as one of its own: not imported, a thread
 * it did not start, or one it only made a stand-in for (_DummyThread).
 * Runs no Python code: dict and attribute lookups. */
static PyObject *
thread_object(unsigned long ident_of)
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
    ident = PyLong_FromUnsignedLong(ident_of);
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

/* The name thread stores (Thread.name's _name) as an exact str, or
 * NULL (no exception set). */
static PyObject *
stored_name(PyObject *thread)
{
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
    return name;
}

/* A new reference to what ref refers to, or NULL (no exception set)
 * where it is gone. */
static PyObject *
referent(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) < 0) {
        PyErr_Clear();
    }
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);       /* borrowed */
    if (obj == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return obj == Py_None ? NULL : Py_NewRef(obj);
#endif
}

/* The note of thread: (a weak reference to it, or None where its type
 * takes none; its name now, or None). NULL with an exception set. */
static PyObject *
note_of(PyObject *thread)
{
    PyObject *ref = PyWeakref_NewRef(thread, NULL);
    if (ref == NULL) {
        PyErr_Clear();
        ref = Py_NewRef(Py_None);
    }
    PyObject *name = stored_name(thread);
    PyObject *note = PyTuple_Pack(2, ref, name ? name : Py_None);
    Py_DECREF(ref);
    Py_XDECREF(name);
    return note;
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
    PyObject *thread = thread_object(PyThread_get_thread_ident());
    /* the note's tuple and weak reference are objects the collector
     * tracks: their allocation must not start a collection, whose
     * finalizers would run the program's code inside a stage's entry */
    int collecting = PyGC_Disable();
    PyObject *note = thread ? note_of(thread) : NULL;
    PyObject *key = PyLong_FromLongLong(index);
    if (key != NULL && note != NULL && st->seen_threads == NULL) {
        st->seen_threads = PyDict_New();
    }
    if (key != NULL && st->seen_threads != NULL) {
        if (note != NULL) {
            (void)PyDict_SetItem(st->seen_threads, key, note);
        } else if (PyDict_DelItem(st->seen_threads, key) < 0) {
            /* a thread threading did not start, at an index no ended
             * thread held before it (an index taken over drops the
             * ended one's name) */
            PyErr_Clear();
        }
    }
    if (collecting) {
        PyGC_Enable();
    }
    Py_XDECREF(key);
    Py_XDECREF(note);
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

void
ap_threads_forget(ap_module_state *st)
{
    Py_CLEAR(st->seen_threads);
    st->seen_gen = 0;
}

PyObject *
ap_threads_take(ap_module_state *st)
{
    PyObject *seen = ap_threads_noted(st);
    ap_threads_forget(st);
    if (seen == NULL) {
        return NULL;
    }
    /* the names as they are now, and no reference to any thread */
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *names = PyDict_New();
    PyObject *key, *note;
    Py_ssize_t pos = 0;
    while (names != NULL && PyDict_Next(seen, &pos, &key, &note)) {
        PyObject *name = ap_thread_name(note);
        if (name != NULL && PyDict_SetItem(names, key, name) < 0) {
            Py_CLEAR(names);
        }
        Py_XDECREF(name);
    }
    Py_DECREF(seen);
    /* out of memory: the threads are labelled by their tids */
    PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
    return names;
}

PyObject *
ap_thread_name(PyObject *note)
{
    if (PyUnicode_Check(note)) {
        return Py_NewRef(note);
    }
    if (!PyTuple_Check(note) || PyTuple_GET_SIZE(note) != 2) {
        return NULL;
    }
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *ref = PyTuple_GET_ITEM(note, 0);
    PyObject *thread = PyWeakref_Check(ref) ? referent(ref) : NULL;
    PyObject *name = thread ? stored_name(thread) : NULL;
    Py_XDECREF(thread);
    PyObject *then = PyTuple_GET_ITEM(note, 1);
    if (name == NULL && PyUnicode_Check(then)) {
        name = Py_NewRef(then);
    }
    PyErr_Restore(exc_type, exc, tb);
    return name;
}

PyObject *
ap_thread_note_by_ident(uint64_t ident)
{
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *thread = thread_object((unsigned long)ident);
    PyObject *note = thread ? note_of(thread) : NULL;
    Py_XDECREF(thread);
    PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
    return note;
}
