/* clrmux_path_trusted on Windows (trust.h): the owner and DACL of a file and the folders
 * above it, the counterpart of trust.c's owner and mode checks.
 *
 * An object is trusted when its owner is this process's user, BUILTIN\Administrators,
 * LocalSystem or TrustedInstaller, and its DACL grants no other principal a right that lets
 * it change what the path names: for the file, write, append, delete, WRITE_DAC,
 * WRITE_OWNER (or GENERIC_WRITE / GENERIC_ALL); for a folder above it, delete-child,
 * delete, WRITE_DAC, WRITE_OWNER (or GENERIC_ALL) — creating new entries in a folder (as
 * Authenticated Users may in C:\) replaces nothing, as a sticky folder on Linux. A NULL DACL
 * grants everyone everything. Inherit-only ACEs do not apply to the object itself. Deny ACEs
 * are not credited (a grant beside a deny is still reported). Built only for Windows. */
#if defined(_WIN32)
#include "common/trust.h"

#include <stdio.h>
#include <string.h>
#include <windows.h>
#include <aclapi.h>
#include <io.h>
#include <sddl.h>

#define WPATH 32768

static PSID g_user; /* the process's user, read once */

static PSID process_user(void)
{
    if (g_user)
        return g_user;
    HANDLE tok;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok))
        return NULL;
    DWORD n = 0;
    GetTokenInformation(tok, TokenUser, NULL, 0, &n);
    TOKEN_USER *tu = n ? LocalAlloc(LPTR, n) : NULL;
    if (tu && GetTokenInformation(tok, TokenUser, tu, n, &n))
        g_user = tu->User.Sid; /* kept for the process's life */
    else if (tu)
        LocalFree(tu);
    CloseHandle(tok);
    return g_user;
}

/* The principals that may own or write what clrmux loads. */
static int trusted_sid(PSID sid)
{
    PSID user = process_user();
    if (user && EqualSid(sid, user))
        return 1;
    if (IsWellKnownSid(sid, WinBuiltinAdministratorsSid) || IsWellKnownSid(sid, WinLocalSystemSid) ||
        IsWellKnownSid(sid, WinCreatorOwnerSid))
        return 1;
    static PSID ti; /* NT SERVICE\TrustedInstaller */
    if (!ti)
        ConvertStringSidToSidA("S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464", &ti);
    return ti && EqualSid(sid, ti);
}

static void sid_text(PSID sid, char *out, size_t outsz)
{
    char *s = NULL, name[256], dom[256];
    DWORD nn = sizeof name, dn = sizeof dom;
    SID_NAME_USE use;
    if (LookupAccountSidA(NULL, sid, name, &nn, dom, &dn, &use))
        snprintf(out, outsz, "%s%s%s", dom, dom[0] ? "\\" : "", name);
    else if (ConvertSidToStringSidA(sid, &s))
        snprintf(out, outsz, "%s", s);
    else
        snprintf(out, outsz, "an unknown principal");
    if (s)
        LocalFree(s);
}

int clrmux_fd_owner_trusted(int fd, char *why, size_t whysz)
{
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    PSID owner = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    if (h == INVALID_HANDLE_VALUE ||
        GetSecurityInfo(h, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION, &owner, NULL, NULL, NULL, &sd) != ERROR_SUCCESS) {
        snprintf(why, whysz, "its owner cannot be read (error %lu)", (unsigned long)GetLastError());
        return -1;
    }
    int ok = owner && trusted_sid(owner);
    if (!ok) {
        char who[600];
        if (owner)
            sid_text(owner, who, sizeof who);
        else
            snprintf(who, sizeof who, "nobody");
        snprintf(why, whysz, "it is owned by %s, not by this process's user", who);
    }
    LocalFree(sd);
    return ok ? 0 : -1;
}

/* One file or folder (UTF-8 path p, wide w). Returns 0 or -1 with why[] set. */
static int check_object(const char *p, const wchar_t *w, int folder, char *why, size_t whysz)
{
    PSID owner = NULL;
    PACL dacl = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    DWORD e = GetNamedSecurityInfoW(w, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                                    &owner, NULL, &dacl, NULL, &sd);
    if (e != ERROR_SUCCESS) {
        snprintf(why, whysz, "cannot read the owner and ACL of %s: Win32 error %lu", p, (unsigned long)e);
        return -1;
    }
    int rc = 0;
    char who[600];
    if (!owner || !trusted_sid(owner)) {
        if (owner)
            sid_text(owner, who, sizeof who);
        snprintf(why, whysz, "%s is owned by %s, neither this process's user nor Administrators/SYSTEM", p,
                 owner ? who : "no one");
        rc = -1;
    } else if (!dacl) {
        snprintf(why, whysz, "%s has no DACL (everyone may write it)", p);
        rc = -1;
    } else {
        const DWORD bad = folder ? (FILE_DELETE_CHILD | DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_ALL)
                                 : (FILE_WRITE_DATA | FILE_APPEND_DATA | DELETE | WRITE_DAC | WRITE_OWNER |
                                    GENERIC_WRITE | GENERIC_ALL);
        for (DWORD i = 0; rc == 0 && i < dacl->AceCount; i++) {
            ACE_HEADER *h;
            if (!GetAce(dacl, i, (void **)&h) || h->AceType != ACCESS_ALLOWED_ACE_TYPE ||
                (h->AceFlags & INHERIT_ONLY_ACE))
                continue;
            ACCESS_ALLOWED_ACE *a = (ACCESS_ALLOWED_ACE *)h;
            PSID sid = (PSID)&a->SidStart;
            if ((a->Mask & bad) && !trusted_sid(sid)) {
                sid_text(sid, who, sizeof who);
                snprintf(why, whysz, "%s is writable by %s (ACE mask 0x%lx)", p, who, (unsigned long)a->Mask);
                rc = -1;
            }
        }
    }
    LocalFree(sd);
    return rc;
}

int clrmux_path_trusted(const char *path, char *real, size_t realsz, char *why, size_t whysz)
{
    static __thread wchar_t w[WPATH], full[WPATH];
    static __thread char u8[WPATH * 3];
    if (realsz)
        real[0] = 0;
    if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, WPATH) <= 0) {
        snprintf(why, whysz, "cannot resolve %s: not valid UTF-8 or too long", path);
        return -1;
    }
    /* the real file: links and junctions resolved, as realpath does */
    HANDLE h = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS, NULL);
    DWORD n = 0;
    if (h != INVALID_HANDLE_VALUE) {
        n = GetFinalPathNameByHandleW(h, full, WPATH, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
        CloseHandle(h);
    }
    if (n == 0 || n >= WPATH) {
        if (h == INVALID_HANDLE_VALUE) {
            snprintf(why, whysz, "cannot resolve %s: Win32 error %lu", path, (unsigned long)GetLastError());
            return -1;
        }
        n = GetFullPathNameW(w, WPATH, full, NULL); /* Wine may not have the final name */
        if (n == 0 || n >= WPATH) {
            snprintf(why, whysz, "cannot resolve %s", path);
            return -1;
        }
    }
    wchar_t *f = full;
    if (wcsncmp(f, L"\\\\?\\", 4) == 0 && f[5] == L':')
        f += 4;
    WideCharToMultiByte(CP_UTF8, 0, f, -1, u8, sizeof u8, NULL, NULL);
    for (char *c = u8; *c; c++)
        if (*c == '\\')
            *c = '/';
    if (realsz)
        snprintf(real, realsz, "%s", u8);
    /* the file, then each folder up to the drive's root ("C:/a/b" -> "C:/a" -> "C:/") */
    for (int folder = 0;; folder = 1) {
        if (check_object(u8, f, folder, why, whysz) != 0)
            return -1;
        wchar_t *slash = wcsrchr(f, L'\\');
        char *s8 = strrchr(u8, '/');
        if (!slash || !s8 || slash[1] == 0)
            return 0;
        if (slash == f + 2 && f[1] == L':') { /* "C:\x" -> "C:\" */
            slash[1] = 0;
            s8[1] = 0;
        } else {
            *slash = 0;
            *s8 = 0;
        }
    }
}
#endif
