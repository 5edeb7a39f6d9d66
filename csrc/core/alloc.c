#include "alloc.h"

#include <pthread.h>

atomic_int ap_alloc_armed;

/* The schedule is rare test traffic: a lock keeps skip and count in step
 * however many threads allocate. */
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t fail_skip;       /* fail_lock */
static int64_t fail_count;      /* fail_lock; < 0: without end */
static _Atomic int64_t failed;

int
ap_alloc_take_failure(void)
{
    int fail = 0;
    pthread_mutex_lock(&fail_lock);
    if (fail_skip > 0) {
        fail_skip--;
    } else if (fail_count != 0) {
        fail = 1;
        if (fail_count > 0 && --fail_count == 0) {
            atomic_store(&ap_alloc_armed, 0);
        }
    }
    pthread_mutex_unlock(&fail_lock);
    if (fail) {
        atomic_fetch_add(&failed, 1);
    }
    return fail;
}

void
ap_alloc_fail(int64_t skip, int64_t count)
{
    pthread_mutex_lock(&fail_lock);
    fail_skip = skip > 0 ? skip : 0;
    fail_count = count;
    atomic_store(&ap_alloc_armed, count != 0);
    pthread_mutex_unlock(&fail_lock);
}

int64_t
ap_alloc_failed(void)
{
    return atomic_load(&failed);
}

void
ap_alloc_after_fork(void)
{
    pthread_mutex_init(&fail_lock, NULL);
}
