#include "workers.h"

#include <assert.h>
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

typedef struct {
    int (*fn)(void *, int, int);
    void *ctx;
    int count, step;
    atomic_int next, failed;
} range_job;

static void *
range_worker(void *arg)
{
    range_job *job = arg;
    long long begin;   /* a range's index times step may pass INT_MAX */
    while (!atomic_load(&job->failed) &&
           (begin = (long long)atomic_fetch_add(&job->next, 1) * job->step) <
               job->count) {
        int end = job->count - begin < job->step ? job->count
                                                 : (int)begin + job->step;
        if (job->fn(job->ctx, (int)begin, end) != 0) {
            atomic_store(&job->failed, 1);
        }
    }
    return NULL;
}

int
ap_run_ranges(int (*fn)(void *ctx, int begin, int end), void *ctx,
              int count, int step, int threads)
{
    assert(step > 0);
    range_job job = {fn, ctx, count, step, 0, 0};
    long long ranges = ((long long)count + step - 1) / step;
    threads = threads < ranges ? threads : (int)ranges;
    int status = ap_run_workers(range_worker, &job, threads < 1 ? 1 : threads,
                                &job.failed);
    return status == 0 && atomic_load(&job.failed) ? -1 : status;
}
