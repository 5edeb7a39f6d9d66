#include "quiet_thread.h"

#include <signal.h>

int
ap_quiet_thread(pthread_t *id, void *(*main_fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    /* the new thread inherits the mask; the caller gets its own back */
    int masked = pthread_sigmask(SIG_BLOCK, &all, &old) == 0;
    int status = pthread_create(id, NULL, main_fn, arg);
    if (masked) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return status;
}
