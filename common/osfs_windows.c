/*
 * common/osfs.h on Windows: every path becomes its \\?\ wide form
 * (common/winutil.h), every handle is opened shared for reading, writing
 * and deleting (so a file can be renamed or removed while someone reads
 * it, as on Linux) and lives in a C runtime descriptor. Directory
 * listings are GetFileInformationByHandleEx(FileIdBothDirectoryInfo) on a
 * handle of their own. Any thread; blocking.
 */
#include "common/osfs.h"

#include <windows.h>

#include <errno.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/winutil.h"

#define SHARE_ALL (FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)

/* CreateFileW of path, or -errno. */
static int
open_path(const char *path, DWORD access, DWORD disposition, DWORD flags, HANDLE *out)
{
    int e = 0;
    wchar_t *w = win_long_path(path, &e);
    if (!w)
        return e;
    HANDLE h = CreateFileW(w, access, SHARE_ALL, NULL, disposition,
                           flags | FILE_FLAG_BACKUP_SEMANTICS, NULL);
    DWORD err = GetLastError();
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return -win_errno(err);
    *out = h;
    return 0;
}

int
osfs_open(const char *path, int flags, mode_t mode)
{
    (void)mode; /* modes are not ACLs: files get their directory's */
    DWORD access = 0;
    switch (flags & (O_RDONLY | O_WRONLY | O_RDWR)) {
    case O_WRONLY:
        access = GENERIC_WRITE;
        break;
    case O_RDWR:
        access = GENERIC_READ | GENERIC_WRITE;
        break;
    default:
        access = GENERIC_READ;
    }
    if (flags & O_APPEND)
        access = (access & ~GENERIC_WRITE) | FILE_APPEND_DATA | SYNCHRONIZE;
    access |= FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES;
    DWORD disp = OPEN_EXISTING;
    if ((flags & O_CREAT) && (flags & O_EXCL))
        disp = CREATE_NEW;
    else if ((flags & O_CREAT) && (flags & O_TRUNC))
        disp = CREATE_ALWAYS;
    else if (flags & O_CREAT)
        disp = OPEN_ALWAYS;
    else if (flags & O_TRUNC)
        disp = TRUNCATE_EXISTING;
    DWORD f = FILE_ATTRIBUTE_NORMAL;
    if (flags & OSFS_NOFOLLOW)
        f |= FILE_FLAG_OPEN_REPARSE_POINT;
    HANDLE h;
    int r = open_path(path, access, disp, f, &h);
    if (r == -EACCES && (access & FILE_WRITE_ATTRIBUTES) && !(flags & (O_WRONLY | O_RDWR)))
        r = open_path(path, access & ~FILE_WRITE_ATTRIBUTES, disp, f, &h); /* a read-only file */
    if (r < 0)
        return r;
    if (flags & OSFS_NOFOLLOW) {
        BY_HANDLE_FILE_INFORMATION fi;
        if (GetFileInformationByHandle(h, &fi) &&
            (fi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
            CloseHandle(h);
            return -ELOOP;
        }
    }
    return win_fd(h);
}

static int
stat_path(const char *path, bool follow, struct os_stat *st)
{
    HANDLE h;
    int r = open_path(path, FILE_READ_ATTRIBUTES, OPEN_EXISTING,
                      follow ? 0 : FILE_FLAG_OPEN_REPARSE_POINT, &h);
    if (r < 0)
        return r;
    r = win_stat_handle(h, st);
    CloseHandle(h);
    return r;
}

int
osfs_stat(const char *path, struct os_stat *st)
{
    return stat_path(path, true, st);
}

int
osfs_lstat(const char *path, struct os_stat *st)
{
    return stat_path(path, false, st);
}

int
osfs_fstat(int fd, struct os_stat *st)
{
    HANDLE h = win_handle(fd);
    return h == INVALID_HANDLE_VALUE ? -EBADF : win_stat_handle(h, st);
}

bool
osfs_exists(const char *path)
{
    struct os_stat st;
    return stat_path(path, false, &st) == 0;
}

int
osfs_mkdir(const char *path, mode_t mode)
{
    (void)mode;
    int e = 0;
    wchar_t *w = win_long_path(path, &e);
    if (!w)
        return e;
    BOOL ok = CreateDirectoryW(w, NULL);
    DWORD err = GetLastError();
    free(w);
    return ok ? 0 : -win_errno(err);
}

/* Deletes what path names (not following it), as unlink(2) or rmdir(2). */
static int
remove_path(const char *path, bool dir)
{
    HANDLE h;
    int r = open_path(path, DELETE | FILE_READ_ATTRIBUTES, OPEN_EXISTING,
                      FILE_FLAG_OPEN_REPARSE_POINT, &h);
    if (r < 0)
        return r;
    BY_HANDLE_FILE_INFORMATION fi;
    if (!GetFileInformationByHandle(h, &fi)) {
        r = -win_errno(GetLastError());
    } else {
        bool is_dir = (fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) &&
                      !(fi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT);
        if (is_dir != dir)
            r = dir ? -ENOTDIR : -EISDIR;
    }
    if (r == 0)
        r = win_delete_handle(h);
    CloseHandle(h);
    return r;
}

int
osfs_unlink(const char *path)
{
    return remove_path(path, false);
}

int
osfs_rmdir(const char *path)
{
    return remove_path(path, true);
}

int
osfs_chmod(const char *path, mode_t mode)
{
    (void)mode;
    return osfs_exists(path) ? 0 : -ENOENT;
}

int
osfs_rename(const char *from, const char *to)
{
    int e = 0;
    wchar_t *wf = win_long_path(from, &e);
    wchar_t *wt = wf ? win_long_path(to, &e) : NULL;
    if (!wt) {
        free(wf);
        return e;
    }
    BOOL ok = MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING);
    DWORD err = GetLastError();
    free(wf);
    free(wt);
    return ok ? 0 : -win_errno(err);
}

int
osfs_fsync(int fd)
{
    HANDLE h = win_handle(fd);
    if (h == INVALID_HANDLE_VALUE)
        return -EBADF;
    if (FlushFileBuffers(h))
        return 0;
    /* A directory, or a handle without write access: NTFS journals the
     * metadata; there is nothing more to ask. */
    BY_HANDLE_FILE_INFORMATION fi;
    DWORD e = GetLastError();
    if (GetFileInformationByHandle(h, &fi) && (fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))
        return 0;
    return e == ERROR_ACCESS_DENIED ? 0 : -win_errno(e);
}

int
osfs_fsync_dir(const char *path)
{
    HANDLE h;
    int r = open_path(path, GENERIC_READ, OPEN_EXISTING, 0, &h);
    if (r < 0)
        return r;
    FlushFileBuffers(h); /* where the OS allows it on a directory */
    CloseHandle(h);
    return 0;
}

/* Replaces the trailing XXXXXX of tmpl with random letters and digits. */
static int
fill_template(char *tmpl)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t n = strlen(tmpl);
    if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX") != 0)
        return -EINVAL;
    unsigned char raw[6];
    int r = os_random_bytes(raw, sizeof(raw));
    if (r < 0)
        return r;
    for (int i = 0; i < 6; i++)
        tmpl[n - 6 + i] = chars[raw[i] % (sizeof(chars) - 1)];
    return 0;
}

int
osfs_mkstemp(char *tmpl)
{
    size_t n = strlen(tmpl);
    for (int tries = 0; tries < 100; tries++) {
        if (tries)
            memcpy(tmpl + n - 6, "XXXXXX", 6);
        int r = fill_template(tmpl);
        if (r < 0)
            return r;
        HANDLE h;
        r = open_path(tmpl, GENERIC_READ | GENERIC_WRITE | DELETE, CREATE_NEW,
                      FILE_ATTRIBUTE_NORMAL, &h);
        if (r == 0)
            return win_fd(h);
        if (r != -EEXIST)
            return r;
    }
    return -EEXIST;
}

int
osfs_mkdtemp(char *tmpl)
{
    size_t n = strlen(tmpl);
    for (int tries = 0; tries < 100; tries++) {
        if (tries)
            memcpy(tmpl + n - 6, "XXXXXX", 6);
        int r = fill_template(tmpl);
        if (r < 0)
            return r;
        r = osfs_mkdir(tmpl, 0700);
        if (r != -EEXIST)
            return r;
    }
    return -EEXIST;
}

int
osfs_dir_spread(const char *path)
{
    /* NTFS places files by its own rules; there is no such hint. */
    (void)path;
    return -EOPNOTSUPP;
}

int
osfs_free_bytes(const char *path, uint64_t *out)
{
    int e = 0;
    wchar_t *w = win_long_path(path, &e);
    if (!w)
        return e;
    /* The API wants a directory with a trailing separator. */
    size_t n = wcslen(w);
    wchar_t *d = malloc((n + 2) * sizeof(wchar_t));
    if (!d) {
        free(w);
        return -ENOMEM;
    }
    memcpy(d, w, n * sizeof(wchar_t));
    d[n] = n && w[n - 1] == L'\\' ? L'\0' : L'\\';
    d[n + 1] = L'\0';
    ULARGE_INTEGER avail;
    BOOL ok = GetDiskFreeSpaceExW(d, &avail, NULL, NULL);
    DWORD err = GetLastError();
    free(w);
    free(d);
    if (!ok)
        return -win_errno(err);
    *out = avail.QuadPart;
    return 0;
}

/* ---- directory listings ------------------------------------------------------ */

#define DIR_BUF (64 * 1024)

struct osfs_dir {
    HANDLE h;
    bool restart; /* the next query starts from the first entry */
    bool end;
    unsigned char *buf;
    size_t off, len; /* the entry at off in buf, len bytes valid */
    char *name;
};

static int
dir_wrap(HANDLE h, struct osfs_dir **out)
{
    struct osfs_dir *d = calloc(1, sizeof(*d));
    if (d)
        d->buf = malloc(DIR_BUF);
    if (!d || !d->buf) {
        if (d)
            free(d);
        CloseHandle(h);
        return -ENOMEM;
    }
    d->h = h;
    d->restart = true;
    *out = d;
    return 0;
}

int
osfs_dir_open(const char *path, struct osfs_dir **out)
{
    HANDLE h;
    int r = open_path(path, FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES, OPEN_EXISTING, 0, &h);
    if (r < 0)
        return r;
    return dir_wrap(h, out);
}

int
osfs_dir_open_at(int dirfd, struct osfs_dir **out)
{
    HANDLE base = win_handle(dirfd);
    if (base == INVALID_HANDLE_VALUE)
        return -EBADF;
    /* A handle of its own on the same directory: a listing's position is
     * the handle's. */
    HANDLE h;
    int r = win_nt_open(base, L"", FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES, FILE_OPEN,
                        FILE_DIRECTORY_FILE, &h, NULL);
    if (r < 0)
        return r;
    return dir_wrap(h, out);
}

const char *
osfs_dir_next(struct osfs_dir *d, int *err)
{
    if (err)
        *err = 0;
    for (;;) {
        if (d->off >= d->len) {
            if (d->end)
                return NULL;
            FILE_INFO_BY_HANDLE_CLASS cls =
                d->restart ? FileIdBothDirectoryRestartInfo : FileIdBothDirectoryInfo;
            d->restart = false;
            if (!GetFileInformationByHandleEx(d->h, cls, d->buf, DIR_BUF)) {
                DWORD e = GetLastError();
                d->end = true;
                if (e != ERROR_NO_MORE_FILES && e != ERROR_FILE_NOT_FOUND && err)
                    *err = -win_errno(e);
                return NULL;
            }
            d->off = 0;
            d->len = DIR_BUF;
        }
        FILE_ID_BOTH_DIR_INFO *e = (FILE_ID_BOTH_DIR_INFO *)(d->buf + d->off);
        d->off = e->NextEntryOffset ? d->off + e->NextEntryOffset : d->len;
        size_t n = e->FileNameLength / sizeof(wchar_t);
        if ((n == 1 && e->FileName[0] == L'.') ||
            (n == 2 && e->FileName[0] == L'.' && e->FileName[1] == L'.'))
            continue;
        wchar_t *w = malloc((n + 1) * sizeof(wchar_t));
        if (!w) {
            if (err)
                *err = -ENOMEM;
            return NULL;
        }
        memcpy(w, e->FileName, n * sizeof(wchar_t));
        w[n] = L'\0';
        free(d->name);
        d->name = win_utf8(w);
        free(w);
        if (!d->name) {
            if (err)
                *err = -ENOMEM;
            return NULL;
        }
        return d->name;
    }
}

void
osfs_dir_rewind(struct osfs_dir *d)
{
    d->restart = true;
    d->end = false;
    d->off = d->len = 0;
}

void
osfs_dir_close(struct osfs_dir *d)
{
    if (!d)
        return;
    CloseHandle(d->h);
    free(d->buf);
    free(d->name);
    free(d);
}
