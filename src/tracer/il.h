/* CIL method bodies: parser, emitter, editor and the "wrap" rewriter used by
 * the IL-rewriting tracer (ReJIT).
 *
 * References are to ECMA-335 6th edition: Partition II §25.4 (method body
 * headers, extra data sections, exception handling clauses), II.19 (EH
 * nesting and ordering rules), II.23.2 (signature blobs) and Partition III
 * (instruction set).
 *
 * Conventions for every function in this header:
 *  - Results are 0 (CLRMUX_IL_OK) or a negative CLRMUX_IL_E_* code; nothing
 *    aborts or prints.
 *  - `err`/`errlen` is an optional caller buffer (NULL/0 allowed) that receives
 *    a NUL-terminated English message when an error is returned.
 *  - There is no global mutable state: distinct objects may be used from
 *    different threads concurrently; one object needs external locking.
 *  - All multi-byte values in IL are little-endian (II.25.4, III.1.2).
 */
#ifndef CLRMUX_TRACER_IL_H
#define CLRMUX_TRACER_IL_H

#include <stddef.h>
#include <stdint.h>

/* Error codes (negative). */
enum {
    CLRMUX_IL_OK = 0,
    CLRMUX_IL_E_TRUNCATED = -1,   /* input ends inside a header/instruction/section/blob */
    CLRMUX_IL_E_OPCODE = -2,      /* unknown or reserved opcode (III.1.2.1) */
    CLRMUX_IL_E_TARGET = -3,      /* branch target outside the code or not on an instruction boundary */
    CLRMUX_IL_E_EH = -4,          /* EH clause offsets invalid, or unknown clause kind */
    CLRMUX_IL_E_FORMAT = -5,      /* malformed header, data section or signature */
    CLRMUX_IL_E_UNSUPPORTED = -6, /* valid input this module refuses (jmp, non-EH sections, ...) */
    CLRMUX_IL_E_RANGE = -7,       /* a value does not fit its encoding or a limit */
    CLRMUX_IL_E_ARG = -8,         /* invalid argument (NULL, index out of range, bad operand) */
    CLRMUX_IL_E_NOMEM = -9,       /* allocation failed */
};

/* Method header flags (II.25.4.1, II.25.4.3). The low 2 bits are the format. */
#define CLRMUX_IL_TINY_FORMAT 0x2u
#define CLRMUX_IL_FAT_FORMAT 0x3u
#define CLRMUX_IL_MORE_SECTS 0x8u  /* extra data sections follow the code */
#define CLRMUX_IL_INIT_LOCALS 0x10u /* zero-initialise locals */
#define CLRMUX_IL_TINY_MAX_CODE 63u /* tiny header: 6-bit code size */
#define CLRMUX_IL_TINY_MAX_STACK 8u /* tiny header: implied maxstack */

/* Extra data section kind bits (II.25.4.5). */
#define CLRMUX_IL_SECT_EHTABLE 0x01u
#define CLRMUX_IL_SECT_OPTILTABLE 0x02u
#define CLRMUX_IL_SECT_FAT 0x40u
#define CLRMUX_IL_SECT_MORE 0x80u
#define CLRMUX_IL_SMALL_EH_MAX_CLAUSES 20u /* 4 + 12*n must fit the 1-byte DataSize */

/* EH clause kinds (II.25.4.6). */
#define CLRMUX_IL_EH_EXCEPTION 0x0u /* typed catch: class_token */
#define CLRMUX_IL_EH_FILTER 0x1u    /* filter block at filter_start */
#define CLRMUX_IL_EH_FINALLY 0x2u
#define CLRMUX_IL_EH_FAULT 0x4u

/* Signature element types and bytes (II.23.1.16, II.23.2). */
enum {
    CLRMUX_ELEMENT_TYPE_VOID = 0x01, CLRMUX_ELEMENT_TYPE_BOOLEAN = 0x02,
    CLRMUX_ELEMENT_TYPE_I4 = 0x08, CLRMUX_ELEMENT_TYPE_I8 = 0x0A,
    CLRMUX_ELEMENT_TYPE_STRING = 0x0E, CLRMUX_ELEMENT_TYPE_PTR = 0x0F,
    CLRMUX_ELEMENT_TYPE_BYREF = 0x10, CLRMUX_ELEMENT_TYPE_VALUETYPE = 0x11,
    CLRMUX_ELEMENT_TYPE_CLASS = 0x12, CLRMUX_ELEMENT_TYPE_VAR = 0x13,
    CLRMUX_ELEMENT_TYPE_ARRAY = 0x14, CLRMUX_ELEMENT_TYPE_GENERICINST = 0x15,
    CLRMUX_ELEMENT_TYPE_TYPEDBYREF = 0x16, CLRMUX_ELEMENT_TYPE_I = 0x18,
    CLRMUX_ELEMENT_TYPE_U = 0x19, CLRMUX_ELEMENT_TYPE_FNPTR = 0x1B,
    CLRMUX_ELEMENT_TYPE_OBJECT = 0x1C, CLRMUX_ELEMENT_TYPE_SZARRAY = 0x1D,
    CLRMUX_ELEMENT_TYPE_MVAR = 0x1E, CLRMUX_ELEMENT_TYPE_CMOD_REQD = 0x1F,
    CLRMUX_ELEMENT_TYPE_CMOD_OPT = 0x20, CLRMUX_ELEMENT_TYPE_SENTINEL = 0x41,
    CLRMUX_ELEMENT_TYPE_PINNED = 0x45,
    CLRMUX_SIG_LOCAL = 0x07,     /* LocalVarSig lead byte (II.23.2.6) */
    CLRMUX_SIG_GENERIC = 0x10,   /* MethodDefSig: generic parameter count follows */
    CLRMUX_SIG_HASTHIS = 0x20,
    CLRMUX_SIG_EXPLICITTHIS = 0x40,
};

/* Opcodes used by the rewriter and the builder (III.1.2.1, Partition III
 * tables). One-byte opcodes are their byte value; two-byte opcodes are
 * 0xFE00 | second byte. Any other valid opcode may be used numerically. */
enum {
    CLRMUX_IL_OP_NOP = 0x00, CLRMUX_IL_OP_LDARG_0 = 0x02, CLRMUX_IL_OP_LDLOC_0 = 0x06,
    CLRMUX_IL_OP_STLOC_0 = 0x0A, CLRMUX_IL_OP_LDARG_S = 0x0E, CLRMUX_IL_OP_LDARGA_S = 0x0F,
    CLRMUX_IL_OP_STARG_S = 0x10, CLRMUX_IL_OP_LDLOC_S = 0x11, CLRMUX_IL_OP_LDLOCA_S = 0x12,
    CLRMUX_IL_OP_STLOC_S = 0x13, CLRMUX_IL_OP_LDNULL = 0x14, CLRMUX_IL_OP_LDC_I4_M1 = 0x15,
    CLRMUX_IL_OP_LDC_I4_0 = 0x16, CLRMUX_IL_OP_LDC_I4_S = 0x1F, CLRMUX_IL_OP_LDC_I4 = 0x20,
    CLRMUX_IL_OP_LDC_I8 = 0x21, CLRMUX_IL_OP_LDC_R4 = 0x22, CLRMUX_IL_OP_LDC_R8 = 0x23,
    CLRMUX_IL_OP_DUP = 0x25, CLRMUX_IL_OP_POP = 0x26, CLRMUX_IL_OP_JMP = 0x27,
    CLRMUX_IL_OP_CALL = 0x28, CLRMUX_IL_OP_CALLI = 0x29, CLRMUX_IL_OP_RET = 0x2A,
    CLRMUX_IL_OP_BR_S = 0x2B, CLRMUX_IL_OP_BRFALSE_S = 0x2C, CLRMUX_IL_OP_BRTRUE_S = 0x2D,
    CLRMUX_IL_OP_BEQ_S = 0x2E, CLRMUX_IL_OP_BGE_S = 0x2F,
    CLRMUX_IL_OP_BR = 0x38, CLRMUX_IL_OP_BRFALSE = 0x39, CLRMUX_IL_OP_BRTRUE = 0x3A,
    CLRMUX_IL_OP_SWITCH = 0x45, CLRMUX_IL_OP_LDIND_U4 = 0x4B, CLRMUX_IL_OP_LDIND_REF = 0x50,
    CLRMUX_IL_OP_CONV_I8 = 0x6A, CLRMUX_IL_OP_CALLVIRT = 0x6F,
    CLRMUX_IL_OP_LDSTR = 0x72, CLRMUX_IL_OP_NEWOBJ = 0x73, CLRMUX_IL_OP_THROW = 0x7A,
    CLRMUX_IL_OP_BOX = 0x8C, CLRMUX_IL_OP_NEWARR = 0x8D, CLRMUX_IL_OP_STELEM_REF = 0xA2,
    CLRMUX_IL_OP_UNBOX_ANY = 0xA5, CLRMUX_IL_OP_ENDFINALLY = 0xDC, CLRMUX_IL_OP_LEAVE = 0xDD,
    CLRMUX_IL_OP_LEAVE_S = 0xDE,
    CLRMUX_IL_OP_LDARG = 0xFE09, CLRMUX_IL_OP_LDARGA = 0xFE0A, CLRMUX_IL_OP_STARG = 0xFE0B,
    CLRMUX_IL_OP_LDLOC = 0xFE0C, CLRMUX_IL_OP_LDLOCA = 0xFE0D, CLRMUX_IL_OP_STLOC = 0xFE0E,
    CLRMUX_IL_OP_ENDFILTER = 0xFE11, CLRMUX_IL_OP_UNALIGNED = 0xFE12,
    CLRMUX_IL_OP_VOLATILE = 0xFE13, CLRMUX_IL_OP_TAIL = 0xFE14,
    CLRMUX_IL_OP_CONSTRAINED = 0xFE16, CLRMUX_IL_OP_NO = 0xFE19,
    CLRMUX_IL_OP_RETHROW = 0xFE1A, CLRMUX_IL_OP_READONLY = 0xFE1E,
};

/* Operand kinds (III.1.2, "inline" operand types of the opcode tables). */
typedef enum clrmux_il_operand_kind {
    CLRMUX_IL_OPND_NONE = 0, /* no operand */
    CLRMUX_IL_OPND_U8,       /* unsigned int8: ldarg.s, ldloc.s, unaligned., no. */
    CLRMUX_IL_OPND_I8,       /* int8: ldc.i4.s */
    CLRMUX_IL_OPND_U16,      /* unsigned int16: ldarg, ldloc, stloc, ... (0xFE xx) */
    CLRMUX_IL_OPND_I32,      /* int32: ldc.i4 */
    CLRMUX_IL_OPND_I64,      /* int64: ldc.i8 */
    CLRMUX_IL_OPND_R4,       /* float32, imm holds the IEEE bit pattern (0..2^32-1) */
    CLRMUX_IL_OPND_R8,       /* float64, imm holds the IEEE bit pattern */
    CLRMUX_IL_OPND_TOKEN,    /* metadata token, imm holds 0..2^32-1 */
    CLRMUX_IL_OPND_BR8,      /* short branch, int8 displacement */
    CLRMUX_IL_OPND_BR32,     /* long branch, int32 displacement */
    CLRMUX_IL_OPND_SWITCH,   /* uint32 N then N int32 displacements */
} clrmux_il_operand_kind;

/* Marks a branch target, in instructions passed to clrmux_il_replace(), that
 * designates the i-th instruction of that same inserted array. */
#define CLRMUX_IL_NEW_TARGET(i) (0x80000000u | (uint32_t)(i))
#define CLRMUX_IL_NO_LOCAL UINT32_MAX

/* One instruction. Prefixes (tail., constrained., readonly., volatile.,
 * unaligned., no.) are instructions of their own.
 * Branch targets are instruction INDEXES into the owning body's instrs[];
 * index n_instrs designates the end of the code. The body owns `targets`
 * (malloc'd, switch only). */
typedef struct clrmux_il_instr {
    uint32_t offset;   /* IL offset in bytes from the start of the code; set by parse and layout */
    uint16_t opcode;   /* 0x00..0xFF, or 0xFE00|b for two-byte opcodes */
    uint8_t kind;      /* clrmux_il_operand_kind, derived from opcode */
    int64_t imm;       /* operand of non-branch kinds (see clrmux_il_operand_kind) */
    uint32_t target;   /* BR8/BR32: target instruction index */
    uint32_t n_targets; /* SWITCH: number of targets */
    uint32_t *targets;  /* SWITCH: target instruction indexes */
} clrmux_il_instr;

/* One EH clause (II.25.4.6). Regions are half-open instruction index ranges
 * [start, end); end == n_instrs means "to the end of the code". The filter
 * block of a FILTER clause runs from filter_start to handler_start. */
typedef struct clrmux_il_eh {
    uint32_t flags;          /* CLRMUX_IL_EH_* */
    uint32_t try_start, try_end;
    uint32_t handler_start, handler_end;
    uint32_t filter_start;   /* FILTER only */
    uint32_t class_token;    /* EXCEPTION: catch type token; FINALLY/FAULT: raw field kept for round-trip */
} clrmux_il_eh;

/* A parsed method body (II.25.4). Owns instrs[] (and their switch tables)
 * and eh[]; release with clrmux_il_body_free(). */
typedef struct clrmux_il_body {
    int fat;                /* 0 tiny header (1 byte), 1 fat header (12 bytes) */
    uint16_t flags;         /* fat header flags, low 12 bits (FAT_FORMAT|MORE_SECTS|INIT_LOCALS|...);
                               0 for tiny */
    uint16_t max_stack;     /* tiny: 8 */
    uint32_t code_size;     /* bytes of code; set by parse and layout */
    uint32_t local_sig_tok; /* StandAloneSig token of the LocalVarSig, 0 if none */
    int eh_fat;             /* EH section uses fat clauses (24 bytes) rather than small (12) */
    uint32_t n_instrs, cap_instrs; /* count / allocated capacity of instrs[] */
    clrmux_il_instr *instrs;       /* in code order */
    uint32_t n_eh;
    clrmux_il_eh *eh;       /* in table order: inner (nested) clauses first (II.19) */
} clrmux_il_body;

/* Operand kind of `opcode` (>= 0), or CLRMUX_IL_E_OPCODE if it is not a
 * defined CIL opcode (III.1.2.1, reserved and unused bytes included). */
int clrmux_il_operand_kind_of(uint16_t opcode);

/* Parse a method body: header + code + extra data sections (II.25.4).
 * `data`/`len`: the body as returned by GetILFunctionBody; trailing bytes
 * beyond the body are ignored. On success fills *out (caller frees with
 * clrmux_il_body_free) and, if body_len != NULL, the bytes the body spans.
 * On error *out is left empty (nothing to free).
 * Errors: TRUNCATED, OPCODE, TARGET (branch into the middle of an
 * instruction, out of the code, or to its end), EH (clause offsets not on
 * an instruction boundary / past the end, unknown kind), FORMAT (bad header,
 * empty code, empty EH section), UNSUPPORTED (non-EH or chained sections),
 * NOMEM, ARG. */
int clrmux_il_parse(const uint8_t *data, size_t len, clrmux_il_body *out, size_t *body_len,
                    char *err, size_t errlen);

/* Parse a bare instruction stream (no header), e.g. a probe snippet. Branch
 * targets may be the end of the stream (index n_instrs). *out gets fat = 0,
 * no EH. Errors as clrmux_il_parse. */
int clrmux_il_parse_code(const uint8_t *code, size_t len, clrmux_il_body *out, char *err,
                         size_t errlen);

/* Free what a body owns and zero it. NULL and zeroed bodies are fine. */
void clrmux_il_body_free(clrmux_il_body *b);

/* Deep copy of src into *dst (which is overwritten, not freed). Errors: NOMEM. */
int clrmux_il_body_clone(const clrmux_il_body *src, clrmux_il_body *dst);

/* Compute offsets and code_size; widen short branches (br.s→br, leave.s→
 * leave, ...) whose displacement no longer fits int8, to a fixpoint; switch a
 * tiny header to fat when needed (code > 63 bytes, maxstack > 8, a local sig,
 * EH clauses; the new flags are FAT_FORMAT|INIT_LOCALS); switch small EH to
 * fat clauses when an offset > 0xFFFF, a length > 0xFF or more than 20
 * clauses; set MORE_SECTS iff there are clauses. Never narrows anything.
 * Errors: ARG (bad index / operand / unknown opcode), RANGE (code > 2 GiB). */
int clrmux_il_layout(clrmux_il_body *b, char *err, size_t errlen);

/* Lay out (clrmux_il_layout) and encode the body: header, code, 4-byte
 * alignment zeros, EH section (II.25.4.5). *out is malloc'd (caller frees),
 * *out_len its size. An unmodified parsed body is reproduced byte for byte
 * (except non-zero padding/reserved bytes, which are written as zero).
 * Errors: those of clrmux_il_layout, RANGE, NOMEM. */
int clrmux_il_emit(clrmux_il_body *b, uint8_t **out, size_t *out_len, char *err, size_t errlen);

/* Build a standalone instruction: kind is derived from opcode; imm is the
 * operand (non-branch kinds) or the target index (branch kinds). Returns an
 * instruction with kind 0xFF if the opcode is unknown (rejected later). */
clrmux_il_instr clrmux_il_make(uint16_t opcode, int64_t imm_or_target);

/* Variable access families for the short/long form choice (III.3.38-3.63). */
typedef enum clrmux_il_var_op {
    CLRMUX_IL_LDLOC, CLRMUX_IL_STLOC, CLRMUX_IL_LDLOCA,
    CLRMUX_IL_LDARG, CLRMUX_IL_STARG, CLRMUX_IL_LDARGA,
} clrmux_il_var_op;

/* Shortest instruction for a variable access: index 0..3 → ldloc.0..3 etc.
 * (where such forms exist), ≤ 255 → the .s form with uint8, else the 0xFE
 * form with uint16. Errors: RANGE (index > 0xFFFF), ARG. */
int clrmux_il_make_var(clrmux_il_var_op op, uint32_t index, clrmux_il_instr *out);

/* Replace instrs[pos, pos+count) with ins[0, n) (deep-copied; count 0 =
 * insert before pos, n 0 = delete). Targets in ins[] are indexes in the
 * pre-edit body (≤ n_instrs) or CLRMUX_IL_NEW_TARGET(i) for ins[i].
 * Every reference (branch/switch targets, EH boundaries) is remapped:
 *  - a start reference (branch target, try/handler/filter start) to a
 *    replaced instruction designates the first new one (or the instruction
 *    after a deletion); later ones shift;
 *  - an end reference just after the replaced range covers all new ones;
 *  - with count 0, inserted code lies outside regions starting or ending at
 *    pos, and references to instrs[pos] still designate it.
 * Offsets are stale until the next layout. The body is unchanged on error.
 * Errors: ARG (range, unknown opcode, operand out of range, bad target), NOMEM. */
int clrmux_il_replace(clrmux_il_body *b, uint32_t pos, uint32_t count, const clrmux_il_instr *ins,
                      uint32_t n, char *err, size_t errlen);

/* clrmux_il_replace(b, pos, 0, ins, n, ...). */
int clrmux_il_insert(clrmux_il_body *b, uint32_t pos, const clrmux_il_instr *ins, uint32_t n,
                     char *err, size_t errlen);

/* Append an EH clause (indexes as in clrmux_il_eh). The caller keeps the
 * II.19 order (nested before enclosing). Errors: ARG (kind or index), NOMEM. */
int clrmux_il_add_eh(clrmux_il_body *b, const clrmux_il_eh *c, char *err, size_t errlen);

/* ---- IL byte builder for probe snippets ----
 * Appends encoded instructions to a growable buffer. Errors are sticky: the
 * first one is kept in `err`/`msg` and later calls do nothing; check with
 * clrmux_il_b_finish(). Branches use labels: a backward branch whose
 * displacement fits int8 gets the short form, others the long form. */
#define CLRMUX_IL_B_MAX_LABELS 16
#define CLRMUX_IL_B_MAX_FIXUPS 32
typedef struct clrmux_il_builder {
    uint8_t *data;      /* malloc'd bytes, owned; freed by clrmux_il_b_free */
    size_t len, cap;
    int err;            /* first error (negative) or 0 */
    char msg[96];
    uint32_t n_labels, n_fixups;
    uint32_t label_off[CLRMUX_IL_B_MAX_LABELS]; /* UINT32_MAX while unmarked */
    struct { uint32_t at, next, label; } fixup[CLRMUX_IL_B_MAX_FIXUPS];
} clrmux_il_builder;

/* Start an empty builder (no allocation yet). */
void clrmux_il_b_init(clrmux_il_builder *b);
/* Free the buffer and reset to the empty state; the caller copies data first
 * if it needs the bytes. */
void clrmux_il_b_free(clrmux_il_builder *b);
/* Opcode without operand (e.g. CLRMUX_IL_OP_POP, CLRMUX_IL_OP_DUP); errors: ARG. */
void clrmux_il_b_op(clrmux_il_builder *b, uint16_t opcode);
/* Opcode with an immediate operand (U8, I8, U16, I32, I64, R4/R8 bits, TOKEN),
 * encoded little-endian with the opcode's operand width; errors: ARG (branch,
 * switch, unknown opcode or operand out of range). */
void clrmux_il_b_op_arg(clrmux_il_builder *b, uint16_t opcode, int64_t operand);
/* Token opcode: call, calli (StandAloneSig token), callvirt, newobj, ldstr,
 * box, ... (III.3.19, III.3.20, III.4.2); errors: ARG if opcode takes no token. */
void clrmux_il_b_token(clrmux_il_builder *b, uint16_t opcode, uint32_t token);
/* ldloc/stloc/ldloca/ldarg/starg/ldarga in the shortest form (see
 * clrmux_il_make_var); errors: RANGE (index > 0xFFFF). */
void clrmux_il_b_var(clrmux_il_builder *b, clrmux_il_var_op op, uint32_t index);
/* ldc.i4.m1..ldc.i4.8, ldc.i4.s (int8) or ldc.i4 (int32) (III.3.40). */
void clrmux_il_b_ldc_i4(clrmux_il_builder *b, int32_t v);
/* ldc.i4 form + conv.i8 when v fits int32 (as compilers do), else ldc.i8. */
void clrmux_il_b_ldc_i8(clrmux_il_builder *b, int64_t v);
/* ldc.r8 with the IEEE-754 binary64 bits of v. */
void clrmux_il_b_ldc_r8(clrmux_il_builder *b, double v);
/* New label id (UINT32_MAX and a sticky RANGE error after CLRMUX_IL_B_MAX_LABELS). */
uint32_t clrmux_il_b_label(clrmux_il_builder *b);
/* Bind a label to the current byte offset; errors: ARG (unknown or already bound). */
void clrmux_il_b_mark(clrmux_il_builder *b, uint32_t label);
/* Conditional/unconditional branch or leave to a label (short or long opcode
 * accepted; the form is chosen as described above; III.3.5-3.18, III.3.46).
 * Errors: ARG (not a branch, unknown label), RANGE (> CLRMUX_IL_B_MAX_FIXUPS
 * forward branches pending). */
void clrmux_il_b_branch(clrmux_il_builder *b, uint16_t opcode, uint32_t label);
/* Resolve forward branches. Returns 0 and leaves data/len valid, or the first
 * error (ARG: bad opcode/operand/label, RANGE, NOMEM) with its message. */
int clrmux_il_b_finish(clrmux_il_builder *b, char *err, size_t errlen);

/* ---- Signatures (II.23.2) ---- */

/* Decode a compressed unsigned integer (II.23.2): returns bytes used (1, 2 or
 * 4) and *val, or CLRMUX_IL_E_TRUNCATED / CLRMUX_IL_E_FORMAT. */
int clrmux_il_sig_uncompress(const uint8_t *p, size_t len, uint32_t *val);
/* Encode v (≤ 0x1FFFFFFF) into out: returns 1, 2 or 4, or CLRMUX_IL_E_RANGE. */
int clrmux_il_sig_compress(uint32_t v, uint8_t out[4]);

#define CLRMUX_IL_SIG_PARAMS 64 /* parameters whose types a parsed method signature locates */

/* What clrmux_il_parse_method_sig extracts from a MethodDefSig/MethodRefSig
 * (II.23.2.1-2). The return type blob is sig[ret_offset, ret_offset+ret_len):
 * CustomMod* then BYREF? Type, TYPEDBYREF or VOID, as stored. */
typedef struct clrmux_il_method_sig {
    uint8_t call_conv;         /* first byte: HASTHIS/EXPLICITTHIS/GENERIC | kind */
    uint32_t gen_param_count;  /* 0 unless GENERIC */
    uint32_t param_count;
    size_t ret_offset, ret_len;
    int returns_void;          /* return type is VOID (custom modifiers allowed) */
    /* the first CLRMUX_IL_SIG_PARAMS parameters' types (custom modifiers included) */
    size_t param_offset[CLRMUX_IL_SIG_PARAMS], param_len[CLRMUX_IL_SIG_PARAMS];
} clrmux_il_method_sig;

/* Read a method signature blob (all of it is validated, including the
 * parameters; nesting depth is bounded). Errors: TRUNCATED, FORMAT, ARG. */
int clrmux_il_parse_method_sig(const uint8_t *sig, size_t len, clrmux_il_method_sig *out,
                               char *err, size_t errlen);

/* Append locals to a LocalVarSig (II.23.2.6): 0x07, compressed Count, then
 * the types. `sig`/`sig_len` is the original blob (NULL/0: no locals);
 * `types` holds n_types already-encoded local types concatenated (e.g. 0x0A
 * ELEMENT_TYPE_I8, 0x1C OBJECT, a return type blob); each must parse as one
 * type and together they must span types_len exactly. *out (malloc'd, caller
 * frees) gets the new blob, *first_new the index of the first new local
 * (= old count). The count is re-encoded with the width it needs (1, 2 or 4
 * bytes). Errors: FORMAT (not a LocalVarSig, bad type), TRUNCATED, RANGE
 * (more than 0xFFFF locals: local indexes are uint16, III.3.43), ARG, NOMEM. */
int clrmux_il_locals_append(const uint8_t *sig, size_t sig_len, const uint8_t *types,
                            size_t types_len, uint32_t n_types, uint8_t **out, size_t *out_len,
                            uint32_t *first_new, char *err, size_t errlen);

/* ---- Wrap rewrite ---- */

/* Snippets are raw IL without header; their branches stay inside the snippet
 * (or target its end). They may not contain ret, jmp, leave, endfilter,
 * endfinally, rethrow or tail. . */
typedef struct clrmux_il_wrap_spec {
    const uint8_t *entry; size_t entry_len;   /* runs first, stack-neutral; may be empty */
    const uint8_t *exit; size_t exit_len;     /* runs in the finally, stack-neutral; may be empty */
    const uint8_t *filter; size_t filter_len; /* [exception] -> [int32]; should end with ldc.i4.0
                                                 so the exception keeps propagating; empty:
                                                 "pop; ldc.i4.0" is used */
    uint32_t ret_local;      /* local receiving the return value, CLRMUX_IL_NO_LOCAL if void */
    uint32_t local_sig_tok;  /* token of the new LocalVarSig (see clrmux_il_locals_append) */
    uint16_t extra_max_stack; /* stack depth the snippets need (beyond their entry state) */
    const uint8_t *exit_normal; size_t exit_normal_len; /* optional: see below */
    int no_eh;               /* 1: no clauses at all (exit and filter must be empty): see below */
} clrmux_il_wrap_spec;

/* Inserts the instruction stream code[0..len) (a snippet: no ret, leave, endfilter,
 * endfinally, rethrow, tail. or jmp; branches within it, or to its end, which continues into
 * the body) before the body's first instruction, outside every EH clause, raises max_stack to
 * at least `max_stack`, and lays the body out. The body is unchanged on error (besides
 * offsets). Errors: those of clrmux_il_parse_code and clrmux_il_layout, ARG (a forbidden
 * opcode, an empty body), NOMEM. */
int clrmux_il_prepend(clrmux_il_body *b, const uint8_t *code, size_t len, uint16_t max_stack, char *err,
                      size_t errlen);

/* Rewrite `b` in place into
 *     entry; .try { .try { BODY } filter { FILTER endfilter } { pop rethrow } }
 *     finally { EXIT endfinally }  END: [ldloc ret_local] ret
 * or, when the spec has an exit_normal snippet (stack-neutral like EXIT),
 *     entry; .try { .try { BODY } filter { ... } { pop rethrow } }
 *     fault { EXIT endfault }  END: EXIT_NORMAL [ldloc ret_local] ret
 * (the same exits, but the normal one runs outside every EH region, where the JIT can
 * inline an unmanaged calli: it never inlines one in a handler or, on 64-bit, in a try);
 * or, with no_eh, no clause at all (the caller learns of an exception leaving the method
 * some other way, e.g. the runtime's exception-unwind callbacks):
 *     entry; BODY  END: EXIT_NORMAL [ldloc ret_local] ret
 * where in BODY each `ret` becomes (in place, keeping branches to it)
 * `stloc ret_local` (non-void) + `leave END` (`br END` with no_eh), and `tail.` prefixes are
 * removed. Existing EH clauses are kept first (remapped), then the filter
 * clause, then the finally clause (II.19: inner before outer). The header
 * becomes fat, maxstack = max(old, 1 + extra_max_stack), local_sig_tok =
 * the spec's, INIT_LOCALS is set if the method had no locals before.
 * The result is laid out; emit it with clrmux_il_emit(). On error `b` is
 * unchanged and `err` names the reason (UNSUPPORTED: jmp; ARG: bad snippet
 * or spec; snippet parse errors; RANGE; NOMEM). */
int clrmux_il_wrap(clrmux_il_body *b, const clrmux_il_wrap_spec *spec, char *err, size_t errlen);

#endif
