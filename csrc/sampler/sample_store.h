/* What a call-stack sampler keeps: frames (what a code object was:
 * the caller's entry) found by the code's address, call stacks as a tree
 * of (caller node, frame) nodes, one aggregate per (thread, stage,
 * stack), and the samples in time order up to a bound. Plain C: the
 * Sampler object (csrc/module/sampler_type.c) owns the entries. */
#ifndef AP_SAMPLE_STORE_H
#define AP_SAMPLE_STORE_H

#include <stdint.h>

#include "../core/path_map.h"
#include "../core/status.h"

/* Bounds on what distinct stacks can cost; samples past them are lost
 * (counted), never a reason to grow without end. */
#define AP_SAMPLE_MAX_FRAMES (1u << 20)
#define AP_SAMPLE_MAX_NODES (1u << 20)
#define AP_SAMPLE_MAX_STACKS (1u << 20)

typedef struct {
    uint32_t caller;   /* node + 1, 0 for an outermost frame */
    uint32_t frame;
} ap_sample_node;

typedef struct {
    int64_t tid;
    int64_t stage;     /* report stage, -1 for none */
    uint32_t leaf;     /* innermost frame's node */
    int64_t count, wall_ns, cpu_ns;
    int64_t delay_ns;  /* runnable, not running: the CPU went to others */
    int64_t gil_ns;    /* asleep on the GIL */
    int64_t lock_ns;   /* asleep on a lock or another thread (a futex) */
} ap_sample_stack;

typedef struct {
    const void **entries;       /* frame id -> the caller's entry */
    uint32_t nentries, entries_cap;
    ap_path_map code_ids;       /* address (high, low) -> latest frame id */
    ap_sample_node *nodes;
    uint32_t nnodes, nodes_cap;
    ap_path_map node_ids;       /* (caller + 1, frame) -> node */
    ap_path_map tid_slots;      /* native id (high, low) -> thread slot */
    uint32_t ntids;
    ap_path_map where_ids;      /* (thread slot, stage + 1) -> where id */
    uint32_t nwhere;
    ap_sample_stack *stacks;
    uint32_t nstacks, stacks_cap;
    ap_path_map stack_ids;      /* (where id, leaf) -> stack */
    int64_t *tick_t;            /* the timeline: time, stack index, and
                                 * the CPU time the sample stands for, us
                                 * (what each stack sums, a sample at a
                                 * time: the other threads' work while a
                                 * stage was open) */
    uint32_t *tick_stack;
    uint32_t *tick_cpu;
    int64_t nticks, ticks_cap, max_ticks;
    int64_t timeline_dropped;
    int64_t lost;
} ap_sample_store;

/* An empty store keeping at most max_ticks samples in its timeline.
 * AP_ERR_NOMEM leaves nothing to free. */
ap_status ap_sample_store_init(ap_sample_store *s, int64_t max_ticks);

/* The frame id the code object at this address was last given: 1 and
 * *id, or 0. The caller checks that its entry still describes the code
 * there (the address of a freed one is reused). */
int ap_sample_frame_find(const ap_sample_store *s, const void *code,
                         uint32_t *id);

/* A new frame id for the code object at this address, described by entry
 * (held by the store from then on, freed by its owner); the address maps
 * to it from now. AP_ERR_NOMEM when it could not be added. */
ap_status ap_sample_frame_add(ap_sample_store *s, const void *code,
                              const void *entry, uint32_t *id);

/* What one sample stands for: wall, CPU time, run delay and GIL wait;
 * and the CPU time its thread used since its previous sample, wherever
 * filed, which its timeline entry carries (a sample whose earlier part
 * went to the stack before, ap_sample_fold, still says all of it). */
typedef struct {
    int64_t wall_ns, cpu_ns, delay_ns, gil_ns;
    int64_t lock_ns;   /* asleep in another futex: a lock, another thread */
    int64_t tick_cpu_ns;
} ap_sample_time;

/* Records one sample: thread tid in stage, its frame ids outermost
 * first (n > 0), standing for the times in *time;
 * *stack is its aggregate, for ap_sample_again. AP_ERR_NOMEM (or a bound
 * reached): counted in lost. */
ap_status ap_sample_add(ap_sample_store *s, int64_t t_ns, int64_t tid,
                        int64_t stage, const uint32_t *frames, uint32_t n,
                        const ap_sample_time *time, uint32_t *stack);

/* Records one more sample of an aggregate ap_sample_add gave. */
void ap_sample_again(ap_sample_store *s, int64_t t_ns, uint32_t stack,
                     const ap_sample_time *time);

/* Adds times to an aggregate ap_sample_add gave, as the earlier part of
 * a sample recorded under another: no sample counted, no timeline
 * entry. */
void ap_sample_fold(ap_sample_store *s, uint32_t stack,
                    const ap_sample_time *time);

/* The frame ids of stack k's frames, outermost first, into out (room for
 * depth): its depth. */
uint32_t ap_sample_frames_of(const ap_sample_store *s, uint32_t leaf,
                             uint32_t *out, uint32_t room);

void ap_sample_store_free(ap_sample_store *s);

#endif
