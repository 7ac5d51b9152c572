/* The built-in profiler's run-time control (companion.h's struct clrmux_profiler_ctl), for
 * the control channel's thread: its state, a flush of the current period now, and stopping
 * or starting the cpu/wall sampler. Exported from the companion as clrmux_profiler_ctl. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "profiler/companion.h"
#include "profiler/profiler_int.h"

#define EXPORT __attribute__((visibility("default")))

static void say(char *msg, size_t msglen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *msg, size_t msglen, const char *fmt, ...)
{
    if (!msg || !msglen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
}

/* work_lock within ms (the sampler holds it for a tick, a flush for its file). 0 when held. */
static int lock_within(struct profiler *p, long ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000)
        dl.tv_sec++, dl.tv_nsec -= 1000000000;
    return pthread_mutex_timedlock(&p->work_lock, &dl);
}

static int ctl_status(ICorProfilerCallback11 *cb, struct clrmux_profiler_status *out)
{
    struct profiler *p = impl(cb);
    memset(out, 0, sizeof *out);
    const int sample = (p->cfg.cpu || p->cfg.wall) && p->sampler_started;
    snprintf(out->sampler, sizeof out->sampler, "%s",
             !sample ? "none" : atomic_load(&p->mode) == PROF_SAMPLER_SIGNAL ? "signal" : p->info10 ? "suspend" : "none");
    out->sampling = sample && !atomic_load(&p->paused) && strcmp(out->sampler, "none") != 0;
    snprintf(out->output_dir, sizeof out->output_dir, "%s", p->cfg.output_dir);
    out->period_s = p->cfg.period_s;
    out->exceptions = atomic_load(&p->exceptions);
    out->allocations = atomic_load(&p->allocations);
    out->contentions = atomic_load(&p->contentions);
    if (lock_within(p, 500) != 0)
        return -1;
    out->final = p->final;
    out->files = p->files;
    out->file_failures = p->file_failures;
    snprintf(out->last_file, sizeof out->last_file, "%s", p->files ? p->last_path : "");
    if (p->same_second > 1 && p->files) { /* the -N name of a second file in one second */
        size_t l = strlen(out->last_file);
        if (l > 6 && l + 16 < sizeof out->last_file)
            snprintf(out->last_file + l - 6, sizeof out->last_file - (l - 6), "-%u.pb.gz", p->same_second);
    }
    out->period_age_s = p->period_start_mono ? (double)(mono_ns() - p->period_start_mono) / 1e9 : 0.0;
    pthread_mutex_unlock(&p->work_lock);
    return 0;
}

static int ctl_flush(ICorProfilerCallback11 *cb, char *msg, size_t msglen)
{
    struct profiler *p = impl(cb);
    if (!p->info) {
        say(msg, msglen, "the profiler '%s' is not running (its Initialize failed: see the log)", p->name);
        return -1;
    }
    if (lock_within(p, 5000) != 0) {
        say(msg, msglen, "the profiler '%s' is busy (its sampler did not let go within 5 s)", p->name);
        return -1;
    }
    int rc = -1;
    if (p->final || atomic_load(&p->shut_down)) {
        say(msg, msglen, "the profiler '%s' has shut down", p->name);
    } else if (!p->output_ok && !p->push) {
        say(msg, msglen, "the profiler '%s' has no output (output_dir %s could not be used: see the log)", p->name,
            p->cfg.output_dir);
    } else {
        uint64_t files = p->files, failures = p->file_failures;
        double secs = (double)(mono_ns() - p->period_start_mono) / 1e9;
        prof_flush(p, NULL);
        if (p->files > files) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s", p->last_path);
            if (p->same_second > 1) {
                size_t l = strlen(path);
                if (l > 6 && l + 16 < sizeof path)
                    snprintf(path + l - 6, sizeof path - (l - 6), "-%u.pb.gz", p->same_second);
            }
            say(msg, msglen, "wrote %s (%.1f s period)", path, secs);
            LOG_INFO("profiler '%s': control: period flushed to %s", p->name, path);
            rc = 0;
        } else if (p->file_failures > failures || p->output_ok) {
            say(msg, msglen, "the period (%.1f s) could not be written (see the log)", secs);
        } else {
            say(msg, msglen, "the period (%.1f s) was sent to %s", secs, p->cfg.endpoint);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&p->work_lock);
    return rc;
}

static int ctl_sampling(ICorProfilerCallback11 *cb, int on, char *msg, size_t msglen)
{
    struct profiler *p = impl(cb);
    if (!p->info || !p->sampler_started) {
        say(msg, msglen, "the profiler '%s' has no sampler thread (see the log)", p->name);
        return -1;
    }
    if (!(p->cfg.cpu || p->cfg.wall)) {
        say(msg, msglen, "the profiler '%s' takes no cpu/wall samples (cpu = false, wall = false)", p->name);
        return -1;
    }
    if (p->final || atomic_load(&p->shut_down) || atomic_load(&p->stop)) {
        say(msg, msglen, "the profiler '%s' has shut down", p->name);
        return -1;
    }
    const int want = !on;
    if (atomic_exchange(&p->want_paused, want) == want && atomic_load(&p->paused) == want) {
        say(msg, msglen, "the sampler was already %s", on ? "running" : "stopped");
        return 0;
    }
    /* the sampler thread does it at its next tick (sampling_interval_ms, or the pause budget's
     * stretch: at most 1 s) */
    const int64_t until = mono_ns() + 3000000000ll;
    while (atomic_load(&p->paused) != want && mono_ns() < until && !atomic_load(&p->stop)) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&p->paused) != want) {
        say(msg, msglen, "the sampler thread did not answer within 3 s; it %s the sampler at its next tick",
            on ? "starts" : "stops");
        return -1;
    }
    LOG_INFO("profiler '%s': control: the %s sampler %s", p->name,
             atomic_load(&p->mode) == PROF_SAMPLER_SIGNAL ? "signal" : "suspend", on ? "started again" : "stopped");
    say(msg, msglen, "the cpu/wall sampler %s (exceptions, allocations and lock contention are still recorded)",
        on ? "runs again" : "is stopped");
    return 0;
}

static const struct clrmux_profiler_ctl k_ctl = {CLRMUX_PROFILER_CTL_ABI, ctl_status, ctl_flush, ctl_sampling};

EXPORT const struct clrmux_profiler_ctl *clrmux_profiler_ctl(void) { return &k_ctl; }
