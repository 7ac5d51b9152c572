/* libFuzzer target: src/common/mdtables.c on arbitrary images, as files on disk and as mapped
 * layouts (the first byte picks): a method looked up by name, and the tables opened and every
 * name lookup made on rows in and out of range (the second to fifth bytes pick the rows). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/mdtables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    const uint8_t *img = data + 5;
    size_t len = size - 5;
    int mapped = data[0] & 1;
    uint32_t tok = 0;
    (void)clrmux_md_find_method(img, len, mapped, "System", "AppContext", "OnUnhandledException", &tok);
    if (len > 4096) {
        (void)clrmux_md_mapped_size(img);
        (void)clrmux_md_flat_size(img);
    }
    struct clrmux_md md;
    if (clrmux_md_open(&md, img, len, mapped) != 0)
        return 0;
    uint32_t t = (uint32_t)data[1] | (uint32_t)data[2] << 8, m = (uint32_t)data[3] | (uint32_t)data[4] << 8;
    uint32_t tds[] = {0x02000000u | t, 0x02000001u, 0x02000000u | md.typedefs, 0x02000000u | (md.typedefs + 1)};
    uint32_t mds[] = {0x06000000u | m, 0x06000001u, 0x06000000u | md.methoddefs, 0x06000000u | (md.methoddefs + 1)};
    for (int i = 0; i < 4; i++) {
        const char *ns, *name;
        uint32_t outer = 0, owner = 0;
        if (clrmux_md_type_name(&md, tds[i], &ns, &name) == 0 && strlen(ns) + strlen(name) > len)
            __builtin_trap();
        for (int depth = 0; depth < 8 && clrmux_md_enclosing_type(&md, depth ? outer : tds[i], &outer) == 0 && outer;
             depth++)
            (void)clrmux_md_type_name(&md, outer, &ns, &name);
        if (clrmux_md_method_name(&md, mds[i], &name, &owner) == 0 && owner)
            (void)clrmux_md_type_name(&md, owner, &ns, &name);
    }
    return 0;
}
