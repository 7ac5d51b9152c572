/* Enter/leave/tailcall hooks for every child (see elt.h): the children's hooks and mappers as
 * recorded through their proxies, clrmux's FunctionIDMapper2 with its per-function records,
 * and the install (the dispatchers that the runtime's hooks reach are in elt_dispatch.c). */
#include "loader/elt_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/log.h"
#include "loader/mux.h"

/* The mux's ELT state, created by the first child that sets hooks or a mapper (one CAS). */
static struct clrmux_elt *elt_of(struct clrmux_mux *m)
{
    struct clrmux_elt *cur = atomic_load_explicit(&m->elt, memory_order_acquire);
    if (cur)
        return cur;
    struct clrmux_elt *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->mux = m;
    pthread_mutex_init(&e->lock, NULL);
    if (atomic_compare_exchange_strong_explicit(&m->elt, &cur, e, memory_order_acq_rel, memory_order_acquire))
        return e;
    pthread_mutex_destroy(&e->lock);
    free(e);
    return cur;
}

/* ---- what children set through their proxies ------------------------------------------ */

HRESULT clrmux_elt_set_hooks(struct clrmux_mux *m, struct clrmux_child *c, enum clrmux_elt_gen gen, void *enter,
                             void *leave, void *tailcall)
{
    static const char *const names[] = {"", "SetEnterLeaveFunctionHooks", "SetEnterLeaveFunctionHooks2",
                                        "SetEnterLeaveFunctionHooks3", "SetEnterLeaveFunctionHooks3WithInfo"};
    if (!enter && !leave && !tailcall)
        return E_INVALIDARG;
    if (m->attaching) {
        LOG_WARN("child '%s': %s after attach; refused as the runtime refuses it", c->name, names[gen]);
        return CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER;
    }
    if (!atomic_load(&m->initializing)) {
        LOG_WARN("child '%s': %s outside Initialize; refused as the runtime refuses it", c->name, names[gen]);
        return CORPROF_E_CALL_ONLY_FROM_INIT;
    }
    DWORD low = atomic_load(&c->mask_low);
    if (gen == CLRMUX_ELT_GEN3 && (low & SLOW_FLAGS))
        return CORPROF_E_INCONSISTENT_WITH_FLAGS;
    if (gen == CLRMUX_ELT_GEN3_INFO && !(low & SLOW_FLAGS))
        return CORPROF_E_INCONSISTENT_WITH_FLAGS;
    struct clrmux_elt *e = elt_of(m);
    if (!e)
        return E_OUTOFMEMORY;
    struct elt_child *h = &e->per[c->index];
    /* ELT3 beats ELT2 beats ELT1: an older generation after a newer one is a no-op */
    if ((gen == CLRMUX_ELT_GEN1 && h->gen >= CLRMUX_ELT_GEN2) || (gen == CLRMUX_ELT_GEN2 && h->gen >= CLRMUX_ELT_GEN3))
        return S_OK;
    pthread_mutex_lock(&e->lock);
    h->gen = gen;
    h->enter = enter;
    h->leave = leave;
    h->tailcall = tailcall;
    pthread_mutex_unlock(&e->lock);
    LOG_DEBUG("child '%s': %s recorded", c->name, names[gen]);
    return S_OK;
}

HRESULT clrmux_elt_set_mapper(struct clrmux_mux *m, struct clrmux_child *c, int mapper2, void *fn, void *data)
{
    struct clrmux_elt *e = elt_of(m);
    if (!e)
        return E_OUTOFMEMORY;
    pthread_mutex_lock(&e->lock);
    e->per[c->index].mapper2 = mapper2;
    e->per[c->index].mapper = fn;
    e->per[c->index].mapper_data = data;
    pthread_mutex_unlock(&e->lock);
    return S_OK;
}

/* ---- clrmux's FunctionIDMapper2 -------------------------------------------------------- */

static void *arena_alloc(struct clrmux_elt *e, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > ARENA_CHUNK)
        return NULL;
    if (!e->arena || e->arena->used + n > ARENA_CHUNK) {
        struct arena_chunk *ch = malloc(sizeof *ch + ARENA_CHUNK);
        if (!ch)
            return NULL;
        ch->next = e->arena;
        ch->used = 0;
        e->arena = ch;
    }
    void *p = e->arena->data + e->arena->used;
    e->arena->used += n;
    return p;
}

/* Called by the runtime when it JIT-compiles a function (again for each new native code
 * version): calls each hooking child's mapper as the runtime would call it alone. */
static UINT_PTR STDMETHODCALLTYPE elt_mapper(FunctionID fid, void *clientData, BOOL *pbHookFunction)
{
    struct clrmux_elt *e = clientData;
    int n = e->nslots;
    struct elt_child maps[CLRMUX_MAX_CHILDREN];
    pthread_mutex_lock(&e->lock);
    for (int s = 0; s < n; s++)
        maps[s] = e->per[e->slots[s].child->index];
    pthread_mutex_unlock(&e->lock);

    uint64_t hooked = 0;
    UINT_PTR client[CLRMUX_MAX_CHILDREN];
    for (int s = 0; s < n; s++) {
        BOOL hook = TRUE;
        client[s] = fid;
        if (maps[s].mapper && maps[s].mapper2)
            client[s] = ((FunctionIDMapper2 *)maps[s].mapper)(fid, maps[s].mapper_data, &hook);
        else if (maps[s].mapper)
            client[s] = ((FunctionIDMapper *)maps[s].mapper)(fid, &hook);
        if (hook)
            hooked |= 1ull << s;
    }
    if (pbHookFunction)
        *pbHookFunction = hooked != 0;
    if (!hooked)
        return fid;
    pthread_mutex_lock(&e->lock);
    struct elt_fn *f = arena_alloc(e, sizeof *f + (size_t)n * sizeof(UINT_PTR));
    pthread_mutex_unlock(&e->lock);
    if (!f) {
        LOG_ERROR("enter/leave hooks: out of memory mapping function 0x%lx; it is not hooked", (unsigned long)fid);
        if (pbHookFunction)
            *pbHookFunction = FALSE;
        return fid;
    }
    f->fid = fid;
    f->hooked = hooked;
    memcpy(f->client, client, (size_t)n * sizeof(UINT_PTR));
    f->magic = ELT_MAGIC;
    return (UINT_PTR)f;
}

/* ---- install --------------------------------------------------------------------------- */

/* One hooking child: its own mapper and hooks go to the runtime as they are, and it pays
 * exactly what it pays alone. 1 when the runtime took them (else the multiplexed path is used;
 * a mapper already set is replaced by clrmux's then). */
static int install_direct(struct clrmux_mux *m, struct clrmux_elt *e, const char *names)
{
    ICorProfilerInfo15 *rt = m->info;
    const struct elt_slot *sl = &e->slots[0];
    struct elt_child h;
    pthread_mutex_lock(&e->lock);
    h = e->per[sl->child->index];
    pthread_mutex_unlock(&e->lock);
    HRESULT hr = S_OK;
    if (h.mapper && h.mapper2)
        hr = rt->lpVtbl->SetFunctionIDMapper2(rt, (FunctionIDMapper2 *)h.mapper, h.mapper_data);
    else if (h.mapper)
        hr = rt->lpVtbl->SetFunctionIDMapper(rt, (FunctionIDMapper *)h.mapper);
    if (FAILED(hr))
        return 0;
    switch (sl->gen) {
    case CLRMUX_ELT_GEN1:
        hr = rt->lpVtbl->SetEnterLeaveFunctionHooks(rt, sl->enter, sl->leave, sl->tailcall);
        break;
    case CLRMUX_ELT_GEN2:
        hr = rt->lpVtbl->SetEnterLeaveFunctionHooks2(rt, sl->enter, sl->leave, sl->tailcall);
        break;
    case CLRMUX_ELT_GEN3:
        hr = rt->lpVtbl->SetEnterLeaveFunctionHooks3(rt, sl->enter, sl->leave, sl->tailcall);
        break;
    case CLRMUX_ELT_GEN3_INFO:
        hr = rt->lpVtbl->SetEnterLeaveFunctionHooks3WithInfo(rt, sl->enter, sl->leave, sl->tailcall);
        break;
    default:
        hr = E_INVALIDARG;
    }
    if (FAILED(hr)) {
        LOG_DEBUG("enter/leave hooks: the runtime refused child '%s''s own hooks (HRESULT %s); multiplexing them",
                  sl->child->name, HR_STR(hr));
        return 0;
    }
    e->installed = 3;
    LOG_INFO("enter/leave hooks for 1 child, its own hooks on the runtime: %s", names);
    return 1;
}

void clrmux_elt_install(struct clrmux_mux *m)
{
    struct clrmux_elt *e = atomic_load_explicit(&m->elt, memory_order_acquire);
    if (!e || e->installed)
        return;
    DWORD union_low = 0;
    int any_enter = 0, any_leave = 0, any_tail = 0;
    char names[512] = "";
    size_t used = 0;
    for (int i = 0; i < m->nchildren; i++) {
        struct clrmux_child *c = &m->children[i];
        const struct elt_child *h = &e->per[c->index];
        if (!atomic_load(&c->active) || h->gen == CLRMUX_ELT_NONE)
            continue;
        struct elt_slot *sl = &e->slots[e->nslots++];
        sl->child = c;
        sl->gen = h->gen;
        sl->enter = h->enter;
        sl->leave = h->leave;
        sl->tailcall = h->tailcall;
        any_enter |= h->enter != NULL, any_leave |= h->leave != NULL, any_tail |= h->tailcall != NULL;
        union_low |= atomic_load(&c->mask_low);
        static const char *const g[] = {"", "ELT1", "ELT2", "ELT3", "ELT3WithInfo"};
        int w = snprintf(names + used, sizeof names - used, "%s%s (%s%s)", used ? ", " : "", c->name, g[h->gen],
                         h->mapper ? ", FunctionIDMapper" : "");
        if (w > 0 && (size_t)w < sizeof names - used)
            used += (size_t)w;
    }
    if (e->nslots == 0)
        return; /* no child hooks: nothing is installed, nothing is paid */
    if (e->nslots == 1 && install_direct(m, e, names))
        return;
    clrmux_elt_g = e;
    ICorProfilerInfo15 *rt = m->info;
    const int slow = (union_low & SLOW_FLAGS) != 0;
    HRESULT hr;
    if (m->info_version < 3) {
        LOG_ERROR("enter/leave hooks: the runtime answers ICorProfilerInfo%d only (3 needed); hooks not installed",
                  m->info_version);
        return;
    }
    hr = rt->lpVtbl->SetFunctionIDMapper2(rt, elt_mapper, e);
    if (FAILED(hr)) {
        LOG_ERROR("enter/leave hooks: the runtime refused SetFunctionIDMapper2: HRESULT %s; hooks not installed",
                  HR_STR(hr));
        return;
    }
    /* a kind of hook no child set is not installed (the JIT then calls nothing for it) */
    if (slow) {
        hr = rt->lpVtbl->SetEnterLeaveFunctionHooks3WithInfo(rt, any_enter ? clrmux_elt_enter_info : NULL,
                                                             any_leave ? clrmux_elt_leave_info : NULL,
                                                             any_tail ? clrmux_elt_tailcall_info : NULL);
    } else {
#if CLRMUX_ELT_STUBS
        hr = rt->lpVtbl->SetEnterLeaveFunctionHooks3(rt, any_enter ? clrmux_elt_enter3_stub : NULL,
                                                     any_leave ? clrmux_elt_leave3_stub : NULL,
                                                     any_tail ? clrmux_elt_tailcall3_stub : NULL);
#else
        hr = E_NOTIMPL; /* the fast-path stubs exist for x86-64 (Linux, Windows) and arm64 Linux only */
#endif
    }
    if (FAILED(hr)) {
        LOG_ERROR("enter/leave hooks: the runtime refused %s: HRESULT %s; children's hooks are not called",
                  slow ? "SetEnterLeaveFunctionHooks3WithInfo" : "SetEnterLeaveFunctionHooks3", HR_STR(hr));
        return;
    }
    e->installed = slow ? 2 : 1;
    LOG_INFO("enter/leave hooks for %d child(ren), %s path: %s", e->nslots, slow ? "WithInfo (slow)" : "fast", names);
}

/* ---- Get*3Info through a child's proxy -------------------------------------------------- */

HRESULT clrmux_elt_enter3_info(struct clrmux_child *c, FunctionID fid, COR_PRF_ELT_INFO info,
                               COR_PRF_FRAME_INFO *frame, ULONG *pcb, COR_PRF_FUNCTION_ARGUMENT_INFO *args)
{
    DWORD low = atomic_load(&c->mask_low);
    if (!(low & (COR_PRF_ENABLE_FUNCTION_ARGS | COR_PRF_ENABLE_FRAME_INFO)))
        return CORPROF_E_INCONSISTENT_WITH_FLAGS;
    ICorProfilerInfo15 *rt = c->proxy.mux->info;
    if (low & COR_PRF_ENABLE_FUNCTION_ARGS)
        return rt->lpVtbl->GetFunctionEnter3Info(rt, fid, info, frame, pcb, args);
    /* frame info only: the arguments another child asked for stay hidden */
    union {
        COR_PRF_FUNCTION_ARGUMENT_INFO a;
        unsigned char bytes[1024];
    } buf;
    ULONG cb = sizeof buf;
    HRESULT hr = rt->lpVtbl->GetFunctionEnter3Info(rt, fid, info, frame, &cb, &buf.a);
    if (pcb)
        *pcb = 0;
    return hr;
}

HRESULT clrmux_elt_leave3_info(struct clrmux_child *c, FunctionID fid, COR_PRF_ELT_INFO info,
                               COR_PRF_FRAME_INFO *frame, COR_PRF_FUNCTION_ARGUMENT_RANGE *retval)
{
    DWORD low = atomic_load(&c->mask_low);
    if (!(low & (COR_PRF_ENABLE_FUNCTION_RETVAL | COR_PRF_ENABLE_FRAME_INFO)))
        return CORPROF_E_INCONSISTENT_WITH_FLAGS;
    ICorProfilerInfo15 *rt = c->proxy.mux->info;
    HRESULT hr = rt->lpVtbl->GetFunctionLeave3Info(rt, fid, info, frame, retval);
    if (retval && !(low & COR_PRF_ENABLE_FUNCTION_RETVAL))
        memset(retval, 0, sizeof *retval);
    return hr;
}

HRESULT clrmux_elt_tailcall3_info(struct clrmux_child *c, FunctionID fid, COR_PRF_ELT_INFO info,
                                  COR_PRF_FRAME_INFO *frame)
{
    if (!(atomic_load(&c->mask_low) & COR_PRF_ENABLE_FRAME_INFO))
        return CORPROF_E_INCONSISTENT_WITH_FLAGS;
    ICorProfilerInfo15 *rt = c->proxy.mux->info;
    return rt->lpVtbl->GetFunctionTailcall3Info(rt, fid, info, frame);
}

int clrmux_elt_child_hooks(struct clrmux_mux *m, struct clrmux_child *c)
{
    struct clrmux_elt *e = atomic_load_explicit(&m->elt, memory_order_acquire);
    if (!e)
        return 0;
    pthread_mutex_lock(&e->lock);
    int set = e->per[c->index].gen != CLRMUX_ELT_NONE;
    pthread_mutex_unlock(&e->lock);
    return set;
}

void clrmux_elt_free(struct clrmux_mux *m)
{
    struct clrmux_elt *e = atomic_load_explicit(&m->elt, memory_order_acquire);
    if (!e)
        return;
    if (clrmux_elt_g == e)
        clrmux_elt_g = NULL;
    while (e->arena) {
        struct arena_chunk *n = e->arena->next;
        free(e->arena);
        e->arena = n;
    }
    pthread_mutex_destroy(&e->lock);
    free(e);
    atomic_store(&m->elt, NULL);
}

#ifdef CLRMUX_TESTING
void clrmux_elt_installed(struct clrmux_mux *m, struct clrmux_elt_installed *out)
{
    memset(out, 0, sizeof *out);
    struct clrmux_elt *e = atomic_load_explicit(&m->elt, memory_order_acquire);
    if (!e || !e->installed)
        return;
    if (e->installed == 3) {
        out->direct = 1;
        return;
    }
    out->fast = e->installed == 1;
    out->mapper = elt_mapper;
    out->mapper_data = e;
    if (out->fast) {
#if CLRMUX_ELT_STUBS /* else never installed: SetEnterLeaveFunctionHooks3 is not called */
        out->enter = (void *)clrmux_elt_enter3_stub;
        out->leave = (void *)clrmux_elt_leave3_stub;
        out->tailcall = (void *)clrmux_elt_tailcall3_stub;
#endif
    } else {
        out->enter = (void *)clrmux_elt_enter_info;
        out->leave = (void *)clrmux_elt_leave_info;
        out->tailcall = (void *)clrmux_elt_tailcall_info;
    }
}
#endif
