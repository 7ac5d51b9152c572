/* The enter/leave/tailcall dispatchers: what the runtime's hooks reach, calling each hooking
 * child's own hook as the runtime would call it alone. The fast-path ones are called by the
 * register-preserving stubs of elt_amd64.S / elt_arm64.S; the WithInfo ones by the runtime
 * directly. They read the state clrmux_elt_install fixed (elt.c, elt_int.h). */
#include "loader/elt_int.h"

#include <string.h>

struct clrmux_elt *clrmux_elt_g;

/* ---- dispatch -------------------------------------------------------------------------- */

enum { K_ENTER, K_LEAVE, K_TAILCALL };

/* A child's COR_PRF_FRAME_INFO / argument / return-value data for its ELT2 hooks, fetched from
 * the runtime once per hook call and only when some ELT2 child needs it. */
struct elt2_info {
    int have;
    COR_PRF_FRAME_INFO frame;
    COR_PRF_FUNCTION_ARGUMENT_INFO *args;
    COR_PRF_FUNCTION_ARGUMENT_RANGE retval;
    union {
        COR_PRF_FUNCTION_ARGUMENT_INFO a;
        unsigned char bytes[1024];
    } buf;
};

static void elt2_fetch(int kind, FunctionID fid, COR_PRF_ELT_INFO info, struct elt2_info *x)
{
    ICorProfilerInfo15 *rt = clrmux_elt_g->mux->info;
    x->have = 1;
    x->frame = 0;
    x->args = NULL;
    memset(&x->retval, 0, sizeof x->retval);
    if (kind == K_ENTER) {
        ULONG cb = sizeof x->buf;
        if (SUCCEEDED(rt->lpVtbl->GetFunctionEnter3Info(rt, fid, info, &x->frame, &cb, &x->buf.a)))
            x->args = &x->buf.a;
    } else if (kind == K_LEAVE) {
        rt->lpVtbl->GetFunctionLeave3Info(rt, fid, info, &x->frame, &x->retval);
    } else {
        rt->lpVtbl->GetFunctionTailcall3Info(rt, fid, info, &x->frame);
    }
}

#if CLRMUX_ELT_CALL_REGS
/* elt_call_amd64.S / elt_call_arm64.S: calls a child's FunctionEnter3 with the JIT's register convention
 * (on arm64 also its Leave3 / Tailcall3: the JIT passes x10 and x11 to all three). */
extern void clrmux_elt_call_enter3(void *hook, UINT_PTR id, UINT_PTR caller_sp);
#endif

static inline __attribute__((always_inline)) void elt_dispatch(const int kind, const int slow, UINT_PTR id,
                                                                COR_PRF_ELT_INFO info, UINT_PTR caller_sp)
{
    const struct clrmux_elt *e = clrmux_elt_g;
    const struct elt_fn *f = (const struct elt_fn *)id;
    /* every id is one of clrmux's records unless the runtime hooked a function without asking
     * the mapper: then each child gets the FunctionID, as it would without a mapper */
    const int mapped = f && f->magic == ELT_MAGIC;
    const FunctionID fid = mapped ? f->fid : id;
    const uint64_t hooked = mapped ? f->hooked : ~0ull;
    struct elt2_info x2;
    x2.have = 0;
    for (int s = 0; s < e->nslots; s++) {
        if (!(hooked >> s & 1))
            continue;
        const struct elt_slot *sl = &e->slots[s];
        void *h = kind == K_ENTER ? sl->enter : kind == K_LEAVE ? sl->leave : sl->tailcall;
        if (!h)
            continue;
        DWORD low = atomic_load_explicit(&sl->child->mask_low, memory_order_relaxed);
        if (!(low & COR_PRF_MONITOR_ENTERLEAVE))
            continue;
        FunctionIDOrClientID u;
        u.clientID = mapped ? f->client[s] : id;
        switch (sl->gen) {
        case CLRMUX_ELT_GEN3:
            /* a fast-path hook expects what the JIT passes: on x64, the id in r14 and the caller's
             * SP in r15 at enter, the id in rdi and the SP in rsi at leave and tailcall; on arm64
             * the id in x10 and the SP in x11 at all three */
#if CLRMUX_ELT_CALL_REGS && defined(__aarch64__)
            clrmux_elt_call_enter3(h, u.clientID, caller_sp);
#elif CLRMUX_ELT_CALL_REGS && defined(__x86_64__)
            if (kind == K_ENTER)
                clrmux_elt_call_enter3(h, u.clientID, caller_sp);
            else
                ((void (*)(UINT_PTR, UINT_PTR))h)(u.clientID, caller_sp);
#else
            (void)caller_sp;
            if (kind == K_ENTER)
                ((FunctionEnter3 *)h)(u);
            else if (kind == K_LEAVE)
                ((FunctionLeave3 *)h)(u);
            else
                ((FunctionTailcall3 *)h)(u);
#endif
            break;
        case CLRMUX_ELT_GEN3_INFO:
            if (kind == K_ENTER)
                ((FunctionEnter3WithInfo *)h)(u, info);
            else if (kind == K_LEAVE)
                ((FunctionLeave3WithInfo *)h)(u, info);
            else
                ((FunctionTailcall3WithInfo *)h)(u, info);
            break;
        case CLRMUX_ELT_GEN2: {
            COR_PRF_FRAME_INFO frame = 0;
            COR_PRF_FUNCTION_ARGUMENT_INFO *args = NULL;
            COR_PRF_FUNCTION_ARGUMENT_RANGE *retval = NULL;
            if (slow && (low & SLOW_FLAGS)) {
                if (!x2.have)
                    elt2_fetch(kind, fid, info, &x2);
                if (low & COR_PRF_ENABLE_FRAME_INFO)
                    frame = x2.frame;
                if (low & COR_PRF_ENABLE_FUNCTION_ARGS)
                    args = x2.args;
                if (low & COR_PRF_ENABLE_FUNCTION_RETVAL)
                    retval = &x2.retval;
            }
            if (kind == K_ENTER)
                ((FunctionEnter2 *)h)(fid, u.clientID, frame, args);
            else if (kind == K_LEAVE)
                ((FunctionLeave2 *)h)(fid, u.clientID, frame, retval);
            else
                ((FunctionTailcall2 *)h)(fid, u.clientID, frame);
            break;
        }
        case CLRMUX_ELT_GEN1:
            if (kind == K_ENTER)
                ((FunctionEnter *)h)(u.clientID);
            else if (kind == K_LEAVE)
                ((FunctionLeave *)h)(u.clientID);
            else
                ((FunctionTailcall *)h)(u.clientID);
            break;
        default:
            break;
        }
    }
}

/* Fast path: reached from the stubs in elt_amd64.S with every volatile register saved. */
#define HIDDEN CLRMUX_ELT_HIDDEN
HIDDEN void clrmux_elt_fast_enter(UINT_PTR id, UINT_PTR caller_sp);
HIDDEN void clrmux_elt_fast_leave(UINT_PTR id, UINT_PTR caller_sp);
HIDDEN void clrmux_elt_fast_tailcall(UINT_PTR id, UINT_PTR caller_sp);
HIDDEN void clrmux_elt_fast_enter(UINT_PTR id, UINT_PTR sp) { elt_dispatch(K_ENTER, 0, id, 0, sp); }
HIDDEN void clrmux_elt_fast_leave(UINT_PTR id, UINT_PTR sp) { elt_dispatch(K_LEAVE, 0, id, 0, sp); }
HIDDEN void clrmux_elt_fast_tailcall(UINT_PTR id, UINT_PTR sp) { elt_dispatch(K_TAILCALL, 0, id, 0, sp); }

/* Slow path: the runtime's ProfileEnter/Leave/Tailcall call these as ordinary C functions. */
void STDMETHODCALLTYPE clrmux_elt_enter_info(FunctionIDOrClientID id, COR_PRF_ELT_INFO info)
{
    elt_dispatch(K_ENTER, 1, id.clientID, info, 0);
}
void STDMETHODCALLTYPE clrmux_elt_leave_info(FunctionIDOrClientID id, COR_PRF_ELT_INFO info)
{
    elt_dispatch(K_LEAVE, 1, id.clientID, info, 0);
}
void STDMETHODCALLTYPE clrmux_elt_tailcall_info(FunctionIDOrClientID id, COR_PRF_ELT_INFO info)
{
    elt_dispatch(K_TAILCALL, 1, id.clientID, info, 0);
}

