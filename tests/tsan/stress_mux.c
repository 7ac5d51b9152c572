/* ThreadSanitizer stress test of the mux (src/loader/mux.c, proxy.c) with the fake runtime
 * (tests/unit/fake_runtime.h): callback threads deliver module, JIT, ReJIT and EventPipe
 * callbacks while other threads change the children's event masks, request ReJIT (and revert) and
 * start, extend and stop EventPipe sessions through the children's proxies, and a fourth child
 * detaches half-way (src/loader/detach.c: evacuation under load). Built with
 * -fsanitize=thread (`make tsan`); any data race makes TSan exit with status 66. It also
 * checks that the callbacks reached the children. Runs for STRESS_MS (default 2000) ms. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "fake_runtime.h"

/* ---- a thread-safe child: counts every callback ----------------------------------------- */
struct sc {
    ICorProfilerCallback11 iface;
    _Atomic unsigned long calls, ep_events;
    _Atomic unsigned long threads, exceptions; /* ThreadCreated, ExceptionThrown: routes rebuilt as masks toggle */
    _Atomic int detached;                      /* its ProfilerDetachSucceeded came */
    _Atomic unsigned long late;                /* callbacks after that (must stay 0) */
};
static struct sc *sc_of(ICorProfilerCallback11 *i) { return (struct sc *)i; }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define SC_FN(I, D, R, N, P, A, ROUTE)                                                  \
    static HRESULT STDMETHODCALLTYPE scg_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) \
    {                                                                                  \
        atomic_fetch_add(&sc_of(This)->calls, 1);                                      \
        if (atomic_load(&sc_of(This)->detached))                                       \
            atomic_fetch_add(&sc_of(This)->late, 1);                                   \
        return S_OK;                                                                   \
    }
CLRMUX_METHODS_ICorProfilerCallback(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback2(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback3(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback4(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback5(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback6(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback7(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback8(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback9(SC_FN, x)
CLRMUX_METHODS_ICorProfilerCallback11(SC_FN, x)
#define SC_SKIP(I, D, R, N, P, A, ROUTE)
CLRMUX_METHODS_ICorProfilerCallback10(SC_SKIP, x)
static HRESULT STDMETHODCALLTYPE scg_EventPipeEventDelivered(
    ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider, DWORD eventId, DWORD eventVersion,
    ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData, LPCGUID pActivityId,
    LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames, UINT_PTR *stackFrames)
{
    atomic_fetch_add(&sc_of(This)->ep_events, 1);
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE scg_EventPipeProviderCreated(ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider)
{
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE scg_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE scg_AddRef(ICorProfilerCallback11 *This) { return 2; }
static ULONG STDMETHODCALLTYPE scg_Release(ICorProfilerCallback11 *This) { return 1; }
#pragma GCC diagnostic pop
static HRESULT STDMETHODCALLTYPE sc_ThreadCreated(ICorProfilerCallback11 *This, ThreadID t)
{
    atomic_fetch_add(&sc_of(This)->threads, 1);
    return scg_ThreadCreated(This, t);
}
static HRESULT STDMETHODCALLTYPE sc_ExceptionThrown(ICorProfilerCallback11 *This, ObjectID o)
{
    atomic_fetch_add(&sc_of(This)->exceptions, 1);
    return scg_ExceptionThrown(This, o);
}
static HRESULT STDMETHODCALLTYPE sc_ProfilerDetachSucceeded(ICorProfilerCallback11 *This)
{
    atomic_store(&sc_of(This)->detached, 1);
    return S_OK;
}
#define SC_VT(I, D, R, N, P, A, ROUTE) .N = scg_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl sc_vtbl = {
    CLRMUX_ALL_ICorProfilerCallback11(SC_VT, x)
    .ThreadCreated = sc_ThreadCreated,
    .ExceptionThrown = sc_ExceptionThrown,
    .ProfilerDetachSucceeded = sc_ProfilerDetachSucceeded,
};
#pragma GCC diagnostic pop

/* ---- the stress -------------------------------------------------------------------------- */
#define NCHILD 3
#define BASE_LOW (COR_PRF_ENABLE_REJIT | COR_PRF_MONITOR_MODULE_LOADS)
static struct fake_runtime g_rt;
static struct clrmux_mux *g_m;
static struct sc g_sc[NCHILD + 1]; /* the last one detaches */
static _Atomic int g_stop;
static _Atomic int g_detach_failed;
static const char *const k_providers[] = {"Microsoft-Windows-DotNETRuntime", "Stress-A", "Stress-B", "Stress-C"};

static ICorProfilerInfo15 *proxy(int i) { return &g_m->children[i].proxy.iface; }

static void *callbacks(void *arg)
{
    ICorProfilerCallback11 *cb = &g_m->iface;
    unsigned long k = (unsigned long)(uintptr_t)arg;
    while (!atomic_load(&g_stop)) {
        k++;
        cb->lpVtbl->ModuleLoadFinished(cb, 0x7000 + (k & 7), S_OK);
        /* routed through tables the masks thread keeps rebuilding (and the detach) */
        cb->lpVtbl->ThreadCreated(cb, (ThreadID)k);
        cb->lpVtbl->ExceptionThrown(cb, (ObjectID)k);
        cb->lpVtbl->ThreadDestroyed(cb, (ThreadID)k);
        cb->lpVtbl->JITCompilationStarted(cb, 0x100 + (k & 3), TRUE);
        cb->lpVtbl->JITCompilationFinished(cb, 0x100 + (k & 3), S_OK, TRUE);
        BOOL inl = TRUE, cached = TRUE;
        cb->lpVtbl->JITInlining(cb, 0x100, 0x101, &inl);
        cb->lpVtbl->JITCachedFunctionSearchStarted(cb, 0x100 + (k & 3), &cached);
        cb->lpVtbl->ReJITCompilationStarted(cb, 0x100 + (k & 3), 1, TRUE);
        cb->lpVtbl->GetReJITParameters(cb, 0x7000, 0x06000001 + (mdMethodDef)(k & 15), NULL);
        UINT_PTR frames[2] = {0};
        cb->lpVtbl->EventPipeEventDelivered(cb, (EVENTPIPE_PROVIDER)(1 + (k & 3)), 10, 1, 0, NULL, 0, NULL, NULL, NULL,
                                            0, 0, frames);
    }
    return NULL;
}

static void *masks(void *arg)
{
    (void)arg;
    unsigned long k = 0;
    while (!atomic_load(&g_stop)) {
        static const DWORD own[NCHILD] = {COR_PRF_MONITOR_JIT_COMPILATION, COR_PRF_MONITOR_THREADS,
                                          COR_PRF_MONITOR_EXCEPTIONS};
        int i = (int)(k % NCHILD);
        DWORD extra = ((k++ / NCHILD) & 1) ? own[i] : 0; /* each child toggles its own flag: the union changes */
        proxy(i)->lpVtbl->SetEventMask2(proxy(i), BASE_LOW | extra, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
        DWORD lo, hi;
        proxy(i)->lpVtbl->GetEventMask2(proxy(i), &lo, &hi);
    }
    return NULL;
}

static void *rejit(void *arg)
{
    (void)arg;
    unsigned long k = 0;
    while (!atomic_load(&g_stop)) {
        int i = (int)(k % NCHILD);
        ModuleID mod = 0x7000;
        mdMethodDef tok = 0x06000001 + (mdMethodDef)(k++ % 2048);
        proxy(i)->lpVtbl->RequestReJIT(proxy(i), 1, &mod, &tok);
        if (k % 7 == 0) /* revert by one owner: a rebuild for the others, or the runtime's revert */
            proxy(i)->lpVtbl->RequestRevert(proxy(i), 1, &mod, &tok, NULL);
    }
    return NULL;
}

/* A child that detaches half-way (per-child detach: evacuation while callbacks run). */
static void *detacher(void *arg)
{
    long ms = (long)(intptr_t)arg;
    struct timespec d = {ms / 2000, (ms / 2 % 1000) * 1000000};
    nanosleep(&d, NULL);
    ICorProfilerInfo15 *p = &g_m->children[NCHILD].proxy.iface;
    if (FAILED(p->lpVtbl->RequestProfilerDetach(p, 10)))
        atomic_store(&g_detach_failed, 1);
    return NULL;
}

static void *eventpipe(void *arg)
{
    (void)arg;
    WCHAR names[4][64];
    for (int p = 0; p < 4; p++)
        clrmux_utf8_to_utf16(k_providers[p], names[p], 64);
    struct timespec pause = {0, 2000000};
    for (int s = 0; s < 16 && !atomic_load(&g_stop); s++) {
        int i = s % NCHILD;
        COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {names[s & 3], 0, 5, NULL};
        EVENTPIPE_SESSION session = 0;
        proxy(i)->lpVtbl->EventPipeStartSession(proxy(i), 1, &cfg, FALSE, &session);
        for (int p = 0; p < 4; p++) {
            nanosleep(&pause, NULL);
            COR_PRF_EVENTPIPE_PROVIDER_CONFIG more = {names[p], 0, 5, NULL};
            proxy(i)->lpVtbl->EventPipeAddProviderToSession(proxy(i), session, more);
        }
        nanosleep(&pause, NULL);
        if (s % 3 != 0)
            proxy(i)->lpVtbl->EventPipeStopSession(proxy(i), session);
    }
    return NULL;
}

int main(void)
{
    const char *ms_env = getenv("STRESS_MS");
    long ms = ms_env ? atol(ms_env) : 2000;
    clrmux_log_set_level(CLRMUX_LOG_ERROR);
    fake_runtime_init(&g_rt, 15, 10);
    for (int p = 0; p < 4; p++)
        fake_runtime_add_provider(&g_rt, (EVENTPIPE_PROVIDER)(1 + p), k_providers[p]);
    for (int f = 0; f < 4; f++)
        fake_runtime_add_function(&g_rt, 0x100 + (FunctionID)f, 0x7000, 0x06000001 + (mdToken)f);
    g_m = fake_mux_new(&g_rt);
    for (int i = 0; i < NCHILD; i++) {
        g_sc[i].iface.lpVtbl = &sc_vtbl;
        struct clrmux_child *c = &g_m->children[i];
        snprintf(c->name, sizeof c->name, "stress%d", i);
        c->index = i;
        c->cb = &g_sc[i].iface;
        c->version = 11;
        clrmux_proxy_init(&c->proxy, g_m, c);
        g_m->nchildren++;
        atomic_store(&c->active, 1);
        proxy(i)->lpVtbl->SetEventMask2(proxy(i), BASE_LOW, COR_PRF_HIGH_MONITOR_EVENT_PIPE);
    }
    {
        /* the detaching child: module loads and threads only (nothing irreversible) */
        g_sc[NCHILD].iface.lpVtbl = &sc_vtbl;
        struct clrmux_child *c = &g_m->children[NCHILD];
        snprintf(c->name, sizeof c->name, "detaching");
        c->index = NCHILD;
        c->cb = &g_sc[NCHILD].iface;
        c->version = 11;
        clrmux_proxy_init(&c->proxy, g_m, c);
        g_m->nchildren++;
        atomic_store(&c->active, 1);
        c->proxy.iface.lpVtbl->SetEventMask2(&c->proxy.iface, COR_PRF_MONITOR_MODULE_LOADS | COR_PRF_MONITOR_THREADS, 0);
    }
    fake_mux_end_init(g_m);

    pthread_t t[6];
    pthread_create(&t[0], NULL, callbacks, (void *)(uintptr_t)0);
    pthread_create(&t[1], NULL, callbacks, (void *)(uintptr_t)1000);
    pthread_create(&t[2], NULL, masks, NULL);
    pthread_create(&t[3], NULL, rejit, NULL);
    pthread_create(&t[4], NULL, eventpipe, NULL);
    pthread_create(&t[5], NULL, detacher, (void *)(intptr_t)ms);
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&d, NULL);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    /* the detaching child was told (ProfilerDetachSucceeded) once no thread was in a callback */
    for (int i = 0; i < 400 && atomic_load(&g_m->children[NCHILD].detach_state) != 2; i++) {
        struct timespec w = {0, 5000000};
        nanosleep(&w, NULL);
    }
    int detached = atomic_load(&g_m->children[NCHILD].detach_state) == 2 && !atomic_load(&g_detach_failed);
    g_m->iface.lpVtbl->Shutdown(&g_m->iface); /* ends the detach thread */

    unsigned long calls = 0, ep = 0;
    for (int i = 0; i < NCHILD; i++)
        calls += atomic_load(&g_sc[i].calls), ep += atomic_load(&g_sc[i].ep_events);
    int sessions = g_rt.sessions_started; /* runtime sessions clrmux started for the views */
    printf("stress_mux: %ld ms, %d children: %lu callbacks and %lu EventPipe events delivered, %d sessions, "
           "%d mask changes accepted by the runtime\n", ms, NCHILD, calls, ep, sessions, g_rt.set_mask_accepted);
    unsigned long threads = atomic_load(&g_sc[1].threads), exceptions = atomic_load(&g_sc[2].exceptions);
    unsigned long strays = atomic_load(&g_sc[0].threads) + atomic_load(&g_sc[0].exceptions) +
                           atomic_load(&g_sc[1].exceptions) + atomic_load(&g_sc[2].threads);
    unsigned long late = atomic_load(&g_sc[NCHILD].late);
    printf("stress_mux: dispatch tables: %lu ThreadCreated and %lu ExceptionThrown reached the children that toggle "
           "them, %lu reached one that never asked, %lu reached the detached child after its ProfilerDetachSucceeded\n",
           threads, exceptions, strays, late);
    int ok = calls > 0 && ep > 0 && sessions > 0 && detached && threads > 0 && exceptions > 0 && strays == 0 &&
             late == 0 && atomic_load(&g_sc[NCHILD].threads) > 0;
    printf("%s - the mux under ThreadSanitizer: no data race, callbacks delivered, a child detached under load "
           "(ReJIT requests, reverts and held-back requests going on), dispatch tables rebuilt while callbacks "
           "run\n", ok ? "ok  " : "FAIL");
    fake_mux_free(g_m);
    return ok ? 0 : 1;
}
