/* The size of an ECMA-335 method body from its own headers (see ilsize.h). */
#include "common/ilsize.h"

#define TINY_FORMAT 0x2
#define FAT_FORMAT 0x3
#define MORE_SECTS 0x8    /* fat header flag: data sections follow the code */
#define SECT_FAT 0x40     /* data section with a 3-byte size */
#define SECT_MORE 0x80    /* another data section follows */

size_t clrmux_il_body_size(const uint8_t *body, size_t limit)
{
    if (!body || limit < 1)
        return 0;
    if ((body[0] & 3) == TINY_FORMAT) {
        size_t n = 1 + (size_t)(body[0] >> 2);
        return n <= limit ? n : 0;
    }
    if ((body[0] & 3) != FAT_FORMAT || limit < 12)
        return 0;
    const unsigned flags_size = (unsigned)body[0] | (unsigned)body[1] << 8;
    if (flags_size >> 12 != 3)
        return 0;
    const size_t code = (size_t)body[4] | (size_t)body[5] << 8 | (size_t)body[6] << 16 | (size_t)body[7] << 24;
    if (code > limit - 12)
        return 0;
    size_t end = 12 + code;
    if (!(flags_size & MORE_SECTS))
        return end;
    for (;;) {
        size_t s = (end + 3) & ~(size_t)3;
        if (s + 4 > limit)
            return 0;
        const uint8_t kind = body[s];
        size_t n = kind & SECT_FAT ? (size_t)body[s + 1] | (size_t)body[s + 2] << 8 | (size_t)body[s + 3] << 16
                                   : body[s + 1];
        if (n < 4 || n > limit - s)
            return 0; /* a section's size counts its own header */
        end = s + n;
        if (!(kind & SECT_MORE))
            return end;
    }
}
