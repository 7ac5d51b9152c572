/* Zeroed tables that cost nothing until used: clrmux_lazy_calloc maps anonymous memory, which
 * the kernel hands out as zero pages on first touch, so a large table sized for the worst
 * case costs neither a memset nor page faults at start-up (calloc may clear recycled heap
 * memory: glibc raises its mmap threshold once the runtime frees a large block). */
#ifndef CLRMUX_LAZYMEM_H
#define CLRMUX_LAZYMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#define CLRMUX_LAZY_HDR 64 /* keeps the table 64-byte aligned; holds the mapping's length */

/* n * size zero bytes, 64-byte aligned, or NULL (overflow, or no memory). Free with
 * clrmux_lazy_free, never free(). */
static inline void *clrmux_lazy_calloc(size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - CLRMUX_LAZY_HDR) / size)
        return NULL;
    size_t len = n * size + CLRMUX_LAZY_HDR;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    *(size_t *)(void *)p = len;
    return p + CLRMUX_LAZY_HDR;
}

/* Unmaps a table from clrmux_lazy_calloc; NULL is ignored. */
static inline void clrmux_lazy_free(void *q)
{
    if (q) {
        char *p = (char *)q - CLRMUX_LAZY_HDR;
        munmap(p, *(size_t *)(void *)p);
    }
}

#endif
