/* A fake libnvidia-ml for the monitor's tests: devices and the memory in
 * use on each are set by the test through fake_nvml_set. Device i's UUID
 * is GPU-0000000i-fake-..., as NVML spells them. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned long long total, free, used;
} memory_info;

static unsigned devices;
static unsigned long long used[8];

void fake_nvml_set(unsigned count, unsigned device, unsigned long long bytes)
{
    devices = count;
    if (device < 8) {
        used[device] = bytes;
    }
}

int nvmlInit_v2(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned *count)
{
    *count = devices;
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **handle)
{
    if (index >= devices) {
        return 2;   /* NVML_ERROR_INVALID_ARGUMENT */
    }
    *handle = (void *)(uintptr_t)(index + 1);
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *handle, memory_info *info)
{
    unsigned index = (unsigned)(uintptr_t)handle - 1;
    info->total = 80ULL << 30;
    info->used = used[index];
    info->free = info->total - info->used;
    return 0;
}

int nvmlDeviceGetUUID(void *handle, char *uuid, unsigned length)
{
    unsigned index = (unsigned)(uintptr_t)handle - 1;
    int n = snprintf(uuid, length, "GPU-%08x-fake-4a1e-9c3b-%012x", index,
                     index);
    return n < 0 || (unsigned)n >= length ? 7 /* INSUFFICIENT_SIZE */ : 0;
}

/* MIG instances: "MIG-fake-<i>" opens device i, as if each GPU were one
 * instance of itself. */
int nvmlDeviceGetHandleByUUID(const char *uuid, void **handle)
{
    unsigned index;
    if (sscanf(uuid, "MIG-fake-%u", &index) != 1 || index >= devices) {
        return 6;   /* NVML_ERROR_NOT_FOUND */
    }
    *handle = (void *)(uintptr_t)(index + 1);
    return 0;
}
