/* A library whose DllGetClassObject misbehaves, for the loader's safety tests
 * (tests/unit/test_mux_hostile.c), chosen by the first field of the CLSID asked for:
 *   0xC1000001  returns S_OK without a class factory (*ppv stays NULL)
 *   0xC1000002  returns a class factory whose CreateInstance returns S_OK without an object
 *   else        CLASS_E_CLASSNOTAVAILABLE */
#define COBJMACROS
#include <stddef.h>

#include "clrmux/corprof.h"

#include "fake_export.h"

static HRESULT STDMETHODCALLTYPE cf_QueryInterface(IClassFactory *This, REFIID riid, void **ppv)
{
    *ppv = This;
    return S_OK;
}
static ULONG STDMETHODCALLTYPE cf_AddRef(IClassFactory *This) { return 1; }
static ULONG STDMETHODCALLTYPE cf_Release(IClassFactory *This) { return 1; }
static HRESULT STDMETHODCALLTYPE cf_CreateInstance(IClassFactory *This, IUnknown *outer, REFIID riid, void **ppv)
{
    *ppv = NULL;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE cf_LockServer(IClassFactory *This, BOOL lock) { return S_OK; }
static IClassFactoryVtbl k_cf_vtbl = {cf_QueryInterface, cf_AddRef, cf_Release, cf_CreateInstance, cf_LockServer};
static IClassFactory k_cf = {&k_cf_vtbl};

EXPORT HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void **ppv);
EXPORT HRESULT STDMETHODCALLTYPE DllGetClassObject(REFCLSID rclsid, REFIID riid, void **ppv)
{
    *ppv = NULL;
    switch (rclsid->Data1) {
    case 0xC1000001:
        return S_OK;
    case 0xC1000002:
        *ppv = &k_cf;
        return S_OK;
    default:
        return CLASS_E_CLASSNOTAVAILABLE;
    }
}
