/* Zeroed tables that cost nothing until used: clrmux_lazy_calloc maps anonymous memory, which
 * the kernel hands out as zero pages on first touch, so a large table sized for the worst
 * case costs neither a memset nor page faults at start-up (calloc may clear recycled heap
 * memory: glibc raises its mmap threshold once the runtime frees a large block). */
#ifndef CLRMUX_LAZYMEM_H
#define CLRMUX_LAZYMEM_H

#include <stddef.h>
#include <stdint.h>
#if !defined(_WIN32)
#include <sys/mman.h>
#endif

#define CLRMUX_LAZY_HDR 64 /* keeps the table 64-byte aligned; holds the mapping's length */

/* len bytes of zeroed, page-aligned memory (anonymous mmap with MAP_NORESERVE; VirtualAlloc on
 * Windows, whose committed pages are also zero and backed only when touched), or NULL. Free
 * with clrmux_unmap_zero(p, len), which ignores NULL. */
#if defined(_WIN32)
void *clrmux_map_zero(size_t len);           /* platform_win.c (windows.h stays out of here) */
void clrmux_unmap_zero(void *p, size_t len);
#else
static inline void *clrmux_map_zero(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline void clrmux_unmap_zero(void *p, size_t len)
{
    if (p)
        munmap(p, len);
}
#endif

static inline void *clrmux_lazy_calloc(size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - CLRMUX_LAZY_HDR) / size)
        return NULL;
    size_t len = n * size + CLRMUX_LAZY_HDR;
    char *p = clrmux_map_zero(len);
    if (!p)
        return NULL;
    *(size_t *)(void *)p = len;
    return p + CLRMUX_LAZY_HDR;
}

/* Unmaps a table from clrmux_lazy_calloc; NULL is ignored. */
static inline void clrmux_lazy_free(void *q)
{
    if (q) {
        char *p = (char *)q - CLRMUX_LAZY_HDR;
        clrmux_unmap_zero(p, *(size_t *)(void *)p);
    }
}

#endif
