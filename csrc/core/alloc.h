/* The core's allocator: libc's, with a switch that makes allocations fail
 * on purpose, so that tests can reach every out-of-memory path (the
 * recording's, the report's) on demand. */
#ifndef AP_ALLOC_H
#define AP_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Nonzero while ap_alloc_fail has failures pending. */
extern atomic_int ap_alloc_armed;

/* 1 when the allocation being made must fail (consumes one skip or one
 * failure of ap_alloc_fail's), else 0. */
int ap_alloc_take_failure(void);

/* Inline, so that the disarmed switch costs one load. */
static inline int
ap_alloc_should_fail(void)
{
    return atomic_load_explicit(&ap_alloc_armed, memory_order_relaxed) &&
           ap_alloc_take_failure();
}

static inline void *
ap_malloc(size_t size)
{
    return ap_alloc_should_fail() ? NULL : malloc(size);
}

static inline void *
ap_calloc(size_t n, size_t size)
{
    return ap_alloc_should_fail() ? NULL : calloc(n, size);
}

/* Like realloc: NULL leaves p as it was. */
static inline void *
ap_realloc(void *p, size_t size)
{
    return ap_alloc_should_fail() ? NULL : realloc(p, size);
}

/* For tests: after `skip` more allocations succeed, the next `count` fail
 * (count < 0: all of them, until the next call); ap_alloc_fail(0, 0)
 * turns failures off. Thread-safe; counts every thread's allocations. */
void ap_alloc_fail(int64_t skip, int64_t count);

/* Allocations made to fail since the process started. */
int64_t ap_alloc_failed(void);

/* For a forked child: the schedule's lock may have been held by a thread
 * that the child does not have. */
void ap_alloc_after_fork(void);

#endif
