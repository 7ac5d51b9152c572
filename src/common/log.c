/* Logging: one line per write(2) to stderr or a log file opened safely (see log.h). */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_level = CLRMUX_LOG_INFO;
static _Atomic int g_fd = 2;
static clrmux_log_sink g_sink;
static void *g_sink_ctx;

static const char *const k_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

int clrmux_log_level_parse(const char *s)
{
    for (int i = 0; i <= CLRMUX_LOG_TRACE; i++)
        if (s && strcasecmp(s, k_names[i]) == 0)
            return i;
    if (s && strcasecmp(s, "warning") == 0)
        return CLRMUX_LOG_WARN;
    return -1;
}

const char *clrmux_log_level_name(int level)
{
    return (level >= 0 && level <= CLRMUX_LOG_TRACE) ? k_names[level] : "?";
}

void clrmux_log_set_level(int level) { atomic_store(&g_level, level); }
int clrmux_log_get_level(void) { return atomic_load_explicit(&g_level, memory_order_relaxed); }

void clrmux_log_set_sink(clrmux_log_sink sink, void *ctx)
{
    g_sink_ctx = ctx;
    g_sink = sink;
}

int clrmux_expand_pid(const char *tmpl, char *out, unsigned long outsz)
{
    unsigned long n = 0;
    for (const char *p = tmpl; *p; p++) {
        char buf[24];
        const char *piece = buf;
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(buf, sizeof buf, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            buf[0] = '%', buf[1] = 0;
            p++;
        } else {
            buf[0] = *p, buf[1] = 0;
        }
        size_t len = strlen(piece);
        if (n + len + 1 > outsz)
            return -1;
        memcpy(out + n, piece, len);
        n += len;
    }
    if (outsz == 0)
        return -1;
    out[n] = 0;
    return 0;
}

int clrmux_log_open(const char *tmpl)
{
    if (!tmpl || !*tmpl) {
        atomic_store(&g_fd, 2);
        return 0;
    }
    char path[4096];
    if (clrmux_expand_pid(tmpl, path, sizeof path) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* never through a planted symlink, never blocking on a FIFO, only into a regular file
     * with one name (a hard link to another file is refused) or a character device
     * (/dev/null) */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0640);
    if (fd < 0)
        return -1;
    struct stat st;
    int bad = fstat(fd, &st) != 0                          ? errno
              : S_ISCHR(st.st_mode)                        ? 0
              : !S_ISREG(st.st_mode)                       ? EINVAL
              : st.st_nlink != 1                           ? EMLINK
                                                           : 0;
    if (bad) {
        int e = bad;
        close(fd);
        errno = e;
        return -1;
    }
    fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);
    int old = atomic_exchange(&g_fd, fd);
    if (old > 2)
        close(old);
    return 0;
}

void clrmux_vlog(int level, const char *fmt, va_list ap)
{
    if (level > clrmux_log_get_level())
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "clrmux[%ld] %04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     (long)getpid(), tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, clrmux_log_level_name(level));
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    line[len] = 0;
    if (g_sink)
        g_sink(level, line + n, g_sink_ctx);
    ssize_t w = write(atomic_load(&g_fd), line, len);
    (void)w;
}

void clrmux_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    clrmux_vlog(level, fmt, ap);
    va_end(ap);
}
