/* The profiler's section keys and its output file names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "profiler/prof.h"

static int parse_bool(const char *s)
{
    static const char *const t[] = {"true", "yes", "on", "1"}, *const f[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, t[i]) == 0)
            return 1;
        if (strcasecmp(s, f[i]) == 0)
            return 0;
    }
    return -1;
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int prof_config_parse(struct prof_config *pc, const struct clrmux_child_conf *cc, const char *config_dir)
{
    const char *out = "profiles";
    pc->period_s = 60;
    pc->interval_ms = 10;
    pc->pause_budget_pct = 1;
    pc->eventpipe_delay_ms = 1000;
    pc->sampler = PROF_SAMPLER_SIGNAL;
    pc->cpu = pc->wall = pc->exceptions = pc->allocations = pc->contention = 1;
    static const struct { const char *key; size_t off; } bools[] = {
        {"cpu", offsetof(struct prof_config, cpu)},
        {"wall", offsetof(struct prof_config, wall)},
        {"exceptions", offsetof(struct prof_config, exceptions)},
        {"allocations", offsetof(struct prof_config, allocations)},
        {"contention", offsetof(struct prof_config, contention)},
    };
    size_t unknown = 0; /* unknown keys: the first 10 are logged, then a count */
    for (size_t i = 0; i < cc->nkvs; i++) {
        const struct clrmux_kv *kv = &cc->kvs[i];
        int handled = 0;
        if (strcmp(kv->key, "output_dir") == 0) {
            handled = 1;
            if (kv->value[0])
                out = kv->value;
            else
                LOG_ERROR("child '%s' line %d: output_dir is empty; using '%s'", cc->name, kv->line, out);
        } else if (strcmp(kv->key, "endpoint") == 0) {
            handled = 1;
            if (strncasecmp(kv->value, "http://", 7) != 0 && strncasecmp(kv->value, "https://", 8) != 0)
                LOG_ERROR("child '%s' line %d: endpoint '%s' is not an http:// or https:// URL; ignored", cc->name,
                          kv->line, kv->value);
            else
                snprintf(pc->endpoint, sizeof pc->endpoint, "%s", kv->value);
        } else if (strcmp(kv->key, "app_name") == 0) {
            handled = 1;
            snprintf(pc->app_name, sizeof pc->app_name, "%s", kv->value);
        } else if (strcmp(kv->key, "headers") == 0) {
            handled = 1;
            snprintf(pc->headers, sizeof pc->headers, "%s", kv->value);
        } else if (strcmp(kv->key, "period_s") == 0) {
            handled = 1;
            if (parse_int(kv->value, 1, 86400, &pc->period_s) != 0)
                LOG_ERROR("child '%s' line %d: period_s '%s' is not a number of seconds in 1..86400; using %d",
                          cc->name, kv->line, kv->value, pc->period_s);
        } else if (strcmp(kv->key, "sampling_interval_ms") == 0) {
            handled = 1;
            if (parse_int(kv->value, 1, 10000, &pc->interval_ms) != 0)
                LOG_ERROR("child '%s' line %d: sampling_interval_ms '%s' is not a number of milliseconds in 1..10000; "
                          "using %d", cc->name, kv->line, kv->value, pc->interval_ms);
        } else if (strcmp(kv->key, "eventpipe_delay_ms") == 0) {
            handled = 1;
            if (parse_int(kv->value, 0, 3600000, &pc->eventpipe_delay_ms) != 0)
                LOG_ERROR("child '%s' line %d: eventpipe_delay_ms '%s' is not a number of milliseconds in 0..3600000; "
                          "using %d", cc->name, kv->line, kv->value, pc->eventpipe_delay_ms);
        } else if (strcmp(kv->key, "pause_budget_percent") == 0) {
            handled = 1;
            if (parse_int(kv->value, 0, 100, &pc->pause_budget_pct) != 0)
                LOG_ERROR("child '%s' line %d: pause_budget_percent '%s' is not a number in 0..100; using %d",
                          cc->name, kv->line, kv->value, pc->pause_budget_pct);
        } else if (strcmp(kv->key, "sampler") == 0) {
            handled = 1;
            if (strcasecmp(kv->value, "signal") == 0)
                pc->sampler = PROF_SAMPLER_SIGNAL;
            else if (strcasecmp(kv->value, "suspend") == 0)
                pc->sampler = PROF_SAMPLER_SUSPEND;
            else
                LOG_ERROR("child '%s' line %d: sampler '%s' is not signal or suspend; using %s", cc->name, kv->line,
                          kv->value, pc->sampler == PROF_SAMPLER_SIGNAL ? "signal" : "suspend");
        } else {
            for (size_t b = 0; b < sizeof bools / sizeof bools[0]; b++) {
                if (strcmp(kv->key, bools[b].key) != 0)
                    continue;
                handled = 1;
                int *field = (int *)((char *)pc + bools[b].off);
                int v = parse_bool(kv->value);
                if (v < 0)
                    LOG_ERROR("child '%s' line %d: %s '%s' is not a boolean (true/false); using %s", cc->name,
                              kv->line, kv->key, kv->value, *field ? "true" : "false");
                else
                    *field = v;
            }
        }
        if (!handled && ++unknown <= 10)
            LOG_WARN("child '%s' line %d: unknown key '%s' for the profiler; ignored", cc->name, kv->line, kv->key);
    }
    if (unknown > 10)
        LOG_WARN("child '%s': %zu more unknown keys for the profiler ignored", cc->name, unknown - 10);
    int n;
    if (out[0] == '/' || !config_dir || !config_dir[0])
        n = snprintf(pc->output_dir, sizeof pc->output_dir, "%s", out);
    else
        n = snprintf(pc->output_dir, sizeof pc->output_dir, "%s/%s", config_dir, out);
    if (n < 0 || (size_t)n >= sizeof pc->output_dir) {
        LOG_ERROR("child '%s': output_dir path too long; using 'profiles' in the current folder", cc->name);
        snprintf(pc->output_dir, sizeof pc->output_dir, "profiles");
    }
    return 0;
}

/* The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's days_to_civil).
 * Not gmtime_r: glibc's first call reads and parses /etc/localtime (tzset) even for UTC, on
 * the thread that writes the profile at exit. */
static void civil_from_days(int64_t z, int *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

int prof_output_path(char *out, size_t outsz, const char *dir, const char *process, long pid,
                     int64_t start_unix_ns)
{
    char proc[128];
    size_t i = 0;
    for (; process && process[i] && i < sizeof proc - 1; i++) {
        char c = process[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        proc[i] = ok ? c : '_';
    }
    proc[i] = 0;
    if (!proc[0])
        snprintf(proc, sizeof proc, "process");
    int64_t secs = start_unix_ns / 1000000000;
    if (secs < 0)
        secs = 0;
    int y, mo, d;
    civil_from_days(secs / 86400, &y, &mo, &d);
    int64_t sod = secs % 86400;
    int n = snprintf(out, outsz, "%s/%s-%ld-%04d%02d%02dT%02d%02d%02dZ.pb.gz", dir, proc, pid, y, mo, d,
                     (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60));
    return (n < 0 || (size_t)n >= outsz) ? -1 : 0;
}
