/* Unit tests for src/tracer/il.c: exact byte checks of parse/emit, edits,
 * builder, signatures and the wrap rewrite (ECMA-335 II.25.4, III). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/il.h"

#define BYTES(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

static char err[256];

static void dump(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "%s (%zu):", what, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%02X", i % 16 ? " " : "\n  ", p[i]);
    fprintf(stderr, "\n");
}

static void expect_bytes(const uint8_t *got, size_t got_len, const uint8_t *exp, size_t exp_len)
{
    if (got_len != exp_len || memcmp(got, exp, exp_len)) {
        dump("expected", exp, exp_len);
        dump("got", got, got_len);
        fail_msg("byte mismatch");
    }
}

/* Emit b and compare with exp exactly. */
static void expect_emit(clrmux_il_body *b, const uint8_t *exp, size_t len)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = clrmux_il_emit(b, &out, &out_len, err, sizeof err);
    if (rc)
        fail_msg("emit failed %d: %s", rc, err);
    expect_bytes(out, out_len, exp, len);
    free(out);
}

static void parse_ok(const uint8_t *p, size_t n, clrmux_il_body *b)
{
    size_t used = 0;
    int rc = clrmux_il_parse(p, n, b, &used, err, sizeof err);
    if (rc)
        fail_msg("parse failed %d: %s", rc, err);
    assert_int_equal(used, n);
}

static void roundtrip(const uint8_t *p, size_t n)
{
    clrmux_il_body b;
    parse_ok(p, n, &b);
    expect_emit(&b, p, n);
    clrmux_il_body_free(&b);
}

static int parse_rc(const uint8_t *p, size_t n)
{
    clrmux_il_body b;
    err[0] = 0;
    int rc = clrmux_il_parse(p, n, &b, NULL, err, sizeof err);
    if (!rc)
        clrmux_il_body_free(&b);
    else
        assert_true(err[0] != 0);
    return rc;
}

/* ---- parse / emit round trips ---- */

static void test_tiny_roundtrip(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x02, 0x2A), &b); /* ldarg.0; ret */
    assert_int_equal(b.fat, 0);
    assert_int_equal(b.max_stack, 8);
    assert_int_equal(b.code_size, 2);
    assert_int_equal(b.n_instrs, 2);
    assert_int_equal(b.instrs[0].opcode, 0x02);
    assert_int_equal(b.instrs[1].opcode, CLRMUX_IL_OP_RET);
    assert_int_equal(b.instrs[1].offset, 1);
    clrmux_il_body_free(&b);
    roundtrip(BYTES(0x0A, 0x02, 0x2A));
}

static void test_fat_locals_roundtrip(void **state)
{
    (void)state;
    /* .maxstack 2 .locals init (tok 0x11000001): ldarg.0 stloc.0 ldloc.0 ldc.i4.1 add
     * stloc.1 ldloc.1 ldloc.s 5 pop ret */
    static const uint8_t in[] = {0x13, 0x30, 0x02, 0x00, 0x0B, 0x00, 0x00, 0x00, 0x01, 0x00,
                                 0x00, 0x11, 0x02, 0x0A, 0x06, 0x17, 0x58, 0x0B, 0x07, 0x11,
                                 0x05, 0x26, 0x2A};
    clrmux_il_body b;
    parse_ok(in, sizeof in, &b);
    assert_int_equal(b.fat, 1);
    assert_int_equal(b.flags, CLRMUX_IL_FAT_FORMAT | CLRMUX_IL_INIT_LOCALS);
    assert_int_equal(b.max_stack, 2);
    assert_int_equal(b.local_sig_tok, 0x11000001);
    assert_int_equal(b.n_instrs, 10);
    assert_int_equal(b.instrs[7].opcode, CLRMUX_IL_OP_LDLOC_S);
    assert_int_equal(b.instrs[7].kind, CLRMUX_IL_OPND_U8);
    assert_int_equal(b.instrs[7].imm, 5);
    expect_emit(&b, in, sizeof in);
    clrmux_il_body_free(&b);
}

/* try { nop; leave.s L } finally { call 0x0A000001; endfinally } L: ret */
static const uint8_t TRY_FINALLY[] = {
    0x1B, 0x30, 0x01, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xDE, 0x06, 0x28, 0x01, 0x00, 0x00, 0x0A, 0xDC, 0x2A, 0x00, 0x00,
    0x01, 0x10, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00};

static void test_small_eh_roundtrip(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(TRY_FINALLY, sizeof TRY_FINALLY, &b);
    assert_int_equal(b.flags & CLRMUX_IL_MORE_SECTS, CLRMUX_IL_MORE_SECTS);
    assert_int_equal(b.eh_fat, 0);
    assert_int_equal(b.n_eh, 1);
    assert_int_equal(b.eh[0].flags, CLRMUX_IL_EH_FINALLY);
    assert_int_equal(b.eh[0].try_start, 0);
    assert_int_equal(b.eh[0].try_end, 2);
    assert_int_equal(b.eh[0].handler_start, 2);
    assert_int_equal(b.eh[0].handler_end, 4);
    assert_int_equal(b.instrs[1].target, 4);
    expect_emit(&b, TRY_FINALLY, sizeof TRY_FINALLY);
    clrmux_il_body_free(&b);
}

static void test_fat_eh_roundtrip(void **state)
{
    (void)state;
    /* try { nop; leave.s L } catch [0x01000001] { pop; leave.s L } L: ret, fat clauses */
    static const uint8_t in[] = {
        0x1B, 0x30, 0x01, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xDE, 0x03, 0x26, 0xDE, 0x00, 0x2A, 0x00,
        0x41, 0x1C, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
        0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01};
    clrmux_il_body b;
    parse_ok(in, sizeof in, &b);
    assert_int_equal(b.eh_fat, 1);
    assert_int_equal(b.n_eh, 1);
    assert_int_equal(b.eh[0].flags, CLRMUX_IL_EH_EXCEPTION);
    assert_int_equal(b.eh[0].class_token, 0x01000001);
    assert_int_equal(b.eh[0].handler_start, 2);
    assert_int_equal(b.eh[0].handler_end, 4);
    expect_emit(&b, in, sizeof in);
    clrmux_il_body_free(&b);
}

/* ldarg.0; switch (L0, L1, L2); ldc.i4.m1; ret; L0: ldc.i4.0; ret; L1: ldc.i4.1; ret;
 * L2: ldc.i4.2; ret */
static const uint8_t SWITCH_BODY[] = {0x6A, 0x02, 0x45, 0x03, 0x00, 0x00, 0x00, 0x02, 0x00,
                                      0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00,
                                      0x00, 0x15, 0x2A, 0x16, 0x2A, 0x17, 0x2A, 0x18, 0x2A};

static void test_switch_roundtrip(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(SWITCH_BODY, sizeof SWITCH_BODY, &b);
    assert_int_equal(b.n_instrs, 10);
    assert_int_equal(b.instrs[1].opcode, CLRMUX_IL_OP_SWITCH);
    assert_int_equal(b.instrs[1].n_targets, 3);
    assert_int_equal(b.instrs[1].targets[0], 4);
    assert_int_equal(b.instrs[1].targets[1], 6);
    assert_int_equal(b.instrs[1].targets[2], 8);
    assert_int_equal(b.instrs[2].offset, 18);
    expect_emit(&b, SWITCH_BODY, sizeof SWITCH_BODY);
    clrmux_il_body_free(&b);
}

static void test_switch_remap(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(SWITCH_BODY, sizeof SWITCH_BODY, &b);
    clrmux_il_instr nops[2] = {clrmux_il_make(0, 0), clrmux_il_make(0, 0)};
    assert_int_equal(clrmux_il_insert(&b, 5, nops, 2, err, sizeof err), 0);
    assert_int_equal(b.instrs[1].targets[0], 4);
    assert_int_equal(b.instrs[1].targets[1], 8);
    assert_int_equal(b.instrs[1].targets[2], 10);
    expect_emit(&b, BYTES(0x72, 0x02, 0x45, 0x03, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
                          0x06, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x15, 0x2A, 0x16,
                          0x00, 0x00, 0x2A, 0x17, 0x2A, 0x18, 0x2A));
    clrmux_il_body_free(&b);
}

static void test_prefixes_roundtrip(void **state)
{
    (void)state;
    static const uint8_t in[] = {
        0xC2,                               /* tiny, 48 bytes */
        0x0F, 0x00,                         /* ldarga.s 0 */
        0xFE, 0x16, 0x02, 0x00, 0x00, 0x1B, /* constrained. 0x1B000002 */
        0x6F, 0x03, 0x00, 0x00, 0x0A,       /* callvirt */
        0x26, 0x02,                         /* pop; ldarg.0 */
        0xFE, 0x12, 0x01,                   /* unaligned. 1 */
        0xFE, 0x13, 0x4A, 0x26,             /* volatile. ldind.i4 pop */
        0x14, 0x16, 0xFE, 0x19, 0x02, 0x9A, 0x26, /* ldnull ldc.i4.0 no. 2 ldelem.ref pop */
        0x14, 0x16, 0xFE, 0x1E, 0x8F, 0x05, 0x00, 0x00, 0x01, 0x26, /* readonly. ldelema */
        0x02, 0xFE, 0x14, 0x28, 0x04, 0x00, 0x00, 0x0A, 0x2A};      /* tail. call; ret */
    clrmux_il_body b;
    parse_ok(in, sizeof in, &b);
    assert_int_equal(b.instrs[1].opcode, CLRMUX_IL_OP_CONSTRAINED);
    assert_int_equal(b.instrs[1].kind, CLRMUX_IL_OPND_TOKEN);
    assert_int_equal(b.instrs[1].imm, 0x1B000002);
    assert_int_equal(b.instrs[2].opcode, CLRMUX_IL_OP_CALLVIRT);
    assert_int_equal(b.instrs[5].opcode, CLRMUX_IL_OP_UNALIGNED);
    assert_int_equal(b.instrs[5].imm, 1);
    assert_int_equal(b.instrs[6].opcode, CLRMUX_IL_OP_VOLATILE);
    assert_int_equal(b.instrs[11].opcode, CLRMUX_IL_OP_NO);
    assert_int_equal(b.instrs[16].opcode, CLRMUX_IL_OP_READONLY);
    assert_int_equal(b.instrs[20].opcode, CLRMUX_IL_OP_TAIL);
    assert_int_equal(b.instrs[21].opcode, CLRMUX_IL_OP_CALL);
    assert_int_equal(b.n_instrs, 23);
    expect_emit(&b, in, sizeof in);
    clrmux_il_body_free(&b);
}

static void test_operands_roundtrip(void **state)
{
    (void)state;
    static const uint8_t in[] = {
        0x03, 0x30, 0x01, 0x00, 0x2F, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x11,
        0x1F, 0xFB, 0x26,                                           /* ldc.i4.s -5 */
        0x20, 0x78, 0x56, 0x34, 0x12, 0x26,                         /* ldc.i4 */
        0x21, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x26, /* ldc.i8 */
        0x22, 0x00, 0x00, 0x80, 0x3F, 0x26,                         /* ldc.r4 1.0 */
        0x23, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F, 0x26, /* ldc.r8 1.0 */
        0xFE, 0x0C, 0x00, 0x01, 0x26,                               /* ldloc 256 */
        0x72, 0x01, 0x00, 0x00, 0x70, 0x26, 0x2A};                  /* ldstr */
    clrmux_il_body b;
    parse_ok(in, sizeof in, &b);
    assert_int_equal(b.flags, CLRMUX_IL_FAT_FORMAT);
    assert_int_equal(b.instrs[0].imm, -5);
    assert_int_equal(b.instrs[2].imm, 0x12345678);
    assert_int_equal(b.instrs[4].imm, 0x1122334455667788LL);
    assert_int_equal(b.instrs[6].imm, 0x3F800000);
    assert_int_equal(b.instrs[8].imm, 0x3FF0000000000000LL);
    assert_int_equal(b.instrs[10].opcode, CLRMUX_IL_OP_LDLOC);
    assert_int_equal(b.instrs[10].imm, 256);
    assert_int_equal(b.instrs[12].imm, 0x70000001);
    expect_emit(&b, in, sizeof in);
    clrmux_il_body_free(&b);
}

/* ---- editing and re-layout ---- */

static void test_tiny_to_fat_on_growth(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x02, 0x2A), &b);
    clrmux_il_instr nops[70];
    for (int i = 0; i < 70; i++)
        nops[i] = clrmux_il_make(CLRMUX_IL_OP_NOP, 0);
    assert_int_equal(clrmux_il_insert(&b, 1, nops, 70, err, sizeof err), 0);
    uint8_t exp[84] = {0x13, 0x30, 0x08, 0x00, 0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02};
    exp[83] = 0x2A;
    expect_emit(&b, exp, sizeof exp);
    assert_int_equal(b.fat, 1);
    clrmux_il_body_free(&b);

    /* 63 bytes of code still fit a tiny header */
    parse_ok(BYTES(0x0A, 0x02, 0x2A), &b);
    assert_int_equal(clrmux_il_insert(&b, 1, nops, 61, err, sizeof err), 0);
    uint8_t exp2[64] = {0xFE, 0x02};
    exp2[63] = 0x2A;
    expect_emit(&b, exp2, sizeof exp2);
    clrmux_il_body_free(&b);
}

static void test_tiny_to_fat_on_header_fields(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x02, 0x2A), &b);
    b.max_stack = 9;
    expect_emit(&b, BYTES(0x13, 0x30, 0x09, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x02, 0x2A));
    clrmux_il_body_free(&b);
    parse_ok(BYTES(0x0A, 0x02, 0x2A), &b);
    b.local_sig_tok = 0x11000004;
    expect_emit(&b, BYTES(0x13, 0x30, 0x08, 0x00, 0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x11,
                          0x02, 0x2A));
    clrmux_il_body_free(&b);
}

static void test_small_to_fat_eh_on_growth(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(TRY_FINALLY, sizeof TRY_FINALLY, &b);
    clrmux_il_instr *nops = calloc(0x10000, sizeof *nops);
    assert_non_null(nops);
    for (int i = 0; i < 0x10000; i++)
        nops[i] = clrmux_il_make(CLRMUX_IL_OP_NOP, 0);
    /* 300 nops inside the try: try length 303 > 0xFF */
    assert_int_equal(clrmux_il_insert(&b, 1, nops, 300, err, sizeof err), 0);
    uint8_t exp[352] = {0x1B, 0x30, 0x01, 0x00, 0x36, 0x01, 0x00, 0x00};
    static const uint8_t tail[] = {0xDE, 0x06, 0x28, 0x01, 0x00, 0x00, 0x0A, 0xDC, 0x2A, 0, 0,
                                   0x41, 0x1C, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x2F, 0x01, 0x00, 0x00, 0x2F, 0x01, 0x00, 0x00,
                                   0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(exp + 12 + 301, tail, sizeof tail);
    expect_emit(&b, exp, sizeof exp);
    assert_int_equal(b.eh_fat, 1);
    clrmux_il_body_free(&b);

    /* 0x10000 nops before the try: try offset > 0xFFFF; re-parses to the same clause */
    parse_ok(TRY_FINALLY, sizeof TRY_FINALLY, &b);
    clrmux_il_instr ld = clrmux_il_make(CLRMUX_IL_OP_LDNULL, 0);
    clrmux_il_instr pop = clrmux_il_make(CLRMUX_IL_OP_POP, 0);
    assert_int_equal(clrmux_il_insert(&b, 0, nops, 0x10000, err, sizeof err), 0);
    assert_int_equal(clrmux_il_insert(&b, 0, &ld, 1, err, sizeof err), 0);
    assert_int_equal(clrmux_il_insert(&b, 1, &pop, 1, err, sizeof err), 0);
    uint8_t *out;
    size_t len;
    assert_int_equal(clrmux_il_emit(&b, &out, &len, err, sizeof err), 0);
    assert_int_equal(b.eh_fat, 1);
    assert_int_equal(b.instrs[b.n_instrs - 4].kind, CLRMUX_IL_OPND_BR8); /* leave.s stays short */
    clrmux_il_body b2;
    parse_ok(out, len, &b2);
    assert_int_equal(b2.eh_fat, 1);
    assert_int_equal(b2.eh[0].try_start, 0x10002);
    assert_int_equal(b2.eh[0].handler_end, 0x10002 + 4);
    assert_int_equal(b2.instrs[b2.eh[0].try_start].offset, 0x10002);
    expect_emit(&b2, out, len);
    free(out);
    clrmux_il_body_free(&b2);
    clrmux_il_body_free(&b);
    free(nops);
}

static void test_short_branch_widening(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x12, 0x2B, 0x01, 0x00, 0x2A), &b); /* br.s L; nop; L: ret */
    clrmux_il_instr nops[200];
    for (int i = 0; i < 200; i++)
        nops[i] = clrmux_il_make(CLRMUX_IL_OP_NOP, 0);
    assert_int_equal(clrmux_il_insert(&b, 1, nops, 200, err, sizeof err), 0);
    uint8_t exp[219] = {0x13, 0x30, 0x08, 0x00, 0xCF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                        0x38, 0xC9, 0x00, 0x00, 0x00};
    exp[218] = 0x2A;
    expect_emit(&b, exp, sizeof exp);
    assert_int_equal(b.instrs[0].opcode, CLRMUX_IL_OP_BR);
    assert_int_equal(b.instrs[0].target, 202);
    clrmux_il_body_free(&b);
}

static void test_widening_fixpoint(void **state)
{
    (void)state;
    /* brtrue.s A (+126); br.s B (+125); 124 nops; A: ret; B: ret */
    uint8_t in[142] = {0x03, 0x30, 0x08, 0x00, 0x82, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                       0x2D, 0x7E, 0x2B, 0x7D};
    in[140] = 0x2A, in[141] = 0x2A;
    clrmux_il_body b;
    parse_ok(in, sizeof in, &b);
    expect_emit(&b, in, sizeof in);
    clrmux_il_instr nops[200];
    for (int i = 0; i < 200; i++)
        nops[i] = clrmux_il_make(CLRMUX_IL_OP_NOP, 0);
    /* pushes B out of int8 range; widening br.s then pushes A out too */
    assert_int_equal(clrmux_il_insert(&b, 127, nops, 200, err, sizeof err), 0);
    uint8_t *out;
    size_t len;
    assert_int_equal(clrmux_il_emit(&b, &out, &len, err, sizeof err), 0);
    assert_int_equal(len, 12 + 336);
    expect_bytes(out + 12, 10, BYTES(0x3A, 0x81, 0x00, 0x00, 0x00, 0x38, 0x45, 0x01, 0x00, 0x00));
    assert_int_equal(out[12 + 134], 0x2A);
    assert_int_equal(out[12 + 335], 0x2A);
    free(out);
    clrmux_il_body_free(&b);
}

static void test_replace_delete_remap(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x12, 0x2B, 0x01, 0x00, 0x2A), &b); /* br.s L; nop; L: ret */
    clrmux_il_instr rep[2] = {clrmux_il_make(CLRMUX_IL_OP_NOP, 0), clrmux_il_make(CLRMUX_IL_OP_RET, 0)};
    assert_int_equal(clrmux_il_replace(&b, 2, 1, rep, 2, err, sizeof err), 0);
    assert_int_equal(b.instrs[0].target, 2); /* the branch to the ret now hits the first new one */
    expect_emit(&b, BYTES(0x16, 0x2B, 0x01, 0x00, 0x00, 0x2A));
    assert_int_equal(clrmux_il_replace(&b, 1, 1, NULL, 0, err, sizeof err), 0);
    expect_emit(&b, BYTES(0x12, 0x2B, 0x00, 0x00, 0x2A));
    /* NEW_TARGET: brtrue.s to the 3rd inserted instruction */
    clrmux_il_instr ins[3] = {clrmux_il_make(CLRMUX_IL_OP_BRTRUE_S, CLRMUX_IL_NEW_TARGET(2)),
                              clrmux_il_make(CLRMUX_IL_OP_NOP, 0), clrmux_il_make(CLRMUX_IL_OP_POP, 0)};
    assert_int_equal(clrmux_il_insert(&b, 0, ins, 3, err, sizeof err), 0);
    expect_emit(&b, BYTES(0x22, 0x2D, 0x01, 0x00, 0x26, 0x2B, 0x00, 0x00, 0x2A));
    /* bad inputs leave the body alone */
    clrmux_il_instr bad = clrmux_il_make(0x24, 0);
    assert_int_equal(clrmux_il_insert(&b, 0, &bad, 1, err, sizeof err), CLRMUX_IL_E_ARG);
    bad = clrmux_il_make(CLRMUX_IL_OP_BR, 99);
    assert_int_equal(clrmux_il_insert(&b, 0, &bad, 1, err, sizeof err), CLRMUX_IL_E_ARG);
    bad = clrmux_il_make(CLRMUX_IL_OP_LDC_I4_S, 200);
    assert_int_equal(clrmux_il_insert(&b, 0, &bad, 1, err, sizeof err), CLRMUX_IL_E_ARG);
    assert_int_equal(clrmux_il_replace(&b, 5, 2, NULL, 0, err, sizeof err), CLRMUX_IL_E_ARG);
    assert_int_equal(b.n_instrs, 6);
    clrmux_il_body_free(&b);

    /* replacing the last instruction of a try keeps all new ones inside it */
    parse_ok(TRY_FINALLY, sizeof TRY_FINALLY, &b);
    clrmux_il_instr r2[2] = {clrmux_il_make(CLRMUX_IL_OP_NOP, 0), clrmux_il_make(CLRMUX_IL_OP_LEAVE_S, 4)};
    assert_int_equal(clrmux_il_replace(&b, 1, 1, r2, 2, err, sizeof err), 0);
    assert_int_equal(b.eh[0].try_end, 3);
    assert_int_equal(b.eh[0].handler_start, 3);
    assert_int_equal(b.instrs[2].target, 5);
    clrmux_il_body_free(&b);
}

/* ---- builder ---- */

static void test_builder_forms(void **state)
{
    (void)state;
    clrmux_il_builder bb;
    clrmux_il_b_init(&bb);
    static const uint32_t ldloc[] = {0, 3, 4, 255, 256};
    for (size_t i = 0; i < 5; i++)
        clrmux_il_b_var(&bb, CLRMUX_IL_LDLOC, ldloc[i]);
    clrmux_il_b_var(&bb, CLRMUX_IL_STLOC, 2);
    clrmux_il_b_var(&bb, CLRMUX_IL_STLOC, 200);
    clrmux_il_b_var(&bb, CLRMUX_IL_STLOC, 300);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDARG, 1);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDARG, 5);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDARG, 1000);
    clrmux_il_b_var(&bb, CLRMUX_IL_STARG, 1);
    clrmux_il_b_var(&bb, CLRMUX_IL_STARG, 300);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDLOCA, 0);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDLOCA, 256);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDARGA, 2);
    static const int32_t c4[] = {-1, 0, 8, 9, -128, 127, 128, -129, 0x12345678};
    for (size_t i = 0; i < 9; i++)
        clrmux_il_b_ldc_i4(&bb, c4[i]);
    clrmux_il_b_ldc_i8(&bb, 5);
    clrmux_il_b_ldc_i8(&bb, 0x100000000LL);
    clrmux_il_b_token(&bb, CLRMUX_IL_OP_CALL, 0x0A000001);
    clrmux_il_b_token(&bb, CLRMUX_IL_OP_CALLVIRT, 0x0A000002);
    clrmux_il_b_token(&bb, CLRMUX_IL_OP_CALLI, 0x11000003);
    clrmux_il_b_ldc_r8(&bb, 1.0);
    clrmux_il_b_op(&bb, CLRMUX_IL_OP_POP);
    clrmux_il_b_op_arg(&bb, CLRMUX_IL_OP_UNALIGNED, 4);
    assert_int_equal(clrmux_il_b_finish(&bb, err, sizeof err), 0);
    static const uint8_t exp[] = {
        0x06, 0x09, 0x11, 0x04, 0x11, 0xFF, 0xFE, 0x0C, 0x00, 0x01,  /* ldloc */
        0x0C, 0x13, 0xC8, 0xFE, 0x0E, 0x2C, 0x01,                    /* stloc */
        0x03, 0x0E, 0x05, 0xFE, 0x09, 0xE8, 0x03,                    /* ldarg */
        0x10, 0x01, 0xFE, 0x0B, 0x2C, 0x01,                          /* starg */
        0x12, 0x00, 0xFE, 0x0D, 0x00, 0x01, 0x0F, 0x02,              /* ldloca ldarga */
        0x15, 0x16, 0x1E, 0x1F, 0x09, 0x1F, 0x80, 0x1F, 0x7F,        /* ldc.i4 short */
        0x20, 0x80, 0x00, 0x00, 0x00, 0x20, 0x7F, 0xFF, 0xFF, 0xFF, 0x20, 0x78, 0x56, 0x34, 0x12,
        0x1B, 0x6A, 0x21, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, /* ldc.i8 */
        0x28, 0x01, 0x00, 0x00, 0x0A, 0x6F, 0x02, 0x00, 0x00, 0x0A, 0x29, 0x03, 0x00, 0x00, 0x11,
        0x23, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F, 0x26, 0xFE, 0x12, 0x04};
    expect_bytes(bb.data, bb.len, exp, sizeof exp);
    clrmux_il_body code;
    assert_int_equal(clrmux_il_parse_code(bb.data, bb.len, &code, err, sizeof err), 0);
    assert_int_equal(code.n_instrs, 34);
    clrmux_il_body_free(&code);
    clrmux_il_b_free(&bb);
}

static void test_builder_labels_and_errors(void **state)
{
    (void)state;
    clrmux_il_builder bb;
    clrmux_il_b_init(&bb);
    uint32_t top = clrmux_il_b_label(&bb), skip = clrmux_il_b_label(&bb), far = clrmux_il_b_label(&bb);
    clrmux_il_b_mark(&bb, top);
    clrmux_il_b_op(&bb, CLRMUX_IL_OP_NOP);
    clrmux_il_b_branch(&bb, CLRMUX_IL_OP_BRTRUE_S, top); /* backward, fits: short */
    clrmux_il_b_branch(&bb, CLRMUX_IL_OP_BRFALSE_S, skip); /* forward: long */
    clrmux_il_b_op(&bb, CLRMUX_IL_OP_NOP);
    clrmux_il_b_mark(&bb, skip);
    clrmux_il_b_op(&bb, CLRMUX_IL_OP_LDNULL);
    clrmux_il_b_mark(&bb, far);
    for (int i = 0; i < 200; i++)
        clrmux_il_b_op(&bb, CLRMUX_IL_OP_NOP);
    clrmux_il_b_branch(&bb, CLRMUX_IL_OP_BR_S, far); /* backward, too far: long */
    assert_int_equal(clrmux_il_b_finish(&bb, err, sizeof err), 0);
    assert_int_equal(bb.len, 10 + 200 + 5);
    expect_bytes(bb.data, 10, BYTES(0x00, 0x2D, 0xFD, 0x39, 0x01, 0x00, 0x00, 0x00, 0x00, 0x14));
    expect_bytes(bb.data + 210, 5, BYTES(0x38, 0x33, 0xFF, 0xFF, 0xFF)); /* -205 */
    clrmux_il_body code;
    assert_int_equal(clrmux_il_parse_code(bb.data, bb.len, &code, err, sizeof err), 0);
    assert_int_equal(code.instrs[1].target, 0);
    assert_int_equal(code.instrs[2].target, 4);
    assert_int_equal(code.instrs[code.n_instrs - 1].target, 5);
    clrmux_il_body_free(&code);
    clrmux_il_b_free(&bb);

    clrmux_il_b_init(&bb);
    clrmux_il_b_op(&bb, CLRMUX_IL_OP_CALL); /* needs a token */
    clrmux_il_b_op(&bb, CLRMUX_IL_OP_NOP);  /* ignored after the first error */
    assert_int_equal(clrmux_il_b_finish(&bb, err, sizeof err), CLRMUX_IL_E_ARG);
    assert_non_null(strstr(err, "0x28"));
    assert_int_equal(bb.len, 0);
    clrmux_il_b_free(&bb);

    clrmux_il_b_init(&bb);
    uint32_t l = clrmux_il_b_label(&bb);
    clrmux_il_b_branch(&bb, CLRMUX_IL_OP_BR, l);
    assert_int_equal(clrmux_il_b_finish(&bb, err, sizeof err), CLRMUX_IL_E_ARG); /* never marked */
    clrmux_il_b_free(&bb);

    clrmux_il_b_init(&bb);
    clrmux_il_b_token(&bb, CLRMUX_IL_OP_POP, 1);
    assert_int_equal(clrmux_il_b_finish(&bb, err, sizeof err), CLRMUX_IL_E_ARG);
    clrmux_il_b_free(&bb);
    clrmux_il_b_init(&bb);
    clrmux_il_b_var(&bb, CLRMUX_IL_LDLOC, 0x10000);
    assert_int_equal(clrmux_il_b_finish(&bb, err, sizeof err), CLRMUX_IL_E_RANGE);
    clrmux_il_b_free(&bb);
}

/* ---- signatures ---- */

static void test_compressed_ints(void **state)
{
    (void)state;
    static const struct { uint32_t v; uint8_t n, b[4]; } cases[] = {
        {0x03, 1, {0x03}}, {0x7F, 1, {0x7F}}, {0x80, 2, {0x80, 0x80}}, {0x2E57, 2, {0xAE, 0x57}},
        {0x3FFF, 2, {0xBF, 0xFF}}, {0x4000, 4, {0xC0, 0x00, 0x40, 0x00}},
        {0x1FFFFFFF, 4, {0xDF, 0xFF, 0xFF, 0xFF}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t buf[4];
        uint32_t v = 0;
        assert_int_equal(clrmux_il_sig_compress(cases[i].v, buf), cases[i].n);
        assert_memory_equal(buf, cases[i].b, cases[i].n);
        assert_int_equal(clrmux_il_sig_uncompress(buf, cases[i].n, &v), cases[i].n);
        assert_int_equal(v, cases[i].v);
    }
    uint8_t buf[4];
    uint32_t v;
    assert_int_equal(clrmux_il_sig_compress(0x20000000, buf), CLRMUX_IL_E_RANGE);
    assert_int_equal(clrmux_il_sig_uncompress(BYTES(0x80), &v), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(clrmux_il_sig_uncompress(BYTES(0xC0, 0, 0), &v), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(clrmux_il_sig_uncompress(BYTES(0xE0, 0, 0, 0), &v), CLRMUX_IL_E_FORMAT);
}

static void check_sig(const uint8_t *sig, size_t len, uint32_t params, int is_void, size_t roff,
                      size_t rlen)
{
    clrmux_il_method_sig ms;
    int rc = clrmux_il_parse_method_sig(sig, len, &ms, err, sizeof err);
    if (rc)
        fail_msg("sig: %s", err);
    assert_int_equal(ms.param_count, params);
    assert_int_equal(ms.returns_void, is_void);
    assert_int_equal(ms.ret_offset, roff);
    assert_int_equal(ms.ret_len, rlen);
}

static void test_method_sig(void **state)
{
    (void)state;
    check_sig(BYTES(0x20, 0x00, 0x01), 0, 1, 2, 1);                   /* instance void () */
    check_sig(BYTES(0x00, 0x02, 0x08, 0x0E, 0x1C), 2, 0, 2, 1);       /* int32 (string, object) */
    /* generic: !!0 List<!!0> M<T>(!!0) */
    static const uint8_t g[] = {0x10, 0x01, 0x01, 0x15, 0x12, 0x49, 0x01, 0x1E, 0x00, 0x1E, 0x00};
    check_sig(g, sizeof g, 1, 0, 3, 6);
    clrmux_il_method_sig ms;
    assert_int_equal(clrmux_il_parse_method_sig(g, sizeof g, &ms, err, sizeof err), 0);
    assert_int_equal(ms.gen_param_count, 1);
    assert_int_equal(ms.call_conv, CLRMUX_SIG_GENERIC);
    check_sig(BYTES(0x00, 0x00, 0x1F, 0x42, 0x10, 0x13, 0x00), 0, 0, 2, 5); /* modreq ref !0 */
    check_sig(BYTES(0x00, 0x00, 0x20, 0x42, 0x01), 0, 1, 2, 3);             /* modopt void */
    /* void (int32[,], method void *()) ; typedbyref (valuetype, int*) */
    check_sig(BYTES(0x00, 0x02, 0x01, 0x14, 0x08, 0x02, 0x00, 0x00, 0x1B, 0x00, 0x00, 0x01), 2, 1,
              2, 1);
    check_sig(BYTES(0x00, 0x02, 0x16, 0x11, 0x81, 0x02, 0x0F, 0x08), 2, 0, 2, 1);
    check_sig(BYTES(0x05, 0x02, 0x01, 0x08, 0x41, 0x0E), 2, 1, 2, 1); /* vararg ... */
    check_sig(BYTES(0x20, 0x00, 0x1D, 0x1D, 0x12, 0x81, 0x00), 0, 0, 2, 5); /* object[][] */
    /* parameters past the fourth are located too (an integration reads arg4..: the
     * HandleBasicDeliver(string, uint64, bool, string, string, class, valuetype) shape) */
    static const uint8_t seven[] = {0x20, 0x07, 0x01, 0x0E, 0x0B, 0x02, 0x0E, 0x0E, 0x12, 0x81, 0x00, 0x11, 0x82, 0x00};
    assert_int_equal(clrmux_il_parse_method_sig(seven, sizeof seven, &ms, err, sizeof err), 0);
    assert_int_equal(ms.param_count, 7);
    static const size_t off[] = {3, 4, 5, 6, 7, 8, 11}, plen[] = {1, 1, 1, 1, 1, 3, 3};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(ms.param_offset[i], off[i]);
        assert_int_equal(ms.param_len[i], plen[i]);
    }

    assert_int_equal(clrmux_il_parse_method_sig(BYTES(0x20, 0x01, 0x01), &ms, err, sizeof err),
                     CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(clrmux_il_parse_method_sig(BYTES(0x00, 0x00, 0x50), &ms, err, sizeof err),
                     CLRMUX_IL_E_FORMAT);
    assert_int_equal(clrmux_il_parse_method_sig(BYTES(0x06, 0x08), &ms, err, sizeof err),
                     CLRMUX_IL_E_FORMAT); /* field signature */
    uint8_t deep[104] = {0x00, 0x00};
    memset(deep + 2, 0x1D, 101);
    deep[103] = 0x08;
    assert_int_equal(clrmux_il_parse_method_sig(deep, sizeof deep, &ms, err, sizeof err),
                     CLRMUX_IL_E_FORMAT);
}

static void test_locals_append_small(void **state)
{
    (void)state;
    uint8_t *out;
    size_t len;
    uint32_t first;
    /* no locals yet: add int64 and class 0x49 */
    assert_int_equal(clrmux_il_locals_append(NULL, 0, BYTES(0x0A, 0x12, 0x49), 2, &out, &len,
                                             &first, err, sizeof err), 0);
    expect_bytes(out, len, BYTES(0x07, 0x02, 0x0A, 0x12, 0x49));
    assert_int_equal(first, 0);
    free(out);
    /* existing (int32, pinned byref int8[]): append object and a method's return type */
    static const uint8_t sig[] = {0x07, 0x02, 0x08, 0x45, 0x10, 0x1D, 0x04};
    static const uint8_t msig[] = {0x20, 0x00, 0x15, 0x12, 0x49, 0x01, 0x08};
    clrmux_il_method_sig ms;
    assert_int_equal(clrmux_il_parse_method_sig(msig, sizeof msig, &ms, err, sizeof err), 0);
    uint8_t types[8] = {0x1C};
    memcpy(types + 1, msig + ms.ret_offset, ms.ret_len);
    assert_int_equal(clrmux_il_locals_append(sig, sizeof sig, types, 1 + ms.ret_len, 2, &out, &len,
                                             &first, err, sizeof err), 0);
    expect_bytes(out, len,
                 BYTES(0x07, 0x04, 0x08, 0x45, 0x10, 0x1D, 0x04, 0x1C, 0x15, 0x12, 0x49, 0x01, 0x08));
    assert_int_equal(first, 2);
    free(out);

    assert_int_equal(clrmux_il_locals_append(BYTES(0x06, 0x00), BYTES(0x0A), 1, &out, &len, &first,
                                             err, sizeof err), CLRMUX_IL_E_FORMAT);
    assert_non_null(strstr(err, "LocalVarSig"));
    assert_int_equal(clrmux_il_locals_append(sig, sizeof sig, BYTES(0x0A, 0x0A), 1, &out, &len,
                                             &first, err, sizeof err), CLRMUX_IL_E_FORMAT);
    assert_int_equal(clrmux_il_locals_append(sig, sizeof sig, BYTES(0x12), 1, &out, &len, &first,
                                             err, sizeof err), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(clrmux_il_locals_append(BYTES(0x07, 0xC0, 0x00, 0xFF, 0xFF), BYTES(0x0A), 1,
                                             &out, &len, &first, err, sizeof err),
                     CLRMUX_IL_E_RANGE);
    assert_null(out);
}

static void test_locals_append_wide_counts(void **state)
{
    (void)state;
    uint8_t *out;
    size_t len;
    uint32_t first;
    /* 300 int32 locals (count 0x81 0x2C) + int64 -> 301 */
    uint8_t *sig = malloc(3 + 0x3FFF);
    assert_non_null(sig);
    sig[0] = 0x07, sig[1] = 0x81, sig[2] = 0x2C;
    memset(sig + 3, 0x08, 300);
    assert_int_equal(clrmux_il_locals_append(sig, 303, BYTES(0x0A), 1, &out, &len, &first, err,
                                             sizeof err), 0);
    assert_int_equal(len, 304);
    expect_bytes(out, 3, BYTES(0x07, 0x81, 0x2D));
    assert_memory_equal(out + 3, sig + 3, 300);
    assert_int_equal(out[303], 0x0A);
    assert_int_equal(first, 300);
    free(out);
    /* 0x3FFF objects (2-byte count) + 2 -> 0x4001 needs the 4-byte form */
    sig[1] = 0xBF, sig[2] = 0xFF;
    memset(sig + 3, 0x1C, 0x3FFF);
    assert_int_equal(clrmux_il_locals_append(sig, 3 + 0x3FFF, BYTES(0x0A, 0x1C), 2, &out, &len,
                                             &first, err, sizeof err), 0);
    assert_int_equal(len, 1 + 4 + 0x3FFF + 2);
    expect_bytes(out, 5, BYTES(0x07, 0xC0, 0x00, 0x40, 0x01));
    assert_memory_equal(out + 5, sig + 3, 0x3FFF);
    expect_bytes(out + 5 + 0x3FFF, 2, BYTES(0x0A, 0x1C));
    assert_int_equal(first, 0x3FFF);
    uint32_t count;
    assert_int_equal(clrmux_il_sig_uncompress(out + 1, len - 1, &count), 4);
    assert_int_equal(count, 0x4001);
    free(out);
    free(sig);
}

/* ---- wrap ---- */

static clrmux_il_wrap_spec probe_spec(uint32_t ret_local, uint32_t tok, uint16_t extra)
{
    static const uint8_t entry[] = {0x28, 0x01, 0x00, 0x00, 0x0A};
    static const uint8_t exit_[] = {0x28, 0x02, 0x00, 0x00, 0x0A};
    static const uint8_t filter[] = {0x28, 0x03, 0x00, 0x00, 0x0A, 0x16};
    clrmux_il_wrap_spec s = {entry, sizeof entry, exit_, sizeof exit_, filter, sizeof filter,
                             ret_local, tok, extra, NULL, 0, 0};
    return s;
}

static void wrap_ok(clrmux_il_body *b, const clrmux_il_wrap_spec *s)
{
    int rc = clrmux_il_wrap(b, s, err, sizeof err);
    if (rc)
        fail_msg("wrap failed %d: %s", rc, err);
}

static void test_wrap_void_exact(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x00, 0x2A), &b); /* nop; ret */
    clrmux_il_wrap_spec s = probe_spec(CLRMUX_IL_NO_LOCAL, 0x11000005, 2);
    static const uint8_t entry[] = {0x17, 0x28, 0x01, 0x00, 0x00, 0x0A}; /* ldc.i4.1; call */
    s.entry = entry, s.entry_len = sizeof entry;
    wrap_ok(&b, &s);
    expect_emit(&b, BYTES(
        0x1B, 0x30, 0x08, 0x00, 0x1B, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x11,
        0x17, 0x28, 0x01, 0x00, 0x00, 0x0A,   /* entry */
        0x00, 0xDE, 0x11,                     /* nop; leave.s END (was ret) */
        0x28, 0x03, 0x00, 0x00, 0x0A, 0x16,   /* filter snippet */
        0xFE, 0x11,                           /* endfilter */
        0x26, 0xFE, 0x1A,                     /* pop; rethrow */
        0x28, 0x02, 0x00, 0x00, 0x0A, 0xDC,   /* exit snippet; endfinally */
        0x2A,                                 /* END: ret */
        0x00,
        0x01, 0x1C, 0x00, 0x00,
        0x01, 0x00, 0x06, 0x00, 0x03, 0x11, 0x00, 0x03, 0x09, 0x00, 0x00, 0x00,
        0x02, 0x00, 0x06, 0x00, 0x0E, 0x14, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00));
    clrmux_il_body_free(&b);
}

static void test_wrap_nonvoid_exact(void **state)
{
    (void)state;
    /* return arg0 != null ? 1 : 0  (two rets, one reached by a branch) */
    clrmux_il_body b;
    parse_ok(BYTES(0x13, 0x30, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x11,
                   0x02, 0x2D, 0x02, 0x16, 0x2A, 0x17, 0x2A), &b);
    clrmux_il_wrap_spec s = probe_spec(1, 0x11000002, 1);
    wrap_ok(&b, &s);
    expect_emit(&b, BYTES(
        0x1B, 0x30, 0x02, 0x00, 0x23, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x11,
        0x28, 0x01, 0x00, 0x00, 0x0A,         /* entry */
        0x02, 0x2D, 0x04,                     /* ldarg.0; brtrue.s L1 */
        0x16, 0x0B, 0xDE, 0x15,               /* ldc.i4.0; stloc.1; leave.s END */
        0x17, 0x0B, 0xDE, 0x11,               /* L1: ldc.i4.1; stloc.1; leave.s END */
        0x28, 0x03, 0x00, 0x00, 0x0A, 0x16, 0xFE, 0x11,
        0x26, 0xFE, 0x1A,
        0x28, 0x02, 0x00, 0x00, 0x0A, 0xDC,
        0x07, 0x2A,                           /* END: ldloc.1; ret */
        0x00,
        0x01, 0x1C, 0x00, 0x00,
        0x01, 0x00, 0x05, 0x00, 0x0B, 0x18, 0x00, 0x03, 0x10, 0x00, 0x00, 0x00,
        0x02, 0x00, 0x05, 0x00, 0x16, 0x1B, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00));
    clrmux_il_body_free(&b);
}

/* exit_normal: the outer clause is a fault, and the normal exit runs at END, outside it */
static void test_wrap_nonvoid_fault_exact(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x13, 0x30, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x11,
                   0x02, 0x2D, 0x02, 0x16, 0x2A, 0x17, 0x2A), &b);
    clrmux_il_wrap_spec s = probe_spec(1, 0x11000002, 1);
    static const uint8_t normal[] = {0x28, 0x04, 0x00, 0x00, 0x0A};
    s.exit_normal = normal, s.exit_normal_len = sizeof normal;
    wrap_ok(&b, &s);
    expect_emit(&b, BYTES(
        0x1B, 0x30, 0x02, 0x00, 0x28, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x11,
        0x28, 0x01, 0x00, 0x00, 0x0A,         /* entry */
        0x02, 0x2D, 0x04,                     /* ldarg.0; brtrue.s L1 */
        0x16, 0x0B, 0xDE, 0x15,               /* ldc.i4.0; stloc.1; leave.s END */
        0x17, 0x0B, 0xDE, 0x11,               /* L1: ldc.i4.1; stloc.1; leave.s END */
        0x28, 0x03, 0x00, 0x00, 0x0A, 0x16, 0xFE, 0x11,
        0x26, 0xFE, 0x1A,
        0x28, 0x02, 0x00, 0x00, 0x0A, 0xDC,   /* fault: exit snippet; endfault */
        0x28, 0x04, 0x00, 0x00, 0x0A,         /* END: exit_normal snippet */
        0x07, 0x2A,                           /* ldloc.1; ret */
        0x01, 0x1C, 0x00, 0x00,
        0x01, 0x00, 0x05, 0x00, 0x0B, 0x18, 0x00, 0x03, 0x10, 0x00, 0x00, 0x00,
        0x04, 0x00, 0x05, 0x00, 0x16, 0x1B, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00));
    clrmux_il_body_free(&b);
}

/* no_eh: no clause; each ret becomes a plain branch to END, where the normal exit runs */
static void test_wrap_nonvoid_no_eh_exact(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x13, 0x30, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x11,
                   0x02, 0x2D, 0x02, 0x16, 0x2A, 0x17, 0x2A), &b);
    static const uint8_t entry[] = {0x28, 0x01, 0x00, 0x00, 0x0A};
    static const uint8_t normal[] = {0x28, 0x04, 0x00, 0x00, 0x0A};
    clrmux_il_wrap_spec s = {.entry = entry, .entry_len = sizeof entry, .ret_local = 1,
                             .local_sig_tok = 0x11000002, .extra_max_stack = 1,
                             .exit_normal = normal, .exit_normal_len = sizeof normal, .no_eh = 1};
    wrap_ok(&b, &s);
    expect_emit(&b, BYTES(
        0x13, 0x30, 0x02, 0x00, 0x17, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x11,
        0x28, 0x01, 0x00, 0x00, 0x0A,         /* entry */
        0x02, 0x2D, 0x04,                     /* ldarg.0; brtrue.s L1 */
        0x16, 0x0B, 0x2B, 0x04,               /* ldc.i4.0; stloc.1; br.s END */
        0x17, 0x0B, 0x2B, 0x00,               /* L1: ldc.i4.1; stloc.1; br.s END */
        0x28, 0x04, 0x00, 0x00, 0x0A,         /* END: exit_normal snippet */
        0x07, 0x2A));                         /* ldloc.1; ret */
    clrmux_il_body_free(&b);
    /* an exit or a filter snippet has no place without clauses */
    parse_ok(BYTES(0x13, 0x30, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x11,
                   0x02, 0x2D, 0x02, 0x16, 0x2A, 0x17, 0x2A), &b);
    s.exit = entry, s.exit_len = sizeof entry;
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_ARG);
    clrmux_il_body_free(&b);
}

static const uint8_t WRAPPED_MINIMAL_EH[] = {
    0x01, 0x1C, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x09, 0x0D, 0x00, 0x03, 0x09, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x10, 0x10, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00};

static void test_wrap_removes_tail_prefix(void **state)
{
    (void)state;
    clrmux_il_body b;
    /* ldarg.0; tail. call 0x0A000009; ret */
    parse_ok(BYTES(0x26, 0x02, 0xFE, 0x14, 0x28, 0x09, 0x00, 0x00, 0x0A, 0x2A), &b);
    clrmux_il_wrap_spec s = {0};
    s.ret_local = 0, s.local_sig_tok = 0x11000001;
    wrap_ok(&b, &s);
    uint8_t exp[32 + sizeof WRAPPED_MINIMAL_EH] = {
        0x1B, 0x30, 0x08, 0x00, 0x13, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x11,
        0x02, 0x28, 0x09, 0x00, 0x00, 0x0A,   /* ldarg.0; call (no tail.) */
        0x0A, 0xDE, 0x08,                     /* stloc.0; leave.s END */
        0x26, 0x16, 0xFE, 0x11,               /* default filter: pop; ldc.i4.0; endfilter */
        0x26, 0xFE, 0x1A, 0xDC,               /* pop; rethrow | endfinally */
        0x06, 0x2A, 0x00};                    /* END: ldloc.0; ret; pad */
    memcpy(exp + 32, WRAPPED_MINIMAL_EH, sizeof WRAPPED_MINIMAL_EH);
    expect_emit(&b, exp, sizeof exp);
    for (uint32_t i = 0; i < b.n_instrs; i++)
        assert_int_not_equal(b.instrs[i].opcode, CLRMUX_IL_OP_TAIL);
    clrmux_il_body_free(&b);
}

static void test_wrap_branch_to_last_ret(void **state)
{
    (void)state;
    clrmux_il_body b;
    /* ldarg.0; dup; brtrue.s L; pop; ldc.i4.0; L: ret */
    parse_ok(BYTES(0x1E, 0x02, 0x25, 0x2D, 0x02, 0x26, 0x16, 0x2A), &b);
    assert_int_equal(b.instrs[2].target, 5);
    clrmux_il_wrap_spec s = {0};
    s.ret_local = 2, s.local_sig_tok = 0x11000001;
    wrap_ok(&b, &s);
    assert_int_equal(b.instrs[2].target, 5);
    assert_int_equal(b.instrs[5].opcode, CLRMUX_IL_OP_STLOC_0 + 2);
    uint8_t exp[32 + sizeof WRAPPED_MINIMAL_EH] = {
        0x1B, 0x30, 0x08, 0x00, 0x13, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x11,
        0x02, 0x25, 0x2D, 0x02, 0x26, 0x16,   /* brtrue.s now reaches the stloc */
        0x0C, 0xDE, 0x08,                     /* stloc.2; leave.s END */
        0x26, 0x16, 0xFE, 0x11, 0x26, 0xFE, 0x1A, 0xDC,
        0x08, 0x2A, 0x00};                    /* END: ldloc.2; ret */
    memcpy(exp + 32, WRAPPED_MINIMAL_EH, sizeof WRAPPED_MINIMAL_EH);
    expect_emit(&b, exp, sizeof exp);
    clrmux_il_body_free(&b);
}

static void test_wrap_many_locals(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x16, 0x2A), &b); /* ldc.i4.0; ret */
    clrmux_il_wrap_spec s = {0};
    s.ret_local = 300, s.local_sig_tok = 0x11000007;
    wrap_ok(&b, &s);
    expect_emit(&b, BYTES(
        0x1B, 0x30, 0x08, 0x00, 0x14, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x11,
        0x16, 0xFE, 0x0E, 0x2C, 0x01, 0xDE, 0x08, /* ldc.i4.0; stloc 300; leave.s END */
        0x26, 0x16, 0xFE, 0x11, 0x26, 0xFE, 0x1A, 0xDC,
        0xFE, 0x0C, 0x2C, 0x01, 0x2A,             /* END: ldloc 300; ret */
        0x01, 0x1C, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x07, 0x0B, 0x00, 0x03, 0x07, 0x00, 0x00, 0x00,
        0x02, 0x00, 0x00, 0x00, 0x0E, 0x0E, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00));
    clrmux_il_body_free(&b);
    parse_ok(BYTES(0x0A, 0x16, 0x2A), &b);
    s.ret_local = 0x10000;
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_RANGE);
    clrmux_il_body_free(&b);
}

static void test_wrap_keeps_nested_eh_inner_first(void **state)
{
    (void)state;
    /* try { try { nop; leave.s A } catch [0x01000001] { pop; leave.s A } A: leave.s R }
     * finally { nop; endfinally } R: ret */
    static const uint8_t in[] = {
        0x1B, 0x30, 0x01, 0x00, 0x0B, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xDE, 0x03, 0x26, 0xDE, 0x00, 0xDE, 0x02, 0x00, 0xDC, 0x2A, 0x00,
        0x01, 0x1C, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00, 0x03, 0x01, 0x00, 0x00, 0x01,
        0x02, 0x00, 0x00, 0x00, 0x08, 0x08, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00};
    roundtrip(in, sizeof in);
    clrmux_il_body b;
    parse_ok(in, sizeof in, &b);
    clrmux_il_wrap_spec s = probe_spec(CLRMUX_IL_NO_LOCAL, 0x11000009, 1);
    wrap_ok(&b, &s);
    assert_int_equal(b.n_eh, 4);
    assert_int_equal(b.eh[0].flags, CLRMUX_IL_EH_EXCEPTION);
    assert_int_equal(b.eh[1].flags, CLRMUX_IL_EH_FINALLY);
    assert_int_equal(b.eh[2].flags, CLRMUX_IL_EH_FILTER);
    assert_int_equal(b.eh[3].flags, CLRMUX_IL_EH_FINALLY);
    expect_emit(&b, BYTES(
        0x1B, 0x30, 0x02, 0x00, 0x23, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x11,
        0x28, 0x01, 0x00, 0x00, 0x0A,
        0x00, 0xDE, 0x03, 0x26, 0xDE, 0x00, 0xDE, 0x02, 0x00, 0xDC,
        0xDE, 0x11,                           /* was ret */
        0x28, 0x03, 0x00, 0x00, 0x0A, 0x16, 0xFE, 0x11,
        0x26, 0xFE, 0x1A,
        0x28, 0x02, 0x00, 0x00, 0x0A, 0xDC,
        0x2A, 0x00,
        0x01, 0x34, 0x00, 0x00,
        0x00, 0x00, 0x05, 0x00, 0x03, 0x08, 0x00, 0x03, 0x01, 0x00, 0x00, 0x01,  /* catch */
        0x02, 0x00, 0x05, 0x00, 0x08, 0x0D, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,  /* finally */
        0x01, 0x00, 0x05, 0x00, 0x0C, 0x19, 0x00, 0x03, 0x11, 0x00, 0x00, 0x00,  /* new filter */
        0x02, 0x00, 0x05, 0x00, 0x17, 0x1C, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00)); /* new finally */
    clrmux_il_body_free(&b);
}

static void test_wrap_widens_and_fattens_eh(void **state)
{
    (void)state;
    /* big exit snippet: the leave.s to END must widen, the finally handler
     * length exceeds 0xFF so the EH section becomes fat */
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x00, 0x2A), &b);
    uint8_t exit_[300];
    memset(exit_, 0x00, sizeof exit_);
    clrmux_il_wrap_spec s = {0};
    s.exit = exit_, s.exit_len = sizeof exit_, s.ret_local = CLRMUX_IL_NO_LOCAL;
    wrap_ok(&b, &s);
    uint8_t *out;
    size_t len;
    assert_int_equal(clrmux_il_emit(&b, &out, &len, err, sizeof err), 0);
    assert_int_equal(b.eh_fat, 1);
    /* nop; leave END (int32 = filter 4 + handler 3 + exit 300 + endfinally 1) */
    expect_bytes(out + 12, 6, BYTES(0x00, 0xDD, 0x34, 0x01, 0x00, 0x00));
    clrmux_il_body b2;
    parse_ok(out, len, &b2);
    assert_int_equal(b2.n_eh, 2);
    assert_int_equal(b2.eh[1].handler_end - b2.eh[1].handler_start, 301);
    clrmux_il_body_free(&b2);
    free(out);
    clrmux_il_body_free(&b);
}

static void test_wrap_refusals(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(BYTES(0x16, 0x27, 0x01, 0x00, 0x00, 0x06), &b); /* jmp */
    clrmux_il_wrap_spec s = {0};
    s.ret_local = CLRMUX_IL_NO_LOCAL;
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_UNSUPPORTED);
    assert_non_null(strstr(err, "jmp"));
    assert_int_equal(b.n_instrs, 1);
    assert_int_equal(b.fat, 0);
    clrmux_il_body_free(&b);

    parse_ok(BYTES(0x0A, 0x00, 0x2A), &b);
    static const uint8_t with_ret[] = {0x00, 0x2A};
    s.entry = with_ret, s.entry_len = sizeof with_ret;
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_ARG);
    assert_non_null(strstr(err, "entry snippet"));
    static const uint8_t truncated[] = {0x28, 0x01};
    s.entry = NULL, s.entry_len = 0, s.filter = truncated, s.filter_len = sizeof truncated;
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_TRUNCATED);
    assert_non_null(strstr(err, "filter snippet"));
    expect_emit(&b, BYTES(0x0A, 0x00, 0x2A)); /* untouched */
    clrmux_il_body_free(&b);

    /* a body ending in a prefix that a branch targets (found by fuzzing): nop; nop;
     * ldc.i4.0; ldnull; bgt.s IL_0006; tail. -- refused, not wrapped into IL that the
     * parser rejects */
    parse_ok(BYTES(0x22, 0x00, 0x00, 0x16, 0x14, 0x30, 0x00, 0xFE, 0x14), &b);
    s.filter = NULL, s.filter_len = 0;
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_UNSUPPORTED);
    assert_non_null(strstr(err, "prefix 0xfe14 at IL_0006 ends the code"));
    expect_emit(&b, BYTES(0x22, 0x00, 0x00, 0x16, 0x14, 0x30, 0x00, 0xFE, 0x14));
    clrmux_il_body_free(&b);
    /* volatile. before ret: the ret becomes the wrap's leave */
    parse_ok(BYTES(0x0E, 0xFE, 0x13, 0x2A), &b);
    assert_int_equal(clrmux_il_wrap(&b, &s, err, sizeof err), CLRMUX_IL_E_UNSUPPORTED);
    assert_non_null(strstr(err, "precedes ret"));
    clrmux_il_body_free(&b);
}

static void test_snippet_branch_to_end(void **state)
{
    (void)state;
    /* entry snippet: ldsfld flag; brfalse.s END; call probe  -> END is the body's first instr */
    static const uint8_t entry[] = {0x7E, 0x01, 0x00, 0x00, 0x04, 0x2C, 0x05,
                                    0x28, 0x01, 0x00, 0x00, 0x0A};
    clrmux_il_body code;
    assert_int_equal(clrmux_il_parse_code(entry, sizeof entry, &code, err, sizeof err), 0);
    assert_int_equal(code.instrs[1].target, 3); /* == n_instrs */
    clrmux_il_body_free(&code);
    clrmux_il_body b;
    parse_ok(BYTES(0x0A, 0x00, 0x2A), &b);
    clrmux_il_wrap_spec s = {0};
    s.entry = entry, s.entry_len = sizeof entry, s.ret_local = CLRMUX_IL_NO_LOCAL;
    wrap_ok(&b, &s);
    assert_int_equal(b.instrs[1].target, 3);
    assert_int_equal(b.eh[0].try_start, 3);
    uint8_t *out;
    size_t len;
    assert_int_equal(clrmux_il_emit(&b, &out, &len, err, sizeof err), 0);
    expect_bytes(out + 12, 15, BYTES(0x7E, 0x01, 0x00, 0x00, 0x04, 0x2C, 0x05, 0x28, 0x01, 0x00,
                                     0x00, 0x0A, 0x00, 0xDE, 0x08));
    free(out);
    clrmux_il_body_free(&b);
}

/* ---- malformed input ---- */

static void test_malformed_truncated(void **state)
{
    (void)state;
    assert_int_equal(parse_rc(NULL, 0), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(parse_rc(BYTES(0x16, 0x02, 0x2A)), CLRMUX_IL_E_TRUNCATED); /* says 5 bytes */
    assert_int_equal(parse_rc(BYTES(0x13, 0x30, 0x08, 0x00, 0x01)), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(parse_rc(BYTES(0x0E, 0x20, 0x01, 0x02)), CLRMUX_IL_E_TRUNCATED); /* ldc.i4 */
    assert_int_equal(parse_rc(BYTES(0x06, 0xFE)), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(parse_rc(BYTES(0x16, 0x45, 0x02, 0x00, 0x00, 0x00)), CLRMUX_IL_E_TRUNCATED);
    /* MoreSects without a section, and a section cut short */
    assert_int_equal(parse_rc(TRY_FINALLY, 24), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(parse_rc(TRY_FINALLY, sizeof TRY_FINALLY - 1), CLRMUX_IL_E_TRUNCATED);
    assert_int_equal(parse_rc(BYTES(0x01, 0x2A)), CLRMUX_IL_E_FORMAT);
    assert_int_equal(parse_rc(BYTES(0x03, 0x20, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x2A)), CLRMUX_IL_E_FORMAT); /* header size 2 */
    assert_int_equal(parse_rc(BYTES(0x02)), CLRMUX_IL_E_FORMAT);            /* no code */
}

static void test_malformed_opcode(void **state)
{
    (void)state;
    assert_int_equal(parse_rc(BYTES(0x0A, 0x24, 0x2A)), CLRMUX_IL_E_OPCODE);
    assert_non_null(strstr(err, "0x24"));
    assert_int_equal(parse_rc(BYTES(0x0E, 0xFE, 0x08, 0x2A)), CLRMUX_IL_E_OPCODE);
    assert_int_equal(parse_rc(BYTES(0x0E, 0xFE, 0x1F, 0x2A)), CLRMUX_IL_E_OPCODE);
    assert_int_equal(parse_rc(BYTES(0x0A, 0xA6, 0x2A)), CLRMUX_IL_E_OPCODE);
    assert_int_equal(parse_rc(BYTES(0x0A, 0xFF, 0x2A)), CLRMUX_IL_E_OPCODE);
    assert_int_equal(clrmux_il_operand_kind_of(0xFE), CLRMUX_IL_E_OPCODE);
    assert_int_equal(clrmux_il_operand_kind_of(0xE0), CLRMUX_IL_OPND_NONE);
    assert_int_equal(clrmux_il_operand_kind_of(0xFE1E), CLRMUX_IL_OPND_NONE);
}

static void test_malformed_branch_targets(void **state)
{
    (void)state;
    /* br.s +1 lands inside ldc.i4 */
    assert_int_equal(parse_rc(BYTES(0x26, 0x2B, 0x01, 0x20, 0x01, 0x00, 0x00, 0x00, 0x26, 0x2A)),
                     CLRMUX_IL_E_TARGET);
    assert_non_null(strstr(err, "boundary"));
    assert_int_equal(parse_rc(BYTES(0x0E, 0x2B, 0x10, 0x2A)), CLRMUX_IL_E_TARGET); /* past end */
    assert_int_equal(parse_rc(BYTES(0x0E, 0x2B, 0xF0, 0x2A)), CLRMUX_IL_E_TARGET); /* before 0 */
    assert_int_equal(parse_rc(BYTES(0x0A, 0x2B, 0x00)), CLRMUX_IL_E_TARGET);        /* to end */
    /* switch target into the middle of the table */
    assert_int_equal(parse_rc(BYTES(0x2A, 0x45, 0x01, 0x00, 0x00, 0x00, 0xFC, 0xFF, 0xFF, 0xFF,
                                    0x2A)), CLRMUX_IL_E_TARGET);
    /* long branch far outside */
    assert_int_equal(parse_rc(BYTES(0x1A, 0x38, 0x00, 0x00, 0x00, 0x80, 0x2A)), CLRMUX_IL_E_TARGET);
}

static void test_malformed_eh(void **state)
{
    (void)state;
    uint8_t bad[sizeof TRY_FINALLY];
    memcpy(bad, TRY_FINALLY, sizeof bad);
    bad[35] = 0x20; /* handler length runs past the end of the code */
    assert_int_equal(parse_rc(bad, sizeof bad), CLRMUX_IL_E_EH);
    assert_non_null(strstr(err, "past the end"));
    memcpy(bad, TRY_FINALLY, sizeof bad);
    bad[30] = 0x02; /* try starts inside leave.s */
    assert_int_equal(parse_rc(bad, sizeof bad), CLRMUX_IL_E_EH);
    assert_non_null(strstr(err, "boundary"));
    memcpy(bad, TRY_FINALLY, sizeof bad);
    bad[33] = 0x0A; /* handler starts at the end of the code */
    bad[35] = 0x00;
    assert_int_equal(parse_rc(bad, sizeof bad), CLRMUX_IL_E_EH);
    memcpy(bad, TRY_FINALLY, sizeof bad);
    bad[28] = 0x03; /* unknown clause kind */
    assert_int_equal(parse_rc(bad, sizeof bad), CLRMUX_IL_E_EH);
    memcpy(bad, TRY_FINALLY, sizeof bad);
    bad[24] = 0x02; /* OptILTable section */
    assert_int_equal(parse_rc(bad, sizeof bad), CLRMUX_IL_E_UNSUPPORTED);
    memcpy(bad, TRY_FINALLY, sizeof bad);
    bad[25] = 0x04; /* no clauses */
    assert_int_equal(parse_rc(bad, sizeof bad), CLRMUX_IL_E_FORMAT);
}

static void test_layout_rejects_bad_edits(void **state)
{
    (void)state;
    clrmux_il_body b;
    parse_ok(TRY_FINALLY, sizeof TRY_FINALLY, &b);
    uint8_t *out = (uint8_t *)1;
    size_t len = 1;
    b.eh[0].try_end = 9;
    assert_int_equal(clrmux_il_emit(&b, &out, &len, err, sizeof err), CLRMUX_IL_E_ARG);
    assert_null(out);
    b.eh[0].try_end = 2;
    b.instrs[1].target = 77;
    assert_int_equal(clrmux_il_layout(&b, err, sizeof err), CLRMUX_IL_E_ARG);
    b.instrs[1].target = 4;
    clrmux_il_eh c = {CLRMUX_IL_EH_FAULT, 0, 2, 2, 9, 0, 0};
    assert_int_equal(clrmux_il_add_eh(&b, &c, err, sizeof err), CLRMUX_IL_E_ARG);
    c.handler_end = 4;
    assert_int_equal(clrmux_il_add_eh(&b, &c, err, sizeof err), 0);
    clrmux_il_body copy;
    assert_int_equal(clrmux_il_body_clone(&b, &copy), 0);
    clrmux_il_body_free(&b);
    assert_int_equal(clrmux_il_emit(&copy, &out, &len, err, sizeof err), 0);
    assert_int_equal(len, 24 + 4 + 24);
    expect_bytes(out + 40, 12, BYTES(0x04, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00, 0x06, 0x00, 0x00,
                                     0x00, 0x00));
    free(out);
    clrmux_il_body_free(&copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_roundtrip),
        cmocka_unit_test(test_fat_locals_roundtrip),
        cmocka_unit_test(test_small_eh_roundtrip),
        cmocka_unit_test(test_fat_eh_roundtrip),
        cmocka_unit_test(test_switch_roundtrip),
        cmocka_unit_test(test_switch_remap),
        cmocka_unit_test(test_prefixes_roundtrip),
        cmocka_unit_test(test_operands_roundtrip),
        cmocka_unit_test(test_tiny_to_fat_on_growth),
        cmocka_unit_test(test_tiny_to_fat_on_header_fields),
        cmocka_unit_test(test_small_to_fat_eh_on_growth),
        cmocka_unit_test(test_short_branch_widening),
        cmocka_unit_test(test_widening_fixpoint),
        cmocka_unit_test(test_replace_delete_remap),
        cmocka_unit_test(test_builder_forms),
        cmocka_unit_test(test_builder_labels_and_errors),
        cmocka_unit_test(test_compressed_ints),
        cmocka_unit_test(test_method_sig),
        cmocka_unit_test(test_locals_append_small),
        cmocka_unit_test(test_locals_append_wide_counts),
        cmocka_unit_test(test_wrap_void_exact),
        cmocka_unit_test(test_wrap_nonvoid_exact),
        cmocka_unit_test(test_wrap_nonvoid_fault_exact),
        cmocka_unit_test(test_wrap_nonvoid_no_eh_exact),
        cmocka_unit_test(test_wrap_removes_tail_prefix),
        cmocka_unit_test(test_wrap_branch_to_last_ret),
        cmocka_unit_test(test_wrap_many_locals),
        cmocka_unit_test(test_wrap_keeps_nested_eh_inner_first),
        cmocka_unit_test(test_wrap_widens_and_fattens_eh),
        cmocka_unit_test(test_wrap_refusals),
        cmocka_unit_test(test_snippet_branch_to_end),
        cmocka_unit_test(test_malformed_truncated),
        cmocka_unit_test(test_malformed_opcode),
        cmocka_unit_test(test_malformed_branch_targets),
        cmocka_unit_test(test_malformed_eh),
        cmocka_unit_test(test_layout_rejects_bad_edits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
