/* bench/nomembarrier.c: an LD_PRELOAD shim for bench/run.sh part 2 that makes membarrier(2)
 * fail with ENOSYS, as it does where a seccomp filter (some container runtimes, sandboxes) or
 * an old kernel leaves it out: clrmux then never publishes its counted way (loader/detach.h)
 * and a child that may detach is called the long way (a locked count and the route walk).
 * Every other syscall(2) goes through unchanged. Built by bench/run.sh; not part of clrmux. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

long syscall(long n, ...)
{
    va_list ap;
    long a[6];
    va_start(ap, n);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
#ifdef __NR_membarrier
    if (n == __NR_membarrier) {
        errno = ENOSYS;
        return -1;
    }
#endif
    static long (*real)(long, ...);
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
