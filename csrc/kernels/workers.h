/* Threads that share one job: the caller works too. */
#ifndef AP_WORKERS_H
#define AP_WORKERS_H

/* Runs work(job) on `threads` threads, the calling one among them, and
 * joins them. Returns 0, or -2 when a thread cannot start: then *stop is
 * set (the job's workers must check it) and the started ones joined. */
int ap_run_workers(void *(*work)(void *), void *job, int threads,
                   _Atomic int *stop);

#endif
