#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Set on the thread running ap_run_workers while it works too: the one
 * whose context (the caller's GIL, say) the stop hook may use. */
static _Thread_local int on_caller;

int
ap_worker_stopped(int (*hook)(void *), void *ctx, _Atomic int *stopped)
{
    if (on_caller && hook != NULL && hook(ctx)) {
        atomic_store(stopped, 1);
    }
    return atomic_load(stopped);
}

int
ap_run_workers(void *(*work)(void *), void *job, int threads,
               _Atomic int *stop)
{
    pthread_t *ids = malloc((size_t)threads * sizeof(*ids));
    int started = 0, status = 0;
    for (; ids && started < threads - 1; started++) {
        if (pthread_create(&ids[started], NULL, work, job) != 0) {
            status = -2;
            atomic_store(stop, 1);
            break;
        }
    }
    int was_caller = on_caller;   /* a sweep run by a stop hook's handler */
    on_caller = 1;
    work(job);   /* without ids, the caller alone */
    on_caller = was_caller;
    for (int i = 0; i < started; i++) {
        pthread_join(ids[i], NULL);
    }
    free(ids);
    return status;
}
