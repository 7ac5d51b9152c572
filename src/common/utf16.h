/* UTF-16 (the runtime's 16-bit WCHAR) <-> UTF-8 at the edge, once. */
#ifndef CLRMUX_UTF16_H
#define CLRMUX_UTF16_H

#include <stddef.h>

#include "clrmux/com.h"

/* Converts at most `len` code units of `s` (stopping early at a NUL) into UTF-8 in
 * out[outsz], always NUL-terminated, truncated at a character boundary. Unpaired
 * surrogates become U+FFFD. Returns the number of bytes written (without the NUL). */
size_t clrmux_utf16_to_utf8(const WCHAR *s, size_t len, char *out, size_t outsz);
/* Converts NUL-terminated UTF-8 `s` into UTF-16 in out[outsz] (code units), always
 * NUL-terminated, truncated at a character boundary; invalid bytes become U+FFFD.
 * Returns the number of code units written (without the NUL). */
size_t clrmux_utf8_to_utf16(const char *s, WCHAR *out, size_t outsz);

#endif
