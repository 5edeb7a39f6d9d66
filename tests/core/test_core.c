/* Unit tests of csrc/core without Python. Prints "N passed, N failed". */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../csrc/core/alloc.h"
#include "../../csrc/core/clock.h"
#include "../../csrc/core/intern.h"
#include "../../csrc/core/path_map.h"
#include "../../csrc/core/rss.h"
#include "../../csrc/core/session.h"
#include "../../csrc/core/where.h"
#include "../../csrc/core/session_since.h"

static int passed, failed;

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (cond) {                                                      \
            passed++;                                                    \
        } else {                                                         \
            failed++;                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__,       \
                    __LINE__, #cond);                                    \
        }                                                                \
    } while (0)

static const ap_config default_config = {.max_spans = 1000000};

/* ended threads kept whole (session_internal.h's AP_KEPT_THREADS) */
#define AP_KEPT_THREADS_FOR_TESTS (1 << AP_TAG_THREAD_BITS)

/* spans per buffer chunk, as the core grants them */
#define CHUNK_SPANS 4096

static uint32_t
name(const char *s)
{
    uint32_t id;
    if (ap_intern(s, strlen(s), &id) != AP_OK) {
        fprintf(stderr, "cannot intern %s\n", s);
        exit(2);
    }
    return id;
}

/* Session helpers: a failure to start or report ends the run, since the
 * checks after it would all read garbage. */
static ap_session *
start(const ap_config *c)
{
    ap_session *s = NULL;
    if (ap_session_start(c, &s) != AP_OK) {
        fprintf(stderr, "cannot start a session\n");
        exit(2);
    }
    return s;
}

static ap_report *
stop_and_report(ap_session *s)
{
    ap_report *r = NULL;
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
    if (ap_session_report(s, &r) != AP_OK) {
        fprintf(stderr, "cannot build the report\n");
        exit(2);
    }
    return r;
}

static void
finish(ap_session *s, ap_report *r)
{
    ap_report_free(r);
    ap_session_free(s);
}

static const ap_report_stage *
find_stage(const ap_report *r, const char *path)
{
    /* path "a/b": walk names from the top */
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    int32_t parent = -1;
    const ap_report_stage *found = NULL;
    for (char *part = strtok(buf, "/"); part; part = strtok(NULL, "/")) {
        found = NULL;
        for (uint32_t i = 0; i < r->nstages; i++) {
            const char *n = ap_intern_name(r->stages[i].name, NULL);
            if (r->stages[i].parent == parent && !strcmp(n, part)) {
                found = &r->stages[i];
                parent = (int32_t)i;
                break;
            }
        }
        if (!found) {
            return NULL;
        }
    }
    return found;
}

static void
test_intern(void)
{
    uint32_t a = name("alpha"), b = name("beta"), a2 = name("alpha");
    CHECK(a == a2);
    CHECK(a != b);
    uint32_t id;
    CHECK(ap_intern("", 0, &id) == AP_ERR_INVALID);
    size_t len = 0;
    CHECK(!strcmp(ap_intern_name(b, &len), "beta") && len == 4);
    CHECK(ap_intern_name(1u << 30, NULL) == NULL);
    /* many names force the table to grow; ids stay stable */
    char buf[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(buf, sizeof(buf), "name-%d", i);
        name(buf);
    }
    CHECK(name("alpha") == a);
    CHECK(name("name-4321") == name("name-4321"));
}

/* A table of its own, as the GPU layer keeps kernel names: empty text
 * allowed, ids dense in order of first sight, everything freed. */
static void
test_intern_table(void)
{
    ap_intern_table t = AP_INTERN_TABLE_INIT;
    uint32_t empty, k, again;
    CHECK(ap_intern_table_add(&t, "", 0, &empty) == AP_OK && empty == 0);
    CHECK(ap_intern_table_add(&t, "kernel", 6, &k) == AP_OK && k == 1);
    char buf[32];
    int dense = 1;
    for (uint32_t i = 0; i < 3000; i++) {
        uint32_t id;
        int n = snprintf(buf, sizeof(buf), "k%u", i);
        dense &= ap_intern_table_add(&t, buf, (size_t)n, &id) == AP_OK &&
                 id == i + 2;
    }
    CHECK(dense);
    CHECK(ap_intern_table_add(&t, "kernel", 6, &again) == AP_OK &&
          again == k && t.count == 3002);
    size_t len = 9;
    CHECK(!strcmp(ap_intern_table_text(&t, empty, &len), "") && len == 0);
    CHECK(!strcmp(ap_intern_table_text(&t, 2001, NULL), "k1999"));
    CHECK(ap_intern_table_text(&t, 3002, NULL) == NULL);
    ap_intern_table_free(&t);
    CHECK(t.count == 0 && t.entries == NULL && t.slots == NULL);
    CHECK(ap_intern_table_text(&t, 0, NULL) == NULL);
}

/* Growing keeps every key; (parent, name) and (name, parent) differ. */
static void
test_path_map(void)
{
    ap_path_map m;
    CHECK(ap_path_map_init(&m, 0) == AP_OK);
    int kept = 1;
    for (uint32_t i = 0; i < 5000; i++) {
        kept &= ap_path_map_reserve(&m) == AP_OK;
        ap_path_map_put(&m, i / 7, i, i * 3);
    }
    uint32_t val = 0;
    for (uint32_t i = 0; i < 5000; i++) {
        kept &= ap_path_map_find(&m, i / 7, i, &val) && val == i * 3;
    }
    CHECK(kept && m.count == 5000);
    CHECK(!ap_path_map_find(&m, 7, 1, &val));
    CHECK(!ap_path_map_find(&m, 0, 5000, &val));
    ap_path_map_free(&m);
    CHECK(ap_path_map_init(&m, 1000) == AP_OK && m.mask + 1 >= 2002);
    ap_path_map_free(&m);
}

static void
test_hist(void)
{
    int monotone = 1, bounded = 1;
    uint32_t prev = 0;
    for (int64_t v = 0; v < (1LL << 40); v = v < 100 ? v + 1 : v + v / 7) {
        uint32_t i = ap_hist_index(v);
        monotone &= i >= prev;
        prev = i;
        int64_t lo = ap_hist_lower(i);
        int64_t hi = ap_hist_lower(i + 1);
        bounded &= lo <= v && v < hi && (hi - lo) * 32 <= (lo > 32 ? lo : 32);
    }
    CHECK(monotone);
    CHECK(bounded);
    CHECK(ap_hist_index(-5) == 0);
    CHECK(ap_hist_index(INT64_MAX) == AP_HIST_BUCKETS - 1);
}

static void
test_stats_merge(void)
{
    static ap_stats all, a, b;
    ap_stats_init(&all);
    ap_stats_init(&a);
    ap_stats_init(&b);
    for (int i = 1; i <= 1000; i++) {
        int64_t v = (i * 7919) % 1013 + 10;
        ap_stats_add(&all, v, v / 2, v / 3, 1);
        ap_stats_add(i % 3 ? &a : &b, v, v / 2, v / 3, 1);
    }
    ap_stats_merge(&a, &b);
    CHECK(a.count == all.count && a.total_ns == all.total_ns);
    CHECK(a.self_ns == all.self_ns && a.cpu_ns == all.cpu_ns);
    CHECK(a.min_ns == all.min_ns && a.max_ns == all.max_ns);
    CHECK(fabs(a.mean_ns - all.mean_ns) < 1e-9 * all.mean_ns);
    CHECK(fabs(a.m2 - all.m2) < 1e-9 * all.m2);
    int same = 1;
    for (uint32_t i = 0; i < AP_HIST_BUCKETS; i++) {
        same &= ap_stats_hist_at(&a, i) == ap_stats_hist_at(&all, i);
    }
    CHECK(same);
    ap_stats_free(&all);
    ap_stats_free(&a);
    ap_stats_free(&b);
}

static void
test_nesting_and_self_time(void)
{
    ap_session *s;
    CHECK(ap_session_start(&default_config, &s) == AP_OK);
    ap_session *other;
    CHECK(ap_session_start(&default_config, &other) == AP_ERR_ACTIVE);
    int outer, inner;
    uint32_t o = name("outer"), in = name("inner");
    CHECK(ap_enter(o, 3, &outer) == AP_OK);
    for (int i = 0; i < 10; i++) {
        CHECK(ap_enter(in, 0, &inner) == AP_OK);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        CHECK(ap_exit(&inner, i == 9) == AP_OK);
    }
    CHECK(ap_exit(&inner, 0) == AP_IGNORED);
    CHECK(ap_exit(&outer, 0) == AP_OK);
    CHECK(ap_exit(&outer, 0) == AP_IGNORED);
    ap_report *r;
    CHECK(ap_session_report(s, &r) == AP_ERR_RUNNING);
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_IGNORED);
    CHECK(ap_enter(o, 0, &outer) == AP_IGNORED);
    CHECK(ap_session_report(s, &r) == AP_OK);
    const ap_report_stage *so = find_stage(r, "outer");
    const ap_report_stage *si = find_stage(r, "outer/inner");
    CHECK(so && si && so->stats.count == 1 && si->stats.count == 10);
    CHECK(si && si->stats.raised == 1 && si->depth == 1);
    CHECK(so && si && so->stats.total_ns - si->stats.total_ns ==
                          so->stats.self_ns);
    CHECK(si && si->stats.min_ns >= 1000000);
    CHECK(so && so->stats.items == 3);
    CHECK(r->nspans == 11 && r->dropped == 0);
    /* the outer span opened first; every inner one points at it */
    int parents_ok = r->spans[0].parent == -1;
    for (int i = 1; i < 11; i++) {
        parents_ok &= r->spans[i].parent == 0 &&
                      r->spans[i].start_ns >= r->spans[0].start_ns &&
                      r->spans[i].end_ns <= r->spans[0].end_ns;
    }
    CHECK(parents_ok);
    CHECK(r->spans[10].flags == AP_SPAN_RAISED);
    finish(s, r);
}

static void
test_drops_keep_aggregates_exact(void)
{
    ap_config c = default_config;
    c.max_spans = 5000;
    ap_session *s = start(&c);
    int owner;
    uint32_t n = name("tiny");
    for (int i = 0; i < 20000; i++) {
        ap_enter(n, 1, &owner);
        ap_exit(&owner, 0);
    }
    ap_report *r = stop_and_report(s);
    CHECK(r->nspans == 5000 && r->dropped == 15000);
    const ap_report_stage *st = find_stage(r, "tiny");
    CHECK(st && st->stats.count == 20000 && st->stats.items == 20000);
    finish(s, r);
}

static void
test_unclosed_at_stop(void)
{
    ap_session *s = start(&default_config);
    int a, b;
    ap_enter(name("left-open"), 0, &a);
    ap_enter(name("child"), 0, &b);
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
    CHECK(ap_exit(&b, 0) == AP_IGNORED);
    ap_report *r;
    CHECK(ap_session_report(s, &r) == AP_OK);
    CHECK(r->unclosed == 2);
    const ap_report_stage *st = find_stage(r, "left-open/child");
    CHECK(st && st->stats.unclosed == 1 && st->stats.count == 1);
    CHECK(r->spans[1].flags == AP_SPAN_UNCLOSED &&
          r->spans[1].end_ns == r->stop_ns);
    finish(s, r);
}

/* An outer stage's exit with an inner one still open (a generator
 * abandoned inside it) closes both: the inner flagged unclosed and
 * counted, never an error; the inner's late exit is then ignored. */
static void
test_misnested_exit_closes_inner(void)
{
    ap_session *s = start(&default_config);
    int a, b;
    ap_enter(name("outer"), 0, &a);
    ap_enter(name("abandoned"), 0, &b);
    CHECK(ap_exit(&a, 0) == AP_MISNESTED);
    CHECK(ap_exit(&b, 0) == AP_IGNORED);
    ap_report *r = stop_and_report(s);
    CHECK(r->unclosed == 1);
    const ap_report_stage *in = find_stage(r, "outer/abandoned");
    const ap_report_stage *out = find_stage(r, "outer");
    CHECK(in && in->stats.unclosed == 1 && in->stats.count == 1);
    CHECK(out && out->stats.unclosed == 0 && out->stats.count == 1);
    CHECK(r->spans[1].flags == AP_SPAN_UNCLOSED &&
          r->spans[1].end_ns == r->spans[0].end_ns);
    finish(s, r);
}

/* Two contexts interleaved on one thread, as asyncio tasks are: each
 * stack nests only its own stages, under the stage open where the
 * context began, and a call left across a switch is flagged suspended. */
static void
test_contexts_interleave(void)
{
    ap_session *s = start(&default_config);
    int serve, ta, tb, inner;
    CHECK(ap_enter_in(7, name("serve"), 0, &serve) == AP_NEED_STACK);
    ap_stack *home, *a, *b;
    CHECK(ap_stack_open(NULL, 0, &home) == AP_OK);
    ap_stack_use(7, home);
    CHECK(ap_enter_in(7, name("serve"), 0, &serve) == AP_OK);
    CHECK(ap_stack_open(home, 1, &a) == AP_OK);
    CHECK(ap_stack_open(home, 1, &b) == AP_OK);
    ap_stack_use(8, a);
    CHECK(ap_enter_in(8, name("task"), 0, &ta) == AP_OK);
    CHECK(ap_enter_in(9, name("task"), 0, &tb) == AP_NEED_STACK);
    ap_stack_use(9, b);
    CHECK(ap_enter_in(9, name("task"), 0, &tb) == AP_OK);
    ap_stack_use(10, a);
    CHECK(ap_enter_in(10, name("step"), 0, &inner) == AP_OK);
    CHECK(ap_exit_in(10, &inner, 0) == AP_OK);  /* no switch: not flagged */
    CHECK(ap_exit_in(10, &ta, 0) == AP_OK);     /* entered under 8 */
    ap_stack_use(11, b);
    CHECK(ap_exit_in(11, &tb, 0) == AP_OK);
    uint64_t gen = ap_session_gen();
    CHECK(gen != 0 && ap_thread_index_now() == 0);
    ap_stack_release(gen, a);
    ap_stack_release(gen, b);
    ap_stack *reused;
    CHECK(ap_stack_open(NULL, 1, &reused) == AP_OK && (reused == a ||
                                                   reused == b));
    ap_stack_use(12, home);
    CHECK(ap_exit_in(12, &serve, 0) == AP_OK);  /* not suspendable */
    ap_report *r = stop_and_report(s);
    CHECK(find_stage(r, "serve")->stats.suspended == 0);
    ap_stack_release(gen, a);                    /* stopped: ignored */
    const ap_report_stage *task = find_stage(r, "serve/task");
    const ap_report_stage *step = find_stage(r, "serve/task/step");
    CHECK(task && task->stats.count == 2 && task->stats.suspended == 2);
    CHECK(task && task->stats.cpu_ns == 0);     /* the thread's: left out */
    CHECK(step && step->stats.count == 1 && step->stats.suspended == 0);
    CHECK(find_stage(r, "serve/task/task") == NULL);
    CHECK(r->unclosed == 0 && r->nspans == 4);
    /* both tasks' spans point at serve's, step's at its own task's */
    CHECK(r->spans[1].parent == 0 && r->spans[2].parent == 0 &&
          r->spans[3].parent == 1);
    finish(s, r);
}

/* A sampler on another thread asks where a thread is: the innermost stage
 * of the stack its current context key chose, else of the stack its
 * context names, else none. */
static void
test_stage_now_follows_contexts(void)
{
    uint64_t me = (uint64_t)pthread_self();
    int64_t tid = -1;
    CHECK(ap_stage_now(me, 7, NULL, &tid, NULL) == -1);     /* no session */
    ap_session *s = start(&default_config);
    CHECK(ap_stage_now(me, 7, NULL, &tid, NULL) == -1 && tid == -1);
    int serve, task;
    ap_stack *home, *a;
    CHECK(ap_stack_open(NULL, 0, &home) == AP_OK);
    ap_stack_use(7, home);
    CHECK(ap_enter_in(7, name("serve"), 0, &serve) == AP_OK);
    CHECK(ap_stack_open(home, 1, &a) == AP_OK);
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
    ap_open_call call = {-2, -2, 0, -2, -2};
    int64_t at_serve = ap_stage_now(me, 7, NULL, &tid, &call);
    CHECK(tid == (int64_t)syscall(SYS_gettid));
    /* how long serve's call has been open: a sample stands for no more */
    CHECK(call.open_ns >= 2000000 && call.open_ns < 1000000000);
    CHECK(call.cpu0_ns >= 0 && call.cpu0_ns <= ap_thread_cpu_ns());
    /* its path's time so far: this call's alone, none closed yet */
    CHECK(call.path_ns == call.open_ns && call.path_cpu_ns == 0);
    uint64_t serve_node = call.node;
    CHECK(ap_stage_now(me, 8, a, &tid, &call) == at_serve);  /* nests */
    CHECK(call.open_ns == -1);  /* a's own stages hold no call of serve's */
    CHECK(ap_stage_now(me, 8, NULL, &tid, NULL) == -1);     /* a context unseen */
    CHECK(ap_stage_now(me + 1, 7, NULL, &tid, NULL) == -1); /* another thread */
    ap_stack_use(8, a);
    CHECK(ap_enter_in(8, name("task"), 0, &task) == AP_OK);
    int64_t at_task = ap_stage_now(me, 8, NULL, &tid, NULL);
    CHECK(ap_stage_now(me, 9, home, &tid, NULL) == at_serve);
    ap_stack_use(9, home);
    CHECK(ap_stage_now(me, 9, a, &tid, NULL) == at_serve);  /* key wins */
    ap_stack_use(10, a);
    CHECK(ap_exit_in(10, &task, 0) == AP_OK);
    ap_stack_use(11, home);
    CHECK(ap_exit_in(11, &serve, 0) == AP_OK);
    CHECK(ap_stage_now(me, 11, NULL, &tid, &call) == -1 &&
          call.open_ns == -1);
    /* a second call of serve: its path's time holds the first's too */
    CHECK(ap_enter_in(11, name("serve"), 0, &serve) == AP_OK);
    CHECK(ap_stage_now(me, 11, NULL, &tid, &call) == at_serve);
    CHECK(call.node == serve_node);
    CHECK(call.path_ns >= call.open_ns + 2000000);
    CHECK(ap_exit_in(11, &serve, 0) == AP_OK);
    ap_report *r = stop_and_report(s);
    CHECK(at_serve == find_stage(r, "serve") - r->stages);
    CHECK(at_task == find_stage(r, "serve/task") - r->stages);
    finish(s, r);
}

#define THREADS 8
#define PER_THREAD 200000

static void *
worker(void *arg)
{
    uint32_t n = *(uint32_t *)arg;
    int owner;
    for (int i = 0; i < PER_THREAD; i++) {
        ap_enter(n, 0, &owner);
        ap_exit(&owner, 0);
    }
    return NULL;
}

static void
test_threads_merge(void)
{
    ap_config c = default_config;
    c.max_spans = 100000;
    ap_session *s = start(&c);
    pthread_t th[THREADS];
    uint32_t n = name("work");
    for (int i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, worker, &n);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    ap_report *r = stop_and_report(s);
    const ap_report_stage *st = find_stage(r, "work");
    CHECK(st && st->stats.count == THREADS * PER_THREAD);
    CHECK(r->nthreads == THREADS);
    CHECK(r->nspans == 100000 &&
          r->nspans + r->dropped == THREADS * PER_THREAD);
    finish(s, r);
}

static void
test_clock_agrees_with_monotonic(void)
{
    ap_session *s = start(&default_config);
    int owner;
    int64_t a = ap_now_ns();
    ap_enter(name("timed"), 0, &owner);
    struct timespec pause = {0, 20000000};
    nanosleep(&pause, NULL);
    ap_exit(&owner, 0);
    int64_t b = ap_now_ns();
    ap_report *r = stop_and_report(s);
    const ap_report_stage *st = find_stage(r, "timed");
    /* the span lies within what CLOCK_MONOTONIC saw around it, within the
     * calibration error (1e-4 of 20 ms is 2 us) */
    CHECK(st && st->stats.total_ns >= 20000000 - 2000);
    CHECK(st && st->stats.total_ns <= b - a + 2000);
    CHECK(r->spans[0].start_ns >= a - 2000 && r->spans[0].end_ns <= b + 2000);
    CHECK(r->start_ns <= r->spans[0].start_ns &&
          r->spans[0].end_ns <= r->stop_ns);
    const char *expect = getenv("AQUAPROF_CLOCK");
    CHECK(!expect || !strcmp(expect, r->clock));
    printf("clock: %s, %.4f ns per tick\n", r->clock, ap_clock_ns_per_tick);
    finish(s, r);
}

static void
test_rss_peak(void)
{
    ap_config c = default_config;
    c.memory = 1;
    c.memory_interval_ns = 200000;
    ap_session *s = start(&c);
    int owner;
    int64_t before = ap_rss_read_now();
    ap_enter(name("alloc"), 0, &owner);
    size_t size = 64u << 20;
    /* volatile: the compiler may not drop an allocation nobody reads */
    char *volatile block = malloc(size);
    memset(block, 1, size);
    struct timespec pause = {0, 20000000};
    nanosleep(&pause, NULL);
    free(block);
    nanosleep(&pause, NULL);
    ap_exit(&owner, 0);
    ap_report *r = stop_and_report(s);
    const ap_report_stage *st = find_stage(r, "alloc");
    /* the block was freed before exit: only the sampler saw the peak */
    CHECK(st && st->stats.mem_peak >= before + (int64_t)size * 9 / 10);
    /* and its log holds the RSS over time, the peak among it */
    CHECK(r->nmemory >= 20);
    int64_t highest = 0;
    for (uint32_t i = 0; i < r->nmemory; i++) {
        CHECK(i == 0 || r->memory[i].t_ns >= r->memory[i - 1].t_ns);
        CHECK(r->memory[i].t_ns >= r->start_ns &&
              r->memory[i].t_ns <= r->stop_ns);
        highest = r->memory[i].rss > highest ? r->memory[i].rss : highest;
    }
    CHECK(highest >= before + (int64_t)size * 9 / 10);
    finish(s, r);
}

/* The log keeps at most AP_RSS_LOG_MAX samples, evenly spaced over the
 * whole run, the first one always. */
static void
test_rss_log_thins_evenly(void)
{
    ap_rss r;
    memset(&r, 0, sizeof(r));
    r.log = malloc(AP_RSS_LOG_MAX * sizeof(*r.log));
    r.log_stride = 1;
    CHECK(r.log != NULL);
    const int64_t n = 5 * AP_RSS_LOG_MAX + 123;
    for (int64_t i = 0; i < n; i++) {
        ap_rss_log(&r, 1000 * i, i);
    }
    CHECK(r.log_len <= AP_RSS_LOG_MAX && r.log_len > AP_RSS_LOG_MAX / 4);
    CHECK(r.log[0].t_ns == 0);
    int64_t step = r.log[1].rss - r.log[0].rss;
    CHECK(step == r.log_stride);
    for (uint32_t i = 1; i < r.log_len; i++) {
        CHECK(r.log[i].rss - r.log[i - 1].rss == step);
    }
    CHECK(n - 1 - r.log[r.log_len - 1].rss < step);     /* up to the end */
    ap_rss_free_log(&r);
    CHECK(r.log == NULL && r.log_len == 0);
}

/* Hooks run at every recorded edge on the recording thread; each enter's
 * tag resolves to its stage and span, also on a second thread and for a
 * span dropped over the cap. */
static uint64_t hook_tags[64];
static uint32_t hook_names[64];
static int hook_enters, hook_exits;

static void
hook_enter(uint64_t tag, uint32_t name)
{
    hook_names[hook_enters] = name;
    hook_tags[hook_enters++] = tag;
}

static void
hook_exit(void)
{
    hook_exits++;
}

static void *
tagged_thread(void *arg)
{
    (void)arg;
    int owner;
    ap_enter(name("worker"), 0, &owner);
    ap_exit(&owner, 0);
    return NULL;
}

static void
test_hooks_and_tags(void)
{
    static const ap_stage_hooks hooks = {hook_enter, hook_exit};
    ap_config c = default_config;
    c.hooks = &hooks;
    c.max_spans = 2;
    hook_enters = hook_exits = 0;
    ap_session *s = start(&c);
    int a, b, d;
    ap_enter(name("outer"), 0, &a);
    ap_enter(name("inner"), 0, &b);
    CHECK(ap_exit(&hook_enters, 0) == AP_IGNORED);  /* no hook: not open */
    ap_exit(&b, 0);
    ap_enter(name("inner"), 0, &d);                  /* over the cap */
    ap_exit(&d, 0);
    pthread_t other;
    CHECK(pthread_create(&other, NULL, tagged_thread, NULL) == 0);
    pthread_join(other, NULL);
    ap_exit(&a, 0);
    ap_report *r = stop_and_report(s);
    CHECK(hook_enters == 4 && hook_exits == 4);
    CHECK(hook_names[0] == name("outer") && hook_names[3] == name("worker"));
    const char *paths[] = {"outer", "outer/inner", "outer/inner", "worker"};
    /* the first thread kept 2 spans (outer, inner); the worker's thread
     * got no room: its span is dropped but its stage is known */
    int64_t spans[] = {0, 1, -1, -1};
    for (int i = 0; i < 4; i++) {
        uint32_t stage;
        int64_t span;
        CHECK(hook_tags[i] != 0);
        CHECK(ap_report_resolve_tag(r, hook_tags[i], &stage, &span) == AP_OK);
        CHECK(&r->stages[stage] == find_stage(r, paths[i]));
        CHECK(span == spans[i]);
        CHECK(span < 0 || r->spans[span].stage == stage);
    }
    uint32_t stage;
    int64_t span;
    CHECK(ap_report_resolve_tag(r, 0, &stage, &span) == AP_ERR_INVALID);
    CHECK(ap_report_resolve_tag(r, hook_tags[0] + ((uint64_t)7 << 50),
                                &stage, &span) == AP_ERR_INVALID);
    CHECK(ap_report_resolve_tag(r, hook_tags[0] + 5, &stage, &span) ==
          AP_ERR_INVALID);
    finish(s, r);
}

static void
test_snapshot_windows(void)
{
    ap_config c = default_config;
    c.window = 3;
    c.max_spans = 0;               /* rings work without span buffers */
    c.memory = 1;
    c.memory_interval_ns = 1000000;
    ap_session *s = start(&c);
    int outer, step;
    ap_enter(name("outer"), 0, &outer);
    for (int i = 1; i <= 5; i++) {
        ap_enter(name("step"), i, &step);
        ap_exit(&step, 0);
    }
    ap_report *r = NULL;
    CHECK(ap_session_snapshot(s, AP_NO_KEY, &r) == AP_OK);
    const ap_report_stage *st = find_stage(r, "outer/step");
    CHECK(st && st->stats.count == 5 && find_stage(r, "outer")->stats.count
          == 0);
    /* the last 3 steps, oldest first, then the open outer call */
    CHECK(r->nspans == 4 && r->nthreads == 1 && r->threads[0].spans == 4);
    for (int i = 0; r->nspans == 4 && i < 3; i++) {
        CHECK(&r->stages[r->spans[i].stage] == st);
        CHECK(r->spans[i].items == i + 3 && r->spans[i].flags == 0);
        CHECK(r->spans[i].parent == -1);
        CHECK(r->spans[i].start_ns <= r->spans[i].end_ns);
        CHECK(i == 0 || r->spans[i - 1].end_ns <= r->spans[i].start_ns);
    }
    if (r->nspans == 4) {
        CHECK(r->spans[3].flags == AP_SPAN_UNCLOSED);
        CHECK(r->spans[3].end_ns == r->stop_ns);
        CHECK(r->spans[3].start_ns <= r->spans[0].start_ns);
        CHECK(r->spans[3].cpu_ns >= 0);
    }
    CHECK(r->nmemory == 1 && r->memory[0].rss > 0 &&
          r->memory[0].t_ns == r->stop_ns);
    ap_report_free(r);
    ap_exit(&outer, 0);
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
    CHECK(ap_session_snapshot(s, AP_NO_KEY, &r) == AP_ERR_INVALID);
    ap_session_free(s);
    c.window = AP_WINDOW_MAX + 1;
    CHECK(ap_session_start(&c, &s) == AP_ERR_INVALID);
}

static void
test_since_a_mark(void)
{
    ap_config c = default_config;
    c.memory = 1;
    c.memory_interval_ns = 1000000;
    ap_session *s = start(&c);
    int before, early, a, b;
    ap_enter(name("early"), 0, &early);
    ap_exit(&early, 0);
    ap_enter(name("before"), 0, &before);
    ap_mark m = ap_session_mark(s);
    for (int i = 0; i < 2; i++) {
        ap_enter(name("a"), 2, &a);
        ap_enter(name("b"), 0, &b);
        if (i == 0) {
            ap_exit(&b, 0);
            ap_exit(&a, 0);
        }
    }
    ap_since got;
    CHECK(ap_session_since(s, &m, 0, AP_NO_KEY, &got) == AP_OK);
    ap_report *r = got.report;
    const ap_report_stage *sa = find_stage(r, "before/a");
    const ap_report_stage *sb = find_stage(r, "before/a/b");
    /* the aggregates hold every call closed so far, and the calls opened
     * since the mark, closed now as stop() would: the caller's prefix
     * ("before", open since before the mark) stays open */
    CHECK(find_stage(r, "early")->stats.count == 1);
    CHECK(find_stage(r, "before")->stats.count == 0);
    CHECK(sa && sb && sa->stats.count == 2 && sb->stats.count == 2);
    CHECK(sa && sa->stats.unclosed == 1 && sa->stats.items == 4);
    CHECK(sa && sb && sa->stats.total_ns - sa->stats.self_ns ==
                          sb->stats.total_ns);
    CHECK(r->unclosed == 2);
    CHECK(got.caller_stage >= 0 &&
          &r->stages[got.caller_stage] == find_stage(r, "before"));
    /* the spans entered since the mark, parents among them */
    CHECK(r->nspans == 4 && r->threads[0].spans == 4);
    if (r->nspans == 4) {
        CHECK(r->spans[0].parent == -1 && r->spans[1].parent == 0);
        CHECK(r->spans[2].parent == -1 && r->spans[3].parent == 2);
        CHECK(r->spans[0].flags == 0 && r->spans[1].flags == 0);
        CHECK(r->spans[2].flags == AP_SPAN_UNCLOSED &&
              r->spans[3].flags == AP_SPAN_UNCLOSED);
        CHECK(r->spans[3].end_ns == r->stop_ns);
        CHECK(got.since_ns <= r->spans[0].start_ns);
        CHECK(&r->stages[r->spans[3].stage] == sb);
    }
    CHECK(got.rss_peak > 0 && r->nmemory == 1);
    ap_report_free(r);
    /* the session itself is untouched: the calls close as usual */
    ap_exit(&b, 0);
    ap_exit(&a, 0);
    CHECK(ap_session_since(s, &m, 0, AP_NO_KEY, &got) == AP_OK);
    CHECK(got.report->unclosed == 0 && got.caller_stage >= 0);
    ap_report_free(got.report);
    ap_exit(&before, 0);
    r = stop_and_report(s);
    sa = find_stage(r, "before/a");
    CHECK(sa && sa->stats.count == 2 && sa->stats.unclosed == 0);
    CHECK(r->unclosed == 0);
    CHECK(ap_session_since(s, &m, 0, AP_NO_KEY, &got) == AP_ERR_INVALID);
    finish(s, r);
}

static void
test_since_a_mark_as_a_snapshot(void)
{
    ap_config c = default_config;
    c.window = 8;
    ap_session *s = start(&c);
    int step, open;
    for (int i = 0; i < 3; i++) {
        ap_enter(name("step"), 100, &step);
        ap_exit(&step, 0);
    }
    ap_mark m = ap_session_mark(s);
    for (int i = 1; i <= 4; i++) {
        ap_enter(name("step"), i, &step);
        ap_exit(&step, 0);
    }
    ap_enter(name("open"), 0, &open);
    ap_since got;
    CHECK(ap_session_since(s, &m, 3, AP_NO_KEY, &got) == AP_OK);
    ap_report *r = got.report;
    /* of the window, the latest 3 steps entered since the mark, then the
     * call open now */
    CHECK(r->nspans == 4 && got.caller_stage == -1);
    for (int i = 0; r->nspans == 4 && i < 3; i++) {
        CHECK(r->spans[i].items == i + 2 && r->spans[i].parent == -1);
    }
    CHECK(r->nspans == 4 && r->spans[3].flags == AP_SPAN_UNCLOSED);
    CHECK(find_stage(r, "step")->stats.count == 7);
    CHECK(find_stage(r, "open")->stats.unclosed == 1);
    ap_report_free(r);
    ap_exit(&open, 0);
    finish(s, stop_and_report(s));
}

/* ------------------------------------------------------ memory bounds */

/* The histogram holds only the blocks its calls fell in: a path called
 * once costs one block, and calls spread over the range grow it. */
static void
test_hist_holds_only_its_buckets(void)
{
    ap_stats s;
    ap_stats_init(&s);
    CHECK(ap_stats_add(&s, 1500, 1500, 0, 0) == AP_OK);
    CHECK(s.hist_n == AP_HIST_BLOCK && s.hist != NULL);
    CHECK(ap_stats_hist_at(&s, ap_hist_index(1500)) == 1);
    CHECK(ap_stats_add(&s, 1501, 1501, 0, 0) == AP_OK);
    CHECK(s.hist_n == AP_HIST_BLOCK);
    CHECK(ap_stats_add(&s, 3, 3, 0, 0) == AP_OK);          /* below */
    CHECK(ap_stats_add(&s, 1LL << 50, 0, 0, 0) == AP_OK);  /* the top */
    CHECK(s.hist_lo == 0 && s.hist_n == AP_HIST_BUCKETS);
    CHECK(ap_stats_hist_at(&s, 3) == 1 &&
          ap_stats_hist_at(&s, AP_HIST_BUCKETS - 1) == 1 &&
          ap_stats_hist_at(&s, ap_hist_index(1500)) == 2);
    /* a merge into an empty stats takes the other's histogram whole */
    ap_stats into;
    ap_stats_init(&into);
    uint64_t *held = s.hist;
    CHECK(ap_stats_absorb(&into, &s) == AP_OK);
    CHECK(into.hist == held && into.count == 4 && s.hist == NULL &&
          s.count == 0);
    ap_stats copy;
    CHECK(ap_stats_copy(&copy, &into) == AP_OK && copy.hist != into.hist &&
          ap_stats_hist_at(&copy, 3) == 1 && copy.count == 4);
    ap_stats_free(&copy);
    ap_stats_free(&into);
    CHECK(into.hist == NULL && into.hist_n == 0 && into.count == 0);
}

/* Out of memory, a call still counts in every aggregate; its duration
 * goes to the nearest bucket held, and the caller hears of it. */
static void
test_hist_out_of_memory_folds(void)
{
    ap_stats s, other;
    ap_stats_init(&s);
    ap_stats_init(&other);
    ap_alloc_fail(0, -1);
    CHECK(ap_stats_add(&s, 1000, 1000, 0, 0) == AP_ERR_NOMEM);
    CHECK(s.count == 1 && s.hist_n == 0 && s.total_ns == 1000);
    ap_alloc_fail(0, 0);
    CHECK(ap_stats_add(&s, 1000, 1000, 0, 0) == AP_OK);
    ap_alloc_fail(0, -1);
    CHECK(ap_stats_add(&s, 50000000, 0, 0, 0) == AP_ERR_NOMEM);
    CHECK(s.count == 3 && s.max_ns == 50000000);
    CHECK(ap_stats_hist_at(&s, s.hist_lo + s.hist_n - 1) == 1);
    CHECK(ap_stats_hist_add(&other, 5, 2) == AP_ERR_NOMEM &&
          other.hist_n == 0);
    ap_alloc_fail(0, 0);
    CHECK(ap_stats_hist_add(&other, 5, 2) == AP_OK);
    other.count = 2;
    ap_alloc_fail(0, -1);
    CHECK(ap_stats_merge(&s, &other) == AP_ERR_NOMEM && s.count == 5);
    CHECK(ap_stats_hist_at(&s, s.hist_lo) == 2);   /* nearest: the lowest */
    ap_alloc_fail(0, 0);
    ap_stats_free(&s);
    ap_stats_free(&other);
}

/* 10,000 distinct paths in one thread: well under 1 KiB each, as the
 * core counts its own memory (each was about 11 KiB with a full
 * histogram a path). */
static void
test_many_paths_cost_little(void)
{
    ap_session *s = start(&default_config);
    int owner;
    ap_enter(name("warm"), 0, &owner);
    ap_exit(&owner, 0);
    int64_t before = ap_session_footprint(s);
    char buf[32];
    const int n = 10000;
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof(buf), "path-%d", i);
        ap_enter(name(buf), 0, &owner);
        ap_exit(&owner, 0);
    }
    int64_t per_path = (ap_session_footprint(s) - before) / n;
    printf("footprint: %lld bytes a path\n", (long long)per_path);
    CHECK(per_path > 0 && per_path < 1024);
    ap_report *r = stop_and_report(s);
    CHECK(r->nstages == (uint32_t)n + 1 && r->overflowed == 0);
    CHECK(find_stage(r, "path-9999") &&
          find_stage(r, "path-9999")->stats.count == 1);
    finish(s, r);
}

/* Past max_stages, entries of new paths fold into one overflow path under
 * their parent; the overflow path's children fold into it; paths known
 * before stay exact. */
static void
test_max_stages_folds_and_counts(void)
{
    ap_config c = default_config;
    c.max_stages = 3;
    ap_session *s = start(&c);
    int a, b, x, y, z;
    uint32_t na = name("a"), nb = name("b");
    ap_enter(na, 0, &a);
    ap_enter(nb, 0, &b);          /* a/b */
    ap_exit(&b, 0);
    ap_exit(&a, 0);
    ap_enter(nb, 0, &b);          /* b: the third path */
    ap_exit(&b, 0);
    for (int i = 0; i < 4; i++) {
        char buf[16];
        snprintf(buf, sizeof(buf), "new-%d", i);
        ap_enter(name(buf), 0, &x);            /* a fourth path: folded */
        ap_enter(name("inner"), 0, &y);        /* its child: folded too */
        ap_exit(&y, 0);
        ap_exit(&x, 0);
    }
    ap_enter(na, 0, &a);
    ap_enter(name("c"), 0, &z);                 /* a/c: folded under a */
    ap_exit(&z, 0);
    ap_enter(nb, 0, &b);                        /* a/b: known, exact */
    ap_exit(&b, 0);
    ap_exit(&a, 0);
    ap_report *r = stop_and_report(s);
    CHECK(r->overflowed == 9 && r->config.max_stages == 3);
    const ap_report_stage *top = find_stage(r, AP_OVERFLOW_NAME);
    const ap_report_stage *under_a = find_stage(r, "a/" AP_OVERFLOW_NAME);
    CHECK(top && top->stats.count == 8 && top->parent == -1);
    CHECK(under_a && under_a->stats.count == 1);
    CHECK(find_stage(r, "a/b")->stats.count == 2);
    CHECK(find_stage(r, "a")->stats.count == 2);
    CHECK(r->nstages == 5);
    /* the outer folded entry's self time leaves out its folded child */
    CHECK(top && top->stats.self_ns <= top->stats.total_ns);
    finish(s, r);
    c.max_stages = AP_MAX_STAGES + 1;
    CHECK(ap_session_start(&c, &s) == AP_ERR_INVALID);
}

/* The id a stage entry of name gets: ap_stage_name_id's, which must
 * succeed here. */
static uint32_t
entry_name(const char *s)
{
    uint32_t id = AP_NAME_OVER - 1;
    ap_status st = ap_stage_name_id(s, strlen(s), &id);
    CHECK(st == AP_OK && id != AP_NAME_OVER - 1);
    return id;
}

/* A name new to the process is interned only while it can make a path:
 * once the table of paths is full, its entries fold as any new path's
 * do, counted, and the process-wide table, never freed, stays as it was;
 * names held before keep working; a later session has room again. */
static void
test_names_past_max_stages_are_not_kept(void)
{
    ap_config c = default_config;
    c.max_stages = 3;
    char buf[32];
    uint32_t id;
    CHECK(ap_stage_name_id("no session yet", 14, &id) == AP_IGNORED);
    ap_session *s = start(&c);
    CHECK(ap_stage_name_id("", 0, &id) == AP_ERR_INVALID);
    int a, x, y;
    uint32_t na = entry_name("a");
    CHECK(na == name("a"));
    ap_enter(na, 0, &a);
    ap_exit(&a, 0);
    uint32_t held = name("held before");   /* interned, never entered */
    uint32_t before = ap_intern_count();
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, sizeof(buf), "request-%d", i);
        uint32_t n = entry_name(buf);
        CHECK(i == 0 ? n < AP_INTERN_MAX_IDS : n == AP_NAME_OVER);
        ap_enter(n, 0, &x);
        ap_enter(entry_name("its child"), 0, &y);
        ap_exit(&y, 0);
        ap_exit(&x, 0);
    }
    /* request-0 and request-0/its child filled the table */
    CHECK(ap_intern_count() == before + 2);
    CHECK(ap_intern_find("request-2", 9, &id) == 0);
    CHECK(entry_name("held before") == held);
    CHECK(entry_name("a") == na);
    ap_enter(held, 0, &x);                      /* a new path: folded */
    ap_exit(&x, 0);
    ap_enter(na, 0, &a);                        /* known: exact */
    ap_exit(&a, 0);
    ap_report *r = stop_and_report(s);
    /* 999 folded requests, their children (inside the fold), and "held
     * before": all in the one overflow path */
    CHECK(r->overflowed == 999 + 999 + 1);
    const ap_report_stage *top = find_stage(r, AP_OVERFLOW_NAME);
    CHECK(top && top->parent == -1 && top->stats.count == 999 + 999 + 1);
    CHECK(find_stage(r, "request-0/its child") &&
          find_stage(r, "request-0/its child")->stats.count == 1);
    CHECK(find_stage(r, "a")->stats.count == 2);
    CHECK(r->nstages == 3 + 1);
    finish(s, r);
    /* the next session adds names again, max_stages at most */
    s = start(&c);
    before = ap_intern_count();
    for (int i = 0; i < 100; i++) {
        snprintf(buf, sizeof(buf), "next-%d", i);
        ap_enter(entry_name(buf), 0, &x);
        ap_exit(&x, 0);
    }
    CHECK(ap_intern_count() == before + 3);
    r = stop_and_report(s);
    CHECK(r->overflowed == 97 && r->nstages == 4);
    finish(s, r);
}

/* Threads entering names new to the process all at once, while the table
 * of paths fills: the process-wide table grows by max_stages names at
 * most, and every entry is recorded, in its path or folded and counted. */
#define NAME_THREADS 8
#define NAMES_EACH 2000
#define RACE_MAX_STAGES 50

static atomic_int names_go;

static void *
naming_thread(void *arg)
{
    int index = *(int *)arg, owner;
    char buf[48];
    while (!atomic_load(&names_go)) {
    }
    for (int i = 0; i < NAMES_EACH; i++) {
        /* half the names shared by all threads, half their own */
        if (i % 2) {
            snprintf(buf, sizeof(buf), "race-shared-%d", i);
        } else {
            snprintf(buf, sizeof(buf), "race-%d-own-%d", index, i);
        }
        uint32_t id;
        if (ap_stage_name_id(buf, strlen(buf), &id) != AP_OK) {
            return arg;             /* a failure, seen by the join */
        }
        ap_enter(id, 0, &owner);
        ap_exit(&owner, 0);
    }
    return NULL;
}

static void
test_names_racing_past_max_stages(void)
{
    ap_config c = default_config;
    c.max_stages = RACE_MAX_STAGES;
    ap_session *s = start(&c);
    uint32_t before = ap_intern_count();
    pthread_t th[NAME_THREADS];
    int index[NAME_THREADS];
    atomic_store(&names_go, 0);
    for (int i = 0; i < NAME_THREADS; i++) {
        index[i] = i;
        CHECK(pthread_create(&th[i], NULL, naming_thread, &index[i]) == 0);
    }
    atomic_store(&names_go, 1);
    int failures = 0;
    for (int i = 0; i < NAME_THREADS; i++) {
        void *out;
        pthread_join(th[i], &out);
        failures += out != NULL;
    }
    CHECK(failures == 0);
    uint32_t added = ap_intern_count() - before;
    CHECK(added > 0 && added <= RACE_MAX_STAGES);
    ap_report *r = stop_and_report(s);
    int64_t in_paths = 0;
    const ap_report_stage *fold = find_stage(r, AP_OVERFLOW_NAME);
    for (uint32_t i = 0; i < r->nstages; i++) {
        in_paths += &r->stages[i] == fold ? 0 : r->stages[i].stats.count;
    }
    CHECK(fold && fold->stats.count == r->overflowed);
    CHECK(in_paths + r->overflowed == NAME_THREADS * NAMES_EACH);
    CHECK(r->nstages <= RACE_MAX_STAGES + 1 && r->lost == 0);
    finish(s, r);
}

/* Entries nested past AP_MAX_DEPTH fold into one path at that depth, so
 * that no report is deeper than its reader accepts; items sums hold at
 * INT64_MAX. */
static void
test_depth_folds_and_items_saturate(void)
{
    ap_session *s = start(&default_config);
    enum { DEEP = AP_MAX_DEPTH + 10 };
    static int owners[DEEP];
    uint32_t nf = name("f");
    for (int i = 0; i < DEEP; i++) {
        ap_enter(nf, INT64_MAX / 2, &owners[i]);
    }
    for (int i = DEEP - 1; i >= 0; i--) {
        ap_exit(&owners[i], 0);
    }
    ap_report *r = stop_and_report(s);
    uint32_t deepest = 0;
    const ap_report_stage *fold = NULL;
    for (uint32_t i = 0; i < r->nstages; i++) {
        if (r->stages[i].depth > deepest) {
            deepest = r->stages[i].depth;
            fold = &r->stages[i];
        }
    }
    CHECK(deepest == AP_MAX_DEPTH && r->too_deep == 10);
    CHECK(fold && fold->stats.count == 10);
    CHECK(fold && fold->stats.items == INT64_MAX);
    CHECK(r->nstages == AP_MAX_DEPTH + 1);
    finish(s, r);
}

/* Interned before any test makes allocations fail, as interning needs
 * memory. */
static uint32_t id_request, id_parse, id_left_open;

static void
request_names(void)
{
    id_request = name("request");
    id_parse = name("parse");
    id_left_open = name("left open");
}

static void *
request_thread(void *arg)
{
    int open_at_exit = *(int *)arg;
    int r = 0, p = 0, left = 0;     /* owners: only their addresses count */
    ap_enter(id_request, 1, &r);
    ap_enter(id_parse, 0, &p);
    ap_exit(&p, 0);
    ap_exit(&r, 0);
    if (open_at_exit) {
        ap_enter(id_left_open, 0, &left);
    }
    return NULL;
}

/* A thread per request: once each has ended, the session keeps its
 * aggregates, spans and a few hundred bytes, not its buffers (a 196 KiB
 * span chunk, its tree); the span room it held goes back to max_spans. */
static void
test_ended_threads_are_merged_and_trimmed(void)
{
    ap_config c = default_config;
    c.max_spans = 3 * CHUNK_SPANS;
    ap_session *s = start(&c);
    int zero = 0, one = 1;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, request_thread, &zero) == 0);
    pthread_join(th, NULL);
    int64_t before = ap_session_footprint(s);
    const int n = 300;
    for (int i = 0; i < n; i++) {
        CHECK(pthread_create(&th, NULL, request_thread,
                             i == 7 ? &one : &zero) == 0);
        pthread_join(th, NULL);
    }
    int64_t per_thread = (ap_session_footprint(s) - before) / n;
    printf("footprint: %lld bytes a thread that ended\n",
           (long long)per_thread);
    CHECK(per_thread > 0 && per_thread < 1024);
    ap_report *r = stop_and_report(s);
    /* every thread got span room: 301 threads x 2 spans, over 3 chunks
     * of cap, which threads holding their chunks to the end would not */
    CHECK(r->nthreads == (uint32_t)n + 1 && r->dropped == 0);
    CHECK(r->nspans == 2 * (n + 1) + 1 && r->shed == 0);
    const ap_report_stage *req = find_stage(r, "request");
    CHECK(req && req->stats.count == n + 1 && req->stats.items == n + 1);
    CHECK(find_stage(r, "request/parse")->stats.count == n + 1);
    /* the stage left open closed with its thread, flagged */
    const ap_report_stage *left = find_stage(r, "left open");
    CHECK(left && left->stats.unclosed == 1 && r->unclosed == 1);
    int ordered = 1;
    for (uint32_t k = 0; k < r->nthreads; k++) {
        const ap_report_thread *t = &r->threads[k];
        ordered &= t->index == k && t->spans == t->recorded &&
                   t->first_span == (k <= 8 ? 2 * (int64_t)k
                                            : 2 * (int64_t)k + 1);
        for (int64_t i = 0; i < t->spans; i++) {
            const ap_span *sp = &r->spans[t->first_span + i];
            ordered &= sp->thread == k;
            ordered &= i == 0 ? sp->parent == -1
                              : sp->parent == -1 ||
                                    sp->parent == t->first_span;
        }
    }
    CHECK(ordered);
    finish(s, r);
}

/* A thread that opens a context's stack and leaves it to the program
 * (a ContextStack outliving its thread) */
static ap_stack *kept_stack;
static int64_t kept_stack_tid;
static ap_status kept_stack_status;   /* checked once joined: CHECK's
                                       * counters are the main thread's */

static void *
context_thread(void *arg)
{
    (void)arg;
    int owner = 0;     /* only its address counts */
    ap_enter(id_request, 0, &owner);
    ap_exit(&owner, 0);
    kept_stack_status = ap_stack_open(NULL, 1, &kept_stack);
    kept_stack_tid = (int64_t)syscall(SYS_gettid);
    return NULL;
}

/* Past the threads a tag can name, an ended thread that kept no span
 * gives its index to the next new thread, and one record sums those it
 * replaced: a service starting a thread a request holds a bounded number
 * of records, with every aggregate and count exact. A thread whose
 * context's stack is still held elsewhere keeps its record until the
 * stack is let go. */
static void
test_ended_threads_past_the_tagged_ones_are_taken_over(void)
{
    ap_config c = default_config;
    c.max_spans = CHUNK_SPANS;
    ap_session *s = start(&c);
    int zero = 0, one = 1;
    pthread_t th;
    const int n = AP_KEPT_THREADS_FOR_TESTS + 1000;
    int64_t at_first = 0;
    for (int i = 0; i < n; i++) {
        if (i == AP_KEPT_THREADS_FOR_TESTS + 100) {
            at_first = ap_session_footprint(s);
        }
        if (i == AP_KEPT_THREADS_FOR_TESTS + 500) {
            CHECK(pthread_create(&th, NULL, context_thread, NULL) == 0);
            pthread_join(th, NULL);
            CHECK(kept_stack_status == AP_OK);
        }
        if (i == AP_KEPT_THREADS_FOR_TESTS + 600) {
            ap_stack_release(ap_session_gen(), kept_stack);
        }
        CHECK(pthread_create(&th, NULL, request_thread,
                             i == n - 200 ? &one : &zero) == 0);
        pthread_join(th, NULL);
    }
    /* 900 threads more, and a record more (the context's) */
    int64_t grown = ap_session_footprint(s) - at_first;
    printf("footprint: %lld bytes over the last 900 threads\n",
           (long long)grown);
    CHECK(grown < 4096);
    ap_report *r = stop_and_report(s);
    /* the kept threads, the fold, the index taken over, the one a thread
     * took while the context's record was held */
    CHECK(r->nthreads == AP_KEPT_THREADS_FOR_TESTS + 3);
    const ap_report_stage *req = find_stage(r, "request");
    CHECK(req && req->stats.count == n + 1);
    CHECK(find_stage(r, "left open")->stats.unclosed == 1);
    int64_t folded = 0, dropped = 0, folds = 0, spans = 0;
    for (uint32_t k = 0; k < r->nthreads; k++) {
        const ap_report_thread *t = &r->threads[k];
        CHECK(t->index == k);
        folds += t->folded > 0;
        folded += t->folded;
        dropped += t->dropped;
        spans += t->spans;
        CHECK(t->folded == 0 || (t->native_id == 0 && t->spans == 0));
        /* taken over once its stack was let go */
        CHECK(t->native_id != kept_stack_tid);
    }
    /* every thread past the kept ones (the context's too) but the two
     * holding an index at the end */
    CHECK(folds == 1 && folded == n + 1 - AP_KEPT_THREADS_FOR_TESTS - 2);
    CHECK(dropped == r->dropped && spans == r->nspans);
    CHECK(r->nspans + r->dropped == 2 * (int64_t)n + 2);
    finish(s, r);
}

/* The report needs no memory but the span array's: with every
 * allocation failing it is still built, aggregates whole, the spans shed
 * and counted; a tag of a shed span still names its stage. */
static uint64_t last_tag;

static void
keep_tag(uint64_t tag, uint32_t unused)
{
    (void)unused;
    last_tag = tag;
}

static void
no_exit_hook(void)
{
}

static void
test_report_needs_no_memory(void)
{
    static const ap_stage_hooks hooks = {keep_tag, no_exit_hook};
    ap_config c = default_config;
    c.memory = 1;
    c.memory_interval_ns = 1000000;
    c.hooks = &hooks;
    ap_session *s = start(&c);
    int owner;
    for (int i = 0; i < 100; i++) {
        ap_enter(name("kept"), 0, &owner);
        ap_exit(&owner, 0);
    }
    pthread_t th;
    int zero = 0;
    CHECK(pthread_create(&th, NULL, request_thread, &zero) == 0);
    pthread_join(th, NULL);
    uint64_t tag = last_tag;        /* the other thread's parse span */
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
    ap_alloc_fail(0, -1);
    ap_report *r = NULL;
    CHECK(ap_session_report(s, &r) == AP_OK);
    ap_alloc_fail(0, 0);
    CHECK(r && r->nspans == 0 && r->shed == 102 && r->spans == NULL);
    CHECK(find_stage(r, "kept")->stats.count == 100);
    CHECK(find_stage(r, "request/parse")->stats.count == 1);
    CHECK(r->nmemory >= 1);
    uint32_t stage;
    int64_t span;
    CHECK(ap_report_resolve_tag(r, tag, &stage, &span) == AP_OK &&
          span == -1 && &r->stages[stage] == find_stage(r, "request/parse"));
    CHECK(ap_session_report(s, &r) == AP_ERR_INVALID);   /* once */
    finish(s, r);
}

/* When the span array cannot be had whole, as many spans as fit are kept,
 * a prefix in thread order (parents before their children). */
static void
test_report_keeps_what_fits(void)
{
    ap_session *s = start(&default_config);
    int outer, inner;
    for (int i = 0; i < 1000; i++) {
        ap_enter(name("outer"), 0, &outer);
        ap_enter(name("inner"), 0, &inner);
        ap_exit(&inner, 0);
        ap_exit(&outer, 0);
    }
    CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
    ap_alloc_fail(0, 2);        /* the whole array, twice: half fits */
    ap_report *r = NULL;
    CHECK(ap_session_report(s, &r) == AP_OK);
    ap_alloc_fail(0, 0);
    CHECK(r->nspans == 1000 && r->shed == 1000);
    CHECK(r->threads[0].spans == 1000 && r->threads[0].recorded == 2000);
    int parents_ok = 1;
    for (int64_t i = 0; i < r->nspans; i++) {
        parents_ok &= r->spans[i].parent < i &&
                      (i % 2 == 0 ? r->spans[i].parent == -1
                                  : r->spans[i].parent == i - 1);
    }
    CHECK(parents_ok);
    CHECK(find_stage(r, "outer/inner")->stats.count == 1000);
    finish(s, r);
}

/* Allocation failing while recording: nothing fails the caller beyond
 * AP_ERR_NOMEM, and every entry not recorded is counted, a thread that
 * could not even register included. */
static void *
unregistered_thread(void *arg)
{
    ap_status *st = arg;     /* the checks are the main thread's */
    int owner;
    ap_alloc_fail(0, -1);
    st[0] = ap_enter(id_request, 0, &owner);
    st[1] = ap_enter(id_request, 0, &owner);
    st[2] = ap_exit(&owner, 0);
    ap_alloc_fail(0, 0);
    return NULL;
}

static void
test_out_of_memory_while_recording_is_counted(void)
{
    ap_session *s = start(&default_config);
    ap_status st[3];
    pthread_t th;
    CHECK(pthread_create(&th, NULL, unregistered_thread, st) == 0);
    pthread_join(th, NULL);
    CHECK(st[0] == AP_ERR_NOMEM && st[1] == AP_ERR_NOMEM &&
          st[2] == AP_IGNORED);
    int owner;
    uint32_t fresh = name("fresh path");
    ap_alloc_fail(0, -1);
    CHECK(ap_enter(fresh, 0, &owner) == AP_ERR_NOMEM);   /* a new node */
    CHECK(ap_exit(&owner, 0) == AP_IGNORED);
    ap_alloc_fail(0, 0);
    CHECK(ap_enter(fresh, 0, &owner) == AP_OK);
    ap_alloc_fail(0, -1);
    CHECK(ap_exit(&owner, 0) == AP_OK);      /* its histogram: none yet */
    ap_alloc_fail(0, 0);
    ap_report *r = stop_and_report(s);
    CHECK(r->lost == 4);    /* 2 unregistered, a node, a histogram */
    const ap_report_stage *st2 = find_stage(r, "fresh path");
    CHECK(st2 && st2->stats.count == 1);
    finish(s, r);
    /* every allocation of a whole run failing in turn: never a crash,
     * never a leak (ASan, valgrind), the report always built */
    int built = 1;
    uint32_t outer = name("outer"), inner = name("inner");
    uint32_t first = name("first");
    static int left_open = 1;
    for (int64_t skip = 0; skip < 40; skip++) {
        ap_session *t = start(&default_config);
        ap_alloc_fail(skip, 1);
        int a, b;
        for (int i = 0; i < 3; i++) {
            ap_enter(outer, 0, &a);
            ap_enter(i ? inner : first, 0, &b);
            ap_exit(&b, 0);
            ap_exit(&a, 0);
        }
        CHECK(pthread_create(&th, NULL, request_thread, &left_open) == 0);
        pthread_join(th, NULL);
        ap_session_stop(t, AP_NO_KEY);
        ap_report *rt = NULL;
        built &= ap_session_report(t, &rt) == AP_OK;
        ap_alloc_fail(0, 0);
        finish(t, rt);
    }
    CHECK(built);
}

/* The memory sampler polls at its interval while stages are open, slows
 * down when none has been for a while, and a stage's wake takes a fresh
 * sample at once. */
static atomic_int sampler_busy;

static int
busy_flag(void *unused)
{
    (void)unused;
    return atomic_load(&sampler_busy);
}

static void
sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

/* The process's CPU time of a call from the sampler's marks: each end
 * carried to its edge at the rate of the interval before it. */
static void
test_process_cpu_of_a_call_from_the_marks(void)
{
    ap_rss r;
    memset(&r, 0, sizeof(r));
    r.interval_ticks = 1000;
    /* entered at 1500, half an interval after a reading of 10,000 at 1000,
     * the process using 2 CPU ticks a tick: 11,000 at entry */
    ap_cpu_mark m0 = {10000, 1000, 2.0};
    /* the exit at 1800, with no new reading: 600 more at the same rate */
    atomic_store(&r.cpu, 10000);
    atomic_store(&r.cpu_at, 1000);
    atomic_store(&r.cpu_rate, 2.0);
    CHECK(ap_rss_process_cpu(&r, &m0, 1500, 1800) == 600);
    /* a reading of 13,000 at 2500 since, at 1 a tick: exit at 2700 */
    atomic_store(&r.cpu, 13000);
    atomic_store(&r.cpu_at, 2500);
    atomic_store(&r.cpu_rate, 1.0);
    CHECK(ap_rss_process_cpu(&r, &m0, 1500, 2700) == 13200 - 11000);
    /* a mark read across the sampler's store never gives a negative */
    ap_cpu_mark late = {20000, 2600, 1.0};
    CHECK(ap_rss_process_cpu(&r, &late, 2600, 2700) == 0);
}

static void
test_sampler_rests_when_no_stage_is_open(void)
{
    ap_rss r;
    atomic_store(&sampler_busy, 1);
    CHECK(ap_rss_start(&r, 1000000, busy_flag, NULL) == AP_OK);
    sleep_ms(50);
    uint64_t a = atomic_load(&r.seq);
    sleep_ms(200);
    uint64_t busy_samples = atomic_load(&r.seq) - a;
    CHECK(busy_samples >= 20);          /* 200 at 1 kHz; a loaded VM less */
    CHECK(!atomic_load(&r.idle));
    atomic_store(&sampler_busy, 0);
    sleep_ms(400);                     /* quiet for 100 ms, then idle */
    CHECK(atomic_load(&r.idle));
    uint64_t b = atomic_load(&r.seq);
    sleep_ms(600);
    uint64_t idle_samples = atomic_load(&r.seq) - b;
    CHECK(idle_samples <= 4);           /* one in 250 ms */
    atomic_store(&sampler_busy, 1);
    uint64_t c = atomic_load(&r.seq);
    ap_rss_wake_if_idle(&r);
    CHECK(atomic_load(&r.seq) == c + 1);   /* sampled by the caller */
    CHECK(!atomic_load(&r.idle));
    sleep_ms(100);
    CHECK(atomic_load(&r.seq) - c >= 10);  /* the sampler back at pace */
    ap_rss_stop(&r);
    ap_rss_free_log(&r);
    printf("sampler: %llu samples in 200 ms busy, %llu in 600 ms idle\n",
           (unsigned long long)busy_samples,
           (unsigned long long)idle_samples);
}

/* A stage held open while nothing else is entered (a server's serve
 * loop) lets the sampler rest: a second of it logs about 100 samples (the
 * first 100 ms at 1 kHz, then one in 250 ms), not 1,000. */
static void
test_sampler_rests_while_a_stage_is_held_quietly(void)
{
    ap_config c = default_config;
    c.memory = 1;
    c.memory_interval_ns = 1000000;
    ap_session *s = start(&c);
    int serve;
    ap_enter(name("serve"), 0, &serve);
    sleep_ms(1000);
    ap_exit(&serve, 0);
    ap_report *r = stop_and_report(s);
    CHECK(r->nmemory < 300);
    printf("sampler: %u samples in 1 s with one stage held open\n",
           r->nmemory);
    finish(s, r);
}

/* A stage held open while the program allocates keeps the sampler at
 * its pace, so that the stage's peak is seen as before. */
static void
test_sampler_keeps_pace_while_memory_moves(void)
{
    ap_config c = default_config;
    c.memory = 1;
    c.memory_interval_ns = 1000000;
    ap_session *s = start(&c);
    int grow;
    enum { STEPS = 30, STEP = 2 << 20 };
    char *blocks[STEPS];
    ap_enter(name("grow"), 0, &grow);
    for (int i = 0; i < STEPS; i++) {
        blocks[i] = malloc(STEP);
        if (blocks[i]) {
            memset(blocks[i], 1, STEP);
        }
        sleep_ms(10);
    }
    ap_exit(&grow, 0);
    for (int i = 0; i < STEPS; i++) {
        free(blocks[i]);
    }
    ap_report *r = stop_and_report(s);
    CHECK(r->nmemory > 200);          /* about 300 at 1 kHz; a VM less */
    finish(s, r);
}

/* Threads ending, and so merging into their session, while the main
 * thread stops it, snapshots it, reports it and frees it: ThreadSanitizer
 * watches this one. */
#define RACERS 6
static atomic_int racers_done;

typedef struct {
    int rounds;
    int open_at_exit;
} racer_args;

static void *
racer(void *arg)
{
    racer_args *a = arg;
    int o, in;
    for (int i = 0; i < a->rounds; i++) {
        ap_enter(name("race"), 0, &o);
        ap_enter(name(i % 2 ? "odd" : "even"), 0, &in);
        ap_exit(&in, 0);
        ap_exit(&o, 0);
    }
    if (a->open_at_exit) {
        ap_enter(name("race"), 0, &o);
    }
    atomic_fetch_add(&racers_done, 1);
    return NULL;     /* its exit hook runs now, racing the main thread */
}

static void
test_thread_exit_races_stop_report_free(void)
{
    int consistent = 1;
    for (int round = 0; round < 60; round++) {
        ap_config c = default_config;
        c.window = round % 3 == 0 ? 4 : 0;
        c.memory = round % 2;
        c.memory_interval_ns = 100000;
        ap_session *s = start(&c);
        atomic_store(&racers_done, 0);
        pthread_t th[RACERS];
        racer_args args[RACERS];
        for (int i = 0; i < RACERS; i++) {
            args[i] = (racer_args){50 + i, i == 0};
            CHECK(pthread_create(&th[i], NULL, racer, &args[i]) == 0);
        }
        while (atomic_load(&racers_done) < RACERS) {
            sched_yield();
        }
        ap_report *r = NULL;
        if (c.window) {
            CHECK(ap_session_snapshot(s, AP_NO_KEY, &r) == AP_OK);
            ap_report_free(r);
            r = NULL;
        }
        switch (round % 4) {
        case 0:             /* free, with no report at all */
            ap_session_free(s);
            break;
        case 1:             /* stop, then free */
            CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
            ap_session_free(s);
            break;
        default:            /* the whole report */
            CHECK(ap_session_stop(s, AP_NO_KEY) == AP_OK);
            CHECK(ap_session_report(s, &r) == AP_OK);
            const ap_report_stage *st = find_stage(r, "race");
            int64_t calls = 0;
            for (int i = 0; i < RACERS; i++) {
                calls += args[i].rounds;
            }
            consistent &= st && st->stats.count == calls + 1 &&
                          st->stats.unclosed == 1 && r->nthreads == RACERS;
            finish(s, r);
        }
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
        }
    }
    CHECK(consistent);
}

static void *
three_requests(void *arg)
{
    int n = *(int *)arg, r = 0;
    for (int i = 0; i < n; i++) {
        ap_enter(id_request, i, &r);
        ap_exit(&r, 0);
    }
    return NULL;
}

/* With windows, the last calls of threads that ended stay for snapshots,
 * merged by path: the latest `window` of them by end time. */
static void
test_snapshot_keeps_ended_threads_latest_calls(void)
{
    ap_config c = default_config;
    c.window = 4;
    ap_session *s = start(&c);
    int five = 5, two = 2;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, three_requests, &five) == 0);
    pthread_join(th, NULL);
    CHECK(pthread_create(&th, NULL, three_requests, &two) == 0);
    pthread_join(th, NULL);
    ap_report *r = NULL;
    CHECK(ap_session_snapshot(s, AP_NO_KEY, &r) == AP_OK);
    const ap_report_stage *req = find_stage(r, "request");
    CHECK(req && req->stats.count == 7);
    /* the first thread's items 3, 4, then the second's 0, 1 */
    CHECK(r->nspans == 4);
    int64_t want[] = {3, 4, 0, 1};
    uint32_t thread_of[] = {0, 0, 1, 1};
    for (int i = 0; r->nspans == 4 && i < 4; i++) {
        CHECK(r->spans[i].items == want[i]);
        CHECK(r->spans[i].thread == thread_of[i]);
        CHECK(&r->stages[r->spans[i].stage] == req);
    }
    CHECK(r->threads[0].spans == 2 && r->threads[1].spans == 2);
    ap_report_free(r);
    ap_session_free(s);
}

int
main(void)
{
    test_intern();
    test_intern_table();
    test_path_map();
    test_hist();
    test_stats_merge();
    test_nesting_and_self_time();
    test_drops_keep_aggregates_exact();
    test_unclosed_at_stop();
    test_misnested_exit_closes_inner();
    test_contexts_interleave();
    test_stage_now_follows_contexts();
    test_threads_merge();
    test_clock_agrees_with_monotonic();
    test_rss_peak();
    test_rss_log_thins_evenly();
    test_hooks_and_tags();
    test_snapshot_windows();
    test_since_a_mark();
    test_since_a_mark_as_a_snapshot();
    request_names();
    test_hist_holds_only_its_buckets();
    test_hist_out_of_memory_folds();
    test_many_paths_cost_little();
    test_max_stages_folds_and_counts();
    test_names_past_max_stages_are_not_kept();
    test_names_racing_past_max_stages();
    test_depth_folds_and_items_saturate();
    test_ended_threads_are_merged_and_trimmed();
    test_ended_threads_past_the_tagged_ones_are_taken_over();
    test_report_needs_no_memory();
    test_report_keeps_what_fits();
    test_out_of_memory_while_recording_is_counted();
    test_process_cpu_of_a_call_from_the_marks();
    test_sampler_rests_when_no_stage_is_open();
    test_sampler_rests_while_a_stage_is_held_quietly();
    test_sampler_keeps_pace_while_memory_moves();
    test_thread_exit_races_stop_report_free();
    test_snapshot_keeps_ended_threads_latest_calls();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
