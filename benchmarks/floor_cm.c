/* Do-nothing context managers: the floor under any 'with' statement, for
 * bench_overhead.py to print beside aquaprof's stages. Not part of the
 * package; the benchmark compiles it into a temporary folder.
 *   Protocol: __enter__/__exit__ resolve to the object itself and calling
 *             it dispatches on the argument count (aquaprof's design).
 *   Methods:  ordinary METH_NOARGS / METH_VARARGS methods, bound anew by
 *             every 'with' (the textbook C context manager). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
} Floor;

static PyObject *
protocol_call(PyObject *self, PyObject *const *args, size_t nargsf,
              PyObject *kwnames)
{
    (void)args;
    (void)kwnames;
    if (PyVectorcall_NARGS(nargsf) == 0) {
        return Py_NewRef(self);
    }
    Py_RETURN_FALSE;
}

static PyObject *
protocol_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    Floor *self = (Floor *)type->tp_alloc(type, 0);
    if (self) {
        self->vectorcall = protocol_call;
    }
    return (PyObject *)self;
}

static PyObject *
self_get(PyObject *descr, PyObject *obj, PyObject *type)
{
    (void)type;
    return Py_NewRef(obj ? obj : descr);
}

static PyObject *
method_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *
method_exit(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    Py_RETURN_FALSE;
}

static PyMemberDef protocol_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Floor, vectorcall),
     READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot protocol_slots[] = {
    {Py_tp_new, protocol_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, protocol_members},
    {0, NULL},
};

static PyType_Spec protocol_spec = {
    "floor_cm.Protocol", sizeof(Floor), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, protocol_slots,
};

static PyType_Slot descr_slots[] = {
    {Py_tp_descr_get, self_get},
    {0, NULL},
};

static PyType_Spec descr_spec = {
    "floor_cm.SelfDescriptor", sizeof(PyObject), 0, Py_TPFLAGS_DEFAULT,
    descr_slots,
};

static PyMethodDef method_methods[] = {
    {"__enter__", method_enter, METH_NOARGS, NULL},
    {"__exit__", method_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot method_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, method_methods},
    {0, NULL},
};

static PyType_Spec method_spec = {
    "floor_cm.Methods", sizeof(PyObject), 0, Py_TPFLAGS_DEFAULT,
    method_slots,
};

static int
floor_exec(PyObject *module)
{
    PyObject *protocol = PyType_FromSpec(&protocol_spec);
    PyObject *descr_type = PyType_FromSpec(&descr_spec);
    PyObject *methods = PyType_FromSpec(&method_spec);
    PyObject *descr = descr_type ? PyObject_CallNoArgs(descr_type) : NULL;
    int rc = -1;
    if (protocol && methods && descr &&
        PyObject_SetAttrString(protocol, "__enter__", descr) == 0 &&
        PyObject_SetAttrString(protocol, "__exit__", descr) == 0 &&
        PyModule_AddObjectRef(module, "Protocol", protocol) == 0 &&
        PyModule_AddObjectRef(module, "Methods", methods) == 0) {
        rc = 0;
    }
    Py_XDECREF(protocol);
    Py_XDECREF(descr_type);
    Py_XDECREF(methods);
    Py_XDECREF(descr);
    return rc;
}

static PyModuleDef_Slot floor_slots[] = {
    {Py_mod_exec, floor_exec},
    {0, NULL},
};

static PyModuleDef floor_def = {
    PyModuleDef_HEAD_INIT, "floor_cm", NULL, 0, NULL, floor_slots,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit_floor_cm(void)
{
    return PyModuleDef_Init(&floor_def);
}
