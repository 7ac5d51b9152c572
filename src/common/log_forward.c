/* Logging inside a companion library (libclrmux_profiler.so, built -DCLRMUX_PROFILER_COMPANION;
 * see log.h): clrmux_log() forwards each line to the host library's logger, given with
 * clrmux_log_forward_to, so the companion's lines land in clrmux's one log (same file, same
 * level). Elsewhere log.c provides these functions and this file is empty. */
#ifdef CLRMUX_PROFILER_COMPANION
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"

static void (*g_vlog)(int level, const char *fmt, va_list ap);
static int (*g_get_level)(void);

void clrmux_log_forward_to(void (*vlog)(int level, const char *fmt, va_list ap), int (*get_level)(void))
{
    g_vlog = vlog;
    g_get_level = get_level;
}

int clrmux_log_get_level(void) { return g_get_level ? g_get_level() : CLRMUX_LOG_INFO; }

void clrmux_vlog(int level, const char *fmt, va_list ap)
{
    if (g_vlog) {
        g_vlog(level, fmt, ap);
        return;
    }
    if (level <= CLRMUX_LOG_INFO) {
        fprintf(stderr, "clrmux profiler %s ", clrmux_log_level_name(level));
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
}

const char *clrmux_log_level_name(int level)
{
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
    return (level >= 0 && level <= CLRMUX_LOG_TRACE) ? names[level] : "?";
}

void clrmux_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    clrmux_vlog(level, fmt, ap);
    va_end(ap);
}
#else
typedef int clrmux_log_forward_unused; /* ISO C: a translation unit is not empty */
#endif
