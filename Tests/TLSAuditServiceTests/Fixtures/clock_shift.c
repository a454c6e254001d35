/* An LD_PRELOAD shim that shifts CLOCK_REALTIME (clock_gettime, gettimeofday, time) by the number
 * of seconds written in the file $CLOCK_SHIFT_FILE (re-read at most every 50 ms), leaving
 * CLOCK_MONOTONIC alone: a wall-clock step as NTP, a restored VM or `date -s` makes one, for one
 * process, without privileges. Built by ClockStepTests: clang -shared -fPIC -o libclockshift.so clock_shift.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static _Atomic long long shift_ns;
static _Atomic long long next_read_ns;

static void read_shift(void) {
    struct timespec now;
    if (real_clock_gettime(CLOCK_MONOTONIC, &now) != 0) return;
    long long at = now.tv_sec * 1000000000LL + now.tv_nsec;
    if (at < atomic_load(&next_read_ns)) return;
    atomic_store(&next_read_ns, at + 50000000LL);
    const char *path = getenv("CLOCK_SHIFT_FILE");
    FILE *file = path ? fopen(path, "r") : NULL;
    if (!file) return;
    double seconds;
    if (fscanf(file, "%lf", &seconds) == 1) atomic_store(&shift_ns, (long long)(seconds * 1e9));
    fclose(file);
}

int clock_gettime(clockid_t clock, struct timespec *time) {
    if (!real_clock_gettime) real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int status = real_clock_gettime(clock, time);
    if (status == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        read_shift();
        long long total = time->tv_sec * 1000000000LL + time->tv_nsec + atomic_load(&shift_ns);
        time->tv_sec = total / 1000000000LL;
        time->tv_nsec = total % 1000000000LL;
    }
    return status;
}

int gettimeofday(struct timeval *value, void *zone) {
    (void)zone;
    struct timespec now;
    int status = clock_gettime(CLOCK_REALTIME, &now);
    if (status == 0) {
        value->tv_sec = now.tv_sec;
        value->tv_usec = now.tv_nsec / 1000;
    }
    return status;
}

time_t time(time_t *out) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (out) *out = now.tv_sec;
    return now.tv_sec;
}
