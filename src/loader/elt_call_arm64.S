/* clrmux_elt_call_enter3 for AArch64 (Linux, AAPCS64): calls a child's own FunctionEnter3 /
 * Leave3 / Tailcall3 with the convention the JIT uses (src/coreclr/jit/targetarm64.h: the
 * FunctionIDOrClientID in x10, the caller's SP in x11), and also in x0 and x1 for hooks written
 * as plain C functions. elt_dispatch.c calls it for every child that set fast-path hooks (the
 * stubs of elt_arm64.S call elt_dispatch.c, which calls down into this). */
#if defined(__aarch64__)

/* void clrmux_elt_call_enter3(void *hook, UINT_PTR id, UINT_PTR caller_sp) */
    .text
    .p2align 4
    .globl clrmux_elt_call_enter3
    .hidden clrmux_elt_call_enter3
    .type clrmux_elt_call_enter3, %function
clrmux_elt_call_enter3:
    .cfi_startproc
    stp x29, x30, [sp, #-16]!
    .cfi_def_cfa_offset 16
    .cfi_offset x29, -16
    .cfi_offset x30, -8
    mov x29, sp
    mov x16, x0
    mov x10, x1
    mov x11, x2
    mov x0, x1
    mov x1, x2
    blr x16
    ldp x29, x30, [sp], #16
    .cfi_def_cfa sp, 0
    ret
    .cfi_endproc
    .size clrmux_elt_call_enter3, .-clrmux_elt_call_enter3

#endif

.section .note.GNU-stack,"",%progbits
