/* The exception sequence recorder: a recorder (fake_common.h) that also writes, at Shutdown,
 * the order of the exception callbacks it receives, as the runtime's own exception test
 * profiler (dotnet/runtime src/tests/profiler/native/exceptionprofiler) checks it: one line
 * per callback, "ExceptionSearchFilterEnter: Class.Method", per thread. Only the threads whose
 * sequence names a method of a class starting with EXSEQ_PREFIX[_TAG] (default "Exc") are
 * written, each under a "# thread N" line, in the order they first threw. Its event mask
 * comes from RECORDER_MASK (COR_PRF_MONITOR_EXCEPTIONS is 0x40). */
#define COBJMACROS
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clrmux/cor.h"
#include "clrmux/corprof.h"

struct fake;
static void xs_dump(struct fake *f, FILE *o);
static void xs_init(struct fake *f);
#define FAKE_INIT_EXTRA(f) xs_init(f)
#define FAKE_SHUTDOWN_EXTRA(f, o) xs_dump(f, o)
#define FAKE_VTBL_EXTRA                                                                               \
    .ExceptionThrown = xs_ExceptionThrown, .ExceptionSearchFunctionEnter = xs_ExceptionSearchFunctionEnter, \
    .ExceptionSearchFunctionLeave = xs_ExceptionSearchFunctionLeave,                                  \
    .ExceptionSearchFilterEnter = xs_ExceptionSearchFilterEnter,                                      \
    .ExceptionSearchFilterLeave = xs_ExceptionSearchFilterLeave,                                      \
    .ExceptionSearchCatcherFound = xs_ExceptionSearchCatcherFound,                                    \
    .ExceptionUnwindFunctionEnter = xs_ExceptionUnwindFunctionEnter,                                  \
    .ExceptionUnwindFunctionLeave = xs_ExceptionUnwindFunctionLeave,                                  \
    .ExceptionUnwindFinallyEnter = xs_ExceptionUnwindFinallyEnter,                                    \
    .ExceptionUnwindFinallyLeave = xs_ExceptionUnwindFinallyLeave,                                    \
    .ExceptionCatcherEnter = xs_ExceptionCatcherEnter, .ExceptionCatcherLeave = xs_ExceptionCatcherLeave,

#define XS_THREADS 16
#define XS_TEXT (256 * 1024)

/* one thread's sequence */
struct xs_thread {
    pthread_t id;
    int used, wanted;
    size_t len;
    char text[XS_TEXT];
};
static struct xs_thread xs_threads[XS_THREADS];
static pthread_mutex_t xs_lock = PTHREAD_MUTEX_INITIALIZER;
static ICorProfilerInfo5 *xs_info;
static char xs_prefix[64] = "Exc";

static HRESULT STDMETHODCALLTYPE xs_ExceptionThrown(ICorProfilerCallback11 *This, ObjectID obj);
static HRESULT STDMETHODCALLTYPE xs_ExceptionSearchFunctionEnter(ICorProfilerCallback11 *This, FunctionID fid);
static HRESULT STDMETHODCALLTYPE xs_ExceptionSearchFunctionLeave(ICorProfilerCallback11 *This);
static HRESULT STDMETHODCALLTYPE xs_ExceptionSearchFilterEnter(ICorProfilerCallback11 *This, FunctionID fid);
static HRESULT STDMETHODCALLTYPE xs_ExceptionSearchFilterLeave(ICorProfilerCallback11 *This);
static HRESULT STDMETHODCALLTYPE xs_ExceptionSearchCatcherFound(ICorProfilerCallback11 *This, FunctionID fid);
static HRESULT STDMETHODCALLTYPE xs_ExceptionUnwindFunctionEnter(ICorProfilerCallback11 *This, FunctionID fid);
static HRESULT STDMETHODCALLTYPE xs_ExceptionUnwindFunctionLeave(ICorProfilerCallback11 *This);
static HRESULT STDMETHODCALLTYPE xs_ExceptionUnwindFinallyEnter(ICorProfilerCallback11 *This, FunctionID fid);
static HRESULT STDMETHODCALLTYPE xs_ExceptionUnwindFinallyLeave(ICorProfilerCallback11 *This);
static HRESULT STDMETHODCALLTYPE xs_ExceptionCatcherEnter(ICorProfilerCallback11 *This, FunctionID fid, ObjectID obj);
static HRESULT STDMETHODCALLTYPE xs_ExceptionCatcherLeave(ICorProfilerCallback11 *This);

#include "fake_common.h"

static void xs_init(struct fake *f)
{
    xs_info = f->info;
    const char *p = fk_env(f, "EXSEQ_PREFIX");
    if (p)
        snprintf(xs_prefix, sizeof xs_prefix, "%s", p);
}

/* "Class.Method" of fid (the class without its namespace), or "?" */
static void xs_name(FunctionID fid, char *out, size_t outsz)
{
    snprintf(out, outsz, "?");
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    IUnknown *unk = NULL;
    if (!xs_info || FAILED(ICorProfilerInfo5_GetFunctionInfo(xs_info, fid, &cls, &mod, &tok)) ||
        FAILED(ICorProfilerInfo5_GetModuleMetaData(xs_info, mod, 0 /* ofRead */, &IID_IMetaDataImport, &unk)) || !unk)
        return;
    IMetaDataImport *imp = (IMetaDataImport *)unk;
    WCHAR wm[256], wt[256];
    ULONG nm = 0, nt = 0;
    mdTypeDef td = 0;
    if (SUCCEEDED(IMetaDataImport_GetMethodProps(imp, tok, &td, wm, 256, &nm, NULL, NULL, NULL, NULL, NULL)) &&
        SUCCEEDED(IMetaDataImport_GetTypeDefProps(imp, td, wt, 256, &nt, NULL, NULL))) {
        char m[256], t[256];
        size_t i;
        for (i = 0; i < 255 && wm[i]; i++) m[i] = wm[i] < 128 ? (char)wm[i] : '?';
        m[i] = 0;
        for (i = 0; i < 255 && wt[i]; i++) t[i] = wt[i] < 128 ? (char)wt[i] : '?';
        t[i] = 0;
        const char *dot = strrchr(t, '.');
        snprintf(out, outsz, "%s.%s", dot ? dot + 1 : t, m);
    }
    IUnknown_Release(unk);
}

static void xs_add(const char *what, FunctionID fid)
{
    char line[600], name[520] = "";
    if (fid)
        xs_name(fid, name, sizeof name);
    int n = snprintf(line, sizeof line, "%s%s%s\n", what, fid ? ": " : "", name);
    pthread_t self = pthread_self();
    pthread_mutex_lock(&xs_lock);
    struct xs_thread *t = NULL;
    for (int i = 0; i < XS_THREADS && !t; i++)
        if (xs_threads[i].used && pthread_equal(xs_threads[i].id, self))
            t = &xs_threads[i];
    for (int i = 0; i < XS_THREADS && !t; i++)
        if (!xs_threads[i].used)
            t = &xs_threads[i], t->used = 1, t->id = self;
    if (t && t->len + (size_t)n < XS_TEXT) {
        memcpy(t->text + t->len, line, (size_t)n);
        t->len += (size_t)n;
        if (fid && strncmp(name, xs_prefix, strlen(xs_prefix)) == 0)
            t->wanted = 1;
    }
    pthread_mutex_unlock(&xs_lock);
}

static void xs_dump(struct fake *f, FILE *o)
{
    (void)f;
    pthread_mutex_lock(&xs_lock);
    for (int i = 0, k = 0; i < XS_THREADS; i++)
        if (xs_threads[i].used && xs_threads[i].wanted) {
            fprintf(o, "# thread %d\n", k++);
            fwrite(xs_threads[i].text, 1, xs_threads[i].len, o);
        }
    pthread_mutex_unlock(&xs_lock);
}

#define XS_CB0(N)                                                                  \
    static HRESULT STDMETHODCALLTYPE xs_##N(ICorProfilerCallback11 *This)         \
    {                                                                              \
        fk_hit(This, CB_##N);                                                      \
        xs_add(#N, 0);                                                             \
        return S_OK;                                                               \
    }
#define XS_CB1(N)                                                                  \
    static HRESULT STDMETHODCALLTYPE xs_##N(ICorProfilerCallback11 *This, FunctionID fid) \
    {                                                                              \
        fk_hit(This, CB_##N);                                                      \
        xs_add(#N, fid);                                                           \
        return S_OK;                                                               \
    }
static HRESULT STDMETHODCALLTYPE xs_ExceptionThrown(ICorProfilerCallback11 *This, ObjectID obj)
{
    (void)obj;
    fk_hit(This, CB_ExceptionThrown);
    xs_add("ExceptionThrown", 0);
    return S_OK;
}
XS_CB1(ExceptionSearchFunctionEnter)
XS_CB0(ExceptionSearchFunctionLeave)
XS_CB1(ExceptionSearchFilterEnter)
XS_CB0(ExceptionSearchFilterLeave)
XS_CB1(ExceptionSearchCatcherFound)
XS_CB1(ExceptionUnwindFunctionEnter)
XS_CB0(ExceptionUnwindFunctionLeave)
XS_CB1(ExceptionUnwindFinallyEnter)
XS_CB0(ExceptionUnwindFinallyLeave)
static HRESULT STDMETHODCALLTYPE xs_ExceptionCatcherEnter(ICorProfilerCallback11 *This, FunctionID fid, ObjectID obj)
{
    (void)obj;
    fk_hit(This, CB_ExceptionCatcherEnter);
    xs_add("ExceptionCatcherEnter", fid);
    return S_OK;
}
XS_CB0(ExceptionCatcherLeave)
