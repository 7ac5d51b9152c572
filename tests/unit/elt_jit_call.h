/* elt_jit_call(hook, id): calls a fast-path enter/leave/tailcall hook (FunctionEnter3 and
 * its kin) the way JIT-compiled code does on this platform, with every register the JIT may
 * keep live set to a known value, and returns how many of them the call changed (0: all
 * kept). The id goes where the JIT puts it: r14 (enter) and rdi (leave, tailcall) on Linux
 * x64, rcx on Windows x64, x10 on arm64; the caller's SP register gets a dummy value.
 * Checked after the call: the integer argument and scratch registers, and the low halves of
 * the vector registers that carry arguments and return values (xmm0-xmm7, xmm0-xmm5 on
 * Windows, d0-d7 on arm64). For tests/unit/test_mux_elt.c; one copy per test binary. */
#ifndef CLRMUX_TESTS_ELT_JIT_CALL_H
#define CLRMUX_TESTS_ELT_JIT_CALL_H

#include <stdint.h>

uintptr_t elt_jit_call(void *hook, uintptr_t id);

#if defined(__x86_64__) && defined(_WIN32)
__asm__(".text\n.p2align 4\n.globl elt_jit_call\nelt_jit_call:\n"
        "pushq %rbx\npushq %r12\npushq %r13\nsubq $32,%rsp\n"
        "movq %rcx,%rbx\nmovq %rdx,%r12\n"
        "movq $0x1111,%rax\nmovq %r12,%rcx\nmovq $0x2222,%rdx\nmovq $0x3333,%r8\nmovq $0x4444,%r9\n"
        "movq $0x5555,%r10\nmovq $0x6666,%r11\n"
        "movq %rax,%xmm0\nmovq %rdx,%xmm1\nmovq %r8,%xmm2\nmovq %r9,%xmm3\nmovq %r10,%xmm4\nmovq %r11,%xmm5\n"
        "call *%rbx\n"
        "xorq %r13,%r13\n"
        "cmpq $0x1111,%rax\nsetne %r13b\nmovzbq %r13b,%rax\n"
        "cmpq %r12,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x2222,%rdx\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x3333,%r8\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x4444,%r9\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x5555,%r10\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x6666,%r11\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm0,%rcx\ncmpq $0x1111,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm1,%rcx\ncmpq $0x2222,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm2,%rcx\ncmpq $0x3333,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm3,%rcx\ncmpq $0x4444,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm4,%rcx\ncmpq $0x5555,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm5,%rcx\ncmpq $0x6666,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "addq $32,%rsp\npopq %r13\npopq %r12\npopq %rbx\nret\n");
#elif defined(__x86_64__)
__asm__(".text\n.p2align 4\n.globl elt_jit_call\n.hidden elt_jit_call\n.type elt_jit_call,@function\nelt_jit_call:\n"
        "pushq %rbx\npushq %r12\npushq %r13\npushq %r14\npushq %r15\n"
        "movq %rdi,%rbx\nmovq %rsi,%r12\nmovq %rsi,%r14\nmovq $0x7777,%r15\nmovq %rsi,%rdi\n"
        "movq $0x1111,%rax\nmovq $0x2222,%rcx\nmovq $0x3333,%rdx\nmovq $0x4444,%rsi\nmovq $0x5555,%r8\n"
        "movq $0x6666,%r9\nmovq $0x8888,%r10\nmovq $0x9999,%r11\n"
        "movq %rax,%xmm0\nmovq %rcx,%xmm1\nmovq %rdx,%xmm2\nmovq %rsi,%xmm3\nmovq %r8,%xmm4\nmovq %r9,%xmm5\n"
        "movq %r10,%xmm6\nmovq %r11,%xmm7\n"
        "call *%rbx\n"
        "xorq %r13,%r13\n"
        "cmpq $0x1111,%rax\nsetne %r13b\nmovzbq %r13b,%rax\n"
        "cmpq $0x2222,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x3333,%rdx\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x4444,%rsi\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq %r12,%rdi\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x5555,%r8\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x6666,%r9\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x8888,%r10\nsetne %r13b\naddq %r13,%rax\n"
        "cmpq $0x9999,%r11\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm0,%rcx\ncmpq $0x1111,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm1,%rcx\ncmpq $0x2222,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm2,%rcx\ncmpq $0x3333,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm3,%rcx\ncmpq $0x4444,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm4,%rcx\ncmpq $0x5555,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm5,%rcx\ncmpq $0x6666,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm6,%rcx\ncmpq $0x8888,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "movq %xmm7,%rcx\ncmpq $0x9999,%rcx\nsetne %r13b\naddq %r13,%rax\n"
        "popq %r15\npopq %r14\npopq %r13\npopq %r12\npopq %rbx\nret\n.size elt_jit_call,.-elt_jit_call\n");
#elif defined(__aarch64__)
__asm__(".text\n.p2align 4\n.globl elt_jit_call\n.hidden elt_jit_call\n.type elt_jit_call,%function\nelt_jit_call:\n"
        "stp x29,x30,[sp,#-32]!\nmov x29,sp\nstp x19,x20,[sp,#16]\n"
        "mov x19,x0\nmov x20,x1\nmov x10,x1\nmov x11,#0x77\n"
        "mov x0,#0x100\nmov x1,#0x101\nmov x2,#0x102\nmov x3,#0x103\nmov x4,#0x104\nmov x5,#0x105\n"
        "mov x6,#0x106\nmov x7,#0x107\nmov x8,#0x108\nmov x9,#0x109\nmov x12,#0x10c\nmov x13,#0x10d\n"
        "mov x14,#0x10e\nmov x15,#0x10f\n"
        "fmov d0,x0\nfmov d1,x1\nfmov d2,x2\nfmov d3,x3\nfmov d4,x4\nfmov d5,x5\nfmov d6,x6\nfmov d7,x7\n"
        "blr x19\n"
        "mov x19,#0\n"
        "cmp x0,#0x100\ncinc x19,x19,ne\ncmp x1,#0x101\ncinc x19,x19,ne\ncmp x2,#0x102\ncinc x19,x19,ne\n"
        "cmp x3,#0x103\ncinc x19,x19,ne\ncmp x4,#0x104\ncinc x19,x19,ne\ncmp x5,#0x105\ncinc x19,x19,ne\n"
        "cmp x6,#0x106\ncinc x19,x19,ne\ncmp x7,#0x107\ncinc x19,x19,ne\ncmp x8,#0x108\ncinc x19,x19,ne\n"
        "cmp x9,#0x109\ncinc x19,x19,ne\ncmp x10,x20\ncinc x19,x19,ne\ncmp x12,#0x10c\ncinc x19,x19,ne\n"
        "cmp x13,#0x10d\ncinc x19,x19,ne\ncmp x14,#0x10e\ncinc x19,x19,ne\ncmp x15,#0x10f\ncinc x19,x19,ne\n"
        "fmov x9,d0\ncmp x9,#0x100\ncinc x19,x19,ne\nfmov x9,d1\ncmp x9,#0x101\ncinc x19,x19,ne\n"
        "fmov x9,d2\ncmp x9,#0x102\ncinc x19,x19,ne\nfmov x9,d3\ncmp x9,#0x103\ncinc x19,x19,ne\n"
        "fmov x9,d4\ncmp x9,#0x104\ncinc x19,x19,ne\nfmov x9,d5\ncmp x9,#0x105\ncinc x19,x19,ne\n"
        "fmov x9,d6\ncmp x9,#0x106\ncinc x19,x19,ne\nfmov x9,d7\ncmp x9,#0x107\ncinc x19,x19,ne\n"
        "mov x0,x19\nldp x19,x20,[sp,#16]\nldp x29,x30,[sp],#32\nret\n.size elt_jit_call,.-elt_jit_call\n");
#endif

#endif
