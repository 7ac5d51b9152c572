/* AssemblyRef, TypeRef and MemberRefs for Activity.Current / Activity.Id (see activity.h). */
#define COBJMACROS
#include "tracer/activity.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/utf16.h"

size_t clrmux_sig_typedef_or_ref(mdToken tok, unsigned char *out)
{
    uint32_t tag;
    switch (TypeFromToken(tok)) {
    case mdtTypeDef: tag = 0; break;
    case mdtTypeRef: tag = 1; break;
    case mdtTypeSpec: tag = 2; break;
    default: return 0;
    }
    uint32_t rid = RidFromToken(tok);
    if (rid > 0x07FFFFFF)
        return 0;
    uint32_t v = rid << 2 | tag;
    if (v < 0x80) {
        out[0] = (unsigned char)v;
        return 1;
    }
    if (v < 0x4000) {
        out[0] = (unsigned char)(0x80 | v >> 8);
        out[1] = (unsigned char)v;
        return 2;
    }
    if (v > 0x1FFFFFFF)
        return 0;
    out[0] = (unsigned char)(0xC0 | v >> 24);
    out[1] = (unsigned char)(v >> 16);
    out[2] = (unsigned char)(v >> 8);
    out[3] = (unsigned char)v;
    return 4;
}

mdAssemblyRef clrmux_find_assembly_ref(IMetaDataAssemblyImport *ai, const char *name)
{
    HCORENUM e = NULL;
    mdAssemblyRef refs[64];
    ULONG n = 0;
    mdAssemblyRef found = 0;
    while (!found && SUCCEEDED(IMetaDataAssemblyImport_EnumAssemblyRefs(ai, &e, refs, 64, &n)) && n) {
        for (ULONG i = 0; i < n && !found; i++) {
            WCHAR w[256];
            ULONG len = 0;
            char u[256];
            if (FAILED(IMetaDataAssemblyImport_GetAssemblyRefProps(ai, refs[i], NULL, NULL, w, 256, &len, NULL, NULL,
                                                                  NULL, NULL)))
                continue;
            clrmux_utf16_to_utf8(w, len, u, sizeof u);
            if (strcasecmp(u, name) == 0)
                found = refs[i];
        }
    }
    if (e)
        IMetaDataAssemblyImport_CloseEnum(ai, e);
    return found;
}

int clrmux_activity_refs(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, mdMemberRef *get_current, mdMemberRef *get_id,
                         char *why, size_t whylen)
{
    IMetaDataAssemblyImport *ai = NULL;
    IMetaDataAssemblyEmit *ae = NULL;
    int rc = -1;
    HRESULT hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataAssemblyImport, (void **)&ai);
    if (FAILED(hr) || !ai) {
        snprintf(why, whylen, "no IMetaDataAssemblyImport (HRESULT 0x%08X)", (unsigned)hr);
        goto out;
    }
    mdAssemblyRef ar = clrmux_find_assembly_ref(ai, CLRMUX_DIAGNOSTICSOURCE);
    if (!ar) {
        hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataAssemblyEmit, (void **)&ae);
        if (FAILED(hr) || !ae) {
            snprintf(why, whylen, "no IMetaDataAssemblyEmit (HRESULT 0x%08X)", (unsigned)hr);
            goto out;
        }
        static const unsigned char token[8] = {0xcc, 0x7b, 0x13, 0xff, 0xcd, 0x2d, 0xdd, 0x51};
        WCHAR wname[64];
        clrmux_utf8_to_utf16(CLRMUX_DIAGNOSTICSOURCE, wname, 64);
        ASSEMBLYMETADATA md;
        memset(&md, 0, sizeof md);
        hr = IMetaDataAssemblyEmit_DefineAssemblyRef(ae, token, sizeof token, wname, &md, NULL, 0, 0, &ar);
        if (FAILED(hr) || !ar) {
            snprintf(why, whylen, "DefineAssemblyRef(%s) failed with HRESULT 0x%08X", CLRMUX_DIAGNOSTICSOURCE,
                     (unsigned)hr);
            goto out;
        }
    }
    WCHAR w[64];
    mdTypeRef tr = 0;
    clrmux_utf8_to_utf16("System.Diagnostics.Activity", w, 64);
    if (FAILED(IMetaDataImport2_FindTypeRef(imp, ar, w, &tr)) || !tr) {
        hr = IMetaDataEmit2_DefineTypeRefByName(emit, ar, w, &tr);
        if (FAILED(hr) || !tr) {
            snprintf(why, whylen, "DefineTypeRefByName(System.Diagnostics.Activity) failed with HRESULT 0x%08X",
                     (unsigned)hr);
            goto out;
        }
    }
    unsigned char sig_current[8] = {0x00 /* DEFAULT */, 0x00 /* no params */, 0x12 /* CLASS */};
    size_t n = clrmux_sig_typedef_or_ref(tr, sig_current + 3);
    static const unsigned char sig_id[] = {0x20 /* HASTHIS */, 0x00, 0x0E /* STRING */};
    if (!n) {
        snprintf(why, whylen, "TypeRef 0x%08X cannot be encoded", (unsigned)tr);
        goto out;
    }
    clrmux_utf8_to_utf16("get_Current", w, 64);
    hr = IMetaDataEmit2_DefineMemberRef(emit, tr, w, sig_current, (ULONG)(3 + n), get_current);
    if (SUCCEEDED(hr)) {
        clrmux_utf8_to_utf16("get_Id", w, 64);
        hr = IMetaDataEmit2_DefineMemberRef(emit, tr, w, sig_id, sizeof sig_id, get_id);
    }
    if (FAILED(hr)) {
        snprintf(why, whylen, "DefineMemberRef(Activity) failed with HRESULT 0x%08X", (unsigned)hr);
        goto out;
    }
    rc = 0;
out:
    if (ae)
        IMetaDataAssemblyEmit_Release(ae);
    if (ai)
        IMetaDataAssemblyImport_Release(ai);
    return rc;
}

/* The first static field of `td` that lives in the class's statics (not a literal, not RVA
 * data, not [ThreadStatic]), or 0. */
static mdFieldDef first_static_field(IMetaDataImport *imp, mdTypeDef td)
{
    static const WCHAR thread_static[] = {'S', 'y', 's', 't', 'e', 'm', '.', 'T', 'h', 'r', 'e', 'a', 'd', 'S',
                                          't', 'a', 't', 'i', 'c', 'A', 't', 't', 'r', 'i', 'b', 'u', 't', 'e', 0};
    HCORENUM e = NULL;
    mdFieldDef f[64];
    ULONG n = 0;
    mdFieldDef found = 0;
    if (SUCCEEDED(IMetaDataImport_EnumFields(imp, &e, td, f, 64, &n)))
        for (ULONG i = 0; i < n && !found; i++) {
            DWORD attr = 0;
            const void *data = NULL;
            ULONG len = 0;
            if (SUCCEEDED(IMetaDataImport_GetFieldProps(imp, f[i], NULL, NULL, 0, NULL, &attr, NULL, NULL, NULL, NULL,
                                                       NULL)) &&
                (attr & 0x10 /* fdStatic */) && !(attr & (0x40 /* fdLiteral */ | 0x100 /* fdHasFieldRVA */)) &&
                IMetaDataImport_GetCustomAttributeByName(imp, f[i], thread_static, &data, &len) != S_OK)
                found = f[i];
        }
    IMetaDataImport_CloseEnum(imp, e);
    return found;
}

int clrmux_activity_find(ICorProfilerInfo3 *info, ModuleID ds, struct clrmux_activity_class *out)
{
    static const WCHAR activity[] = {'S', 'y', 's', 't', 'e', 'm', '.', 'D', 'i', 'a', 'g', 'n', 'o', 's', 't',
                                     'i', 'c', 's', '.', 'A', 'c', 't', 'i', 'v', 'i', 't', 'y', 0};
    memset(out, 0, sizeof *out);
    IUnknown *unk = NULL;
    if (!info || !ds || FAILED(ICorProfilerInfo3_GetModuleMetaData(info, ds, 0 /* ofRead */, &IID_IMetaDataImport, &unk)) ||
        !unk)
        return -1;
    IMetaDataImport *imp = (IMetaDataImport *)unk;
    if (SUCCEEDED(IMetaDataImport_FindTypeDefByName(imp, activity, 0, &out->type)))
        out->field = first_static_field(imp, out->type);
    IMetaDataImport_Release(imp);
    AssemblyID as = 0;
    if (!out->field || FAILED(ICorProfilerInfo3_GetModuleInfo(info, ds, NULL, 0, NULL, NULL, &as)) ||
        FAILED(ICorProfilerInfo3_GetAssemblyInfo(info, as, 0, NULL, NULL, &out->appdomain, NULL)))
        return -1;
    out->module = ds;
    return 0;
}

int clrmux_activity_initialized(ICorProfilerInfo3 *info, const struct clrmux_activity_class *a, ClassID cls)
{
    void *addr = NULL;
    /* answers CORPROF_E_DATAINCOMPLETE until the class's static constructor has run */
    return info && a->field && cls &&
           ICorProfilerInfo3_GetAppDomainStaticAddress(info, cls, a->field, a->appdomain, &addr) == S_OK && addr;
}
