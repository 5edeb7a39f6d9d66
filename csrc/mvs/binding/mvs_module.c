/* aquaprof._mvs, the kit's CPython binding: NumPy entry points of the
 * plane-sweep kernels (the CUDA ones are in ../cuda/cuda_sweep.c). The
 * Python layer (aquaprof/mvs/) gives users their error messages; this one
 * re-checks dtypes and shapes so that no input can crash it, and releases
 * the GIL around the work. */
#define AP_MVS_IMPORTS_NUMPY
#include "mvs_module.h"

#include "../cpu/sweep.h"
#include "../cpu/vectorize.h"
#include "../cpu/wide_lanes.h"
#include "../cuda/cuda_sweep.h"
#include "../cuda/gpu_depth.h"
#include "../geometry/projector.h"

#include <time.h>

PyArrayObject *
ap_mvs_array(PyObject *obj, int type, int ndim, npy_intp last,
             const char *what)
{
    /* a NumPy array of the wrong shape is refused before it is
     * converted, which could copy a huge view */
    PyArrayObject *a = PyArray_Check(obj) ? (PyArrayObject *)obj : NULL;
    if (a != NULL) {
        Py_INCREF(a);
    } else if (!(a = (PyArrayObject *)PyArray_FROM_OTF(obj, type, 0))) {
        return NULL;
    }
    if (PyArray_NDIM(a) != ndim ||
        (last > 0 && PyArray_DIM(a, ndim - 1) != last)) {
        PyErr_Format(PyExc_ValueError, "%s must be %d-D (last dimension "
                     "%zd when not 0), got %d-D with last dimension %zd",
                     what, ndim, (Py_ssize_t)last, PyArray_NDIM(a),
                     (Py_ssize_t)(PyArray_NDIM(a)
                                  ? PyArray_DIM(a, PyArray_NDIM(a) - 1)
                                  : 0));
        Py_DECREF(a);
        return NULL;
    }
    PyArrayObject *c = (PyArrayObject *)PyArray_FROM_OTF(
        (PyObject *)a, type, NPY_ARRAY_IN_ARRAY);
    Py_DECREF(a);
    return c;
}

int
ap_mvs_check_pixels(Py_ssize_t h, Py_ssize_t w, const char *what)
{
    if (w == 0 || h <= AP_MAX_PIXELS / w) {
        return 0;
    }
    char pixels[48];   /* the product may not fit in any integer type */
    snprintf(pixels, sizeof(pixels), "%.0f", (double)h * (double)w);
    PyErr_Format(PyExc_ValueError, "%s has %zd x %zd = %s pixels, more "
                 "than the %lld (2^31 - 1) the kernels index", what, h, w,
                 pixels, AP_MAX_PIXELS);
    return -1;
}

int
ap_mvs_check_count(Py_ssize_t n, const char *what, const char *things)
{
    if (n <= AP_MAX_COUNT) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "%s has %zd %s, more than the %lld "
                 "(2^31 - 1) the kernels index", what, n, things,
                 AP_MAX_COUNT);
    return -1;
}

/* The size checks of the arrays the kernels take, by their dimensions:
 * 0, or -1 with ValueError naming what. */
typedef int (*dims_check)(const npy_intp *dims, int ndim, const char *what);

/* (H, W) or (N, H, W): images of 2 x 2 pixels or more */
static int
image_dims(const npy_intp *dims, int ndim, const char *what)
{
    npy_intp h = dims[ndim - 2], w = dims[ndim - 1];
    if (ndim == 3 && ap_mvs_check_count(dims[0], what, "views") < 0) {
        return -1;
    }
    if (h < 2 || w < 2) {
        PyErr_Format(PyExc_ValueError, "%s must have images of at least "
                     "2 x 2 pixels, got %zd x %zd", what, (Py_ssize_t)h,
                     (Py_ssize_t)w);
        return -1;
    }
    return ap_mvs_check_pixels(h, w, what);
}

/* (H, W, D) cost volumes */
static int
volume_dims(const npy_intp *dims, int ndim, const char *what)
{
    (void)ndim;
    return ap_mvs_check_pixels(dims[0], dims[1], what) < 0 ||
                   ap_mvs_check_count(dims[2], what, "planes") < 0
               ? -1
               : 0;
}

/* (D,) depths */
static int
list_dims(const npy_intp *dims, int ndim, const char *what)
{
    (void)ndim;
    return ap_mvs_check_count(dims[0], what, "entries");
}

/* ap_mvs_array whose dimensions pass check, checked before a NumPy
 * array is converted (which could copy a huge view) and after (for
 * other sequences). */
static PyArrayObject *
checked_array(PyObject *obj, int type, int ndim, dims_check check,
              const char *what)
{
    if (PyArray_Check(obj) && PyArray_NDIM((PyArrayObject *)obj) == ndim &&
        check(PyArray_DIMS((PyArrayObject *)obj), ndim, what) < 0) {
        return NULL;
    }
    PyArrayObject *a = ap_mvs_array(obj, type, ndim, 0, what);
    if (a != NULL && check(PyArray_DIMS(a), ndim, what) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

PyArrayObject *
ap_mvs_images(PyObject *obj, int ndim, const char *what)
{
    return checked_array(obj, NPY_FLOAT, ndim, image_dims, what);
}

void
ap_mvs_camera_error(const double *params, int status, const char *what)
{
    char why[512];
    ap_camera_explain(params, status, why, sizeof(why));
    if (what == NULL) {
        PyErr_Format(PyExc_ValueError, "not a valid camera: %s", why);
    } else {
        PyErr_Format(PyExc_ValueError, "%s is not a valid camera: %s",
                     what, why);
    }
}

int
ap_mvs_camera(PyObject *obj, ap_camera *cam, const char *what)
{
    PyArrayObject *p = ap_mvs_array(obj, NPY_DOUBLE, 1, AP_CAMERA_PARAMS,
                                    what ? what : "camera");
    if (p == NULL) {
        return -1;
    }
    int rc = ap_camera_init(cam, PyArray_DATA(p));
    if (rc != AP_CAMERA_OK) {
        ap_mvs_camera_error(PyArray_DATA(p), rc, what);
    }
    Py_DECREF(p);
    return rc == AP_CAMERA_OK ? 0 : -1;
}

static PyObject *
check_camera(PyObject *module, PyObject *params)
{
    (void)module;
    ap_camera cam;
    if (ap_mvs_camera(params, &cam, NULL) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Parses (camera params, float64 (N, width) array) for cast_rays and
 * project. New reference to the array, or NULL with an exception set. */
static PyArrayObject *
camera_and_rows(PyObject *args, const char *format, ap_camera *cam,
                int width, const char *what)
{
    PyObject *params, *rows;
    if (!PyArg_ParseTuple(args, format, &params, &rows) ||
        ap_mvs_camera(params, cam, NULL) < 0) {
        return NULL;
    }
    return ap_mvs_array(rows, NPY_DOUBLE, 2, width, what);
}

static PyObject *
cast_rays(PyObject *module, PyObject *args)
{
    (void)module;
    ap_camera cam;
    PyArrayObject *pix = camera_and_rows(args, "OO:cast_rays", &cam, 2,
                                         "pixels");
    if (pix == NULL) {
        return NULL;
    }
    npy_intp n = PyArray_DIM(pix, 0);
    npy_intp dims3[2] = {n, 3};
    PyObject *origins = PyArray_SimpleNew(2, dims3, NPY_DOUBLE);
    PyObject *dirs = PyArray_SimpleNew(2, dims3, NPY_DOUBLE);
    PyObject *valid = PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (origins && dirs && valid) {
        const double *p = PyArray_DATA(pix);
        double *o = PyArray_DATA((PyArrayObject *)origins);
        double *d = PyArray_DATA((PyArrayObject *)dirs);
        npy_bool *ok = PyArray_DATA((PyArrayObject *)valid);
        Py_BEGIN_ALLOW_THREADS
        for (npy_intp i = 0; i < n; i++) {
            ok[i] = (npy_bool)ap_camera_cast(&cam, p[2 * i], p[2 * i + 1],
                                             o + 3 * i, d + 3 * i);
            if (!ok[i]) {
                for (int k = 0; k < 3; k++) {
                    o[3 * i + k] = d[3 * i + k] = NAN;
                }
            }
        }
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(pix);
    if (!origins || !dirs || !valid) {
        Py_XDECREF(origins);
        Py_XDECREF(dirs);
        Py_XDECREF(valid);
        return NULL;
    }
    return Py_BuildValue("(NNN)", origins, dirs, valid);
}

static PyObject *
project(PyObject *module, PyObject *args)
{
    (void)module;
    ap_camera cam;
    PyArrayObject *pts = camera_and_rows(args, "OO:project", &cam, 3,
                                         "points");
    if (pts == NULL) {
        return NULL;
    }
    npy_intp n = PyArray_DIM(pts, 0);
    npy_intp dims2[2] = {n, 2};
    PyObject *pixels = PyArray_SimpleNew(2, dims2, NPY_DOUBLE);
    PyObject *valid = PyArray_SimpleNew(1, &n, NPY_BOOL);
    if (pixels && valid) {
        const double *x = PyArray_DATA(pts);
        double *uv = PyArray_DATA((PyArrayObject *)pixels);
        npy_bool *ok = PyArray_DATA((PyArrayObject *)valid);
        Py_BEGIN_ALLOW_THREADS
        for (npy_intp i = 0; i < n; i++) {
            ok[i] = (npy_bool)ap_camera_project(&cam, x + 3 * i, &uv[2 * i],
                                                &uv[2 * i + 1]);
            if (!ok[i]) {
                uv[2 * i] = uv[2 * i + 1] = NAN;
            }
        }
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(pts);
    if (!pixels || !valid) {
        Py_XDECREF(pixels);
        Py_XDECREF(valid);
        return NULL;
    }
    return Py_BuildValue("(NN)", pixels, valid);
}

static PyObject *
warp(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *src_obj, *ref_params, *src_params;
    double depth;
    ap_camera ref, src;
    if (!PyArg_ParseTuple(args, "OOOd:warp", &src_obj, &ref_params,
                          &src_params, &depth) ||
        ap_mvs_camera(ref_params, &ref, "ref_cam") < 0 ||
        ap_mvs_camera(src_params, &src, "src_cam") < 0) {
        return NULL;
    }
    PyArrayObject *img = ap_mvs_images(src_obj, 2, "src");
    if (img == NULL) {
        return NULL;
    }
    PyObject *out = PyArray_SimpleNew(2, PyArray_DIMS(img), NPY_FLOAT);
    int rc = 0;
    if (out) {
        int h = (int)PyArray_DIM(img, 0), w = (int)PyArray_DIM(img, 1);
        Py_BEGIN_ALLOW_THREADS
        rc = ap_warp(PyArray_DATA(img), h, w, &ref, &src, depth,
                     PyArray_DATA((PyArrayObject *)out));
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(img);
    if (out && rc < 0) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

/* 0 when out is a writeable, C-contiguous float32 (h, w, d) array; -1
 * with ValueError otherwise. */
static int
check_volume_out(PyArrayObject *out, int h, int w, int d)
{
    if (PyArray_TYPE(out) != NPY_FLOAT || PyArray_NDIM(out) != 3 ||
        PyArray_DIM(out, 0) != h || PyArray_DIM(out, 1) != w ||
        PyArray_DIM(out, 2) != d || !PyArray_IS_C_CONTIGUOUS(out) ||
        !PyArray_ISWRITEABLE(out) || !PyArray_ISALIGNED(out)) {
        PyErr_SetString(PyExc_ValueError, "out must be a writeable, "
                        "C-contiguous float32 (H, W, D) array");
        return -1;
    }
    return 0;
}

/* The n cameras of a float64 (n, AP_CAMERA_PARAMS) array, in a block to
 * PyMem_Free; NULL with ValueError naming the first bad one, or
 * MemoryError. */
static ap_camera *
source_cameras(PyArrayObject *cams, int n)
{
    ap_camera *src_cams = PyMem_Malloc((size_t)n * sizeof(ap_camera));
    if (src_cams == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (int v = 0; v < n; v++) {
        const double *p = (const double *)PyArray_DATA(cams) +
                          (size_t)v * AP_CAMERA_PARAMS;
        int rc = ap_camera_init(&src_cams[v], p);
        if (rc != AP_CAMERA_OK) {
            char what[32];
            snprintf(what, sizeof(what), "src_cams[%d]", v);
            ap_mvs_camera_error(p, rc, what);
            PyMem_Free(src_cams);
            return NULL;
        }
    }
    return src_cams;
}

int
ap_mvs_check_parity(int parity, int cost)
{
    if (parity != AP_PARITY_TEXTBOOK && parity != AP_PARITY_AQUAMVS) {
        PyErr_Format(PyExc_ValueError, "parity must be 0 (textbook) or 1 "
                     "(aquamvs), got %d", parity);
        return -1;
    }
    if (parity == AP_PARITY_AQUAMVS && cost == AP_COST_SAD) {
        PyErr_SetString(PyExc_ValueError, "AquaMVS parity has no SAD cost: "
                        "use ncc or ssim");
        return -1;
    }
    return 0;
}

/* Seconds between two looks at the program's signals during a sweep. */
#define SIGNAL_POLL_S 0.1

typedef struct {
    PyThreadState *state;   /* the caller's, while the GIL is let go */
    double next;            /* when to look again */
} signal_poll;

static double
monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The sweep's stop hook: every SIGNAL_POLL_S takes the GIL back to run
 * the program's signal handlers (Python runs them on the main thread
 * alone), so that Ctrl-C, or any handler that raises, ends a long sweep
 * within that and one plane of a band. Not more often: while another thread
 * holds the GIL, taking it back can wait for its switch interval. */
static int
signal_raised(void *ctx)
{
    signal_poll *poll = ctx;
    double now = monotonic_s();
    if (now < poll->next) {
        return 0;
    }
    poll->next = now + SIGNAL_POLL_S;
    PyEval_RestoreThread(poll->state);
    int raised = PyErr_CheckSignals() < 0;
    poll->state = PyEval_SaveThread();
    return raised;
}

/* Whether this is the main thread of the main interpreter, the one
 * where Python runs signal handlers: elsewhere, taking the GIL back to
 * look for them would wait for nothing. */
static int
on_main_thread(void)
{
    if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
        return 0;
    }
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading == NULL
                         ? NULL
                         : PyObject_CallMethod(threading, "main_thread", NULL);
    PyObject *ident = main == NULL ? NULL
                                   : PyObject_GetAttrString(main, "ident");
    int is_main = ident != NULL && PyLong_Check(ident) &&
                  PyLong_AsUnsignedLong(ident) == PyThread_get_thread_ident();
    Py_XDECREF(ident);
    Py_XDECREF(main);
    Py_XDECREF(threading);
    PyErr_Clear();      /* in doubt: no looking */
    return is_main;
}

/* Runs the sweep without the GIL. None, or NULL with MemoryError,
 * OSError, or what a signal handler raised (which goes first). */
static PyObject *
run_cost_volume(ap_sweep_args *a, float *out)
{
    int main = on_main_thread();
    signal_poll poll = {PyEval_SaveThread(), monotonic_s() + SIGNAL_POLL_S};
    a->stop = main ? signal_raised : NULL;
    a->stop_ctx = &poll;
    int rc = ap_cost_volume(a, out);
    PyEval_RestoreThread(poll.state);
    if (rc == AP_SWEEP_STOPPED || PyErr_Occurred()) {
        return NULL;
    }
    if (rc == -1) {
        return PyErr_NoMemory();
    }
    if (rc < 0) {
        PyErr_SetString(PyExc_OSError, "cannot start worker threads");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
cost_volume(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *ref_obj, *srcs_obj, *ref_params, *src_params, *depths_obj;
    PyArrayObject *out;
    int first, count, cost, window, threads, parity = AP_PARITY_TEXTBOOK;
    if (!PyArg_ParseTuple(args, "OOOOOiiiiiO!|i:cost_volume", &ref_obj,
                          &srcs_obj, &ref_params, &src_params, &depths_obj,
                          &first, &count, &cost, &window, &threads,
                          &PyArray_Type, &out, &parity)) {
        return NULL;
    }
    if (cost < AP_COST_NCC || cost > AP_COST_SAD || window < 3 ||
        window % 2 == 0 || window > AP_MAX_WINDOW || threads < 1) {
        PyErr_SetString(PyExc_ValueError, "bad cost, window or threads");
        return NULL;
    }
    if (ap_mvs_check_parity(parity, cost) < 0) {
        return NULL;
    }
    ap_camera ref_cam, *src_cams = NULL;
    PyArrayObject *ref = NULL, *srcs = NULL, *depths = NULL, *cams = NULL;
    PyObject *result = NULL;
    if (ap_mvs_camera(ref_params, &ref_cam, "ref_cam") < 0 ||
        !(ref = ap_mvs_images(ref_obj, 2, "ref")) ||
        !(srcs = ap_mvs_images(srcs_obj, 3, "srcs")) ||
        !(depths = checked_array(depths_obj, NPY_DOUBLE, 1, list_dims,
                                 "depths")) ||
        !(cams = ap_mvs_array(src_params, NPY_DOUBLE, 2, AP_CAMERA_PARAMS,
                          "src_cams"))) {
        goto done;
    }
    int h = (int)PyArray_DIM(ref, 0), w = (int)PyArray_DIM(ref, 1);
    int n = (int)PyArray_DIM(srcs, 0), d = (int)PyArray_DIM(depths, 0);
    if (PyArray_DIM(srcs, 1) != h || PyArray_DIM(srcs, 2) != w ||
        PyArray_DIM(cams, 0) != n || n < 1 || d < 1 || h < 2 || w < 2 ||
        first < 0 || count < 1 || count > d - first) {
        PyErr_SetString(PyExc_ValueError, "ref, srcs, src_cams, depths and "
                        "the planes asked for do not agree");
        goto done;
    }
    if (check_volume_out(out, h, w, d) < 0 ||
        !(src_cams = source_cameras(cams, n))) {
        goto done;
    }
    ap_sweep_args a = {PyArray_DATA(ref), PyArray_DATA(srcs), h, w, n,
                       &ref_cam, src_cams, PyArray_DATA(depths), d,
                       first, count, (ap_cost)cost, window, threads,
                       (ap_parity)parity, NULL, NULL};
    result = run_cost_volume(&a, PyArray_DATA(out));
done:
    PyMem_Free(src_cams);
    Py_XDECREF(ref);
    Py_XDECREF(srcs);
    Py_XDECREF(depths);
    Py_XDECREF(cams);
    return result;
}

static PyObject *
extract_depth(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *vol_obj, *depths_obj;
    if (!PyArg_ParseTuple(args, "OO:extract_depth", &vol_obj, &depths_obj)) {
        return NULL;
    }
    PyArrayObject *vol = checked_array(vol_obj, NPY_FLOAT, 3, volume_dims,
                                       "cost_volume");
    if (vol == NULL) {
        return NULL;
    }
    PyArrayObject *depths = checked_array(depths_obj, NPY_DOUBLE, 1,
                                          list_dims, "depths");
    if (depths == NULL) {
        Py_DECREF(vol);
        return NULL;
    }
    PyObject *depth = NULL, *conf = NULL;
    if (PyArray_DIM(depths, 0) != PyArray_DIM(vol, 2) ||
        PyArray_DIM(vol, 2) < 1) {
        PyErr_SetString(PyExc_ValueError, "depths must have one entry per "
                        "cost-volume plane");
        goto done;
    }
    depth = PyArray_SimpleNew(2, PyArray_DIMS(vol), NPY_FLOAT);
    conf = PyArray_SimpleNew(2, PyArray_DIMS(vol), NPY_FLOAT);
    if (depth && conf) {
        int h = (int)PyArray_DIM(vol, 0), w = (int)PyArray_DIM(vol, 1);
        int d = (int)PyArray_DIM(vol, 2);
        Py_BEGIN_ALLOW_THREADS
        ap_extract_depth(PyArray_DATA(vol), h, w, d, PyArray_DATA(depths),
                         PyArray_DATA((PyArrayObject *)depth),
                         PyArray_DATA((PyArrayObject *)conf));
        Py_END_ALLOW_THREADS
    }
done:
    Py_DECREF(vol);
    Py_DECREF(depths);
    if (!depth || !conf) {
        Py_XDECREF(depth);
        Py_XDECREF(conf);
        return NULL;
    }
    return Py_BuildValue("(NN)", depth, conf);
}

/* 0 when a is a C-contiguous, aligned array of `type` and shape dims
 * (ndim of them), writeable where `writes`; -1 with ValueError naming
 * what otherwise. */
static int
check_exact(PyArrayObject *a, int type, int ndim, const npy_intp *dims,
            int writes, const char *what)
{
    int ok = PyArray_TYPE(a) == type && PyArray_NDIM(a) == ndim &&
             PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) &&
             (!writes || PyArray_ISWRITEABLE(a));
    for (int k = 0; ok && k < ndim; k++) {
        ok = PyArray_DIM(a, k) == dims[k];
    }
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s must be a%s C-contiguous %s "
                     "array of %d dimensions, its shape the chunk's",
                     what, writes ? " writeable," : "",
                     type == NPY_FLOAT ? "float32" : "float64", ndim);
        return -1;
    }
    return 0;
}

/* Planes [lead, lead + count) of a chunk, [first, first + count) of the
 * depths, folded into each pixel's state (gpu_depth.h), the CPU's twin
 * of the GPU's ap_depth_fold_kernel: the last chunk writes depth and
 * confidence. */
static PyObject *
depth_fold(PyObject *module, PyObject *args)
{
    (void)module;
    PyArrayObject *chunk, *state, *depth, *conf;
    PyObject *depths_obj;
    Py_ssize_t lead, count, first;
    if (!PyArg_ParseTuple(args, "O!nnnOO!O!O!:depth_fold", &PyArray_Type,
                          &chunk, &lead, &count, &first, &depths_obj,
                          &PyArray_Type, &state, &PyArray_Type, &depth,
                          &PyArray_Type, &conf)) {
        return NULL;
    }
    if (PyArray_NDIM(chunk) != 3) {
        PyErr_SetString(PyExc_ValueError, "chunk must be a float32 "
                        "(H, W, K) array");
        return NULL;
    }
    const npy_intp *dims = PyArray_DIMS(chunk);
    const npy_intp state_dims[] = {dims[0], dims[1], AP_DEPTH_STATE_DOUBLES};
    if (volume_dims(dims, 3, "chunk") < 0 ||
        check_exact(chunk, NPY_FLOAT, 3, dims, 0, "chunk") < 0 ||
        check_exact(state, NPY_DOUBLE, 3, state_dims, 1, "state") < 0 ||
        check_exact(depth, NPY_FLOAT, 2, dims, 1, "depth") < 0 ||
        check_exact(conf, NPY_FLOAT, 2, dims, 1, "confidence") < 0) {
        return NULL;
    }
    PyArrayObject *depths = checked_array(depths_obj, NPY_DOUBLE, 1,
                                          list_dims, "depths");
    if (depths == NULL) {
        return NULL;
    }
    Py_ssize_t d = PyArray_DIM(depths, 0), k = dims[2];
    if (lead < 0 || count < 1 || count > k - lead || first < 0 ||
        count > d - first) {
        PyErr_Format(PyExc_ValueError, "planes %zd to %zd of a chunk of "
                     "%zd are not planes %zd to %zd of the %zd depths",
                     lead, lead + count - 1, k, first, first + count - 1,
                     d);
        Py_DECREF(depths);
        return NULL;
    }
    size_t n = (size_t)dims[0] * (size_t)dims[1];
    const float *c = (const float *)PyArray_DATA(chunk) + lead;
    const double *at = PyArray_DATA(depths);
    ap_depth_state *s = PyArray_DATA(state);
    float *out = PyArray_DATA(depth), *confidence = PyArray_DATA(conf);
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        ap_depth_fold_pixel(c, i, (int)k, (int)count, (int)first, (int)d,
                            at, s, out, confidence);
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(depths);
    Py_RETURN_NONE;
}

/* Which guess of the interface point a sweep would use for a refractive
 * source camera over a box of points: for tests and for users who want
 * to know. */
static PyObject *
snell_guess(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *params;
    double d2_max, z_min, z_max;
    ap_camera cam;
    if (!PyArg_ParseTuple(args, "Oddd:snell_guess", &params, &d2_max,
                          &z_min, &z_max) ||
        ap_mvs_camera(params, &cam, NULL) < 0) {
        return NULL;
    }
    if (!cam.refractive) {
        PyErr_SetString(PyExc_ValueError, "camera must be refractive");
        return NULL;
    }
    ap_projector p;
    ap_projector_init(&p, &cam);
    if (ap_projector_tabulate(&p, d2_max, z_min, z_max) < 0) {
        ap_projector_free(&p);
        return PyErr_NoMemory();
    }
    PyObject *result = Py_BuildValue(
        "(sii)", p.terms        ? "polynomial"
                 : p.per_sample ? "per sample"
                                : "table",
        p.terms ? p.terms - 1 : p.per_sample ? 0 : p.tn, p.steps);
    ap_projector_free(&p);
    return result;
}

static PyMethodDef mvs_methods[] = {
    {"check_camera", check_camera, METH_O,
     "Raises ValueError unless the packed parameters make a camera."},
    {"cast_rays", cast_rays, METH_VARARGS,
     "cast_rays(params, pixels (N, 2)) -> origins, directions, valid"},
    {"project", project, METH_VARARGS,
     "project(params, points (N, 3)) -> pixels (N, 2), valid"},
    {"warp", warp, METH_VARARGS,
     "warp(src, ref_params, src_params, depth) -> float32 (H, W)"},
    {"cost_volume", cost_volume, METH_VARARGS,
     "cost_volume(ref, srcs, ref_params, src_params, depths, first, count, "
     "cost, window, threads, out, parity=0): planes [first, first + "
     "count) of the float32 (H, W, D) volume into out; parity 1: "
     "AquaMVS's costs (ncc or ssim)"},
    {"extract_depth", extract_depth, METH_VARARGS,
     "extract_depth(volume, depths) -> depth, confidence"},
    {"depth_fold", depth_fold, METH_VARARGS,
     "depth_fold(chunk, lead, count, first, depths, state, depth, "
     "confidence): planes [lead, lead + count) of chunk's float32 (H, W, "
     "K) costs, [first, first + count) of depths, folded into state "
     "(float64 (H, W, 4)); the last chunk writes depth and confidence "
     "(float32 (H, W))"},
    {"snell_guess", snell_guess, METH_VARARGS,
     "snell_guess(params, dist2_max, depth_min, depth_max) -> (kind, "
     "the polynomial's degree or the table's points a side, Newton "
     "steps): the guess a sweep takes for a refractive camera's points in "
     "that box"},
    AP_GPU_METHODS
    {NULL, NULL, 0, NULL},
};

static int
mvs_exec(PyObject *module)
{
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "CAMERA_PARAMS",
                                AP_CAMERA_PARAMS) < 0 ||
        PyModule_AddIntConstant(module, "NEWTON_COLD", AP_NEWTON_COLD) < 0 ||
        PyModule_AddIntConstant(module, "NEWTON_WARM", AP_NEWTON_WARM) < 0 ||
        PyModule_AddIntConstant(module, "MAX_WINDOW", AP_MAX_WINDOW) < 0 ||
        PyModule_AddIntConstant(module, "GPU_VIEWS", AP_GPU_VIEWS) < 0 ||
        PyModule_AddIntConstant(module, "DEPTH_STATE_DOUBLES",
                                AP_DEPTH_STATE_DOUBLES) < 0 ||
        PyModule_AddIntConstant(module, "CAST_AQUAMVS", AP_CAST_AQUAMVS) <
            0 ||
        PyModule_AddIntConstant(module, "VECTOR_CLONES", AP_CLONES) < 0 ||
        PyModule_AddIntConstant(module, "WIDE_LANES", ap_wide_lanes()) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot mvs_slots[] = {
    {Py_mod_exec, mvs_exec},
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static PyModuleDef mvs_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aquaprof._mvs",
    .m_doc = "Plane-sweep stereo kernels (CPU, and CUDA where built).",
    .m_size = 0,
    .m_methods = mvs_methods,
    .m_slots = mvs_slots,
};

PyMODINIT_FUNC
PyInit__mvs(void)
{
    return PyModuleDef_Init(&mvs_def);
}
