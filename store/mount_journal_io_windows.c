/*
 * store/mount_journal_io.h on Windows: wide-string Win32 calls. A file is
 * made durable with FlushFileBuffers and renamed over its name with
 * MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH), which
 * returns only once the rename is on disk: NTFS journals directory
 * entries, so there is no directory to sync as on Linux. Windows only.
 * Blocking; any thread.
 */
#include "store/mount_journal_io.h"

#include <windows.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"
#include "common/winutil.h"

/* A Win32 error as a negative errno: what the journal's messages need. */
static int
neg_errno(DWORD e)
{
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
        return -ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
        return -EACCES;
    case ERROR_ALREADY_EXISTS:
    case ERROR_FILE_EXISTS:
        return -EEXIST;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
        return -ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

/* dir\name (name may be NULL) as a new wide string, or NULL. */
static wchar_t *
wpath(const char *dir, const char *name)
{
    size_t n = strlen(dir) + (name ? strlen(name) + 1 : 0) + 1;
    char *p = malloc(n);
    if (!p)
        return NULL;
    strcpy(p, dir);
    if (name) {
        strcat(p, "\\");
        strcat(p, name);
    }
    for (char *c = p; *c; c++)
        if (*c == '/')
            *c = '\\';
    wchar_t *w = win_wide(p);
    free(p);
    return w;
}

int
mj_io_mkdir(const char *dir)
{
    wchar_t *w = wpath(dir, NULL);
    if (!w)
        return -ENOMEM;
    /* Each prefix in turn: CreateDirectoryW makes one level. */
    int r = 0;
    size_t n = wcslen(w);
    for (size_t i = 1; i <= n && r == 0; i++) {
        if (w[i] != L'\\' && w[i] != L'\0')
            continue;
        wchar_t c = w[i];
        w[i] = L'\0';
        bool drive = i == 2 && w[1] == L':';
        if (!drive && !CreateDirectoryW(w, NULL) && GetLastError() != ERROR_ALREADY_EXISTS)
            r = neg_errno(GetLastError());
        w[i] = c;
    }
    free(w);
    return r;
}

int
mj_io_write_atomic(const char *dir, const char *tmp, const char *name, const void *data, size_t len)
{
    wchar_t *tp = wpath(dir, tmp), *np = wpath(dir, name);
    int r = tp && np ? 0 : -ENOMEM;
    HANDLE h = INVALID_HANDLE_VALUE;
    if (r == 0) {
        h = CreateFileW(tp, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
        if (h == INVALID_HANDLE_VALUE)
            r = neg_errno(GetLastError());
    }
    for (size_t off = 0; r == 0 && off < len;) {
        DWORD chunk = len - off > 1u << 20 ? 1u << 20 : (DWORD)(len - off), w = 0;
        if (!WriteFile(h, (const char *)data + off, chunk, &w, NULL))
            r = neg_errno(GetLastError());
        off += w;
    }
    if (r == 0 && !FlushFileBuffers(h))
        r = neg_errno(GetLastError());
    if (h != INVALID_HANDLE_VALUE)
        CloseHandle(h);
    if (r == 0 && !MoveFileExW(tp, np, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        r = neg_errno(GetLastError());
    if (r < 0 && h != INVALID_HANDLE_VALUE)
        DeleteFileW(tp);
    free(tp);
    free(np);
    return r;
}

int
mj_io_read(const char *dir, const char *name, size_t max, char **out, size_t *len)
{
    wchar_t *p = wpath(dir, name);
    if (!p)
        return -ENOMEM;
    HANDLE h = CreateFileW(p, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    free(p);
    if (h == INVALID_HANDLE_VALUE)
        return neg_errno(GetLastError());
    LARGE_INTEGER size;
    int r = GetFileSizeEx(h, &size) ? 0 : neg_errno(GetLastError());
    if (r == 0 && (uint64_t)size.QuadPart > max)
        r = -EFBIG;
    char *buf = r == 0 ? malloc((size_t)size.QuadPart + 1) : NULL;
    if (r == 0 && !buf)
        r = -ENOMEM;
    DWORD got = 0;
    if (r == 0 && !ReadFile(h, buf, (DWORD)size.QuadPart, &got, NULL))
        r = neg_errno(GetLastError());
    CloseHandle(h);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

int
mj_io_remove(const char *dir, const char *name)
{
    wchar_t *p = wpath(dir, name);
    if (!p)
        return -ENOMEM;
    int r = DeleteFileW(p) ? 0 : neg_errno(GetLastError());
    free(p);
    return r == -ENOENT ? 0 : r;
}

int
mj_io_rename(const char *dir, const char *from, const char *to)
{
    wchar_t *f = wpath(dir, from), *t = wpath(dir, to);
    int r = !f || !t ? -ENOMEM
            : MoveFileExW(f, t, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)
                ? 0
                : neg_errno(GetLastError());
    free(f);
    free(t);
    return r;
}

int
mj_io_list(const char *dir, char ***names)
{
    wchar_t *pat = wpath(dir, "*");
    if (!pat)
        return -ENOMEM;
    WIN32_FIND_DATAW fd;
    HANDLE f = FindFirstFileW(pat, &fd);
    free(pat);
    char **v = calloc(1, sizeof(char *));
    size_t n = 0;
    if (!v) {
        if (f != INVALID_HANDLE_VALUE)
            FindClose(f);
        return -ENOMEM;
    }
    if (f == INVALID_HANDLE_VALUE) {
        DWORD e = GetLastError();
        if (e == ERROR_FILE_NOT_FOUND) {
            *names = v;
            return 0;
        }
        free(v);
        return neg_errno(e);
    }
    int r = 0;
    do {
        if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0)
            continue;
        char name[MAX_PATH * 4];
        if (WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, name, sizeof(name), NULL, NULL) <= 0)
            continue;
        r = strv_push(&v, &n, name);
    } while (r == 0 && FindNextFileW(f, &fd));
    FindClose(f);
    if (r < 0) {
        strv_free(v);
        return r;
    }
    *names = v;
    return 0;
}

unsigned long
mj_io_unique(void)
{
    static LONG seq;
    return ((unsigned long)GetCurrentProcessId() << 20) ^ (unsigned long)InterlockedIncrement(&seq);
}
