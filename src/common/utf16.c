#include "common/utf16.h"

size_t clrmux_utf16_to_utf8(const WCHAR *s, size_t len, char *out, size_t outsz)
{
    size_t n = 0;
    if (outsz == 0)
        return 0;
    for (size_t i = 0; i < len && s[i]; i++) {
        uint32_t cp = s[i];
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < len && s[i + 1] >= 0xDC00 && s[i + 1] <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (s[i + 1] - 0xDC00u);
            i++;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD;
        }
        char b[4];
        size_t k;
        if (cp < 0x80) b[0] = (char)cp, k = 1;
        else if (cp < 0x800) b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
        else if (cp < 0x10000)
            b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
        else
            b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
            b[2] = (char)(0x80 | (cp >> 6 & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
        if (n + k + 1 > outsz)
            break;
        for (size_t j = 0; j < k; j++) out[n++] = b[j];
    }
    out[n] = 0;
    return n;
}

size_t clrmux_utf8_to_utf16(const char *s, WCHAR *out, size_t outsz)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    if (outsz == 0)
        return 0;
    while (*p) {
        uint32_t cp;
        int extra;
        if (*p < 0x80) cp = *p, extra = 0;
        else if ((*p & 0xE0) == 0xC0) cp = *p & 0x1F, extra = 1;
        else if ((*p & 0xF0) == 0xE0) cp = *p & 0x0F, extra = 2;
        else if ((*p & 0xF8) == 0xF0) cp = *p & 0x07, extra = 3;
        else cp = 0xFFFD, extra = -1;
        p++;
        for (int j = 0; j < extra; j++, p++) {
            if ((*p & 0xC0) != 0x80) {
                cp = 0xFFFD;
                break;
            }
            cp = cp << 6 | (*p & 0x3F);
        }
        size_t need = cp >= 0x10000 ? 2 : 1;
        if (n + need + 1 > outsz)
            break;
        if (cp >= 0x10000 && cp <= 0x10FFFF) {
            cp -= 0x10000;
            out[n++] = (WCHAR)(0xD800 + (cp >> 10));
            out[n++] = (WCHAR)(0xDC00 + (cp & 0x3FF));
        } else {
            out[n++] = (WCHAR)(cp > 0x10FFFF ? 0xFFFD : cp);
        }
    }
    out[n] = 0;
    return n;
}
