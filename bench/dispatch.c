/* bench/dispatch.c: the cost of one callback dispatched through clrmux, measured in-process.
 *
 * The harness plays the runtime: it dlopens build/libclrmux.so, creates the profiler as the
 * runtime does (DllGetClassObject -> IClassFactory::CreateInstance) and Initializes it with a
 * minimal fake ICorProfilerInfo15 (QueryInterface answers Info1..15, SetEventMask(2) and
 * GetRuntimeInformation (.NET 10) work, everything else is E_NOTIMPL). CLRMUX_CONFIG points
 * at a generated loader.conf with k copies of build/fake/libnoop.so (distinct CLSIDs, each
 * asking for the callback under test through RECORDER_MASK_<TAG>). The same callback is then
 * called N times through clrmux and N times directly on one libnoop.so object that the
 * harness created and Initialized itself: the ratio is clrmux's dispatch overhead.
 *
 *   dispatch [options] table                        the ns/call table (default)
 *   dispatch [options] one CONFIG thread|inline N   one configuration, N calls (for callgrind:
 *                                                   the calls are in loop_thread / loop_inline)
 *   CONFIG: direct | k1 | k1p | k4s1 | k4s1p | k8 | k8p | k2r   (see `configs` below: kK = K
 *           children, sS = only S of them ask for the callback, p = the subscribed ones also ask
 *           for an immutable flag, so they can never detach and clrmux may call a sole one
 *           directly; k2r = 2 children, 1 subscribed, both with COR_PRF_ENABLE_REJIT: clrmux then
 *           records each inlining for inliner ReJIT callbacks, so JITInlining takes the long way
 *           (compose's work, as beside a ReJIT-ing tracer); ThreadCreated stays direct)
 *   dispatch [options] check                        routing sanity check only
 * options: -n MILLIONS (calls per measurement, default 10)   -r ROUNDS (default 5)
 *          --lib PATH (build/libclrmux.so)   --fake-dir DIR (build/fake)   --summary FILE
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clrmux/corprof.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static const CLSID clsid_clrmux = {0xEE712634, 0x5BBB, 0x4C28, {0x8E, 0x6A, 0x45, 0x18, 0x0A, 0x97, 0xAD, 0x0B}};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dispatch: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

/* ---- the fake runtime: ICorProfilerInfo15 ------------------------------------------------ */

struct fake_info {
    ICorProfilerInfo15 iface;
    DWORD low, high; /* the last mask set on the "runtime" */
    int nset;
};

/* Every Info method: E_NOTIMPL. Generated from the X-macro lists, as fake_common.h does. */
#define FI_FN(I, D, R, N, P, A, ROUTE) \
    __attribute__((unused)) static R STDMETHODCALLTYPE fig_##N(ICorProfilerInfo15 *This CLRMUX_EXPAND P) { return E_NOTIMPL; }
CLRMUX_METHODS_ICorProfilerInfo(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo2(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo3(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo4(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo5(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo6(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo7(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo8(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo9(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo10(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo11(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo12(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo13(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo14(FI_FN, x)
CLRMUX_METHODS_ICorProfilerInfo15(FI_FN, x)

static HRESULT STDMETHODCALLTYPE fi_QueryInterface(ICorProfilerInfo15 *This, REFIID riid, void **ppv)
{
    static const IID *const iids[] = {&IID_IUnknown, &IID_ICorProfilerInfo, &IID_ICorProfilerInfo2,
        &IID_ICorProfilerInfo3, &IID_ICorProfilerInfo4, &IID_ICorProfilerInfo5, &IID_ICorProfilerInfo6,
        &IID_ICorProfilerInfo7, &IID_ICorProfilerInfo8, &IID_ICorProfilerInfo9, &IID_ICorProfilerInfo10,
        &IID_ICorProfilerInfo11, &IID_ICorProfilerInfo12, &IID_ICorProfilerInfo13, &IID_ICorProfilerInfo14,
        &IID_ICorProfilerInfo15};
    if (!ppv)
        return E_POINTER;
    for (size_t i = 0; i < sizeof iids / sizeof iids[0]; i++)
        if (IsEqualIID(riid, iids[i])) {
            *ppv = This;
            return S_OK;
        }
    *ppv = NULL;
    return E_NOINTERFACE;
}
static ULONG STDMETHODCALLTYPE fi_AddRef(ICorProfilerInfo15 *This) { return 2; }
static ULONG STDMETHODCALLTYPE fi_Release(ICorProfilerInfo15 *This) { return 1; }

static HRESULT STDMETHODCALLTYPE fi_SetEventMask2(ICorProfilerInfo15 *This, DWORD low, DWORD high)
{
    struct fake_info *fi = (struct fake_info *)This;
    fi->low = low;
    fi->high = high;
    fi->nset++;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE fi_SetEventMask(ICorProfilerInfo15 *This, DWORD low)
{
    return fi_SetEventMask2(This, low, 0);
}

static HRESULT STDMETHODCALLTYPE fi_GetRuntimeInformation(ICorProfilerInfo15 *This, USHORT *pClrInstanceId,
    COR_PRF_RUNTIME_TYPE *pRuntimeType, USHORT *pMajor, USHORT *pMinor, USHORT *pBuild, USHORT *pQFE,
    ULONG cchVersionString, ULONG *pcchVersionString, WCHAR *szVersionString)
{
    static const char ver[] = "10.0.0";
    if (pClrInstanceId) *pClrInstanceId = 0;
    if (pRuntimeType) *pRuntimeType = COR_PRF_CORE_CLR;
    if (pMajor) *pMajor = 10;
    if (pMinor) *pMinor = 0;
    if (pBuild) *pBuild = 0;
    if (pQFE) *pQFE = 0;
    if (pcchVersionString) *pcchVersionString = sizeof ver;
    if (szVersionString && cchVersionString >= sizeof ver)
        for (size_t i = 0; i < sizeof ver; i++)
            szVersionString[i] = (WCHAR)ver[i];
    return S_OK;
}

#define fig_QueryInterface fi_QueryInterface
#define fig_AddRef fi_AddRef
#define fig_Release fi_Release
#define FI_VT(I, D, R, N, P, A, ROUTE) .N = fig_##N,
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const ICorProfilerInfo15Vtbl fi_vtbl = {
    CLRMUX_ALL_ICorProfilerInfo15(FI_VT, x)
    .SetEventMask = fi_SetEventMask,
    .SetEventMask2 = fi_SetEventMask2,
    .GetRuntimeInformation = fi_GetRuntimeInformation,
};
#pragma GCC diagnostic pop

static struct fake_info *fake_info_new(void)
{
    struct fake_info *fi = calloc(1, sizeof *fi);
    if (!fi)
        die("out of memory");
    fi->iface.lpVtbl = &fi_vtbl;
    return fi;
}

/* ---- loading a profiler as the runtime does --------------------------------------------- */

static char lib_path[PATH_MAX] = "build/libclrmux.so";
static char fake_dir[PATH_MAX] = "build/fake";
static char tmp_dir[PATH_MAX - 64]; /* room for the file names put in it */

static ICorProfilerCallback11 *create_profiler(const char *path, const CLSID *clsid)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        die("cannot load %s", dlerror());
    clrmux_DllGetClassObject_fn get = (clrmux_DllGetClassObject_fn)dlsym(h, "DllGetClassObject");
    if (!get)
        die("%s exports no DllGetClassObject", path);
    IClassFactory *f = NULL;
    HRESULT hr = get(clsid, &IID_IClassFactory, (void **)&f);
    if (FAILED(hr) || !f)
        die("DllGetClassObject of %s failed: 0x%08X", path, (unsigned)hr);
    ICorProfilerCallback11 *cb = NULL;
    hr = f->lpVtbl->CreateInstance(f, NULL, &IID_ICorProfilerCallback11, (void **)&cb);
    if (FAILED(hr) || !cb)
        die("CreateInstance(IID_ICorProfilerCallback11) of %s failed: 0x%08X", path, (unsigned)hr);
    f->lpVtbl->Release(f);
    return cb;
}

static CLSID child_clsid(int j)
{
    CLSID c = {0xB0000001u + (unsigned)j, 0, 0, {0, 0, 0, 0, 0, 0, 0, (uint8_t)(j + 1)}};
    return c;
}
static const CLSID direct_clsid = {0xD0000001u, 0, 0, {0, 0, 0, 0, 0, 0, 0, 1}};

static void set_child_env(const char *var, const CLSID *c, const char *value)
{
    char key[64];
    snprintf(key, sizeof key, "%s_%08X", var, (unsigned)c->Data1);
    if (value)
        setenv(key, value, 1);
    else
        unsetenv(key);
}

static void check_mask(struct fake_info *fi, DWORD want, const char *what)
{
    if ((fi->low & want) != want)
        die("%s: the runtime's event mask lacks the callback's bit (mask low=0x%08X)", what, (unsigned)fi->low);
}

/* clrmux with k copies of `child` (a file in fake_dir); the first `subscribed` ask for `mask`,
 * the others for nothing; every one also for `all`. outs: if not NULL, RECORDER_OUT per child
 * (for the check). */
static ICorProfilerCallback11 *make_clrmux(int k, int subscribed, const char *child, DWORD mask, DWORD all,
                                           char outs[][PATH_MAX])
{
    static int serial;
    char conf[PATH_MAX];
    snprintf(conf, sizeof conf, "%s/loader-%d.conf", tmp_dir, serial++);
    FILE *f = fopen(conf, "w");
    if (!f)
        die("cannot write %s: %s", conf, strerror(errno));
    fprintf(f, "[loader]\nlog_level = error\n");
    for (int j = 0; j < k; j++) {
        CLSID c = child_clsid(j);
        fprintf(f, "[child c%d]\npath = %s/%s\nclsid = {%08X-0000-0000-0000-0000000000%02X}\n", j + 1, fake_dir, child,
                (unsigned)c.Data1, (unsigned)c.Data4[7]);
        char m[16];
        snprintf(m, sizeof m, "%X", (j < subscribed ? (unsigned)mask : 0u) | (unsigned)all);
        set_child_env("RECORDER_MASK", &c, m);
        set_child_env("RECORDER_OUT", &c, outs ? outs[j] : NULL);
    }
    fclose(f);
    setenv("CLRMUX_CONFIG", conf, 1);
    ICorProfilerCallback11 *mux = create_profiler(lib_path, &clsid_clrmux);
    struct fake_info *fi = fake_info_new();
    HRESULT hr = mux->lpVtbl->Initialize(mux, (IUnknown *)&fi->iface);
    if (hr != S_OK)
        die("clrmux Initialize with %s failed: 0x%08X", conf, (unsigned)hr);
    if (subscribed)
        check_mask(fi, mask, "clrmux");
    /* clrmux registers for membarrier(2) on a thread of its own (0.1-6 ms); until then a child
     * that may detach goes the long way (a fenced count): measure the steady state */
    if (!getenv("BENCH_DISPATCH_AT_ONCE")) { /* set: call at once, as the runtime does */
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return mux;
}

static ICorProfilerCallback11 *make_direct(DWORD mask)
{
    char path[PATH_MAX + 16], m[16];
    snprintf(path, sizeof path, "%s/libnoop.so", fake_dir);
    snprintf(m, sizeof m, "%X", (unsigned)mask);
    set_child_env("RECORDER_MASK", &direct_clsid, m);
    ICorProfilerCallback11 *cb = create_profiler(path, &direct_clsid);
    struct fake_info *fi = fake_info_new();
    HRESULT hr = cb->lpVtbl->Initialize(cb, (IUnknown *)&fi->iface);
    if (hr != S_OK)
        die("libnoop.so Initialize failed: 0x%08X", (unsigned)hr);
    check_mask(fi, mask, "direct");
    return cb;
}

/* An immutable flag (in COR_PRF_MONITOR_IMMUTABLE) that allocation profilers set: a child whose
 * mask holds one can never detach (the runtime would refuse it alone), so clrmux needs no
 * evacuation counting around its calls. */
#define PINNED_FLAG ((DWORD)COR_PRF_ENABLE_OBJECT_ALLOCATED)

/* The configurations, in table order. */
struct config {
    const char *key, *label;
    int k, subscribed; /* k = 0: direct */
    int pinned;
    DWORD all; /* flags every child asks for */
};
static const struct config configs[] = {
    {"direct", "direct (1 child, no clrmux)", 0, 0, 0, 0},
    {"k1", "clrmux k=1", 1, 1, 0, 0},
    {"k1p", "clrmux k=1, never detaches", 1, 1, 1, 0},
    {"k2", "clrmux k=2", 2, 2, 0, 0},
    {"k4", "clrmux k=4", 4, 4, 0, 0},
    {"k4s1", "clrmux k=4, 1 subscribed", 4, 1, 0, 0},
    {"k4s1p", "clrmux k=4, 1 subscr., never det.", 4, 1, 1, 0},
    {"k8", "clrmux k=8", 8, 8, 0, 0},
    {"k8p", "clrmux k=8, never detach", 8, 8, 1, 0},
    {"k2r", "clrmux k=2 s1, both ENABLE_REJIT", 2, 1, 0, COR_PRF_ENABLE_REJIT},
};
enum { NCONF = sizeof configs / sizeof configs[0] };

static ICorProfilerCallback11 *make_config(const struct config *c, DWORD mask)
{
    if (c->k == 0)
        return make_direct(mask);
    return make_clrmux(c->k, c->subscribed, "libnoop.so", mask | (c->pinned ? PINNED_FLAG : 0), c->all, NULL);
}

/* ---- the measured loops (callgrind: --toggle-collect=loop_*) ----------------------------- */

__attribute__((noinline, noclone)) void loop_thread(ICorProfilerCallback11 *cb, unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        cb->lpVtbl->ThreadCreated(cb, (ThreadID)(i + 1));
}

__attribute__((noinline, noclone)) BOOL loop_inline(ICorProfilerCallback11 *cb, unsigned long n)
{
    BOOL all = TRUE;
    for (unsigned long i = 0; i < n; i++) {
        BOOL inl = TRUE;
        cb->lpVtbl->JITInlining(cb, (FunctionID)(i + 1), (FunctionID)(i + 2), &inl);
        all &= inl;
    }
    return all;
}

static volatile BOOL sink;

static void run(ICorProfilerCallback11 *cb, int inl, unsigned long n)
{
    if (inl)
        sink = loop_inline(cb, n);
    else
        loop_thread(cb, n);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double ns_per_call(ICorProfilerCallback11 *cb, int inl, unsigned long n)
{
    double t0 = now_ns();
    run(cb, inl, n);
    return (now_ns() - t0) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- routing sanity check: librecorder children count what clrmux delivered ------------- */

static unsigned long count_in(const char *file, const char *name)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return (unsigned long)-1;
    char line[256], n[128];
    unsigned long c, found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %lu", n, &c) == 2 && strcmp(n, name) == 0)
            found = c;
    fclose(f);
    return found;
}

static void check(void)
{
    enum { K = 3, CALLS = 1000 };
    char outs[K][PATH_MAX];
    for (int j = 0; j < K; j++)
        snprintf(outs[j], sizeof outs[j], "%s/check-%d.rec", tmp_dir, j);
    /* children 1 and 2 ask for threads + JIT; child 3 for nothing */
    ICorProfilerCallback11 *mux = make_clrmux(K, 2, "librecorder.so", COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_JIT_COMPILATION, 0, outs);
    run(mux, 0, CALLS);
    run(mux, 1, CALLS);
    mux->lpVtbl->Shutdown(mux);
    for (int j = 0; j < K; j++) {
        unsigned long want = j < 2 ? CALLS : 0;
        if (count_in(outs[j], "ThreadCreated") != want || count_in(outs[j], "JITInlining") != want)
            die("check failed: child %s did not receive exactly %lu ThreadCreated/JITInlining calls", outs[j], want);
    }
    printf("check: ok (through clrmux, 2 subscribed librecorder children each received %d ThreadCreated and %d "
           "JITInlining; an unsubscribed one received none)\n", CALLS, CALLS);
}

/* ---- main ----------------------------------------------------------------------------------- */

static void cleanup(void)
{
    char cmd[PATH_MAX + 16];
    if (tmp_dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "dispatch: could not remove %s\n", tmp_dir);
    }
}

static void absolutise(char *p)
{
    char r[PATH_MAX];
    if (!realpath(p, r))
        die("%s: not found (run `make all` first)", p);
    snprintf(p, PATH_MAX, "%s", r);
}

static void usage(void)
{
    fprintf(stderr, "usage: dispatch [-n MILLIONS] [-r ROUNDS] [--lib PATH] [--fake-dir DIR] [--summary FILE]\n"
                    "                [table | check | one CONFIG thread|inline N]\n"
                    "CONFIG: direct k1 k1p k2 k4 k4s1 k4s1p k8 k8p k2r\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double millions = 10;
    int rounds = 5;
    const char *summary = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) millions = atof(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lib") && i + 1 < argc) snprintf(lib_path, sizeof lib_path, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--fake-dir") && i + 1 < argc) snprintf(fake_dir, sizeof fake_dir, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--summary") && i + 1 < argc) summary = argv[++i];
        else usage();
    }
    const char *mode = i < argc ? argv[i++] : "table";
    if (millions <= 0 || rounds < 1)
        usage();
    absolutise(lib_path);
    absolutise(fake_dir);
    snprintf(tmp_dir, sizeof tmp_dir, "%s/clrmux-bench.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir))
        die("mkdtemp %s: %s", tmp_dir, strerror(errno));
    atexit(cleanup);
    unsetenv("RECORDER_MASK");
    unsetenv("RECORDER_MASK_HIGH");
    unsetenv("RECORDER_OUT");
    unsetenv("RECORDER_NO_INLINE");
    unsetenv("CLRMUX_LOG_FILE");
    setenv("CLRMUX_LOG_LEVEL", "error", 1);

    const DWORD mask = COR_PRF_MONITOR_THREADS | COR_PRF_MONITOR_JIT_COMPILATION;

    if (!strcmp(mode, "one")) {
        if (argc - i != 3)
            usage();
        const char *which = argv[i], *cbname = argv[i + 1];
        unsigned long n = strtoul(argv[i + 2], NULL, 10);
        int inl = !strcmp(cbname, "inline");
        if (!inl && strcmp(cbname, "thread"))
            usage();
        const struct config *c = NULL;
        for (int j = 0; j < NCONF; j++)
            if (!strcmp(configs[j].key, which))
                c = &configs[j];
        if (!c)
            usage();
        run(make_config(c, mask), inl, n);
        return 0;
    }
    if (!strcmp(mode, "check")) {
        check();
        return 0;
    }
    if (strcmp(mode, "table"))
        usage();

    check();
    ICorProfilerCallback11 *cbs[NCONF];
    for (int c = 0; c < NCONF; c++)
        cbs[c] = make_config(&configs[c], mask);
    unsigned long n = (unsigned long)(millions * 1e6);
    double *t = calloc((size_t)(2 * NCONF * rounds), sizeof *t);
    if (!t)
        die("out of memory");
    for (int inl = 0; inl < 2; inl++)
        for (int c = 0; c < NCONF; c++)
            run(cbs[c], inl, n / 20 + 1); /* warm-up */
    /* rounds: every configuration once per round, so that drift hits all of them alike */
    for (int r = 0; r < rounds; r++)
        for (int inl = 0; inl < 2; inl++)
            for (int c = 0; c < NCONF; c++)
                t[(inl * NCONF + c) * rounds + r] = ns_per_call(cbs[c], inl, n);

    FILE *sum = summary ? fopen(summary, "w") : NULL;
    printf("dispatch: %.0f M calls per measurement, median of %d interleaved rounds; children: libnoop.so "
           "(returns S_OK, counts nothing)\n", millions, rounds);
    printf("%-14s %-34s %9s %16s\n", "callback", "configuration", "ns/call", "ratio vs direct");
    for (int inl = 0; inl < 2; inl++) {
        const char *name = inl ? "JITInlining" : "ThreadCreated";
        double med[NCONF];
        for (int c = 0; c < NCONF; c++)
            med[c] = median(&t[(inl * NCONF + c) * rounds], rounds);
        for (int c = 0; c < NCONF; c++) {
            printf("%-14s %-34s %9.2f %16.2f\n", name, configs[c].label, med[c], med[c] / med[0]);
            if (sum)
                fprintf(sum, "%s %s %.2f %.2f\n", inl ? "inline" : "thread", configs[c].key, med[c], med[c] / med[0]);
        }
    }
    if (sum)
        fclose(sum);
    return 0;
}
