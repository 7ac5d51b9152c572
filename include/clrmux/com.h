/* COM basics for the .NET profiling ABI on Linux/macOS/Windows, in C.
 *
 * Source of the ABI facts: the runtime's PAL (dotnet/runtime src/coreclr/pal/inc/pal.h,
 * pal_mstypes.h, rt/unknwn.h). On Linux WCHAR is 16-bit UTF-16 (char16_t, never wchar_t),
 * ULONG/DWORD/HRESULT/LONG are 32-bit, BOOL is int, and the profiling interfaces use the
 * platform's default calling convention (STDMETHODCALLTYPE is empty off Windows).
 *
 * Objects follow the MIDL C binding: `struct IFoo { const IFooVtbl *lpVtbl; }`, and the
 * call macros `IFoo_Method(This, ...)` are defined when COBJMACROS is defined. */
#ifndef CLRMUX_COM_H
#define CLRMUX_COM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef _WIN32
#define STDMETHODCALLTYPE __stdcall
#else
#define STDMETHODCALLTYPE
#endif
#define __stdcall_clrmux STDMETHODCALLTYPE

typedef int32_t HRESULT;
typedef uint32_t ULONG;
typedef int32_t LONG;
typedef uint32_t DWORD;
typedef uint16_t USHORT;
typedef uint16_t WORD;
typedef uint8_t BYTE;
typedef uint8_t UINT8;
typedef int BOOL;
typedef unsigned int UINT;
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef uint32_t ULONG32;
typedef int32_t LONG32;
typedef uint64_t ULONG64;
typedef uintptr_t UINT_PTR;
typedef size_t SIZE_T;
typedef void *PVOID;
typedef void *HANDLE;
/* 16-bit UTF-16 code unit: the runtime's WCHAR on every platform. */
typedef uint16_t WCHAR;
typedef WCHAR *LPWSTR;
typedef const WCHAR *LPCWSTR;

#ifndef TRUE
#define TRUE 1
#define FALSE 0
#endif

/* A COM GUID, laid out as in guiddef.h (16 bytes, little-endian first three fields). */
typedef struct _GUID {
    uint32_t Data1;
    uint16_t Data2;
    uint16_t Data3;
    uint8_t Data4[8];
} GUID;
typedef GUID IID;
typedef GUID CLSID;
typedef const GUID *REFGUID;
typedef const IID *REFIID;
typedef const CLSID *REFCLSID;
typedef const GUID *LPCGUID;

/* IsEqualGUID: 1 when the two GUIDs are byte-for-byte equal. */
static inline int IsEqualGUID(REFGUID a, REFGUID b) { return memcmp(a, b, sizeof(GUID)) == 0; }
#define IsEqualIID(a, b) IsEqualGUID((a), (b))

/* HRESULTs (winerror.h values). */
#define S_OK ((HRESULT)0)
#define S_FALSE ((HRESULT)1)
#define E_NOTIMPL ((HRESULT)0x80004001L)
#define E_NOINTERFACE ((HRESULT)0x80004002L)
#define E_POINTER ((HRESULT)0x80004003L)
#define E_ABORT ((HRESULT)0x80004004L)
#define E_FAIL ((HRESULT)0x80004005L)
#define E_UNEXPECTED ((HRESULT)0x8000FFFFL)
#define E_ACCESSDENIED ((HRESULT)0x80070005L)
#define E_OUTOFMEMORY ((HRESULT)0x8007000EL)
#define E_INVALIDARG ((HRESULT)0x80070057L)
#define CLASS_E_NOAGGREGATION ((HRESULT)0x80040110L)
#define CLASS_E_CLASSNOTAVAILABLE ((HRESULT)0x80040111L)
#define HRESULT_FROM_WIN32_ERROR_NOT_SUPPORTED ((HRESULT)0x80070032L)
#define SUCCEEDED(hr) (((HRESULT)(hr)) >= 0)
#define FAILED(hr) (((HRESULT)(hr)) < 0)

/* Expands a parenthesised list without its parentheses: CLRMUX_EXPAND (, a, b) -> , a, b */
#define CLRMUX_EXPAND(...) __VA_ARGS__

/* IUnknown (unknwn.h), IID {00000000-0000-0000-C000-000000000046}. */
#define CLRMUX_IID_IUnknown {0x00000000, 0x0000, 0x0000, {0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}}
#define CLRMUX_METHODS_IUnknown(X, I) \
    X(I, IUnknown, HRESULT, QueryInterface, (, REFIID riid, void **ppvObject), (, riid, ppvObject), (NONE, 0, 0)) \
    X(I, IUnknown, ULONG, AddRef, (), (), (NONE, 0, 0)) \
    X(I, IUnknown, ULONG, Release, (), (), (NONE, 0, 0))
#define CLRMUX_ALL_IUnknown(X, I) CLRMUX_METHODS_IUnknown(X, I)

/* One vtable slot: ret (*Name)(I *This, params...) */
#define CLRMUX_VTBL_SLOT(I, D, R, N, P, A, ROUTE) R (STDMETHODCALLTYPE *N)(I *This CLRMUX_EXPAND P);

/* Declares `typedef struct I I;`, `I##Vtbl` (every method of I and its bases, in vtable
 * order) and `static const IID IID_##I`, as MIDL's C binding does. */
#define CLRMUX_DECLARE_INTERFACE(I) \
    typedef struct I I; \
    typedef struct I##Vtbl { CLRMUX_ALL_##I(CLRMUX_VTBL_SLOT, I) } I##Vtbl; \
    struct I { const struct I##Vtbl *lpVtbl; }; \
    static const IID IID_##I = CLRMUX_IID_##I;

CLRMUX_DECLARE_INTERFACE(IUnknown)

/* IClassFactory (unknwn.h), IID {00000001-0000-0000-C000-000000000046}. */
#define CLRMUX_IID_IClassFactory {0x00000001, 0x0000, 0x0000, {0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}}
#define CLRMUX_METHODS_IClassFactory(X, I) \
    X(I, IClassFactory, HRESULT, CreateInstance, (, IUnknown *pUnkOuter, REFIID riid, void **ppvObject), (, pUnkOuter, riid, ppvObject), (NONE, 0, 0)) \
    X(I, IClassFactory, HRESULT, LockServer, (, BOOL fLock), (, fLock), (NONE, 0, 0))
#define CLRMUX_ALL_IClassFactory(X, I) CLRMUX_ALL_IUnknown(X, I) CLRMUX_METHODS_IClassFactory(X, I)
CLRMUX_DECLARE_INTERFACE(IClassFactory)

/* Opaque COM interfaces that appear in signatures but that clrmux never calls. */
typedef struct IStream IStream;
typedef struct IMapToken IMapToken;

#ifdef COBJMACROS
#define IUnknown_QueryInterface(This, riid, ppv) ((This)->lpVtbl->QueryInterface(This, riid, ppv))
#define IUnknown_AddRef(This) ((This)->lpVtbl->AddRef(This))
#define IUnknown_Release(This) ((This)->lpVtbl->Release(This))
#define IClassFactory_QueryInterface(This, riid, ppv) ((This)->lpVtbl->QueryInterface(This, riid, ppv))
#define IClassFactory_AddRef(This) ((This)->lpVtbl->AddRef(This))
#define IClassFactory_Release(This) ((This)->lpVtbl->Release(This))
#define IClassFactory_CreateInstance(This, outer, riid, ppv) ((This)->lpVtbl->CreateInstance(This, outer, riid, ppv))
#define IClassFactory_LockServer(This, lock) ((This)->lpVtbl->LockServer(This, lock))
#endif

/* DllGetClassObject, the one export the runtime looks up in a profiler library. */
typedef HRESULT (STDMETHODCALLTYPE *clrmux_DllGetClassObject_fn)(REFCLSID rclsid, REFIID riid, void **ppv);

/* A GUID of the form {XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}: 38 characters plus NUL. */
#define CLRMUX_GUID_STRLEN 39

#endif /* CLRMUX_COM_H */
