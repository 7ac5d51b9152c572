/* The tracer's exception names (see tracer_impl.h): the (type name, message) pair of a
 * thrown exception, read through metadata and the object's layout, interned by id. */
#include "tracer/tracer_impl.h"

/* ---- exception names ----------------------------------------------------------------- */

/* The thrown object's System.Exception._message as UTF-8 ("" when unknown): the field's
 * offset comes from GetClassLayout of System.Exception (found by walking the thrown class's
 * parents), the string's layout from GetStringLayout2. Under exc_lock. */
static void exception_message(struct tracer *t, ObjectID obj, ClassID cls, char *out, size_t outsz)
{
    out[0] = 0;
    if (!t->message_tried) {
        t->message_tried = 1;
        ClassID c = cls;
        for (int depth = 0; c && depth < 32 && !t->exception_cls; depth++) {
            ModuleID mod = 0;
            mdTypeDef td = 0;
            ClassID parent = 0;
            if (FAILED(ICorProfilerInfo5_GetClassIDInfo2(t->info, c, &mod, &td, &parent, 0, NULL, NULL)))
                break;
            IUnknown *unk = NULL;
            if (FAILED(ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead, &IID_IMetaDataImport2, &unk)) || !unk)
                break;
            IMetaDataImport2 *imp = (IMetaDataImport2 *)unk;
            char name[160];
            if (tracer_type_full_name(imp, td, name, sizeof name, 0) == 0 && strcmp(name, "System.Exception") == 0) {
                WCHAR w[16];
                mdFieldDef fd = 0;
                clrmux_utf8_to_utf16("_message", w, 16);
                COR_FIELD_OFFSET offs[64];
                ULONG n = 0, size = 0;
                if (SUCCEEDED(IMetaDataImport2_FindField(imp, td, w, NULL, 0, &fd)) && fd &&
                    SUCCEEDED(ICorProfilerInfo5_GetClassLayout(t->info, c, offs, 64, &n, &size)))
                    for (ULONG k = 0; k < n && k < 64; k++)
                        if (offs[k].ridOfField == fd || RidFromToken(offs[k].ridOfField) == RidFromToken(fd))
                            t->message_offset = offs[k].ulOffset;
                if (FAILED(ICorProfilerInfo5_GetStringLayout2(t->info, &t->str_len_off, &t->str_buf_off)))
                    t->message_offset = 0;
                t->exception_cls = c;
            }
            IUnknown_Release(unk);
            c = parent;
        }
        if (!t->message_offset)
            t->message_tried = 0 /* retry with the next exception */, t->exception_cls = 0;
        if (!t->message_offset)
            return;
    }
    if (!t->message_offset || !obj)
        return;
    uintptr_t str = 0;
    memcpy(&str, (const void *)(obj + t->message_offset), sizeof str);
    if (!str)
        return;
    int32_t len = 0;
    memcpy(&len, (const void *)(str + t->str_len_off), sizeof len);
    if (len <= 0)
        return;
    if (len > EXC_MSG_MAX)
        len = EXC_MSG_MAX;
    WCHAR w[EXC_MSG_MAX];
    memcpy(w, (const void *)(str + t->str_buf_off), (size_t)len * sizeof(WCHAR));
    tracer_to_utf8(w, (size_t)len, out, outsz);
}

/* The id of (name, msg): found, or added (under exc_lock). */
static uint32_t intern_locked(struct tracer *t, const char *name, const char *msg)
{
    uint32_t id = 0, n = atomic_load(&t->nexc), type_only = 0;
    for (uint32_t i = 0; i < n && !id; i++)
        if (strcmp(t->exc_names[i], name) == 0) {
            if (strcmp(t->exc_msgs[i], msg) == 0)
                id = i + 1;
            else if (!t->exc_msgs[i][0])
                type_only = i + 1;
        }
    if (!id && n < MAX_EXC_NAMES) {
        snprintf(t->exc_names[n], sizeof t->exc_names[n], "%s", name);
        snprintf(t->exc_msgs[n], sizeof t->exc_msgs[n], "%s", msg);
        atomic_store_explicit(&t->nexc, n + 1, memory_order_release);
        id = n + 1;
    }
    return id ? id : type_only; /* the table is full: the type without its message, if known */
}

uint32_t tracer_exc_intern(struct tracer *t, const char *type, const char *msg)
{
    if (!type || !*type)
        return 0;
    char m[EXC_MSG_MAX];
    snprintf(m, sizeof m, "%s", msg ? msg : "");
    pthread_mutex_lock(&t->exc_lock);
    uint32_t id = intern_locked(t, type, m);
    pthread_mutex_unlock(&t->exc_lock);
    return id;
}

/* The id of the (type name, message) pair of a thrown exception (1..MAX_EXC_NAMES), or 0. */
uint32_t tracer_exception_name_id(struct tracer *t, ObjectID obj, ClassID cls)
{
    uint32_t id = 0;
    char name[160] = "", msg[EXC_MSG_MAX];
    pthread_mutex_lock(&t->exc_lock);
    for (uint32_t i = 0; i < t->nexc_cache; i++)
        if (t->exc_cache[i].cls == cls) {
            id = t->exc_cache[i].id;
            snprintf(name, sizeof name, "%s", t->exc_names[id - 1]);
            break;
        }
    if (!name[0]) {
        ModuleID mod = 0;
        mdTypeDef td = 0;
        if (FAILED(ICorProfilerInfo5_GetClassIDInfo(t->info, cls, &mod, &td)) || !td)
            goto done;
        IUnknown *unk = NULL;
        if (FAILED(ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead, &IID_IMetaDataImport2, &unk)) || !unk)
            goto done;
        int ok = tracer_type_full_name((IMetaDataImport2 *)unk, td, name, sizeof name, 0) == 0;
        IUnknown_Release(unk);
        if (!ok)
            goto done;
    }
    exception_message(t, obj, cls, msg, sizeof msg);
    id = intern_locked(t, name, msg);
    int cached = 0;
    for (uint32_t i = 0; i < t->nexc_cache && !cached; i++)
        cached = t->exc_cache[i].cls == cls;
    if (id && !cached && t->nexc_cache < MAX_EXC_CACHE) {
        t->exc_cache[t->nexc_cache].cls = cls;
        t->exc_cache[t->nexc_cache].id = id;
        t->nexc_cache++;
    }
done:
    pthread_mutex_unlock(&t->exc_lock);
    return id;
}
