/* The calli signatures of the tracer's probes (ECMA-335 II.23.2.3 StandAloneMethodSig).
 *
 * The rewritten IL calls the probes (tracer/spans.h) through `calli` with unmanaged
 * signatures. Where the runtime supports it, the fast ones (the entry probe's fast path, the
 * exit probe on the normal path, the Activity join) carry the SuppressGCTransition calling
 * convention modifier, so that the JIT calls them directly, without switching the thread to
 * preemptive mode and back (no InlinedCallFrame, no GC poll):
 *     0x09 (IMAGE_CEE_CS_CALLCONV_UNMANAGED), param count,
 *     CMOD_OPT System.Runtime.CompilerServices.CallConvSuppressGCTransition, ret, params
 * (the modifier form C# emits for `delegate* unmanaged[SuppressGCTransition]<...>`; the
 * runtime reads the modifier by its namespace and name, .NET 6 and later). The modifier's
 * TypeRef is scoped to the module's AssemblyRef System.Runtime (or System.Private.CoreLib),
 * and to a new AssemblyRef System.Runtime when it has neither; in System.Private.CoreLib the TypeDef
 * itself is used. The other probes (the slow entry that allocates a thread's state, the exit
 * in the fault handler, the exception filter) keep a plain unmanaged cdecl signature (0x01)
 * with its GC transition. Without the modifier (runtime older than .NET 6, the loader.conf
 * key `suppress_gc_transition = false`, or a metadata error), the fast ones are plain too. */
#ifndef CLRMUX_TRACER_PROBESIG_H
#define CLRMUX_TRACER_PROBESIG_H

#include <stddef.h>

#include "clrmux/cor.h"

struct clrmux_probe_sigs {
    mdSignature enter_fast; /* int64(int32), SuppressGCTransition when `suppressed` */
    mdSignature exit_fast;  /* void(int64), likewise */
    mdSignature join;       /* void(native int), likewise */
    mdSignature enter;      /* int64(int32), with a GC transition */
    mdSignature exit;       /* void(int64), with a GC transition */
    int suppressed;         /* the fast signatures carry the modifier */
};

/* Gets the tokens (IMetaDataEmit::GetTokenFromSig) in the module of emit; with `suppress`,
 * the fast ones with the modifier if the TypeRef can be made (else plain, and the reason in
 * why[whylen]). Returns 0, or -1 when a plain signature cannot be had either (why tells). */
int clrmux_probe_sigs_get(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, int suppress, struct clrmux_probe_sigs *out,
                          char *why, size_t whylen);

/* The managed calli signatures of the agent's entry points (tracer/agent.h), called with the
 * managed calling convention (DEFAULT):
 *     async_enter    object(int64)
 *     async_restore  void(object)
 *     on_task        void(object, int64)
 *     on_value_task  object(object, int64)
 *     join_root      void() */
struct clrmux_agent_sigs {
    mdSignature async_enter, async_restore, on_task;
    mdSignature on_value_task; /* object(object, int64) */
    mdSignature join_root;     /* void() */
    mdSignature integ_enter;   /* void(object, object, object, object, object, object[], int64, int32) */
    mdSignature integ_exit;    /* void(object, int64, int32) */
};
/* The tokens in the module of emit. Returns 0, or -1 with why. */
int clrmux_agent_sigs_get(IMetaDataEmit2 *emit, struct clrmux_agent_sigs *out, char *why, size_t whylen);

/* The token of `static ExecutionContext System.Threading.ExecutionContext::Capture()` in the
 * module of emit (a MemberRef through an AssemblyRef to System.Private.CoreLib, defined when the
 * module has none: System.Runtime does not forward the type; in CoreLib, its MethodDef), for the
 * rewritten IL's inline join check (tracer/agent.h, empty_context). Returns 0 with *out, or -1
 * with why. */
int clrmux_ec_capture_ref(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, mdToken *out, char *why, size_t whylen);

#endif
