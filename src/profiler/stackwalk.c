/* The signal sampler's stack walk: a bounded frame-pointer (RBP chain) walk that is
 * async-signal-safe and never faults, plus the off-signal lookup of a thread's stack mapping
 * in /proc/self/maps that makes direct reads safe.
 *
 * What a walk trusts: the interrupted IP (always the first frame), and a chain of
 * [saved RBP, return address] pairs that lies on the thread's own stack, strictly above the
 * interrupted RSP and strictly increasing. JIT-compiled code on Linux x64 keeps such a chain
 * (RBP frames); libcoreclr and libc frames may not (RBP used as a general register): such a
 * frame breaks the chain, which the bounds and ordering checks detect, and the walk stops
 * there with what it has (PROF_WALK_BROKEN). A chain that ends with a zero frame pointer or
 * a zero return address (the thread's outermost frame, set up by clone / _start) is
 * complete.
 *
 * The same walk serves arm64: there the frame pointer is x29 and a frame record is
 * [saved x29, saved x30 (the link register, i.e. the return address)], the same layout of
 * two 8-byte words; JIT-compiled code on arm64 always sets one up (AAPCS64 frame records). A
 * leaf function that keeps its return address in x30 without a frame record is seen through
 * its caller's record (its caller's frame is then missing from the walk).
 *
 * OSR frames (a Tier0 method replaced while it runs by its optimized OSR version) link past
 * their Tier0 frame's record: the walk offers the caller found there as a tagged candidate,
 * and prof_osr_fold keeps it, off the signal path, only when the runtime maps the frames
 * around it to one method (prof.h). */
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "profiler/prof.h"

/* process_vm_readv on our own process: a read that reports EFAULT instead of faulting. */
int prof_safe_read16(uint64_t addr, uint64_t out[2])
{
    struct iovec local = {.iov_base = out, .iov_len = 16};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = 16};
    long n = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1ul, &remote, 1ul, 0ul);
    return n == 16 ? 0 : -1;
}

/* Reads through a pointer that the bounds check proved to be inside the mapped stack. Not
 * instrumented: the words read are other frames' saved registers, not C objects. */
__attribute__((no_sanitize("address", "undefined"))) static void direct_read16(uint64_t addr, uint64_t out[2])
{
    const volatile uint64_t *p = (const volatile uint64_t *)(uintptr_t)addr;
    out[0] = p[0];
    out[1] = p[1];
}

int prof_is_code(const struct prof_code_ranges *c, uint64_t a)
{
    if (!c)
        return 0;
    uint32_t lo = 0, hi = c->n < PROF_CODE_RANGES ? c->n : PROF_CODE_RANGES;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a < c->r[mid].lo)
            hi = mid;
        else if (a >= c->r[mid].hi)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* Looks for the first frame record at or above `from` (below `from` + PROF_SCAN_BYTES): a
 * pair [saved RBP, return address] whose saved RBP points higher up the stack, whose
 * return address is in code, and whose next record is either the last one or looks the
 * same. Used past a frame that does not keep RBP (libc's system call wrappers). Direct
 * reads: [from, hi) is mapped. */
static int scan(uint64_t from, uint64_t hi, const struct prof_code_ranges *code, uint64_t *fp, uint64_t *ret)
{
    uint64_t a = (from + 7) & ~7ull;
    for (; a < hi && hi - a >= 16 && a - from < PROF_SCAN_BYTES; a += 8) {
        uint64_t w[2], n[2];
        direct_read16(a, w);
        if ((w[0] & 7) || w[0] < a + 16 || w[0] >= hi || hi - w[0] < 16 || !prof_is_code(code, w[1]))
            continue;
        direct_read16(w[0], n);
        if (n[0] != 0 && (n[0] <= w[0] || n[0] >= hi || (n[0] & 7) || !prof_is_code(code, n[1])))
            continue;
        *fp = w[0];
        *ret = w[1];
        return 0;
    }
    return -1;
}

/* The record of a Tier0 frame that an OSR frame's record skips (prof.h): a word equal to the
 * next frame pointer `next`, followed by a return address, in (fp + 16, next), at most
 * PROF_OSR_SCAN_BYTES above fp + 16 and *budget bytes: the first whose return address is in
 * code, else the first whose return address is not 0 (JIT code newer than the code ranges;
 * prof_osr_fold checks it off the signal path). Direct reads: [fp, next) is inside the
 * mapped stack (checked by the caller). 0 when none. */
static uint64_t osr_caller(uint64_t fp, uint64_t next, const struct prof_code_ranges *code, uint64_t *budget)
{
    uint64_t first = 0;
    for (uint64_t a = fp + 16; next - a >= 16 && a - fp - 16 < PROF_OSR_SCAN_BYTES && *budget >= 8; a += 8) {
        *budget -= 8;
        uint64_t w[2];
        direct_read16(a, w);
        if (w[0] != next || w[1] <= 1)
            continue;
        if (prof_is_code(code, w[1]))
            return w[1];
        if (!first)
            first = w[1];
    }
    return first;
}

size_t prof_fp_walk(const struct prof_walk_regs *r, uint64_t stack_hi, const struct prof_code_ranges *code,
                    uint64_t *out, size_t max, int *status)
{
    size_t n = 0;
    int scans = 0;
    *status = PROF_WALK_OK;
    if (max == 0) {
        *status = PROF_WALK_DEPTH;
        return 0;
    }
    out[n++] = r->ip & ~PROF_FRAME_TAG_MASK;
    uint64_t fp = r->fp, floor = r->sp, osr_budget = PROF_OSR_SCAN_WALK_BYTES;
    for (;;) {
        int bad = fp != 0 && ((fp & 7) != 0 || fp < floor || (stack_hi && (fp >= stack_hi || stack_hi - fp < 16)));
        if (fp == 0 || bad) {
            /* no usable frame pointer here: a frame that does not keep RBP (or the outermost
             * frame when fp is 0). Look for the next frame record on the stack. */
            uint64_t nfp, ret;
            if (stack_hi && code && scans < 2 && scan(floor, stack_hi, code, &nfp, &ret) == 0) {
                scans++;
                if (n >= max) {
                    *status = PROF_WALK_DEPTH;
                    break;
                }
                out[n++] = (ret - 1) & ~PROF_FRAME_TAG_MASK;
                floor = nfp;
                fp = nfp;
                continue;
            }
            if (bad)
                *status = PROF_WALK_BROKEN;
            break;
        }
        uint64_t w[2];
        if (stack_hi) {
            direct_read16(fp, w);
        } else if (prof_safe_read16(fp, w) != 0) {
            *status = PROF_WALK_BROKEN;
            break;
        }
        if (w[1] == 0)
            break; /* no return address: the outermost frame */
        if (n >= max) {
            *status = PROF_WALK_DEPTH;
            break;
        }
        out[n++] = (w[1] - 1) & ~PROF_FRAME_TAG_MASK; /* inside the call instruction: the caller's own range */
        if (w[0] == 0)
            break;
        if (w[0] <= fp) {
            *status = PROF_WALK_BROKEN;
            break;
        }
        /* an OSR frame's record skips the Tier0 frame's record, which lies below the next one
         * (prof.h); prof_osr_fold decides later whether this was one */
        if (stack_hi && osr_budget && w[0] - fp >= 32 && w[0] < stack_hi && n < max) {
            uint64_t c = osr_caller(fp, w[0], code, &osr_budget);
            if (c)
                out[n++] = ((c - 1) & ~PROF_FRAME_TAG_MASK) | PROF_FRAME_OSR_CALLER;
        }
        floor = fp + 16;
        fp = w[0];
    }
    return n;
}

struct exec_find {
    uint64_t ip;
    int found;
};

static int exec_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct exec_find *x = arg;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t lo = (uint64_t)info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && x->ip >= lo && x->ip - lo < ph->p_memsz) {
            x->found = 1;
            return 1;
        }
    }
    return 0;
}

int prof_native_code(uint64_t ip)
{
    struct exec_find x = {.ip = ip, .found = 0};
    dl_iterate_phdr(exec_find_cb, &x);
    return x.found;
}

size_t prof_osr_fold(uint64_t *f, size_t n, uint64_t (*fid)(void *ctx, uint64_t ip),
                     int (*native_code)(void *ctx, uint64_t ip), void *ctx)
{
    size_t m = 0;
    uint64_t f1 = 0, f2 = 0; /* the functions of the last two frames kept (0: not managed) */
    for (size_t i = 0; i < n; i++) {
        uint64_t ip = f[i] & ~PROF_FRAME_TAG_MASK;
        if ((f[i] & PROF_FRAME_TAG_MASK) == PROF_FRAME_OSR_CALLER) {
            if (m < 2 || !f1 || f1 != f2)
                continue; /* not an OSR frame: no frame is invented */
            /* f[m - 2]: the OSR code (or a return into it), f[m - 1]: the Tier0 code's call to
             * the patchpoint helper, the same method's frame: the caller takes its place if
             * it is code (managed code the runtime knows, or a module's executable code) */
            uint64_t c = fid(ctx, ip);
            if (!c && !native_code(ctx, ip))
                continue;
            f[m - 1] = PROF_FRAME_MANAGED_IP | ip;
            f1 = c;
            continue;
        }
        f2 = f1;
        f1 = (f[i] & PROF_FRAME_TAG_MASK) == PROF_FRAME_NATIVE ? 0 : fid(ctx, ip);
        f[m++] = f[i];
    }
    return m;
}

/* Parses "lo-hi perms" at the start of one /proc/self/maps line. 0 or -1. */
static int parse_map_line(const char *l, const char *e, uint64_t *lo, uint64_t *hi, char perms[4])
{
    uint64_t v[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        int digits = 0;
        for (; l < e; l++, digits++) {
            char ch = *l;
            unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
                         : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                                                  : 16u;
            if (d == 16)
                break;
            v[k] = v[k] << 4 | d;
        }
        if (!digits || l >= e || *l != (k == 0 ? '-' : ' '))
            return -1;
        l++;
    }
    if (e - l < 4)
        return -1;
    memcpy(perms, l, 4);
    *lo = v[0];
    *hi = v[1];
    return 0;
}

size_t prof_maps_scan(struct prof_code_ranges *c, const uint64_t *addr, size_t n, uint64_t *lo, uint64_t *hi,
                      uint64_t main_stack[2])
{
    if (main_stack)
        main_stack[0] = main_stack[1] = 0;
    for (size_t i = 0; i < n; i++)
        lo[i] = hi[i] = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return (size_t)-1;
    /* read(2) in 16 KB blocks, parsed in place: stdio read the file 4 KB (a system call) at a
     * time and fopen allocated its buffer (the sampler thread's first malloc: a new arena) */
    char buf[16384];
    size_t have = 0, found = 0;
    uint32_t nc = 0;
    int skip = 0; /* the rest of an overlong line is still to come: not a line start */
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 && have == 0)
            break;
        size_t len = have + (r > 0 ? (size_t)r : 0);
        size_t pos = 0;
        for (;;) {
            char *nl = memchr(buf + pos, '\n', len - pos);
            if (!nl && r > 0 && pos > 0)
                break; /* a partial line: kept for the next read */
            if (!nl && r > 0 && len < sizeof buf)
                break;
            const char *e = nl ? nl : buf + len; /* an overlong line (or the last): its start only */
            uint64_t a, b;
            char perms[4];
            int was_skip = skip;
            skip = !nl;
            if (!was_skip && parse_map_line(buf + pos, e, &a, &b, perms) == 0) {
                if (c && perms[2] == 'x' && nc < PROF_CODE_RANGES) {
                    if (nc && c->r[nc - 1].hi == a)
                        c->r[nc - 1].hi = b; /* adjacent: one range */
                    else {
                        c->r[nc].lo = a;
                        c->r[nc].hi = b;
                        nc++;
                    }
                }
                if (main_stack && perms[0] == 'r' && perms[1] == 'w' && e - (buf + pos) >= 7 &&
                    memcmp(e - 7, "[stack]", 7) == 0) {
                    main_stack[0] = a;
                    main_stack[1] = b;
                }
                if (perms[0] == 'r' && perms[1] == 'w')
                    for (size_t i = 0; i < n; i++)
                        if (!hi[i] && addr[i] >= a && addr[i] < b) {
                            lo[i] = a;
                            hi[i] = b;
                            found++;
                        }
            }
            pos = nl ? (size_t)(nl - buf) + 1 : len;
            if (pos >= len)
                break;
        }
        have = len - pos;
        memmove(buf, buf + pos, have);
        if (r <= 0)
            break;
        if (!c && !main_stack && found == n)
            break;
    }
    close(fd);
    if (c)
        c->n = nc;
    return found;
}

int prof_code_ranges_load(struct prof_code_ranges *c)
{
    return prof_maps_scan(c, NULL, 0, NULL, NULL, NULL) == (size_t)-1 ? -1 : 0;
}

size_t prof_stack_mappings(const uint64_t *addr, size_t n, uint64_t *lo, uint64_t *hi)
{
    size_t f = prof_maps_scan(NULL, addr, n, lo, hi, NULL);
    return f == (size_t)-1 ? 0 : f;
}

int prof_stack_mapping(uint64_t addr, uint64_t *lo, uint64_t *hi)
{
    return prof_stack_mappings(&addr, 1, lo, hi) == 1 ? 0 : -1;
}
