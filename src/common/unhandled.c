/* Finding System.AppContext.OnUnhandledException (see unhandled.h). */
#define COBJMACROS
#include "common/unhandled.h"

#include <string.h>

#include "common/utf16.h"

#define ofRead 0x0u

static int is_corelib(ICorProfilerInfo *info, ModuleID mod)
{
    WCHAR name[512];
    ULONG n = 0;
    LPCBYTE base = NULL;
    AssemblyID asm_id = 0;
    if (FAILED(ICorProfilerInfo_GetModuleInfo(info, mod, &base, 512, &n, name, &asm_id)) || n == 0)
        return 0;
    char utf8[1024];
    clrmux_utf16_to_utf8(name, n && !name[n - 1] ? n - 1 : n, utf8, sizeof utf8);
    size_t len = strlen(utf8);
    static const char tail[] = "System.Private.CoreLib.dll";
    return len >= sizeof tail - 1 && strcmp(utf8 + len - (sizeof tail - 1), tail) == 0 &&
           (len == sizeof tail - 1 || utf8[len - sizeof tail] == '/' || utf8[len - sizeof tail] == '\\');
}

static uint32_t find_token(ICorProfilerInfo *info, ModuleID mod)
{
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
    return tok;
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
        if (!is_corelib(info, mod)) {
            if (n < 8 && atomic_compare_exchange_strong(&h->n_not_corelib, &n, n + 1))
                atomic_store(&h->not_corelib[n], (uintptr_t)mod);
            return 0;
        }
        atomic_store(&h->token, find_token(info, mod));
        atomic_store_explicit(&h->corelib, (uintptr_t)mod, memory_order_release);
        core = (uintptr_t)mod;
    }
    uint32_t want = atomic_load_explicit(&h->token, memory_order_relaxed);
    return want && (uintptr_t)mod == core && (uint32_t)tok == want;
}
