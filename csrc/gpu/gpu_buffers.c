#include "gpu_buffers.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t **out;        /* buffers CUPTI holds now, unordered */
static size_t nout, cap;

uint8_t *
ap_gpu_buffer_new(void)
{
    uint8_t *buffer = aligned_alloc(8, AP_GPU_BUFFER_SIZE);
    if (!buffer) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    if (nout == cap) {
        size_t fresh_cap = cap ? cap * 2 : 16;
        uint8_t **fresh = realloc(out, fresh_cap * sizeof(*out));
        if (!fresh) {
            pthread_mutex_unlock(&lock);
            free(buffer);
            return NULL;
        }
        out = fresh;
        cap = fresh_cap;
    }
    out[nout++] = buffer;
    pthread_mutex_unlock(&lock);
    return buffer;
}

int
ap_gpu_buffer_release(uint8_t *buffer)
{
    int ours = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = nout; i-- > 0;) {
        if (out[i] == buffer) {
            out[i] = out[--nout];
            ours = 1;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (ours) {
        free(buffer);
    }
    return ours;
}

size_t
ap_gpu_buffers_out(void)
{
    pthread_mutex_lock(&lock);
    size_t n = nout;
    pthread_mutex_unlock(&lock);
    return n;
}
