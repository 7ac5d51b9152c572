/* The size of a method body in the ECMA-335 format (II.25.4: a tiny or fat header, the code,
 * then the data sections, e.g. the exception-handling table), read from the body alone, as
 * the runtime reads a body given to ICorProfilerInfo::SetILFunctionBody (which takes no
 * size). */
#ifndef CLRMUX_ILSIZE_H
#define CLRMUX_ILSIZE_H

#include <stddef.h>
#include <stdint.h>

/* The number of bytes of the method body at `body`: header + code (+ padding to 4 and each
 * data section, for a fat header with CorILMethod_MoreSects). 0 when `body` is NULL or its
 * first byte is not a tiny or fat header, a fat header's size is not 3 dwords, or a size
 * is past `limit` bytes (a bound on what may be read; the body is trusted to be that long
 * only as far as its own header says). Reads only the bytes the header and section headers
 * say are there. */
size_t clrmux_il_body_size(const uint8_t *body, size_t limit);

#endif
