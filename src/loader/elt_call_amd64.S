/* clrmux_elt_call_enter3 for x86-64 System V: calls a child's own FunctionEnter3 (or, for hooks
 * written as plain C functions, its Leave3 / Tailcall3) with the convention the JIT uses, so that
 * the child's hook sees what it sees alone. elt_dispatch.c calls it for every child that set
 * fast-path hooks (the stubs of elt_amd64.S call elt_dispatch.c, which calls down into this).
 *
 * The JIT's convention on Unix x64 (src/coreclr/jit/targetamd64.h, REG_PROFILER_ENTER_ARG_0/1;
 * observed on .NET 8, 9 and 10): the enter hook receives the FunctionIDOrClientID in r14 and
 * the caller's SP in r15; a hook written in C reads them from rdi and rsi, so both pairs are
 * set. r14 and r15 are callee-saved in the C ABI: saved and restored here. Windows x64 needs
 * nothing here: a child's fast-path hooks are plain functions of one argument there. */
#if defined(__x86_64__) && !defined(_WIN32)

/* void clrmux_elt_call_enter3(void *hook, UINT_PTR id, UINT_PTR caller_sp) */
    .text
    .p2align 4
    .globl clrmux_elt_call_enter3
    .hidden clrmux_elt_call_enter3
    .type clrmux_elt_call_enter3, @function
clrmux_elt_call_enter3:
    .cfi_startproc
    pushq %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    pushq %r14
    .cfi_offset %r14, -24
    pushq %r15
    .cfi_offset %r15, -32
    movq %rdi, %rax
    movq %rsi, %r14
    movq %rdx, %r15
    movq %rsi, %rdi
    movq %rdx, %rsi
    call *%rax
    popq %r15
    popq %r14
    popq %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size clrmux_elt_call_enter3, .-clrmux_elt_call_enter3

#endif

#if !defined(_WIN32)
.section .note.GNU-stack,"",%progbits
#endif
