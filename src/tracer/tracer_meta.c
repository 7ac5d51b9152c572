/* Metadata names for the tracer's files (see tracer_impl.h): a type's full name, UTF-16 to
 * UTF-8. */
#include "tracer/tracer_impl.h"

void tracer_to_utf8(const WCHAR *s, size_t len, char *out, size_t n) { clrmux_utf16_to_utf8(s, len, out, n); }

/* ---- metadata ------------------------------------------------------------------------ */

/* Full name of a TypeDef ("Ns.Outer+Inner") or TypeRef. */
int tracer_type_full_name(IMetaDataImport2 *imp, mdToken tok, char *out, size_t outsz, int depth)
{
    WCHAR w[512];
    ULONG len = 0;
    char name[512];
    if (depth > 8)
        return -1;
    if (TypeFromToken(tok) == mdtTypeDef) {
        DWORD flags = 0;
        mdToken ext = 0;
        if (FAILED(IMetaDataImport2_GetTypeDefProps(imp, tok, w, 512, &len, &flags, &ext)))
            return -1;
        clrmux_utf16_to_utf8(w, len, name, sizeof name);
        mdTypeDef encl = 0;
        if ((flags & 0x6) && SUCCEEDED(IMetaDataImport2_GetNestedClassProps(imp, tok, &encl)) && encl) {
            char outer[512];
            if (tracer_type_full_name(imp, encl, outer, sizeof outer, depth + 1) == 0) {
                snprintf(out, outsz, "%s+%s", outer, name);
                return 0;
            }
        }
        snprintf(out, outsz, "%s", name);
        return 0;
    }
    if (TypeFromToken(tok) == mdtTypeRef) {
        mdToken scope = 0;
        if (FAILED(IMetaDataImport2_GetTypeRefProps(imp, tok, &scope, w, 512, &len)))
            return -1;
        clrmux_utf16_to_utf8(w, len, name, sizeof name);
        if (TypeFromToken(scope) == mdtTypeRef) {
            char outer[512];
            if (tracer_type_full_name(imp, scope, outer, sizeof outer, depth + 1) == 0) {
                snprintf(out, outsz, "%s+%s", outer, name);
                return 0;
            }
        }
        snprintf(out, outsz, "%s", name);
        return 0;
    }
    return -1;
}

