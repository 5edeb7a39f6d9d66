/* A stand-in for libcuda.so.1 in tests: a driver that starts (or fails as
 * FAKE_CUDA_INIT_ERROR says, and then answers cuDeviceGetCount with
 * that error, as the real one does) and sees FAKE_CUDA_DEVICES devices (1 by
 * default). As the real driver, it answers CUDA_ERROR_NOT_INITIALIZED
 * before cuInit; the program under test is taken to have initialized it
 * already unless FAKE_CUDA_UNINITIALIZED=1. cuCtxSynchronize fails with
 * FAKE_CUDA_SYNC_ERROR where set, and takes FAKE_CUDA_SYNC_MS to return.
 * Counts what aquaprof asks of it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NOT_INITIALIZED = 3, INVALID_CONTEXT = 201, INVALID_DEVICE = 101 };

static int initialized = -1;       /* -1: not decided yet */
static int init_failed;            /* the error a failed cuInit gave */
static int inits, syncs, current = -1;
static int device_syncs[16];

static int
ready(void)
{
    if (initialized < 0) {
        initialized = getenv("FAKE_CUDA_UNINITIALIZED") == NULL;
    }
    return initialized;
}

static int
devices(void)
{
    const char *e = getenv("FAKE_CUDA_DEVICES");
    int n = e ? atoi(e) : 1;
    return n < 16 ? n : 16;
}

int cuInit(unsigned flags)
{
    (void)flags;
    inits++;
    const char *e = getenv("FAKE_CUDA_INIT_ERROR");
    if (e) {
        init_failed = atoi(e);
        return init_failed;
    }
    ready();
    initialized = 1;
    return 0;
}

int cuDriverGetVersion(int *v) { *v = 13000; return 0; }

int cuDeviceGetCount(int *n)
{
    if (init_failed) {
        return init_failed;    /* as the driver does once cuInit failed */
    }
    if (!ready()) {
        return NOT_INITIALIZED;
    }
    *n = devices();
    return 0;
}

int cuDeviceGet(int *d, int ordinal)
{
    if (!ready()) {
        return NOT_INITIALIZED;
    }
    if (ordinal < 0 || ordinal >= devices()) {
        return INVALID_DEVICE;
    }
    *d = ordinal;
    return 0;
}

int cuDeviceGetName(char *name, int len, int d)
{
    (void)d;
    strncpy(name, "Fake GPU", (size_t)len);
    return ready() ? 0 : NOT_INITIALIZED;
}

int cuDeviceGetAttribute(int *v, int attribute, int d)
{
    (void)d;
    if (!ready()) {
        return NOT_INITIALIZED;
    }
    switch (attribute) {
    case 16: *v = 132; break;          /* SMs */
    case 39: *v = 2048; break;         /* threads per SM */
    case 81: *v = 233472; break;       /* shared memory per SM */
    case 97:                           /* shared memory a block, opt-in */
        *v = getenv("FAKE_CUDA_SHARED_OPTIN")
            ? atoi(getenv("FAKE_CUDA_SHARED_OPTIN")) : 232448;
        break;
    case 82: *v = 65536; break;        /* registers per SM */
    case 106: *v = 32; break;          /* blocks per SM */
    case 10: *v = 32; break;           /* warp */
    default: return 1;
    }
    return 0;
}

/* Every device's primary context is active once the program initialized
 * the driver: as after torch's first CUDA call on each. */
int cuDevicePrimaryCtxGetState(int d, unsigned *flags, int *active)
{
    if (!ready()) {
        return NOT_INITIALIZED;
    }
    *flags = 0;
    *active = d >= 0 && d < devices();
    return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int d)
{
    if (!ready()) {
        return NOT_INITIALIZED;
    }
    *ctx = (void *)(intptr_t)(d + 1);
    return 0;
}

int cuDevicePrimaryCtxRelease_v2(int d)
{
    (void)d;
    return ready() ? 0 : NOT_INITIALIZED;
}

int cuCtxPushCurrent_v2(void *ctx)
{
    current = (int)(intptr_t)ctx - 1;
    return 0;
}

int cuCtxPopCurrent_v2(void **ctx)
{
    if (ctx) {
        *ctx = (void *)(intptr_t)(current + 1);
    }
    current = -1;
    return 0;
}

int cuCtxSynchronize(void)
{
    syncs++;
    const char *ms = getenv("FAKE_CUDA_SYNC_MS");
    if (ms) {
        long n = atol(ms);
        struct timespec wait = {n / 1000, n % 1000 * 1000000};
        nanosleep(&wait, NULL);
    }
    if (current >= 0 && current < 16) {
        device_syncs[current]++;
    }
    const char *e = getenv("FAKE_CUDA_SYNC_ERROR");
    if (e) {
        return atoi(e);
    }
    return current < 0 ? INVALID_CONTEXT : 0;
}

int cuGetErrorName(int error, const char **name)
{
    switch (error) {
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case 201: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case 700: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    default: *name = "CUDA_ERROR_UNKNOWN";
    }
    return 0;
}

int fake_cuda_syncs(void) { return syncs; }

/* cuCtxSynchronize calls made with device d's context current. */
int fake_cuda_device_syncs(int d)
{
    return d >= 0 && d < 16 ? device_syncs[d] : -1;
}

int fake_cuda_inits(void) { return inits; }

/* The program under test initializes CUDA (its first CUDA call). */
int fake_cuda_program_starts(void) { return cuInit(0); }
