/* TSan stress of the enter/leave and EventPipe paths (src/loader/elt.c, eventpipe.c): threads
 * that play the runtime (mapping functions and calling the fast-path and WithInfo dispatchers,
 * delivering EventPipe events) run while a control thread starts, widens, extends and stops a
 * child's EventPipe sessions and toggles children's COR_PRF_MONITOR_ENTERLEAVE. Built and run
 * under -fsanitize=thread by `make tsan` (part of `make test`); exits non-zero on a wrong count
 * (TSan exits non-zero on a race). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "fake_runtime.h"
#include "common/log.h"

#define ITER 20000
static _Atomic unsigned long hits[2];

void clrmux_elt_fast_enter(UINT_PTR id, UINT_PTR caller_sp);
void clrmux_elt_fast_leave(UINT_PTR id, UINT_PTR caller_sp);

static void STDMETHODCALLTYPE leave_a(FunctionIDOrClientID id) { (void)id, atomic_fetch_add(&hits[0], 1); }
static void STDMETHODCALLTYPE leave_b(FunctionIDOrClientID id) { (void)id, atomic_fetch_add(&hits[1], 1); }
static UINT_PTR STDMETHODCALLTYPE map_b(FunctionID id, void *data, BOOL *hook)
{
    (void)data;
    *hook = TRUE;
    return id * 2;
}
static HRESULT hooks_a(struct fake_child *fc, ICorProfilerInfo15 *info)
{
    (void)fc;
    return info->lpVtbl->SetEnterLeaveFunctionHooks3(info, NULL, leave_a, NULL);
}
static HRESULT hooks_b(struct fake_child *fc, ICorProfilerInfo15 *info)
{
    (void)fc;
    info->lpVtbl->SetFunctionIDMapper2(info, map_b, NULL);
    return info->lpVtbl->SetEnterLeaveFunctionHooks3(info, NULL, leave_b, NULL);
}

static struct clrmux_mux *g_m;
static _Atomic int g_stop;

static void *elt_thread(void *arg)
{
    (void)arg;
    struct clrmux_elt_installed in;
    clrmux_elt_installed(g_m, &in);
    for (int i = 0; i < ITER; i++) {
        BOOL hook = FALSE;
        UINT_PTR id = in.mapper((FunctionID)(0x1000 + (i & 63) * 16), in.mapper_data, &hook);
        clrmux_elt_fast_leave(id, 0);
    }
    return NULL;
}

static void *deliver_thread(void *arg)
{
    (void)arg;
    ICorProfilerCallback11 *mux = &g_m->iface;
    BYTE meta[26] = {7};
    UINT64 kw = 1;
    UINT32 level = 4;
    memcpy(meta + 6, &kw, 8);
    memcpy(meta + 18, &level, 4);
    BYTE data[8];
    while (!atomic_load(&g_stop)) {
        data[0]++;
        mux->lpVtbl->EventPipeEventDelivered(mux, 0x10, 7, 0, sizeof meta, meta, sizeof data, data, NULL, NULL, 0, 0,
                                             NULL);
    }
    return NULL;
}

static void *control_thread(void *arg)
{
    (void)arg;
    struct clrmux_child *c = &g_m->children[2];
    ICorProfilerInfo15 *px = &c->proxy.iface;
    WCHAR p[4] = {'P', 0}, q[4] = {'Q', 0};
    /* a long-lived view: the loop's views widen the runtime session (replacements) */
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG base = {p, 1, 1, NULL};
    EVENTPIPE_SESSION keep = 0;
    px->lpVtbl->EventPipeStartSession(px, 1, &base, FALSE, &keep);
    for (int i = 0; i < 300; i++) {
        COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {p, (UINT64)1 << (i % 8), (UINT32)(i % 6), NULL};
        EVENTPIPE_SESSION s = 0;
        if (SUCCEEDED(px->lpVtbl->EventPipeStartSession(px, 1, &cfg, FALSE, &s))) {
            COR_PRF_EVENTPIPE_PROVIDER_CONFIG cq = {q, 1, 4, NULL};
            px->lpVtbl->EventPipeAddProviderToSession(px, s, cq);
            px->lpVtbl->EventPipeStopSession(px, s);
        }
        clrmux_set_child_mask(g_m, &g_m->children[0], (i & 1) ? 0 : COR_PRF_MONITOR_ENTERLEAVE, 0);
    }
    clrmux_set_child_mask(g_m, &g_m->children[0], COR_PRF_MONITOR_ENTERLEAVE, 0);
    atomic_store(&g_stop, 1);
    return NULL;
}

int main(void)
{
    clrmux_log_set_level(CLRMUX_LOG_ERROR);
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "P");
    static const struct child_spec spec[] = {{"a", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, hooks_a},
                                             {"b", 11, COR_PRF_MONITOR_ENTERLEAVE, 0, hooks_b},
                                             {"ep", 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE, NULL}};
    static struct fake_child fc[3];
    g_m = mux_with_children(&rt, spec, 3, fc, NULL);
    pthread_t t[4];
    pthread_create(&t[0], NULL, elt_thread, NULL);
    pthread_create(&t[1], NULL, elt_thread, NULL);
    pthread_create(&t[2], NULL, deliver_thread, NULL);
    pthread_create(&t[3], NULL, control_thread, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    unsigned long hb = atomic_load(&hits[1]);
    int ok = hb == 2ul * ITER && atomic_load(&hits[0]) <= 2ul * ITER;
    printf("stress_elt_ep: b hooked %lu of %d leaves, a %lu (mask toggled); runtime sessions %d started, %d stopped: %s\n",
           hb, 2 * ITER, atomic_load(&hits[0]), rt.sessions_started, rt.sessions_stopped, ok ? "ok" : "FAILED");
    fake_mux_free(g_m);
    return ok ? 0 : 1;
}
