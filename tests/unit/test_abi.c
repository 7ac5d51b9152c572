/* ABI check: the interfaces and flags of include/clrmux (generated X-macro lists in
 * gen/corprof_list.h, enums in corprof.h) against the checked data files copied from
 * shared/abi into tests/unit/data:
 *   corprof-vtables.tsv  interface, base, uuid, vtable slot, method, parameter count
 *   corprof-flags.tsv    COR_PRF_MONITOR / COR_PRF_HIGH_MONITOR names and values
 *
 * The data directory is $CLRMUX_ABI_DATA_DIR, else "data" beside this source file
 * (tests/unit/data when built from the repository root). A missing or unreadable data
 * file is a failure, never a skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clrmux/corprof.h"

/* ---- our side, from the X-macro lists ---------------------------------------------- */

#define STR(x) STR1(x)
#define STR1(x) #x

/* Every interface of corprof.idl, in the IDL's order. */
#define ABI_IFACES(Y)                                                                          \
    Y(ICorProfilerCallback) Y(ICorProfilerCallback2) Y(ICorProfilerCallback3) Y(ICorProfilerCallback4) \
    Y(ICorProfilerCallback5) Y(ICorProfilerCallback6) Y(ICorProfilerCallback7) Y(ICorProfilerCallback8) \
    Y(ICorProfilerCallback9) Y(ICorProfilerCallback10) Y(ICorProfilerCallback11) Y(ICorProfilerInfo)   \
    Y(ICorProfilerInfo2) Y(ICorProfilerInfo3) Y(ICorProfilerObjectEnum) Y(ICorProfilerFunctionEnum)    \
    Y(ICorProfilerModuleEnum) Y(IMethodMalloc) Y(ICorProfilerFunctionControl) Y(ICorProfilerInfo4)     \
    Y(ICorProfilerInfo5) Y(ICorProfilerInfo6) Y(ICorProfilerInfo7) Y(ICorProfilerInfo8)               \
    Y(ICorProfilerInfo9) Y(ICorProfilerInfo10) Y(ICorProfilerInfo11) Y(ICorProfilerInfo12)            \
    Y(ICorProfilerInfo13) Y(ICorProfilerInfo14) Y(ICorProfilerInfo15) Y(ICorProfilerMethodEnum)       \
    Y(ICorProfilerThreadEnum) Y(ICorProfilerAssemblyReferenceProvider)

struct our_iface {
    const char *name;
    const char *base;
    const IID *iid;
    size_t nslots; /* sizeof(Vtbl) / sizeof(void *) */
};
#define OUR_IFACE(I) {#I, STR(CLRMUX_BASE_##I), &IID_##I, sizeof(I##Vtbl) / sizeof(void *)},
static const struct our_iface k_ifaces[] = {ABI_IFACES(OUR_IFACE)};
#define N_IFACES (sizeof k_ifaces / sizeof k_ifaces[0])

/* One entry per (interface, method) of each interface's whole vtable, bases included. */
struct our_method {
    const char *iface;    /* the vtable this slot belongs to */
    const char *declarer; /* the interface that declares the method */
    const char *ret;
    const char *name;
    size_t slot;      /* offsetof(I##Vtbl, N) / sizeof(void *) */
    const char *args; /* "(, a, b)": parameters = commas */
};
#define OUR_METHOD(I, D, R, N, P, A, ROUTE) {#I, #D, #R, #N, offsetof(I##Vtbl, N) / sizeof(void *), #A},
#define OUR_METHODS_OF(I) CLRMUX_ALL_##I(OUR_METHOD, I)
static const struct our_method k_methods[] = {ABI_IFACES(OUR_METHODS_OF)};
#define N_METHODS (sizeof k_methods / sizeof k_methods[0])

static int count_params(const char *args)
{
    int n = 0;
    for (const char *p = args; *p; p++)
        n += *p == ',';
    return n;
}

static const struct our_iface *our_iface(const char *name)
{
    for (size_t i = 0; i < N_IFACES; i++)
        if (strcmp(k_ifaces[i].name, name) == 0)
            return &k_ifaces[i];
    return NULL;
}

static const struct our_method *our_method(const char *iface, const char *name)
{
    for (size_t i = 0; i < N_METHODS; i++)
        if (strcmp(k_methods[i].iface, iface) == 0 && strcmp(k_methods[i].name, name) == 0)
            return &k_methods[i];
    return NULL;
}

/* Our flags, by enum. */
struct our_flag {
    const char *name;
    uint32_t value;
    const char *enumname;
};
#define FL(n) {#n, (uint32_t)(n), "COR_PRF_MONITOR"},
#define FH(n) {#n, (uint32_t)(n), "COR_PRF_HIGH_MONITOR"},
static const struct our_flag k_flags[] = {
    FL(COR_PRF_MONITOR_NONE) FL(COR_PRF_MONITOR_FUNCTION_UNLOADS) FL(COR_PRF_MONITOR_CLASS_LOADS)
    FL(COR_PRF_MONITOR_MODULE_LOADS) FL(COR_PRF_MONITOR_ASSEMBLY_LOADS) FL(COR_PRF_MONITOR_APPDOMAIN_LOADS)
    FL(COR_PRF_MONITOR_JIT_COMPILATION) FL(COR_PRF_MONITOR_EXCEPTIONS) FL(COR_PRF_MONITOR_GC)
    FL(COR_PRF_MONITOR_OBJECT_ALLOCATED) FL(COR_PRF_MONITOR_THREADS) FL(COR_PRF_MONITOR_REMOTING)
    FL(COR_PRF_MONITOR_CODE_TRANSITIONS) FL(COR_PRF_MONITOR_ENTERLEAVE) FL(COR_PRF_MONITOR_CCW)
    FL(COR_PRF_MONITOR_REMOTING_COOKIE) FL(COR_PRF_MONITOR_REMOTING_ASYNC) FL(COR_PRF_MONITOR_SUSPENDS)
    FL(COR_PRF_MONITOR_CACHE_SEARCHES) FL(COR_PRF_ENABLE_REJIT) FL(COR_PRF_ENABLE_INPROC_DEBUGGING)
    FL(COR_PRF_ENABLE_JIT_MAPS) FL(COR_PRF_DISABLE_INLINING) FL(COR_PRF_DISABLE_OPTIMIZATIONS)
    FL(COR_PRF_ENABLE_OBJECT_ALLOCATED) FL(COR_PRF_MONITOR_CLR_EXCEPTIONS) FL(COR_PRF_MONITOR_ALL)
    FL(COR_PRF_ENABLE_FUNCTION_ARGS) FL(COR_PRF_ENABLE_FUNCTION_RETVAL) FL(COR_PRF_ENABLE_FRAME_INFO)
    FL(COR_PRF_ENABLE_STACK_SNAPSHOT) FL(COR_PRF_USE_PROFILE_IMAGES)
    FL(COR_PRF_DISABLE_TRANSPARENCY_CHECKS_UNDER_FULL_TRUST) FL(COR_PRF_DISABLE_ALL_NGEN_IMAGES)
    FL(COR_PRF_ALL) FL(COR_PRF_REQUIRE_PROFILE_IMAGE) FL(COR_PRF_ALLOWABLE_AFTER_ATTACH)
    FL(COR_PRF_ALLOWABLE_NOTIFICATION_PROFILER) FL(COR_PRF_MONITOR_IMMUTABLE)
    FH(COR_PRF_HIGH_MONITOR_NONE) FH(COR_PRF_HIGH_ADD_ASSEMBLY_REFERENCES) FH(COR_PRF_HIGH_IN_MEMORY_SYMBOLS_UPDATED)
    FH(COR_PRF_HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS) FH(COR_PRF_HIGH_DISABLE_TIERED_COMPILATION)
    FH(COR_PRF_HIGH_BASIC_GC) FH(COR_PRF_HIGH_MONITOR_GC_MOVED_OBJECTS) FH(COR_PRF_HIGH_REQUIRE_PROFILE_IMAGE)
    FH(COR_PRF_HIGH_MONITOR_LARGEOBJECT_ALLOCATED) FH(COR_PRF_HIGH_MONITOR_EVENT_PIPE)
    FH(COR_PRF_HIGH_MONITOR_PINNEDOBJECT_ALLOCATED) FH(COR_PRF_HIGH_ALLOWABLE_AFTER_ATTACH)
    FH(COR_PRF_HIGH_ALLOWABLE_NOTIFICATION_PROFILER) FH(COR_PRF_HIGH_MONITOR_IMMUTABLE)
};
#define N_FLAGS (sizeof k_flags / sizeof k_flags[0])

/* ---- the data files ---------------------------------------------------------------- */

static void source_relative(char *out, size_t outsz, const char *rel)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(out, outsz, "%s/%s", dir, rel);
}

static void data_path(char *out, size_t outsz, const char *file)
{
    const char *env = getenv("CLRMUX_ABI_DATA_DIR");
    if (env && *env) {
        snprintf(out, outsz, "%s/%s", env, file);
        return;
    }
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "data/%s", file);
    source_relative(out, outsz, rel);
}

#define MAX_ROWS 512
#define MAX_FIELDS 6
struct table {
    char path[PATH_MAX];
    char comments[4096]; /* the '#' lines, concatenated */
    int nrows;
    int line[MAX_ROWS];
    char field[MAX_ROWS][MAX_FIELDS][1024];
};

/* Reads a TSV data file; every non-comment line must have exactly `nfields` fields.
 * Fails the test when the file is missing, empty or malformed. */
static struct table *load_table(const char *file, int nfields)
{
    struct table *t = calloc(1, sizeof *t);
    assert_non_null(t);
    data_path(t->path, sizeof t->path, file);
    FILE *f = fopen(t->path, "r");
    if (!f) {
        free(t);
        fail_msg("ABI data file %s cannot be read (set CLRMUX_ABI_DATA_DIR, or copy it from shared/abi)", file);
    }
    char line[4096];
    int lineno = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#') {
            size_t len = strlen(t->comments);
            snprintf(t->comments + len, sizeof t->comments - len, "%s\n", line);
            continue;
        }
        if (!line[0])
            continue;
        if (t->nrows == MAX_ROWS) {
            bad = -1;
            break;
        }
        int n = 0;
        for (char *p = line, *tab; p && n < MAX_FIELDS; p = tab ? tab + 1 : NULL) {
            tab = strchr(p, '\t');
            if (tab)
                *tab = 0;
            size_t len = strlen(p);
            if (len >= sizeof t->field[0][0]) {
                print_error("%s:%d: field too long\n", t->path, lineno);
                bad++;
                len = 0;
            }
            memcpy(t->field[t->nrows][n++], p, len);
            t->field[t->nrows][n - 1][len] = 0;
            if (!tab)
                break;
        }
        if (n != nfields) {
            print_error("%s:%d: %d fields, expected %d\n", t->path, lineno, n, nfields);
            bad++;
            continue;
        }
        t->line[t->nrows++] = lineno;
    }
    fclose(f);
    if (bad || t->nrows == 0) {
        free(t);
        fail_msg("%s: %s", file, bad < 0 ? "too many rows" : bad ? "malformed rows" : "no data rows");
    }
    if (!strstr(t->comments, "# source:")) {
        free(t);
        fail_msg("%s: the header comment naming its source is missing", file);
    }
    return t;
}

enum { V_IFACE, V_BASE, V_UUID, V_SLOT, V_METHOD, V_PARAMS };
enum { F_NAME, F_VALUE, F_ENUM, F_KIND, F_DEFINED_AS };

static void iid_string(const IID *g, char *out, size_t outsz)
{
    snprintf(out, outsz, "%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X", (unsigned)g->Data1, g->Data2, g->Data3,
             g->Data4[0], g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6], g->Data4[7]);
}

static int parse_ulong(const char *s, unsigned long *out)
{
    char *end;
    if (!*s)
        return -1;
    *out = strtoul(s, &end, 0);
    return *end ? -1 : 0;
}

/* ---- tests: vtables ------------------------------------------------------------------ */

static struct table *g_vt;
static struct table *g_fl;

static int setup_vtables(void **state)
{
    (void)state;
    return 0;
}

static void test_vtable_data_loads(void **state)
{
    (void)state;
    g_vt = load_table("corprof-vtables.tsv", 6);
    assert_true(strstr(g_vt->comments, "vtable_slot") != NULL);
    /* the file is in IDL order: slots of one interface increase by one */
    for (int r = 1; r < g_vt->nrows; r++) {
        if (strcmp(g_vt->field[r][V_IFACE], g_vt->field[r - 1][V_IFACE]) != 0)
            continue;
        unsigned long a, b;
        assert_int_equal(parse_ulong(g_vt->field[r - 1][V_SLOT], &a), 0);
        assert_int_equal(parse_ulong(g_vt->field[r][V_SLOT], &b), 0);
        if (b != a + 1)
            fail_msg("%s:%d: slot %lu after %lu", g_vt->path, g_vt->line[r], b, a);
    }
}

static struct table *vt(void)
{
    if (!g_vt)
        g_vt = load_table("corprof-vtables.tsv", 6);
    return g_vt;
}

static struct table *fl(void)
{
    if (!g_fl)
        g_fl = load_table("corprof-flags.tsv", 5);
    return g_fl;
}

/* Every method of the file sits at its slot in our vtable, with its parameter count. */
static void test_every_data_method_matches_ours(void **state)
{
    (void)state;
    struct table *t = vt();
    int errors = 0;
    for (int r = 0; r < t->nrows; r++) {
        const char *iface = t->field[r][V_IFACE], *name = t->field[r][V_METHOD];
        unsigned long slot, params;
        if (parse_ulong(t->field[r][V_SLOT], &slot) || parse_ulong(t->field[r][V_PARAMS], &params)) {
            print_error("%s:%d: bad number\n", t->path, t->line[r]);
            errors++;
            continue;
        }
        const struct our_method *m = our_method(iface, name);
        if (!m) {
            print_error("%s::%s (data line %d) is missing from our %sVtbl\n", iface, name, t->line[r], iface);
            errors++;
            continue;
        }
        if (strcmp(m->declarer, iface) != 0) {
            print_error("%s::%s: declared by %s in our lists, by %s in the data\n", iface, name, m->declarer, iface);
            errors++;
        }
        if (m->slot != slot) {
            print_error("%s::%s: our vtable slot %zu, data slot %lu\n", iface, name, m->slot, slot);
            errors++;
        }
        if ((unsigned long)count_params(m->args) != params) {
            print_error("%s::%s: our %d parameters %s, data %lu\n", iface, name, count_params(m->args), m->args, params);
            errors++;
        }
        const char *want_ret = strcmp(iface, "IMethodMalloc") == 0 && strcmp(name, "Alloc") == 0 ? "PVOID" : "HRESULT";
        if (strcmp(m->ret, want_ret) != 0) {
            print_error("%s::%s: returns %s, the IDL %s\n", iface, name, m->ret, want_ret);
            errors++;
        }
    }
    if (errors)
        fail_msg("%d vtable mismatches against %s", errors, t->path);
}

/* Every method of ours is in the file: an interface's own methods as its rows, inherited
 * ones at the slot the base interface's rows give, IUnknown's three at 0, 1, 2. */
static void test_every_our_method_is_in_data(void **state)
{
    (void)state;
    struct table *t = vt();
    static const struct { const char *name, *ret; int params; } unknown[3] = {
        {"QueryInterface", "HRESULT", 2}, {"AddRef", "ULONG", 0}, {"Release", "ULONG", 0}};
    int errors = 0;
    for (size_t i = 0; i < N_METHODS; i++) {
        const struct our_method *m = &k_methods[i];
        if (strcmp(m->declarer, "IUnknown") == 0) {
            if (m->slot > 2 || strcmp(unknown[m->slot].name, m->name) != 0 || strcmp(unknown[m->slot].ret, m->ret) != 0 ||
                count_params(m->args) != unknown[m->slot].params) {
                print_error("%s: IUnknown::%s at slot %zu\n", m->iface, m->name, m->slot);
                errors++;
            }
            continue;
        }
        int found = 0;
        for (int r = 0; r < t->nrows && !found; r++) {
            if (strcmp(t->field[r][V_IFACE], m->declarer) != 0 || strcmp(t->field[r][V_METHOD], m->name) != 0)
                continue;
            found = 1;
            unsigned long slot;
            if (parse_ulong(t->field[r][V_SLOT], &slot) || slot != m->slot) {
                print_error("%s::%s (declared by %s): our slot %zu, data %s\n", m->iface, m->name, m->declarer, m->slot,
                            t->field[r][V_SLOT]);
                errors++;
            }
        }
        if (!found) {
            print_error("our %s::%s (declared by %s) is not in %s\n", m->iface, m->name, m->declarer, t->path);
            errors++;
        }
    }
    if (errors)
        fail_msg("%d of our methods disagree with %s", errors, t->path);
}

/* Every interface: in both, same IID, same base, and our vtable is exactly IUnknown's
 * three slots plus the data's methods of the interface and its bases. */
static void test_interfaces_iids_and_bases(void **state)
{
    (void)state;
    struct table *t = vt();
    int errors = 0;
    int seen[N_IFACES] = {0};
    for (int r = 0; r < t->nrows; r++) {
        const char *iface = t->field[r][V_IFACE];
        if (r > 0 && strcmp(iface, t->field[r - 1][V_IFACE]) == 0)
            continue; /* one check per interface */
        const struct our_iface *oi = our_iface(iface);
        if (!oi) {
            print_error("interface %s (data line %d) is not in ours\n", iface, t->line[r]);
            errors++;
            continue;
        }
        seen[oi - k_ifaces] = 1;
        char uuid[64];
        iid_string(oi->iid, uuid, sizeof uuid);
        if (strcasecmp(uuid, t->field[r][V_UUID]) != 0) {
            print_error("IID_%s = %s, data %s\n", iface, uuid, t->field[r][V_UUID]);
            errors++;
        }
        if (strcmp(oi->base, t->field[r][V_BASE]) != 0) {
            print_error("%s: our base %s, data %s\n", iface, oi->base, t->field[r][V_BASE]);
            errors++;
        }
        /* the highest slot the data gives this interface */
        unsigned long last = 0;
        for (int k = r; k < t->nrows && strcmp(t->field[k][V_IFACE], iface) == 0; k++) {
            unsigned long s;
            if (parse_ulong(t->field[k][V_SLOT], &s) == 0 && s > last)
                last = s;
        }
        if (oi->nslots != last + 1) {
            print_error("%sVtbl has %zu slots, data %lu\n", iface, oi->nslots, last + 1);
            errors++;
        }
        /* every row of every interface is distinct and data uuids agree within an interface */
        for (int k = r + 1; k < t->nrows && strcmp(t->field[k][V_IFACE], iface) == 0; k++) {
            if (strcmp(t->field[k][V_UUID], t->field[r][V_UUID]) != 0) {
                print_error("%s: data uuid differs at line %d\n", iface, t->line[k]);
                errors++;
            }
        }
    }
    for (size_t i = 0; i < N_IFACES; i++) {
        if (!seen[i]) {
            print_error("our interface %s is not in %s\n", k_ifaces[i].name, t->path);
            errors++;
        }
    }
    if (errors)
        fail_msg("%d interface mismatches against %s", errors, t->path);
}

/* ---- tests: flags ------------------------------------------------------------------ */

static void test_every_data_flag_matches_ours(void **state)
{
    (void)state;
    struct table *t = fl();
    int errors = 0;
    for (int r = 0; r < t->nrows; r++) {
        const char *name = t->field[r][F_NAME];
        unsigned long v;
        if (parse_ulong(t->field[r][F_VALUE], &v)) {
            print_error("%s:%d: bad value '%s'\n", t->path, t->line[r], t->field[r][F_VALUE]);
            errors++;
            continue;
        }
        const struct our_flag *f = NULL;
        for (size_t i = 0; i < N_FLAGS && !f; i++)
            if (strcmp(k_flags[i].name, name) == 0)
                f = &k_flags[i];
        if (!f) {
            print_error("flag %s (data line %d) is not in our enums\n", name, t->line[r]);
            errors++;
            continue;
        }
        if (f->value != (uint32_t)v) {
            print_error("%s = 0x%08X, data 0x%08lX\n", name, (unsigned)f->value, v);
            errors++;
        }
        if (strcmp(f->enumname, t->field[r][F_ENUM]) != 0) {
            print_error("%s: our enum %s, data %s\n", name, f->enumname, t->field[r][F_ENUM]);
            errors++;
        }
        /* the kind column agrees with the value */
        const char *kind = t->field[r][F_KIND];
        int bits = __builtin_popcount((unsigned)v);
        if ((strcmp(kind, "zero") == 0 && bits != 0) || (strcmp(kind, "flag") == 0 && bits != 1) ||
            (strcmp(kind, "mask") == 0 && bits < 2)) {
            print_error("%s: kind %s but value 0x%08lX\n", name, kind, v);
            errors++;
        }
    }
    if (errors)
        fail_msg("%d flag mismatches against %s", errors, t->path);
}

/* Collects the member names of `typedef enum { ... } NAME;` from a header's text. */
static int enum_members(const char *text, const char *enumname, char names[][80], int max)
{
    char closing[128];
    snprintf(closing, sizeof closing, "} %s;", enumname);
    const char *end = strstr(text, closing);
    if (!end)
        return -1;
    const char *start = end;
    while (start > text && strncmp(start, "typedef enum {", 14) != 0)
        start--;
    if (start == text)
        return -1;
    int n = 0;
    for (const char *p = start + 14; p < end && n < max;) {
        while (p < end && !(isalpha((unsigned char)*p) || *p == '_'))
            p++;
        const char *b = p;
        while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
            p++;
        if (p == b)
            break;
        snprintf(names[n], 80, "%.*s", (int)(p - b), b);
        n++;
        while (p < end && *p != ',') /* skip " = (int)0x..." */
            p++;
    }
    return n;
}

/* Every flag of ours is in the data, and our header declares no other member. */
static void test_every_our_flag_is_in_data(void **state)
{
    (void)state;
    struct table *t = fl();
    int errors = 0;
    for (size_t i = 0; i < N_FLAGS; i++) {
        int found = 0;
        for (int r = 0; r < t->nrows && !found; r++)
            found = strcmp(t->field[r][F_NAME], k_flags[i].name) == 0;
        if (!found) {
            print_error("our %s is not in %s\n", k_flags[i].name, t->path);
            errors++;
        }
    }
    assert_int_equal(N_FLAGS, t->nrows);

    /* the header itself: the members of both enums, as written */
    char hdr[PATH_MAX];
    source_relative(hdr, sizeof hdr, "../../include/clrmux/corprof.h");
    FILE *f = fopen(hdr, "r");
    if (!f)
        fail_msg("cannot read %s", hdr);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    static const char *const enums[2] = {"COR_PRF_MONITOR", "COR_PRF_HIGH_MONITOR"};
    int total = 0;
    for (int e = 0; e < 2; e++) {
        char names[64][80];
        int cnt = enum_members(text, enums[e], names, 64);
        if (cnt <= 0)
            fail_msg("enum %s not found in %s", enums[e], hdr);
        total += cnt;
        for (int k = 0; k < cnt; k++) {
            int found = 0;
            for (int r = 0; r < t->nrows && !found; r++)
                found = strcmp(t->field[r][F_NAME], names[k]) == 0 && strcmp(t->field[r][F_ENUM], enums[e]) == 0;
            if (!found) {
                print_error("%s declares %s, which %s does not list in %s\n", hdr, names[k], t->path, enums[e]);
                errors++;
            }
        }
    }
    if (total != t->nrows) {
        print_error("%s declares %d members, %s lists %d\n", hdr, total, t->path, t->nrows);
        errors++;
    }
    if (errors)
        fail_msg("%d flag mismatches against %s", errors, t->path);
}

/* The pre-.NET-10 immutable set the mux enforces on older runtimes is the one the data's
 * version note gives. */
static void test_immutable_set_before_net10(void **state)
{
    (void)state;
    struct table *t = fl();
    const char *key = "there COR_PRF_MONITOR_IMMUTABLE = ";
    const char *p = strstr(t->comments, key);
    if (!p)
        fail_msg("%s: the version note on COR_PRF_MONITOR_IMMUTABLE is missing", t->path);
    unsigned long old = strtoul(p + strlen(key), NULL, 16);
    assert_int_equal((uint32_t)old, CLRMUX_PRF_MONITOR_IMMUTABLE_BEFORE_NET10);
    assert_int_equal(CLRMUX_PRF_MONITOR_IMMUTABLE_BEFORE_NET10,
                     (uint32_t)COR_PRF_MONITOR_IMMUTABLE | (uint32_t)COR_PRF_DISABLE_INLINING |
                         (uint32_t)COR_PRF_DISABLE_OPTIMIZATIONS);
    assert_int_equal((uint32_t)COR_PRF_MONITOR_IMMUTABLE & (uint32_t)COR_PRF_DISABLE_INLINING, 0);
}

static int teardown_all(void **state)
{
    (void)state;
    free(g_vt);
    free(g_fl);
    g_vt = g_fl = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vtable_data_loads),
        cmocka_unit_test(test_every_data_method_matches_ours),
        cmocka_unit_test(test_every_our_method_is_in_data),
        cmocka_unit_test(test_interfaces_iids_and_bases),
        cmocka_unit_test(test_every_data_flag_matches_ours),
        cmocka_unit_test(test_every_our_flag_is_in_data),
        cmocka_unit_test(test_immutable_set_before_net10),
    };
    return cmocka_run_group_tests(tests, setup_vtables, teardown_all);
}
