/* Helper threads that take no signal. */
#ifndef AP_QUIET_THREAD_H
#define AP_QUIET_THREAD_H

#include <pthread.h>

/* pthread_create, the thread started with every signal blocked: a signal
 * sent to the process then goes to one of the program's own threads. A
 * Python program handles it in its main thread, which, waiting on a lock
 * or a semaphore, wakes only for a signal delivered to itself: taken by
 * a helper thread, a SIGTERM or a Ctrl-C would leave it waiting. Returns
 * pthread_create's status. */
int ap_quiet_thread(pthread_t *id, void *(*main_fn)(void *), void *arg);

#endif
