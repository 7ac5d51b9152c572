/* Logging: one line per write(2) to stderr or a log file opened safely (see log.h). */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/platform.h"

static _Atomic int g_level = CLRMUX_LOG_INFO;
static _Atomic int g_fd = 2;
static pthread_mutex_t g_path_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_path[4096]; /* the file g_fd writes to, when it is one */
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
    int fd = clrmux_open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0640);
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
    clrmux_fd_clear_nonblock(fd);
    pthread_mutex_lock(&g_path_lock);
    snprintf(g_path, sizeof g_path, "%s", path);
    pthread_mutex_unlock(&g_path_lock);
    int old = atomic_exchange(&g_fd, fd);
    if (old > 2)
        close(old);
    return 0;
}

void clrmux_log_path(char *out, size_t outsz)
{
    if (!outsz)
        return;
    pthread_mutex_lock(&g_path_lock);
    snprintf(out, outsz, "%s", atomic_load(&g_fd) > 2 ? g_path : "");
    pthread_mutex_unlock(&g_path_lock);
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

/* ---- async-signal-safe line: integers and the civil date by hand --------------------- */

static size_t put_uint(char *p, unsigned long long v, int width)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n < width)
        tmp[n++] = '0';
    for (int i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return (size_t)n;
}

void clrmux_log_signal_safe(int level, const char *msg)
{
    char line[512];
    size_t n = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* days since 1970-01-01 -> year, month, day (H. Hinnant's civil_from_days) */
    long long z = ts.tv_sec / 86400 + 719468, sod = ts.tv_sec % 86400;
    long long era = z / 146097, doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);
    memcpy(line, "clrmux[", 7), n = 7;
    n += put_uint(line + n, (unsigned long long)getpid(), 1);
    line[n++] = ']', line[n++] = ' ';
    n += put_uint(line + n, (unsigned long long)y, 4), line[n++] = '-';
    n += put_uint(line + n, (unsigned long long)m, 2), line[n++] = '-';
    n += put_uint(line + n, (unsigned long long)d, 2), line[n++] = 'T';
    n += put_uint(line + n, (unsigned long long)(sod / 3600), 2), line[n++] = ':';
    n += put_uint(line + n, (unsigned long long)(sod / 60 % 60), 2), line[n++] = ':';
    n += put_uint(line + n, (unsigned long long)(sod % 60), 2), line[n++] = '.';
    n += put_uint(line + n, (unsigned long long)(ts.tv_nsec / 1000000), 3);
    line[n++] = 'Z', line[n++] = ' ';
    const char *lv = clrmux_log_level_name(level);
    size_t l = strlen(lv);
    memcpy(line + n, lv, l), n += l;
    while (l++ < 6)
        line[n++] = ' ';
    size_t ml = strlen(msg);
    if (ml > sizeof line - n - 1)
        ml = sizeof line - n - 1;
    memcpy(line + n, msg, ml), n += ml;
    line[n++] = '\n';
    ssize_t w = write(atomic_load(&g_fd), line, n);
    (void)w;
}
