/* Logging inside the companion library: clrmux_log() forwards to the host's logger, so the
 * profiler's lines land in clrmux's one log (same file, same level); and the last gasp goes
 * through the host's too. Compiled only into
 * libclrmux_profiler.so (CLRMUX_PROFILER_COMPANION); elsewhere src/common/log.c provides
 * these functions. */
#ifdef CLRMUX_PROFILER_COMPANION
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"
#include "profiler/prof.h"

static struct clrmux_profiler_host g_host;

void prof_hostlog_set(const struct clrmux_profiler_host *host)
{
    if (host)
        g_host = *host;
}

int clrmux_log_get_level(void) { return g_host.log_level ? g_host.log_level() : CLRMUX_LOG_INFO; }

void clrmux_vlog(int level, const char *fmt, va_list ap)
{
    if (g_host.vlog) {
        g_host.vlog(level, fmt, ap);
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

int prof_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx)
{
    return g_host.lastgasp_register ? g_host.lastgasp_register(fn, ctx) : -1;
}

int prof_lastgasp_register_deferred(clrmux_lastgasp_fn fn, void *ctx)
{
    return g_host.lastgasp_register_deferred ? g_host.lastgasp_register_deferred(fn, ctx) : -1;
}

int prof_lastgasp_start(void) { return g_host.lastgasp_start ? g_host.lastgasp_start() : -1; }

void prof_lastgasp_unregister(clrmux_lastgasp_fn fn, void *ctx)
{
    if (g_host.lastgasp_unregister)
        g_host.lastgasp_unregister(fn, ctx);
}

#else
#include "common/lastgasp.h"
#include "profiler/prof.h"

int prof_lastgasp_register(clrmux_lastgasp_fn fn, void *ctx) { return clrmux_lastgasp_register(fn, ctx); }
int prof_lastgasp_register_deferred(clrmux_lastgasp_fn fn, void *ctx)
{
    return clrmux_lastgasp_register_deferred(fn, ctx);
}
int prof_lastgasp_start(void) { return clrmux_lastgasp_start(); }
void prof_lastgasp_unregister(clrmux_lastgasp_fn fn, void *ctx) { clrmux_lastgasp_unregister(fn, ctx); }
#endif
