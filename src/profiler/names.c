/* Frame and type names for the profiler, resolved on the sampler thread (never while the
 * runtime is suspended) and cached: FunctionID -> "Namespace.Type<Args>.Method<Args>"
 * (GetFunctionInfo2, metadata GetMethodProps / GetTypeDefProps / GetNestedClassProps,
 * formatted by framename.h), ClassID -> type name, native IP -> "[native] module" (per page:
 * glibc's _dl_find_object, else dladdr), managed IP -> FunctionID (GetFunctionFromIP).
 *
 * The cache is one open-addressed table plus a string arena; when either is nearly full it
 * is cleared as a whole (prof_names_begin), which bounds memory. The table lives in one lazily
 * mapped region sized for the most entries, of which it uses a prefix that doubles (rehashed
 * in place) as it fills: a start-up's few hundred names touch a few pages, not one page per
 * name across the whole region (measured: the lookups were ~1% of a hello world's CPU).
 *
 * Type and method names are read from each module's ECMA-335 tables as the runtime mapped
 * them (common/mdtables.h; GetModuleInfo2's base address and layout), not through
 * GetModuleMetaData: that call makes the runtime convert the module's metadata reader to its
 * slower read/write form for the rest of the process (for System.Private.CoreLib, ~3 ms of a
 * hello world's CPU). The metadata importer stays the fallback: dynamic and collectible
 * modules (no image, or one that may be unmapped), and tables this reader refuses. What is
 * known of a module is kept per module (up to MAX_MODULES; beyond that an importer is
 * released after each use). */
#define COBJMACROS
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/lazymem.h"
#include "common/log.h"
#include "common/mdtables.h"
#include "profiler/framename.h"
#include "profiler/prof.h"

/* Names longer than their buffers are cut on purpose (framename keeps UTF-8 valid). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NAME_MAX_LEN 1024
#define MAX_MODULES 1024
#define MAX_TYPE_ARGS 16
#define MAX_NESTING 8

enum { K_FUNC = 1, K_CLASS = 2, K_PAGE = 3, K_IP = 4 };

struct entry {
    uint64_t key; /* 0: empty */
    uint64_t val; /* arena offset of a name, or a FunctionID (K_IP) */
};

struct module_md {
    ModuleID module;
    int tables;           /* 1: md holds its tables; 0: the importer (imp, asked for when first needed) */
    struct clrmux_md md;  /* pointers into the runtime's image of a module that stays loaded */
    IMetaDataImport *imp; /* NULL until needed */
};

/* A module as a name lookup sees it: its tables, or an importer (owned: release it after use). */
struct modref {
    const struct clrmux_md *md;
    IMetaDataImport *imp;
    int owned;
};

struct prof_names {
    ICorProfilerInfo3 *info;
    struct entry *tab;
    size_t cap, max_cap, used, max_used; /* cap: the prefix of tab in use (max_cap entries mapped) */
    char *arena;
    size_t arena_size, arena_used;
    uint64_t resets;
    struct module_md modules[MAX_MODULES];
    size_t nmodules;
    uint64_t from_tables, from_importer; /* modules named from their tables / by an importer */
};

struct prof_names *prof_names_create(ICorProfilerInfo3 *info, size_t max_entries, size_t arena_bytes)
{
    struct prof_names *n = clrmux_lazy_calloc(1, sizeof *n); /* ~130 KB of module slots: mapped, not cleared */
    if (!n)
        return NULL;
    size_t cap = 1024;
    while (cap < max_entries * 2)
        cap *= 2;
    n->info = info;
    n->max_cap = cap;
    n->cap = cap < 256 ? cap : 256; /* 4 KB: one page; doubles as names come */
    n->max_used = max_entries;
    n->tab = clrmux_lazy_calloc(cap, sizeof *n->tab); /* touched as names come */
    n->arena_size = arena_bytes < 64 * NAME_MAX_LEN ? 64 * NAME_MAX_LEN : arena_bytes;
    n->arena = malloc(n->arena_size);
    if (!n->tab || !n->arena) {
        prof_names_destroy(n);
        return NULL;
    }
    return n;
}

void prof_names_destroy(struct prof_names *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nmodules; i++)
        if (n->modules[i].imp)
            IMetaDataImport_Release(n->modules[i].imp);
    clrmux_lazy_free(n->tab);
    free(n->arena);
    clrmux_lazy_free(n);
}

uint64_t prof_names_resets(const struct prof_names *n) { return n->resets; }

void prof_names_sources(const struct prof_names *n, uint64_t *tables, uint64_t *importer)
{
    *tables = n->from_tables;
    *importer = n->from_importer;
}

void prof_names_begin(struct prof_names *n)
{
    /* one sample resolves at most PROF_MAX_FRAMES + 1 names of at most NAME_MAX_LEN bytes */
    /* ... and adds at most two entries per frame (an IP's FunctionID and its name) */
    size_t need = (size_t)(PROF_MAX_FRAMES + 2) * NAME_MAX_LEN;
    if (n->used + 2 * (PROF_MAX_FRAMES + 2) > n->max_used || n->arena_used + need > n->arena_size) {
        memset(n->tab, 0, n->cap * sizeof *n->tab);
        n->used = 0;
        n->arena_used = 0;
        n->resets++;
        LOG_DEBUG("profiler: name cache full; cleared (%llu times)", (unsigned long long)n->resets);
    }
}

static uint64_t mkkey(int kind, uint64_t id) { return (1ull << 63) | (((uint64_t)kind << 56) ^ id); }

static struct entry *slot(struct prof_names *n, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & (n->cap - 1);
    while (n->tab[i].key && n->tab[i].key != key)
        i = (i + 1) & (n->cap - 1);
    return &n->tab[i];
}

/* Doubles the table's prefix in use (rehashing in place) before an insertion would pass half
 * of it; at max_cap, or without memory for the copy, the table stays as it is. */
static void grow(struct prof_names *n)
{
    if (n->used + 1 <= n->cap / 2 || n->cap >= n->max_cap)
        return;
    struct entry *old = malloc((n->used ? n->used : 1) * sizeof *old);
    if (!old)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n->cap && k < n->used; i++)
        if (n->tab[i].key)
            old[k++] = n->tab[i];
    memset(n->tab, 0, n->cap * sizeof *n->tab);
    n->cap *= 2;
    for (size_t i = 0; i < k; i++)
        *slot(n, old[i].key) = old[i];
    free(old);
}

static const char *get(struct prof_names *n, int kind, uint64_t id)
{
    struct entry *e = slot(n, mkkey(kind, id));
    return e->key ? n->arena + e->val : NULL;
}

/* Stores a copy of s (at most NAME_MAX_LEN bytes, by the callers' buffers) and returns it. */
static const char *put(struct prof_names *n, int kind, uint64_t id, const char *s)
{
    size_t len = strlen(s) + 1;
    grow(n);
    if (n->arena_used + len > n->arena_size || n->used + 1 > n->cap / 2)
        return CLRMUX_FRAME_UNKNOWN; /* cannot happen: prof_names_begin keeps room for a sample */
    struct entry *e = slot(n, mkkey(kind, id));
    char *dst = n->arena + n->arena_used;
    memcpy(dst, s, len);
    e->key = mkkey(kind, id);
    e->val = n->arena_used;
    n->arena_used += len;
    n->used++;
    return dst;
}

/* The module's tables, when the runtime has its image mapped for good: not dynamic (no image),
 * not collectible (it may be unmapped while a name is looked up). */
static int open_tables(struct prof_names *n, ModuleID module, struct clrmux_md *md)
{
    LPCBYTE base = NULL;
    DWORD flags = 0;
    if (FAILED(ICorProfilerInfo3_GetModuleInfo2(n->info, module, &base, 0, NULL, NULL, NULL, &flags)) || !base ||
        (flags & (COR_PRF_MODULE_DYNAMIC | COR_PRF_MODULE_COLLECTIBLE | COR_PRF_MODULE_RESOURCE)))
        return -1;
    int flat = (flags & COR_PRF_MODULE_FLAT_LAYOUT) != 0;
    size_t size = flat ? clrmux_md_flat_size(base) : clrmux_md_mapped_size(base);
    return size ? clrmux_md_open(md, base, size, !flat) : -1;
}

static IMetaDataImport *ask_importer(struct prof_names *n, ModuleID module)
{
    IUnknown *unk = NULL;
    if (FAILED(ICorProfilerInfo3_GetModuleMetaData(n->info, module, 0 /* ofRead */, &IID_IMetaDataImport, &unk)) ||
        !unk)
        return NULL;
    return (IMetaDataImport *)unk;
}

/* How to read `module`'s names: its tables, else its importer. 0, or -1 when neither is there. */
static int module_ref(struct prof_names *n, ModuleID module, struct modref *r)
{
    r->md = NULL, r->imp = NULL, r->owned = 0;
    struct module_md *m = NULL;
    for (size_t i = 0; i < n->nmodules && !m; i++)
        if (n->modules[i].module == module)
            m = &n->modules[i];
    if (!m && n->nmodules < MAX_MODULES) {
        m = &n->modules[n->nmodules++];
        m->module = module;
        m->imp = NULL;
        m->tables = open_tables(n, module, &m->md) == 0;
        if (m->tables)
            n->from_tables++;
    }
    if (m && m->tables) {
        r->md = &m->md;
        return 0;
    }
    if (m && m->imp) {
        r->imp = m->imp;
        return 0;
    }
    r->imp = ask_importer(n, module);
    if (!r->imp)
        return -1;
    n->from_importer++;
    if (m)
        m->imp = r->imp;
    else
        r->owned = 1;
    return 0;
}

static void modref_done(struct modref *r)
{
    if (r->owned)
        IMetaDataImport_Release(r->imp);
}

/* One TypeDef's own name as GetTypeDefProps gives it: "Ns.Name", or "Name" without a namespace. */
static void typedef_part(const struct modref *r, mdTypeDef td, char *out, size_t outsz)
{
    out[0] = 0;
    if (r->md) {
        const char *ns, *name;
        if (clrmux_md_type_name(r->md, td, &ns, &name) == 0)
            snprintf(out, outsz, "%s%s%s", ns, ns[0] ? "." : "", name);
        return;
    }
    WCHAR w[512];
    ULONG wl = 0;
    if (FAILED(IMetaDataImport_GetTypeDefProps(r->imp, td, w, 512, &wl, NULL, NULL)))
        wl = 0;
    clrmux_frame_utf16_to_utf8(out, outsz, (const uint16_t *)w, wl);
}

static mdTypeDef enclosing(const struct modref *r, mdTypeDef td)
{
    if (r->md) {
        uint32_t outer = 0;
        return clrmux_md_enclosing_type(r->md, td, &outer) == 0 ? outer : 0;
    }
    mdTypeDef outer = 0;
    return SUCCEEDED(IMetaDataImport_GetNestedClassProps(r->imp, td, &outer)) ? outer : 0;
}

/* A method's name (as GetMethodProps gives it) and its TypeDef. */
static void method_props(const struct modref *r, mdMethodDef tok, mdTypeDef *td, char *out, size_t outsz)
{
    out[0] = 0;
    *td = 0;
    if (r->md) {
        const char *name;
        uint32_t owner;
        if (clrmux_md_method_name(r->md, tok, &name, &owner) == 0) {
            snprintf(out, outsz, "%s", name);
            *td = owner;
        }
        return;
    }
    WCHAR wm[512];
    ULONG wml = 0;
    if (SUCCEEDED(IMetaDataImport_GetMethodProps(r->imp, tok, td, wm, 512, &wml, NULL, NULL, NULL, NULL, NULL)))
        clrmux_frame_utf16_to_utf8(out, outsz, (const uint16_t *)wm, wml);
}

/* "Ns.Outer+Inner" (raw metadata names, arity suffixes kept) of a TypeDef. */
static void typedef_name(const struct modref *r, mdTypeDef td, char *out, size_t outsz)
{
    mdTypeDef chain[MAX_NESTING];
    int depth = 0;
    chain[depth++] = td;
    while (depth < MAX_NESTING) {
        mdTypeDef outer = enclosing(r, chain[depth - 1]);
        if (!outer)
            break;
        chain[depth++] = outer;
    }
    size_t len = 0;
    out[0] = 0;
    for (int i = depth - 1; i >= 0; i--) {
        char part[512];
        typedef_part(r, chain[i], part, sizeof part);
        int k = snprintf(out + len, outsz - len, "%s%s", i == depth - 1 ? "" : "+", part[0] ? part : "?");
        if (k < 0 || (size_t)k >= outsz - len)
            break;
        len += (size_t)k;
    }
}

/* Formats a type with its arguments: framename wants a method, so format "Type.M" and cut. */
static void format_type(char *out, size_t outsz, const char *raw, const char *const *args, size_t nargs)
{
    char buf[NAME_MAX_LEN];
    size_t k = clrmux_frame_name_managed(buf, sizeof buf, raw, "M", args, nargs, NULL, 0);
    if (k < sizeof buf && k >= 2 && strcmp(buf + k - 2, ".M") == 0)
        buf[k - 2] = 0;
    snprintf(out, outsz, "%s", buf);
}

static const char *elem_name(CorElementType t)
{
    switch (t) {
    case ELEMENT_TYPE_BOOLEAN: return "System.Boolean";
    case ELEMENT_TYPE_CHAR: return "System.Char";
    case ELEMENT_TYPE_I1: return "System.SByte";
    case ELEMENT_TYPE_U1: return "System.Byte";
    case ELEMENT_TYPE_I2: return "System.Int16";
    case ELEMENT_TYPE_U2: return "System.UInt16";
    case ELEMENT_TYPE_I4: return "System.Int32";
    case ELEMENT_TYPE_U4: return "System.UInt32";
    case ELEMENT_TYPE_I8: return "System.Int64";
    case ELEMENT_TYPE_U8: return "System.UInt64";
    case ELEMENT_TYPE_R4: return "System.Single";
    case ELEMENT_TYPE_R8: return "System.Double";
    case ELEMENT_TYPE_STRING: return "System.String";
    case ELEMENT_TYPE_I: return "System.IntPtr";
    case ELEMENT_TYPE_U: return "System.UIntPtr";
    case ELEMENT_TYPE_OBJECT: return "System.Object";
    default: return "?";
    }
}

/* Full name of a loaded type (arguments resolved to `depth` levels). */
static void class_name(struct prof_names *n, ClassID c, int depth, char *out, size_t outsz)
{
    CorElementType et = 0;
    ClassID base = 0;
    ULONG rank = 0;
    if (ICorProfilerInfo3_IsArrayClass(n->info, c, &et, &base, &rank) == S_OK) {
        char elem[NAME_MAX_LEN];
        if (base && depth > 0)
            class_name(n, base, depth - 1, elem, sizeof elem);
        else
            snprintf(elem, sizeof elem, "%s", elem_name(et));
        char commas[34] = "";
        for (ULONG i = 1; i < rank && i < sizeof commas - 1; i++)
            commas[i - 1] = ',', commas[i] = 0;
        snprintf(out, outsz, "%s[%s]", elem, commas);
        return;
    }
    ModuleID mod = 0;
    mdTypeDef td = 0;
    ClassID args[MAX_TYPE_ARGS];
    ULONG32 nargs = 0;
    if (FAILED(ICorProfilerInfo3_GetClassIDInfo2(n->info, c, &mod, &td, NULL, MAX_TYPE_ARGS, &nargs, args))) {
        nargs = 0;
        if (FAILED(ICorProfilerInfo3_GetClassIDInfo(n->info, c, &mod, &td))) {
            snprintf(out, outsz, "%s", CLRMUX_FRAME_UNKNOWN);
            return;
        }
    }
    if (nargs > MAX_TYPE_ARGS)
        nargs = MAX_TYPE_ARGS;
    struct modref r;
    char raw[NAME_MAX_LEN] = "";
    if (module_ref(n, mod, &r) == 0) {
        typedef_name(&r, td, raw, sizeof raw);
        modref_done(&r);
    }
    if (!raw[0]) {
        snprintf(out, outsz, "%s", CLRMUX_FRAME_UNKNOWN);
        return;
    }
    static char argbuf[4][MAX_TYPE_ARGS][256]; /* sampler thread only; depth <= 3 */
    const char *argv[MAX_TYPE_ARGS];
    int level = depth < 0 ? 0 : depth > 3 ? 3 : depth;
    for (ULONG32 i = 0; i < nargs; i++) {
        if (depth > 0)
            class_name(n, args[i], depth - 1, argbuf[level][i], sizeof argbuf[level][i]);
        else
            snprintf(argbuf[level][i], sizeof argbuf[level][i], "?");
        argv[i] = argbuf[level][i];
    }
    format_type(out, outsz, raw, argv, nargs);
}

const char *prof_names_class(struct prof_names *n, ClassID c)
{
    if (!c)
        return CLRMUX_FRAME_UNKNOWN;
    const char *s = get(n, K_CLASS, c);
    if (s)
        return s;
    char buf[NAME_MAX_LEN];
    class_name(n, c, 2, buf, sizeof buf);
    return put(n, K_CLASS, c, buf);
}

const char *prof_names_function(struct prof_names *n, FunctionID f)
{
    if (!f)
        return CLRMUX_FRAME_UNKNOWN;
    const char *s = get(n, K_FUNC, f);
    if (s)
        return s;
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    ClassID margs[MAX_TYPE_ARGS];
    ULONG32 nmargs = 0;
    char buf[NAME_MAX_LEN];
    if (FAILED(ICorProfilerInfo3_GetFunctionInfo2(n->info, f, 0, &cls, &mod, &tok, MAX_TYPE_ARGS, &nmargs, margs))) {
        nmargs = 0;
        if (FAILED(ICorProfilerInfo3_GetFunctionInfo(n->info, f, &cls, &mod, &tok)))
            return put(n, K_FUNC, f, CLRMUX_FRAME_UNKNOWN);
    }
    if (nmargs > MAX_TYPE_ARGS)
        nmargs = MAX_TYPE_ARGS;
    struct modref r;
    if (module_ref(n, mod, &r) != 0)
        return put(n, K_FUNC, f, CLRMUX_FRAME_UNKNOWN);
    mdTypeDef td = 0;
    char method[512];
    method_props(&r, tok, &td, method, sizeof method);
    /* the type: with its arguments when the runtime knows the exact class (not for shared
     * generic code, where cls is 0), else the TypeDef's name */
    char type_raw[NAME_MAX_LEN] = "";
    char type_full[NAME_MAX_LEN] = "";
    if (cls)
        class_name(n, cls, 2, type_full, sizeof type_full);
    if ((!type_full[0] || strcmp(type_full, CLRMUX_FRAME_UNKNOWN) == 0) && td && TypeFromToken(td) == mdtTypeDef)
        typedef_name(&r, td, type_raw, sizeof type_raw);
    modref_done(&r);
    char margbuf[MAX_TYPE_ARGS][256];
    const char *mav[MAX_TYPE_ARGS];
    for (ULONG32 i = 0; i < nmargs; i++) {
        class_name(n, margs[i], 1, margbuf[i], sizeof margbuf[i]);
        mav[i] = margbuf[i];
    }
    if (type_raw[0]) {
        clrmux_frame_name_managed(buf, sizeof buf, type_raw, method, NULL, 0, mav, nmargs);
    } else {
        /* type_full is already formatted: join "Type.Method<Args>" without re-parsing it */
        char m[NAME_MAX_LEN];
        clrmux_frame_name_managed(m, sizeof m, NULL, method, NULL, 0, mav, nmargs);
        snprintf(buf, sizeof buf, "%s.%s", type_full[0] ? type_full : CLRMUX_FRAME_UNKNOWN, m);
    }
    return put(n, K_FUNC, f, buf);
}

/* The path of the object loaded at ip, or NULL. dladdr also finds the nearest symbol, by a
 * linear pass over the object's dynamic symbols (~5 us per call in libc, measured; a few
 * hundred pages of native frames in a hello world's start-up made it ~7% of the sampler
 * thread's CPU, perf), which the name does not use: glibc 2.35+'s _dl_find_object finds the
 * object alone, in a few nanoseconds, and knows objects loaded since (dlopen updates it). It
 * is looked up at run time, so that the companion still loads on an older glibc (dladdr
 * then). The main program has no name in its link map: dladdr gives it (argv[0]). */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
typedef int (*find_object_fn)(void *, struct dl_find_object *);
static const char *object_path(uintptr_t ip)
{
    static find_object_fn find; /* the sampler thread only (and Shutdown, after it) */
    static int looked;
    if (!looked) {
        looked = 1;
        find = (find_object_fn)dlsym(RTLD_DEFAULT, "_dl_find_object");
    }
    struct dl_find_object fo;
    if (find && find((void *)ip, &fo) == 0 && fo.dlfo_link_map && fo.dlfo_link_map->l_name &&
        fo.dlfo_link_map->l_name[0])
        return fo.dlfo_link_map->l_name;
    Dl_info di;
    return dladdr((void *)ip, &di) && di.dli_fname ? di.dli_fname : NULL;
}
#else
static const char *object_path(uintptr_t ip)
{
    Dl_info di;
    return dladdr((void *)ip, &di) && di.dli_fname ? di.dli_fname : NULL;
}
#endif

const char *prof_names_native(struct prof_names *n, uintptr_t ip)
{
    uint64_t page = (uint64_t)ip >> 12;
    const char *s = get(n, K_PAGE, page);
    if (s)
        return s;
    char buf[NAME_MAX_LEN];
    clrmux_frame_name_native(buf, sizeof buf, ip ? object_path(ip) : NULL);
    return put(n, K_PAGE, page, buf);
}

FunctionID prof_names_ip_function(struct prof_names *n, uintptr_t ip)
{
    struct entry *e = slot(n, mkkey(K_IP, ip));
    if (e->key)
        return (FunctionID)e->val;
    FunctionID f = 0;
    if (FAILED(ICorProfilerInfo3_GetFunctionFromIP(n->info, (LPCBYTE)ip, &f)))
        f = 0;
    if (n->used + 1 > n->cap / 2) {
        grow(n);
        e = slot(n, mkkey(K_IP, ip));
    }
    if (n->used + 1 <= n->cap / 2) {
        e->key = mkkey(K_IP, ip);
        e->val = f;
        n->used++;
    }
    return f;
}
