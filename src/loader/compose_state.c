/* The composition state (compose_int.h), the floor under the other compose*.c files: the
 * state's creation and freeing, the per-method records' table (find, find or add), the
 * freeing of bodies and links, the children's and methods' names for log lines, and the
 * runtime ReJIT requests made on behalf of children (with the thread's request context, whom
 * a ReJITError raised during the request reaches). It calls no other compose*.c file. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clrmux/cor.h"
#include "common/log.h"
#include "common/utf16.h"
#include "loader/compose_int.h"
#include "loader/mux.h"

__thread uint64_t clrmux_compose_tls_requesters;
__thread int clrmux_compose_tls_in_request;

struct clrmux_compose *clrmux_compose_create(void)
{
    struct clrmux_compose *cs = calloc(1, sizeof *cs);
    if (cs) {
        pthread_mutex_init(&cs->lock, NULL);
        pthread_mutex_init(&cs->edge_lock, NULL);
        cs->next_fake = CLRMUX_FAKE_REJITID_BASE;
    }
    return cs;
}

void clrmux_compose_free_bodies(struct body *b)
{
    while (b) {
        struct body *n = b->next;
        free(b);
        b = n;
    }
}

void clrmux_compose_free_links(struct link *l)
{
    while (l) {
        struct link *n = l->next;
        free(l->out);
        free(l->map);
        free(l);
        l = n;
    }
}

void clrmux_compose_free(struct clrmux_compose *cs)
{
    if (!cs)
        return;
    for (int i = 0; i < NBUCKETS; i++) {
        struct rec *r = cs->buckets[i];
        while (r) {
            struct rec *n = r->next;
            clrmux_compose_free_bodies(r->bodies);
            clrmux_compose_free_links(r->links);
            free(r->base);
            clrmux_compose_free_bodies(r->old_bases);
            free(r->vers);
            free(r);
            r = n;
        }
        struct edge *e = cs->edges ? cs->edges[i] : NULL;
        while (e) {
            struct edge *n = e->next;
            free(e);
            e = n;
        }
    }
    free(cs->edges);
    pthread_mutex_destroy(&cs->lock);
    pthread_mutex_destroy(&cs->edge_lock);
    free(cs);
}

static size_t bucket_of(ModuleID module, mdMethodDef method)
{
    uint64_t h = (uint64_t)module * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)method * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 40) & (NBUCKETS - 1);
}

struct rec *clrmux_compose_find(struct clrmux_compose *cs, ModuleID module, mdMethodDef method)
{
    for (struct rec *r = cs->buckets[bucket_of(module, method)]; r; r = r->next)
        if (r->module == module && r->method == method)
            return r;
    return NULL;
}

struct rec *clrmux_compose_find_or_add(struct clrmux_compose *cs, ModuleID module, mdMethodDef method)
{
    struct rec *r = clrmux_compose_find(cs, module, method);
    if (r)
        return r;
    r = calloc(1, sizeof *r);
    if (!r) {
        LOG_ERROR("out of memory: method 0x%08x of module 0x%lx not composed", (unsigned)method, (unsigned long)module);
        return NULL;
    }
    r->module = module;
    r->method = method;
    size_t b = bucket_of(module, method);
    r->next = cs->buckets[b];
    cs->buckets[b] = r;
    atomic_fetch_add(&cs->nrecs, 1);
    return r;
}

/* Names of the children in `set`, in file order, "a, b" (for log lines). */
void clrmux_compose_names(struct clrmux_mux *m, uint64_t set, char *out, size_t outsz)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < m->nchildren && len + 1 < outsz; i++)
        if (set >> (i & 63) & 1) {
            int w = snprintf(out + len, outsz - len, "%s'%s'", len ? " -> " : "", m->children[i].name);
            if (w < 0)
                break;
            len += (size_t)w;
        }
}

/* "Namespace.Type::Method (0x06000001)" for log lines; the token alone when metadata fails. */
void clrmux_compose_method_name(struct clrmux_mux *m, ModuleID module, mdMethodDef method, char *out, size_t outsz)
{
    snprintf(out, outsz, "method 0x%08x", (unsigned)method);
    IUnknown *unk = NULL;
    if (!m->info || FAILED(m->info->lpVtbl->GetModuleMetaData(m->info, module, 0 /* ofRead */, &IID_IMetaDataImport,
                                                               &unk)) || !unk)
        return;
    IMetaDataImport *imp = (IMetaDataImport *)unk;
    WCHAR wm[256], wt[256];
    ULONG nm = 0, nt = 0;
    mdTypeDef td = 0;
    if (SUCCEEDED(imp->lpVtbl->GetMethodProps(imp, method, &td, wm, 256, &nm, NULL, NULL, NULL, NULL, NULL)) &&
        SUCCEEDED(imp->lpVtbl->GetTypeDefProps(imp, td, wt, 256, &nt, NULL, NULL))) {
        char sm[256], st[256];
        clrmux_utf16_to_utf8(wm, nm ? nm - 1 : 0, sm, sizeof sm);
        clrmux_utf16_to_utf8(wt, nt ? nt - 1 : 0, st, sizeof st);
        snprintf(out, outsz, "%s::%s (0x%08x)", st, sm, (unsigned)method);
    }
    imp->lpVtbl->Release(imp);
}

/* Asks the runtime for a ReJIT on behalf of `requesters` (whom a ReJITError it raises during
 * the call reaches; 0 for a rebuild nobody asked for). */
HRESULT clrmux_compose_runtime_rejit(struct clrmux_mux *m, uint64_t requesters, int with_inliners, DWORD flags, ULONG n,
                                     ModuleID *mods, mdMethodDef *methods)
{
    uint64_t saved = clrmux_compose_tls_requesters;
    int saved_in = clrmux_compose_tls_in_request;
    clrmux_compose_tls_requesters = requesters;
    clrmux_compose_tls_in_request = 1;
    HRESULT hr;
    if (with_inliners && m->info_version >= 10)
        hr = m->info->lpVtbl->RequestReJITWithInliners(m->info, flags, n, mods, methods);
    else
        hr = m->info->lpVtbl->RequestReJIT(m->info, n, mods, methods);
    clrmux_compose_tls_requesters = saved;
    clrmux_compose_tls_in_request = saved_in;
    return hr;
}

const _Atomic int *clrmux_compose_pending(struct clrmux_compose *cs) { return &cs->jit_work; }
