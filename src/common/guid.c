#include "common/guid.h"

#include <stdio.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int clrmux_guid_parse(const char *s, GUID *out)
{
    size_t len = strlen(s);
    int braces = len > 0 && s[0] == '{';
    if (braces ? (len != 38 || s[37] != '}') : len != 36)
        return -1;
    const char *p = s + braces;
    /* groups of 8-4-4-4-12 hex digits */
    static const int dash_at[] = {8, 13, 18, 23};
    for (int i = 0, d = 0; i < 36; i++) {
        if (d < 4 && i == dash_at[d]) {
            if (p[i] != '-') return -1;
            d++;
        } else if (hexval(p[i]) < 0) {
            return -1;
        }
    }
    uint8_t b[16];
    for (int i = 0, j = 0; i < 36; i++) {
        if (p[i] == '-') continue;
        if (j % 2 == 0) b[j / 2] = (uint8_t)(hexval(p[i]) << 4);
        else b[j / 2] |= (uint8_t)hexval(p[i]);
        j++;
    }
    out->Data1 = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    out->Data2 = (uint16_t)(b[4] << 8 | b[5]);
    out->Data3 = (uint16_t)(b[6] << 8 | b[7]);
    memcpy(out->Data4, b + 8, 8);
    return 0;
}

char *clrmux_guid_format(const GUID *g, char *buf)
{
    snprintf(buf, CLRMUX_GUID_STRLEN, "{%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X}",
             (unsigned)g->Data1, g->Data2, g->Data3, g->Data4[0], g->Data4[1], g->Data4[2],
             g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6], g->Data4[7]);
    return buf;
}
