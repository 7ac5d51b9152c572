/* The probes' calli signatures, with the SuppressGCTransition modifier (see probesig.h). */
#define COBJMACROS
#include "tracer/probesig.h"

#include <stdio.h>
#include <string.h>

#include "common/utf16.h"
#include "tracer/activity.h"

#define SUPPRESS_TYPE "System.Runtime.CompilerServices.CallConvSuppressGCTransition"

/* CoreLib type `name` (namespace.name) as seen from the module of emit: its TypeDef in CoreLib
 * itself, else a TypeRef scoped to the first of scopes[n] that the module references, else to
 * a new AssemblyRef `define` (public key token `token`); 0 with why set when there is none. */
static mdToken corelib_type(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, const char *name,
                            const char *const *scopes, size_t n, const char *define, const unsigned char token[8],
                            char *why, size_t whylen)
{
    WCHAR w[96];
    clrmux_utf8_to_utf16(name, w, 96);
    mdTypeDef td = 0;
    if (SUCCEEDED(IMetaDataImport2_FindTypeDefByName(imp, w, 0, &td)) && td)
        return td;
    IMetaDataAssemblyImport *ai = NULL;
    HRESULT hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataAssemblyImport, (void **)&ai);
    if (FAILED(hr) || !ai) {
        snprintf(why, whylen, "no IMetaDataAssemblyImport (HRESULT 0x%08X)", (unsigned)hr);
        return 0;
    }
    mdAssemblyRef ar = 0;
    for (size_t i = 0; i < n && !ar; i++)
        ar = clrmux_find_assembly_ref(ai, scopes[i]);
    IMetaDataAssemblyImport_Release(ai);
    if (!ar) {
        IMetaDataAssemblyEmit *ae = NULL;
        hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataAssemblyEmit, (void **)&ae);
        if (FAILED(hr) || !ae) {
            snprintf(why, whylen, "no IMetaDataAssemblyEmit (HRESULT 0x%08X)", (unsigned)hr);
            return 0;
        }
        WCHAR wname[32];
        clrmux_utf8_to_utf16(define, wname, 32);
        ASSEMBLYMETADATA md;
        memset(&md, 0, sizeof md);
        hr = IMetaDataAssemblyEmit_DefineAssemblyRef(ae, token, 8, wname, &md, NULL, 0, 0, &ar);
        IMetaDataAssemblyEmit_Release(ae);
        if (FAILED(hr) || !ar) {
            snprintf(why, whylen, "DefineAssemblyRef(%s) failed with HRESULT 0x%08X", define, (unsigned)hr);
            return 0;
        }
    }
    mdTypeRef tr = 0;
    if (FAILED(IMetaDataImport2_FindTypeRef(imp, ar, w, &tr)) || !tr) {
        hr = IMetaDataEmit2_DefineTypeRefByName(emit, ar, w, &tr);
        if (FAILED(hr) || !tr) {
            snprintf(why, whylen, "DefineTypeRefByName(%s) failed with HRESULT 0x%08X", name, (unsigned)hr);
            return 0;
        }
    }
    return tr;
}

/* The modifier's TypeDef (in CoreLib) or TypeRef: an assembly that has the type (netstandard and
 * mscorlib facades may not): the runtime reads the modifier by name, but a resolvable reference
 * is the safe one. */
static mdToken suppress_type(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, char *why, size_t whylen)
{
    static const char *const scopes[] = {"System.Runtime", "System.Private.CoreLib"};
    static const unsigned char token[8] = {0xb0, 0x3f, 0x5f, 0x7f, 0x11, 0xd5, 0x0a, 0x3a};
    return corelib_type(emit, imp, SUPPRESS_TYPE, scopes, 2, "System.Runtime", token, why, whylen);
}

static int sig_token(IMetaDataEmit2 *emit, const unsigned char *sig, size_t len, mdSignature *out, char *why,
                     size_t whylen)
{
    HRESULT hr = IMetaDataEmit2_GetTokenFromSig(emit, sig, (ULONG)len, out);
    if (FAILED(hr) || !*out) {
        snprintf(why, whylen, "GetTokenFromSig failed with HRESULT 0x%08X", (unsigned)hr);
        return -1;
    }
    return 0;
}

/* sig (callconv, count, ret, params) with the modifier before the return type */
static int suppressed_token(IMetaDataEmit2 *emit, const unsigned char *plain, size_t len, mdToken mod,
                            mdSignature *out, char *why, size_t whylen)
{
    unsigned char sig[16];
    sig[0] = 0x09; /* IMAGE_CEE_CS_CALLCONV_UNMANAGED */
    sig[1] = plain[1];
    sig[2] = 0x20; /* ELEMENT_TYPE_CMOD_OPT */
    size_t n = clrmux_sig_typedef_or_ref(mod, sig + 3);
    if (!n || 3 + n + len - 2 > sizeof sig) {
        snprintf(why, whylen, "token 0x%08X cannot be encoded", (unsigned)mod);
        return -1;
    }
    memcpy(sig + 3 + n, plain + 2, len - 2);
    return sig_token(emit, sig, 3 + n + len - 2, out, why, whylen);
}

int clrmux_probe_sigs_get(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, int suppress, struct clrmux_probe_sigs *out,
                          char *why, size_t whylen)
{
    /* unmanaged cdecl: int64(int32), void(int64), void(native int) */
    static const unsigned char enter_sig[] = {0x01, 0x01, 0x0A /* I8 */, 0x08 /* I4 */};
    static const unsigned char void_sig[] = {0x01, 0x01, 0x01 /* VOID */, 0x0A /* I8 */};
    static const unsigned char join_sig[] = {0x01, 0x01, 0x01 /* VOID */, 0x18 /* I */};
    memset(out, 0, sizeof *out);
    if (why && whylen)
        why[0] = 0;
    if (sig_token(emit, enter_sig, sizeof enter_sig, &out->enter, why, whylen) ||
        sig_token(emit, void_sig, sizeof void_sig, &out->exit, why, whylen))
        return -1;
    mdToken mod = suppress ? suppress_type(emit, imp, why, whylen) : 0;
    if (mod && suppressed_token(emit, enter_sig, sizeof enter_sig, mod, &out->enter_fast, why, whylen) == 0 &&
        suppressed_token(emit, void_sig, sizeof void_sig, mod, &out->exit_fast, why, whylen) == 0 &&
        suppressed_token(emit, join_sig, sizeof join_sig, mod, &out->join, why, whylen) == 0) {
        out->suppressed = 1;
        return 0;
    }
    out->enter_fast = out->enter;
    out->exit_fast = out->exit;
    return sig_token(emit, join_sig, sizeof join_sig, &out->join, why, whylen);
}

int clrmux_agent_sigs_get(IMetaDataEmit2 *emit, struct clrmux_agent_sigs *out, char *why, size_t whylen)
{
    /* managed (DEFAULT): object(int64), void(object), void(object, int64) */
    static const unsigned char enter_sig[] = {0x00, 0x01, 0x1C /* OBJECT */, 0x0A /* I8 */};
    static const unsigned char restore_sig[] = {0x00, 0x01, 0x01 /* VOID */, 0x1C};
    static const unsigned char task_sig[] = {0x00, 0x02, 0x01, 0x1C, 0x0A};
    static const unsigned char vtask_sig[] = {0x00, 0x02, 0x1C, 0x1C, 0x0A};
    static const unsigned char join_sig[] = {0x00, 0x00, 0x01};
    static const unsigned char integ_sig[] = {0x00, 0x08, 0x01, 0x1C, 0x1C, 0x1C, 0x1C, 0x1C,
                                              0x1D, 0x1C /* SZARRAY OBJECT */, 0x0A, 0x08 /* I4 */};
    static const unsigned char integ_exit_sig[] = {0x00, 0x03, 0x01, 0x1C, 0x0A, 0x08};
    memset(out, 0, sizeof *out);
    return sig_token(emit, enter_sig, sizeof enter_sig, &out->async_enter, why, whylen) ||
                   sig_token(emit, restore_sig, sizeof restore_sig, &out->async_restore, why, whylen) ||
                   sig_token(emit, task_sig, sizeof task_sig, &out->on_task, why, whylen) ||
                   sig_token(emit, vtask_sig, sizeof vtask_sig, &out->on_value_task, why, whylen) ||
                   sig_token(emit, join_sig, sizeof join_sig, &out->join_root, why, whylen) ||
                   sig_token(emit, integ_sig, sizeof integ_sig, &out->integ_enter, why, whylen) ||
                   sig_token(emit, integ_exit_sig, sizeof integ_exit_sig, &out->integ_exit, why, whylen)
               ? -1
               : 0;
}

int clrmux_ec_capture_ref(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, mdToken *out, char *why, size_t whylen)
{
    /* System.Runtime does not forward ExecutionContext (System.Threading, netstandard and mscorlib
     * do): CoreLib itself, which every module's reference to it resolves to, whatever its version */
    static const char *const scopes[] = {"System.Private.CoreLib"};
    static const unsigned char token[8] = {0x7c, 0xec, 0x85, 0xd7, 0xbe, 0xa7, 0x79, 0x8e};
    *out = 0;
    mdToken ec = corelib_type(emit, imp, "System.Threading.ExecutionContext", scopes, 1, "System.Private.CoreLib",
                              token, why, whylen);
    if (!ec)
        return -1;
    unsigned char sig[8] = {0x00 /* DEFAULT */, 0x00, 0x12 /* CLASS */};
    size_t n = clrmux_sig_typedef_or_ref(ec, sig + 3);
    if (!n) {
        snprintf(why, whylen, "token 0x%08X cannot be encoded", (unsigned)ec);
        return -1;
    }
    WCHAR wname[16];
    clrmux_utf8_to_utf16("Capture", wname, 16);
    if (TypeFromToken(ec) == mdtTypeDef) {
        HRESULT hr = IMetaDataImport2_FindMethod(imp, ec, wname, sig, (ULONG)(3 + n), out);
        if (FAILED(hr) || !*out) {
            snprintf(why, whylen, "FindMethod(ExecutionContext.Capture) failed with HRESULT 0x%08X", (unsigned)hr);
            return -1;
        }
        return 0;
    }
    HRESULT hr = IMetaDataEmit2_DefineMemberRef(emit, ec, wname, sig, (ULONG)(3 + n), out);
    if (FAILED(hr) || !*out) {
        snprintf(why, whylen, "DefineMemberRef(ExecutionContext.Capture) failed with HRESULT 0x%08X", (unsigned)hr);
        return -1;
    }
    return 0;
}
