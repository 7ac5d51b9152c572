/* Enter/leave/tailcall (ELT) hooks for every child.
 *
 * The runtime has one set of ELT hooks and one FunctionIDMapper. clrmux records each child's
 * own hooks (any of the four generations: SetEnterLeaveFunctionHooks, 2, 3, 3WithInfo) and
 * mapper (SetFunctionIDMapper / SetFunctionIDMapper2 with its clientData) through the
 * child's proxy, and at the end of its Initialize installs its own on the runtime:
 *   - its FunctionIDMapper2, which calls every hooking child's mapper and returns a per-function
 *     record with each child's client data and whether that child hooks the function;
 *   - fast-path hooks (FunctionEnter3/Leave3/Tailcall3, x64 assembly stubs in elt_amd64.S that
 *     preserve every volatile register, as JIT code expects) when no child's mask has
 *     COR_PRF_ENABLE_FUNCTION_ARGS / RETVAL / FRAME_INFO, else the WithInfo hooks (C).
 * Each hook calls every child, in file order, whose mask has COR_PRF_MONITOR_ENTERLEAVE and
 * which hooked the function, through the generation it set, with its own client data. The
 * COR_PRF_ELT_INFO a WithInfo child receives is the runtime's: it passes it to
 * GetFunctionEnter3Info / GetFunctionLeave3Info / GetFunctionTailcall3Info through its proxy,
 * which answers as the runtime would for the child's own flags. A process whose children set
 * no hook gets no hook installed (no cost); when exactly one child sets hooks, its own mapper
 * and hooks go to the runtime unchanged (it pays what it pays alone). */
#ifndef CLRMUX_ELT_H
#define CLRMUX_ELT_H

#include "clrmux/corprof.h"

struct clrmux_mux;
struct clrmux_child;

/* Which Set*Hooks* call a child made last (the runtime's precedence: 3 and 3WithInfo replace
 * everything, 2 replaces 1, and a later older generation is a no-op). */
enum clrmux_elt_gen { CLRMUX_ELT_NONE, CLRMUX_ELT_GEN1, CLRMUX_ELT_GEN2, CLRMUX_ELT_GEN3, CLRMUX_ELT_GEN3_INFO };

/* Records a child's SetEnterLeaveFunctionHooks* (gen 1..4 as above; the three pointers are the
 * generation's enter/leave/tailcall types). Returns what the runtime would return to the
 * child alone: E_INVALIDARG when all three are NULL; CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER
 * in an attach; CORPROF_E_CALL_ONLY_FROM_INIT outside the mux's Initialize; CORPROF_E_INCONSISTENT_WITH_FLAGS for fast-path hooks with, or WithInfo
 * hooks without, COR_PRF_ENABLE_FUNCTION_ARGS/RETVAL/FRAME_INFO in the child's own mask;
 * E_OUTOFMEMORY; S_OK. */
HRESULT clrmux_elt_set_hooks(struct clrmux_mux *m, struct clrmux_child *c, enum clrmux_elt_gen gen, void *enter,
                             void *leave, void *tailcall);

/* Records a child's FunctionIDMapper (mapper2 = 0) or FunctionIDMapper2 (mapper2 = 1, with
 * its clientData). Later calls replace earlier ones; functions already mapped keep their data.
 * S_OK, E_OUTOFMEMORY. */
HRESULT clrmux_elt_set_mapper(struct clrmux_mux *m, struct clrmux_child *c, int mapper2, void *fn, void *data);

/* Installs clrmux's mapper and hooks on the runtime if any active child set hooks (call at
 * the end of the mux's Initialize, after every child's Initialize). Logs which children hook
 * and which path (fast/WithInfo) the runtime uses. Does nothing when no child set hooks. */
void clrmux_elt_install(struct clrmux_mux *m);

/* The proxy's GetFunctionEnter3Info / GetFunctionLeave3Info / GetFunctionTailcall3Info: the
 * runtime's answer for the child's own flags (CORPROF_E_INCONSISTENT_WITH_FLAGS when the child
 * did not ask for frame info or arguments / return value; argument or return-value data hidden
 * from a child that asked only for frame info). */
HRESULT clrmux_elt_enter3_info(struct clrmux_child *c, FunctionID fid, COR_PRF_ELT_INFO info,
                               COR_PRF_FRAME_INFO *frame, ULONG *pcb, COR_PRF_FUNCTION_ARGUMENT_INFO *args);
HRESULT clrmux_elt_leave3_info(struct clrmux_child *c, FunctionID fid, COR_PRF_ELT_INFO info,
                               COR_PRF_FRAME_INFO *frame, COR_PRF_FUNCTION_ARGUMENT_RANGE *retval);
HRESULT clrmux_elt_tailcall3_info(struct clrmux_child *c, FunctionID fid, COR_PRF_ELT_INFO info,
                                  COR_PRF_FRAME_INFO *frame);

/* Whether child c set enter/leave hooks (it cannot detach then, as alone). */
int clrmux_elt_child_hooks(struct clrmux_mux *m, struct clrmux_child *c);

/* Frees the mux's ELT state (tests; a live process keeps it). */
void clrmux_elt_free(struct clrmux_mux *m);

#ifdef CLRMUX_TESTING
/* What the runtime would call: the installed mapper and hooks (NULL when none installed).
 * fast = 1 when the fast-path stubs were installed. */
struct clrmux_elt_installed {
    int direct; /* 1: the one hooking child's own hooks are on the runtime (nothing below) */
    int fast;
    FunctionIDMapper2 *mapper;
    void *mapper_data;
    void *enter, *leave, *tailcall; /* FunctionEnter3* or FunctionEnter3WithInfo* etc. */
};
void clrmux_elt_installed(struct clrmux_mux *m, struct clrmux_elt_installed *out);
#endif

#endif
