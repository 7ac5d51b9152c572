/* ELT child, fast path: SetEnterLeaveFunctionHooks3. Alone, the JIT calls these hooks
 * directly, so each is an assembly stub that keeps every volatile register (as clrmux's own
 * in src/loader/elt_amd64.S) around the C body in elt_common.h. On Unix x64 the enter hook
 * gets its FunctionIDOrClientID in r14, leave and tailcall in rdi; on arm64 all three in x10;
 * on Windows x64 all three in rcx. */
#include "elt_common.h"

#if defined(__aarch64__)
/* arm64: the JIT passes the id in x10 to all three hooks; the stub saves x0-x17 and q0-q7,
 * q16-q31 (the registers a C callee may change) around the C body. The stubs are global and
 * hidden: the C code takes their addresses through the GOT under -fPIC, and GNU ld gives
 * GOT references to file-local labels of one section a single entry (the addend is lost). */
#define ELT_FAKE_STUB(name, body, ARG)                                                              \
    __asm__(".text\n.p2align 4\n.globl " #name "\n.hidden " #name "\n.type " #name ",%function\n" \
            #name ":\n"                                                                         \
            "sub sp,sp,#544\nstp x29,x30,[sp]\nmov x29,sp\nstp x0,x1,[sp,#16]\n"              \
            "stp x2,x3,[sp,#32]\nstp x4,x5,[sp,#48]\nstp x6,x7,[sp,#64]\nstp x8,x9,[sp,#80]\n"  \
            "stp x10,x11,[sp,#96]\nstp x12,x13,[sp,#112]\nstp x14,x15,[sp,#128]\n"             \
            "stp x16,x17,[sp,#144]\nstp q0,q1,[sp,#160]\nstp q2,q3,[sp,#192]\n"                \
            "stp q4,q5,[sp,#224]\nstp q6,q7,[sp,#256]\nstp q16,q17,[sp,#288]\n"                \
            "stp q18,q19,[sp,#320]\nstp q20,q21,[sp,#352]\nstp q22,q23,[sp,#384]\n"            \
            "stp q24,q25,[sp,#416]\nstp q26,q27,[sp,#448]\nstp q28,q29,[sp,#480]\nstp q30,q31,[sp,#512]\n" \
            "mov x0," ARG "\nbl " #body "\n"                                                    \
            "ldp q0,q1,[sp,#160]\nldp q2,q3,[sp,#192]\nldp q4,q5,[sp,#224]\n"                  \
            "ldp q6,q7,[sp,#256]\nldp q16,q17,[sp,#288]\nldp q18,q19,[sp,#320]\n"              \
            "ldp q20,q21,[sp,#352]\nldp q22,q23,[sp,#384]\nldp q24,q25,[sp,#416]\n"            \
            "ldp q26,q27,[sp,#448]\nldp q28,q29,[sp,#480]\nldp q30,q31,[sp,#512]\n"            \
            "ldp x0,x1,[sp,#16]\nldp x2,x3,[sp,#32]\nldp x4,x5,[sp,#48]\nldp x6,x7,[sp,#64]\n" \
            "ldp x8,x9,[sp,#80]\nldp x10,x11,[sp,#96]\nldp x12,x13,[sp,#112]\n"               \
            "ldp x14,x15,[sp,#128]\nldp x16,x17,[sp,#144]\nldp x29,x30,[sp]\n"                \
            "add sp,sp,#544\nret\n.size " #name ",.-" #name "\n")

ELT_FAKE_STUB(elt_fast_enter_stub, elt_on_enter, "x10");
ELT_FAKE_STUB(elt_fast_leave_stub, elt_on_leave, "x10");
ELT_FAKE_STUB(elt_fast_tailcall_stub, elt_on_tailcall, "x10");
#elif defined(_WIN32)
/* Windows x64: the id comes in rcx for all three hooks; the stub saves the volatile registers
 * (rax, rcx, rdx, r8-r11, xmm0-xmm5) and gives the C body its 32-byte shadow space. */
#define ELT_FAKE_STUB(name, body)                                                                   \
    __asm__(".text\n.p2align 4\n" #name ":\n"                                                   \
            "pushq %rbp\nmovq %rsp,%rbp\npushq %rax\npushq %rcx\npushq %rdx\npushq %r8\n"      \
            "pushq %r9\npushq %r10\npushq %r11\nandq $-16,%rsp\nsubq $128,%rsp\n"                \
            "movaps %xmm0,32(%rsp)\nmovaps %xmm1,48(%rsp)\nmovaps %xmm2,64(%rsp)\n"               \
            "movaps %xmm3,80(%rsp)\nmovaps %xmm4,96(%rsp)\nmovaps %xmm5,112(%rsp)\ncall " #body "\n" \
            "movaps 32(%rsp),%xmm0\nmovaps 48(%rsp),%xmm1\nmovaps 64(%rsp),%xmm2\n"               \
            "movaps 80(%rsp),%xmm3\nmovaps 96(%rsp),%xmm4\nmovaps 112(%rsp),%xmm5\n"              \
            "leaq -56(%rbp),%rsp\npopq %r11\npopq %r10\npopq %r9\npopq %r8\npopq %rdx\n"       \
            "popq %rcx\npopq %rax\npopq %rbp\nret\n")

ELT_FAKE_STUB(elt_fast_enter_stub, elt_on_enter);
ELT_FAKE_STUB(elt_fast_leave_stub, elt_on_leave);
ELT_FAKE_STUB(elt_fast_tailcall_stub, elt_on_tailcall);
#else
#define ELT_FAKE_STUB(name, body, ARG)                                                              \
    __asm__(".text\n.p2align 4\n.type " #name ",@function\n" #name ":\n"                      \
            "pushq %rbp\nmovq %rsp,%rbp\npushq %rax\npushq %rcx\npushq %rdx\npushq %rsi\n"     \
            "pushq %rdi\npushq %r8\npushq %r9\npushq %r10\npushq %r11\nandq $-16,%rsp\n"       \
            "subq $128,%rsp\nmovaps %xmm0,0(%rsp)\nmovaps %xmm1,16(%rsp)\nmovaps %xmm2,32(%rsp)\n" \
            "movaps %xmm3,48(%rsp)\nmovaps %xmm4,64(%rsp)\nmovaps %xmm5,80(%rsp)\n"           \
            "movaps %xmm6,96(%rsp)\nmovaps %xmm7,112(%rsp)\nmovq " ARG ",%rdi\ncall " #body "\n"                  \
            "movaps 0(%rsp),%xmm0\nmovaps 16(%rsp),%xmm1\nmovaps 32(%rsp),%xmm2\n"            \
            "movaps 48(%rsp),%xmm3\nmovaps 64(%rsp),%xmm4\nmovaps 80(%rsp),%xmm5\n"           \
            "movaps 96(%rsp),%xmm6\nmovaps 112(%rsp),%xmm7\nleaq -72(%rbp),%rsp\n"            \
            "popq %r11\npopq %r10\npopq %r9\npopq %r8\npopq %rdi\npopq %rsi\npopq %rdx\n"     \
            "popq %rcx\npopq %rax\npopq %rbp\nret\n.size " #name ",.-" #name "\n")

ELT_FAKE_STUB(elt_fast_enter_stub, elt_on_enter, "%r14");
ELT_FAKE_STUB(elt_fast_leave_stub, elt_on_leave, "%rdi");
ELT_FAKE_STUB(elt_fast_tailcall_stub, elt_on_tailcall, "%rdi");
#endif
void elt_fast_enter_stub(FunctionIDOrClientID id);
void elt_fast_leave_stub(FunctionIDOrClientID id);
void elt_fast_tailcall_stub(FunctionIDOrClientID id);

static void elt_set_hooks(ICorProfilerInfo5 *info)
{
    HRESULT hr = ICorProfilerInfo5_SetEnterLeaveFunctionHooks3(info, elt_fast_enter_stub, elt_fast_leave_stub,
                                                               elt_fast_tailcall_stub);
    fk_fact(elt_self, "# SetEnterLeaveFunctionHooks3 hr=0x%08X%.0u", (DWORD)hr, 0);
}
