/* One in-process EventPipe session for all children, each child its own view.
 *
 * A child's EventPipeStartSession (through its proxy) creates a view: the child's providers
 * with their keywords and levels, under a session id that clrmux makes up. clrmux owns the
 * runtime's session: per provider the OR of the views' keywords and the most verbose level
 * (and requestRundown if any view asked for it). A view that adds providers reaches the
 * runtime through EventPipeAddProviderToSession; one that needs more keywords or a more
 * verbose level for a provider already enabled makes clrmux start a new runtime session with
 * the new union and stop the old one (events raised in that overlap are delivered once: the
 * second delivery of the same event on the same thread is dropped while both run).
 * EventPipeEventDelivered reaches each view whose provider, keywords and level match the
 * event (keywords and level read from the event's metadata blob: event id, UTF-16 name,
 * keywords, version, level), once per matching view, as each of the child's own sessions
 * would deliver it alone. EventPipeStopSession and EventPipeAddProviderToSession act on the
 * child's view only; the runtime session stops when the last view does. */
#ifndef CLRMUX_EVENTPIPE_H
#define CLRMUX_EVENTPIPE_H

#include "clrmux/corprof.h"

struct clrmux_mux;
struct clrmux_child;

/* EventPipeStartSession for child c: S_OK and *out = the view's id; E_INVALIDARG (no
 * providers, NULL name or out); E_OUTOFMEMORY (more than 32 views or 16 providers in one);
 * E_NOTIMPL (runtime without ICorProfilerInfo12); or the runtime's HRESULT when it refuses
 * the session (nothing changes then). During the mux's Initialize the view is recorded and the
 * runtime session starts at its end (clrmux_ep_commit). */
HRESULT clrmux_ep_start(struct clrmux_mux *m, struct clrmux_child *c, UINT32 n,
                        const COR_PRF_EVENTPIPE_PROVIDER_CONFIG *cfg, BOOL rundown, EVENTPIPE_SESSION *out);
/* EventPipeAddProviderToSession on one of c's views: E_INVALIDARG for a view that is not c's. */
HRESULT clrmux_ep_add_provider(struct clrmux_mux *m, struct clrmux_child *c, EVENTPIPE_SESSION s,
                               COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg);
/* EventPipeStopSession of one of c's views: E_INVALIDARG for a view that is not c's. */
HRESULT clrmux_ep_stop(struct clrmux_mux *m, struct clrmux_child *c, EVENTPIPE_SESSION s);
/* Starts the runtime session for the views children created during the mux's Initialize
 * (call at its end); a refusal is logged and those views receive nothing. */
void clrmux_ep_commit(struct clrmux_mux *m);
/* Drops every view of c (a child whose Initialize failed). */
void clrmux_ep_drop_child(struct clrmux_mux *m, struct clrmux_child *c);
/* The mux's EventPipeEventDelivered: to each matching view's child. No lock, no allocation. */
void clrmux_ep_deliver(struct clrmux_mux *m, EVENTPIPE_PROVIDER provider, DWORD eventId, DWORD eventVersion,
                       ULONG cbMetadataBlob, LPCBYTE metadataBlob, ULONG cbEventData, LPCBYTE eventData,
                       LPCGUID pActivityId, LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames,
                       UINT_PTR *stackFrames);
/* Parses an EventPipe event metadata blob (event id u32, name UTF-16 NUL-terminated, keywords
 * u64, version u32, level u32, little-endian). 0 on success, -1 when the blob is too short. */
int clrmux_ep_parse_metadata(const BYTE *blob, ULONG n, UINT64 *keywords, UINT32 *level);
/* Frees the mux's EventPipe state (tests). */
void clrmux_ep_free(struct clrmux_mux *m);

#endif
