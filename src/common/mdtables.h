/* Reading a method's token by name straight from a module's ECMA-335 metadata tables in
 * memory (ECMA-335 II.24: the PE file's CLI header, the metadata root, the #~ and #Strings
 * streams; II.22: the Module, TypeRef, TypeDef, FieldPtr, Field, MethodPtr and MethodDef
 * tables), without the runtime's public metadata importer.
 *
 * Why: ICorProfilerInfo::GetModuleMetaData makes the runtime convert the module's internal
 * metadata reader to its read/write form for the rest of the process
 * (ProfToEEInterfaceImpl::GetModuleMetaData -> Module::GetImporter ->
 * ConvertMDInternalToReadWrite, dotnet/runtime), and every later read the runtime makes of that
 * module's metadata is then slower: ~3 ms of a hello world's CPU for System.Private.CoreLib
 * (bench/README.md, start-up). The few names clrmux needs at start-up are read here instead.
 *
 * Everything read is bounds-checked against the image's extent; a malformed or unexpected
 * image (an uncompressed #- stream, pointer tables) is refused (0), never read past. */
#ifndef CLRMUX_COMMON_MDTABLES_H
#define CLRMUX_COMMON_MDTABLES_H

#include <stddef.h>
#include <stdint.h>

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

/* SizeOfImage from the PE headers of an image mapped as loaded at `base` (the headers are read
 * within its first 4 KB page, which a mapped image always has), or 0 when `base` does not
 * start with DOS and PE headers. */
size_t clrmux_md_mapped_size(const uint8_t *base);

#endif
