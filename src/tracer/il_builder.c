/* The IL builder (il.h, clrmux_il_b_*): writes a snippet of CIL (ECMA-335 Partition III)
 * instruction by instruction, with labels and branches resolved at clrmux_il_b_finish. */
#include "tracer/il_internal.h"

/* ---- builder ---- */

__attribute__((format(CLRMUX_PRINTF_FORMAT, 3, 4))) static void b_fail(clrmux_il_builder *b, int code,
                                                         const char *fmt, ...)
{
    if (b->err)
        return;
    b->err = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
}

static uint8_t *b_room(clrmux_il_builder *b, size_t n)
{
    if (b->err)
        return NULL;
    if (b->len + n > MAX_CODE) {
        b_fail(b, CLRMUX_IL_E_RANGE, "snippet too large");
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->data, cap);
        if (!p) {
            b_fail(b, CLRMUX_IL_E_NOMEM, "out of memory");
            return NULL;
        }
        b->data = p;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

static void b_instr(clrmux_il_builder *b, const clrmux_il_instr *in)
{
    if (b->err)
        return;
    if (in->kind == KIND_BAD || is_branch(in->kind) || in->kind == K_SW || !imm_ok(in->kind, in->imm)) {
        b_fail(b, CLRMUX_IL_E_ARG, "opcode 0x%02x: unknown, unsupported here or bad operand",
               in->opcode);
        return;
    }
    uint8_t *p = b_room(b, (size_t)instr_size(in));
    if (p)
        encode(NULL, in, p);
}

void clrmux_il_b_init(clrmux_il_builder *b)
{
    memset(b, 0, sizeof *b);
    memset(b->label_off, 0xFF, sizeof b->label_off);
}

void clrmux_il_b_free(clrmux_il_builder *b)
{
    if (b) {
        free(b->data);
        clrmux_il_b_init(b);
    }
}

void clrmux_il_b_op(clrmux_il_builder *b, uint16_t opcode)
{
    clrmux_il_instr in = clrmux_il_make(opcode, 0);
    if (in.kind != K_NONE)
        b_fail(b, CLRMUX_IL_E_ARG, "opcode 0x%02x is unknown or takes an operand", opcode);
    b_instr(b, &in);
}

void clrmux_il_b_op_arg(clrmux_il_builder *b, uint16_t opcode, int64_t operand)
{
    clrmux_il_instr in = clrmux_il_make(opcode, operand);
    b_instr(b, &in);
}

void clrmux_il_b_token(clrmux_il_builder *b, uint16_t opcode, uint32_t token)
{
    clrmux_il_instr in = clrmux_il_make(opcode, token);
    if (in.kind != K_TOK)
        b_fail(b, CLRMUX_IL_E_ARG, "opcode 0x%02x does not take a token", opcode);
    b_instr(b, &in);
}

void clrmux_il_b_var(clrmux_il_builder *b, clrmux_il_var_op op, uint32_t index)
{
    clrmux_il_instr in;
    int rc = clrmux_il_make_var(op, index, &in);
    if (rc)
        b_fail(b, rc, "bad variable access %d/%u", (int)op, index);
    else
        b_instr(b, &in);
}

void clrmux_il_b_ldc_i4(clrmux_il_builder *b, int32_t v)
{
    clrmux_il_instr in;
    if (v >= -1 && v <= 8)
        in = clrmux_il_make((uint16_t)(CLRMUX_IL_OP_LDC_I4_0 + v), 0);
    else
        in = clrmux_il_make(v >= INT8_MIN && v <= INT8_MAX ? CLRMUX_IL_OP_LDC_I4_S : CLRMUX_IL_OP_LDC_I4, v);
    b_instr(b, &in);
}

void clrmux_il_b_ldc_i8(clrmux_il_builder *b, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        clrmux_il_b_ldc_i4(b, (int32_t)v);
        clrmux_il_b_op(b, CLRMUX_IL_OP_CONV_I8);
    } else {
        clrmux_il_b_op_arg(b, CLRMUX_IL_OP_LDC_I8, v);
    }
}

void clrmux_il_b_ldc_r8(clrmux_il_builder *b, double v)
{
    int64_t bits;
    memcpy(&bits, &v, sizeof bits);
    clrmux_il_b_op_arg(b, CLRMUX_IL_OP_LDC_R8, bits);
}

uint32_t clrmux_il_b_label(clrmux_il_builder *b)
{
    if (b->n_labels >= CLRMUX_IL_B_MAX_LABELS) {
        b_fail(b, CLRMUX_IL_E_RANGE, "too many labels");
        return UINT32_MAX;
    }
    return b->n_labels++;
}

void clrmux_il_b_mark(clrmux_il_builder *b, uint32_t label)
{
    if (label >= b->n_labels || b->label_off[label] != UINT32_MAX)
        b_fail(b, CLRMUX_IL_E_ARG, "bad or already marked label %u", label);
    else
        b->label_off[label] = (uint32_t)b->len;
}

void clrmux_il_b_branch(clrmux_il_builder *b, uint16_t opcode, uint32_t label)
{
    int k = clrmux_il_operand_kind_of(opcode);
    if (!is_branch(k) || label >= b->n_labels) {
        b_fail(b, CLRMUX_IL_E_ARG, "opcode 0x%02x is not a branch or bad label %u", opcode, label);
        return;
    }
    uint16_t lop = k == K_BR8 ? widen(opcode) : opcode;
    uint32_t to = b->label_off[label];
    int64_t d = (int64_t)to - ((int64_t)b->len + 2);
    uint8_t *p;
    if (to != UINT32_MAX && d >= INT8_MIN) { /* backward, fits int8 */
        if ((p = b_room(b, 2)))
            p[0] = (uint8_t)narrow(lop), p[1] = (uint8_t)d;
        return;
    }
    if (to == UINT32_MAX && b->n_fixups >= CLRMUX_IL_B_MAX_FIXUPS) {
        b_fail(b, CLRMUX_IL_E_RANGE, "too many forward branches");
        return;
    }
    if (!(p = b_room(b, 5)))
        return;
    p[0] = (uint8_t)lop;
    wr32(p + 1, (uint32_t)(to - (uint32_t)b->len));
    if (to == UINT32_MAX) {
        b->fixup[b->n_fixups].at = (uint32_t)b->len - 4;
        b->fixup[b->n_fixups].next = (uint32_t)b->len;
        b->fixup[b->n_fixups++].label = label;
    }
}

int clrmux_il_b_finish(clrmux_il_builder *b, char *err, size_t errlen)
{
    for (uint32_t i = 0; !b->err && i < b->n_fixups; i++) {
        uint32_t to = b->label_off[b->fixup[i].label];
        if (to == UINT32_MAX)
            b_fail(b, CLRMUX_IL_E_ARG, "label %u is never marked", b->fixup[i].label);
        else
            wr32(b->data + b->fixup[i].at, to - b->fixup[i].next);
    }
    b->n_fixups = 0;
    return b->err ? fail(err, errlen, b->err, "%s", b->msg) : 0;
}
