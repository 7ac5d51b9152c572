/* Composition: several children instrumenting one method.
 *
 * clrmux keeps one record per (ModuleID, mdMethodDef) that any child asked to ReJIT:
 *   owners      the children whose ReJIT request is in force (bit = child index, which is
 *               the child's position in loader.conf order)
 *   pending     owners whose request is held back until the method's first compilation,
 *               so that children watching JIT compilation see it (see below)
 *   jit_writers children that set its IL at JIT time (ICorProfilerInfo::SetILFunctionBody)
 *
 * The body that finally runs is a chain: the runtime's IL (which already holds every JIT-time
 * rewrite: the runtime keeps an Info::SetILFunctionBody body as the method's IL) -> each
 * ReJIT owner in file order. When the runtime raises GetReJITParameters, every owner is
 * called with an ICorProfilerFunctionControl of its own; during that call the owner's
 * GetILFunctionBody (through its proxy) answers the body the previous owner set; after the
 * last owner, the final body, the union of the codegen flags and the composed
 * instrumented-code map are set once on the runtime's function control.
 *
 * Held-back requests: a RequestReJIT for a method that has not been compiled yet makes its
 * first compilation a ReJIT, and the runtime then never raises JITCompilationStarted for it.
 * When another live child monitors JIT compilation, such a request is held back (the method
 * is neither inlined nor taken precompiled meanwhile). At the method's first
 * JITCompilationStarted, after the JIT-time children, the held-back owners' chain runs and
 * its body becomes the method's IL (Info::SetILFunctionBody): the first call, on any thread,
 * runs the JIT-time rewrites and the owners'. The IL before the owners' rewrites is kept as
 * the method's base: later compositions (another owner's request, a revert) start from it,
 * and children read it through GetILFunctionBody outside a composition, as alone. (A ReJIT
 * requested from JITCompilationFinished instead would win for the compiling thread only: a
 * thread waiting for that compilation runs its code once.) Were the chain to set codegen
 * flags, which JIT time cannot take, a ReJIT follows, built from the base.
 * A held-back method offered precompiled (ReadyToRun) code is JIT-compiled instead. When the
 * method's first compilation is a ReJIT all the same (another owner's request went through,
 * e.g. one with inliners, which is never held back: its target may only run inlined), the
 * held-back owners join that composition.
 *
 * Threads: the records are guarded by one mutex, never held while a child runs. The chain
 * in progress lives on the stack of the thread running GetReJITParameters (found through a
 * thread-local pointer). Intermediate bodies are clrmux's own malloc'd copies; each is kept
 * until the method's next composition (a child may hold the pointer GetILFunctionBody gave
 * it past the callback). Bodies given to the runtime are copied by the runtime. */
#ifndef CLRMUX_COMPOSE_H
#define CLRMUX_COMPOSE_H

#include <stdatomic.h>
#include <stdint.h>

#include "clrmux/corprof.h"

struct clrmux_mux;
struct clrmux_child;
struct clrmux_compose;

/* Creates / frees the composition state of a mux. NULL on OOM. */
struct clrmux_compose *clrmux_compose_create(void);
void clrmux_compose_free(struct clrmux_compose *cs);

/* The children (bit per index) whose ReJIT request for the method is in force; 0 if none. */
uint64_t clrmux_compose_owners(struct clrmux_mux *mux, ModuleID module, mdMethodDef method);
/* Adds `child` as an owner of the method without asking the runtime (tests, builtins). */
void clrmux_compose_add_owner(struct clrmux_mux *mux, ModuleID module, mdMethodDef method, int child);

/* A child's RequestReJIT (inliner_flags < 0) or RequestReJITWithInliners(inliner_flags):
 * records the child as owner of each method and asks the runtime now or, for a method not
 * yet compiled while another child watches JIT compilation, at its first compilation.
 * Returns CORPROF_E_REJIT_NOT_ENABLED when the child's own mask lacks COR_PRF_ENABLE_REJIT,
 * E_INVALIDARG for NULL arrays, else the runtime's answer (S_OK when everything waits). */
HRESULT clrmux_compose_request_rejit(struct clrmux_mux *mux, struct clrmux_child *child, long inliner_flags,
                                     ULONG n, ModuleID *modules, mdMethodDef *methods);

/* A child's RequestRevert: removes the child's rewrite of each method. A method that other
 * owners still rewrite is re-JITted for them (its new version holds only their rewrites);
 * the runtime reverts a method only when no owner is left. status (may be NULL) receives
 * one HRESULT per method, as the runtime's RequestRevert fills it. */
HRESULT clrmux_compose_request_revert(struct clrmux_mux *mux, struct clrmux_child *child, ULONG n,
                                      ModuleID *modules, mdMethodDef *methods, HRESULT *status);

/* The mux's GetReJITParameters: runs the chain of owners (see above). A method with no owner
 * was re-JITted because it inlined a requested method: it goes to the children that asked
 * for inlining callbacks (RequestReJITWithInliners with COR_PRF_REJIT_INLINING_CALLBACKS),
 * who become its owners. */
void clrmux_compose_get_rejit_parameters(struct clrmux_mux *mux, ModuleID module, mdMethodDef method,
                                         ICorProfilerFunctionControl *runtime_fc);

/* The proxy's GetILFunctionBody: during a composition of (module, method) on this thread,
 * answers the previous link's body and returns 1; otherwise returns 0 (ask the runtime). */
int clrmux_compose_il_body(struct clrmux_mux *mux, struct clrmux_child *child, ModuleID module, mdMethodDef method,
                           LPCBYTE *header, ULONG *size);

/* The proxy's SetILFunctionBody (JIT time): records the child as a JIT-time writer. */
void clrmux_compose_note_jit_writer(struct clrmux_mux *mux, struct clrmux_child *child, ModuleID module,
                                    mdMethodDef method);

/* JIT events seen by the mux before routing them (cheap when nothing is held back):
 * started / finished mark the method compiled; finished makes its held-back requests.
 * clrmux_compose_cache_search answers 0 when precompiled code must be refused. */
void clrmux_compose_jit_started(struct clrmux_mux *mux, FunctionID function);
void clrmux_compose_jit_finished(struct clrmux_mux *mux, FunctionID function);
int clrmux_compose_cache_search(struct clrmux_mux *mux, FunctionID function);
/* 0 when `callee` must not be inlined: its ReJIT request is held back (the runtime does not
 * inline a method whose ReJIT was requested). */
int clrmux_compose_may_inline(struct clrmux_mux *mux, FunctionID callee);

/* The number of methods whose ReJIT request is held back (read without a lock: while it is 0
 * the JIT callbacks need no composition work and go straight to the children). Lives as long
 * as cs. */
const _Atomic int *clrmux_compose_pending(struct clrmux_compose *cs);

/* A child leaves (detach): its ownership and held-back requests are dropped. Methods it
 * rewrote keep their current code until another owner's request rebuilds them. */
void clrmux_compose_child_gone(struct clrmux_mux *mux, struct clrmux_child *child);

/* Composes two instrumented-code maps: `first` maps offsets of the original IL to offsets
 * of an intermediate body, `second` maps that body's offsets to the final body's. An
 * intermediate offset between two entries of `second` moves with the entry below it. Writes
 * nfirst entries to out (original -> final; fAccurate only when both steps were exact). */
void clrmux_compose_il_maps(const COR_IL_MAP *first, ULONG nfirst, const COR_IL_MAP *second, ULONG nsecond,
                            COR_IL_MAP *out);

#endif
