/* An fsync that takes at least TRIO_AGENTS_FSYNC_DELAY_US microseconds longer: preloaded
 * (LD_PRELOAD) into a benchmark's interpreter, and into the PostgreSQL server it starts, by
 * `python -m benchmarks --fsync-delay-us N`. It stands in for a disk whose sync is slow (a
 * network volume, a disk without a write cache), where group commit matters; see
 * benchmarks/_fsync_delay.py. fsync and fdatasync sleep first, then sync for real. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void wait_delay(void) {
    static long delay_ns = -1;
    if (delay_ns < 0) {
        const char *text = getenv("TRIO_AGENTS_FSYNC_DELAY_US");
        delay_ns = text != NULL ? atol(text) * 1000L : 0;
    }
    if (delay_ns > 0) {
        struct timespec pause = {delay_ns / 1000000000L, delay_ns % 1000000000L};
        while (nanosleep(&pause, &pause) != 0) {
        }
    }
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_delay();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_delay();
    return real(fd);
}
