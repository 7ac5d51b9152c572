/* The managed agent's way in (see agent_boot.h): CoreLib's ProcessStartupHooks(string) gets a
 * prefix that names the agent as one more startup hook. */
#define COBJMACROS
#include "tracer/agent_boot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hresult.h"
#include "common/mdtables.h"
#include "common/utf16.h"
#include "tracer/il.h"

/* II.23.2.1: static void (string), static bool (string), static string (string, string),
 * instance void (char*) */
static const uint8_t sig_boot[] = {0x00, 0x01, CLRMUX_ELEMENT_TYPE_VOID, CLRMUX_ELEMENT_TYPE_STRING};
static const uint8_t sig_empty[] = {0x00, 0x01, CLRMUX_ELEMENT_TYPE_BOOLEAN, CLRMUX_ELEMENT_TYPE_STRING};
static const uint8_t sig_concat[] = {0x00, 0x02, CLRMUX_ELEMENT_TYPE_STRING, CLRMUX_ELEMENT_TYPE_STRING,
                                     CLRMUX_ELEMENT_TYPE_STRING};
static const uint8_t sig_ctor[] = {CLRMUX_SIG_HASTHIS, 0x01, CLRMUX_ELEMENT_TYPE_VOID, CLRMUX_ELEMENT_TYPE_PTR,
                                   0x03 /* CHAR */};

static WCHAR *utf16_dup(const char *prefix, const char *s)
{
    size_t n = strlen(prefix) + strlen(s) + 1;
    WCHAR *w = calloc(n, sizeof *w);
    char *u = malloc(n);
    if (w && u) {
        snprintf(u, n, "%s%s", prefix, s);
        clrmux_utf8_to_utf16(u, w, n);
    }
    free(u);
    return w;
}

int clrmux_agent_boot_find(const void *base, const char *agent_path, struct clrmux_agent_boot *b, char *why,
                           size_t whylen)
{
    memset(b, 0, sizeof *b);
    size_t size = base ? clrmux_md_mapped_size(base) : 0;
    const uint8_t *img = base;
    uint32_t m = 0, e = 0, c = 0, k = 0;
    if (!size || clrmux_md_find_method_sig(img, size, 1, "System", "StartupHookProvider", "ProcessStartupHooks",
                                           sig_boot, sizeof sig_boot, &m) != 0) {
        snprintf(why, whylen, "CoreLib's metadata tables cannot be read here");
        return -1;
    }
    clrmux_md_find_method_sig(img, size, 1, "System", "String", "IsNullOrEmpty", sig_empty, sizeof sig_empty, &e);
    clrmux_md_find_method_sig(img, size, 1, "System", "String", "Concat", sig_concat, sizeof sig_concat, &c);
    clrmux_md_find_method_sig(img, size, 1, "System", "String", ".ctor", sig_ctor, sizeof sig_ctor, &k);
    b->method = (mdMethodDef)m, b->is_null_or_empty = (mdMethodDef)e, b->concat = (mdMethodDef)c, b->ctor = (mdMethodDef)k;
    if (!b->method || !b->is_null_or_empty || !b->concat || !b->ctor) {
        snprintf(why, whylen, "%s", !b->method ? "System.StartupHookProvider::ProcessStartupHooks(string) is not in "
                                                 "CoreLib (a runtime before .NET 8?)"
                                               : "System.String's IsNullOrEmpty, Concat or .ctor(char*) not found");
        return -1;
    }
#ifdef _WIN32
    b->sep_path = utf16_dup(";", agent_path);
#else
    b->sep_path = utf16_dup(":", agent_path);
#endif
    b->path = utf16_dup("", agent_path);
    if (!b->path || !b->sep_path) {
        free(b->path), free(b->sep_path);
        b->path = b->sep_path = NULL;
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

static void b_string(clrmux_il_builder *b, const struct clrmux_agent_boot *boot, const WCHAR *s)
{
    clrmux_il_b_op_arg(b, CLRMUX_IL_OP_LDC_I8, (int64_t)(intptr_t)s);
    clrmux_il_b_op(b, 0xD3 /* conv.i */);
    clrmux_il_b_token(b, CLRMUX_IL_OP_NEWOBJ, (uint32_t)boot->ctor);
}

int clrmux_agent_boot_rewrite(ICorProfilerInfo5 *info, ModuleID mod, const struct clrmux_agent_boot *boot, char *why,
                              size_t whylen)
{
    LPCBYTE il = NULL;
    ULONG il_size = 0;
    HRESULT hr = ICorProfilerInfo5_GetILFunctionBody(info, mod, boot->method, &il, &il_size);
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
    uint8_t *code = NULL;
    size_t code_len = 0;
    clrmux_il_builder b;
    clrmux_il_b_init(&b);
    int rc = -1;
    /* if (string.IsNullOrEmpty(arg0)) arg0 = new string(path);
     * else arg0 = string.Concat(arg0, new string(sep_path)); */
    uint32_t empty = clrmux_il_b_label(&b), end = clrmux_il_b_label(&b);
    clrmux_il_b_var(&b, CLRMUX_IL_LDARG, 0);
    clrmux_il_b_token(&b, CLRMUX_IL_OP_CALL, (uint32_t)boot->is_null_or_empty);
    clrmux_il_b_branch(&b, CLRMUX_IL_OP_BRTRUE_S, empty);
    clrmux_il_b_var(&b, CLRMUX_IL_LDARG, 0);
    b_string(&b, boot, boot->sep_path);
    clrmux_il_b_token(&b, CLRMUX_IL_OP_CALL, (uint32_t)boot->concat);
    clrmux_il_b_var(&b, CLRMUX_IL_STARG, 0);
    clrmux_il_b_branch(&b, CLRMUX_IL_OP_BR_S, end);
    clrmux_il_b_mark(&b, empty);
    b_string(&b, boot, boot->path);
    clrmux_il_b_var(&b, CLRMUX_IL_STARG, 0);
    clrmux_il_b_mark(&b, end);
    if (clrmux_il_b_finish(&b, err, sizeof err) || clrmux_il_prepend(&body, b.data, b.len, 2, err, sizeof err) ||
        clrmux_il_emit(&body, &code, &code_len, err, sizeof err)) {
        snprintf(why, whylen, "cannot build the new IL: %s", err);
        goto out;
    }
    IMethodMalloc *alloc = NULL;
    if (FAILED(hr = ICorProfilerInfo5_GetILFunctionBodyAllocator(info, mod, &alloc)) || !alloc) {
        snprintf(why, whylen, "GetILFunctionBodyAllocator failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    void *mem = IMethodMalloc_Alloc(alloc, (ULONG)code_len);
    IMethodMalloc_Release(alloc);
    if (!mem) {
        snprintf(why, whylen, "IMethodMalloc::Alloc(%zu) failed", code_len);
        goto out;
    }
    memcpy(mem, code, code_len);
    if (FAILED(hr = ICorProfilerInfo5_SetILFunctionBody(info, mod, boot->method, mem))) {
        snprintf(why, whylen, "SetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    snprintf(why, whylen, "%u -> %zu bytes of IL", (unsigned)il_size, code_len);
    rc = 0;
out:
    free(code);
    clrmux_il_b_free(&b);
    clrmux_il_body_free(&body);
    return rc;
}
