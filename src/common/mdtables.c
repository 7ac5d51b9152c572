/* Names and tokens read from a module's ECMA-335 metadata tables in memory (mdtables.h). */
#include "common/mdtables.h"

#include <string.h>

/* A little-endian field at `off` of `n` bytes (1, 2 or 4) of [p, p + len); 0 if out of bounds
 * (*ok cleared). */
static uint32_t rd(const uint8_t *p, size_t len, size_t off, unsigned n, int *ok)
{
    if (off > len || n > len - off) {
        *ok = 0;
        return 0;
    }
    uint32_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint32_t)p[off + i] << (8 * i);
    return v;
}

/* Offset in the image of `rva`, `size` bytes long, or (size_t)-1. */
static size_t rva_to_off(const uint8_t *img, size_t len, int mapped, size_t sections, unsigned nsec, uint32_t rva,
                         uint32_t size)
{
    if (mapped)
        return (size_t)rva <= len && size <= len - rva ? (size_t)rva : (size_t)-1;
    int ok = 1;
    for (unsigned i = 0; i < nsec; i++) {
        size_t s = sections + (size_t)i * 40;
        uint32_t vsize = rd(img, len, s + 8, 4, &ok), va = rd(img, len, s + 12, 4, &ok);
        uint32_t rawsize = rd(img, len, s + 16, 4, &ok), raw = rd(img, len, s + 20, 4, &ok);
        if (!ok)
            return (size_t)-1;
        uint32_t extent = vsize > rawsize ? vsize : rawsize;
        if (rva >= va && rva - va < extent && size <= rawsize && rva - va <= rawsize - size) {
            size_t off = (size_t)raw + (rva - va);
            return off <= len && size <= len - off ? off : (size_t)-1;
        }
    }
    return (size_t)-1;
}

/* The NUL-terminated string at `off` of the #Strings heap, or NULL when it does not end
 * within the heap. */
static const char *heap_str(const struct clrmux_md *md, uint32_t off)
{
    if (off >= md->strings_len || !memchr(md->strings + off, 0, md->strings_len - off))
        return NULL;
    return (const char *)md->strings + off;
}

/* ---- the tables' schema (II.22) ------------------------------------------------------- */

/* A column: a table index (< 64: an index into that table), a coded index (C_ + its kind),
 * or a constant, heap-index or fixed size. */
enum { C_TDOR = 64, C_HASCONST, C_HASCA, C_HASFM, C_HASDS, C_MRP, C_HASSEM, C_MDOR, C_MFWD, C_IMPL, C_CAT, C_RS,
       C_TOMD, C_LAST, U16 = 100, U32, STR, GUID, BLOB };

/* The coded indexes (II.24.2.6): tag bits, how many tables, and the tables they index. */
static const struct {
    uint8_t bits, n, t[22];
} k_coded[C_LAST - C_TDOR] = {
    [C_TDOR - C_TDOR] = {2, 3, {0x02, 0x01, 0x1B}},
    [C_HASCONST - C_TDOR] = {2, 3, {0x04, 0x08, 0x17}},
    [C_HASCA - C_TDOR] = {5, 22, {0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0A, 0x00, 0x0E, 0x17, 0x14, 0x11, 0x1A,
                                  0x1B, 0x20, 0x23, 0x26, 0x27, 0x28, 0x2A, 0x2C, 0x2B}},
    [C_HASFM - C_TDOR] = {1, 2, {0x04, 0x08}},
    [C_HASDS - C_TDOR] = {2, 3, {0x02, 0x06, 0x20}},
    [C_MRP - C_TDOR] = {3, 5, {0x02, 0x01, 0x1A, 0x06, 0x1B}},
    [C_HASSEM - C_TDOR] = {1, 2, {0x14, 0x17}},
    [C_MDOR - C_TDOR] = {1, 2, {0x06, 0x0A}},
    [C_MFWD - C_TDOR] = {1, 2, {0x04, 0x06}},
    [C_IMPL - C_TDOR] = {2, 3, {0x26, 0x23, 0x27}},
    [C_CAT - C_TDOR] = {3, 2, {0x06, 0x0A}}, /* tags 2 and 3; 0, 1 and 4 are unused */
    [C_RS - C_TDOR] = {2, 4, {0x00, 0x1A, 0x23, 0x01}},
    [C_TOMD - C_TDOR] = {1, 2, {0x02, 0x06}},
};

#define MAX_COLS 9
/* The columns of tables 0x00..0x2C, in order (0-terminated: no table has a column 0 that is
 * an index into the Module table). */
static const uint8_t k_schema[0x2D][MAX_COLS] = {
    [0x00] = {U16, STR, GUID, GUID, GUID},                    /* Module */
    [0x01] = {C_RS, STR, STR},                                /* TypeRef */
    [0x02] = {U32, STR, STR, C_TDOR, 0x04, 0x06},             /* TypeDef */
    [0x03] = {0x04},                                          /* FieldPtr */
    [0x04] = {U16, STR, BLOB},                                /* Field */
    [0x05] = {0x06},                                          /* MethodPtr */
    [0x06] = {U32, U16, U16, STR, BLOB, 0x08},                /* MethodDef */
    [0x07] = {0x08},                                          /* ParamPtr */
    [0x08] = {U16, U16, STR},                                 /* Param */
    [0x09] = {0x02, C_TDOR},                                  /* InterfaceImpl */
    [0x0A] = {C_MRP, STR, BLOB},                              /* MemberRef */
    [0x0B] = {U16, C_HASCONST, BLOB},                         /* Constant (type, padding) */
    [0x0C] = {C_HASCA, C_CAT, BLOB},                          /* CustomAttribute */
    [0x0D] = {C_HASFM, BLOB},                                 /* FieldMarshal */
    [0x0E] = {U16, C_HASDS, BLOB},                            /* DeclSecurity */
    [0x0F] = {U16, U32, 0x02},                                /* ClassLayout */
    [0x10] = {U32, 0x04},                                     /* FieldLayout */
    [0x11] = {BLOB},                                          /* StandAloneSig */
    [0x12] = {0x02, 0x14},                                    /* EventMap */
    [0x13] = {0x14},                                          /* EventPtr */
    [0x14] = {U16, STR, C_TDOR},                              /* Event */
    [0x15] = {0x02, 0x17},                                    /* PropertyMap */
    [0x16] = {0x17},                                          /* PropertyPtr */
    [0x17] = {U16, STR, BLOB},                                /* Property */
    [0x18] = {U16, 0x06, C_HASSEM},                           /* MethodSemantics */
    [0x19] = {0x02, C_MDOR, C_MDOR},                          /* MethodImpl */
    [0x1A] = {STR},                                           /* ModuleRef */
    [0x1B] = {BLOB},                                          /* TypeSpec */
    [0x1C] = {U16, C_MFWD, STR, 0x1A},                        /* ImplMap */
    [0x1D] = {U32, 0x04},                                     /* FieldRVA */
    [0x1E] = {U32, U32},                                      /* ENCLog */
    [0x1F] = {U32},                                           /* ENCMap */
    [0x20] = {U32, U16, U16, U16, U16, U32, BLOB, STR, STR},  /* Assembly */
    [0x21] = {U32},                                           /* AssemblyProcessor */
    [0x22] = {U32, U32, U32},                                 /* AssemblyOS */
    [0x23] = {U16, U16, U16, U16, U32, BLOB, STR, STR, BLOB}, /* AssemblyRef */
    [0x24] = {U32, 0x23},                                     /* AssemblyRefProcessor */
    [0x25] = {U32, U32, U32, 0x23},                           /* AssemblyRefOS */
    [0x26] = {U32, STR, BLOB},                                /* File */
    [0x27] = {U32, U32, STR, STR, C_IMPL},                    /* ExportedType */
    [0x28] = {U32, U32, STR, C_IMPL},                         /* ManifestResource */
    [0x29] = {0x02, 0x02},                                    /* NestedClass */
    [0x2A] = {U16, U16, C_TOMD, STR},                         /* GenericParam */
    [0x2B] = {C_MDOR, BLOB},                                  /* MethodSpec */
    [0x2C] = {0x2A, C_TDOR},                                  /* GenericParamConstraint */
};

/* Bytes of column `c` given the row counts and the heaps' index sizes. */
static unsigned col_size(uint8_t c, const uint32_t rows[64], unsigned str, unsigned guid, unsigned blob)
{
    switch (c) {
    case U16: return 2;
    case U32: return 4;
    case STR: return str;
    case GUID: return guid;
    case BLOB: return blob;
    default: break;
    }
    if (c < 64)
        return rows[c] < 0x10000u ? 2 : 4;
    uint32_t max = 0;
    for (unsigned i = 0; i < k_coded[c - C_TDOR].n; i++)
        if (rows[k_coded[c - C_TDOR].t[i]] > max)
            max = rows[k_coded[c - C_TDOR].t[i]];
    return max < (1u << (16 - k_coded[c - C_TDOR].bits)) ? 2 : 4;
}

/* ---- opening a module's tables -------------------------------------------------------- */

int clrmux_md_open(struct clrmux_md *md, const uint8_t *img, size_t len, int mapped)
{
    memset(md, 0, sizeof *md);
    int ok = 1;
    if (!img || len < 0x40 || img[0] != 'M' || img[1] != 'Z')
        return -1;
    /* PE headers (II.25.2) */
    size_t pe = rd(img, len, 0x3c, 4, &ok);
    if (!ok || rd(img, len, pe, 4, &ok) != 0x4550u) /* "PE\0\0" */
        return -1;
    unsigned nsec = rd(img, len, pe + 6, 2, &ok);
    unsigned optsize = rd(img, len, pe + 20, 2, &ok);
    size_t opt = pe + 24;
    unsigned magic = rd(img, len, opt, 2, &ok);
    size_t dirs = opt + (magic == 0x20b ? 112 : magic == 0x10b ? 96 : (size_t)optsize);
    if (!ok || (magic != 0x20b && magic != 0x10b) || dirs + 15 * 8 > opt + optsize)
        return -1;
    uint32_t cli_rva = rd(img, len, dirs + 14 * 8, 4, &ok); /* the CLI header's data directory */
    size_t sections = opt + optsize;
    size_t cli = rva_to_off(img, len, mapped, sections, nsec, cli_rva, 72);
    if (!ok || cli == (size_t)-1)
        return -1;
    uint32_t md_rva = rd(img, len, cli + 8, 4, &ok), md_size = rd(img, len, cli + 12, 4, &ok);
    size_t mdo = rva_to_off(img, len, mapped, sections, nsec, md_rva, md_size);
    if (!ok || mdo == (size_t)-1 || md_size < 32)
        return -1;
    /* the metadata root (II.24.2.1): streams are relative to it, within md_size */
    const uint8_t *root = img + mdo;
    if (rd(root, md_size, 0, 4, &ok) != 0x424A5342u) /* "BSJB" */
        return -1;
    uint32_t vlen = rd(root, md_size, 12, 4, &ok);
    if (!ok || vlen > md_size)
        return -1;
    size_t p = 16 + (size_t)vlen + 2;
    unsigned nstreams = rd(root, md_size, p, 2, &ok);
    p += 2;
    const uint8_t *tables = NULL;
    size_t tables_len = 0;
    for (unsigned i = 0; ok && i < nstreams; i++) {
        uint32_t off = rd(root, md_size, p, 4, &ok), size = rd(root, md_size, p + 4, 4, &ok);
        size_t name = p + 8, n = 0;
        while (name + n < md_size && root[name + n] && n < 32)
            n++;
        if (!ok || name + n >= md_size || off > md_size || size > md_size - off)
            return -1;
        if (n == 2 && memcmp(root + name, "#~", 2) == 0)
            tables = root + off, tables_len = size;
        else if (n == 8 && memcmp(root + name, "#Strings", 8) == 0)
            md->strings = root + off, md->strings_len = size;
        else if (n == 5 && memcmp(root + name, "#Blob", 5) == 0)
            md->blobs = root + off, md->blobs_len = size;
        else if (n == 2 && memcmp(root + name, "#-", 2) == 0)
            return -1; /* uncompressed tables (edit and continue): not read here */
        p = name + ((n + 4) & ~(size_t)3);
    }
    if (!tables || !md->strings)
        return -1;
    /* the #~ stream (II.24.2.6): row counts of the tables present, then the tables in order */
    unsigned heaps = rd(tables, tables_len, 6, 1, &ok);
    uint32_t valid_lo = rd(tables, tables_len, 8, 4, &ok), valid_hi = rd(tables, tables_len, 12, 4, &ok);
    uint32_t sorted_hi = rd(tables, tables_len, 20, 4, &ok);
    uint32_t rows[64] = {0};
    size_t q = 24;
    for (unsigned t = 0; t < 64; t++)
        if ((t < 32 ? valid_lo >> t : valid_hi >> (t - 32)) & 1) {
            rows[t] = rd(tables, tables_len, q, 4, &ok);
            q += 4;
        }
    if (heaps & 0x40)
        q += 4; /* extra data after the row counts */
    if (!ok || rows[0x03] || rows[0x05])
        return -1; /* FieldPtr / MethodPtr indirection: not read here */
    const unsigned str = heaps & 1 ? 4 : 2, guid = heaps & 2 ? 4 : 2, blob = heaps & 4 ? 4 : 2;
    size_t at[0x2A], row[0x2A];
    for (unsigned t = 0; t < 0x2A; t++) { /* up to NestedClass: every table before it is known */
        row[t] = 0;
        for (unsigned c = 0; c < MAX_COLS && k_schema[t][c]; c++)
            row[t] += col_size(k_schema[t][c], rows, str, guid, blob);
        at[t] = q;
        if (q > tables_len || rows[t] > (tables_len - q) / row[t])
            return -1;
        q += rows[t] * row[t];
    }
    md->tables = tables;
    md->tables_len = tables_len;
    md->str = (uint8_t)str;
    md->typedefs = rows[0x02], md->methoddefs = rows[0x06], md->nested = rows[0x29];
    md->typedef_at = at[0x02], md->methoddef_at = at[0x06], md->nested_at = at[0x29];
    md->typedef_row = row[0x02], md->methoddef_row = row[0x06], md->nested_row = row[0x29];
    md->typedef_list = 4 + 2 * str + col_size(C_TDOR, rows, str, guid, blob) + col_size(0x04, rows, str, guid, blob);
    md->method_idx = (uint8_t)col_size(0x06, rows, str, guid, blob);
    md->typedef_idx = (uint8_t)col_size(0x02, rows, str, guid, blob);
    md->blob = (uint8_t)blob;
    md->nested_sorted = (sorted_hi >> (0x29 - 32)) & 1;
    return 0;
}

/* ---- names ---------------------------------------------------------------------------- */

/* Column at `col` (`n` bytes) of row `rid` (1-based) of the table at `at` with `row`-byte rows. */
static uint32_t cell(const struct clrmux_md *md, size_t at, size_t row, uint32_t rid, size_t col, unsigned n, int *ok)
{
    return rd(md->tables, md->tables_len, at + (size_t)(rid - 1) * row + col, n, ok);
}

int clrmux_md_type_name(const struct clrmux_md *md, uint32_t td, const char **ns, const char **name)
{
    *ns = *name = NULL;
    uint32_t rid = td & 0xffffff;
    int ok = 1;
    if (!md->tables || td >> 24 != 0x02 || rid == 0 || rid > md->typedefs)
        return -1;
    const char *a = heap_str(md, cell(md, md->typedef_at, md->typedef_row, rid, 4, md->str, &ok));
    const char *b = heap_str(md, cell(md, md->typedef_at, md->typedef_row, rid, 4 + md->str, md->str, &ok));
    if (!ok || !a || !b)
        return -1;
    *name = a, *ns = b;
    return 0;
}

int clrmux_md_method_name(const struct clrmux_md *md, uint32_t mdef, const char **name, uint32_t *owner)
{
    *name = NULL;
    *owner = 0;
    uint32_t rid = mdef & 0xffffff;
    int ok = 1;
    if (!md->tables || mdef >> 24 != 0x06 || rid == 0 || rid > md->methoddefs)
        return -1;
    const char *s = heap_str(md, cell(md, md->methoddef_at, md->methoddef_row, rid, 8, md->str, &ok));
    if (!ok || !s)
        return -1;
    /* the owner: the last TypeDef whose method list starts at or before the method (the
     * lists are runs, in TypeDef order, II.22.37) */
    uint32_t lo = 1, hi = md->typedefs, found = 0;
    while (lo <= hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint32_t first = cell(md, md->typedef_at, md->typedef_row, mid, md->typedef_list, md->method_idx, &ok);
        if (!ok)
            return -1;
        if (first <= rid)
            found = mid, lo = mid + 1;
        else
            hi = mid - 1;
    }
    *name = s;
    *owner = found ? 0x02000000u | found : 0;
    return 0;
}

int clrmux_md_enclosing_type(const struct clrmux_md *md, uint32_t td, uint32_t *outer)
{
    *outer = 0;
    uint32_t rid = td & 0xffffff;
    int ok = 1;
    if (!md->tables || td >> 24 != 0x02 || rid == 0 || rid > md->typedefs)
        return -1;
    const unsigned w = md->typedef_idx;
    uint32_t lo = 1, hi = md->nested;
    if (md->nested_sorted) { /* sorted by the nested type (II.22.32): narrow to its row */
        while (lo <= hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            uint32_t v = cell(md, md->nested_at, md->nested_row, mid, 0, w, &ok);
            if (!ok)
                return -1;
            if (v == rid) {
                lo = hi = mid;
                break;
            }
            if (v < rid)
                lo = mid + 1;
            else
                hi = mid - 1;
        }
    }
    for (uint32_t i = lo; i <= hi && i != 0; i++) {
        if (cell(md, md->nested_at, md->nested_row, i, 0, w, &ok) == rid && ok) {
            uint32_t e = cell(md, md->nested_at, md->nested_row, i, w, w, &ok);
            if (!ok || e == 0 || e > md->typedefs)
                return -1;
            *outer = 0x02000000u | e;
            return 0;
        }
        if (!ok)
            return -1;
    }
    return 0;
}

/* ---- a method by name ----------------------------------------------------------------- */

static int str_is(const struct clrmux_md *md, uint32_t off, const char *s)
{
    const char *h = heap_str(md, off);
    return h && strcmp(h, s) == 0;
}

/* Whether blob `off` of the #Blob heap (a compressed length, II.24.2.4, then the bytes) is
 * sig[0..siglen). */
static int blob_is(const struct clrmux_md *md, uint32_t off, const uint8_t *sig, size_t siglen)
{
    if (!md->blobs || off >= md->blobs_len)
        return 0;
    const uint8_t *p = md->blobs + off;
    size_t left = md->blobs_len - off, n, hdr;
    if (!(p[0] & 0x80))
        n = p[0], hdr = 1;
    else if ((p[0] & 0xC0) == 0x80 && left >= 2)
        n = (size_t)(p[0] & 0x3F) << 8 | p[1], hdr = 2;
    else if ((p[0] & 0xE0) == 0xC0 && left >= 4)
        n = (size_t)(p[0] & 0x1F) << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3], hdr = 4;
    else
        return 0;
    return n == siglen && hdr + n <= left && memcmp(p + hdr, sig, siglen) == 0;
}

int clrmux_md_find_method(const uint8_t *img, size_t len, int mapped, const char *ns, const char *type,
                          const char *method, uint32_t *token)
{
    return clrmux_md_find_method_sig(img, len, mapped, ns, type, method, NULL, 0, token);
}

int clrmux_md_find_method_sig(const uint8_t *img, size_t len, int mapped, const char *ns, const char *type,
                              const char *method, const uint8_t *sig, size_t siglen, uint32_t *token)
{
    *token = 0;
    struct clrmux_md md;
    if (clrmux_md_open(&md, img, len, mapped) != 0)
        return -1;
    int ok = 1;
    for (uint32_t i = 1; i <= md.typedefs; i++) {
        if (!str_is(&md, cell(&md, md.typedef_at, md.typedef_row, i, 4, md.str, &ok), type) ||
            !str_is(&md, cell(&md, md.typedef_at, md.typedef_row, i, 4 + md.str, md.str, &ok), ns))
            continue;
        uint32_t first = cell(&md, md.typedef_at, md.typedef_row, i, md.typedef_list, md.method_idx, &ok);
        uint32_t end = i < md.typedefs
                           ? cell(&md, md.typedef_at, md.typedef_row, i + 1, md.typedef_list, md.method_idx, &ok)
                           : md.methoddefs + 1;
        if (!ok || first == 0 || end > md.methoddefs + 1)
            return -1;
        for (uint32_t m = first; m < end; m++)
            if (str_is(&md, cell(&md, md.methoddef_at, md.methoddef_row, m, 8, md.str, &ok), method) &&
                (!sig || blob_is(&md, cell(&md, md.methoddef_at, md.methoddef_row, m, 8 + md.str, md.blob, &ok), sig,
                                 siglen))) {
                *token = ok ? 0x06000000u | m : 0;
                return ok ? 0 : -1;
            }
        return ok ? 0 : -1;
    }
    return ok ? 0 : -1;
}

/* ---- image sizes ---------------------------------------------------------------------- */

size_t clrmux_md_mapped_size(const uint8_t *base)
{
    /* the headers lie in the image's first page (II.25.2: the PE header follows the DOS stub) */
    const size_t page = 4096;
    int ok = 1;
    if (!base || base[0] != 'M' || base[1] != 'Z')
        return 0;
    size_t pe = rd(base, page, 0x3c, 4, &ok);
    if (!ok || rd(base, page, pe, 4, &ok) != 0x4550u)
        return 0;
    uint32_t size = rd(base, page, pe + 24 + 56, 4, &ok); /* SizeOfImage (PE32 and PE32+ alike) */
    return ok && size >= page ? size : 0;
}

size_t clrmux_md_flat_size(const uint8_t *base)
{
    int ok = 1;
    if (!base || base[0] != 'M' || base[1] != 'Z')
        return 0;
    /* read as far as the headers say they reach, within the first 4 KB (the section table
     * of a PE file the runtime accepted lies within its headers) */
    const size_t page = 4096;
    size_t pe = rd(base, 0x40, 0x3c, 4, &ok);
    if (!ok || pe > page - 24 || rd(base, page, pe, 4, &ok) != 0x4550u)
        return 0;
    unsigned nsec = rd(base, page, pe + 6, 2, &ok), optsize = rd(base, page, pe + 20, 2, &ok);
    size_t sections = pe + 24 + optsize;
    size_t end = rd(base, page, pe + 24 + 60, 4, &ok); /* SizeOfHeaders */
    if (!ok || sections > page || nsec > (page - sections) / 40)
        return 0;
    for (unsigned i = 0; i < nsec; i++) {
        size_t s = sections + (size_t)i * 40;
        size_t raw_end = (size_t)rd(base, page, s + 20, 4, &ok) + rd(base, page, s + 16, 4, &ok);
        if (raw_end > end)
            end = raw_end;
    }
    return ok && end >= sections + (size_t)nsec * 40 ? end : 0;
}
