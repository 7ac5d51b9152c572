/* Fast-path enter/leave/tailcall hooks for AArch64 (Linux, AAPCS64): what JIT-compiled code
 * calls directly when clrmux installs FunctionEnter3 / FunctionLeave3 / FunctionTailcall3.
 * The arm64 counterpart of elt_amd64.S, with the same symbols.
 *
 * The JIT's convention on arm64 (src/coreclr/jit/targetarm64.h, REG_PROFILER_ENTER_ARG_FUNC_ID
 * and REG_PROFILER_ENTER_ARG_CALLER_SP, the same registers for leave and tailcall): the hook
 * receives the FunctionIDOrClientID in x10 and the caller's SP in x11; the argument registers
 * x0-x8 and v0-v7 hold the method's arguments at enter and its return value at leave. Each
 * stub saves every register the C ABI lets a callee change (x0-x17, the full 128 bits of
 * v0-v31: AAPCS64 keeps only the low halves of v8-v15), calls the C dispatcher in elt_dispatch.c
 * (clrmux_elt_fast_enter/leave/tailcall(id, caller_sp) in x0, x1), restores everything and
 * returns. The frame record (x29, x30) at the bottom of the frame keeps the stack walkable by
 * frame pointer; CFI keeps it unwindable.
 *
 * elt_call_arm64.S holds the way back: clrmux_elt_call_enter3, which calls a child's own hooks
 * with the JIT's convention (the stubs call up into elt_dispatch.c, which calls down into it). */
#if defined(__aarch64__)

#define FRAME 672 /* x29/x30 (16) + x0-x17 (144) + q0-q31 (512) */
#define QAREA 160

.macro ELT_STUB name, target
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, %function
\name:
    .cfi_startproc
    sub sp, sp, #FRAME
    .cfi_def_cfa_offset FRAME
    stp x29, x30, [sp]
    .cfi_offset x29, -FRAME
    .cfi_offset x30, -FRAME+8
    mov x29, sp
    .cfi_def_cfa_register x29
    stp x0, x1, [sp, #16]
    stp x2, x3, [sp, #32]
    stp x4, x5, [sp, #48]
    stp x6, x7, [sp, #64]
    stp x8, x9, [sp, #80]
    stp x10, x11, [sp, #96]
    stp x12, x13, [sp, #112]
    stp x14, x15, [sp, #128]
    stp x16, x17, [sp, #144]
    stp q0, q1, [sp, #QAREA + 0]
    stp q2, q3, [sp, #QAREA + 32]
    stp q4, q5, [sp, #QAREA + 64]
    stp q6, q7, [sp, #QAREA + 96]
    stp q8, q9, [sp, #QAREA + 128]
    stp q10, q11, [sp, #QAREA + 160]
    stp q12, q13, [sp, #QAREA + 192]
    stp q14, q15, [sp, #QAREA + 224]
    stp q16, q17, [sp, #QAREA + 256]
    stp q18, q19, [sp, #QAREA + 288]
    stp q20, q21, [sp, #QAREA + 320]
    stp q22, q23, [sp, #QAREA + 352]
    stp q24, q25, [sp, #QAREA + 384]
    stp q26, q27, [sp, #QAREA + 416]
    stp q28, q29, [sp, #QAREA + 448]
    stp q30, q31, [sp, #QAREA + 480]
    mov x0, x10
    mov x1, x11
    bl \target
    ldp q0, q1, [sp, #QAREA + 0]
    ldp q2, q3, [sp, #QAREA + 32]
    ldp q4, q5, [sp, #QAREA + 64]
    ldp q6, q7, [sp, #QAREA + 96]
    ldp q8, q9, [sp, #QAREA + 128]
    ldp q10, q11, [sp, #QAREA + 160]
    ldp q12, q13, [sp, #QAREA + 192]
    ldp q14, q15, [sp, #QAREA + 224]
    ldp q16, q17, [sp, #QAREA + 256]
    ldp q18, q19, [sp, #QAREA + 288]
    ldp q20, q21, [sp, #QAREA + 320]
    ldp q22, q23, [sp, #QAREA + 352]
    ldp q24, q25, [sp, #QAREA + 384]
    ldp q26, q27, [sp, #QAREA + 416]
    ldp q28, q29, [sp, #QAREA + 448]
    ldp q30, q31, [sp, #QAREA + 480]
    ldp x0, x1, [sp, #16]
    ldp x2, x3, [sp, #32]
    ldp x4, x5, [sp, #48]
    ldp x6, x7, [sp, #64]
    ldp x8, x9, [sp, #80]
    ldp x10, x11, [sp, #96]
    ldp x12, x13, [sp, #112]
    ldp x14, x15, [sp, #128]
    ldp x16, x17, [sp, #144]
    ldp x29, x30, [sp]
    .cfi_def_cfa sp, FRAME
    add sp, sp, #FRAME
    .cfi_def_cfa_offset 0
    ret
    .cfi_endproc
    .size \name, .-\name
.endm

ELT_STUB clrmux_elt_enter3_stub, clrmux_elt_fast_enter
ELT_STUB clrmux_elt_leave3_stub, clrmux_elt_fast_leave
ELT_STUB clrmux_elt_tailcall3_stub, clrmux_elt_fast_tailcall

#endif

.section .note.GNU-stack,"",%progbits
