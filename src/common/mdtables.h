/* Reading names and tokens straight from a module's ECMA-335 metadata tables in memory
 * (ECMA-335 II.24: the PE file's CLI header, the metadata root, the #~ and #Strings streams;
 * II.22: the tables' schema; the TypeDef, MethodDef and NestedClass tables are read), without
 * the runtime's public metadata importer.
 *
 * Why: ICorProfilerInfo::GetModuleMetaData makes the runtime convert the module's internal
 * metadata reader to its read/write form for the rest of the process
 * (ProfToEEInterfaceImpl::GetModuleMetaData -> Module::GetImporter ->
 * ConvertMDInternalToReadWrite, dotnet/runtime), and every later read the runtime makes of that
 * module's metadata is then slower: ~3 ms of a hello world's CPU for System.Private.CoreLib
 * (docs/performance.md, start-up). The tracer's token at start-up and the profiler's frame names
 * are read here instead.
 *
 * Everything read is bounds-checked against the image's extent; a malformed or unexpected
 * image (an uncompressed #- stream, pointer tables) is refused (0), never read past. */
#ifndef CLRMUX_COMMON_MDTABLES_H
#define CLRMUX_COMMON_MDTABLES_H

#include <stddef.h>
#include <stdint.h>

/* A module's metadata tables as clrmux_md_open found them: pointers into the image (valid
 * while it stays mapped; nothing is copied or allocated) and what the lookups below need of
 * the TypeDef (0x02), MethodDef (0x06) and NestedClass (0x29) tables. Read-only after
 * clrmux_md_open: any number of threads may use one at once. */
struct clrmux_md {
    const uint8_t *tables, *strings; /* the #~ stream and the #Strings heap */
    size_t tables_len, strings_len;
    const uint8_t *blobs;            /* the #Blob heap (NULL when the module has none) */
    size_t blobs_len;
    uint32_t typedefs, methoddefs, nested;         /* row counts */
    size_t typedef_at, methoddef_at, nested_at;    /* each table's offset in the #~ stream */
    size_t typedef_row, methoddef_row, nested_row; /* and its row size */
    size_t typedef_list;                           /* TypeDef.MethodList's offset in a row */
    uint8_t str, method_idx, typedef_idx;          /* bytes of a #Strings / MethodDef / TypeDef index */
    uint8_t blob;                                  /* bytes of a #Blob index */
    uint8_t nested_sorted;                         /* NestedClass is marked sorted (II.24.2.6) */
};

/* Finds the metadata tables of the PE image at `image` (`len` bytes readable from it; `mapped`
 * as for clrmux_md_find_method) into *md. Returns 0, or -1 when they cannot be read here (not
 * a PE file with CLI metadata, out of bounds, an uncompressed #- stream, FieldPtr/MethodPtr
 * tables): *md is then zeroed, and the lookups below on it fail (-1). */
int clrmux_md_open(struct clrmux_md *md, const uint8_t *image, size_t len, int mapped);

/* TypeDef `td` (0x02xxxxxx)'s name and namespace (UTF-8 as stored, II.24.2.3; "" when it has
 * no namespace, as nested types usually do), NUL-terminated strings inside the image. Returns
 * 0, or -1 (both NULL) when td is not a TypeDef row of this module or a string does not end
 * within the #Strings heap. */
int clrmux_md_type_name(const struct clrmux_md *md, uint32_t td, const char **ns, const char **name);

/* MethodDef `method` (0x06xxxxxx)'s name (as above) and in *owner the TypeDef token of the
 * type whose method list holds it (0 when none does). Returns 0, or -1 (NULL, 0). */
int clrmux_md_method_name(const struct clrmux_md *md, uint32_t method, const char **name, uint32_t *owner);

/* The TypeDef token of the type that `td` is nested in (NestedClass, II.22.32) into *outer, or
 * 0 when it is not nested. Returns 0, or -1 (*outer 0) when td is not a TypeDef row of this
 * module or its NestedClass row names no TypeDef. */
int clrmux_md_enclosing_type(const struct clrmux_md *md, uint32_t td, uint32_t *outer);

/* Looks up method `method` of the top-level type `ns`.`type` in the PE image at `image` (`len`
 * bytes readable from it) and sets *token to its mdMethodDef token (0x06xxxxxx), or to 0 when
 * the image has no such method; with several of that name, the first in the table. `mapped`:
 * 1 when the image is laid out as loaded (sections at their RVAs, as the runtime maps a
 * ReadyToRun image: GetModuleInfo's base address), 0 when it is the file as on disk (RVAs
 * translated through the section table). Returns 0 when the tables were read, -1 when the
 * image cannot be read here (not a PE file with CLI metadata, out of bounds, an uncompressed
 * #- stream or pointer tables): *token is then 0 and the caller may ask the runtime. */
int clrmux_md_find_method(const uint8_t *image, size_t len, int mapped, const char *ns, const char *type,
                          const char *method, uint32_t *token);
/* The same, among the methods of that name, the one whose signature blob (II.23.2.1) is
 * sig[0..siglen) byte for byte (sig NULL: the first, as clrmux_md_find_method). */
int clrmux_md_find_method_sig(const uint8_t *image, size_t len, int mapped, const char *ns, const char *type,
                              const char *method, const uint8_t *sig, size_t siglen, uint32_t *token);

/* SizeOfImage from the PE headers of an image mapped as loaded at `base` (the headers are read
 * within its first 4 KB page, which a mapped image always has), or 0 when `base` does not
 * start with DOS and PE headers. */
size_t clrmux_md_mapped_size(const uint8_t *base);

/* The extent of a PE image laid out as its file (the runtime's flat layout,
 * COR_PRF_MODULE_FLAT_LAYOUT) at `base`: the end of its headers or of its last section's raw
 * data, whichever is further, or 0 when `base` does not start with DOS and PE headers whose
 * section table lies within the first 4 KB. The headers are read only as far as they say they
 * reach. */
size_t clrmux_md_flat_size(const uint8_t *base);

#endif
