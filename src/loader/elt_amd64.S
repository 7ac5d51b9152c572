/* Fast-path enter/leave/tailcall hooks for x86-64 (System V and Windows x64): what JIT-compiled code calls
 * directly when clrmux installs FunctionEnter3 / FunctionLeave3 / FunctionTailcall3.
 *
 * The JIT's convention on Unix x64 (src/coreclr/jit/targetamd64.h, REG_PROFILER_ENTER_ARG_0/1;
 * observed on .NET 8, 9 and 10): the enter hook receives the FunctionIDOrClientID in r14 and
 * the caller's SP in r15 (the argument registers hold the method's own arguments); the leave
 * and tailcall hooks receive them in rdi and rsi. Every register must survive the call: the
 * argument registers (live at enter), the return registers (rax, rdx, xmm0, xmm1 at leave)
 * and the scratch registers the JIT may keep values in. Each stub therefore saves every
 * volatile register (rax, rcx, rdx, rsi, rdi, r8-r11, xmm0-xmm15), aligns the stack to 16
 * bytes for the C call (the JIT does not promise alignment here), calls the C dispatcher in
 * elt_dispatch.c (clrmux_elt_fast_enter/leave/tailcall(id, caller_sp) in rdi, rsi), restores
 * everything and returns. Callee-saved registers are preserved by the C ABI. CFI keeps the
 * frame unwindable for debuggers and native stack walkers.
 *
 * elt_call_amd64.S holds the way back: clrmux_elt_call_enter3, which calls a child's own hook
 * with the JIT's convention (the stubs call up into elt_dispatch.c, which calls down into it).
 *
 * Windows x64 (the second half): the JIT passes the FunctionIDOrClientID in rcx and the
 * caller's SP in rdx to all three hooks (targetamd64.h without UNIX_AMD64_ABI: the argument
 * registers are homed by the caller before the enter hook). The volatile registers there are
 * rax, rcx, rdx, r8-r11 and xmm0-xmm5 (rsi, rdi and xmm6-xmm15 are callee-saved, so the C
 * dispatcher keeps them); each stub saves those, gives the C call its 32-byte shadow space on
 * a 16-byte aligned stack, and restores them (rax and xmm0 carry the return value at leave).
 * SEH unwind data (.seh_*) describes the frame through rbp, so a stack walk through a hook
 * unwinds. A child's own fast-path hooks are plain functions of one argument there, so
 * elt_call_amd64.S has nothing for Windows. */
#if defined(__x86_64__) && !defined(_WIN32)

#define XMM_AREA 256

.macro ELT_STUB name, target, enter
    .text
    .p2align 4
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    .cfi_startproc
    pushq %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    pushq %rax
    pushq %rcx
    pushq %rdx
    pushq %rsi
    pushq %rdi
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    andq $-16, %rsp
    subq $XMM_AREA, %rsp
    movaps %xmm0, 0(%rsp)
    movaps %xmm1, 16(%rsp)
    movaps %xmm2, 32(%rsp)
    movaps %xmm3, 48(%rsp)
    movaps %xmm4, 64(%rsp)
    movaps %xmm5, 80(%rsp)
    movaps %xmm6, 96(%rsp)
    movaps %xmm7, 112(%rsp)
    movaps %xmm8, 128(%rsp)
    movaps %xmm9, 144(%rsp)
    movaps %xmm10, 160(%rsp)
    movaps %xmm11, 176(%rsp)
    movaps %xmm12, 192(%rsp)
    movaps %xmm13, 208(%rsp)
    movaps %xmm14, 224(%rsp)
    movaps %xmm15, 240(%rsp)
.if \enter
    movq %r14, %rdi
    movq %r15, %rsi
.endif
    call \target
    movaps 0(%rsp), %xmm0
    movaps 16(%rsp), %xmm1
    movaps 32(%rsp), %xmm2
    movaps 48(%rsp), %xmm3
    movaps 64(%rsp), %xmm4
    movaps 80(%rsp), %xmm5
    movaps 96(%rsp), %xmm6
    movaps 112(%rsp), %xmm7
    movaps 128(%rsp), %xmm8
    movaps 144(%rsp), %xmm9
    movaps 160(%rsp), %xmm10
    movaps 176(%rsp), %xmm11
    movaps 192(%rsp), %xmm12
    movaps 208(%rsp), %xmm13
    movaps 224(%rsp), %xmm14
    movaps 240(%rsp), %xmm15
    leaq -72(%rbp), %rsp
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rdi
    popq %rsi
    popq %rdx
    popq %rcx
    popq %rax
    popq %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size \name, .-\name
.endm

ELT_STUB clrmux_elt_enter3_stub, clrmux_elt_fast_enter, 1
ELT_STUB clrmux_elt_leave3_stub, clrmux_elt_fast_leave, 0
ELT_STUB clrmux_elt_tailcall3_stub, clrmux_elt_fast_tailcall, 0

#endif

#if defined(__x86_64__) && defined(_WIN32)

.macro ELT_STUB_WIN name, target
    .text
    .p2align 4
    .globl \name
    .def \name; .scl 2; .type 32; .endef
    .seh_proc \name
\name:
    pushq %rbp
    .seh_pushreg %rbp
    movq %rsp, %rbp
    .seh_setframe %rbp, 0
    .seh_endprologue
    pushq %rax
    pushq %rcx
    pushq %rdx
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    andq $-16, %rsp
    subq $128, %rsp            /* 32 bytes of shadow space, then xmm0-xmm5 */
    movaps %xmm0, 32(%rsp)
    movaps %xmm1, 48(%rsp)
    movaps %xmm2, 64(%rsp)
    movaps %xmm3, 80(%rsp)
    movaps %xmm4, 96(%rsp)
    movaps %xmm5, 112(%rsp)
    call \target                /* rcx = id, rdx = caller's SP, as the JIT passed them */
    movaps 32(%rsp), %xmm0
    movaps 48(%rsp), %xmm1
    movaps 64(%rsp), %xmm2
    movaps 80(%rsp), %xmm3
    movaps 96(%rsp), %xmm4
    movaps 112(%rsp), %xmm5
    leaq -56(%rbp), %rsp
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rdx
    popq %rcx
    popq %rax
    popq %rbp
    ret
    .seh_endproc
.endm

ELT_STUB_WIN clrmux_elt_enter3_stub, clrmux_elt_fast_enter
ELT_STUB_WIN clrmux_elt_leave3_stub, clrmux_elt_fast_leave
ELT_STUB_WIN clrmux_elt_tailcall3_stub, clrmux_elt_fast_tailcall

#else
.section .note.GNU-stack,"",%progbits
#endif
