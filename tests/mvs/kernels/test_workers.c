/* ap_run_ranges, which shares a sweep's setup (rows of rays, reference
 * sums, projector boxes) among threads:
 * - every index of [0, count) is taken exactly once, for counts from 0
 *   to 70, steps 1 to 9 and 1 to 5 threads (more threads than ranges);
 * - a range whose call fails makes it return -1 and no range starts
 *   after that one has failed on a lone thread.
 * Exits 1 saying what failed. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../../../csrc/mvs/cpu/workers.h"

#define MAX_COUNT 70

typedef struct {
    atomic_int taken[MAX_COUNT];
    atomic_int calls;
    int fail_at;        /* the range that begins here fails; -1: none */
} marks;

static int
mark(void *arg, int begin, int end)
{
    marks *m = arg;
    atomic_fetch_add(&m->calls, 1);
    for (int i = begin; i < end; i++) {
        atomic_fetch_add(&m->taken[i], 1);
    }
    return begin == m->fail_at ? 1 : 0;
}

static int failures;

static void
check(int ok, const char *what, int count, int step, int threads)
{
    if (!ok) {
        failures++;
        fprintf(stderr, "%s: count %d, step %d, %d threads\n", what, count,
                step, threads);
    }
}

int
main(void)
{
    for (int count = 0; count <= MAX_COUNT; count++) {
        for (int step = 1; step <= 9; step++) {
            for (int threads = 1; threads <= 5; threads++) {
                static marks m;
                memset(&m, 0, sizeof(m));
                m.fail_at = -1;
                int status = ap_run_ranges(mark, &m, count, step, threads);
                check(status == 0, "status", count, step, threads);
                int once = 1;
                for (int i = 0; i < count; i++) {
                    once &= atomic_load(&m.taken[i]) == 1;
                }
                check(once, "each index once", count, step, threads);
                check(atomic_load(&m.calls) == (count + step - 1) / step,
                      "one call a range", count, step, threads);
            }
        }
    }
    for (int threads = 1; threads <= 3; threads++) {
        static marks m;
        memset(&m, 0, sizeof(m));
        m.fail_at = 20;
        int status = ap_run_ranges(mark, &m, MAX_COUNT, 4, threads);
        check(status == -1, "a failed range's status", MAX_COUNT, 4, threads);
        if (threads == 1) {     /* ranges run in order on one thread */
            check(atomic_load(&m.calls) == 6 &&
                      atomic_load(&m.taken[24]) == 0,
                  "no range after a failure", MAX_COUNT, 4, threads);
        }
    }
    if (failures) {
        fprintf(stderr, "test_workers: %d failures\n", failures);
        return 1;
    }
    printf("test_workers: ranges shared, each index once, failures "
           "stop\n");
    return 0;
}
