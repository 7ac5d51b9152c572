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
 * thread waiting for that compilation runs its code once.) Alone, the owners' request would
 * have made that first compilation a ReJIT: they get no JITCompilationStarted/Finished for
 * the method (nor for its later JIT compilations, e.g. tier 1) but ReJITCompilationStarted /
 * Finished with a made-up ReJIT ID, which their GetReJITIDs lists. Were the chain to set codegen
 * flags, which JIT time cannot take, a ReJIT follows, built from the base.
 * A held-back method offered precompiled (ReadyToRun) code is JIT-compiled instead. When the
 * method's first compilation is a ReJIT all the same (another owner's request went through,
 * e.g. one with inliners, which is never held back: its target may only run inlined), the
 * held-back owners join that composition.
 *
 * What each child sees ("as alone"): alone, a profiler sees a new version of a method only
 * when it asks for one. So each owner's last link of a method (the body it set, its codegen
 * flags and map, and a hash of the input it was given) is kept: a composition calls afresh
 * the owners whose own request it answers (rec->announce, and held-back owners joining);
 * an other owner whose input is byte-identical to last time gets its last link reused and is
 * not called; one whose input changed (an owner before it in file order joined or left) is
 * called again, GetReJITParameters only, logged ("called again, their input changed"): its
 * rewrite must be rebuilt on the new input, and nothing else could rebuild it. A version is
 * attributed, when it is composed, to the children whose request made it (its ReJIT ID,
 * asked of the runtime through GetReJITIDs, or the next unknown ID met); its
 * ReJITCompilationStarted / Finished and ReJITError reach only them, and each child's
 * GetReJITIDs lists only its own versions (compose_view.c). A rebuild nobody asked for (after
 * a revert) reaches nobody. An inliner re-JITted by the runtime reaches the children that
 * asked for inlining callbacks on a method it inlined (the JITInlining decisions clrmux saw;
 * every such child when none is known). Held-back owners see the method's JIT compilations
 * as ReJIT compilations of a version whose ReJIT ID clrmux makes up (see below).
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
/* How many methods each child owns a ReJIT of (a request not reverted), into counts[0..n)
 * by child index: the control channel's status. One pass over the records under the lock
 * (microseconds for thousands of methods). */
void clrmux_compose_owned_counts(struct clrmux_mux *mux, unsigned *counts, int n);

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

/* The proxy's SetILFunctionBody (JIT time): the runtime keeps the child's body as the
 * method's IL, except for a method composed at JIT time (held-back owners, above): the body
 * becomes the method's base (what children read through GetILFunctionBody outside a
 * composition) and the runtime gets it with the owners' rewrites composed on top (their last
 * links reused when their input is unchanged, else they are called again), so that a child
 * that sets the IL again at a later compilation (another generic instantiation, tier 1, a
 * collectible assembly's, after a revert) does not remove them. The body's size is read
 * from its ECMA-335 header; one clrmux cannot read is given to the runtime first and read
 * back. Returns the runtime's HRESULT; records the child as a JIT-time writer on success. */
HRESULT clrmux_compose_jit_set_body(struct clrmux_mux *mux, struct clrmux_child *child, ModuleID module,
                                    mdMethodDef method, LPCBYTE header);
/* Records the child as a JIT-time writer of the method. */
void clrmux_compose_note_jit_writer(struct clrmux_mux *mux, struct clrmux_child *child, ModuleID module,
                                    mdMethodDef method);

/* JIT events seen by the mux (cheap when nothing is held back or composed at JIT time).
 * clrmux_compose_jit_as_rejit, before routing JITCompilationStarted/Finished: the children
 * that must see this JIT compilation as a ReJIT compilation instead (held-back owners: alone,
 * their request made the method's first compilation a ReJIT); the mux does not route the JIT
 * callback to them, and *id receives the ReJIT ID they see (made up by clrmux, >=
 * CLRMUX_FAKE_REJITID_BASE; 0 when the set is empty).
 * clrmux_compose_jit_started, after the JIT-time children: runs the held-back owners' chain at
 * the method's first compilation, then raises ReJITCompilationStarted(fid, id) to `as_rejit`.
 * clrmux_compose_jit_finished: ReJITCompilationFinished to `as_rejit`, then makes any
 * held-back request still waiting. clrmux_compose_cache_search answers 0 when precompiled
 * code must be refused. */
uint64_t clrmux_compose_jit_as_rejit(struct clrmux_mux *mux, FunctionID function, ReJITID *id);
void clrmux_compose_jit_started(struct clrmux_mux *mux, FunctionID function, BOOL safe, uint64_t as_rejit, ReJITID id);
void clrmux_compose_jit_finished(struct clrmux_mux *mux, FunctionID function, HRESULT status, BOOL safe,
                                 uint64_t as_rejit, ReJITID id);
int clrmux_compose_cache_search(struct clrmux_mux *mux, FunctionID function);
/* 0 when `callee` must not be inlined: its ReJIT request is held back (the runtime does not
 * inline a method whose ReJIT was requested). */
int clrmux_compose_may_inline(struct clrmux_mux *mux, FunctionID callee);

/* Nonzero while the JIT callbacks need composition work (a ReJIT request held back, or
 * held-back owners who see a method's JIT compilations as ReJIT compilations); read without
 * a lock: while it is 0, clrmux_compose_jit_as_rejit answers 0 and clrmux_compose_jit_started /
 * finished do nothing. Lives as long as cs. */
const _Atomic int *clrmux_compose_pending(struct clrmux_compose *cs);

/* ReJIT IDs clrmux makes up for held-back owners' versions composed at JIT time (the
 * runtime's own IDs count up from 1). A child may pass one back (GetNativeCodeStartAddresses):
 * the code is then the method's default version, ReJIT ID 0 for the runtime. */
#define CLRMUX_FAKE_REJITID_BASE ((ReJITID)1 << 62)
static inline ReJITID clrmux_compose_runtime_rejitid(ReJITID id) { return id >= CLRMUX_FAKE_REJITID_BASE ? 0 : id; }

/* The children that see a ReJIT callback of (function, rejit_id) (ReJITCompilationStarted /
 * Finished): those whose own request made that version (or, for an inliner, whose request
 * with inlining callbacks made the runtime re-JIT it), as alone. A child another child's
 * request or revert rebuilt a method for does not see the rebuilt version. */
uint64_t clrmux_compose_rejit_audience(struct clrmux_mux *mux, FunctionID function, ReJITID rejit_id);
/* The children a ReJITError reaches: the requesters when the runtime raises it inside a
 * request clrmux makes for them, else those of the version last composed. */
uint64_t clrmux_compose_rejit_error_audience(struct clrmux_mux *mux, ModuleID module, mdMethodDef method);
/* The proxy's GetReJITIDs (ICorProfilerInfo4): the runtime's ReJIT IDs of the function that
 * `child` would see alone (the versions its own requests made, see above), plus the made-up
 * ID of a held-back version it owns; same contract as the runtime's (S_FALSE when
 * cReJitIds is too small, *pcReJitIds = the full count). */
HRESULT clrmux_compose_rejit_ids(struct clrmux_mux *mux, struct clrmux_child *child, FunctionID function,
                                 ULONG cReJitIds, ULONG *pcReJitIds, ReJITID *reJitIds);
/* The mux's JITInlining after the merged answer: records that `caller` inlined `callee` (when
 * inline is TRUE), so that an inliner re-JITted later reaches the children that asked for
 * inlining callbacks on a method it inlined. Bounded (1M edges); cheap. */
void clrmux_compose_note_inlining(struct clrmux_mux *mux, FunctionID caller, FunctionID callee);
/* Whether inlining is recorded (two or more children may ReJIT: only then can an inliner's
 * ReJIT callbacks have to choose); the mux's JITInlining then takes its full path. Updated by
 * clrmux_compose_masks_changed after a child's mask changes (under the mask lock). */
int clrmux_compose_tracks_inlining(struct clrmux_mux *mux);
void clrmux_compose_masks_changed(struct clrmux_mux *mux);

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
