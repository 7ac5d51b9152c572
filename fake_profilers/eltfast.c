/* ELT child, fast path: SetEnterLeaveFunctionHooks3. Alone, the JIT calls these hooks
 * directly, so each is an assembly stub that keeps every volatile register (as clrmux's own
 * in src/loader/elt_amd64.S) around the C body in elt_common.h. On Unix x64 the enter hook
 * gets its FunctionIDOrClientID in r14, leave and tailcall in rdi. */
#include "elt_common.h"

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
void elt_fast_enter_stub(FunctionIDOrClientID id);
void elt_fast_leave_stub(FunctionIDOrClientID id);
void elt_fast_tailcall_stub(FunctionIDOrClientID id);

static void elt_set_hooks(ICorProfilerInfo5 *info)
{
    HRESULT hr = ICorProfilerInfo5_SetEnterLeaveFunctionHooks3(info, elt_fast_enter_stub, elt_fast_leave_stub,
                                                               elt_fast_tailcall_stub);
    fk_fact(elt_self, "# SetEnterLeaveFunctionHooks3 hr=0x%08X%.0u", (DWORD)hr, 0);
}
