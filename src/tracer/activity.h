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
 * The tracer emits them only once DiagnosticSource is loaded in the process (no Activity can
 * exist before), never in System.Private.CoreLib or DiagnosticSource itself. */
#ifndef CLRMUX_TRACER_ACTIVITY_H
#define CLRMUX_TRACER_ACTIVITY_H

#include <stddef.h>

#include "clrmux/cor.h"

#define CLRMUX_DIAGNOSTICSOURCE "System.Diagnostics.DiagnosticSource"

/* Finds or defines the references above in the module of `emit`. Returns 0 with both
 * tokens, or -1 with the reason in why[whylen] (the HRESULT of the call that failed). */
int clrmux_activity_refs(IMetaDataEmit2 *emit, IMetaDataImport2 *imp, mdMemberRef *get_current, mdMemberRef *get_id,
                         char *why, size_t whylen);

/* Encodes a TypeDefOrRef token as a compressed signature integer (II.23.2.8) into out
 * (at least 4 bytes). Returns its length, or 0 if the token cannot be encoded. */
size_t clrmux_sig_typedef_or_ref(mdToken tok, unsigned char *out);

/* The module's AssemblyRef whose name is `name` (ASCII, case-insensitive), or 0. */
mdAssemblyRef clrmux_find_assembly_ref(IMetaDataAssemblyImport *ai, const char *name);

#endif
