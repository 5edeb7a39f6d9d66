#include "clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ap_clock_tsc;
double ap_clock_ns_per_tick = 1.0;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

/* The TSC is usable as a clock when it ticks at a constant rate through
 * power states and the kernel itself trusts it across CPUs. */
static int
tsc_invariant(void)
{
#if defined(__x86_64__)
    const char *forced = getenv("AQUAPROF_CLOCK");
    if (forced && strcmp(forced, "tsc") != 0) {
        return 0;
    }
    char line[8192];
    int constant = 0, nonstop = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "flags", 5)) {
            constant = strstr(line, " constant_tsc") != NULL;
            nonstop = strstr(line, " nonstop_tsc") != NULL;
            break;
        }
    }
    fclose(f);
    f = fopen("/sys/devices/system/clocksource/clocksource0/"
              "current_clocksource", "r");
    if (f) {
        int kernel_uses_tsc = fgets(line, sizeof(line), f) &&
                              !strncmp(line, "tsc", 3);
        fclose(f);
        if (!kernel_uses_tsc) {
            return 0;
        }
    }
    return constant && nonstop;
#else
    return 0;
#endif
}

static ap_clock_anchor
anchor(int64_t (*ticks)(void))
{
    /* the tightest of a few brackets: ns before, ticks, ns after */
    ap_clock_anchor best = {0, 0};
    int64_t best_gap = INT64_MAX;
    for (int i = 0; i < 7; i++) {
        int64_t a = ap_now_ns();
        int64_t t = ticks();
        int64_t b = ap_now_ns();
        if (b - a < best_gap) {
            best_gap = b - a;
            best = (ap_clock_anchor){t, a + (b - a) / 2};
        }
    }
    return best;
}

#if defined(__x86_64__)
static int64_t
read_tsc(void)
{
    return (int64_t)__rdtsc();
}
#endif

static void
calibrate(void)
{
#if defined(__x86_64__)
    if (!tsc_invariant()) {
        return;
    }
    ap_clock_anchor a = anchor(read_tsc);
    while (ap_now_ns() - a.ns < 5000000) {
        /* spin: a sleeping thread could wake late on another CPU */
    }
    ap_clock_anchor b = anchor(read_tsc);
    double ns_per_tick = (double)(b.ns - a.ns) / (double)(b.ticks - a.ticks);
    /* a TSC between 100 MHz and 20 GHz, or it is not one to trust */
    if (b.ticks > a.ticks && ns_per_tick > 0.05 && ns_per_tick < 10.0) {
        ap_clock_ns_per_tick = ns_per_tick;
        ap_clock_tsc = 1;
    }
#endif
}

void
ap_clock_init(void)
{
    pthread_once(&clock_once, calibrate);
}

const char *
ap_clock_name(void)
{
    return ap_clock_tsc ? "tsc" : "monotonic";
}

ap_clock_anchor
ap_clock_anchor_now(void)
{
    return anchor(ap_ticks);
}
