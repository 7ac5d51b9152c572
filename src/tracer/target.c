/* Trace targets and parameter-type matching (see target.h). */
#include "tracer/target.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "tracer/il.h"

static int fail(char *err, size_t errlen, const char *msg, const char *arg)
{
    if (err && errlen)
        snprintf(err, errlen, msg, arg);
    return -1;
}

/* ---- canonical type names ----------------------------------------------------------- */

static const struct { const char *alias, *canon; } aliases[] = {
    {"bool", "bool"}, {"System.Boolean", "bool"}, {"Boolean", "bool"},
    {"char", "char"}, {"System.Char", "char"}, {"Char", "char"},
    {"sbyte", "sbyte"}, {"System.SByte", "sbyte"}, {"SByte", "sbyte"},
    {"byte", "byte"}, {"System.Byte", "byte"}, {"Byte", "byte"},
    {"short", "short"}, {"System.Int16", "short"}, {"Int16", "short"},
    {"ushort", "ushort"}, {"System.UInt16", "ushort"}, {"UInt16", "ushort"},
    {"int", "int"}, {"System.Int32", "int"}, {"Int32", "int"},
    {"uint", "uint"}, {"System.UInt32", "uint"}, {"UInt32", "uint"},
    {"long", "long"}, {"System.Int64", "long"}, {"Int64", "long"},
    {"ulong", "ulong"}, {"System.UInt64", "ulong"}, {"UInt64", "ulong"},
    {"float", "float"}, {"System.Single", "float"}, {"Single", "float"},
    {"double", "double"}, {"System.Double", "double"}, {"Double", "double"},
    {"string", "string"}, {"System.String", "string"}, {"String", "string"},
    {"object", "object"}, {"System.Object", "object"}, {"Object", "object"},
    {"nint", "nint"}, {"System.IntPtr", "nint"}, {"IntPtr", "nint"},
    {"nuint", "nuint"}, {"System.UIntPtr", "nuint"}, {"UIntPtr", "nuint"},
    {"void", "void"}, {"System.Void", "void"},
    {"System.TypedReference", "System.TypedReference"},
};

static const char *alias_of(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strlen(aliases[i].alias) == n && memcmp(aliases[i].alias, name, n) == 0)
            return aliases[i].canon;
    return NULL;
}

static int is_punct(char c) { return c == '<' || c == '>' || c == ',' || c == '[' || c == ']' || c == '&' || c == '*'; }

/* Appends s[0..n) to out at *pos. */
static int put(char *out, size_t outsz, size_t *pos, const char *s, size_t n)
{
    if (*pos + n + 1 > outsz)
        return -1;
    memcpy(out + *pos, s, n);
    *pos += n;
    out[*pos] = 0;
    return 0;
}

int clrmux_target_canon_type(const char *in, char *out, size_t outsz)
{
    if (!outsz)
        return -1;
    out[0] = 0;
    /* drop whitespace, remembering a leading ref/out/in keyword */
    char buf[CLRMUX_TARGET_NAME_MAX * 2];
    size_t n = 0;
    while (isspace((unsigned char)*in))
        in++;
    int byref = 0;
    for (const char *kw[] = {"ref", "out", "in"}, **k = kw; k < kw + 3; k++) {
        size_t l = strlen(*k);
        if (strncmp(in, *k, l) == 0 && isspace((unsigned char)in[l])) {
            byref = 1;
            in += l;
            break;
        }
    }
    for (; *in; in++) {
        if (isspace((unsigned char)*in))
            continue;
        if (n + 2 >= sizeof buf)
            return -1;
        buf[n++] = *in;
    }
    buf[n] = 0;
    size_t pos = 0;
    for (size_t i = 0; i < n;) {
        if (is_punct(buf[i])) {
            if (put(out, outsz, &pos, &buf[i], 1))
                return -1;
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !is_punct(buf[j]))
            j++;
        const char *a = alias_of(&buf[i], j - i);
        if (put(out, outsz, &pos, a ? a : &buf[i], a ? strlen(a) : j - i))
            return -1;
        i = j;
    }
    if (byref && put(out, outsz, &pos, "&", 1))
        return -1;
    return 0;
}

/* ---- target parsing ----------------------------------------------------------------- */

static void trim_copy(char *dst, size_t dstsz, const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= dstsz)
        n = dstsz - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static int valid_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '`' || c == '$' || c == '<' || c == '>' ||
           c == '-' || (unsigned char)c >= 0x80;
}

int clrmux_target_parse(const char *text, struct clrmux_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    const char *bang = strchr(text, '!');
    if (!bang)
        return fail(err, errlen, "'%s': expected Assembly!Namespace.Type::Method", text);
    const char *colons = strstr(bang + 1, "::");
    if (!colons)
        return fail(err, errlen, "'%s': expected '::' between the type and the method", text);
    if ((size_t)(bang - text) >= sizeof t->assembly)
        return fail(err, errlen, "'%s': assembly name too long", text);
    trim_copy(t->assembly, sizeof t->assembly, text, (size_t)(bang - text));
    if (!t->assembly[0])
        return fail(err, errlen, "'%s': empty assembly name", text);
    if ((size_t)(colons - bang - 1) >= sizeof t->type)
        return fail(err, errlen, "'%s': type name too long", text);
    trim_copy(t->type, sizeof t->type, bang + 1, (size_t)(colons - bang - 1));
    const char *m = colons + 2;
    const char *paren = strchr(m, '(');
    size_t mlen = paren ? (size_t)(paren - m) : strlen(m);
    if (mlen >= sizeof t->method)
        return fail(err, errlen, "'%s': method name too long", text);
    trim_copy(t->method, sizeof t->method, m, mlen);

    /* type: '+'-separated non-empty names */
    if (!t->type[0])
        return fail(err, errlen, "'%s': empty type name", text);
    for (const char *p = t->type, *seg = t->type;; p++) {
        if (*p == '+' || !*p) {
            if (p == seg || p[-1] == '.' || *seg == '.')
                return fail(err, errlen, "'%s': bad type name (empty namespace or nested type part)", text);
            if (!*p)
                break;
            seg = p + 1;
        } else if (!valid_name_char(*p)) {
            return fail(err, errlen, "'%s': bad character in the type name", text);
        }
    }
    if (!t->method[0])
        return fail(err, errlen, "'%s': empty method name", text);
    for (const char *p = t->method; *p; p++)
        if (!valid_name_char(*p))
            return fail(err, errlen, "'%s': bad character in the method name", text);
    if (strchr(t->method, ':'))
        return fail(err, errlen, "'%s': bad method name", text);

    if (paren) {
        const char *close = strrchr(paren, ')');
        if (!close)
            return fail(err, errlen, "'%s': missing ')' after the parameter types", text);
        for (const char *q = close + 1; *q; q++)
            if (!isspace((unsigned char)*q))
                return fail(err, errlen, "'%s': text after the parameter list", text);
        t->has_params = 1;
        const char *p = paren + 1;
        int only_space = 1;
        for (const char *q = p; q < close; q++)
            if (!isspace((unsigned char)*q))
                only_space = 0;
        while (!only_space) {
            /* split at top-level commas (generic arguments and [,] contain commas) */
            int depth = 0;
            const char *q = p;
            for (; q < close; q++) {
                if (*q == '<' || *q == '[')
                    depth++;
                else if (*q == '>' || *q == ']')
                    depth--;
                else if (*q == ',' && depth == 0)
                    break;
            }
            if (depth != 0)
                return fail(err, errlen, "'%s': unbalanced <> or [] in the parameter types", text);
            if (t->nparams >= CLRMUX_TARGET_MAX_PARAMS)
                return fail(err, errlen, "'%s': too many parameter types (at most 16)", text);
            char raw[CLRMUX_TARGET_NAME_MAX];
            if ((size_t)(q - p) >= sizeof raw)
                return fail(err, errlen, "'%s': parameter type name too long", text);
            trim_copy(raw, sizeof raw, p, (size_t)(q - p));
            if (!raw[0])
                return fail(err, errlen, "'%s': empty parameter type", text);
            if (clrmux_target_canon_type(raw, t->params[t->nparams], sizeof t->params[0]))
                return fail(err, errlen, "'%s': parameter type name too long", text);
            t->nparams++;
            if (q >= close)
                break;
            p = q + 1;
        }
    }
    return 0;
}

/* ---- signature decoding --------------------------------------------------------------- */

struct rd {
    const uint8_t *p;
    size_t len, pos;
};

static int rd_u(struct rd *r, uint32_t *v)
{
    int n = clrmux_il_sig_uncompress(r->p + r->pos, r->len - r->pos, v);
    if (n < 0)
        return -1;
    r->pos += (size_t)n;
    return 0;
}

static int rd_byte(struct rd *r, uint8_t *b)
{
    if (r->pos >= r->len)
        return -1;
    *b = r->p[r->pos++];
    return 0;
}

static int rd_token(struct rd *r, uint32_t *tok)
{
    uint32_t v;
    if (rd_u(r, &v))
        return -1;
    static const uint32_t tables[] = {0x02000000u, 0x01000000u, 0x1b000000u, 0};
    if ((v & 3) == 3)
        return -1;
    *tok = tables[v & 3] | (v >> 2);
    return 0;
}

static int put_s(char *out, size_t outsz, size_t *pos, const char *s) { return put(out, outsz, pos, s, strlen(s)); }

/* One Type (II.23.2.12) as a canonical name. */
static int type_name(struct rd *r, clrmux_type_name_fn resolve, void *ctx, char *out, size_t outsz, size_t *pos,
                     int depth)
{
    if (depth > 32)
        return -1;
    uint8_t et;
    if (rd_byte(r, &et))
        return -1;
    static const char *const prim[] = {
        [0x01] = "void", [0x02] = "bool", [0x03] = "char", [0x04] = "sbyte", [0x05] = "byte", [0x06] = "short",
        [0x07] = "ushort", [0x08] = "int", [0x09] = "uint", [0x0A] = "long", [0x0B] = "ulong", [0x0C] = "float",
        [0x0D] = "double", [0x0E] = "string", [0x16] = "System.TypedReference", [0x18] = "nint", [0x19] = "nuint",
        [0x1C] = "object",
    };
    if (et < sizeof prim / sizeof prim[0] && prim[et])
        return put_s(out, outsz, pos, prim[et]);
    char tmp[CLRMUX_TARGET_NAME_MAX];
    uint32_t v, tok;
    switch (et) {
    case CLRMUX_ELEMENT_TYPE_CMOD_REQD:
    case CLRMUX_ELEMENT_TYPE_CMOD_OPT: /* custom modifiers do not take part in the name */
        if (rd_token(r, &tok))
            return -1;
        return type_name(r, resolve, ctx, out, outsz, pos, depth + 1);
    case CLRMUX_ELEMENT_TYPE_PINNED:
        return type_name(r, resolve, ctx, out, outsz, pos, depth + 1);
    case CLRMUX_ELEMENT_TYPE_BYREF:
        if (type_name(r, resolve, ctx, out, outsz, pos, depth + 1))
            return -1;
        return put_s(out, outsz, pos, "&");
    case CLRMUX_ELEMENT_TYPE_PTR:
        if (type_name(r, resolve, ctx, out, outsz, pos, depth + 1))
            return -1;
        return put_s(out, outsz, pos, "*");
    case CLRMUX_ELEMENT_TYPE_SZARRAY:
        if (type_name(r, resolve, ctx, out, outsz, pos, depth + 1))
            return -1;
        return put_s(out, outsz, pos, "[]");
    case CLRMUX_ELEMENT_TYPE_ARRAY: {
        if (type_name(r, resolve, ctx, out, outsz, pos, depth + 1))
            return -1;
        uint32_t rank, nsizes, nlo, x;
        if (rd_u(r, &rank) || rd_u(r, &nsizes))
            return -1;
        for (uint32_t i = 0; i < nsizes; i++)
            if (rd_u(r, &x))
                return -1;
        if (rd_u(r, &nlo))
            return -1;
        for (uint32_t i = 0; i < nlo; i++)
            if (rd_u(r, &x)) /* signed compressed: same width rules */
                return -1;
        if (put_s(out, outsz, pos, "["))
            return -1;
        for (uint32_t i = 1; i < rank; i++)
            if (put_s(out, outsz, pos, ","))
                return -1;
        return put_s(out, outsz, pos, "]");
    }
    case CLRMUX_ELEMENT_TYPE_CLASS:
    case CLRMUX_ELEMENT_TYPE_VALUETYPE:
        if (rd_token(r, &tok))
            return -1;
        if (!resolve || resolve(ctx, tok, tmp, sizeof tmp))
            snprintf(tmp, sizeof tmp, "?%08X", (unsigned)tok);
        {
            const char *a = alias_of(tmp, strlen(tmp));
            return put_s(out, outsz, pos, a ? a : tmp);
        }
    case CLRMUX_ELEMENT_TYPE_GENERICINST: {
        uint8_t kind;
        uint32_t n;
        if (rd_byte(r, &kind) || rd_token(r, &tok) || rd_u(r, &n))
            return -1;
        if (!resolve || resolve(ctx, tok, tmp, sizeof tmp))
            snprintf(tmp, sizeof tmp, "?%08X", (unsigned)tok);
        if (put_s(out, outsz, pos, tmp) || put_s(out, outsz, pos, "<"))
            return -1;
        for (uint32_t i = 0; i < n; i++) {
            if (i && put_s(out, outsz, pos, ","))
                return -1;
            if (type_name(r, resolve, ctx, out, outsz, pos, depth + 1))
                return -1;
        }
        return put_s(out, outsz, pos, ">");
    }
    case CLRMUX_ELEMENT_TYPE_VAR:
    case CLRMUX_ELEMENT_TYPE_MVAR:
        if (rd_u(r, &v))
            return -1;
        snprintf(tmp, sizeof tmp, "%s%u", et == CLRMUX_ELEMENT_TYPE_VAR ? "!" : "!!", (unsigned)v);
        return put_s(out, outsz, pos, tmp);
    case CLRMUX_ELEMENT_TYPE_FNPTR:
        /* a method signature follows; skip it by decoding its parts */
        {
            uint8_t cc;
            uint32_t np;
            if (rd_byte(r, &cc) || rd_u(r, &np))
                return -1;
            char junk[CLRMUX_TARGET_NAME_MAX];
            for (uint32_t i = 0; i <= np; i++) {
                size_t jp = 0;
                junk[0] = 0;
                if (type_name(r, resolve, ctx, junk, sizeof junk, &jp, depth + 1))
                    return -1;
            }
            return put_s(out, outsz, pos, "fnptr");
        }
    default:
        return -1;
    }
}

int clrmux_sig_param_names(const uint8_t *sig, size_t len, clrmux_type_name_fn resolve, void *ctx,
                           char (*names)[CLRMUX_TARGET_NAME_MAX], int max)
{
    struct rd r = {sig, len, 0};
    uint8_t cc;
    uint32_t gen = 0, count;
    if (rd_byte(&r, &cc))
        return -1;
    if ((cc & CLRMUX_SIG_GENERIC) && rd_u(&r, &gen))
        return -1;
    if (rd_u(&r, &count))
        return -1;
    char scratch[CLRMUX_TARGET_NAME_MAX];
    size_t pos = 0;
    scratch[0] = 0;
    if (type_name(&r, resolve, ctx, scratch, sizeof scratch, &pos, 0)) /* return type */
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        char *dst = (int)i < max ? names[i] : scratch;
        pos = 0;
        dst[0] = 0;
        if (r.pos < r.len && r.p[r.pos] == CLRMUX_ELEMENT_TYPE_SENTINEL)
            r.pos++;
        if (type_name(&r, resolve, ctx, dst, CLRMUX_TARGET_NAME_MAX, &pos, 0))
            return -1;
    }
    return (int)count;
}

/* ---- matching ------------------------------------------------------------------------- */

/* Length of a name without its `N generic arity suffix. */
static size_t strip_arity(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && isdigit((unsigned char)s[i - 1]))
        i--;
    if (i > 0 && i < n && s[i - 1] == '`')
        return i - 1;
    return n;
}

static int name_matches(const char *u, size_t un, const char *s, size_t sn)
{
    un = strip_arity(u, un);
    sn = strip_arity(s, sn);
    if (un == sn)
        return memcmp(u, s, un) == 0;
    if (un < sn && (s[sn - un - 1] == '.' || s[sn - un - 1] == '+'))
        return memcmp(u, s + sn - un, un) == 0;
    return 0;
}

int clrmux_target_type_matches(const char *user, const char *sig)
{
    const char *u = user, *s = sig;
    while (*u || *s) {
        if (is_punct(*u) || is_punct(*s)) {
            if (*u != *s)
                return 0;
            u++, s++;
            continue;
        }
        const char *ue = u, *se = s;
        while (*ue && !is_punct(*ue))
            ue++;
        while (*se && !is_punct(*se))
            se++;
        if (!name_matches(u, (size_t)(ue - u), s, (size_t)(se - s)))
            return 0;
        u = ue, s = se;
    }
    return 1;
}

int clrmux_target_params_match(const struct clrmux_target *t, char (*names)[CLRMUX_TARGET_NAME_MAX], int n)
{
    if (!t->has_params)
        return 1;
    if (n != t->nparams)
        return 0;
    for (int i = 0; i < n; i++)
        if (!clrmux_target_type_matches(t->params[i], names[i]))
            return 0;
    return 1;
}
