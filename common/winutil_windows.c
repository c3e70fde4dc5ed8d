/*
 * common/winutil.h: strings, paths, errors and handles for the Windows
 * side of the platform seam. Any thread.
 */
#include "common/winutil.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>

wchar_t *
win_wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0)
        return NULL;
    wchar_t *w = malloc((size_t)n * sizeof(wchar_t));
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        return NULL;
    }
    return w;
}

wchar_t *
win_wide_sep(const char *s)
{
    wchar_t *w = win_wide(s);
    for (wchar_t *c = w; c && *c; c++)
        if (*c == L'/')
            *c = L'\\';
    return w;
}

char *
win_utf8(const wchar_t *w)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    if (n <= 0)
        return NULL;
    char *s = malloc((size_t)n);
    if (s && WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n) {
        free(s);
        return NULL;
    }
    return s;
}

wchar_t *
win_long_path(const char *path, int *err)
{
    wchar_t *w = win_wide(path);
    if (!w) {
        *err = path ? -EILSEQ : -EINVAL;
        return NULL;
    }
    if (wcsncmp(w, L"\\\\?\\", 4) == 0)
        return w;
    DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
    wchar_t *full = n ? malloc((size_t)n * sizeof(wchar_t)) : NULL;
    DWORD got = full ? GetFullPathNameW(w, n, full, NULL) : 0;
    free(w);
    if (got == 0 || got >= n) {
        *err = !n || full ? -EINVAL : -ENOMEM;
        free(full);
        return NULL;
    }
    /* \\server\share\x becomes \\?\UNC\server\share\x, C:\x \\?\C:\x. */
    bool unc = full[0] == L'\\' && full[1] == L'\\';
    const wchar_t *prefix = unc ? L"\\\\?\\UNC" : L"\\\\?\\";
    const wchar_t *rest = unc ? full + 1 : full;
    size_t plen = wcslen(prefix), rlen = wcslen(rest);
    wchar_t *out = malloc((plen + rlen + 1) * sizeof(wchar_t));
    if (!out) {
        free(full);
        *err = -ENOMEM;
        return NULL;
    }
    memcpy(out, prefix, plen * sizeof(wchar_t));
    memcpy(out + plen, rest, (rlen + 1) * sizeof(wchar_t));
    free(full);
    return out;
}

int
win_errno(DWORD e)
{
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_BAD_NET_NAME:
    case ERROR_MOD_NOT_FOUND:
        return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_CURRENT_DIRECTORY:
    case ERROR_NETWORK_ACCESS_DENIED:
        return EACCES;
    case ERROR_PRIVILEGE_NOT_HELD:
        return EPERM;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
        return EEXIST;
    case ERROR_DIR_NOT_EMPTY:
        return ENOTEMPTY;
    case ERROR_DIRECTORY:
        return ENOTDIR;
    case ERROR_NOT_SAME_DEVICE:
        return EXDEV;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
        return ENOSPC;
    case 1295: /* ERROR_DISK_QUOTA_EXCEEDED */
        return EDQUOT;
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
    case ERROR_BUSY:
        return EBUSY;
    case ERROR_INVALID_NAME:
    case ERROR_BAD_PATHNAME:
        return EILSEQ;
    case ERROR_FILENAME_EXCED_RANGE:
    case ERROR_BUFFER_OVERFLOW:
        return ENAMETOOLONG;
    case ERROR_NOT_SUPPORTED:
    case ERROR_INVALID_FUNCTION:
    case ERROR_CALL_NOT_IMPLEMENTED:
        return ENOTSUP;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return ENOMEM;
    case ERROR_INVALID_HANDLE:
        return EBADF;
    case ERROR_INVALID_PARAMETER:
    case ERROR_NEGATIVE_SEEK:
        return EINVAL;
    case ERROR_CANT_RESOLVE_FILENAME:
    case 681: /* ERROR_STOPPED_ON_SYMLINK */
        return ELOOP;
    case ERROR_BROKEN_PIPE:
    case ERROR_NO_DATA:
        return EPIPE;
    case ERROR_WRITE_PROTECT:
        return EROFS;
    case ERROR_NOT_READY:
        return EAGAIN;
    default:
        return EIO;
    }
}

typedef ULONG(WINAPI *rtl_status_fn)(NTSTATUS);

int
win_nt_errno(NTSTATUS st)
{
    /* The statuses the seam branches on, exactly; the rest through the
     * Win32 error they stand for. */
    switch ((unsigned long)st) {
    case 0xC0000034: /* STATUS_OBJECT_NAME_NOT_FOUND */
    case 0xC000003A: /* STATUS_OBJECT_PATH_NOT_FOUND */
    case 0xC000000F: /* STATUS_NO_SUCH_FILE */
        return ENOENT;
    case 0xC0000035: /* STATUS_OBJECT_NAME_COLLISION */
        return EEXIST;
    case 0xC0000103: /* STATUS_NOT_A_DIRECTORY */
        return ENOTDIR;
    case 0xC00000BA: /* STATUS_FILE_IS_A_DIRECTORY */
        return EISDIR;
    case 0xC0000101: /* STATUS_DIRECTORY_NOT_EMPTY */
        return ENOTEMPTY;
    case 0xC0000033: /* STATUS_OBJECT_NAME_INVALID */
        return EILSEQ;
    case 0xC0000121: /* STATUS_CANNOT_DELETE */
    case 0xC0000022: /* STATUS_ACCESS_DENIED */
        return EACCES;
    case 0xC0000061: /* STATUS_PRIVILEGE_NOT_HELD */
        return EPERM;
    case 0xC00000D4: /* STATUS_NOT_SAME_DEVICE */
        return EXDEV;
    case 0xC0000043: /* STATUS_SHARING_VIOLATION */
        return EBUSY;
    case 0xC00000BB: /* STATUS_NOT_SUPPORTED */
    case 0xC0000002: /* STATUS_NOT_IMPLEMENTED */
    case 0xC0000010: /* STATUS_INVALID_DEVICE_REQUEST */
        return ENOTSUP;
    case 0xC000007F: /* STATUS_DISK_FULL */
        return ENOSPC;
    case 0xC0000275: /* STATUS_NOT_A_REPARSE_POINT */
        return EINVAL;
    default:
        break;
    }
    static rtl_status_fn to_dos;
    if (!to_dos) {
        FARPROC f = GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "RtlNtStatusToDosError");
        memcpy(&to_dos, &f, sizeof(to_dos));
    }
    return to_dos ? win_errno(to_dos(st)) : EIO;
}

HANDLE
win_handle(int fd)
{
    return fd < 0 ? INVALID_HANDLE_VALUE : (HANDLE)_get_osfhandle(fd);
}

int
win_fd(HANDLE h)
{
    int fd = _open_osfhandle((intptr_t)h, _O_BINARY);
    if (fd < 0) {
        CloseHandle(h);
        return -EMFILE;
    }
    _setmode(fd, _O_BINARY);
    return fd;
}

LONGLONG
win_ticks(const struct timespec *ts)
{
    return ((LONGLONG)ts->tv_sec + 11644473600LL) * 10000000LL + ts->tv_nsec / 100;
}

struct timespec
win_timespec(LONGLONG ticks)
{
    LONGLONG t = ticks - 116444736000000000LL;
    struct timespec ts = {(time_t)(t / 10000000LL), (long)(t % 10000000LL) * 100};
    if (ts.tv_nsec < 0) {
        ts.tv_nsec += 1000000000L;
        ts.tv_sec--;
    }
    return ts;
}

int
win_stat_handle(HANDLE h, struct os_stat *st)
{
    BY_HANDLE_FILE_INFORMATION fi;
    if (!GetFileInformationByHandle(h, &fi))
        return -win_errno(GetLastError());
    memset(st, 0, sizeof(*st));
    if (fi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)
        st->st_mode = S_IFLNK | 0777; /* a symlink, or a junction: never walked through */
    else if (fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
        st->st_mode = S_IFDIR | 0755;
    else
        st->st_mode = S_IFREG | (fi.dwFileAttributes & FILE_ATTRIBUTE_READONLY ? 0444 : 0644);
    st->st_ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow;
    st->st_dev = fi.dwVolumeSerialNumber;
    st->st_nlink = fi.nNumberOfLinks;
    st->st_size =
        S_ISREG(st->st_mode) ? (int64_t)(((uint64_t)fi.nFileSizeHigh << 32) | fi.nFileSizeLow) : 0;
    LARGE_INTEGER a = {.LowPart = fi.ftLastAccessTime.dwLowDateTime,
                       .HighPart = (LONG)fi.ftLastAccessTime.dwHighDateTime};
    LARGE_INTEGER m = {.LowPart = fi.ftLastWriteTime.dwLowDateTime,
                       .HighPart = (LONG)fi.ftLastWriteTime.dwHighDateTime};
    st->st_atim = win_timespec(a.QuadPart);
    st->st_mtim = win_timespec(m.QuadPart);
    return 0;
}

int
win_nt_open(HANDLE dir, const wchar_t *name, ACCESS_MASK access, ULONG disposition, ULONG options,
            HANDLE *out, ULONG_PTR *info)
{
    size_t len = wcslen(name);
    if (len * sizeof(wchar_t) > 0xfffe)
        return -ENAMETOOLONG;
    UNICODE_STRING us = {.Length = (USHORT)(len * sizeof(wchar_t)),
                         .MaximumLength = (USHORT)(len * sizeof(wchar_t)),
                         .Buffer = (PWSTR)name};
    OBJECT_ATTRIBUTES oa;
    InitializeObjectAttributes(&oa, &us, OBJ_CASE_INSENSITIVE, dir, NULL);
    IO_STATUS_BLOCK io = {0};
    HANDLE h = NULL;
    /* FILE_OPEN_REPARSE_POINT (0x00200000): the entry itself, never
     * what a symlink or junction names. FILE_OPEN_FOR_BACKUP_INTENT:
     * the daemon's backup privilege, where it has one, applies. */
    NTSTATUS st = NtCreateFile(
        &h, access | SYNCHRONIZE, &oa, &io, NULL, FILE_ATTRIBUTE_NORMAL,
        FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, disposition,
        options | FILE_SYNCHRONOUS_IO_NONALERT | 0x00200000 | FILE_OPEN_FOR_BACKUP_INTENT, NULL, 0);
    if (st < 0)
        return -win_nt_errno(st);
    if (info)
        *info = io.Information;
    *out = h;
    return 0;
}

/* FileDispositionInfoEx and its flags, which mingw-w64 declares only for
 * _WIN32_WINNT values past Windows 10 1607's. */
#define DISPOSITION_INFO_EX ((FILE_INFO_BY_HANDLE_CLASS)21)
#define DISPOSITION_DELETE 0x1
#define DISPOSITION_POSIX_SEMANTICS 0x2

int
win_delete_handle(HANDLE h)
{
    DWORD flags = DISPOSITION_DELETE | DISPOSITION_POSIX_SEMANTICS;
    if (SetFileInformationByHandle(h, DISPOSITION_INFO_EX, &flags, sizeof(flags)))
        return 0;
    DWORD e = GetLastError();
    if (e == ERROR_DIR_NOT_EMPTY)
        return -ENOTEMPTY;
    FILE_DISPOSITION_INFO d = {.DeleteFile = TRUE};
    if (SetFileInformationByHandle(h, FileDispositionInfo, &d, sizeof(d)))
        return 0;
    e = GetLastError();
    return e == ERROR_DIR_NOT_EMPTY ? -ENOTEMPTY : -win_errno(e);
}
