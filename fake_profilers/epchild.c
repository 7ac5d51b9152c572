/* A child with an in-process EventPipe session, for clrmux's EventPipe tests: in Initialize it
 * starts one session with one provider; it counts the events delivered by event id. Besides
 * the recorder's variables (RECORDER_MASK_HIGH must include COR_PRF_HIGH_MONITOR_EVENT_PIPE),
 * with the CLSID suffix:
 *   EP_PROVIDER  provider name (default Microsoft-Windows-DotNETRuntime)
 *   EP_KEYWORDS  keywords, hex (default 0)
 *   EP_LEVEL     level 0..5 (default 4, informational)
 *   EP_SESSIONS  number of identical sessions to start (default 1)
 * At Shutdown, appended to RECORDER_OUT: "ep ID COUNT" per event id seen and
 * "# ep-start hr=..." per session. One instance per library (counts are per library). */
#define COBJMACROS
#include <stdint.h>
#include <stdio.h>

#include "clrmux/corprof.h"
struct fake;
static void ep_init(struct fake *f);
static void ep_dump(struct fake *f, FILE *o);
#define FAKE_INIT_EXTRA(f) ep_init(f)
#define FAKE_SHUTDOWN_EXTRA(f, o) ep_dump(f, o)
#define FAKE_EVENTPIPE_DELIVERED ep_delivered
static HRESULT STDMETHODCALLTYPE ep_delivered(ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider, DWORD eventId,
                                              DWORD eventVersion, ULONG cbMetadataBlob, LPCBYTE metadataBlob,
                                              ULONG cbEventData, LPCBYTE eventData, LPCGUID pActivityId,
                                              LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames,
                                              UINT_PTR *stackFrames);
#include "fake_common.h"

#define EP_IDS 1024
static _Atomic unsigned long ep_counts[EP_IDS];

static HRESULT STDMETHODCALLTYPE ep_delivered(ICorProfilerCallback11 *This, EVENTPIPE_PROVIDER provider, DWORD eventId,
                                              DWORD eventVersion, ULONG cbMetadataBlob, LPCBYTE metadataBlob,
                                              ULONG cbEventData, LPCBYTE eventData, LPCGUID pActivityId,
                                              LPCGUID pRelatedActivityId, ThreadID eventThread, ULONG numStackFrames,
                                              UINT_PTR *stackFrames)
{
    fk_hit(This, CB_EventPipeEventDelivered);
    atomic_fetch_add(&ep_counts[eventId < EP_IDS ? eventId : EP_IDS - 1], 1);
    return S_OK;
}

static void ep_init(struct fake *f)
{
    const char *v;
    const char *prov = (v = fk_env(f, "EP_PROVIDER")) ? v : "Microsoft-Windows-DotNETRuntime";
    WCHAR name[128];
    size_t i = 0;
    for (; prov[i] && i + 1 < 128; i++)
        name[i] = (WCHAR)prov[i];
    name[i] = 0;
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {name, (v = fk_env(f, "EP_KEYWORDS")) ? strtoull(v, NULL, 16) : 0,
                                             (v = fk_env(f, "EP_LEVEL")) ? (UINT32)atoi(v) : 4, NULL};
    int n = (v = fk_env(f, "EP_SESSIONS")) ? atoi(v) : 1;
    ICorProfilerInfo12 *info12 = NULL;
    if (FAILED(IUnknown_QueryInterface((IUnknown *)f->info, &IID_ICorProfilerInfo12, (void **)&info12))) {
        fk_fact(f, "# ep-start hr=0x%08X%.0u", (DWORD)E_NOINTERFACE, 0);
        return;
    }
    for (int k = 0; k < n; k++) {
        EVENTPIPE_SESSION s = 0;
        HRESULT hr = ICorProfilerInfo12_EventPipeStartSession(info12, 1, &cfg, FALSE, &s);
        fk_fact(f, "# ep-start hr=0x%08X%.0u", (DWORD)hr, 0);
    }
}

static void ep_dump(struct fake *f, FILE *o)
{
    (void)f;
    for (int i = 0; i < EP_IDS; i++)
        if (atomic_load(&ep_counts[i]))
            fprintf(o, "ep %d %lu\n", i, atomic_load(&ep_counts[i]));
}
