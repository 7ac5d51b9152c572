/* The small platform interface: dynamic libraries and process identity.
 * Linux/macOS use dlfcn (platform_posix.c); Windows uses LoadLibraryExW / GetProcAddress /
 * GetModuleFileNameW behind the same functions (platform_win.c), with UTF-8 paths converted to
 * UTF-16 there. */
#ifndef CLRMUX_PLATFORM_H
#define CLRMUX_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* Opens a shared library by absolute path. Returns a handle, or NULL with a
 * human-readable reason (the loader's own message) copied into err[errsz]. */
void *clrmux_lib_open(const char *path, char *err, size_t errsz);
/* Looks a symbol up in a handle from clrmux_lib_open. Returns NULL when absent. */
void *clrmux_lib_sym(void *lib, const char *name);
/* The absolute path of the shared object that contains `addr` (e.g. a function of
 * libclrmux.so itself), found with dladdr, never from environment variables. Returns 0, or
 * -1 when it cannot be found or does not fit in out[outsz]. */
int clrmux_module_path_of(const void *addr, char *out, size_t outsz);
/* The process's name as filters match it: the executable's base name ("dotnet", "MyApp")
 * into exe[exesz], and, when the executable is the `dotnet` host running an app
 * (`dotnet [options] path/App.dll`), the app's base name without ".dll" into app[appsz]
 * (else ""). Returns 0, or -1 when /proc (or the OS equivalent) cannot be read. */
int clrmux_process_names(char *exe, size_t exesz, char *app, size_t appsz);
/* Finds the loaded shared object whose file name is `base_name` (e.g. "libcoreclr.so"; on
 * Linux through dl_iterate_phdr). Its absolute path goes to path[pathsz]; when `marker` is
 * not NULL, the NUL-terminated string that starts with `marker` in its mapped file-backed
 * segments (e.g. the "@(#)Version " string of the runtime) goes to found[foundsz] ("" when
 * absent). Returns 0, or -1 when no such object is loaded or its path does not fit. */
int clrmux_loaded_module(const char *base_name, const char *marker, char *path, size_t pathsz, char *found,
                         size_t foundsz);

/* Opens `path` as open(2) would with `flags` and `mode`, the descriptor not inherited by
 * child processes (O_CLOEXEC; _O_NOINHERIT on Windows). With O_NOFOLLOW a symbolic link at
 * the path itself is refused (on Windows any reparse point: a symbolic link or junction,
 * opened with FILE_FLAG_OPEN_REPARSE_POINT). Returns the descriptor, or -1 with errno set. */
int clrmux_open(const char *path, int flags, int mode);
/* Writes all len bytes of p to descriptor fd, retrying after EINTR and short writes (write(2);
 * on Windows msvcrt's _write, at most 1 GiB a call). Returns 0, or -errno with errno set too
 * (-EIO when a write wrote nothing); what was written before an error stays written. */
int clrmux_write_all(int fd, const void *p, size_t len);
/* stat(2) of the UTF-8 `path` (on Windows through the UTF-16 name: wstat). Returns 0, or -1
 * with errno set. */
struct stat;
int clrmux_stat(const char *path, struct stat *st);
/* Clears O_NONBLOCK on `fd` after an open that must not block on a FIFO (no-op on Windows,
 * where a file open never blocks that way). */
void clrmux_fd_clear_nonblock(int fd);
/* The calling thread's id as the OS shows it (gettid on Linux, GetCurrentThreadId on
 * Windows), for log lines. */
long clrmux_thread_id(void);
/* Sleeps while the 32-bit word *w equals `expected`, at most timeout_ms, or until
 * clrmux_word_wake(w) (FUTEX_WAIT_PRIVATE on Linux; WaitOnAddress on Windows). May return
 * early (a spurious wake): the caller rechecks its condition. */
void clrmux_word_wait(uint32_t *w, uint32_t expected, long timeout_ms);
/* Wakes one thread sleeping in clrmux_word_wait on w (FUTEX_WAKE_PRIVATE; WakeByAddressSingle). */
void clrmux_word_wake(uint32_t *w);
/* Fills buf[n] with random bytes from the OS (getrandom(GRND_NONBLOCK) on Linux,
 * BCryptGenRandom on Windows). Returns 0, or -1 when the OS gives none (early boot). */
int clrmux_random(void *buf, size_t n);
/* The host's name (gethostname; Windows: GetComputerNameExA(ComputerNameDnsHostname)) into
 * out[outsz], NUL-terminated. Returns 0, or -1. */
int clrmux_host_name(char *out, size_t outsz);
/* The OS name of thread `tid` of this process (Linux: /proc/self/task/TID/comm, which .NET
 * sets from Thread.Name; Windows: GetThreadDescription, looked up at run time) into
 * name[namesz]; for the calling thread on Linux, prctl(PR_GET_NAME), the same 15 bytes.
 * Returns 0, or -1 when the thread or its name is unknown. */
int clrmux_thread_name_of(uint32_t tid, char *name, size_t namesz);
/* Calls fn(lib, path, ctx) for each shared object loaded in the process, `lib` a handle that
 * clrmux_lib_sym accepts, valid during the call only. Stops when fn returns nonzero and
 * returns that value; 0 when every object was seen; -1 when the list cannot be read. */
int clrmux_each_module(int (*fn)(void *lib, const char *path, void *ctx), void *ctx);
/* Keeps the module that contains `addr` (libclrmux itself) loaded until the process ends,
 * whatever FreeLibrary/dlclose calls follow (RTLD_NODELETE; GET_MODULE_HANDLE_EX_FLAG_PIN).
 * Returns 0, or -1. */
int clrmux_pin_module_of(const void *addr);
/* A process-wide memory barrier: when it returns, every thread of the process has run a full
 * barrier (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) on Linux, FlushProcessWriteBuffers on
 * Windows). clrmux_process_barrier_register must have returned 0 first (on Linux it waits for
 * an RCU grace period, so it runs off the start-up path). Return 0, or -1 when the OS has no
 * such barrier (callers then fall back to a fence in every reader). */
int clrmux_process_barrier_register(void);
int clrmux_process_barrier(void);

/* Whether `p` is an absolute path: "/x" on POSIX; on Windows also "C:/x", "C:\\x", "\\x"
 * (a UNC path or the current drive's root). */
static inline int clrmux_path_is_absolute(const char *p)
{
#if defined(_WIN32)
    if (p[0] == '\\' || (((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z') && p[1] == ':' && (p[2] == '/' || p[2] == '\\')))
        return 1;
#endif
    return p[0] == '/';
}

/* The last path separator in `p` ('/'; on Windows also '\\'), or NULL. */
static inline char *clrmux_last_separator(char *p)
{
    char *last = NULL;
    for (; *p; p++)
#if defined(_WIN32)
        if (*p == '/' || *p == '\\')
#else
        if (*p == '/')
#endif
            last = p;
    return last;
}

#if defined(_WIN32)
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
/* open(2) flags Windows lacks: clrmux_open reads O_NOFOLLOW (a value no msvcrt _O_ flag
 * uses); O_CLOEXEC is _O_NOINHERIT; a file open does not block and there is no controlling
 * terminal. */
#define O_NOFOLLOW 0x1000000
#define O_CLOEXEC _O_NOINHERIT
#define O_NONBLOCK 0
#define O_NOCTTY 0
#ifndef S_ISSOCK
#define S_ISSOCK(m) 0
#endif
#ifndef S_ISBLK
#define S_ISBLK(m) 0
#endif
/* Windows: opens the file at UTF-8 `path` with fopen's `mode` ("r", "w", "a", with "b"),
 * without following a reparse point: a symbolic link or junction at `path` is refused, as
 * O_NOFOLLOW does on Linux. Returns the stream (the caller fcloses it), or NULL with the
 * reason in err[errsz]. */
FILE *clrmux_fopen_noreparse(const char *path, const char *mode, char *err, size_t errsz);
/* Windows (which has no open_memstream): a stream over a new private temporary file (in
 * GetTempPathW, created exclusively, not shared, deleted when closed), or NULL. Once written,
 * clrmux_tmpstream_read copies its whole content into a malloc'd *out (*len bytes; the
 * caller frees it) and returns 0, or -1. The caller fcloses the stream. */
FILE *clrmux_tmpstream(void);
int clrmux_tmpstream_read(FILE *f, char **out, size_t *len);
#endif

#endif
