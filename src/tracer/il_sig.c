/* Signature helpers (ECMA-335 II.23.2): compressed integers, method signatures and the
 * local variable signature append (clrmux_il_sig_*, clrmux_il_parse_method_sig,
 * clrmux_il_locals_append). */
#include "tracer/il_internal.h"

/* ---- signatures (II.23.2) ---- */

int clrmux_il_sig_uncompress(const uint8_t *p, size_t len, uint32_t *val)
{
    if (!p || !len)
        return CLRMUX_IL_E_TRUNCATED;
    if (!(p[0] & 0x80)) {
        *val = p[0];
        return 1;
    }
    if ((p[0] & 0xC0) == 0x80) {
        if (len < 2)
            return CLRMUX_IL_E_TRUNCATED;
        *val = (uint32_t)(p[0] & 0x3F) << 8 | p[1];
        return 2;
    }
    if ((p[0] & 0xE0) == 0xC0) {
        if (len < 4)
            return CLRMUX_IL_E_TRUNCATED;
        *val = (uint32_t)(p[0] & 0x1F) << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        return 4;
    }
    return CLRMUX_IL_E_FORMAT;
}

int clrmux_il_sig_compress(uint32_t v, uint8_t out[4])
{
    if (v <= 0x7F) {
        out[0] = (uint8_t)v;
        return 1;
    }
    if (v <= 0x3FFF) {
        out[0] = (uint8_t)(0x80 | v >> 8), out[1] = (uint8_t)v;
        return 2;
    }
    if (v <= 0x1FFFFFFF) {
        out[0] = (uint8_t)(0xC0 | v >> 24), out[1] = (uint8_t)(v >> 16);
        out[2] = (uint8_t)(v >> 8), out[3] = (uint8_t)v;
        return 4;
    }
    return CLRMUX_IL_E_RANGE;
}

typedef struct { const uint8_t *p; size_t len, pos; } sigrd;

static int sig_u(sigrd *r, uint32_t *v)
{
    int n = clrmux_il_sig_uncompress(r->p + r->pos, r->len - r->pos, v);
    if (n > 0)
        r->pos += (size_t)n;
    return n < 0 ? n : 0;
}

static int sig_byte(sigrd *r, uint8_t *v)
{
    if (r->pos >= r->len)
        return CLRMUX_IL_E_TRUNCATED;
    *v = r->p[r->pos++];
    return 0;
}

static int sig_peek(const sigrd *r) { return r->pos < r->len ? r->p[r->pos] : -1; }

static int skip_cmods(sigrd *r)
{
    uint32_t tok;
    int rc = 0;
    while (!rc && (sig_peek(r) == CLRMUX_ELEMENT_TYPE_CMOD_REQD ||
                   sig_peek(r) == CLRMUX_ELEMENT_TYPE_CMOD_OPT)) {
        r->pos++;
        rc = sig_u(r, &tok);
    }
    return rc;
}

static int read_method_sig(sigrd *r, int depth, clrmux_il_method_sig *ms);

/* Skip one Type (II.23.2.12), also accepting the local/param/ret prefixes
 * CustomMod, PINNED, BYREF and the VOID/TYPEDBYREF leaves. */
static int skip_type(sigrd *r, int depth)
{
    uint8_t et, b;
    uint32_t v, n;
    int rc;
    if (depth > SIG_MAX_DEPTH)
        return CLRMUX_IL_E_FORMAT;
    if ((rc = sig_byte(r, &et)))
        return rc;
    switch (et) {
    case 0x01: case 0x02: case 0x03: case 0x04: case 0x05: case 0x06: case 0x07: case 0x08:
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x0E: /* VOID..STRING */
    case CLRMUX_ELEMENT_TYPE_TYPEDBYREF: case CLRMUX_ELEMENT_TYPE_I: case CLRMUX_ELEMENT_TYPE_U:
    case CLRMUX_ELEMENT_TYPE_OBJECT:
        return 0;
    case CLRMUX_ELEMENT_TYPE_PTR: case CLRMUX_ELEMENT_TYPE_SZARRAY:
        return (rc = skip_cmods(r)) ? rc : skip_type(r, depth + 1);
    case CLRMUX_ELEMENT_TYPE_BYREF: case CLRMUX_ELEMENT_TYPE_PINNED:
        return skip_type(r, depth + 1);
    case CLRMUX_ELEMENT_TYPE_CMOD_REQD: case CLRMUX_ELEMENT_TYPE_CMOD_OPT:
        return (rc = sig_u(r, &v)) ? rc : skip_type(r, depth + 1);
    case CLRMUX_ELEMENT_TYPE_VALUETYPE: case CLRMUX_ELEMENT_TYPE_CLASS:
    case CLRMUX_ELEMENT_TYPE_VAR: case CLRMUX_ELEMENT_TYPE_MVAR:
        return sig_u(r, &v);
    case CLRMUX_ELEMENT_TYPE_ARRAY: /* Type rank NumSizes Size* NumLoBounds LoBound* */
        if ((rc = skip_type(r, depth + 1)) || (rc = sig_u(r, &v)) || (rc = sig_u(r, &n)))
            return rc;
        for (uint32_t i = 0; i < n; i++)
            if ((rc = sig_u(r, &v)))
                return rc;
        if ((rc = sig_u(r, &n)))
            return rc;
        for (uint32_t i = 0; i < n; i++) /* signed compressed: same widths */
            if ((rc = sig_u(r, &v)))
                return rc;
        return 0;
    case CLRMUX_ELEMENT_TYPE_GENERICINST:
        if ((rc = sig_byte(r, &b)))
            return rc;
        if (b != CLRMUX_ELEMENT_TYPE_CLASS && b != CLRMUX_ELEMENT_TYPE_VALUETYPE)
            return CLRMUX_IL_E_FORMAT;
        if ((rc = sig_u(r, &v)) || (rc = sig_u(r, &n)))
            return rc;
        if (!n)
            return CLRMUX_IL_E_FORMAT;
        for (uint32_t i = 0; i < n; i++)
            if ((rc = skip_type(r, depth + 1)))
                return rc;
        return 0;
    case CLRMUX_ELEMENT_TYPE_FNPTR: {
        clrmux_il_method_sig ms;
        return read_method_sig(r, depth + 1, &ms);
    }
    default:
        return CLRMUX_IL_E_FORMAT;
    }
}

static int read_method_sig(sigrd *r, int depth, clrmux_il_method_sig *ms)
{
    int rc;
    memset(ms, 0, sizeof *ms);
    if ((rc = sig_byte(r, &ms->call_conv)))
        return rc;
    uint8_t kind = ms->call_conv & 0x0F;
    if ((kind > 5 && kind != 9) || (ms->call_conv & 0x80))
        return CLRMUX_IL_E_FORMAT; /* field/local/property/instantiation: not a method */
    if ((ms->call_conv & CLRMUX_SIG_GENERIC) && (rc = sig_u(r, &ms->gen_param_count)))
        return rc;
    if ((rc = sig_u(r, &ms->param_count)))
        return rc;
    ms->ret_offset = r->pos;
    if ((rc = skip_cmods(r)))
        return rc;
    ms->returns_void = sig_peek(r) == CLRMUX_ELEMENT_TYPE_VOID;
    if ((rc = skip_type(r, depth + 1)))
        return rc;
    ms->ret_len = r->pos - ms->ret_offset;
    for (uint32_t i = 0; i < ms->param_count; i++) {
        if (sig_peek(r) == CLRMUX_ELEMENT_TYPE_SENTINEL)
            r->pos++; /* vararg call site: the remaining params are the extra ones */
        if (sig_peek(r) == CLRMUX_ELEMENT_TYPE_VOID)
            return CLRMUX_IL_E_FORMAT;
        size_t at = r->pos;
        if ((rc = skip_type(r, depth + 1)))
            return rc;
        if (i < CLRMUX_IL_SIG_PARAMS) {
            ms->param_offset[i] = at;
            ms->param_len[i] = r->pos - at;
        }
    }
    return 0;
}

int clrmux_il_parse_method_sig(const uint8_t *sig, size_t len, clrmux_il_method_sig *out,
                               char *err, size_t errlen)
{
    if (!sig || !out)
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    sigrd r = {sig, len, 0};
    int rc = read_method_sig(&r, 0, out);
    if (rc)
        return fail(err, errlen, rc, "%s method signature near byte %zu",
                    rc == CLRMUX_IL_E_TRUNCATED ? "truncated" : "malformed", r.pos);
    return 0;
}

int clrmux_il_locals_append(const uint8_t *sig, size_t sig_len, const uint8_t *types,
                            size_t types_len, uint32_t n_types, uint8_t **out, size_t *out_len,
                            uint32_t *first_new, char *err, size_t errlen)
{
    if (!out || !out_len || !first_new || (!sig && sig_len) || (!types && types_len))
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    *out = NULL;
    *out_len = 0;
    uint32_t count = 0;
    size_t body = 0;
    if (sig_len) {
        if (sig[0] != CLRMUX_SIG_LOCAL)
            return fail(err, errlen, CLRMUX_IL_E_FORMAT,
                        "not a LocalVarSig: lead byte 0x%02x, expected 0x07", sig[0]);
        int n = clrmux_il_sig_uncompress(sig + 1, sig_len - 1, &count);
        if (n < 0)
            return fail(err, errlen, n, "bad local count in LocalVarSig");
        body = 1 + (size_t)n;
    }
    sigrd r = {types, types_len, 0};
    for (uint32_t i = 0; i < n_types; i++) {
        int rc = skip_type(&r, 0);
        if (rc)
            return fail(err, errlen, rc, "new local type %u is %s", i,
                        rc == CLRMUX_IL_E_TRUNCATED ? "truncated" : "malformed");
    }
    if (r.pos != types_len)
        return fail(err, errlen, CLRMUX_IL_E_FORMAT,
                    "%zu bytes left after the %u new local types", types_len - r.pos, n_types);
    if ((uint64_t)count + n_types > UINT16_MAX)
        return fail(err, errlen, CLRMUX_IL_E_RANGE, "too many locals (%u + %u)", count, n_types);
    uint8_t enc[4];
    int elen = clrmux_il_sig_compress(count + n_types, enc);
    size_t total = 1 + (size_t)elen + (sig_len - body) + types_len;
    uint8_t *p = malloc(total);
    if (!p)
        return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
    p[0] = CLRMUX_SIG_LOCAL;
    memcpy(p + 1, enc, (size_t)elen);
    if (sig_len > body)
        memcpy(p + 1 + elen, sig + body, sig_len - body);
    if (types_len)
        memcpy(p + 1 + elen + (sig_len - body), types, types_len);
    *out = p;
    *out_len = total;
    *first_new = count;
    return 0;
}
