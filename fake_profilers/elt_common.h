/* A child profiler that uses enter/leave/tailcall hooks, for clrmux's ELT tests and bench.
 * One library per hook generation (a library's hooks are plain functions, so each library
 * is one instance): eltfast.c (SetEnterLeaveFunctionHooks3, fast path: the JIT calls the
 * hooks directly, so they are register-preserving assembly stubs here too), eltinfo.c
 * (SetEnterLeaveFunctionHooks3WithInfo, reads arguments and return values through
 * GetFunctionEnter3Info / GetFunctionLeave3Info), elt2.c (SetEnterLeaveFunctionHooks2).
 *
 * Besides the recorder's variables (RECORDER_MASK must include COR_PRF_MONITOR_ENTERLEAVE,
 * and for eltinfo COR_PRF_ENABLE_FUNCTION_ARGS|RETVAL|FRAME_INFO), with the CLSID suffix:
 *   ELT_MAPPER  "1" SetFunctionIDMapper, "2" SetFunctionIDMapper2, else none: with a mapper
 *               the client data is a record of this child (checked by a per-library magic)
 *   ELT_ONLY    comma-separated method names: with a mapper, hook only these
 * At Shutdown, appended to RECORDER_OUT: "enter NAME N" / "leave NAME N" for the methods
 * Fib, Mix and Leaf (tests/clr/apps/eltapp), "# client-bad N" (hooks reached with client data
 * that is not this child's), "# args Mix a b c" / "# retval Mix r" (WithInfo and ELT2). */
#ifndef ELT_COMMON_H
#define ELT_COMMON_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

struct fake;
static void elt_init(struct fake *f);
static void elt_dump(struct fake *f, FILE *o);
#define FAKE_INIT_EXTRA(f) elt_init(f)
#define FAKE_SHUTDOWN_EXTRA(f, o) elt_dump(f, o)
#include "fake_common.h"

#define ELT_WATCH 3
static const char *const elt_watch[ELT_WATCH] = {"Fib", "Mix", "Leaf"};

/* One function as this child knows it. */
struct elt_rec {
    uint64_t magic;
    FunctionID fid;
    int watch;          /* index in elt_watch, -1 = other */
    _Atomic unsigned long enter, leave, tailcall;
    struct elt_rec *next;
};

static uint64_t elt_magic;
static struct fake *elt_self;
static int elt_mapper_kind;
static char elt_only[256];
static pthread_mutex_t elt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct elt_rec *elt_all;
#define ELT_TABLE 8192
static struct elt_rec *_Atomic elt_table[ELT_TABLE]; /* fid -> rec when there is no mapper */
static _Atomic unsigned long elt_bad;
static char elt_args[160], elt_retval[160];

static void elt_name(FunctionID fid, char *out, size_t n)
{
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    out[0] = 0;
    ICorProfilerInfo5 *info = elt_self->info;
    if (FAILED(ICorProfilerInfo5_GetFunctionInfo(info, fid, &cls, &mod, &tok)))
        return;
    IMetaDataImport *imp = NULL;
    if (FAILED(ICorProfilerInfo5_GetModuleMetaData(info, mod, 0 /* ofRead */, &IID_IMetaDataImport, (IUnknown **)&imp)) || !imp)
        return;
    WCHAR w[128];
    ULONG len = 0;
    mdTypeDef td = 0;
    if (SUCCEEDED(IMetaDataImport_GetMethodProps(imp, tok, &td, w, 128, &len, NULL, NULL, NULL, NULL, NULL))) {
        size_t i = 0;
        for (; i + 1 < n && i < len && w[i]; i++)
            out[i] = (char)w[i];
        out[i] = 0;
    }
    IMetaDataImport_Release(imp);
}

static void elt_classify(struct elt_rec *r)
{
    char name[128];
    elt_name(r->fid, name, sizeof name);
    if (!name[0])
        return; /* metadata not readable here (a fast-path hook): retried at Shutdown */
    r->watch = -1;
    for (int i = 0; i < ELT_WATCH; i++)
        if (strcmp(name, elt_watch[i]) == 0)
            r->watch = i;
}

/* resolve: 1 in a mapper (metadata may be read), 0 in a hook (names resolved at Shutdown) */
static struct elt_rec *elt_new(FunctionID fid, int resolve)
{
    struct elt_rec *r = calloc(1, sizeof *r);
    r->fid = fid;
    r->watch = -2;
    if (resolve)
        elt_classify(r);
    r->magic = elt_magic;
    pthread_mutex_lock(&elt_lock);
    r->next = elt_all;
    elt_all = r;
    pthread_mutex_unlock(&elt_lock);
    return r;
}

static int elt_wanted(FunctionID fid)
{
    if (!elt_only[0])
        return 1;
    char name[128], list[256];
    elt_name(fid, name, sizeof name);
    snprintf(list, sizeof list, "%s", elt_only);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, name) == 0)
            return 1;
    return 0;
}

static UINT_PTR STDMETHODCALLTYPE elt_mapper1(FunctionID fid, BOOL *hook)
{
    if (!elt_wanted(fid)) {
        *hook = FALSE;
        return fid;
    }
    *hook = TRUE;
    return (UINT_PTR)elt_new(fid, 1);
}

static UINT_PTR STDMETHODCALLTYPE elt_mapper2(FunctionID fid, void *data, BOOL *hook)
{
    if (data != (void *)&elt_magic) /* the clientData given to SetFunctionIDMapper2 */
        atomic_fetch_add(&elt_bad, 1);
    return elt_mapper1(fid, hook);
}

/* The record for a hook's client data: this child's record (with a mapper), or the one for
 * the FunctionID (without). NULL and counted as bad when the client data is not this child's. */
static struct elt_rec *elt_rec_of(UINT_PTR id)
{
    if (elt_mapper_kind) {
        struct elt_rec *r = (struct elt_rec *)id;
        if (!r || r->magic != elt_magic) {
            atomic_fetch_add(&elt_bad, 1);
            return NULL;
        }
        return r;
    }
    size_t h = (size_t)((id >> 3) * 0x9E3779B97F4A7C15ull >> 51) & (ELT_TABLE - 1);
    for (size_t n = 0; n < ELT_TABLE; n++, h = (h + 1) & (ELT_TABLE - 1)) {
        struct elt_rec *r = atomic_load(&elt_table[h]);
        if (r && r->fid == id)
            return r;
        if (!r) {
            /* a FunctionID the runtime knows, or someone else's client data */
            ClassID cls;
            ModuleID mod;
            mdToken tok;
            if (FAILED(ICorProfilerInfo5_GetFunctionInfo(elt_self->info, id, &cls, &mod, &tok))) {
                atomic_fetch_add(&elt_bad, 1);
                return NULL;
            }
            struct elt_rec *nr = elt_new(id, 0);
            struct elt_rec *expected = NULL;
            if (atomic_compare_exchange_strong(&elt_table[h], &expected, nr))
                return nr;
            if (expected->fid == id)
                return expected;
        }
    }
    return NULL;
}

/* The hooks' C bodies (non-static: the fast-path stubs call them by name). */
#if defined(_WIN32)
#define ELT_HIDDEN /* a DLL exports only what is marked dllexport */
#else
#define ELT_HIDDEN __attribute__((visibility("hidden")))
#endif
ELT_HIDDEN void elt_on_enter(UINT_PTR id);
ELT_HIDDEN void elt_on_leave(UINT_PTR id);
ELT_HIDDEN void elt_on_tailcall(UINT_PTR id);
void elt_on_enter(UINT_PTR id)
{
    struct elt_rec *r = elt_rec_of(id);
    if (r)
        atomic_fetch_add_explicit(&r->enter, 1, memory_order_relaxed);
}
void elt_on_leave(UINT_PTR id)
{
    struct elt_rec *r = elt_rec_of(id);
    if (r)
        atomic_fetch_add_explicit(&r->leave, 1, memory_order_relaxed);
}
void elt_on_tailcall(UINT_PTR id)
{
    struct elt_rec *r = elt_rec_of(id);
    if (r)
        atomic_fetch_add_explicit(&r->tailcall, 1, memory_order_relaxed);
}

/* Mix(int a, long b, double c): its three arguments, as the runtime describes them. */
__attribute__((unused)) static void elt_read_args(const COR_PRF_FUNCTION_ARGUMENT_INFO *a)
{
    if (!a || a->numRanges < 3 || elt_args[0])
        return;
    int x = *(const int *)a->ranges[0].startAddress;
    long long y = *(const long long *)a->ranges[1].startAddress;
    double z = *(const double *)a->ranges[2].startAddress;
    snprintf(elt_args, sizeof elt_args, "# args Mix %d %lld %g (ranges %u)", x, y, z, (unsigned)a->numRanges);
}

__attribute__((unused)) static void elt_read_retval(const COR_PRF_FUNCTION_ARGUMENT_RANGE *r)
{
    if (!r || !r->startAddress || r->length < 8 || elt_retval[0])
        return;
    snprintf(elt_retval, sizeof elt_retval, "# retval Mix %.1f", *(const double *)r->startAddress);
}

static void elt_set_hooks(ICorProfilerInfo5 *info);

static void elt_init(struct fake *f)
{
    const char *v;
    elt_self = f;
    elt_magic = 0xE17C0000ull << 32 | f->clsid.Data1;
    elt_mapper_kind = (v = fk_env(f, "ELT_MAPPER")) ? atoi(v) : 0;
    snprintf(elt_only, sizeof elt_only, "%s", (v = fk_env(f, "ELT_ONLY")) ? v : "");
    elt_set_hooks(f->info);
    HRESULT hr = S_OK;
    if (elt_mapper_kind == 1)
        hr = ICorProfilerInfo5_SetFunctionIDMapper(f->info, elt_mapper1);
    else if (elt_mapper_kind == 2)
        hr = ICorProfilerInfo5_SetFunctionIDMapper2(f->info, elt_mapper2, &elt_magic);
    fk_fact(f, "# SetFunctionIDMapper hr=0x%08X%.0u", (DWORD)hr, 0);
}

static void elt_dump(struct fake *f, FILE *o)
{
    (void)f;
    unsigned long en[ELT_WATCH] = {0}, lv[ELT_WATCH] = {0}, total = 0;
    pthread_mutex_lock(&elt_lock);
    for (struct elt_rec *r = elt_all; r; r = r->next) {
        if (r->watch == -2)
            elt_classify(r);
        total += atomic_load(&r->enter);
        if (r->watch >= 0) {
            en[r->watch] += atomic_load(&r->enter);
            lv[r->watch] += atomic_load(&r->leave);
        }
    }
    pthread_mutex_unlock(&elt_lock);
    for (int i = 0; i < ELT_WATCH; i++)
        fprintf(o, "enter %s %lu\nleave %s %lu\n", elt_watch[i], en[i], elt_watch[i], lv[i]);
    fprintf(o, "# enter-total %lu\n# client-bad %lu\n", total, atomic_load(&elt_bad));
    if (elt_args[0])
        fprintf(o, "%s\n", elt_args);
    if (elt_retval[0])
        fprintf(o, "%s\n", elt_retval);
}

#endif
