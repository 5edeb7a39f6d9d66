/* Every CUPTI call the GPU trace makes, behind one table of functions:
 * the CUPTI backend (cupti_backend.c, the only file that sees cupti.h)
 * when aquaprof was built with CUPTI's headers, the null backend
 * (cupti_null.c) otherwise. gpu_trace.c holds the policy and calls only
 * through the table, so that it builds alike either way. Internal to
 * csrc/gpu. */
#ifndef AP_CUPTI_API_H
#define AP_CUPTI_API_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

typedef struct {
    /* NULL when this backend can trace; else why no trace is possible in
     * this build, said as the status line says it */
    const char *lacking;
    /* Opens CUPTI once per process (a copy already loaded first, else the
     * first of the n candidate paths of this build's major version):
     * AP_OK with `where` holding the path opened; AP_ERR_INVALID (another
     * major version) or AP_ERR_SYSTEM with why saying what was tried. */
    ap_status (*open)(const char *const *candidates, size_t n, char *where,
                      size_t where_size, char *why, size_t size);
    /* Takes CUPTI's timestamp and buffer callbacks: CUPTI keeps one pair
     * per process, and another client may have replaced ours since the
     * last start. AP_ERR_SYSTEM with why filled. */
    ap_status (*take_callbacks)(char *why, size_t size);
    /* Enables every activity kind the trace reads, or none: AP_ERR_SYSTEM
     * with why filled. */
    ap_status (*enable)(char *why, size_t size);
    /* Disables what enable enabled. */
    void (*disable)(void);
    /* Hands every filled activity buffer to the buffer callbacks now. */
    void (*flush)(void);
    /* Pushes a stage's tag as this thread's external correlation id (on
     * a stack of aquaprof's own): 1 when pushed, 0 when not. */
    int (*push_tag)(uint64_t tag);
    /* Pops the innermost tag this thread pushed. */
    void (*pop_tag)(void);
} ap_cupti_api;

/* Answers every call with what a build without CUPTI's headers lacks. */
extern const ap_cupti_api ap_cupti_null;

/* This build's backend: CUPTI's, or the null one. */
const ap_cupti_api *ap_cupti_default(void);

#endif
