/* The managed agent's way in (see agent_boot.h): CoreLib's ProcessStartupHooks(string) gets a
 * prefix that names the agent as one more startup hook. */
#define COBJMACROS
#include "tracer/agent_boot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/utf16.h"
#include "tracer/il.h"

#define ofRead 0x0u
#define ofWrite 0x1u

static mdTypeDef find_type(IMetaDataImport2 *imp, const char *name)
{
    WCHAR w[128];
    mdTypeDef td = 0;
    clrmux_utf8_to_utf16(name, w, 128);
    return SUCCEEDED(IMetaDataImport2_FindTypeDefByName(imp, w, mdTokenNil, &td)) ? td : 0;
}

static mdMethodDef find_method(IMetaDataImport2 *imp, mdTypeDef td, const char *name, const uint8_t *sig, ULONG siglen)
{
    WCHAR w[128];
    mdMethodDef md = 0;
    clrmux_utf8_to_utf16(name, w, 128);
    return td && SUCCEEDED(IMetaDataImport2_FindMethod(imp, td, w, sig, siglen, &md)) ? md : 0;
}

/* static void (string) / static bool (string) / static string (string, string): II.23.2.1 */
static const uint8_t sig_void_string[] = {0x00, 0x01, CLRMUX_ELEMENT_TYPE_VOID, CLRMUX_ELEMENT_TYPE_STRING};
static const uint8_t sig_bool_string[] = {0x00, 0x01, CLRMUX_ELEMENT_TYPE_BOOLEAN, CLRMUX_ELEMENT_TYPE_STRING};
static const uint8_t sig_concat[] = {0x00, 0x02, CLRMUX_ELEMENT_TYPE_STRING, CLRMUX_ELEMENT_TYPE_STRING,
                                     CLRMUX_ELEMENT_TYPE_STRING};

mdMethodDef clrmux_agent_boot_find(IMetaDataImport2 *imp)
{
    return find_method(imp, find_type(imp, CLRMUX_AGENT_BOOT_TYPE), CLRMUX_AGENT_BOOT_METHOD, sig_void_string,
                       sizeof sig_void_string);
}

static int user_string(IMetaDataEmit2 *emit, const char *s, mdString *out)
{
    size_t n = strlen(s);
    WCHAR *w = calloc(n + 1, sizeof *w);
    if (!w)
        return -1;
    size_t len = clrmux_utf8_to_utf16(s, w, n + 1);
    HRESULT hr = IMetaDataEmit2_DefineUserString(emit, w, (ULONG)len, out);
    free(w);
    return SUCCEEDED(hr) && *out ? 0 : -1;
}

int clrmux_agent_boot_rewrite(ICorProfilerInfo5 *info, ModuleID mod, mdMethodDef tok, ICorProfilerFunctionControl *fc,
                              const char *agent_path, char *why, size_t whylen)
{
    LPCBYTE il = NULL;
    ULONG il_size = 0;
    HRESULT hr = ICorProfilerInfo5_GetILFunctionBody(info, mod, tok, &il, &il_size);
    if (FAILED(hr) || !il) {
        snprintf(why, whylen, "GetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        return -1;
    }
    char err[256];
    clrmux_il_body body;
    if (clrmux_il_parse(il, il_size, &body, NULL, err, sizeof err)) {
        snprintf(why, whylen, "cannot parse its IL: %s", err);
        return -1;
    }
    IUnknown *unk = NULL;
    IMetaDataEmit2 *emit = NULL;
    IMetaDataImport2 *imp = NULL;
    uint8_t *code = NULL;
    size_t code_len = 0;
    clrmux_il_builder b;
    clrmux_il_b_init(&b);
    int rc = -1;
    hr = ICorProfilerInfo5_GetModuleMetaData(info, mod, ofRead | ofWrite, &IID_IMetaDataEmit2, &unk);
    if (FAILED(hr) || !unk) {
        snprintf(why, whylen, "GetModuleMetaData(ofWrite) failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    emit = (IMetaDataEmit2 *)unk;
    if (FAILED(hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataImport2, (void **)&imp)) || !imp) {
        snprintf(why, whylen, "no IMetaDataImport2 (HRESULT %s)", HR_STR(hr));
        goto out;
    }
    mdTypeDef str = find_type(imp, "System.String");
    mdMethodDef is_empty = find_method(imp, str, "IsNullOrEmpty", sig_bool_string, sizeof sig_bool_string);
    mdMethodDef concat = find_method(imp, str, "Concat", sig_concat, sizeof sig_concat);
    if (!is_empty || !concat) {
        snprintf(why, whylen, "System.String::IsNullOrEmpty(string) or Concat(string, string) not found in CoreLib");
        goto out;
    }
    char sep_path[4096 + 2];
#ifdef _WIN32
    snprintf(sep_path, sizeof sep_path, ";%s", agent_path);
#else
    snprintf(sep_path, sizeof sep_path, ":%s", agent_path);
#endif
    mdString s_path = 0, s_sep_path = 0;
    if (user_string(emit, agent_path, &s_path) || user_string(emit, sep_path, &s_sep_path)) {
        snprintf(why, whylen, "DefineUserString failed");
        goto out;
    }
    /* if (string.IsNullOrEmpty(arg0)) arg0 = path; else arg0 = string.Concat(arg0, sep + path); */
    uint32_t empty = clrmux_il_b_label(&b), end = clrmux_il_b_label(&b);
    clrmux_il_b_var(&b, CLRMUX_IL_LDARG, 0);
    clrmux_il_b_token(&b, CLRMUX_IL_OP_CALL, (uint32_t)is_empty);
    clrmux_il_b_branch(&b, CLRMUX_IL_OP_BRTRUE_S, empty);
    clrmux_il_b_var(&b, CLRMUX_IL_LDARG, 0);
    clrmux_il_b_token(&b, CLRMUX_IL_OP_LDSTR, (uint32_t)s_sep_path);
    clrmux_il_b_token(&b, CLRMUX_IL_OP_CALL, (uint32_t)concat);
    clrmux_il_b_var(&b, CLRMUX_IL_STARG, 0);
    clrmux_il_b_branch(&b, CLRMUX_IL_OP_BR_S, end);
    clrmux_il_b_mark(&b, empty);
    clrmux_il_b_token(&b, CLRMUX_IL_OP_LDSTR, (uint32_t)s_path);
    clrmux_il_b_var(&b, CLRMUX_IL_STARG, 0);
    clrmux_il_b_mark(&b, end);
    if (clrmux_il_b_finish(&b, err, sizeof err) || clrmux_il_prepend(&body, b.data, b.len, 2, err, sizeof err) ||
        clrmux_il_emit(&body, &code, &code_len, err, sizeof err)) {
        snprintf(why, whylen, "cannot build the new IL: %s", err);
        goto out;
    }
    if (FAILED(hr = ICorProfilerFunctionControl_SetILFunctionBody(fc, (ULONG)code_len, code))) {
        snprintf(why, whylen, "SetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    snprintf(why, whylen, "%u -> %zu bytes of IL", (unsigned)il_size, code_len);
    rc = 0;
out:
    if (imp)
        IMetaDataImport2_Release(imp);
    if (emit)
        IMetaDataEmit2_Release(emit);
    free(code);
    clrmux_il_b_free(&b);
    clrmux_il_body_free(&body);
    return rc;
}
