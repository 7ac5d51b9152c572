/* ECMA-335 CIL method bodies: the opcode table, body memory, the parser (II.25.4), layout
 * and emission, and editing (replace, insert, EH clauses). The builder is in il_builder.c,
 * signature helpers in il_sig.c, the wrap rewriter in il_wrap.c; shared internals in
 * il_internal.h. See il.h for the contracts. */
#include "tracer/il_internal.h"

/* ---- opcode table (Partition III; opcode.def) ---- */

static const struct { uint16_t lo, hi; uint8_t kind; } OPS[] = {
    {0x00, 0x0D, K_NONE}, /* nop break ldarg.0-3 ldloc.0-3 stloc.0-3 */
    {0x0E, 0x13, K_U8},   /* ldarg.s ldarga.s starg.s ldloc.s ldloca.s stloc.s */
    {0x14, 0x1E, K_NONE}, /* ldnull ldc.i4.m1..8 */
    {0x1F, 0x1F, K_I8},   {0x20, 0x20, K_I32}, {0x21, 0x21, K_I64},
    {0x22, 0x22, K_R4},   {0x23, 0x23, K_R8},
    {0x25, 0x26, K_NONE}, /* dup pop */
    {0x27, 0x29, K_TOK},  /* jmp call calli */
    {0x2A, 0x2A, K_NONE}, /* ret */
    {0x2B, 0x37, K_BR8},  {0x38, 0x44, K_BR32}, {0x45, 0x45, K_SW},
    {0x46, 0x6E, K_NONE}, /* ldind.* stind.* arithmetic conv.* */
    {0x6F, 0x75, K_TOK},  /* callvirt cpobj ldobj ldstr newobj castclass isinst */
    {0x76, 0x76, K_NONE}, /* conv.r.un */
    {0x79, 0x79, K_TOK},  /* unbox */
    {0x7A, 0x7A, K_NONE}, /* throw */
    {0x7B, 0x81, K_TOK},  /* ldfld ldflda stfld ldsfld ldsflda stsfld stobj */
    {0x82, 0x8B, K_NONE}, /* conv.ovf.*.un */
    {0x8C, 0x8D, K_TOK},  /* box newarr */
    {0x8E, 0x8E, K_NONE}, /* ldlen */
    {0x8F, 0x8F, K_TOK},  /* ldelema */
    {0x90, 0xA2, K_NONE}, /* ldelem.* stelem.* */
    {0xA3, 0xA5, K_TOK},  /* ldelem stelem unbox.any */
    {0xB3, 0xBA, K_NONE}, /* conv.ovf.* */
    {0xC2, 0xC2, K_TOK},  /* refanyval */
    {0xC3, 0xC3, K_NONE}, /* ckfinite */
    {0xC6, 0xC6, K_TOK},  /* mkrefany */
    {0xD0, 0xD0, K_TOK},  /* ldtoken */
    {0xD1, 0xDC, K_NONE}, /* conv.u2 .. endfinally */
    {0xDD, 0xDD, K_BR32}, {0xDE, 0xDE, K_BR8}, /* leave leave.s */
    {0xDF, 0xE0, K_NONE}, /* stind.i conv.u */
    {0xFE00, 0xFE05, K_NONE}, /* arglist ceq cgt cgt.un clt clt.un */
    {0xFE06, 0xFE07, K_TOK},  /* ldftn ldvirtftn */
    {0xFE09, 0xFE0E, K_U16},  /* ldarg ldarga starg ldloc ldloca stloc */
    {0xFE0F, 0xFE0F, K_NONE}, /* localloc */
    {0xFE11, 0xFE11, K_NONE}, /* endfilter */
    {0xFE12, 0xFE12, K_U8},   /* unaligned. */
    {0xFE13, 0xFE14, K_NONE}, /* volatile. tail. */
    {0xFE15, 0xFE16, K_TOK},  /* initobj constrained. */
    {0xFE17, 0xFE18, K_NONE}, /* cpblk initblk */
    {0xFE19, 0xFE19, K_U8},   /* no. */
    {0xFE1A, 0xFE1A, K_NONE}, /* rethrow */
    {0xFE1C, 0xFE1C, K_TOK},  /* sizeof */
    {0xFE1D, 0xFE1E, K_NONE}, /* refanytype readonly. */
};


int clrmux_il_operand_kind_of(uint16_t opcode)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (opcode >= OPS[i].lo && opcode <= OPS[i].hi)
            return OPS[i].kind;
    return CLRMUX_IL_E_OPCODE;
}

clrmux_il_instr clrmux_il_make(uint16_t opcode, int64_t imm_or_target)
{
    clrmux_il_instr in;
    memset(&in, 0, sizeof in);
    int k = clrmux_il_operand_kind_of(opcode);
    in.opcode = opcode;
    in.kind = k < 0 ? KIND_BAD : (uint8_t)k;
    if (k >= 0 && is_branch(k))
        in.target = (uint32_t)imm_or_target;
    else
        in.imm = imm_or_target;
    return in;
}

int clrmux_il_make_var(clrmux_il_var_op op, uint32_t index, clrmux_il_instr *out)
{
    /* {op.0 (0 = none), .s form, 0xFE form} */
    static const uint16_t forms[][3] = {
        [CLRMUX_IL_LDLOC] = {0x06, 0x11, 0xFE0C}, [CLRMUX_IL_STLOC] = {0x0A, 0x13, 0xFE0E},
        [CLRMUX_IL_LDLOCA] = {0, 0x12, 0xFE0D},   [CLRMUX_IL_LDARG] = {0x02, 0x0E, 0xFE09},
        [CLRMUX_IL_STARG] = {0, 0x10, 0xFE0B},    [CLRMUX_IL_LDARGA] = {0, 0x0F, 0xFE0A},
    };
    if (!out || (unsigned)op > CLRMUX_IL_LDARGA)
        return CLRMUX_IL_E_ARG;
    if (index > UINT16_MAX)
        return CLRMUX_IL_E_RANGE;
    if (index <= 3 && forms[op][0])
        *out = clrmux_il_make((uint16_t)(forms[op][0] + index), 0);
    else
        *out = clrmux_il_make(forms[op][index <= UINT8_MAX ? 1 : 2], index);
    return 0;
}

/* ---- body memory ---- */

static int reserve(clrmux_il_body *b, uint64_t n)
{
    if (n <= b->cap_instrs)
        return 0;
    if (n > MAX_INSTRS)
        return CLRMUX_IL_E_RANGE;
    uint64_t cap = b->cap_instrs ? b->cap_instrs : 16;
    while (cap < n)
        cap *= 2;
    void *p = realloc(b->instrs, cap * sizeof *b->instrs);
    if (!p)
        return CLRMUX_IL_E_NOMEM;
    b->instrs = p;
    b->cap_instrs = (uint32_t)cap;
    return 0;
}

void clrmux_il_body_free(clrmux_il_body *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < b->n_instrs; i++)
        free(b->instrs[i].targets);
    free(b->instrs);
    free(b->eh);
    memset(b, 0, sizeof *b);
}

/* Copy instruction (and its switch table) into *dst. */
static int copy_instr(clrmux_il_instr *dst, const clrmux_il_instr *src)
{
    *dst = *src;
    dst->targets = NULL;
    if (src->kind == K_SW && src->n_targets) {
        if (!(dst->targets = malloc(src->n_targets * sizeof(uint32_t))))
            return CLRMUX_IL_E_NOMEM;
        memcpy(dst->targets, src->targets, src->n_targets * sizeof(uint32_t));
    }
    return 0;
}

int clrmux_il_body_clone(const clrmux_il_body *src, clrmux_il_body *dst)
{
    if (!src || !dst)
        return CLRMUX_IL_E_ARG;
    *dst = *src;
    dst->instrs = NULL;
    dst->eh = NULL;
    dst->n_instrs = dst->cap_instrs = 0;
    dst->n_eh = 0;
    if (reserve(dst, src->n_instrs ? src->n_instrs : 1))
        goto nomem;
    for (; dst->n_instrs < src->n_instrs; dst->n_instrs++)
        if (copy_instr(&dst->instrs[dst->n_instrs], &src->instrs[dst->n_instrs]))
            goto nomem;
    if (src->n_eh) {
        if (!(dst->eh = malloc(src->n_eh * sizeof *dst->eh)))
            goto nomem;
        memcpy(dst->eh, src->eh, src->n_eh * sizeof *dst->eh);
        dst->n_eh = src->n_eh;
    }
    return 0;
nomem:
    clrmux_il_body_free(dst);
    return CLRMUX_IL_E_NOMEM;
}

/* ---- parsing (II.25.4) ---- */

/* Index of the instruction at byte offset `off`: 1 found, 2 end of code, 0 neither. */
static int find_instr(const clrmux_il_body *b, uint64_t off, uint32_t *idx)
{
    uint32_t lo = 0, hi = b->n_instrs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (b->instrs[mid].offset < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    *idx = lo;
    if (lo < b->n_instrs && b->instrs[lo].offset == off)
        return 1;
    return lo == b->n_instrs && off == b->code_size ? 2 : 0;
}

static int map_target(const clrmux_il_body *b, uint32_t *t, uint32_t from, int allow_end, char *err,
                      size_t errlen)
{
    uint32_t off = *t;
    int r = find_instr(b, off, t);
    if (r == 1 || (r == 2 && allow_end))
        return 0;
    return fail(err, errlen, CLRMUX_IL_E_TARGET,
                "branch target IL_%04x of the instruction at IL_%04x is %s", off, from,
                r ? "the end of the code" : "not on an instruction boundary");
}

static int parse_code(clrmux_il_body *b, const uint8_t *code, uint32_t len, int allow_end,
                      char *err, size_t errlen)
{
    b->code_size = len;
    for (uint32_t off = 0; off < len;) {
        clrmux_il_instr in;
        memset(&in, 0, sizeof in);
        in.offset = off;
        uint32_t p = off + 1;
        uint16_t op = code[off];
        if (op == 0xFE) {
            if (p >= len)
                return fail(err, errlen, CLRMUX_IL_E_TRUNCATED,
                            "truncated two-byte opcode at IL_%04x", off);
            op = (uint16_t)(0xFE00 | code[p++]);
        }
        int kind = clrmux_il_operand_kind_of(op);
        if (kind < 0)
            return fail(err, errlen, CLRMUX_IL_E_OPCODE, "unknown opcode 0x%02x at IL_%04x", op,
                        off);
        in.opcode = op;
        in.kind = (uint8_t)kind;
        uint32_t avail = len - p, need = OPND_SIZE[kind];
        if (avail < need)
            return fail(err, errlen, CLRMUX_IL_E_TRUNCATED,
                        "truncated operand of opcode 0x%02x at IL_%04x", op, off);
        const uint8_t *o = code + p;
        int64_t tgt = 0;
        switch (kind) {
        case K_U8: in.imm = o[0]; break;
        case K_I8: in.imm = (int8_t)o[0]; break;
        case K_U16: in.imm = rd16(o); break;
        case K_I32: in.imm = (int32_t)rd32(o); break;
        case K_R4: case K_TOK: in.imm = rd32(o); break;
        case K_I64: case K_R8: in.imm = (int64_t)rd64(o); break;
        case K_BR8: tgt = (int64_t)p + 1 + (int8_t)o[0]; break;
        case K_BR32: tgt = (int64_t)p + 4 + (int32_t)rd32(o); break;
        case K_SW: {
            uint32_t n = rd32(o);
            if (n > (avail - 4) / 4)
                return fail(err, errlen, CLRMUX_IL_E_TRUNCATED,
                            "truncated switch table (%u targets) at IL_%04x", n, off);
            need = 4 + 4 * n;
            if (n && !(in.targets = malloc(n * sizeof(uint32_t))))
                return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
            in.n_targets = n;
            int64_t base = (int64_t)p + need;
            for (uint32_t i = 0; i < n; i++) {
                int64_t t = base + (int32_t)rd32(o + 4 + 4 * i);
                if (t < 0 || t > len) {
                    free(in.targets);
                    return fail(err, errlen, CLRMUX_IL_E_TARGET,
                                "switch target %u of IL_%04x is outside the code", i, off);
                }
                in.targets[i] = (uint32_t)t;
            }
            break;
        }
        default: break;
        }
        if (is_branch(kind)) {
            if (tgt < 0 || tgt > len)
                return fail(err, errlen, CLRMUX_IL_E_TARGET,
                            "branch target of IL_%04x is outside the code", off);
            in.target = (uint32_t)tgt;
        }
        if (reserve(b, (uint64_t)b->n_instrs + 1)) {
            free(in.targets);
            return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
        }
        b->instrs[b->n_instrs++] = in;
        off = p + need;
    }
    /* byte offsets -> instruction indexes */
    for (uint32_t i = 0; i < b->n_instrs; i++) {
        clrmux_il_instr *in = &b->instrs[i];
        int rc = 0;
        if (is_branch(in->kind))
            rc = map_target(b, &in->target, in->offset, allow_end, err, errlen);
        for (uint32_t j = 0; !rc && in->kind == K_SW && j < in->n_targets; j++)
            rc = map_target(b, &in->targets[j], in->offset, allow_end, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int clrmux_il_parse_code(const uint8_t *code, size_t len, clrmux_il_body *out, char *err,
                         size_t errlen)
{
    if (!out || (!code && len))
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    memset(out, 0, sizeof *out);
    if (len > MAX_CODE)
        return fail(err, errlen, CLRMUX_IL_E_RANGE, "code too large");
    out->max_stack = CLRMUX_IL_TINY_MAX_STACK;
    int rc = parse_code(out, code, (uint32_t)len, 1, err, errlen);
    if (rc)
        clrmux_il_body_free(out);
    return rc;
}

/* Map an EH byte offset to an instruction index; `is_end` allows the end of code. */
static int eh_ref(const clrmux_il_body *b, uint64_t off, int is_end, uint32_t *idx, unsigned ci,
                  const char *what, char *err, size_t errlen)
{
    if (off > b->code_size || (!is_end && off == b->code_size))
        return fail(err, errlen, CLRMUX_IL_E_EH,
                    "EH clause %u: %s IL_%04llx is past the end of the code (0x%x bytes)", ci,
                    what, (unsigned long long)off, b->code_size);
    if (!find_instr(b, off, idx))
        return fail(err, errlen, CLRMUX_IL_E_EH,
                    "EH clause %u: %s IL_%04llx is not on an instruction boundary", ci, what,
                    (unsigned long long)off);
    return 0;
}

static int parse_eh(clrmux_il_body *b, const uint8_t *s, size_t avail, size_t *used, char *err,
                    size_t errlen)
{
    if (avail < 4)
        return fail(err, errlen, CLRMUX_IL_E_TRUNCATED, "truncated data section header");
    uint8_t kind = s[0];
    if (!(kind & CLRMUX_IL_SECT_EHTABLE) || (kind & CLRMUX_IL_SECT_OPTILTABLE))
        return fail(err, errlen, CLRMUX_IL_E_UNSUPPORTED,
                    "data section kind 0x%02x is not an EH table", kind);
    if (kind & CLRMUX_IL_SECT_MORE)
        return fail(err, errlen, CLRMUX_IL_E_UNSUPPORTED, "more than one data section");
    int fat = !!(kind & CLRMUX_IL_SECT_FAT);
    uint32_t dsize = fat ? (uint32_t)s[1] | (uint32_t)s[2] << 8 | (uint32_t)s[3] << 16 : s[1];
    size_t csz = fat ? 24 : 12, n = dsize / csz; /* as CoreCLR's EHCount() */
    if (!n)
        return fail(err, errlen, CLRMUX_IL_E_FORMAT, "EH section without clauses");
    if (avail - 4 < n * csz)
        return fail(err, errlen, CLRMUX_IL_E_TRUNCATED,
                    "truncated EH section (%zu clauses, %zu bytes available)", n, avail);
    if (!(b->eh = calloc(n, sizeof *b->eh)))
        return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
    b->eh_fat = fat;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *c = s + 4 + i * csz;
        clrmux_il_eh *e = &b->eh[i];
        uint64_t toff, tlen, hoff, hlen;
        uint32_t last;
        if (fat) {
            e->flags = rd32(c), toff = rd32(c + 4), tlen = rd32(c + 8);
            hoff = rd32(c + 12), hlen = rd32(c + 16), last = rd32(c + 20);
        } else {
            e->flags = rd16(c), toff = rd16(c + 2), tlen = c[4];
            hoff = rd16(c + 5), hlen = c[7], last = rd32(c + 8);
        }
        b->n_eh = (uint32_t)i + 1;
        if (e->flags != CLRMUX_IL_EH_EXCEPTION && e->flags != CLRMUX_IL_EH_FILTER &&
            e->flags != CLRMUX_IL_EH_FINALLY && e->flags != CLRMUX_IL_EH_FAULT)
            return fail(err, errlen, CLRMUX_IL_E_EH, "EH clause %zu: unknown kind 0x%x", i,
                        e->flags);
        unsigned ci = (unsigned)i;
        int rc = eh_ref(b, toff, 0, &e->try_start, ci, "try start", err, errlen);
        if (!rc) rc = eh_ref(b, toff + tlen, 1, &e->try_end, ci, "try end", err, errlen);
        if (!rc) rc = eh_ref(b, hoff, 0, &e->handler_start, ci, "handler start", err, errlen);
        if (!rc) rc = eh_ref(b, hoff + hlen, 1, &e->handler_end, ci, "handler end", err, errlen);
        if (e->flags != CLRMUX_IL_EH_FILTER)
            e->class_token = last;
        else if (!rc)
            rc = eh_ref(b, last, 0, &e->filter_start, ci, "filter start", err, errlen);
        if (rc)
            return rc;
    }
    *used = 4 + n * csz;
    return 0;
}

int clrmux_il_parse(const uint8_t *data, size_t len, clrmux_il_body *out, size_t *body_len,
                    char *err, size_t errlen)
{
    if (!out || (!data && len))
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    memset(out, 0, sizeof *out);
    if (len < 1)
        return fail(err, errlen, CLRMUX_IL_E_TRUNCATED, "empty method body");
    size_t hdr;
    uint32_t code_size;
    if ((data[0] & 3) == CLRMUX_IL_TINY_FORMAT) {
        hdr = 1;
        code_size = data[0] >> 2;
        out->max_stack = CLRMUX_IL_TINY_MAX_STACK;
    } else if ((data[0] & 3) == CLRMUX_IL_FAT_FORMAT) {
        if (len < 12)
            return fail(err, errlen, CLRMUX_IL_E_TRUNCATED, "truncated fat header (%zu bytes)",
                        len);
        uint16_t w = rd16(data);
        if (w >> 12 != 3)
            return fail(err, errlen, CLRMUX_IL_E_FORMAT,
                        "fat header size is %u dwords, expected 3", w >> 12);
        hdr = 12;
        out->fat = 1;
        out->flags = w & 0x0FFF;
        out->max_stack = rd16(data + 2);
        code_size = rd32(data + 4);
        out->local_sig_tok = rd32(data + 8);
    } else {
        return fail(err, errlen, CLRMUX_IL_E_FORMAT, "invalid method header byte 0x%02x",
                    data[0]);
    }
    int rc;
    if (code_size == 0)
        rc = fail(err, errlen, CLRMUX_IL_E_FORMAT, "method body has no code");
    else if (code_size > len - hdr)
        rc = fail(err, errlen, CLRMUX_IL_E_TRUNCATED,
                  "truncated code: header says %u bytes, %zu available", code_size, len - hdr);
    else if (code_size > MAX_CODE)
        rc = fail(err, errlen, CLRMUX_IL_E_RANGE, "code too large");
    else
        rc = parse_code(out, data + hdr, code_size, 0, err, errlen);
    size_t end = hdr + code_size;
    if (!rc && out->fat && (out->flags & CLRMUX_IL_MORE_SECTS)) {
        size_t s = (end + 3) & ~(size_t)3, used = 0;
        if (s > len)
            rc = fail(err, errlen, CLRMUX_IL_E_TRUNCATED, "truncated data section header");
        else if (!(rc = parse_eh(out, data + s, len - s, &used, err, errlen)))
            end = s + used;
    }
    if (rc) {
        clrmux_il_body_free(out);
        return rc;
    }
    if (body_len)
        *body_len = end;
    return 0;
}

/* ---- layout and emission ---- */


static int check_instr(const clrmux_il_instr *in, uint32_t n, int allow_new, uint32_t n_new)
{
    int k = clrmux_il_operand_kind_of(in->opcode);
    if (k < 0 || k != in->kind || !imm_ok(k, in->imm))
        return 0;
    uint32_t one = in->target, cnt = is_branch(k) ? 1 : k == K_SW ? in->n_targets : 0;
    const uint32_t *t = k == K_SW ? in->targets : &one;
    if (cnt > MAX_INSTRS || (k == K_SW && cnt && !t))
        return 0;
    for (uint32_t i = 0; i < cnt; i++) {
        if (allow_new && (t[i] & CLRMUX_IL_NEW_TARGET(0)) ? (t[i] & ~CLRMUX_IL_NEW_TARGET(0)) >= n_new
                                                           : t[i] > n)
            return 0;
    }
    return 1;
}

static int check_eh(const clrmux_il_eh *e, uint32_t n)
{
    return (e->flags == CLRMUX_IL_EH_EXCEPTION || e->flags == CLRMUX_IL_EH_FILTER ||
            e->flags == CLRMUX_IL_EH_FINALLY || e->flags == CLRMUX_IL_EH_FAULT) &&
           e->try_start < n && e->try_end <= n && e->try_start <= e->try_end &&
           e->handler_start < n && e->handler_end <= n && e->handler_start <= e->handler_end &&
           (e->flags != CLRMUX_IL_EH_FILTER || e->filter_start < e->handler_start);
}

int clrmux_il_layout(clrmux_il_body *b, char *err, size_t errlen)
{
    if (!b || (b->n_instrs && !b->instrs) || (b->n_eh && !b->eh))
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    for (uint32_t i = 0; i < b->n_instrs; i++)
        if (!check_instr(&b->instrs[i], b->n_instrs, 0, 0))
            return fail(err, errlen, CLRMUX_IL_E_ARG,
                        "instruction %u (opcode 0x%02x): bad opcode, operand or target", i,
                        b->instrs[i].opcode);
    for (uint32_t i = 0; i < b->n_eh; i++)
        if (!check_eh(&b->eh[i], b->n_instrs))
            return fail(err, errlen, CLRMUX_IL_E_ARG, "EH clause %u: bad kind or region", i);
    for (int changed = 1; changed;) {
        uint64_t off = 0;
        for (uint32_t i = 0; i < b->n_instrs; i++) {
            b->instrs[i].offset = (uint32_t)off;
            off += instr_size(&b->instrs[i]);
            if (off > MAX_CODE)
                return fail(err, errlen, CLRMUX_IL_E_RANGE, "code too large");
        }
        b->code_size = (uint32_t)off;
        changed = 0;
        for (uint32_t i = 0; i < b->n_instrs; i++) {
            clrmux_il_instr *in = &b->instrs[i];
            if (in->kind != K_BR8)
                continue;
            int64_t d = (int64_t)off_of(b, in->target) - ((int64_t)in->offset + 2);
            if (d < INT8_MIN || d > INT8_MAX) {
                in->opcode = widen(in->opcode);
                in->kind = K_BR32;
                changed = 1;
            }
        }
    }
    if (!b->fat && (b->code_size > CLRMUX_IL_TINY_MAX_CODE || b->max_stack > CLRMUX_IL_TINY_MAX_STACK ||
                    b->local_sig_tok || b->n_eh)) {
        b->fat = 1;
        b->flags = CLRMUX_IL_FAT_FORMAT | CLRMUX_IL_INIT_LOCALS;
    }
    if (b->fat) {
        b->flags = (uint16_t)((b->flags & 0x0FFF & ~3u & ~CLRMUX_IL_MORE_SECTS) | CLRMUX_IL_FAT_FORMAT |
                              (b->n_eh ? CLRMUX_IL_MORE_SECTS : 0));
    }
    if (b->n_eh > CLRMUX_IL_SMALL_EH_MAX_CLAUSES)
        b->eh_fat = 1;
    for (uint32_t i = 0; i < b->n_eh && !b->eh_fat; i++) {
        const clrmux_il_eh *e = &b->eh[i];
        uint32_t ts = off_of(b, e->try_start), hs = off_of(b, e->handler_start);
        if (ts > 0xFFFF || hs > 0xFFFF || off_of(b, e->try_end) - ts > 0xFF ||
            off_of(b, e->handler_end) - hs > 0xFF)
            b->eh_fat = 1;
    }
    return 0;
}

int clrmux_il_emit(clrmux_il_body *b, uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
    if (!out || !out_len)
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    *out = NULL;
    *out_len = 0;
    int rc = clrmux_il_layout(b, err, errlen);
    if (rc)
        return rc;
    size_t hdr = b->fat ? 12 : 1, total = hdr + b->code_size, sect = 0;
    size_t csz = b->eh_fat ? 24 : 12, dsize = 4 + b->n_eh * csz;
    if (b->n_eh) {
        if (dsize > 0xFFFFFF)
            return fail(err, errlen, CLRMUX_IL_E_RANGE, "too many EH clauses (%u)", b->n_eh);
        sect = (total + 3) & ~(size_t)3;
        total = sect + dsize;
    }
    uint8_t *buf = calloc(1, total), *p = buf;
    if (!buf)
        return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
    if (b->fat) {
        wr16(p, (uint16_t)(0x3000 | b->flags));
        wr16(p + 2, b->max_stack);
        wr32(p + 4, b->code_size);
        wr32(p + 8, b->local_sig_tok);
    } else {
        p[0] = (uint8_t)(b->code_size << 2 | CLRMUX_IL_TINY_FORMAT);
    }
    p += hdr;
    for (uint32_t i = 0; i < b->n_instrs; i++)
        p = encode(b, &b->instrs[i], p);
    if (b->n_eh) {
        p = buf + sect;
        p[0] = (uint8_t)(CLRMUX_IL_SECT_EHTABLE | (b->eh_fat ? CLRMUX_IL_SECT_FAT : 0));
        p[1] = (uint8_t)dsize;
        if (b->eh_fat)
            p[2] = (uint8_t)(dsize >> 8), p[3] = (uint8_t)(dsize >> 16);
        p += 4;
        for (uint32_t i = 0; i < b->n_eh; i++, p += csz) {
            const clrmux_il_eh *e = &b->eh[i];
            uint32_t ts = off_of(b, e->try_start), hs = off_of(b, e->handler_start);
            uint32_t tl = off_of(b, e->try_end) - ts, hl = off_of(b, e->handler_end) - hs;
            uint32_t last = e->flags == CLRMUX_IL_EH_FILTER ? off_of(b, e->filter_start)
                                                            : e->class_token;
            if (b->eh_fat) {
                wr32(p, e->flags), wr32(p + 4, ts), wr32(p + 8, tl);
                wr32(p + 12, hs), wr32(p + 16, hl), wr32(p + 20, last);
            } else {
                wr16(p, (uint16_t)e->flags), wr16(p + 2, (uint16_t)ts), p[4] = (uint8_t)tl;
                wr16(p + 5, (uint16_t)hs), p[7] = (uint8_t)hl, wr32(p + 8, last);
            }
        }
    }
    *out = buf;
    *out_len = total;
    return 0;
}

/* ---- editing ---- */

int clrmux_il_replace(clrmux_il_body *b, uint32_t pos, uint32_t count, const clrmux_il_instr *ins,
                      uint32_t n, char *err, size_t errlen)
{
    if (!b || (n && !ins) || pos > b->n_instrs || count > b->n_instrs - pos)
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument or range");
    uint32_t old_n = b->n_instrs;
    uint64_t new_n = (uint64_t)old_n - count + n;
    if (n > MAX_INSTRS || new_n > MAX_INSTRS)
        return fail(err, errlen, CLRMUX_IL_E_ARG, "too many instructions");
    for (uint32_t i = 0; i < n; i++)
        if (!check_instr(&ins[i], old_n, 1, n))
            return fail(err, errlen, CLRMUX_IL_E_ARG,
                        "new instruction %u (opcode 0x%02x): bad opcode, operand or target", i,
                        ins[i].opcode);
    /* copy first: ins may point into b->instrs, which reserve() may move */
    clrmux_il_instr *tmp = n ? calloc(n, sizeof *tmp) : NULL;
    int rc = n && !tmp ? CLRMUX_IL_E_NOMEM : 0;
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = copy_instr(&tmp[i], &ins[i]);
    if (!rc)
        rc = reserve(b, new_n);
    if (rc) {
        for (uint32_t i = 0; tmp && i < n; i++)
            free(tmp[i].targets);
        free(tmp);
        return fail(err, errlen, rc, "out of memory");
    }
    for (uint32_t i = pos; i < pos + count; i++)
        free(b->instrs[i].targets);
    memmove(&b->instrs[pos + n], &b->instrs[pos + count],
            (old_n - pos - count) * sizeof *b->instrs);
    if (n)
        memcpy(&b->instrs[pos], tmp, n * sizeof *tmp);
    free(tmp);
    b->n_instrs = (uint32_t)new_n;

#define MAP_START(s) ((s) < pos ? (s) : (s) < pos + count ? pos : (s) - count + n)
#define MAP_END(e) ((e) <= pos ? (e) : (e) <= pos + count ? pos + n : (e) - count + n)
#define MAP_REF(t, fresh) \
    ((fresh) && ((t) & CLRMUX_IL_NEW_TARGET(0)) ? pos + ((t) & ~CLRMUX_IL_NEW_TARGET(0)) : MAP_START(t))
    for (uint32_t i = 0; i < b->n_instrs; i++) {
        clrmux_il_instr *in = &b->instrs[i];
        int fresh = i >= pos && i < pos + n;
        if (is_branch(in->kind))
            in->target = MAP_REF(in->target, fresh);
        for (uint32_t j = 0; in->kind == K_SW && j < in->n_targets; j++)
            in->targets[j] = MAP_REF(in->targets[j], fresh);
    }
    for (uint32_t i = 0; i < b->n_eh; i++) {
        clrmux_il_eh *e = &b->eh[i];
        e->try_start = MAP_START(e->try_start);
        e->handler_start = MAP_START(e->handler_start);
        e->try_end = MAP_END(e->try_end);
        e->handler_end = MAP_END(e->handler_end);
        if (e->flags == CLRMUX_IL_EH_FILTER)
            e->filter_start = MAP_START(e->filter_start);
    }
#undef MAP_START
#undef MAP_END
#undef MAP_REF
    return 0;
}

int clrmux_il_insert(clrmux_il_body *b, uint32_t pos, const clrmux_il_instr *ins, uint32_t n,
                     char *err, size_t errlen)
{
    return clrmux_il_replace(b, pos, 0, ins, n, err, errlen);
}

int clrmux_il_add_eh(clrmux_il_body *b, const clrmux_il_eh *c, char *err, size_t errlen)
{
    if (!b || !c || !check_eh(c, b->n_instrs))
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid EH clause");
    if (b->n_eh >= 0xFFFFFF / 24)
        return fail(err, errlen, CLRMUX_IL_E_RANGE, "too many EH clauses");
    clrmux_il_eh *p = realloc(b->eh, (b->n_eh + 1) * sizeof *p);
    if (!p)
        return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
    b->eh = p;
    b->eh[b->n_eh++] = *c;
    return 0;
}
