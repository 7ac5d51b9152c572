/* pprof output (pprof.h, clrmux_pprof_serialize, clrmux_pprof_write_file): the builder's
 * tables encoded as a profile.proto Profile with protobuf-c, gzip-compressed with zlib,
 * and written to a file atomically (a temporary file renamed over the target). */
#include "profiler/pprof_internal.h"
#include "common/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "profile.pb-c.h"

/* ------------------------------------------------------------------ */
/* serialisation                                                       */

#define N_AUTO_COMMENTS (CLRMUX_PPROF_DROP_REASON_COUNT + 1)

static const char *const drop_reason_text[CLRMUX_PPROF_DROP_REASON_COUNT] = {
    [CLRMUX_PPROF_DROP_SAMPLES] = "buffer full",
    [CLRMUX_PPROF_DROP_FUNCTIONS] = "too many distinct frames",
    [CLRMUX_PPROF_DROP_STRINGS] = "string table full",
    [CLRMUX_PPROF_DROP_NOMEM] = "out of memory",
};

/* Encodes the profile with protobuf-c into a malloc'd buffer. The message
 * tree is built transiently and points into the builder's arrays. */
static int encode(const clrmux_pprof_builder *b, uint8_t **out,
                  size_t *out_len)
{
    char auto_text[N_AUTO_COMMENTS][96];
    size_t n_auto = 0;
    for (size_t r = 0; r < CLRMUX_PPROF_DROP_REASON_COUNT; r++)
        if (b->dropped[r])
            snprintf(auto_text[n_auto++], sizeof auto_text[0],
                     "dropped %llu sample%s: %s",
                     (unsigned long long)b->dropped[r],
                     b->dropped[r] == 1 ? "" : "s", drop_reason_text[r]);
    if (b->truncated)
        snprintf(auto_text[n_auto++], sizeof auto_text[0],
                 "truncated %llu stack%s to %zu frames",
                 (unsigned long long)b->truncated,
                 b->truncated == 1 ? "" : "s", b->lim.max_stack_depth);

    size_t n_str = b->n_strs + n_auto;
    size_t nf = b->n_funcs, ns = b->n_samples, nl = b->n_labs;
    size_t nt = b->n_types;

    char **strtab = malloc(n_str * sizeof *strtab);
    Perftools__Profiles__ValueType *vt = malloc((nt + 1) * sizeof *vt);
    Perftools__Profiles__ValueType **vtp = malloc(nt * sizeof *vtp);
    Perftools__Profiles__Sample *sm = malloc((ns ? ns : 1) * sizeof *sm);
    Perftools__Profiles__Sample **smp = malloc((ns ? ns : 1) * sizeof *smp);
    Perftools__Profiles__Label *lb = malloc((nl ? nl : 1) * sizeof *lb);
    Perftools__Profiles__Label **lbp = malloc((nl ? nl : 1) * sizeof *lbp);
    Perftools__Profiles__Location *lo = malloc((nf ? nf : 1) * sizeof *lo);
    Perftools__Profiles__Location **lop = malloc((nf ? nf : 1) * sizeof *lop);
    Perftools__Profiles__Line *li = malloc((nf ? nf : 1) * sizeof *li);
    Perftools__Profiles__Line **lip = malloc((nf ? nf : 1) * sizeof *lip);
    Perftools__Profiles__Function *fn = malloc((nf ? nf : 1) * sizeof *fn);
    Perftools__Profiles__Function **fnp = malloc((nf ? nf : 1) * sizeof *fnp);
    int64_t comments[CLRMUX_PPROF_MAX_COMMENTS + N_AUTO_COMMENTS];
    Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
    uint8_t *buf = NULL;
    int rc = -ENOMEM;
    if (!strtab || !vt || !vtp || !sm || !smp || !lb || !lbp || !lo ||
        !lop || !li || !lip || !fn || !fnp)
        goto out;

    for (size_t i = 0; i < b->n_strs; i++)
        strtab[i] = (char *)str_text(b, i);
    for (size_t i = 0; i < n_auto; i++)
        strtab[b->n_strs + i] = auto_text[i];
    prof.n_string_table = n_str;
    prof.string_table = strtab;

    for (size_t i = 0; i < nt; i++) {
        Perftools__Profiles__ValueType v = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
        v.type = b->type_str[i];
        v.unit = b->unit_str[i];
        vt[i] = v;
        vtp[i] = &vt[i];
    }
    prof.n_sample_type = nt;
    prof.sample_type = vtp;
    if (b->has_period_type) {
        Perftools__Profiles__ValueType v = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
        v.type = b->period_type_str;
        v.unit = b->period_unit_str;
        vt[nt] = v;
        prof.period_type = &vt[nt];
    }
    prof.period = b->period;
    prof.default_sample_type = b->default_type_str;
    prof.time_nanos = b->time_nanos;
    prof.duration_nanos = b->duration_nanos;

    const uint32_t *fname = b->funcs.p;
    for (size_t i = 0; i < nf; i++) {
        Perftools__Profiles__Function f = PERFTOOLS__PROFILES__FUNCTION__INIT;
        f.id = i + 1;
        f.name = fname[i];
        /* system_name stays 0: pprof treats name == system_name as a
         * possibly mangled C++ symbol and strips "<...>" from it, which
         * would erase .NET generic arguments. */
        fn[i] = f;
        fnp[i] = &fn[i];
        Perftools__Profiles__Line l = PERFTOOLS__PROFILES__LINE__INIT;
        l.function_id = i + 1;
        li[i] = l;
        lip[i] = &li[i];
        Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT;
        loc.id = i + 1;
        loc.n_line = 1;
        loc.line = &lip[i];
        lo[i] = loc;
        lop[i] = &lo[i];
    }
    prof.n_function = nf;
    prof.function = fnp;
    prof.n_location = nf;
    prof.location = lop;

    const struct label_ent *le = b->labs.p;
    for (size_t i = 0; i < nl; i++) {
        Perftools__Profiles__Label l = PERFTOOLS__PROFILES__LABEL__INIT;
        l.key = le[i].key;
        l.str = le[i].str;
        l.num = le[i].num;
        l.num_unit = le[i].unit;
        lb[i] = l;
        lbp[i] = &lb[i];
    }
    const struct sample_ent *se = b->samples.p;
    for (size_t i = 0; i < ns; i++) {
        Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
        s.n_location_id = se[i].n_loc;
        s.location_id = (uint64_t *)b->locs.p + se[i].loc_off;
        s.n_value = nt;
        s.value = (int64_t *)b->values.p + i * nt;
        s.n_label = se[i].n_lab;
        s.label = se[i].n_lab ? &lbp[se[i].lab_off] : NULL;
        sm[i] = s;
        smp[i] = &sm[i];
    }
    prof.n_sample = ns;
    prof.sample = smp;

    size_t nc = 0;
    for (size_t i = 0; i < b->n_comments; i++)
        comments[nc++] = b->comments[i];
    for (size_t i = 0; i < n_auto; i++)
        comments[nc++] = (int64_t)(b->n_strs + i);
    prof.n_comment = nc;
    prof.comment = nc ? comments : NULL;

    size_t len = protobuf_c_message_get_packed_size(&prof.base);
    buf = malloc(len ? len : 1);
    if (!buf)
        goto out;
    if (protobuf_c_message_pack(&prof.base, buf) != len) {
        rc = -EIO;
        goto out;
    }
    *out = buf;
    *out_len = len;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    free(strtab);
    free(vt);
    free(vtp);
    free(sm);
    free(smp);
    free(lb);
    free(lbp);
    free(lo);
    free(lop);
    free(li);
    free(lip);
    free(fn);
    free(fnp);
    return rc;
}

/* gzip-compresses in[0..len) (RFC 1952) into a malloc'd buffer. */
static int gzip_compress(const uint8_t *in, size_t len, uint8_t **out,
                         size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    /* The window no larger than the input (2^9 .. 2^15 bytes) and the hash table to match
     * (memLevel 1..8): the same compression for a small profile, but deflate's state is a few
     * KB instead of 256 KB that deflateInit2/deflateReset allocate and clear (0.7 ms of a
     * short-lived process's exit, measured with perf on a hello world). */
    int wbits = 9;
    while (wbits < 15 && ((size_t)1 << wbits) < len)
        wbits++;
    int mem_level = wbits - 7 < 1 ? 1 : wbits - 7;
    int zrc = deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                           wbits + 16 /* gzip wrapper */, mem_level, Z_DEFAULT_STRATEGY);
    if (zrc != Z_OK)
        return zrc == Z_MEM_ERROR ? -ENOMEM : -EIO;
    size_t cap = deflateBound(&zs, (uLong)len);
    uint8_t *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&zs);
        return -ENOMEM;
    }
    const uint8_t *ip = in;
    size_t in_left = len;
    size_t used = 0;
    for (;;) {
        if (zs.avail_in == 0 && in_left) {
            uInt chunk = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            zs.next_in = (Bytef *)ip;
            zs.avail_in = chunk;
            ip += chunk;
            in_left -= chunk;
        }
        if (used == cap) {
            size_t ncap = cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                deflateEnd(&zs);
                return -ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        size_t room = cap - used;
        zs.next_out = buf + used;
        zs.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt before = zs.avail_out;
        zrc = deflate(&zs, in_left ? Z_NO_FLUSH : Z_FINISH);
        used += before - zs.avail_out;
        if (zrc == Z_STREAM_END)
            break;
        if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
            free(buf);
            deflateEnd(&zs);
            return -EIO;
        }
    }
    deflateEnd(&zs);
    *out = buf;
    *out_len = used;
    return 0;
}

int clrmux_pprof_serialize(const clrmux_pprof_builder *b, uint8_t **out,
                           size_t *out_len)
{
    if (!b || !out || !out_len)
        return -EINVAL;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    int rc = encode(b, &raw, &raw_len);
    if (rc != 0)
        return rc;
    rc = gzip_compress(raw, raw_len, out, out_len);
    free(raw);
    return rc;
}

int clrmux_pprof_write_file(const clrmux_pprof_builder *b, const char *path)
{
    return clrmux_pprof_write_file_flags(b, path, 0);
}

int clrmux_pprof_write_file_flags(const clrmux_pprof_builder *b, const char *path, unsigned flags)
{
    if (!b || !path || !*path)
        return -EINVAL;
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = clrmux_pprof_serialize(b, &data, &len);
    if (rc != 0)
        return rc;
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(data);
        return -ENOMEM;
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    /* a new file: never one planted under the temporary name (a symbolic or hard link
     * would otherwise be followed or truncated); a name that exists is removed and the file
     * created again, once (no unlink before the first try: it cost 30-60 us of a process's
     * exit for a name that is not there) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == EEXIST) {
        unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    }
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    rc = clrmux_write_all(fd, data, len);
    if (rc == 0 && !(flags & CLRMUX_PPROF_WRITE_NO_FSYNC) && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc != 0)
        unlink(tmp);
out:
    free(tmp);
    free(data);
    return rc;
}
