/* For a call-stack sampler: where another thread is in its stages. */
#ifndef AP_WHERE_H
#define AP_WHERE_H

#include <stdint.h>

#include "session.h"

/* The report stage (path index) of the innermost stage open now in the
 * execution context that the thread pthread runs, -1 for none:
 * its own stack when key is the context key of its last stage edge,
 * else context_stack (the stack its current context's variable names,
 * NULL for none), whose stages are then the open ones. Sets *native_id
 * when the thread has recorded in the active session, and *call (if not
 * NULL) to that stage's open call: how long it has been open (open_ns,
 * -1 where none is, the stack's stages nest under another's call, or
 * its thread is another), the thread's CPU clock as it entered (cpu0_ns),
 * and of its stage path on its thread (node, unique in the session) the
 * wall and CPU time of its calls closed so far, this one's wall so far
 * added to the wall (path_ns, path_cpu_ns): from two looks at one path,
 * the time the thread spent in it between them. The caller keeps
 * ap_enter/ap_exit from running meanwhile (the binding holds the GIL). */
typedef struct {
    int64_t open_ns, cpu0_ns;
    uint64_t node;
    int64_t path_ns, path_cpu_ns;
} ap_open_call;

int64_t ap_stage_now(uint64_t pthread, uint64_t key,
                     const ap_stack *context_stack, int64_t *native_id,
                     ap_open_call *call);

#endif
