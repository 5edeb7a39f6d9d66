/* Status codes returned by every core function that can fail. */
#ifndef AP_STATUS_H
#define AP_STATUS_H

typedef enum {
    AP_OK = 0,
    AP_IGNORED = 1,           /* exit whose enter was never recorded */
    AP_MISNESTED = 2,         /* exit that closed stages left open above it */
    AP_NEED_STACK = 3,        /* the caller's context has no stack chosen:
                               * see ap_enter_in */
    AP_ERR_NOMEM = -1,
    AP_ERR_ACTIVE = -3,        /* a session is already active */
    AP_ERR_INVALID = -4,       /* bad argument */
    AP_ERR_SYSTEM = -5,        /* a libc/pthread call failed; errno kept */
    AP_ERR_FORKED = -6,        /* session belongs to the parent process */
    AP_ERR_RUNNING = -7        /* session not stopped yet */
} ap_status;

#endif
