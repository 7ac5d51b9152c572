/* A method's token by name from a module's ECMA-335 metadata tables in memory (mdtables.h). */
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

/* The NUL-terminated string at `off` of the #Strings heap equals `s`. */
static int str_is(const uint8_t *heap, size_t hlen, uint32_t off, const char *s)
{
    size_t n = strlen(s);
    return off < hlen && n < hlen - off && memcmp(heap + off, s, n) == 0 && heap[off + n] == 0;
}

/* Bytes of an index into a table of `rows` rows, or of a coded index over tables whose
 * largest has `rows` rows with `tag` tag bits (II.24.2.6). */
static unsigned idx_size(uint32_t rows, unsigned tag) { return rows < (1u << (16 - tag)) ? 2 : 4; }

int clrmux_md_find_method(const uint8_t *img, size_t len, int mapped, const char *ns, const char *type,
                          const char *method, uint32_t *token)
{
    *token = 0;
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
    size_t md = rva_to_off(img, len, mapped, sections, nsec, md_rva, md_size);
    if (!ok || md == (size_t)-1 || md_size < 32)
        return -1;
    /* the metadata root (II.24.2.1): streams are relative to it, within md_size */
    const uint8_t *root = img + md;
    if (rd(root, md_size, 0, 4, &ok) != 0x424A5342u) /* "BSJB" */
        return -1;
    uint32_t vlen = rd(root, md_size, 12, 4, &ok);
    if (!ok || vlen > md_size)
        return -1;
    size_t p = 16 + (size_t)vlen + 2;
    unsigned nstreams = rd(root, md_size, p, 2, &ok);
    p += 2;
    const uint8_t *tables = NULL, *strings = NULL;
    size_t tables_len = 0, strings_len = 0;
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
            strings = root + off, strings_len = size;
        else if (n == 2 && memcmp(root + name, "#-", 2) == 0)
            return -1; /* uncompressed tables (edit and continue): not read here */
        p = name + ((n + 4) & ~(size_t)3);
    }
    if (!tables || !strings)
        return -1;
    /* the #~ stream (II.24.2.6) */
    unsigned heaps = rd(tables, tables_len, 6, 1, &ok);
    uint32_t valid_lo = rd(tables, tables_len, 8, 4, &ok), valid_hi = rd(tables, tables_len, 12, 4, &ok);
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
    uint32_t scope_max = rows[0x00];
    if (rows[0x1A] > scope_max)
        scope_max = rows[0x1A];
    if (rows[0x23] > scope_max)
        scope_max = rows[0x23];
    if (rows[0x01] > scope_max)
        scope_max = rows[0x01];
    uint32_t tdor_max = rows[0x02];
    if (rows[0x01] > tdor_max)
        tdor_max = rows[0x01];
    if (rows[0x1B] > tdor_max)
        tdor_max = rows[0x1B];
    const size_t module_row = 2 + str + 3 * (size_t)guid;
    const size_t typeref_row = idx_size(scope_max, 2) + 2 * (size_t)str;
    const unsigned field_idx = idx_size(rows[0x04], 0), method_idx = idx_size(rows[0x06], 0);
    const size_t typedef_row = 4 + 2 * (size_t)str + idx_size(tdor_max, 2) + field_idx + method_idx;
    const size_t field_row = 2 + (size_t)str + blob;
    const size_t methoddef_row = 8 + (size_t)str + blob + idx_size(rows[0x08], 0);
    const size_t typedefs = q + rows[0x00] * module_row + rows[0x01] * typeref_row;
    const size_t methoddefs = typedefs + rows[0x02] * typedef_row + rows[0x04] * field_row;
    if (typedefs > tables_len || methoddefs > tables_len || rows[0x06] > (tables_len - methoddefs) / methoddef_row)
        return -1;
    /* the type: its name first, then its namespace */
    const size_t name_at = 4, ns_at = 4 + str, list_at = 4 + 2 * (size_t)str + idx_size(tdor_max, 2) + field_idx;
    for (uint32_t i = 0; i < rows[0x02]; i++) {
        size_t r = typedefs + (size_t)i * typedef_row;
        if (!str_is(strings, strings_len, rd(tables, tables_len, r + name_at, str, &ok), type) ||
            !str_is(strings, strings_len, rd(tables, tables_len, r + ns_at, str, &ok), ns))
            continue;
        uint32_t first = rd(tables, tables_len, r + list_at, method_idx, &ok);
        uint32_t end = i + 1 < rows[0x02] ? rd(tables, tables_len, r + typedef_row + list_at, method_idx, &ok)
                                          : rows[0x06] + 1;
        if (!ok || first == 0 || end > rows[0x06] + 1)
            return -1;
        for (uint32_t m = first; m < end; m++) {
            size_t mr = methoddefs + (size_t)(m - 1) * methoddef_row;
            if (str_is(strings, strings_len, rd(tables, tables_len, mr + 8, str, &ok), method)) {
                *token = ok ? 0x06000000u | m : 0;
                return ok ? 0 : -1;
            }
        }
        return ok ? 0 : -1;
    }
    return ok ? 0 : -1;
}

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
