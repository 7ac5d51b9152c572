/* Finding System.AppContext.OnUnhandledException (see unhandled.h). */
#define COBJMACROS
#include "common/unhandled.h"

#include <string.h>

#include "common/log.h"
#include "common/mdtables.h"
#include "common/platform.h"
#include "common/utf16.h"

#define ofRead 0x0u

/* Whether `mod` is System.Private.CoreLib; its base address in *base (GetModuleInfo). */
static int is_corelib(ICorProfilerInfo *info, ModuleID mod, LPCBYTE *base)
{
    WCHAR name[512];
    ULONG n = 0;
    AssemblyID asm_id = 0;
    *base = NULL;
    if (FAILED(ICorProfilerInfo_GetModuleInfo(info, mod, base, 512, &n, name, &asm_id)) || n == 0)
        return 0;
    char utf8[1024];
    clrmux_utf16_to_utf8(name, n && !name[n - 1] ? n - 1 : n, utf8, sizeof utf8);
    size_t len = strlen(utf8);
    static const char tail[] = "System.Private.CoreLib.dll";
    return len >= sizeof tail - 1 && strcmp(utf8 + len - (sizeof tail - 1), tail) == 0 &&
           (len == sizeof tail - 1 || utf8[len - sizeof tail] == '/' || utf8[len - sizeof tail] == '\\');
}

/* AppContext.OnUnhandledException's token (0: none, before .NET 10) read from the tables of
 * CoreLib as the runtime mapped it at `base` (mdtables.h: the public importer would switch the
 * runtime's reader of CoreLib to the slower read/write one). 0, or -1 when they cannot be read. */
static int tables_token(const void *base, uint32_t *tok)
{
    size_t size = base ? clrmux_md_mapped_size(base) : 0;
    *tok = 0;
    return size && clrmux_md_find_method(base, size, 1, "System", "AppContext", "OnUnhandledException", tok) == 0
               ? 0
               : -1;
}

/* CoreLib (`mod`, mapped at `base`)'s token of AppContext.OnUnhandledException, 0 if none. */
static uint32_t find_token(ICorProfilerInfo *info, ModuleID mod, LPCBYTE base)
{
    uint32_t found = 0;
    if (tables_token(base, &found) == 0) {
        LOG_DEBUG("AppContext.OnUnhandledException is 0x%08x (read from CoreLib's metadata tables)", (unsigned)found);
        return found; /* 0 before .NET 10 (no such method): nothing to look for */
    }
    IUnknown *unk = NULL;
    if (FAILED(ICorProfilerInfo_GetModuleMetaData(info, mod, ofRead, &IID_IMetaDataImport, &unk)) || !unk)
        return 0;
    IMetaDataImport *imp = (IMetaDataImport *)unk;
    static const WCHAR type[] = {'S', 'y', 's', 't', 'e', 'm', '.', 'A', 'p', 'p', 'C', 'o', 'n', 't', 'e', 'x', 't', 0};
    static const WCHAR meth[] = {'O', 'n', 'U', 'n', 'h', 'a', 'n', 'd', 'l', 'e', 'd', 'E', 'x', 'c', 'e', 'p', 't',
                                 'i', 'o', 'n', 0};
    mdTypeDef td = 0;
    uint32_t tok = 0;
    if (SUCCEEDED(IMetaDataImport_FindTypeDefByName(imp, type, 0, &td))) {
        HCORENUM e = NULL;
        mdMethodDef m[2];
        ULONG n = 0;
        if (SUCCEEDED(IMetaDataImport_EnumMethodsWithName(imp, &e, td, meth, m, 2, &n)) && n >= 1)
            tok = (uint32_t)m[0];
        IMetaDataImport_CloseEnum(imp, e);
    }
    IMetaDataImport_Release(imp);
    LOG_DEBUG("AppContext.OnUnhandledException is 0x%08x (CoreLib's metadata importer)", (unsigned)tok);
    return tok;
}

/* Publishes the token of CoreLib `mod` (token before corelib: a reader that sees corelib sees
 * the token) and wakes a thread waiting for it. */
static void publish(struct clrmux_unhandled_hook *h, uintptr_t mod, uint32_t tok)
{
    atomic_store(&h->token, tok);
    atomic_store_explicit(&h->corelib, mod, memory_order_release);
    atomic_store_explicit(&h->state, 2, memory_order_release);
    clrmux_word_wake((uint32_t *)&h->state);
}

int clrmux_unhandled_prefetch(struct clrmux_unhandled_hook *h, uintptr_t corelib, const void *base)
{
    uint32_t idle = 0;
    if (!corelib || !base || !atomic_compare_exchange_strong(&h->state, &idle, 1))
        return 0;
    uint32_t found = 0;
    if (tables_token(base, &found) == 0) {
        LOG_DEBUG("AppContext.OnUnhandledException is 0x%08x (read from CoreLib's metadata tables ahead of the "
                  "callbacks)", (unsigned)found);
        publish(h, corelib, found);
        return 1;
    }
    atomic_store(&h->state, 0); /* the callbacks look it up, importer included */
    clrmux_word_wake((uint32_t *)&h->state);
    return 0;
}

/* The token of CoreLib `mod` (mapped at `base`) known, by this thread or another. */
static void ensure_token(struct clrmux_unhandled_hook *h, ICorProfilerInfo *info, ModuleID mod, LPCBYTE base)
{
    for (;;) {
        uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
        if (st == 2)
            return;
        if (st == 0) {
            if (atomic_compare_exchange_strong(&h->state, &st, 1)) {
                publish(h, (uintptr_t)mod, find_token(info, mod, base));
                return;
            }
            continue;
        }
        clrmux_word_wait((uint32_t *)&h->state, 1, 1); /* a prefetch reads the tables */
    }
}

int clrmux_unhandled_is_hook(struct clrmux_unhandled_hook *h, ICorProfilerInfo *info, FunctionID fid)
{
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    if (!info || FAILED(ICorProfilerInfo_GetFunctionInfo(info, fid, &cls, &mod, &tok)))
        return 0;
    uintptr_t core = atomic_load_explicit(&h->corelib, memory_order_acquire);
    if (!core) { /* the first callbacks only: CoreLib's methods come first */
        int n = atomic_load(&h->n_not_corelib);
        for (int i = 0; i < n && i < 8; i++)
            if (atomic_load(&h->not_corelib[i]) == (uintptr_t)mod)
                return 0;
        LPCBYTE base = NULL;
        if (!is_corelib(info, mod, &base)) {
            if (n < 8 && atomic_compare_exchange_strong(&h->n_not_corelib, &n, n + 1))
                atomic_store(&h->not_corelib[n], (uintptr_t)mod);
            return 0;
        }
        ensure_token(h, info, mod, base);
        core = atomic_load_explicit(&h->corelib, memory_order_acquire);
    }
    uint32_t want = atomic_load_explicit(&h->token, memory_order_relaxed);
    return want && (uintptr_t)mod == core && (uint32_t)tok == want;
}

/* ---- the exception callbacks ---------------------------------------------------------- */

/* One exception's dispatch, as the callbacks of its thread show it. */
struct exc_dispatch {
    int active;      /* from ExceptionThrown to ExceptionCatcherEnter */
    int caught;      /* ExceptionSearchCatcherFound seen */
    int first_done;  /* the second pass began */
    FunctionID last; /* the frame the first pass entered last */
    unsigned n_outer; /* first-pass entries of the thread's outermost function */
};

#define MAX_FILTER_NESTING 4
#define MAX_WALK_TRIES 3

static __thread struct {
    FunctionID outer; /* the thread's outermost managed function; 0: not known */
    int walks;        /* walks tried to learn it */
    int reported;     /* this thread's exception was called unhandled */
    int outer_catch;  /* a catch block of tls.outer runs (ExceptionCatcherEnter, not yet Leave) */
    struct exc_dispatch d;
    struct exc_dispatch saved[MAX_FILTER_NESTING]; /* the dispatches whose filter runs */
    int nsaved, lost; /* filters entered beyond MAX_FILTER_NESTING */
} tls;

struct walk {
    FunctionID outer; /* the last managed frame seen: the outermost at the end */
    FunctionID count_of;
    unsigned count;   /* frames of count_of */
};

static HRESULT STDMETHODCALLTYPE walk_frame(FunctionID fid, UINT_PTR ip, COR_PRF_FRAME_INFO fi, ULONG32 cs,
                                            BYTE ctx[], void *data)
{
    (void)ip, (void)fi, (void)cs, (void)ctx;
    struct walk *w = data;
    if (fid) { /* 0: native code */
        w->outer = fid;
        w->count += fid == w->count_of;
    }
    return S_OK;
}

static int walk(ICorProfilerInfo2 *info, FunctionID count_of, struct walk *w)
{
    memset(w, 0, sizeof *w);
    w->count_of = count_of;
    return info && SUCCEEDED(ICorProfilerInfo2_DoStackSnapshot(info, 0, walk_frame, COR_PRF_SNAPSHOT_DEFAULT, w,
                                                                NULL, 0)) && w->outer;
}

/* The first pass ended at tls.d.last without a catcher: unhandled if that frame is the
 * thread's outermost managed frame (the outermost function, and as many of its frames on
 * the stack as the first pass entered). A stale tls.outer (a thread whose outermost frame
 * changed) is corrected. */
static int left_outermost(ICorProfilerInfo2 *info)
{
    struct walk w;
    if (!walk(info, tls.d.last, &w))
        return 0;
    if (w.outer != tls.outer) {
        tls.outer = w.outer;
        tls.d.n_outer = 0; /* the outermost frame comes last: not entered yet */
        return 0;
    }
    return w.outer == tls.d.last && w.count == tls.d.n_outer;
}

int clrmux_unhandled_exception_event(ICorProfilerInfo2 *info, enum clrmux_exc_event ev, FunctionID fid)
{
    if (tls.reported)
        return 0;
    struct exc_dispatch *d = &tls.d;
    switch (ev) {
    case CLRMUX_EXC_THROWN:
        memset(d, 0, sizeof *d);
        d->active = 1;
        if (!tls.outer && tls.walks < MAX_WALK_TRIES) { /* the thread's first exception */
            struct walk w;
            tls.walks++;
            if (walk(info, 0, &w))
                tls.outer = w.outer;
        }
        return 0;
    case CLRMUX_EXC_SEARCH_ENTER:
        if (d->active && !d->first_done) {
            d->last = fid;
            d->n_outer += fid == tls.outer;
            if (fid && fid == tls.outer && !d->caught && tls.outer_catch)
                return CLRMUX_EXC_AT_OUTERMOST;
        }
        return 0;
    case CLRMUX_EXC_SEARCH_LEAVE: /* .NET 8: the last callback of an unhandled exception */
        if (!d->active || d->caught || d->first_done || !d->last || d->last != tls.outer)
            return 0;
        break;
    case CLRMUX_EXC_FILTER_ENTER:
        if (tls.nsaved < MAX_FILTER_NESTING)
            tls.saved[tls.nsaved++] = *d;
        else
            tls.lost++;
        return 0;
    case CLRMUX_EXC_FILTER_LEAVE:
        if (tls.lost)
            tls.lost--, d->active = 0; /* that dispatch is not followed any more */
        else if (tls.nsaved)
            *d = tls.saved[--tls.nsaved];
        return 0;
    case CLRMUX_EXC_CATCHER_FOUND:
        d->caught = 1;
        return 0;
    case CLRMUX_EXC_UNWIND: /* .NET 9, 10: the second pass begins, after the report */
        if (!d->active || d->first_done)
            return 0;
        d->first_done = 1;
        if (d->caught || !d->last || d->last != tls.outer)
            return 0;
        break;
    case CLRMUX_EXC_CATCHER_ENTER:
        d->active = 0;
        tls.outer_catch = fid && fid == tls.outer;
        return 0;
    case CLRMUX_EXC_CATCHER_LEAVE:
        tls.outer_catch = 0;
        return 0;
    default:
        return 0;
    }
    if (!left_outermost(info))
        return 0;
    tls.reported = 1;
    return CLRMUX_EXC_UNHANDLED;
}
