/* The last gasp's registry (lastgasp_registry.h): the flush functions' table, registration,
 * and the flush loop, for both platforms' handlers (lastgasp.c, lastgasp_win.c). */
#include "common/lastgasp_registry.h"

#include <time.h>

#include "common/log.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* the table; held while flushing */
static struct {
    clrmux_lastgasp_fn fn;
    void *ctx;
} g_fns[CLRMUX_LASTGASP_MAX];
static int g_started;

int64_t clrmux_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int clrmux_lastgasp_started(void) { return g_started; }

static int count_locked(void)
{
    int n = 0;
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++)
        n += g_fns[i].fn != NULL;
    return n;
}

void clrmux_lastgasp_run(const char *cause, int final)
{
    int64_t t0 = clrmux_mono_ns(), deadline = t0 + (int64_t)CLRMUX_LASTGASP_BUDGET_MS * 1000000;
    pthread_mutex_lock(&g_lock);
    int n = count_locked();
    if (n && final)
        LOG_WARN("the process is ending (%s) without the runtime's Shutdown: writing what clrmux holds", cause);
    else if (n)
        LOG_WARN("the process is ending (%s) without the runtime's Shutdown: writing what clrmux holds (it "
                 "keeps working if the process goes on)", cause);
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++) {
        if (!g_fns[i].fn)
            continue;
        g_fns[i].fn(g_fns[i].ctx, cause, deadline, final);
        if (final)
            g_fns[i].fn = NULL; /* at most once */
    }
    if (n)
        LOG_INFO("last gasp (%s) done in %.1f ms", cause, (double)(clrmux_mono_ns() - t0) / 1e6);
    pthread_mutex_unlock(&g_lock);
}

int clrmux_lastgasp_register_deferred(clrmux_lastgasp_fn fn, void *ctx)
{
    return fn ? clrmux_lastgasp_add(fn, ctx, NULL) : -1;
}

int clrmux_lastgasp_registered(void)
{
    pthread_mutex_lock(&g_lock);
    int n = count_locked();
    pthread_mutex_unlock(&g_lock);
    return n;
}

int clrmux_lastgasp_add(clrmux_lastgasp_fn fn, void *ctx, int (*start)(void))
{
    pthread_mutex_lock(&g_lock);
    int rc = -1;
    if (!g_started && start && start() == 0)
        g_started = 1;
    if (!fn) { /* start only */
        rc = g_started ? 0 : -1;
        pthread_mutex_unlock(&g_lock);
        return rc;
    }
    for (int i = 0; (g_started || !start) && i < CLRMUX_LASTGASP_MAX; i++) {
        if (!g_fns[i].fn) {
            g_fns[i].fn = fn;
            g_fns[i].ctx = ctx;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void clrmux_lastgasp_unregister(clrmux_lastgasp_fn fn, void *ctx)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CLRMUX_LASTGASP_MAX; i++)
        if (g_fns[i].fn == fn && g_fns[i].ctx == ctx)
            g_fns[i].fn = NULL;
    pthread_mutex_unlock(&g_lock);
}
