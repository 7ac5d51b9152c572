/* The host's services inside the companion library: its logger (handed to
 * common/log_forward.c, so the profiler's lines land in clrmux's one log, same file, same
 * level) and its last gasp (the prof_lastgasp_* calls). In libclrmux_profiler.so
 * (CLRMUX_PROFILER_COMPANION) they go through the host's table; in a build linked with the
 * loader (the unit tests) straight to src/common/lastgasp.c. */
#ifdef CLRMUX_PROFILER_COMPANION

#include "common/log.h"
#include "profiler/prof.h"

static struct clrmux_profiler_host g_host;

void prof_hostlog_set(const struct clrmux_profiler_host *host)
{
    if (!host)
        return;
    g_host = *host;
    clrmux_log_forward_to(host->vlog, host->log_level); /* common/log_forward.c */
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
