/* One in-process EventPipe session for all children, each child its own view (see
 * eventpipe.h): the views, the union applied to the runtime, and the per-event routing from
 * the event's metadata. Views change under a mutex; the delivery path reads an immutable
 * snapshot published with one atomic store (old snapshots are kept until the mux is freed). */
#include "loader/eventpipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/utf16.h"
#include "loader/mux.h"

#define EP_MAX_VIEWS 32
#define EP_MAX_PROV 16
#define EP_MAX_UNION 64
#define EP_NAME 128
#define EP_FILTER 256
#define EP_ID_BASE 0x434C524D00000000ull /* "CLRM": view ids are not the runtime's */
#define EP_CACHE 256

struct ep_prov {
    char name[EP_NAME];   /* UTF-8, compared without case as EventPipe does */
    WCHAR wname[EP_NAME]; /* UTF-16, for the runtime */
    UINT64 keywords;
    UINT32 level;
    int has_filter;
    WCHAR filter[EP_FILTER];
};

struct ep_view {
    int child; /* index in mux->children */
    EVENTPIPE_SESSION id;
    int rundown;
    int nprov;
    struct ep_prov prov[EP_MAX_PROV];
};

struct ep_snap {
    struct ep_snap *retired_next;
    int n;
    struct ep_view v[];
};

struct ep_cache_slot {
    _Atomic int state; /* 0 empty, 1 being written, 2 handle and name written */
    EVENTPIPE_PROVIDER handle;
    char name[EP_NAME];
};

struct clrmux_ep {
    pthread_mutex_t lock;
    struct ep_view views[EP_MAX_VIEWS];
    int nviews;
    uint64_t next_id;
    _Atomic(struct ep_snap *) snap;
    struct ep_snap *retired;
    /* the runtime's session and the union it was started / extended with */
    int running;
    EVENTPIPE_SESSION session;
    struct ep_prov applied[EP_MAX_UNION];
    int napplied;
    int rundown;
    _Atomic int switching; /* 1 while an old and a new runtime session both run */
    struct ep_cache_slot cache[EP_CACHE];
};

/* The mux's EventPipe state, created by the first session (published with one CAS: the
 * delivery path reads it without a lock). */
static struct clrmux_ep *ep_of(struct clrmux_mux *m)
{
    struct clrmux_ep *cur = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (cur)
        return cur;
    struct clrmux_ep *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    pthread_mutex_init(&e->lock, NULL);
    e->next_id = 1;
    if (atomic_compare_exchange_strong_explicit(&m->ep, &cur, e, memory_order_acq_rel, memory_order_acquire))
        return e;
    pthread_mutex_destroy(&e->lock);
    free(e);
    return cur;
}

static int prov_from_config(struct ep_prov *p, const COR_PRF_EVENTPIPE_PROVIDER_CONFIG *c)
{
    if (!c->providerName || !c->providerName[0])
        return -1;
    memset(p, 0, sizeof *p);
    size_t i = 0;
    for (; i + 1 < EP_NAME && c->providerName[i]; i++)
        p->wname[i] = c->providerName[i];
    p->wname[i] = 0;
    clrmux_utf16_to_utf8(p->wname, i, p->name, sizeof p->name);
    p->keywords = c->keywords;
    p->level = c->loggingLevel;
    if (c->filterData) {
        p->has_filter = 1;
        for (i = 0; i + 1 < EP_FILTER && c->filterData[i]; i++)
            p->filter[i] = c->filterData[i];
        p->filter[i] = 0;
    }
    return 0;
}

static COR_PRF_EVENTPIPE_PROVIDER_CONFIG config_of(const struct ep_prov *p)
{
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG c = {p->wname, p->keywords, p->level, p->has_filter ? p->filter : NULL};
    return c;
}

/* ---- the union and the runtime session (under e->lock) --------------------------------- */

static int find_prov(const struct ep_prov *list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(list[i].name, name) == 0)
            return i;
    return -1;
}

static int build_union(struct clrmux_ep *e, struct ep_prov *u, int *rundown)
{
    int n = 0;
    *rundown = 0;
    for (int v = 0; v < e->nviews; v++) {
        *rundown |= e->views[v].rundown;
        for (int p = 0; p < e->views[v].nprov; p++) {
            const struct ep_prov *vp = &e->views[v].prov[p];
            int k = find_prov(u, n, vp->name);
            if (k < 0) {
                if (n == EP_MAX_UNION)
                    continue;
                u[n++] = *vp;
            } else {
                u[k].keywords |= vp->keywords;
                if (vp->level > u[k].level)
                    u[k].level = vp->level;
                if (!u[k].has_filter && vp->has_filter) {
                    u[k].has_filter = 1;
                    memcpy(u[k].filter, vp->filter, sizeof u[k].filter);
                }
            }
        }
    }
    return n;
}

static void publish(struct clrmux_ep *e)
{
    struct ep_snap *s = malloc(sizeof *s + (size_t)e->nviews * sizeof(struct ep_view));
    if (!s) {
        LOG_ERROR("EventPipe: out of memory publishing the children's sessions; routing unchanged");
        return;
    }
    s->n = e->nviews;
    memcpy(s->v, e->views, (size_t)e->nviews * sizeof(struct ep_view));
    struct ep_snap *old = atomic_exchange_explicit(&e->snap, s, memory_order_acq_rel);
    if (old) {
        old->retired_next = e->retired;
        e->retired = old;
    }
}

static HRESULT start_runtime(struct clrmux_mux *m, const struct ep_prov *u, int n, int rundown, EVENTPIPE_SESSION *out)
{
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg[EP_MAX_UNION];
    for (int i = 0; i < n; i++)
        cfg[i] = config_of(&u[i]);
    return m->info->lpVtbl->EventPipeStartSession(m->info, (UINT32)n, cfg, rundown, out);
}

/* Brings the runtime's session to (at least) the union of the views. */
static HRESULT apply(struct clrmux_mux *m, struct clrmux_ep *e)
{
    struct ep_prov u[EP_MAX_UNION];
    int rundown;
    int n = build_union(e, u, &rundown);
    if (n == 0) {
        if (e->running) {
            HRESULT hr = m->info->lpVtbl->EventPipeStopSession(m->info, e->session);
            LOG_DEBUG("EventPipe: last child session stopped; runtime session stopped (HRESULT 0x%08X)", (unsigned)hr);
            e->running = 0;
            e->napplied = 0;
        }
        return S_OK;
    }
    if (!e->running) {
        EVENTPIPE_SESSION s = 0;
        HRESULT hr = start_runtime(m, u, n, rundown, &s);
        if (FAILED(hr))
            return hr;
        e->running = 1;
        e->session = s;
        memcpy(e->applied, u, (size_t)n * sizeof *u);
        e->napplied = n;
        e->rundown = rundown;
        LOG_DEBUG("EventPipe: runtime session started with %d provider(s)", n);
        return S_OK;
    }
    /* what the running session lacks: new providers can be added; more keywords, a more
     * verbose level or rundown need a new session */
    int need_new = rundown && !e->rundown;
    int add[EP_MAX_UNION], nadd = 0;
    for (int i = 0; i < n; i++) {
        int k = find_prov(e->applied, e->napplied, u[i].name);
        if (k < 0)
            add[nadd++] = i;
        else if ((u[i].keywords & ~e->applied[k].keywords) || u[i].level > e->applied[k].level)
            need_new = 1;
    }
    if (!need_new) {
        for (int j = 0; j < nadd; j++) {
            HRESULT hr = m->info->lpVtbl->EventPipeAddProviderToSession(m->info, e->session, config_of(&u[add[j]]));
            if (FAILED(hr))
                return hr;
            if (e->napplied < EP_MAX_UNION)
                e->applied[e->napplied++] = u[add[j]];
        }
        return S_OK;
    }
    /* keep what was applied (the union only grows while the session runs) */
    for (int i = 0; i < e->napplied; i++) {
        int k = find_prov(u, n, e->applied[i].name);
        if (k < 0 && n < EP_MAX_UNION)
            u[n++] = e->applied[i];
    }
    rundown |= e->rundown;
    EVENTPIPE_SESSION s = 0;
    HRESULT hr = start_runtime(m, u, n, rundown, &s);
    if (FAILED(hr))
        return hr;
    atomic_store(&e->switching, 1);
    m->info->lpVtbl->EventPipeStopSession(m->info, e->session);
    atomic_store(&e->switching, 0);
    e->session = s;
    memcpy(e->applied, u, (size_t)n * sizeof *u);
    e->napplied = n;
    e->rundown = rundown;
    LOG_DEBUG("EventPipe: runtime session replaced to widen keywords/levels (%d provider(s))", n);
    return S_OK;
}

/* ---- what children call through their proxies ------------------------------------------ */

HRESULT clrmux_ep_start(struct clrmux_mux *m, struct clrmux_child *c, UINT32 n,
                        const COR_PRF_EVENTPIPE_PROVIDER_CONFIG *cfg, BOOL rundown, EVENTPIPE_SESSION *out)
{
    if (m->info_version < 12)
        return E_NOTIMPL;
    if (!out || n == 0 || !cfg)
        return E_INVALIDARG;
    struct clrmux_ep *e = ep_of(m);
    if (!e)
        return E_OUTOFMEMORY;
    struct ep_view v;
    memset(&v, 0, sizeof v);
    v.child = c->index;
    v.rundown = rundown != 0;
    for (UINT32 i = 0; i < n; i++) {
        if (v.nprov == EP_MAX_PROV) {
            LOG_ERROR("child '%s': EventPipeStartSession with more than %d providers; refused", c->name, EP_MAX_PROV);
            return E_OUTOFMEMORY;
        }
        if (prov_from_config(&v.prov[v.nprov], &cfg[i]) != 0)
            return E_INVALIDARG;
        v.nprov++;
    }
    pthread_mutex_lock(&e->lock);
    HRESULT hr = S_OK;
    if (e->nviews == EP_MAX_VIEWS) {
        LOG_ERROR("child '%s': more than %d EventPipe sessions; refused", c->name, EP_MAX_VIEWS);
        hr = E_OUTOFMEMORY;
    } else {
        v.id = EP_ID_BASE | e->next_id++;
        e->views[e->nviews++] = v;
        publish(e); /* the view sees events from the moment the runtime sends them */
        /* during the mux's Initialize the runtime session starts once, at its end, with every
         * child's providers (clrmux_ep_commit): no replacement, no overlap */
        hr = atomic_load(&m->initializing) ? S_OK : apply(m, e);
        if (FAILED(hr)) {
            e->nviews--;
            publish(e);
            LOG_WARN("child '%s': the runtime refused its EventPipe session: HRESULT 0x%08X", c->name, (unsigned)hr);
        } else {
            *out = v.id;
            LOG_DEBUG("child '%s': EventPipe session 0x%llx with %d provider(s)", c->name, (unsigned long long)v.id,
                      v.nprov);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return hr;
}

static int view_index(struct clrmux_ep *e, struct clrmux_child *c, EVENTPIPE_SESSION s)
{
    for (int i = 0; i < e->nviews; i++)
        if (e->views[i].id == s && e->views[i].child == c->index)
            return i;
    return -1;
}

HRESULT clrmux_ep_add_provider(struct clrmux_mux *m, struct clrmux_child *c, EVENTPIPE_SESSION s,
                               COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg)
{
    struct clrmux_ep *e = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (!e)
        return E_INVALIDARG;
    struct ep_prov p;
    if (prov_from_config(&p, &cfg) != 0)
        return E_INVALIDARG;
    pthread_mutex_lock(&e->lock);
    HRESULT hr = S_OK;
    int i = view_index(e, c, s);
    if (i < 0) {
        hr = E_INVALIDARG;
    } else if (e->views[i].nprov == EP_MAX_PROV) {
        LOG_ERROR("child '%s': more than %d providers in an EventPipe session; '%s' refused", c->name, EP_MAX_PROV, p.name);
        hr = E_OUTOFMEMORY;
    } else {
        struct ep_view saved = e->views[i];
        e->views[i].prov[e->views[i].nprov++] = p;
        publish(e);
        hr = apply(m, e);
        if (FAILED(hr)) {
            e->views[i] = saved;
            publish(e);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return hr;
}

HRESULT clrmux_ep_stop(struct clrmux_mux *m, struct clrmux_child *c, EVENTPIPE_SESSION s)
{
    struct clrmux_ep *e = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (!e)
        return E_INVALIDARG;
    pthread_mutex_lock(&e->lock);
    HRESULT hr = S_OK;
    int i = view_index(e, c, s);
    if (i < 0) {
        hr = E_INVALIDARG;
    } else {
        e->views[i] = e->views[--e->nviews];
        publish(e);
        apply(m, e);
    }
    pthread_mutex_unlock(&e->lock);
    return hr;
}

void clrmux_ep_commit(struct clrmux_mux *m)
{
    struct clrmux_ep *e = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    HRESULT hr = apply(m, e);
    if (FAILED(hr)) {
        LOG_ERROR("EventPipe: the runtime refused the session of the children's %d session(s): HRESULT 0x%08X; "
                  "they receive no events", e->nviews, (unsigned)hr);
        e->nviews = 0;
        publish(e);
    }
    pthread_mutex_unlock(&e->lock);
}

void clrmux_ep_drop_child(struct clrmux_mux *m, struct clrmux_child *c)
{
    struct clrmux_ep *e = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    int before = e->nviews;
    for (int i = 0; i < e->nviews;)
        if (e->views[i].child == c->index)
            e->views[i] = e->views[--e->nviews];
        else
            i++;
    if (e->nviews != before) {
        publish(e);
        apply(m, e);
    }
    pthread_mutex_unlock(&e->lock);
}

/* ---- delivery ---------------------------------------------------------------------------- */

int clrmux_ep_parse_metadata(const BYTE *b, ULONG n, UINT64 *keywords, UINT32 *level)
{
    if (!b || n < 4)
        return -1;
    ULONG o = 4; /* event id */
    while (o + 1 < n && (b[o] | b[o + 1]))
        o += 2; /* the event name, UTF-16 */
    o += 2;
    if (o + 16 > n)
        return -1;
    UINT64 k;
    UINT32 l;
    memcpy(&k, b + o, 8);
    memcpy(&l, b + o + 12, 4); /* after keywords (8) and version (4) */
    *keywords = k;
    *level = l;
    return 0;
}

static const char *provider_name(struct clrmux_mux *m, struct clrmux_ep *e, EVENTPIPE_PROVIDER p, char *tmp, size_t n)
{
    size_t h = (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 56) & (EP_CACHE - 1);
    for (int probe = 0; probe < 8; probe++, h = (h + 1) & (EP_CACHE - 1)) {
        struct ep_cache_slot *s = &e->cache[h];
        int state = atomic_load_explicit(&s->state, memory_order_acquire);
        if (state == 2 && s->handle == p)
            return s->name;
        if (state != 0)
            continue; /* another provider's, or being written (any handle value may be a provider's) */
        WCHAR w[EP_NAME];
        ULONG len = 0;
        tmp[0] = 0;
        if (FAILED(m->info->lpVtbl->EventPipeGetProviderInfo(m->info, p, EP_NAME, &len, w)))
            return tmp;
        clrmux_utf16_to_utf8(w, len, tmp, n);
        int expected = 0;
        if (atomic_compare_exchange_strong(&s->state, &expected, 1)) {
            s->handle = p;
            memcpy(s->name, tmp, n < EP_NAME ? n : EP_NAME);
            s->name[EP_NAME - 1] = 0;
            atomic_store_explicit(&s->state, 2, memory_order_release);
        }
        return tmp;
    }
    WCHAR w[EP_NAME];
    ULONG len = 0;
    tmp[0] = 0;
    if (SUCCEEDED(m->info->lpVtbl->EventPipeGetProviderInfo(m->info, p, EP_NAME, &len, w)))
        clrmux_utf16_to_utf8(w, len, tmp, n);
    return tmp;
}

static _Thread_local struct {
    EVENTPIPE_PROVIDER provider;
    DWORD id;
    LPCBYTE data, meta;
    ULONG cb;
} last_event;

void clrmux_ep_deliver(struct clrmux_mux *m, EVENTPIPE_PROVIDER provider, DWORD eventId, DWORD eventVersion,
                       ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData,
                       LPCGUID pActivityId, LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames,
                       UINT_PTR *stackFrames)
{
    struct clrmux_ep *e = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (!e)
        return;
    const struct ep_snap *s = atomic_load_explicit(&e->snap, memory_order_acquire);
    if (!s || s->n == 0)
        return;
    /* while an old and a new runtime session overlap, each event arrives twice in a row on
     * its thread: the second is dropped */
    int dup = last_event.provider == provider && last_event.id == eventId && last_event.data == eventData &&
              last_event.cb == cbEventData && last_event.meta == metadataBlob;
    last_event.provider = provider, last_event.id = eventId, last_event.data = eventData;
    last_event.cb = cbEventData, last_event.meta = metadataBlob;
    if (dup && atomic_load(&e->switching))
        return;
    UINT64 kw = 0;
    UINT32 level = 0;
    clrmux_ep_parse_metadata(metadataBlob, cbMetadataBlob, &kw, &level);
    char tmp[EP_NAME];
    const char *name = provider_name(m, e, provider, tmp, sizeof tmp);
    /* EventPipe's own provider writes to every session whatever it enabled (ProcessInfo, when
     * the session ends): every view gets it */
    const int every = strcmp(name, "Microsoft-DotNETCore-EventPipe") == 0;
    if (every && atomic_load(&e->switching))
        return; /* the end of a runtime session clrmux replaced: no child's session ended */
    for (int v = 0; v < s->n; v++) {
        const struct ep_view *view = &s->v[v];
        struct clrmux_child *c = &m->children[view->child];
        /* the runtime delivers a session's events whatever the profiler's mask (measured on
         * .NET 10: COR_PRF_HIGH_MONITOR_EVENT_PIPE gates EventPipeProviderCreated only) */
        if (c->version < 10 || !atomic_load_explicit(&c->active, memory_order_acquire))
            continue;
        for (int p = 0; p < view->nprov; p++) {
            const struct ep_prov *vp = &view->prov[p];
            /* EventPipe's rule: an event with keywords needs one of them enabled; an event above
             * LogAlways needs a level at least as verbose */
            if (!every && ((name[0] && strcasecmp(vp->name, name) != 0) || (kw && !(kw & vp->keywords)) ||
                           (level && level > vp->level)))
                continue;
            c->cb->lpVtbl->EventPipeEventDelivered(c->cb, provider, eventId, eventVersion, cbMetadataBlob, metadataBlob,
                                                   cbEventData, eventData, pActivityId, pRelatedActivityId,
                                                   eventThread, numStackFrames, stackFrames);
            break; /* once per view */
        }
    }
}

void clrmux_ep_free(struct clrmux_mux *m)
{
    struct clrmux_ep *e = atomic_load_explicit(&m->ep, memory_order_acquire);
    if (!e)
        return;
    free(atomic_load(&e->snap));
    while (e->retired) {
        struct ep_snap *n = e->retired->retired_next;
        free(e->retired);
        e->retired = n;
    }
    pthread_mutex_destroy(&e->lock);
    free(e);
    atomic_store(&m->ep, NULL);
}
