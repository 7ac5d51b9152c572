/* libFuzzer target: src/common/mdtables.c on arbitrary images, as files on disk and as mapped
 * layouts (the first byte picks), looking up a method by name. */
#include <stddef.h>
#include <stdint.h>

#include "common/mdtables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t tok = 0;
    (void)clrmux_md_find_method(data + 1, size - 1, data[0] & 1, "System", "AppContext", "OnUnhandledException", &tok);
    if (size > 4096)
        (void)clrmux_md_mapped_size(data + 1);
    return 0;
}
