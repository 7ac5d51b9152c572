/* The library's two COM exports. The runtime calls DllGetClassObject(CLSID_clrmux,
 * IID_IClassFactory) and then CreateInstance(NULL, IID_ICorProfilerCallback2), which creates
 * the mux (src/loader) with the control channel (src/control) wired in. src/entry is the top
 * room of libclrmux.so: the only one that knows both, so that each of them calls only
 * downward (docs/architecture.md). */
#include "clrmux/clrmux.h"
#include "common/log.h"
#include "control/ctl_server.h"
#include "loader/mux.h"
#include "loader/child_base.h"

static HRESULT STDMETHODCALLTYPE cf_QueryInterface(IClassFactory *This, REFIID riid, void **ppv)
{
    if (!ppv)
        return E_POINTER;
    if (IsEqualIID(riid, &IID_IUnknown) || IsEqualIID(riid, &IID_IClassFactory)) {
        *ppv = This;
        return S_OK;
    }
    *ppv = NULL;
    return E_NOINTERFACE;
}
static ULONG STDMETHODCALLTYPE cf_AddRef(IClassFactory *This) { (void)This; return 1; }
static ULONG STDMETHODCALLTYPE cf_Release(IClassFactory *This) { (void)This; return 1; }

static HRESULT STDMETHODCALLTYPE cf_CreateInstance(IClassFactory *This, IUnknown *outer, REFIID riid, void **ppv)
{
    (void)This;
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (outer)
        return CLASS_E_NOAGGREGATION;
    if (!clrmux_is_callback_iid(riid))
        return E_NOINTERFACE; /* before creating a mux, which is never freed */
    struct clrmux_mux *m = clrmux_mux_create(&clrmux_control_channel);
    if (!m)
        return E_OUTOFMEMORY;
    HRESULT hr = m->iface.lpVtbl->QueryInterface(&m->iface, riid, ppv);
    m->iface.lpVtbl->Release(&m->iface);
    return hr;
}

static HRESULT STDMETHODCALLTYPE cf_LockServer(IClassFactory *This, BOOL lock)
{
    (void)This, (void)lock;
    return S_OK;
}

static const IClassFactoryVtbl cf_vtbl = {cf_QueryInterface, cf_AddRef, cf_Release, cf_CreateInstance, cf_LockServer};
static IClassFactory cf = {&cf_vtbl};

CLRMUX_EXPORT HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void **ppv)
{
    static const CLSID clsid = CLSID_clrmux;
    if (!ppv)
        return E_POINTER;
    *ppv = NULL;
    if (!IsEqualGUID(rclsid, &clsid))
        return CLASS_E_CLASSNOTAVAILABLE;
    return cf.lpVtbl->QueryInterface(&cf, riid, ppv);
}

CLRMUX_EXPORT HRESULT STDMETHODCALLTYPE DllCanUnloadNow(void)
{
    return S_FALSE; /* profilers are never unloaded */
}
