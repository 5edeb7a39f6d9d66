#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

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
    work(job);   /* without ids, the caller alone */
    for (int i = 0; i < started; i++) {
        pthread_join(ids[i], NULL);
    }
    free(ids);
    return status;
}
