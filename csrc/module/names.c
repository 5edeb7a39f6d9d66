/* Stage names and items as given from Python: checked, interned once,
 * cached by object so that repeated names cost a pointer compare. */
#include "module.h"

#include "../core/intern.h"

int
ap_stage_name(ap_module_state *st, PyObject *name, uint32_t *id,
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

int
ap_parse_items(PyObject *obj, int64_t *items)
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
