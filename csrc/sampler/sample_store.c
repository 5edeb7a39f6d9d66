/* The sampler's tables: see sample_store.h. Every add reserves all it
 * needs before it changes anything, so a failure leaves the store as it
 * was. */
#include "sample_store.h"

#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"

/* Room for one more item in *items (cap items of size bytes), up to max. */
static ap_status
grow(void **items, uint32_t n, uint32_t *cap, size_t size, uint32_t max)
{
    if (n < *cap) {
        return AP_OK;
    }
    if (n >= max) {
        return AP_ERR_NOMEM;
    }
    uint32_t want = *cap ? *cap * 2 : 64;
    want = want > max ? max : want;
    void *p = ap_realloc(*items, (size_t)want * size);
    if (!p) {
        return AP_ERR_NOMEM;
    }
    *items = p;
    *cap = want;
    return AP_OK;
}

ap_status
ap_sample_store_init(ap_sample_store *s, int64_t max_ticks)
{
    memset(s, 0, sizeof(*s));
    s->max_ticks = max_ticks;
    if (ap_path_map_init(&s->code_ids, 0) != AP_OK ||
        ap_path_map_init(&s->tid_slots, 0) != AP_OK ||
        ap_path_map_init(&s->node_ids, 0) != AP_OK ||
        ap_path_map_init(&s->where_ids, 0) != AP_OK ||
        ap_path_map_init(&s->stack_ids, 0) != AP_OK) {
        ap_sample_store_free(s);
        return AP_ERR_NOMEM;
    }
    return AP_OK;
}

int
ap_sample_frame_find(const ap_sample_store *s, const void *code,
                     uint32_t *id)
{
    uint64_t a = (uint64_t)(uintptr_t)code;
    return ap_path_map_find(&s->code_ids, (uint32_t)(a >> 32), (uint32_t)a,
                            id);
}

ap_status
ap_sample_frame_add(ap_sample_store *s, const void *code, const void *entry,
                    uint32_t *id)
{
    uint64_t a = (uint64_t)(uintptr_t)code;
    uint32_t high = (uint32_t)(a >> 32), low = (uint32_t)a, old;
    if (grow((void **)&s->entries, s->nentries, &s->entries_cap,
             sizeof(*s->entries), AP_SAMPLE_MAX_FRAMES) != AP_OK ||
        ap_path_map_reserve(&s->code_ids) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    *id = s->nentries;
    s->entries[s->nentries++] = entry;
    if (ap_path_map_find(&s->code_ids, high, low, &old)) {
        ap_path_map_update(&s->code_ids, high, low, *id);
    } else {
        ap_path_map_put(&s->code_ids, high, low, *id);
    }
    return AP_OK;
}

/* The node of frame under caller (node + 1, 0 for none), added when new. */
static ap_status
node_of(ap_sample_store *s, uint32_t caller, uint32_t frame, uint32_t *node)
{
    if (ap_path_map_find(&s->node_ids, caller, frame, node)) {
        return AP_OK;
    }
    if (grow((void **)&s->nodes, s->nnodes, &s->nodes_cap,
             sizeof(*s->nodes), AP_SAMPLE_MAX_NODES) != AP_OK ||
        ap_path_map_reserve(&s->node_ids) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    *node = s->nnodes;
    s->nodes[s->nnodes++] = (ap_sample_node){caller, frame};
    ap_path_map_put(&s->node_ids, caller, frame, *node);
    return AP_OK;
}

/* The id of (thread, stage), added when new. */
static ap_status
where_of(ap_sample_store *s, int64_t tid, int64_t stage, uint32_t *where)
{
    /* a thread per request makes many: a lookup, not a scan */
    uint32_t high = (uint32_t)((uint64_t)tid >> 32), low = (uint32_t)tid;
    uint32_t slot;
    if (!ap_path_map_find(&s->tid_slots, high, low, &slot)) {
        if (s->ntids >= AP_SAMPLE_MAX_STACKS ||
            ap_path_map_reserve(&s->tid_slots) != AP_OK) {
            return AP_ERR_NOMEM;
        }
        slot = s->ntids++;
        ap_path_map_put(&s->tid_slots, high, low, slot);
    }
    uint32_t st = (uint32_t)(stage + 1);
    if (ap_path_map_find(&s->where_ids, slot, st, where)) {
        return AP_OK;
    }
    if (s->nwhere >= AP_SAMPLE_MAX_STACKS ||
        ap_path_map_reserve(&s->where_ids) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    *where = s->nwhere++;
    ap_path_map_put(&s->where_ids, slot, st, *where);
    return AP_OK;
}

static ap_status
stack_of(ap_sample_store *s, int64_t tid, int64_t stage, uint32_t leaf,
         uint32_t *stack)
{
    uint32_t where;
    if (where_of(s, tid, stage, &where) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    if (ap_path_map_find(&s->stack_ids, where, leaf, stack)) {
        return AP_OK;
    }
    if (grow((void **)&s->stacks, s->nstacks, &s->stacks_cap,
             sizeof(*s->stacks), AP_SAMPLE_MAX_STACKS) != AP_OK ||
        ap_path_map_reserve(&s->stack_ids) != AP_OK) {
        return AP_ERR_NOMEM;
    }
    *stack = s->nstacks;
    s->stacks[s->nstacks++] = (ap_sample_stack){
        .tid = tid, .stage = stage, .leaf = leaf};
    ap_path_map_put(&s->stack_ids, where, leaf, *stack);
    return AP_OK;
}

/* Room for one more sample in the timeline; 0 when it is full. */
static int
tick_room(ap_sample_store *s)
{
    if (s->nticks >= s->max_ticks) {
        return 0;
    }
    if (s->nticks < s->ticks_cap) {
        return 1;
    }
    int64_t want = s->ticks_cap ? s->ticks_cap * 2 : 1024;
    want = want > s->max_ticks ? s->max_ticks : want;
    int64_t *t = ap_realloc(s->tick_t, (size_t)want * sizeof(*t));
    if (!t) {
        return 0;
    }
    s->tick_t = t;
    uint32_t *k = ap_realloc(s->tick_stack, (size_t)want * sizeof(*k));
    if (!k) {
        return 0;   /* tick_t grown: harmless, the next try reuses it */
    }
    s->tick_stack = k;
    uint32_t *c = ap_realloc(s->tick_cpu, (size_t)want * sizeof(*c));
    if (!c) {
        return 0;   /* the same */
    }
    s->tick_cpu = c;
    s->ticks_cap = want;
    return 1;
}

void
ap_sample_again(ap_sample_store *s, int64_t t_ns, uint32_t stack,
                const ap_sample_time *time)
{
    s->stacks[stack].count++;
    ap_sample_fold(s, stack, time);
    if (tick_room(s)) {
        int64_t us = time->tick_cpu_ns / 1000;
        s->tick_t[s->nticks] = t_ns;
        s->tick_cpu[s->nticks] = us < 0 ? 0 : us >= UINT32_MAX
                                                 ? UINT32_MAX - 1
                                                 : (uint32_t)us;
        s->tick_stack[s->nticks++] = stack;
    } else {
        s->timeline_dropped++;
    }
}

void
ap_sample_fold(ap_sample_store *s, uint32_t stack, const ap_sample_time *time)
{
    ap_sample_stack *k = &s->stacks[stack];
    k->wall_ns += time->wall_ns;
    k->cpu_ns += time->cpu_ns;
    k->delay_ns += time->delay_ns;
    k->gil_ns += time->gil_ns;
    k->lock_ns += time->lock_ns;
}

ap_status
ap_sample_add(ap_sample_store *s, int64_t t_ns, int64_t tid, int64_t stage,
              const uint32_t *frames, uint32_t n, const ap_sample_time *time,
              uint32_t *stack)
{
    uint32_t node = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t caller = i ? node + 1 : 0;
        if (node_of(s, caller, frames[i], &node) != AP_OK) {
            s->lost++;
            return AP_ERR_NOMEM;
        }
    }
    if (n == 0 || stack_of(s, tid, stage, node, stack) != AP_OK) {
        s->lost++;
        return AP_ERR_NOMEM;
    }
    ap_sample_again(s, t_ns, *stack, time);
    return AP_OK;
}

uint32_t
ap_sample_frames_of(const ap_sample_store *s, uint32_t leaf, uint32_t *out,
                    uint32_t room)
{
    uint32_t depth = 0;
    for (uint32_t n = leaf + 1; n && depth < room; n = s->nodes[n - 1].caller) {
        out[depth++] = s->nodes[n - 1].frame;
    }
    for (uint32_t i = 0; i < depth / 2; i++) {
        uint32_t f = out[i];
        out[i] = out[depth - 1 - i];
        out[depth - 1 - i] = f;
    }
    return depth;
}

void
ap_sample_store_free(ap_sample_store *s)
{
    free(s->entries);
    free(s->nodes);
    free(s->stacks);
    free(s->tick_t);
    free(s->tick_stack);
    free(s->tick_cpu);
    ap_path_map_free(&s->code_ids);
    ap_path_map_free(&s->tid_slots);
    ap_path_map_free(&s->node_ids);
    ap_path_map_free(&s->where_ids);
    ap_path_map_free(&s->stack_ids);
    memset(s, 0, sizeof(*s));
}
