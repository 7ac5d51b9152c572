/* Metadata for joining a root span to the application's System.Diagnostics.Activity.
 *
 * The rewritten IL of a traced method calls, when its span is a root span (entry probe
 * returned slot 0), `Activity.Current` and, if it is set, its `Id` (W3C format
 * "00-<trace>-<span>-<flags>"), and hands the pinned string to clrmux_span_join
 * (tracer/spans.h). The module needs an AssemblyRef to System.Diagnostics.DiagnosticSource
 * (found, or defined with IMetaDataAssemblyEmit::DefineAssemblyRef: version 0.0.0.0 and the
 * framework's public key token cc7b13ffcd2ddd51, so any loaded version binds), a TypeRef to
 * System.Diagnostics.Activity and two MemberRefs (ECMA-335 II.22.25):
 *   class Activity Activity::get_Current()    DEFAULT, 0 params, CLASS TypeRef
 *   string Activity::get_Id()                 HASTHIS, 0 params, STRING
 * The tracer emits them only once the class Activity is initialized (its static constructor
 * has run: no Activity can be current before), never in System.Private.CoreLib or
 * DiagnosticSource itself. Reading Activity.Current earlier would run Activity's static
 * constructor on the traced thread at whatever moment: its first use of ArrayPool registers
 * ArrayPoolEventSource, which waits for EventListener's lock; a diagnostics tool's session
 * enable (dotnet-counters: MetricsEventSource's command, which loads DiagnosticSource) holds
 * that lock while it first uses ArrayPool, and waits for that class constructor: a deadlock
 * of the base library's own (issue 24) that the tracer would trigger. */
#ifndef CLRMUX_TRACER_ACTIVITY_H
#define CLRMUX_TRACER_ACTIVITY_H

#include <stddef.h>

#include "clrmux/cor.h"
#include "clrmux/corprof.h"

#define CLRMUX_DIAGNOSTICSOURCE "System.Diagnostics.DiagnosticSource"

/* Finds or defines the references above in the module of `emit`. Returns 0 with both
 * tokens, or -1 with the reason in why[whylen] (the HRESULT of the call that failed). */
int clrmux_activity_refs(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, mdMemberRef *get_current, mdMemberRef *get_id,
                         char *why, size_t whylen);

/* What the tracer needs to tell whether the class System.Diagnostics.Activity is initialized:
 * its module (DiagnosticSource), TypeDef, a static field in its statics (not a literal, RVA
 * data or [ThreadStatic]) and the AppDomain. */
struct clrmux_activity_class {
    ModuleID module;
    mdTypeDef type;
    mdFieldDef field;
    AppDomainID appdomain;
};
/* Fills *out from module `ds`'s metadata (metadata and module reads only: in
 * ModuleLoadFinished). Returns 0, or -1 (then no join: out->field 0). */
int clrmux_activity_find(ICorProfilerInfo3 *info, ModuleID ds, struct clrmux_activity_class *out);
/* 1 when class `cls` (Activity's ClassID, learnt from a JIT callback for one of its methods:
 * looking it up by token would load it) is initialized, its static constructor run, else 0.
 * One GetAppDomainStaticAddress, which loads and runs nothing; any thread. */
int clrmux_activity_initialized(ICorProfilerInfo3 *info, const struct clrmux_activity_class *a, ClassID cls);

/* Encodes a TypeDefOrRef token as a compressed signature integer (II.23.2.8) into out
 * (at least 4 bytes). Returns its length, or 0 if the token cannot be encoded. */
size_t clrmux_sig_typedef_or_ref(mdToken tok, unsigned char *out);

/* The module's AssemblyRef whose name is `name` (ASCII, case-insensitive), or 0. */
mdAssemblyRef clrmux_find_assembly_ref(IMetaDataAssemblyImport *ai, const char *name);

#endif
