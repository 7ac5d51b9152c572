/* GUID text form: "{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}" (registry format, braces optional
 * on input, hex digits in either case). */
#ifndef CLRMUX_GUID_H
#define CLRMUX_GUID_H

#include "clrmux/com.h"

/* Parses `s` into `*out`. Returns 0, or -1 when `s` is not exactly one GUID (surrounding
 * spaces are not accepted). */
int clrmux_guid_parse(const char *s, GUID *out);
/* Writes the braced upper-case form into `buf` (at least CLRMUX_GUID_STRLEN bytes). Returns buf. */
char *clrmux_guid_format(const GUID *g, char *buf);

#endif
