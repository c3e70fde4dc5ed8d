/*
 * The hcs driver's own files (driver_int.h has the layout): whole records
 * written through a temporary file and a rename, small reads, directories.
 * Paths are UTF-8, turned into UTF-16 for the wide Win32 calls. Each
 * function blocks on the disk: pool threads (and the drivers' drain
 * threads). Windows only.
 */
#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/winutil.h"
#include "runtime/hcs/driver_int.h"

static int
win_err(struct err *err, const char *what, const char *path)
{
    DWORD e = GetLastError();
    int code = e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? ENOENT
               : e == ERROR_ALREADY_EXISTS || e == ERROR_FILE_EXISTS  ? EEXIST
               : e == ERROR_ACCESS_DENIED                             ? EACCES
                                                                      : EIO;
    return err_set(err, code, "%s %s: Windows error %lu", what, path, (unsigned long)e);
}

int
hcs_file_replace(const char *path, const char *text, struct err *err)
{
    cleanup_free char *tmp = malloc(strlen(path) + 5);
    if (!tmp)
        return err_set(err, ENOMEM, "write %s: out of memory", path);
    sprintf(tmp, "%s.tmp", path);
    cleanup_free wchar_t *wt = win_wide(tmp), *wp = win_wide(path);
    if (!wt || !wp)
        return err_set(err, EINVAL, "write %s: not a valid path", path);
    HANDLE h = CreateFileW(wt, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return win_err(err, "create", tmp);
    DWORD n = 0, len = (DWORD)strlen(text);
    BOOL ok = WriteFile(h, text, len, &n, NULL) && n == len && FlushFileBuffers(h);
    CloseHandle(h);
    if (!ok || !MoveFileExW(wt, wp, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
        int ret = win_err(err, "write", path);
        DeleteFileW(wt);
        return ret;
    }
    return 0;
}

int
hcs_file_read(const char *path, size_t max, char **out, struct err *err)
{
    cleanup_free wchar_t *wp = win_wide(path);
    if (!wp)
        return err_set(err, EINVAL, "read %s: not a valid path", path);
    HANDLE h = CreateFileW(wp, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return win_err(err, "open", path);
    char *buf = malloc(max + 1);
    DWORD n = 0;
    BOOL ok = buf && ReadFile(h, buf, (DWORD)max, &n, NULL);
    CloseHandle(h);
    if (!ok) {
        free(buf);
        return buf ? win_err(err, "read", path)
                   : err_set(err, ENOMEM, "read %s: out of memory", path);
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

int
hcs_mkdir(const char *path, struct err *err)
{
    cleanup_free wchar_t *wp = win_wide(path);
    if (!wp)
        return err_set(err, EINVAL, "mkdir %s: not a valid path", path);
    if (!CreateDirectoryW(wp, NULL) && GetLastError() != ERROR_ALREADY_EXISTS)
        return win_err(err, "mkdir", path);
    return 0;
}

int
hcs_rmdir_files(const char *path, struct err *err)
{
    size_t n0 = strlen(path) + 3;
    cleanup_free char *pat = malloc(n0);
    if (pat)
        snprintf(pat, n0, "%s\\*", path);
    cleanup_free wchar_t *wpat = pat ? win_wide(pat) : NULL, *wp = win_wide(path);
    if (!wpat || !wp)
        return err_set(err, ENOMEM, "remove %s: out of memory", path);
    WIN32_FIND_DATAW fd;
    HANDLE f = FindFirstFileW(wpat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
                continue;
            size_t n = wcslen(wp) + wcslen(fd.cFileName) + 2;
            wchar_t *file = malloc(n * sizeof(wchar_t));
            if (file) {
                swprintf(file, n, L"%ls\\%ls", wp, fd.cFileName);
                DeleteFileW(file);
                free(file);
            }
        } while (FindNextFileW(f, &fd));
        FindClose(f);
    }
    if (!RemoveDirectoryW(wp) && GetLastError() != ERROR_FILE_NOT_FOUND &&
        GetLastError() != ERROR_PATH_NOT_FOUND)
        return win_err(err, "remove", path);
    return 0;
}
