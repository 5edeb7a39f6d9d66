/* Threads that share one job: the caller works too. */
#ifndef AP_WORKERS_H
#define AP_WORKERS_H

/* Runs work(job) on `threads` threads, the calling one among them, and
 * joins them. Returns 0, or -2 when a thread cannot start: then *stop is
 * set (the job's workers must check it) and the started ones joined. */
int ap_run_workers(void *(*work)(void *), void *job, int threads,
                   _Atomic int *stop);

/* Whether the job should stop, asked by its workers before each plane of
 * a work item: on the thread that called ap_run_workers alone (the one whose
 * context the hook may need), the hook (NULL: none) is asked, and a
 * nonzero answer is kept in *stopped for every worker to see. */
int ap_worker_stopped(int (*hook)(void *), void *ctx, _Atomic int *stopped);

/* Runs fn(ctx, begin, end) over [0, count) in ranges of at most `step`
 * (> 0) on up to `threads` threads (the caller one of them): for a
 * sweep's setup, whose pieces (rows, views) are independent, so that the
 * result never depends on the threads. Returns 0, -1 where a call of fn
 * returned nonzero (no further ranges start then), or -2 when a thread
 * cannot start. */
int ap_run_ranges(int (*fn)(void *ctx, int begin, int end), void *ctx,
                  int count, int step, int threads);

#endif
