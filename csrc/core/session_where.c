/* Where a thread is now, for a call-stack sampler running on another
 * thread: the innermost stage open in the execution context it runs. */
#include "session_internal.h"
#include "where.h"

/* The path of the innermost stage open on stack k, NO_PATH for none;
 * *top: its call, NULL where k's own stages hold none. */
static uint32_t
stack_path(const ap_stack *k, const ap_frame **top)
{
    const ap_thread *t = k->thread;
    uint32_t node = k->depth ? k->frames[k->depth - 1].node : k->base_node;
    *top = k->depth ? &k->frames[k->depth - 1] : NULL;
    if (node == ROOT_NODE || !t->paths || node >= t->nnodes) {
        return NO_PATH;
    }
    return t->paths[node];
}

int64_t
ap_stage_now(uint64_t pthread, uint64_t key, const ap_stack *context_stack,
             int64_t *native_id, ap_open_call *call)
{
    if (call) {
        *call = (ap_open_call){-1, 0, 0, 0, 0};
    }
    ap_session *s = atomic_load(&ap_current_session);
    if (!s) {
        return -1;
    }
    uint32_t path = NO_PATH;
    const ap_frame *top = NULL;
    const ap_thread *owner = NULL;
    pthread_mutex_lock(&s->lock);   /* exiting threads leave s->threads */
    for (ap_thread *t = s->threads; t; t = t->next) {
        if (t->pthread != pthread || t->retired) {
            continue;
        }
        *native_id = t->native_id;
        if (key == t->cur_key && t->cur) {
            path = stack_path(t->cur, &top);
            owner = t;
            context_stack = NULL;
        }
        break;
    }
    if (context_stack && context_stack->thread && !context_stack->released) {
        path = stack_path(context_stack, &top);
        owner = context_stack->thread;
        if (owner->pthread != pthread) {
            /* a context run on another thread than the one it recorded
             * on (asyncio.to_thread copies it): its call's CPU clock is
             * that thread's, and what this one did since is unknown */
            top = NULL;
        }
    }
    if (call && top && path != NO_PATH) {
        int64_t open = ap_ticks_to_ns(ap_ticks() - top->t0);
        open = open < 0 ? 0 : open;
        const ap_stats *st = &owner->nodes[top->node].stats;
        *call = (ap_open_call){open, top->cpu0,
                               (uint64_t)owner->index << 32 | top->node,
                               st->total_ns + open, st->cpu_ns};
    }
    pthread_mutex_unlock(&s->lock);
    return path == NO_PATH ? -1 : (int64_t)path;
}
