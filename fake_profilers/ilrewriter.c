/* An IL-rewriting child profiler for clrmux's composition tests.
 *
 * It instruments target methods of the test app tests/clr/apps/compose (type Compose.Work)
 * by inserting at their entry `Compose.Probes.<COUNTER>++` (ldsfld, ldc.i4.1, add, stsfld:
 * 12 bytes; tiny headers become fat, EH clauses move with the code), either at JIT time
 * (ICorProfilerInfo::SetILFunctionBody in JITCompilationStarted, once per method) or through
 * ReJIT (RequestReJIT or RequestReJITWithInliners, then ICorProfilerFunctionControl in
 * GetReJITParameters), and can revert. The app's counters then show how often each child's
 * instrumentation ran.
 *
 * Configuration: environment variables suffixed with _<first 8 hex digits of the CLSID> (so
 * several instances of this library differ), falling back to the unsuffixed name:
 *   ILRW_MODE      jit | rejit | inliners (RequestReJITWithInliners with
 *                  COR_PRF_REJIT_BLOCK_INLINING | COR_PRF_REJIT_INLINING_CALLBACKS) |
 *                  jit-every (as Microsoft's CLR Instrumentation Engine: at every
 *                  JITCompilationStarted of a target, each generic instantiation's and tier 1's,
 *                  SetILFunctionBody with its rewrite of its own copy of the original IL, kept
 *                  from the first; its counter still counts one per call)
 *   ILRW_COUNTER   the static int field of Compose.Probes to increment (e.g. A)
 *   ILRW_TARGETS   comma-separated method names of Compose.Work (e.g. Compute,Leaf)
 *   ILRW_REJIT_AT  the app's phase at which to request the ReJIT (default 0: before any call)
 *   ILRW_REVERT_AT the phase at which to request a revert (default: never)
 *   ILRW_SYNC_DIR  the folder the app and the children synchronise through: the app creates
 *                  phase<N> and waits; each child acts, then creates ack<N>.<tag>
 *   ILRW_JIT_EVENTS 0: do not monitor JIT compilation (then no (Re)JITCompilation* callbacks)
 *   ILRW_REPORT_AT the phase at which it asks GetReJITIDs of its first target (default 3,
 *                  the app's last synchronisation)
 *   ILRW_OUT       file written at Shutdown: what the child saw, one "name value" a line
 *                  (per target: JIT/ReJIT compilations started and finished, GetReJITParameters;
 *                  for the first target: the distinct ReJIT IDs of its ReJITCompilationStarted
 *                  and what GetReJITIDs answered)
 * Every phase action runs on a thread of the child's own. */
#define COBJMACROS
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clrmux/cor.h"
#include "clrmux/corprof.h"

#include "fake_export.h"
#define MAX_TARGETS 8
#define PREFIX 12

struct rw {
    ICorProfilerCallback11 iface;
    _Atomic LONG refs;
    char tag[9];
    ICorProfilerInfo10 *info;
    char mode[16], counter[32], out[1024], sync_dir[1024];
    int rejit_at, revert_at;
    char names[MAX_TARGETS][64];
    int ntargets;
    _Atomic ModuleID module;
    mdMethodDef tokens[MAX_TARGETS];
    mdFieldDef field;
    _Atomic int jit_rewritten[MAX_TARGETS];
    BYTE *orig[MAX_TARGETS]; /* jit-every: the original IL, copied at the first compilation */
    ULONG orig_size[MAX_TARGETS];
    pthread_mutex_t orig_lock;
    _Atomic unsigned long jit_started[MAX_TARGETS], rejit_params[MAX_TARGETS], rejit_started[MAX_TARGETS];
    _Atomic unsigned long jit_finished[MAX_TARGETS], rejit_finished[MAX_TARGETS];
    pthread_mutex_t ids_lock;
    ReJITID ids_seen[8]; /* distinct ReJIT IDs in ReJITCompilationStarted of the first target */
    int nids_seen;
    int report_at;
    long rejit_ids;      /* GetReJITIDs of the first target at report_at; -1 not asked */
    HRESULT rejit_ids_hr;
    _Atomic unsigned long rejit_params_other, rejit_started_other, rejit_errors, rewrites, rewrite_failures;
    _Atomic unsigned long callbacks_after_shutdown;
    HRESULT rejit_hr, revert_hr, revert_status;
    int rejit_done, revert_done;
    pthread_t thread;
    _Atomic int stop, started;
};

static struct rw *rw_of(ICorProfilerCallback11 *i) { return (struct rw *)i; }

static const char *env(struct rw *r, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "%s_%s", name, r->tag);
    const char *v = getenv(key);
    return v ? v : getenv(name);
}

static int target_index(struct rw *r, ModuleID mod, mdToken tok)
{
    if (!mod || mod != atomic_load(&r->module))
        return -1;
    for (int i = 0; i < r->ntargets; i++)
        if (r->tokens[i] == tok)
            return i;
    return -1;
}

/* ---- the rewrite ------------------------------------------------------------------------- */

static void put16(BYTE *p, uint32_t v) { p[0] = (BYTE)v, p[1] = (BYTE)(v >> 8); }
static void put32(BYTE *p, uint32_t v) { put16(p, v), put16(p + 2, v >> 16); }
static uint32_t get16(const BYTE *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const BYTE *p) { return get16(p) | get16(p + 2) << 16; }

/* Writes the instrumented method (fat header, prefix, code, EH sections) to a malloc'd buffer
 * via `alloc`; returns its size, or 0 when the body is not understood. */
static ULONG rewrite(const BYTE *in, ULONG insize, mdFieldDef field, void *(*alloc)(void *, ULONG), void *ctx,
                     BYTE **outp)
{
    if (insize < 1)
        return 0;
    uint32_t flags, maxstack, codesize, localsig, hdr;
    if ((in[0] & 3) == 2) { /* tiny */
        flags = 0x3003, maxstack = 8, codesize = in[0] >> 2, localsig = 0, hdr = 1;
    } else if ((in[0] & 3) == 3 && insize >= 12) {
        flags = get16(in), maxstack = get16(in + 2), codesize = get32(in + 4), localsig = get32(in + 8);
        hdr = (flags >> 12) * 4;
    } else {
        return 0;
    }
    if (hdr + codesize > insize)
        return 0;
    const BYTE *sect = NULL;
    ULONG sectlen = 0;
    if ((in[0] & 3) == 3 && (flags & 0x8)) { /* CorILMethod_MoreSects */
        ULONG at = (hdr + codesize + 3) & ~3u;
        if (at > insize)
            return 0;
        sect = in + at;
        sectlen = insize - at;
    }
    uint32_t newcode = codesize + PREFIX;
    ULONG total = 12 + newcode;
    ULONG sectat = (total + 3) & ~3u;
    if (sect)
        total = sectat + sectlen;
    BYTE *out = alloc(ctx, total);
    if (!out)
        return 0;
    memset(out, 0, total);
    put16(out, (flags & 0x0FFF) | 0x3000 | 3);
    put16(out + 2, maxstack < 2 ? 2 : maxstack);
    put32(out + 4, newcode);
    put32(out + 8, localsig);
    BYTE *c = out + 12;
    c[0] = 0x7E, put32(c + 1, field); /* ldsfld */
    c[5] = 0x17;                      /* ldc.i4.1 */
    c[6] = 0x58;                      /* add */
    c[7] = 0x80, put32(c + 8, field); /* stsfld */
    memcpy(c + PREFIX, in + hdr, codesize);
    if (sect) {
        memcpy(out + sectat, sect, sectlen);
        BYTE *s = out + sectat;
        for (;;) {
            BYTE kind = s[0];
            if (kind & 0x40) { /* fat */
                uint32_t size = get32(s) >> 8;
                for (uint32_t k = 4; k + 24 <= size; k += 24) {
                    BYTE *cl = s + k;
                    put32(cl + 4, get32(cl + 4) + PREFIX);
                    put32(cl + 12, get32(cl + 12) + PREFIX);
                    if (get32(cl) & 1) /* COR_ILEXCEPTION_CLAUSE_FILTER */
                        put32(cl + 20, get32(cl + 20) + PREFIX);
                }
                if (!(kind & 0x80))
                    break;
                s += (size + 3) & ~3u;
            } else {
                uint32_t size = s[1];
                for (uint32_t k = 4; k + 12 <= size; k += 12) {
                    BYTE *cl = s + k;
                    put16(cl + 2, get16(cl + 2) + PREFIX);
                    put16(cl + 5, get16(cl + 5) + PREFIX);
                    if (get16(cl) & 1)
                        put32(cl + 8, get32(cl + 8) + PREFIX);
                }
                if (!(kind & 0x80))
                    break;
                s += (size + 3) & ~3u;
            }
            if (s >= out + total)
                break;
        }
    }
    *outp = out;
    return total;
}

static void *alloc_malloc(void *ctx, ULONG n) { (void)ctx; return malloc(n); }
static void *alloc_method(void *ctx, ULONG n) { return IMethodMalloc_Alloc((IMethodMalloc *)ctx, n); }

/* ---- phases ---------------------------------------------------------------------------- */

static void request_rejit(struct rw *r)
{
    ModuleID mods[MAX_TARGETS];
    ModuleID mod = atomic_load(&r->module);
    for (int i = 0; i < r->ntargets; i++)
        mods[i] = mod;
    if (!mod || !r->ntargets)
        r->rejit_hr = E_UNEXPECTED;
    else if (strcmp(r->mode, "inliners") == 0)
        r->rejit_hr = ICorProfilerInfo10_RequestReJITWithInliners(
            r->info, COR_PRF_REJIT_BLOCK_INLINING | COR_PRF_REJIT_INLINING_CALLBACKS, (ULONG)r->ntargets, mods, r->tokens);
    else
        r->rejit_hr = ICorProfilerInfo10_RequestReJIT(r->info, (ULONG)r->ntargets, mods, r->tokens);
    r->rejit_done = 1;
}

static void request_revert(struct rw *r)
{
    ModuleID mods[MAX_TARGETS];
    HRESULT status[MAX_TARGETS] = {0};
    for (int i = 0; i < r->ntargets; i++)
        mods[i] = atomic_load(&r->module);
    r->revert_hr = ICorProfilerInfo10_RequestRevert(r->info, (ULONG)r->ntargets, mods, r->tokens, status);
    r->revert_status = status[0];
    r->revert_done = 1;
}

static void report_rejit_ids(struct rw *r)
{
    FunctionID fid = 0;
    ULONG n = 0;
    ReJITID ids[16];
    ModuleID mod = atomic_load(&r->module);
    if (!mod || !r->ntargets || FAILED(r->rejit_ids_hr = ICorProfilerInfo10_GetFunctionFromToken(r->info, mod, r->tokens[0], &fid)))
        return;
    r->rejit_ids_hr = ICorProfilerInfo10_GetReJITIDs(r->info, fid, 16, &n, ids);
    if (SUCCEEDED(r->rejit_ids_hr))
        r->rejit_ids = (long)n;
}

static void *phase_thread(void *arg)
{
    struct rw *r = arg;
    ICorProfilerInfo10_InitializeCurrentThread(r->info);
    char path[1200];
    for (int phase = 0; !atomic_load(&r->stop) && phase < 100;) {
        snprintf(path, sizeof path, "%s/phase%d", r->sync_dir, phase);
        struct stat st;
        if (stat(path, &st) != 0) {
            usleep(1000);
            continue;
        }
        if (strncmp(r->mode, "jit", 3) != 0 && phase == r->rejit_at)
            request_rejit(r);
        if (phase == r->revert_at)
            request_revert(r);
        if (phase == r->report_at)
            report_rejit_ids(r);
        snprintf(path, sizeof path, "%s/ack%d.%s", r->sync_dir, phase, r->tag);
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
        phase++;
    }
    return NULL;
}

/* ---- callbacks -------------------------------------------------------------------------- */

#define CB_FN(I, D, R, N, P, A, ROUTE) \
    static HRESULT STDMETHODCALLTYPE rwg_##N(ICorProfilerCallback11 *This CLRMUX_EXPAND P) { return S_OK; }
CLRMUX_METHODS_ICorProfilerCallback(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback2(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback3(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback4(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback5(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback6(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback7(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback8(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback9(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback10(CB_FN, x)
CLRMUX_METHODS_ICorProfilerCallback11(CB_FN, x)

static const IID *const rw_iids[] = {&IID_IUnknown, &IID_ICorProfilerCallback, &IID_ICorProfilerCallback2,
    &IID_ICorProfilerCallback3, &IID_ICorProfilerCallback4, &IID_ICorProfilerCallback5,
    &IID_ICorProfilerCallback6, &IID_ICorProfilerCallback7, &IID_ICorProfilerCallback8,
    &IID_ICorProfilerCallback9, &IID_ICorProfilerCallback10, &IID_ICorProfilerCallback11};

static HRESULT STDMETHODCALLTYPE rw_QueryInterface(ICorProfilerCallback11 *This, REFIID riid, void **ppv)
{
    *ppv = NULL;
    for (size_t i = 0; i < sizeof rw_iids / sizeof rw_iids[0]; i++)
        if (IsEqualIID(riid, rw_iids[i])) {
            *ppv = This;
            atomic_fetch_add(&rw_of(This)->refs, 1);
            return S_OK;
        }
    return E_NOINTERFACE;
}
static ULONG STDMETHODCALLTYPE rw_AddRef(ICorProfilerCallback11 *This) { return (ULONG)atomic_fetch_add(&rw_of(This)->refs, 1) + 1; }
static ULONG STDMETHODCALLTYPE rw_Release(ICorProfilerCallback11 *This) { return (ULONG)atomic_fetch_sub(&rw_of(This)->refs, 1) - 1; }

static HRESULT STDMETHODCALLTYPE rw_Initialize(ICorProfilerCallback11 *This, IUnknown *unk)
{
    struct rw *r = rw_of(This);
    const char *v;
    snprintf(r->mode, sizeof r->mode, "%s", (v = env(r, "ILRW_MODE")) ? v : "rejit");
    snprintf(r->counter, sizeof r->counter, "%s", (v = env(r, "ILRW_COUNTER")) ? v : "A");
    snprintf(r->out, sizeof r->out, "%s", (v = env(r, "ILRW_OUT")) ? v : "");
    snprintf(r->sync_dir, sizeof r->sync_dir, "%s", (v = env(r, "ILRW_SYNC_DIR")) ? v : "");
    r->rejit_at = (v = env(r, "ILRW_REJIT_AT")) ? atoi(v) : 0;
    r->revert_at = (v = env(r, "ILRW_REVERT_AT")) ? atoi(v) : -1;
    r->report_at = (v = env(r, "ILRW_REPORT_AT")) ? atoi(v) : 3;
    r->rejit_ids = -1;
    pthread_mutex_init(&r->ids_lock, NULL);
    pthread_mutex_init(&r->orig_lock, NULL);
    char list[512];
    snprintf(list, sizeof list, "%s", (v = env(r, "ILRW_TARGETS")) ? v : "Compute");
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t && r->ntargets < MAX_TARGETS; t = strtok_r(NULL, ",", &save))
        snprintf(r->names[r->ntargets++], sizeof r->names[0], "%s", t);
    if (FAILED(IUnknown_QueryInterface(unk, &IID_ICorProfilerInfo10, (void **)&r->info)))
        return E_FAIL;
    DWORD mask = COR_PRF_MONITOR_MODULE_LOADS;
    mask |= strncmp(r->mode, "jit", 3) == 0 ? COR_PRF_MONITOR_JIT_COMPILATION : COR_PRF_ENABLE_REJIT;
    if (!(v = env(r, "ILRW_JIT_EVENTS")) || strcmp(v, "0") != 0)
        mask |= COR_PRF_MONITOR_JIT_COMPILATION; /* JIT and ReJIT compilation callbacks */
    if (FAILED(ICorProfilerInfo10_SetEventMask(r->info, mask)))
        return E_FAIL;
    if (r->sync_dir[0] && pthread_create(&r->thread, NULL, phase_thread, r) == 0)
        atomic_store(&r->started, 1);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_ModuleLoadFinished(ICorProfilerCallback11 *This, ModuleID mod, HRESULT status)
{
    struct rw *r = rw_of(This);
    WCHAR wpath[512];
    ULONG len = 0;
    LPCBYTE base = NULL;
    AssemblyID asm_id = 0;
    if (FAILED(ICorProfilerInfo10_GetModuleInfo(r->info, mod, &base, 512, &len, wpath, &asm_id)) || len < 12)
        return S_OK;
    static const char suffix[] = "/compose.dll";
    size_t sl = sizeof suffix - 1;
    if (len - 1 < sl)
        return S_OK;
    for (size_t i = 0; i < sl; i++)
        if (wpath[len - 1 - sl + i] != (WCHAR)suffix[i])
            return S_OK;
    IUnknown *unk = NULL;
    if (FAILED(ICorProfilerInfo10_GetModuleMetaData(r->info, mod, 0 /* ofRead */, &IID_IMetaDataImport, &unk)) || !unk)
        return S_OK;
    IMetaDataImport *imp = (IMetaDataImport *)unk;
    WCHAR w[128];
    mdTypeDef work = 0, probes = 0;
    const char *s = "Compose.Work";
    size_t n = 0;
    for (; s[n]; n++) w[n] = (WCHAR)s[n];
    w[n] = 0;
    IMetaDataImport_FindTypeDefByName(imp, w, 0, &work);
    s = "Compose.Probes";
    for (n = 0; s[n]; n++) w[n] = (WCHAR)s[n];
    w[n] = 0;
    IMetaDataImport_FindTypeDefByName(imp, w, 0, &probes);
    for (n = 0; r->counter[n] && n < 127; n++) w[n] = (WCHAR)r->counter[n];
    w[n] = 0;
    IMetaDataImport_FindField(imp, probes, w, NULL, 0, &r->field);
    for (int i = 0; i < r->ntargets; i++) {
        for (n = 0; r->names[i][n] && n < 127; n++) w[n] = (WCHAR)r->names[i][n];
        w[n] = 0;
        HCORENUM e = NULL;
        mdMethodDef found[4];
        ULONG nf = 0;
        IMetaDataImport_EnumMethodsWithName(imp, &e, work, w, found, 4, &nf);
        IMetaDataImport_CloseEnum(imp, e);
        r->tokens[i] = nf ? found[0] : 0;
    }
    IMetaDataImport_Release(imp);
    atomic_store(&r->module, mod);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_JITCompilationStarted(ICorProfilerCallback11 *This, FunctionID fid, BOOL safe)
{
    struct rw *r = rw_of(This);
    ClassID cls;
    ModuleID mod;
    mdToken tok;
    if (FAILED(ICorProfilerInfo10_GetFunctionInfo(r->info, fid, &cls, &mod, &tok)))
        return S_OK;
    int i = target_index(r, mod, tok);
    if (i < 0)
        return S_OK;
    atomic_fetch_add(&r->jit_started[i], 1);
    LPCBYTE body = NULL;
    ULONG size = 0;
    const int every = strcmp(r->mode, "jit-every") == 0;
    if (every) {
        /* from its own copy of the original IL, every time */
        pthread_mutex_lock(&r->orig_lock);
        if (!r->orig[i] && SUCCEEDED(ICorProfilerInfo10_GetILFunctionBody(r->info, mod, tok, &body, &size)) && body &&
            (r->orig[i] = malloc(size))) {
            memcpy(r->orig[i], body, size);
            r->orig_size[i] = size;
        }
        body = r->orig[i];
        size = r->orig_size[i];
        pthread_mutex_unlock(&r->orig_lock);
        if (!body) {
            atomic_fetch_add(&r->rewrite_failures, 1);
            return S_OK;
        }
    } else if (strcmp(r->mode, "jit") != 0 || atomic_exchange(&r->jit_rewritten[i], 1)) {
        return S_OK; /* the runtime keeps the body: rewriting again would instrument twice */
    }
    IMethodMalloc *mm = NULL;
    BYTE *out = NULL;
    if ((!every && FAILED(ICorProfilerInfo10_GetILFunctionBody(r->info, mod, tok, &body, &size))) ||
        FAILED(ICorProfilerInfo10_GetILFunctionBodyAllocator(r->info, mod, &mm)) || !mm ||
        !rewrite(body, size, r->field, alloc_method, mm, &out) ||
        FAILED(ICorProfilerInfo10_SetILFunctionBody(r->info, mod, tok, out)))
        atomic_fetch_add(&r->rewrite_failures, 1);
    else
        atomic_fetch_add(&r->rewrites, 1);
    if (mm)
        IMethodMalloc_Release(mm);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_GetReJITParameters(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef tok,
                                                       ICorProfilerFunctionControl *fc)
{
    struct rw *r = rw_of(This);
    int i = target_index(r, mod, tok);
    if (i < 0) {
        atomic_fetch_add(&r->rejit_params_other, 1); /* an inliner of a target */
        return S_OK;
    }
    atomic_fetch_add(&r->rejit_params[i], 1);
    LPCBYTE body = NULL;
    ULONG size = 0;
    BYTE *out = NULL;
    ULONG n = 0;
    if (FAILED(ICorProfilerInfo10_GetILFunctionBody(r->info, mod, tok, &body, &size)) ||
        !(n = rewrite(body, size, r->field, alloc_malloc, NULL, &out)) ||
        FAILED(ICorProfilerFunctionControl_SetILFunctionBody(fc, n, out))) {
        atomic_fetch_add(&r->rewrite_failures, 1);
    } else {
        COR_IL_MAP map[1] = {{0, PREFIX, TRUE}};
        ICorProfilerFunctionControl_SetILInstrumentedCodeMap(fc, 1, map);
        atomic_fetch_add(&r->rewrites, 1);
    }
    free(out);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_ReJITCompilationStarted(ICorProfilerCallback11 *This, FunctionID fid, ReJITID id,
                                                            BOOL safe)
{
    struct rw *r = rw_of(This);
    ClassID cls;
    ModuleID mod;
    mdToken tok;
    if (FAILED(ICorProfilerInfo10_GetFunctionInfo(r->info, fid, &cls, &mod, &tok)))
        return S_OK;
    int i = target_index(r, mod, tok);
    if (i < 0)
        atomic_fetch_add(&r->rejit_started_other, 1);
    else
        atomic_fetch_add(&r->rejit_started[i], 1);
    if (i == 0) {
        pthread_mutex_lock(&r->ids_lock);
        int k = 0;
        while (k < r->nids_seen && r->ids_seen[k] != id)
            k++;
        if (k == r->nids_seen && k < 8)
            r->ids_seen[r->nids_seen++] = id;
        pthread_mutex_unlock(&r->ids_lock);
    }
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_ReJITCompilationFinished(ICorProfilerCallback11 *This, FunctionID fid, ReJITID id,
                                                             HRESULT status, BOOL safe)
{
    struct rw *r = rw_of(This);
    ClassID cls;
    ModuleID mod;
    mdToken tok;
    if (SUCCEEDED(ICorProfilerInfo10_GetFunctionInfo(r->info, fid, &cls, &mod, &tok))) {
        int i = target_index(r, mod, tok);
        if (i >= 0)
            atomic_fetch_add(&r->rejit_finished[i], 1);
    }
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_JITCompilationFinished(ICorProfilerCallback11 *This, FunctionID fid, HRESULT status,
                                                           BOOL safe)
{
    struct rw *r = rw_of(This);
    ClassID cls;
    ModuleID mod;
    mdToken tok;
    if (SUCCEEDED(ICorProfilerInfo10_GetFunctionInfo(r->info, fid, &cls, &mod, &tok))) {
        int i = target_index(r, mod, tok);
        if (i >= 0)
            atomic_fetch_add(&r->jit_finished[i], 1);
    }
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_ReJITError(ICorProfilerCallback11 *This, ModuleID mod, mdMethodDef tok,
                                               FunctionID fid, HRESULT status)
{
    atomic_fetch_add(&rw_of(This)->rejit_errors, 1);
    return S_OK;
}

static HRESULT STDMETHODCALLTYPE rw_Shutdown(ICorProfilerCallback11 *This)
{
    struct rw *r = rw_of(This);
    atomic_store(&r->stop, 1);
    if (atomic_load(&r->started))
        pthread_join(r->thread, NULL);
    if (!r->out[0])
        return S_OK;
    FILE *o = fopen(r->out, "w");
    if (!o)
        return S_OK;
    fprintf(o, "mode %s\n", r->mode);
    for (int i = 0; i < r->ntargets; i++) {
        fprintf(o, "token %s 0x%08x\n", r->names[i], (unsigned)r->tokens[i]);
        fprintf(o, "jit_started %s %lu\n", r->names[i], atomic_load(&r->jit_started[i]));
        fprintf(o, "rejit_params %s %lu\n", r->names[i], atomic_load(&r->rejit_params[i]));
        fprintf(o, "rejit_started %s %lu\n", r->names[i], atomic_load(&r->rejit_started[i]));
        fprintf(o, "jit_finished %s %lu\n", r->names[i], atomic_load(&r->jit_finished[i]));
        fprintf(o, "rejit_finished %s %lu\n", r->names[i], atomic_load(&r->rejit_finished[i]));
    }
    fprintf(o, "rejit_ids_seen %d\n", r->nids_seen);
    fprintf(o, "rejit_ids %ld hr 0x%08X\n", r->rejit_ids, (unsigned)r->rejit_ids_hr);
    fprintf(o, "rejit_params_other %lu\n", atomic_load(&r->rejit_params_other));
    fprintf(o, "rejit_started_other %lu\n", atomic_load(&r->rejit_started_other));
    fprintf(o, "rejit_errors %lu\n", atomic_load(&r->rejit_errors));
    fprintf(o, "rewrites %lu\n", atomic_load(&r->rewrites));
    fprintf(o, "rewrite_failures %lu\n", atomic_load(&r->rewrite_failures));
    if (r->rejit_done)
        fprintf(o, "rejit_hr 0x%08X\n", (unsigned)r->rejit_hr);
    if (r->revert_done)
        fprintf(o, "revert_hr 0x%08X status 0x%08X\n", (unsigned)r->revert_hr, (unsigned)r->revert_status);
    fclose(o);
    return S_OK;
}

#define rwg_QueryInterface rw_QueryInterface
#define rwg_AddRef rw_AddRef
#define rwg_Release rw_Release
#define VT(I, D, R, N, P, A, ROUTE) .N = rwg_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerCallback11Vtbl rw_vtbl = {
    CLRMUX_ALL_ICorProfilerCallback11(VT, x)
    .QueryInterface = rw_QueryInterface,
    .AddRef = rw_AddRef,
    .Release = rw_Release,
    .Initialize = rw_Initialize,
    .Shutdown = rw_Shutdown,
    .ModuleLoadFinished = rw_ModuleLoadFinished,
    .JITCompilationStarted = rw_JITCompilationStarted,
    .GetReJITParameters = rw_GetReJITParameters,
    .ReJITCompilationStarted = rw_ReJITCompilationStarted,
    .ReJITCompilationFinished = rw_ReJITCompilationFinished,
    .JITCompilationFinished = rw_JITCompilationFinished,
    .ReJITError = rw_ReJITError,
};
#pragma GCC diagnostic pop

/* ---- class factory ------------------------------------------------------------------------ */
struct factory {
    IClassFactory iface;
    CLSID clsid;
};
static HRESULT STDMETHODCALLTYPE f_QueryInterface(IClassFactory *This, REFIID riid, void **ppv)
{
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE f_AddRef(IClassFactory *This) { return 2; }
static ULONG STDMETHODCALLTYPE f_Release(IClassFactory *This) { free(This); return 0; }
static HRESULT STDMETHODCALLTYPE f_CreateInstance(IClassFactory *This, IUnknown *outer, REFIID riid, void **ppv)
{
    struct rw *r = calloc(1, sizeof *r);
    if (!r)
        return E_OUTOFMEMORY;
    r->iface.lpVtbl = &rw_vtbl;
    snprintf(r->tag, sizeof r->tag, "%08X", (unsigned)((struct factory *)This)->clsid.Data1);
    HRESULT hr = rw_QueryInterface(&r->iface, riid, ppv);
    if (FAILED(hr))
        free(r);
    return hr;
}
static HRESULT STDMETHODCALLTYPE f_LockServer(IClassFactory *This, BOOL lock) { return S_OK; }
static const IClassFactoryVtbl f_vtbl = {f_QueryInterface, f_AddRef, f_Release, f_CreateInstance, f_LockServer};

EXPORT HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void **ppv)
{
    if (!IsEqualIID(riid, &IID_IClassFactory) && !IsEqualIID(riid, &IID_IUnknown))
        return E_NOINTERFACE;
    struct factory *f = calloc(1, sizeof *f);
    if (!f)
        return E_OUTOFMEMORY;
    f->iface.lpVtbl = &f_vtbl;
    f->clsid = *rclsid;
    *ppv = f;
    return S_OK;
}
