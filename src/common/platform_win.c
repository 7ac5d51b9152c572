/* The platform layer on Windows (platform.h): LoadLibraryExW / GetProcAddress /
 * GetModuleFileNameW with UTF-16 paths (every path clrmux handles is UTF-8 inside and is
 * converted at this boundary), the process's names from GetModuleFileNameW and the command
 * line, loaded modules through GetModuleHandleW and their PE section headers, and files opened
 * without following reparse points (symbolic links, junctions). Threads and clocks come from
 * mingw-w64's winpthreads (pthread_*, clock_gettime). Built only for Windows (_WIN32);
 * platform_posix.c is the Linux/macOS counterpart. */
#if defined(_WIN32)
#include "common/platform.h"

#include <fcntl.h>
#include <io.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include <errno.h>
#include <psapi.h>
#include <stdlib.h>
#include <bcrypt.h>
#include <sys/stat.h>

#define WPATH 32768 /* the longest path Windows accepts (\\?\ form), in UTF-16 units */

/* UTF-8 -> UTF-16 into w[wn]. Returns 0, or -1 on invalid UTF-8 or a path too long. */
static int to_wide(const char *s, wchar_t *w, int wn)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, wn);
    return n > 0 ? 0 : -1;
}

/* UTF-16 -> UTF-8 into out[outsz]. Returns 0, or -1 when it does not fit. */
static int to_utf8(const wchar_t *w, char *out, size_t outsz)
{
    if (outsz > INT32_MAX)
        outsz = INT32_MAX;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, out, (int)outsz, NULL, NULL);
    return n > 0 ? 0 : -1;
}

/* The system's message for a Win32 error code, in English where the system has it. */
static void win_error(DWORD code, const char *what, char *err, size_t errsz)
{
    char msg[512] = "";
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code,
                             MAKELANGID(LANG_NEUTRAL, SUBLANG_DEFAULT), msg, sizeof msg, NULL);
    while (n > 0 && (msg[n - 1] == '\r' || msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = 0;
    snprintf(err, errsz, "%s: error %lu%s%s", what, (unsigned long)code, n ? ": " : "", msg);
}

void *clrmux_lib_open(const char *path, char *err, size_t errsz)
{
    static wchar_t w[WPATH]; /* children are loaded one at a time, under the loader's lock */
    if (to_wide(path, w, WPATH) != 0) {
        snprintf(err, errsz, "the path is not valid UTF-8 or is too long");
        return NULL;
    }
    for (wchar_t *c = w; *c; c++) /* LOAD_WITH_ALTERED_SEARCH_PATH wants backslashes */
        if (*c == L'/')
            *c = L'\\';
    /* as the runtime loads a profiler: its own folder first for its dependencies */
    HMODULE h = LoadLibraryExW(w, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!h)
        win_error(GetLastError(), "LoadLibraryExW", err, errsz);
    return (void *)h;
}

void *clrmux_lib_sym(void *lib, const char *name)
{
    FARPROC f = GetProcAddress((HMODULE)lib, name);
    void *p;
    memcpy(&p, &f, sizeof p); /* a function pointer as data, as dlsym returns it */
    return p;
}

/* The file name of module m (NULL: the executable) in UTF-8. */
static int module_file(HMODULE m, char *out, size_t outsz)
{
    static __thread wchar_t w[WPATH];
    DWORD n = GetModuleFileNameW(m, w, WPATH);
    if (n == 0 || n >= WPATH)
        return -1;
    const wchar_t *p = w;
    if (wcsncmp(p, L"\\\\?\\", 4) == 0 && p[5] == L':')
        p += 4; /* \\?\C:\... -> C:\... */
    if (to_utf8(p, out, outsz) != 0)
        return -1;
    /* forward slashes, which every Windows file API accepts: the rest of clrmux splits
     * paths at '/' ("C:/app/libclrmux.dll" -> "C:/app") */
    for (char *c = out; *c; c++)
        if (*c == '\\')
            *c = '/';
    return 0;
}

int clrmux_module_path_of(const void *addr, char *out, size_t outsz)
{
    HMODULE m = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)addr, &m))
        return -1;
    return module_file(m, out, outsz);
}

static const char *base_of(const char *path)
{
    const char *b = path;
    for (const char *p = path; *p; p++)
        if (*p == '\\' || *p == '/')
            b = p + 1;
    return b;
}

/* Removes a case-insensitive suffix ("".exe", ".dll") from s; returns 1 when it was there. */
static int strip_suffix(char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (n > k && _stricmp(s + n - k, suffix) == 0) {
        s[n - k] = 0;
        return 1;
    }
    return 0;
}

int clrmux_process_names(char *exe, size_t exesz, char *app, size_t appsz)
{
    static __thread char buf[WPATH * 3];
    if (module_file(NULL, buf, sizeof buf) != 0)
        return -1;
    snprintf(exe, exesz, "%s", base_of(buf));
    strip_suffix(exe, ".exe"); /* filters name "dotnet", "MyApp", as on Linux */
    app[0] = 0;
    if (_stricmp(exe, "dotnet") != 0)
        return 0;
    /* argv[0] is the host; the app is the first argument ending in .dll */
    int argc = 0;
    LPWSTR *argv = CommandLineToArgvW(GetCommandLineW(), &argc);
    if (!argv)
        return 0;
    for (int i = 1; i < argc; i++) {
        if (to_utf8(argv[i], buf, sizeof buf) != 0)
            continue;
        if (strlen(buf) > 4 && _stricmp(buf + strlen(buf) - 4, ".dll") == 0) {
            snprintf(app, appsz, "%s", base_of(buf));
            strip_suffix(app, ".dll");
            break;
        }
    }
    LocalFree(argv);
    return 0;
}

int clrmux_loaded_module(const char *base_name, const char *marker, char *path, size_t pathsz, char *found,
                         size_t foundsz)
{
    if (!base_name || !path || pathsz == 0 || (marker && (!found || foundsz == 0)))
        return -1;
    path[0] = 0;
    if (found && foundsz)
        found[0] = 0;
    wchar_t w[MAX_PATH];
    if (to_wide(base_name, w, MAX_PATH) != 0)
        return -1;
    HMODULE m = GetModuleHandleW(w); /* loaded modules only; no reference taken */
    if (!m || module_file(m, path, pathsz) != 0)
        return -1;
    if (!marker)
        return 0;
    /* the readable sections of the mapped image (PE section headers) */
    const unsigned char *base = (const unsigned char *)m;
    const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
    if (dos->e_magic != IMAGE_DOS_SIGNATURE)
        return 0;
    const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + dos->e_lfanew);
    if (nt->Signature != IMAGE_NT_SIGNATURE)
        return 0;
    const IMAGE_SECTION_HEADER *sec = IMAGE_FIRST_SECTION(nt);
    size_t mlen = strlen(marker);
    for (unsigned i = 0; i < nt->FileHeader.NumberOfSections; i++) {
        if (!(sec[i].Characteristics & IMAGE_SCN_MEM_READ))
            continue;
        size_t len = sec[i].Misc.VirtualSize;
        if (sec[i].SizeOfRawData < len)
            len = sec[i].SizeOfRawData; /* the rest is zero fill */
        const char *s = (const char *)base + sec[i].VirtualAddress;
        for (size_t off = 0; len >= mlen && off <= len - mlen; off++) {
            if (s[off] != marker[0] || memcmp(s + off, marker, mlen) != 0)
                continue;
            size_t n = 0;
            while (off + n < len && n + 1 < foundsz && s[off + n])
                n++;
            memcpy(found, s + off, n);
            found[n] = 0;
            return 0;
        }
    }
    return 0;
}

FILE *clrmux_fopen_noreparse(const char *path, const char *mode, char *err, size_t errsz)
{
    static __thread wchar_t w[WPATH];
    if (to_wide(path, w, WPATH) != 0) {
        snprintf(err, errsz, "the path is not valid UTF-8 or is too long");
        return NULL;
    }
    int writing = strchr(mode, 'w') || strchr(mode, 'a');
    /* FILE_FLAG_OPEN_REPARSE_POINT opens a link itself, which is then refused: a link's
     * target is not what the path names (the O_NOFOLLOW of Windows) */
    HANDLE h = CreateFileW(w, writing ? (GENERIC_WRITE | (strchr(mode, 'a') ? FILE_APPEND_DATA : 0)) : GENERIC_READ,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           strchr(mode, 'w') ? CREATE_ALWAYS : strchr(mode, 'a') ? OPEN_ALWAYS : OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        win_error(GetLastError(), "CreateFileW", err, errsz);
        return NULL;
    }
    FILE_ATTRIBUTE_TAG_INFO tag;
    if (!GetFileInformationByHandleEx(h, FileAttributeTagInfo, &tag, sizeof tag)) {
        win_error(GetLastError(), "GetFileInformationByHandleEx", err, errsz);
        CloseHandle(h);
        return NULL;
    }
    if (tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
        snprintf(err, errsz, "it is a reparse point (a symbolic link or junction), not followed");
        CloseHandle(h);
        return NULL;
    }
    if (tag.FileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
        snprintf(err, errsz, "it is a directory");
        CloseHandle(h);
        return NULL;
    }
    if (strchr(mode, 'a'))
        SetFilePointer(h, 0, NULL, FILE_END);
    int fd = _open_osfhandle((intptr_t)h, writing ? (strchr(mode, 'a') ? _O_APPEND : 0) : _O_RDONLY);
    if (fd < 0) {
        snprintf(err, errsz, "_open_osfhandle failed");
        CloseHandle(h);
        return NULL;
    }
    FILE *f = _fdopen(fd, mode);
    if (!f) {
        snprintf(err, errsz, "_fdopen failed");
        _close(fd);
    }
    return f;
}

/* errno for a Win32 error of CreateFileW */
static int errno_of(DWORD e)
{
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
        return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
        return EACCES;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
        return EEXIST;
    default:
        return EIO;
    }
}

int clrmux_write_all(int fd, const void *p, size_t len)
{
    const char *c = p;
    while (len) {
        unsigned chunk = len > (1u << 30) ? 1u << 30 : (unsigned)len;
        int n = _write(fd, c, chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0) {
            errno = EIO;
            return -EIO;
        }
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

int clrmux_open(const char *path, int flags, int mode)
{
    (void)mode; /* the new file's access comes from its folder's inherited ACL */
    static __thread wchar_t w[WPATH];
    if (to_wide(path, w, WPATH) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int acc = flags & (_O_RDONLY | _O_WRONLY | _O_RDWR);
    DWORD access = acc == _O_WRONLY ? GENERIC_WRITE : acc == _O_RDWR ? GENERIC_READ | GENERIC_WRITE : GENERIC_READ;
    DWORD disp = (flags & _O_CREAT) ? ((flags & _O_EXCL) ? CREATE_NEW : (flags & _O_TRUNC) ? CREATE_ALWAYS : OPEN_ALWAYS)
                                    : ((flags & _O_TRUNC) ? TRUNCATE_EXISTING : OPEN_EXISTING);
    DWORD fl = FILE_ATTRIBUTE_NORMAL | ((flags & O_NOFOLLOW) ? FILE_FLAG_OPEN_REPARSE_POINT : 0);
    HANDLE h = CreateFileW(w, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, disp, fl, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        errno = errno_of(GetLastError());
        return -1;
    }
    if (flags & O_NOFOLLOW) {
        FILE_ATTRIBUTE_TAG_INFO tag;
        if (!GetFileInformationByHandleEx(h, FileAttributeTagInfo, &tag, sizeof tag) ||
            (tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
            CloseHandle(h);
            errno = ELOOP; /* what open(2) says of a symlink under O_NOFOLLOW */
            return -1;
        }
    }
    int fd = _open_osfhandle((intptr_t)h, (flags & (_O_APPEND | _O_RDONLY | _O_WRONLY | _O_RDWR)) | _O_BINARY);
    if (fd < 0) {
        CloseHandle(h);
        errno = EMFILE;
        return -1;
    }
    return fd;
}

int clrmux_stat(const char *path, struct stat *st)
{
    static __thread wchar_t w[WPATH];
    if (to_wide(path, w, WPATH) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return wstat(w, st);
}

void clrmux_fd_clear_nonblock(int fd) { (void)fd; }

long clrmux_thread_id(void) { return (long)GetCurrentThreadId(); }

int clrmux_each_module(int (*fn)(void *lib, const char *path, void *ctx), void *ctx)
{
    HMODULE mods[1024];
    DWORD need = 0;
    if (!K32EnumProcessModules(GetCurrentProcess(), mods, sizeof mods, &need))
        return -1;
    DWORD n = need / sizeof mods[0];
    if (n > sizeof mods / sizeof mods[0])
        n = sizeof mods / sizeof mods[0];
    static __thread char name[WPATH * 3];
    for (DWORD i = 0; i < n; i++) {
        HMODULE h;
        /* a counted reference: the module stays loaded during fn even if another thread
         * frees it */
        if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, (LPCWSTR)mods[i], &h))
            continue;
        int r = module_file(h, name, sizeof name) == 0 ? fn((void *)h, name, ctx) : 0;
        FreeLibrary(h);
        if (r)
            return r;
    }
    return 0;
}

int clrmux_pin_module_of(const void *addr)
{
    HMODULE m;
    return GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN, (LPCWSTR)addr,
                              &m)
               ? 0
               : -1;
}

int clrmux_process_barrier_register(void) { return 0; /* FlushProcessWriteBuffers needs none */ }

int clrmux_process_barrier(void)
{
    FlushProcessWriteBuffers();
    return 0;
}

void clrmux_word_wait(uint32_t *w, uint32_t expected, long timeout_ms)
{
    WaitOnAddress((volatile VOID *)w, &expected, sizeof expected, timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms);
}

void clrmux_word_wake(uint32_t *w) { WakeByAddressSingle(w); }

int clrmux_random(void *buf, size_t n)
{
    return BCRYPT_SUCCESS(BCryptGenRandom(NULL, buf, (ULONG)n, BCRYPT_USE_SYSTEM_PREFERRED_RNG)) ? 0 : -1;
}

void *clrmux_map_zero(size_t len) { return VirtualAlloc(NULL, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE); }

void clrmux_unmap_zero(void *p, size_t len)
{
    (void)len;
    if (p)
        VirtualFree(p, 0, MEM_RELEASE);
}

int clrmux_thread_name_of(uint32_t tid, char *name, size_t namesz)
{
    typedef HRESULT(WINAPI * get_desc_fn)(HANDLE, PWSTR *);
    static get_desc_fn get_desc;
    static int looked_up;
    if (!__atomic_load_n(&looked_up, __ATOMIC_ACQUIRE)) {
        HMODULE k = GetModuleHandleW(L"kernelbase.dll");
        FARPROC f = k ? GetProcAddress(k, "GetThreadDescription") : NULL;
        if (!f && (k = GetModuleHandleW(L"kernel32.dll")))
            f = GetProcAddress(k, "GetThreadDescription");
        __atomic_store_n(&get_desc, (get_desc_fn)(void (*)(void))f, __ATOMIC_RELAXED);
        __atomic_store_n(&looked_up, 1, __ATOMIC_RELEASE);
    }
    get_desc_fn fn = __atomic_load_n(&get_desc, __ATOMIC_RELAXED);
    if (!fn || !namesz)
        return -1;
    HANDLE h = OpenThread(THREAD_QUERY_LIMITED_INFORMATION, FALSE, tid);
    if (!h)
        return -1;
    PWSTR w = NULL;
    int rc = -1;
    if (SUCCEEDED(fn(h, &w)) && w) {
        int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, name, (int)namesz, NULL, NULL);
        if (n <= 0)
            name[0] = 0;
        name[namesz - 1] = 0;
        rc = name[0] ? 0 : -1;
        LocalFree(w);
    }
    CloseHandle(h);
    return rc;
}

int clrmux_host_name(char *out, size_t outsz)
{
    DWORD n = (DWORD)outsz;
    if (!outsz || !GetComputerNameExA(ComputerNameDnsHostname, out, &n))
        return -1;
    out[outsz - 1] = 0;
    return 0;
}

FILE *clrmux_tmpstream(void)
{
    wchar_t dir[MAX_PATH + 1], name[MAX_PATH + 16];
    DWORD n = GetTempPathW(MAX_PATH + 1, dir);
    if (!n || n > MAX_PATH)
        return NULL;
    for (int tries = 0; tries < 16; tries++) {
        uint64_t r = 0;
        clrmux_random(&r, sizeof r);
        _snwprintf(name, sizeof name / sizeof name[0], L"%lsclrmux-%016llx.tmp", dir, (unsigned long long)r);
        name[sizeof name / sizeof name[0] - 1] = 0;
        HANDLE h = CreateFileW(name, GENERIC_READ | GENERIC_WRITE, 0, NULL, CREATE_NEW,
                               FILE_ATTRIBUTE_TEMPORARY | FILE_FLAG_DELETE_ON_CLOSE, NULL);
        if (h == INVALID_HANDLE_VALUE) {
            if (GetLastError() == ERROR_FILE_EXISTS)
                continue;
            return NULL;
        }
        int fd = _open_osfhandle((intptr_t)h, _O_RDWR | _O_BINARY);
        if (fd < 0) {
            CloseHandle(h);
            return NULL;
        }
        FILE *f = _fdopen(fd, "w+b");
        if (!f)
            _close(fd);
        return f;
    }
    return NULL;
}

int clrmux_tmpstream_read(FILE *f, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (fflush(f) != 0)
        return -1;
    long long end = _ftelli64(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0)
        return -1;
    char *p = malloc((size_t)end + 1);
    if (!p)
        return -1;
    if (fread(p, 1, (size_t)end, f) != (size_t)end) {
        free(p);
        return -1;
    }
    p[end] = 0;
    *out = p;
    *len = (size_t)end;
    return 0;
}

#endif
