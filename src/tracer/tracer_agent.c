/* The tracer's side of its managed agent (tracer/agent.h): whether it may load (its file
 * beside libclrmux.so, trusted; .NET 8 or later), the callbacks and configuration the agent's
 * table carries, the Activity span queue. Called by tracer.c. */
#include "tracer/tracer_impl.h"

#include "common/trust.h"

static void *host_ctx;

static uint32_t host_exc_intern(const char *type, const char *msg) { return tracer_exc_intern(host_ctx, type, msg); }

static int32_t host_record(const uint8_t *rec, int32_t len)
{
    struct tracer *t = host_ctx;
    int rc = clrmux_xq_push(rec, (size_t)len);
    if (rc == -1 && !atomic_exchange(&t->xmalformed_logged, 1))
        LOG_ERROR("tracer: the agent handed a malformed Activity span record (%d bytes; logged once)", (int)len);
    return rc;
}

static const char *host_integ_spec(int32_t id, int32_t *len)
{
    struct tracer *t = host_ctx;
    if (!t || id < 0 || id >= t->ninteg)
        return NULL;
    *len = (int32_t)t->integs[id].spec_len;
    return t->integs[id].spec;
}

int tracer_agent_setup(struct tracer *t, void (*registered)(void))
{
    if (!t->agent)
        return -1;
    USHORT major = 0;
    COR_PRF_RUNTIME_TYPE rt = 0;
    if (FAILED(ICorProfilerInfo5_GetRuntimeInformation(t->info, NULL, &rt, &major, NULL, NULL, NULL, 0, NULL, NULL)) ||
        rt != COR_PRF_CORE_CLR || major < 8) {
        LOG_INFO("tracer: no managed agent (it needs .NET 8 or later): no async spans, no Activity recording; root "
                 "spans join Activity.Current");
        return -1;
    }
    char path[PATH_MAX], real[PATH_MAX], why[PATH_MAX + 128];
    if (clrmux_module_path_of((const void *)&tracer_agent_setup, path, sizeof path) != 0) {
        LOG_WARN("tracer: cannot find libclrmux.so's own path; no managed agent");
        return -1;
    }
    char *slash = clrmux_last_separator(path);
    size_t dir = slash ? (size_t)(slash - path) : 0;
    if (dir + 2 + sizeof CLRMUX_AGENT_DLL > sizeof path)
        return -1;
    snprintf(path + dir, sizeof path - dir, "/%s", CLRMUX_AGENT_DLL);
    if (clrmux_path_trusted(path, real, sizeof real, why, sizeof why) != 0) {
        LOG_WARN("tracer: managed agent %s not loaded: %s; no async spans, no Activity recording", path, why);
        return -1;
    }
    if (clrmux_xq_init((size_t)t->buffer_spans * 32) != 0) {
        LOG_ERROR("tracer: no memory for the Activity span queue; no managed agent");
        return -1;
    }
    snprintf(t->agent_path, sizeof t->agent_path, "%s", real);
    host_ctx = t;
    struct clrmux_agent_host h = {
        .instrument = t->instrument,
        .activity_sources = t->activity_sources,
        .sample_ratio = t->sample_ratio,
        .flags = ((t->instrument[0] || t->activity_sources[0]) ? CLRMUX_AGENT_F_ACTIVITIES : 0) |
                 (t->sanitize_queries ? 0 : CLRMUX_AGENT_F_RAW_QUERIES),
        .exc_intern = host_exc_intern,
        .record = host_record,
        .registered = registered,
        .integ_spec = host_integ_spec,
    };
    clrmux_agent_host_set(&h);
    return 0;
}
