/* Internal to the IL rewriter (src/tracer/il*.c), not part of its contract (il.h): limits,
 * the operand kinds, little-endian readers and writers, and the small helpers the parser,
 * emitter, builder, signature and wrap files share (instruction size and encoding). */
#ifndef CLRMUX_TRACER_IL_INTERNAL_H
#define CLRMUX_TRACER_IL_INTERNAL_H

#include "tracer/il.h"
#include "common/log.h" /* CLRMUX_PRINTF_FORMAT */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIND_BAD 0xFF
#define MAX_INSTRS 0x3FFFFFFFu  /* keeps index arithmetic clear of CLRMUX_IL_NEW_TARGET */
#define MAX_CODE 0x7FFFFFFFu
#define SIG_MAX_DEPTH 64

__attribute__((format(CLRMUX_PRINTF_FORMAT, 4, 5))) static inline int fail(char *err, size_t errlen, int code,
                                                             const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void wr32(uint8_t *p, uint32_t v) { wr16(p, (uint16_t)v); wr16(p + 2, (uint16_t)(v >> 16)); }
static inline void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)v); wr32(p + 4, (uint32_t)(v >> 32)); }

/* operand kinds (Partition III; opcode.def) */
enum { K_NONE = CLRMUX_IL_OPND_NONE, K_U8 = CLRMUX_IL_OPND_U8, K_I8 = CLRMUX_IL_OPND_I8,
       K_U16 = CLRMUX_IL_OPND_U16, K_I32 = CLRMUX_IL_OPND_I32, K_I64 = CLRMUX_IL_OPND_I64,
       K_R4 = CLRMUX_IL_OPND_R4, K_R8 = CLRMUX_IL_OPND_R8, K_TOK = CLRMUX_IL_OPND_TOKEN,
       K_BR8 = CLRMUX_IL_OPND_BR8, K_BR32 = CLRMUX_IL_OPND_BR32, K_SW = CLRMUX_IL_OPND_SWITCH };

static const uint8_t OPND_SIZE[] = {0, 1, 1, 2, 4, 8, 4, 8, 4, 1, 4, 4};

static inline int is_branch(int kind) { return kind == K_BR8 || kind == K_BR32; }

static inline uint64_t instr_size(const clrmux_il_instr *in)
{
    uint64_t s = (in->opcode > 0xFF ? 2u : 1u) + OPND_SIZE[in->kind];
    return in->kind == K_SW ? s + 4ull * in->n_targets : s;
}

static inline int imm_ok(int kind, int64_t v)
{
    switch (kind) {
    case K_U8: return v >= 0 && v <= UINT8_MAX;
    case K_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case K_U16: return v >= 0 && v <= UINT16_MAX;
    case K_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case K_R4: case K_TOK: return v >= 0 && v <= UINT32_MAX;
    default: return 1;
    }
}

/* The instruction prefixes of III.2: unaligned., volatile., tail., constrained., no., readonly. */
static inline int is_prefix(uint16_t op)
{
    return op == CLRMUX_IL_OP_UNALIGNED || op == CLRMUX_IL_OP_VOLATILE || op == CLRMUX_IL_OP_TAIL ||
           op == CLRMUX_IL_OP_CONSTRAINED || op == CLRMUX_IL_OP_NO || op == CLRMUX_IL_OP_READONLY;
}

/* short branch opcode -> long form (III.3.5-3.18, III.3.46) */
static inline uint16_t widen(uint16_t op) { return op == 0xDE ? 0xDD : (uint16_t)(op + 13); }
static inline uint16_t narrow(uint16_t op) { return op == 0xDD ? 0xDE : (uint16_t)(op - 13); }

static inline uint32_t off_of(const clrmux_il_body *b, uint32_t idx)
{
    return idx < b->n_instrs ? b->instrs[idx].offset : b->code_size;
}

/* Encode one laid-out instruction at p; returns the end. */
static inline uint8_t *encode(const clrmux_il_body *b, const clrmux_il_instr *in, uint8_t *p)
{
    if (in->opcode > 0xFF)
        *p++ = 0xFE;
    *p++ = (uint8_t)in->opcode;
    int64_t next = (int64_t)in->offset + (int64_t)instr_size(in);
    switch (in->kind) {
    case K_U8: case K_I8: *p = (uint8_t)in->imm; return p + 1;
    case K_U16: wr16(p, (uint16_t)in->imm); return p + 2;
    case K_I32: case K_R4: case K_TOK: wr32(p, (uint32_t)in->imm); return p + 4;
    case K_I64: case K_R8: wr64(p, (uint64_t)in->imm); return p + 8;
    case K_BR8: *p = (uint8_t)(off_of(b, in->target) - next); return p + 1;
    case K_BR32: wr32(p, (uint32_t)(off_of(b, in->target) - next)); return p + 4;
    case K_SW:
        wr32(p, in->n_targets);
        p += 4;
        for (uint32_t i = 0; i < in->n_targets; i++, p += 4)
            wr32(p, (uint32_t)(off_of(b, in->targets[i]) - next));
        return p;
    default: return p;
    }
}

#endif
