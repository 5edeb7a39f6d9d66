/* A stand-in for libcuda.so.1 in tests: a driver that starts (or fails as
 * FAKE_CUDA_INIT_ERROR says) and sees FAKE_CUDA_DEVICES devices (1 by
 * default). Counts cuCtxSynchronize calls for cuda_sync tests. */
#include <stdlib.h>
#include <string.h>

static int syncs;

int cuInit(unsigned flags)
{
    (void)flags;
    const char *e = getenv("FAKE_CUDA_INIT_ERROR");
    return e ? atoi(e) : 0;
}

int cuDriverGetVersion(int *v) { *v = 13000; return 0; }

int cuDeviceGetCount(int *n)
{
    const char *e = getenv("FAKE_CUDA_DEVICES");
    *n = e ? atoi(e) : 1;
    return 0;
}

int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }

int cuDeviceGetName(char *name, int len, int d)
{
    (void)d;
    strncpy(name, "Fake GPU", (size_t)len);
    return 0;
}

int cuDeviceGetAttribute(int *v, int attribute, int d)
{
    (void)d;
    switch (attribute) {
    case 16: *v = 132; break;          /* SMs */
    case 39: *v = 2048; break;         /* threads per SM */
    case 81: *v = 233472; break;       /* shared memory per SM */
    case 82: *v = 65536; break;        /* registers per SM */
    case 106: *v = 32; break;          /* blocks per SM */
    case 10: *v = 32; break;           /* warp */
    default: return 1;
    }
    return 0;
}

int cuCtxSynchronize(void) { syncs++; return 0; }

int cuGetErrorName(int error, const char **name)
{
    *name = error == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

int fake_cuda_syncs(void) { return syncs; }
