/* Stage names and items as given from Python: checked, interned once,
 * cached by object so that repeated names cost a pointer compare. */
#include "module.h"

#include "../core/intern.h"
#include "../core/session.h"

/* name as UTF-8; a lone surrogate (os.fsdecode of a file name that is
 * not UTF-8) as its backslash escape, held in *owned. */
static const char *
name_text(PyObject *name, PyObject **owned, Py_ssize_t *len)
{
    *owned = NULL;
    const char *text = PyUnicode_AsUTF8AndSize(name, len);
    if (text != NULL || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        return text;
    }
    PyErr_Clear();
    *owned = PyUnicode_AsEncodedString(name, "utf-8", "backslashreplace");
    if (*owned == NULL) {
        return NULL;
    }
    *len = PyBytes_GET_SIZE(*owned);
    return PyBytes_AS_STRING(*owned);
}

/* name's id as `how` says (AP_NAME_INTERN or AP_NAME_ENTER). */
static int
intern_str(PyObject *name, int how, uint32_t *id)
{
    Py_ssize_t len;
    PyObject *owned;
    const char *text = name_text(name, &owned, &len);
    if (!text) {
        return -1;
    }
    ap_status rc = how == AP_NAME_ENTER
                       ? ap_stage_name_id(text, (size_t)len, id)
                       : ap_intern(text, (size_t)len, id);
    Py_XDECREF(owned);
    if (rc == AP_IGNORED) {
        *id = AP_NAME_UNSET;    /* no session: nothing to enter it in */
    } else if (rc != AP_OK) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The id to keep for a name: an interned one, never a marker. */
static uint32_t
cacheable(uint32_t id)
{
    return id == AP_NAME_OVER ? AP_NAME_UNSET : id;
}

int
ap_stage_name(ap_module_state *st, PyObject *name, int intern, uint32_t *id,
              ap_name_slot **slot)
{
    int exact = PyUnicode_CheckExact(name);
    ap_name_slot *s = &st->names[((uintptr_t)name >> 4) % AP_NAME_CACHE];
    *slot = NULL;
    if (exact && s->name == name) {
        *id = s->id;
        if (intern && *id == AP_NAME_UNSET) {
            if (intern_str(name, intern, id) < 0) {
                return -1;
            }
            s->id = cacheable(*id);
        }
        *slot = s;
        return 0;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "stage name must be a str, got %.100s",
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    if (PyUnicode_GET_LENGTH(name) == 0) {
        PyErr_SetString(PyExc_ValueError, "stage name must not be empty");
        return -1;
    }
    if (PyUnicode_FindChar(name, '/', 0, PyUnicode_GET_LENGTH(name), 1)
        != -1) {
        PyErr_Format(PyExc_ValueError,
                     "stage name %R contains '/', which separates nested "
                     "stages in report paths", name);
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(name, AP_OVERFLOW_NAME) == 0 ||
        PyUnicode_CompareWithASCIIString(name, AP_TOO_DEEP_NAME) == 0) {
        PyErr_Format(PyExc_ValueError,
                     "stage name %R is aquaprof's own: the stage that "
                     "holds the stages past max_stages, or nested too deep",
                     name);
        return -1;
    }
    *id = AP_NAME_UNSET;
    if (intern && intern_str(name, intern, id) < 0) {
        return -1;
    }
    if (exact) {
        Py_INCREF(name);
        Py_XSETREF(s->name, name);
        Py_CLEAR(s->stage);
        s->id = cacheable(*id);
        *slot = s;
    }
    return 0;
}

/* Where the running Python code is, as "qualname:line", or the file's
 * base name for module-level code; a new reference or NULL. */
static PyObject *
where_here(void)
{
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL) {
        return PyUnicode_FromString("(no Python frame)");
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    int line = PyFrame_GetLineNumber(frame);
    PyObject *place = PyObject_GetAttrString((PyObject *)code, "co_qualname");
    if (place != NULL && PyUnicode_CompareWithASCIIString(place, "<module>")
                             == 0) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(code->co_filename);
        Py_ssize_t slash = PyUnicode_FindChar(code->co_filename, '/', 0, n,
                                              -1);
        Py_SETREF(place, slash < -1 ? NULL
                                    : PyUnicode_Substring(code->co_filename,
                                                          slash + 1, n));
    }
    Py_DECREF(code);
    if (place == NULL) {
        return NULL;
    }
    PyObject *name = PyUnicode_FromFormat("%U:%d", place, line);
    Py_DECREF(place);
    return name;
}

int
ap_stage_name_here(uint32_t *id)
{
    PyObject *name = where_here();
    if (name == NULL) {
        return -1;
    }
    /* a slash would split the path: "<lambda>" and qualnames have none,
     * a file's base name neither */
    int rc = intern_str(name, AP_NAME_ENTER, id);
    Py_DECREF(name);
    return rc;
}

int
ap_parse_items(PyObject *obj, int64_t *items)
{
    if (obj == NULL || obj == Py_None) {
        *items = 0;
        return 0;
    }
    /* any integer (numpy's too, through __index__), never a bool */
    if (PyBool_Check(obj) || !PyIndex_Check(obj) || PyFloat_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "items must be an int (items processed by one pass "
                     "through the stage), got %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL) {
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
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
