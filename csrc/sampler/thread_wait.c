/* Reading a thread's waits from /proc (thread_wait.h). */
#include "thread_wait.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#if defined(__linux__) && defined(SYS_futex)
#define AP_WAITS_KNOWN 1
#endif

#ifdef AP_WAITS_KNOWN
static int
open_task_file(int64_t tid, const char *name)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%lld/%s", (long long)tid,
             name);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* The file's text now, NUL-ended in buf; its length, or -1. */
static ssize_t
read_now(int fd, char *buf, size_t size)
{
    if (fd < 0) {
        return -1;
    }
    ssize_t n = pread(fd, buf, size - 1, 0);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    return n;
}

/* The futex address a syscall line ("NR arg1 ..." or "running") sleeps
 * on: 1 and *addr, or 0. */
static int
futex_in(const char *line, uintptr_t *addr)
{
    char *end;
    long nr = strtol(line, &end, 10);
    if (end == line || nr != SYS_futex) {
        return 0;
    }
    *addr = (uintptr_t)strtoull(end, NULL, 16);
    return 1;
}
#endif

void
ap_wait_call_open(ap_wait_files *f, int64_t tid)
{
    f->stat_fd = f->call_fd = -1;
#ifdef AP_WAITS_KNOWN
    if (tid > 0) {
        f->call_fd = open_task_file(tid, "syscall");
    }
#else
    (void)tid;
#endif
}

void
ap_wait_files_open(ap_wait_files *f, int64_t tid)
{
    ap_wait_call_open(f, tid);
#ifdef AP_WAITS_KNOWN
    if (tid > 0) {
        f->stat_fd = open_task_file(tid, "schedstat");
    }
#endif
}

void
ap_wait_files_close(ap_wait_files *f)
{
    if (f->stat_fd >= 0) {
        close(f->stat_fd);
    }
    if (f->call_fd >= 0) {
        close(f->call_fd);
    }
    f->stat_fd = f->call_fd = -1;
}

int64_t
ap_run_delay_ns(const ap_wait_files *f)
{
#ifdef AP_WAITS_KNOWN
    /* "on-CPU ns, run delay ns, time slices" */
    char buf[96];
    if (read_now(f->stat_fd, buf, sizeof(buf)) < 0) {
        return -1;
    }
    char *end;
    strtoull(buf, &end, 10);
    char *delay_at = end;
    unsigned long long delay = strtoull(delay_at, &end, 10);
    return end == delay_at ? -1 : (int64_t)delay;
#else
    (void)f;
    return -1;
#endif
}

int
ap_sleeps_on(const ap_wait_files *f, uintptr_t lo, uintptr_t hi)
{
#ifdef AP_WAITS_KNOWN
    char buf[160];
    uintptr_t addr;
    if (read_now(f->call_fd, buf, sizeof(buf)) < 0 ||
        strncmp(buf, "running", 7) == 0) {
        return -1;
    }
    if (!futex_in(buf, &addr)) {
        return AP_SLEEPS_ELSEWHERE;
    }
    return addr >= lo && addr < hi ? AP_SLEEPS_IN_RANGE : AP_SLEEPS_ON_FUTEX;
#else
    (void)f, (void)lo, (void)hi;
    return -1;
#endif
}

int
ap_futex_of(int64_t tid, uintptr_t *addr)
{
#ifdef AP_WAITS_KNOWN
    char buf[160];
    int fd = open_task_file(tid, "syscall");
    if (fd < 0) {
        return -1;
    }
    int found = read_now(fd, buf, sizeof(buf)) > 0 && futex_in(buf, addr);
    close(fd);
    return found;
#else
    (void)tid, (void)addr;
    return -1;
#endif
}
