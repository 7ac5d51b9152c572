/* The native side of the managed agent (see agent.h): the table clrmux_agent_api hands it,
 * the entry points it registers, its log lines. */
#include "tracer/agent.h"
#include "tracer/integ.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"
#include "common/utf16.h"

static struct clrmux_agent_host host;
static _Atomic int host_ready;
static struct clrmux_agent_managed managed;
static _Atomic(const struct clrmux_agent_managed *) managed_ptr;

static int32_t api_register(const struct clrmux_agent_managed *m)
{
    if (!m || m->size < sizeof *m || !m->async_enter || !m->async_restore || !m->on_task || !m->on_value_task ||
        !m->join_root || !m->integ_enter || !m->integ_exit) {
        LOG_ERROR("tracer: the agent registered an incomplete table of entry points (size %u); async spans are off",
                  m ? (unsigned)m->size : 0u);
        return -1;
    }
    if (atomic_load(&managed_ptr))
        return 0; /* once */
    memcpy(&managed, m, sizeof managed);
    managed.size = sizeof managed;
    atomic_store_explicit(&managed_ptr, &managed, memory_order_release);
    if (host.registered)
        host.registered();
    return 0;
}

static int32_t api_peek(int64_t slot, struct clrmux_span_ctx *out) { return clrmux_span_peek(slot, out); }
static int32_t api_detach(int64_t slot, struct clrmux_async_span *out) { return clrmux_span_detach(slot, out); }
static void api_finish(const struct clrmux_async_span *s, uint32_t exc, int32_t error)
{
    if (s)
        clrmux_span_finish(s, exc, error != 0);
}
static int32_t api_current(struct clrmux_span_ctx *out) { return out ? clrmux_span_ctx_current(out) : 0; }

static uint32_t api_exc_intern(const uint16_t *type, int32_t tlen, const uint16_t *msg, int32_t mlen)
{
    char t8[256], m8[512];
    if (!type || tlen <= 0 || !host.exc_intern)
        return 0;
    clrmux_utf16_to_utf8((const WCHAR *)type, (size_t)tlen, t8, sizeof t8);
    if (msg && mlen > 0)
        clrmux_utf16_to_utf8((const WCHAR *)msg, (size_t)mlen, m8, sizeof m8);
    return host.exc_intern(t8, msg && mlen > 0 ? m8 : NULL);
}

static int32_t api_attach(uint64_t span_id, const uint8_t *blob, int32_t len)
{
    return blob && len > 0 ? clrmux_integ_attach(span_id, blob, (size_t)len) : -1;
}

static const char *api_integ_spec(int32_t id, int32_t *len)
{
    return host.integ_spec && len ? host.integ_spec(id, len) : NULL;
}

static int32_t api_record(const uint8_t *rec, int32_t len)
{
    return host.record && rec && len > 0 ? host.record(rec, len) : -1;
}

static void api_log(int32_t level, const uint16_t *msg, int32_t len)
{
    char m8[1024];
    if (!msg || len <= 0 || level < CLRMUX_LOG_ERROR || level > CLRMUX_LOG_TRACE || level > clrmux_log_get_level())
        return;
    clrmux_utf16_to_utf8((const WCHAR *)msg, (size_t)len, m8, sizeof m8);
    clrmux_log(level, "tracer: agent: %s", m8);
}

static struct clrmux_agent_api api = {
    .abi = CLRMUX_AGENT_ABI,
    .size = sizeof(struct clrmux_agent_api),
    .register_managed = api_register,
    .span_peek = api_peek,
    .span_detach = api_detach,
    .span_finish = api_finish,
    .ctx_set = clrmux_span_ctx_set,
    .ctx_current = api_current,
    .join = clrmux_span_join_ctx,
    .ctx_top = clrmux_span_ctx_top,
    .exc_intern = api_exc_intern,
    .record = api_record,
    .log = api_log,
    .span_async_enter = clrmux_span_async_enter,
    .span_failed = clrmux_span_failed,
    .span_attach = api_attach,
    .integ_spec = api_integ_spec,
};

void clrmux_agent_host_set(const struct clrmux_agent_host *h)
{
    host = *h;
    api.failed_any = clrmux_span_failed_any();
    api.instrument = host.instrument ? host.instrument : "";
    api.activity_sources = host.activity_sources ? host.activity_sources : "";
    api.sample_ratio = host.sample_ratio;
    api.flags = host.flags;
    atomic_store_explicit(&host_ready, 1, memory_order_release);
}

__attribute__((visibility("default"))) const struct clrmux_agent_api *clrmux_agent_api(int32_t abi)
{
    if (abi != CLRMUX_AGENT_ABI || !atomic_load_explicit(&host_ready, memory_order_acquire)) {
        LOG_WARN("tracer: the agent asked for ABI %d (this libclrmux.so has %d%s); it stays off", (int)abi,
                 CLRMUX_AGENT_ABI, atomic_load(&host_ready) ? "" : ", and no tracer set it up");
        return NULL;
    }
    if (clrmux_spans_labels_wanted()) /* the profiler is loaded by now (children are made first) */
        api.flags |= CLRMUX_AGENT_F_PUSH;
    return &api;
}

const struct clrmux_agent_managed *clrmux_agent_managed_get(void)
{
    return atomic_load_explicit(&managed_ptr, memory_order_acquire);
}

int clrmux_agent_pushes(void)
{
    return (api.flags & CLRMUX_AGENT_F_PUSH) != 0;
}
