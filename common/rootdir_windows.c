/*
 * rootdir.h on Windows: every name below a directory is opened with
 * NtCreateFile relative to that directory's handle, one component at a
 * time, with FILE_OPEN_REPARSE_POINT, and a component that turns out to
 * be a reparse point (a symlink, a junction, a mount point) ends the walk
 * with -ELOOP: nothing is followed, nothing resolves outside the
 * directory the walk starts from. Names are checked before they reach
 * the OS: one NTFS component each, never a path, a stream (':') or a name
 * Windows would trim ("x." or "x "). Links, renames and deletes are
 * NtSetInformationFile on handles of the entries themselves, relative to
 * directory handles, so they cannot be redirected either.
 *
 * What NTFS has not, or does not mean here: owners and modes (no-ops:
 * numeric ids and mode bits are not ACLs), device nodes and FIFOs
 * (-ENOTSUP), xattrs (-ENOTSUP; a listing is empty). Symlinks are
 * IO_REPARSE_TAG_SYMLINK reparse points set on a handle
 * (FSCTL_SET_REPARSE_POINT), which needs SeCreateSymbolicLinkPrivilege
 * (a service as LocalSystem, an administrator, or developer mode):
 * -EPERM without it, -ENOTSUP where the filesystem has none (Wine).
 * An exchange is three renames (rootdir_exchange_repair undoes or
 * finishes one a crash cut short).
 *
 * Any thread; blocking.
 */
#include "common/rootdir.h"

#include <windows.h>
#include <winioctl.h>

#include <errno.h>
#include <io.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/winutil.h"

#define DIR_ACCESS (FILE_LIST_DIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES)
#define FILE_LINK_INFO_CLASS 11   /* FileLinkInformation */
#define FILE_RENAME_INFO_CLASS 10 /* FileRenameInformation */

/* FILE_RENAME_INFORMATION and FILE_LINK_INFORMATION share this layout. */
struct name_info {
    BOOLEAN replace;
    HANDLE root;
    ULONG length;
    WCHAR name[1];
};

/* REPARSE_DATA_BUFFER's symlink case. */
struct symlink_reparse {
    ULONG tag;
    USHORT data_length;
    USHORT reserved;
    USHORT subst_offset, subst_length, print_offset, print_length;
    ULONG flags;
    WCHAR path[1];
};
#define SYMLINK_RELATIVE 1

void
rootdir_test_force_walk(bool on)
{
    (void)on; /* the walk is the only way here */
}

/* The privileges a symlink and a backup-intent open need, enabled once
 * where the daemon's token holds them. */
static void
enable_privileges(void)
{
    static atomic_bool done;
    if (atomic_exchange(&done, true))
        return;
    HANDLE token;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &token))
        return;
    static const wchar_t *const names[] = {L"SeCreateSymbolicLinkPrivilege", L"SeBackupPrivilege",
                                           L"SeRestorePrivilege"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        TOKEN_PRIVILEGES tp = {.PrivilegeCount = 1};
        if (!LookupPrivilegeValueW(NULL, names[i], &tp.Privileges[0].Luid))
            continue;
        tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
        AdjustTokenPrivileges(token, FALSE, &tp, sizeof(tp), NULL, NULL);
    }
    CloseHandle(token);
}

/* One NTFS component as a new wide string, or NULL with *err: -EILSEQ for
 * a name Windows cannot hold as one component, -EINVAL for "" "." "..". */
static wchar_t *
component(const char *name, size_t len, int *err)
{
    if (len == 0 || (len == 1 && name[0] == '.') ||
        (len == 2 && name[0] == '.' && name[1] == '.')) {
        *err = -EINVAL;
        return NULL;
    }
    if (len > NAME_MAX) {
        *err = -ENAMETOOLONG;
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || strchr("\\/:*?\"<>|", c)) {
            *err = -EILSEQ;
            return NULL;
        }
    }
    if (name[len - 1] == '.' || name[len - 1] == ' ') {
        *err = -EILSEQ;
        return NULL;
    }
    char buf[NAME_MAX + 1];
    memcpy(buf, name, len);
    buf[len] = '\0';
    wchar_t *w = win_wide(buf);
    if (!w)
        *err = -EILSEQ;
    return w;
}

static bool
is_reparse(HANDLE h)
{
    FILE_BASIC_INFO bi;
    return GetFileInformationByHandleEx(h, FileBasicInfo, &bi, sizeof(bi)) &&
           (bi.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT);
}

static bool
is_dir(HANDLE h)
{
    FILE_BASIC_INFO bi;
    return GetFileInformationByHandleEx(h, FileBasicInfo, &bi, sizeof(bi)) &&
           (bi.FileAttributes & FILE_ATTRIBUTE_DIRECTORY);
}

/*
 * Opens component name (len bytes) of dir. Directories are opened as
 * such, and a reparse point where a directory is wanted is -ELOOP, as is
 * a reparse point anywhere with no_reparse.
 */
static int
open_one(HANDLE dir, const char *name, size_t len, ACCESS_MASK access, ULONG disposition,
         ULONG options, bool no_reparse, HANDLE *out, ULONG_PTR *info)
{
    int e = 0;
    wchar_t *w = component(name, len, &e);
    if (!w)
        return e;
    HANDLE h;
    int r = win_nt_open(dir, w, access | FILE_READ_ATTRIBUTES, disposition, options, &h, info);
    if (r == -EACCES && (access & FILE_WRITE_ATTRIBUTES))
        r = win_nt_open(dir, w, (access & ~FILE_WRITE_ATTRIBUTES) | FILE_READ_ATTRIBUTES,
                        disposition, options, &h, info);
    if (r == -ENOTDIR && (options & FILE_DIRECTORY_FILE)) {
        /* A file, or a symlink to one: tell them apart. */
        HANDLE t;
        if (win_nt_open(dir, w, FILE_READ_ATTRIBUTES, FILE_OPEN, 0, &t, NULL) == 0) {
            if (is_reparse(t))
                r = -ELOOP;
            CloseHandle(t);
        }
    }
    free(w);
    if (r < 0)
        return r;
    if ((no_reparse || (options & FILE_DIRECTORY_FILE)) && is_reparse(h)) {
        CloseHandle(h);
        return -ELOOP;
    }
    *out = h;
    return 0;
}

/*
 * Walks rel ("a/b/c", cleaned) from base: every component but the last
 * as a directory that is not a reparse point; the last opened with
 * access, disposition and options.
 */
static int
walk(int base, const char *rel, ACCESS_MASK access, ULONG disposition, ULONG options,
     bool no_reparse, HANDLE *out, ULONG_PTR *info)
{
    HANDLE root = win_handle(base);
    if (root == INVALID_HANDLE_VALUE)
        return -EBADF;
    enable_privileges();
    HANDLE cur = root;
    const char *p = rel;
    for (;;) {
        size_t n = strcspn(p, "/");
        const char *next = p + n;
        while (*next == '/')
            next++;
        bool last = *next == '\0';
        HANDLE h;
        int r =
            last ? open_one(cur, p, n, access, disposition, options, no_reparse, &h, info)
                 : open_one(cur, p, n, DIR_ACCESS, FILE_OPEN, FILE_DIRECTORY_FILE, true, &h, NULL);
        if (cur != root)
            CloseHandle(cur);
        if (r < 0)
            return r;
        cur = h;
        if (last) {
            *out = cur;
            return 0;
        }
        p = next;
    }
}

/* The handle of entry rel below dir ("" for dir itself, a new handle). */
static int
open_node(int dir, const char *rel, ACCESS_MASK access, HANDLE *out)
{
    if (rel[0] == '\0') {
        HANDLE base = win_handle(dir);
        if (base == INVALID_HANDLE_VALUE)
            return -EBADF;
        return win_nt_open(base, L"", access | FILE_READ_ATTRIBUTES, FILE_OPEN, 0, out, NULL);
    }
    return walk(dir, rel, access, FILE_OPEN, 0, false, out, NULL);
}

int
rootdir_open(const char *path)
{
    int e = 0;
    wchar_t *w = win_long_path(path, &e);
    if (!w)
        return e;
    /* The root itself is trusted, and may be reached through a link. */
    DWORD access = DIR_ACCESS | FILE_WRITE_ATTRIBUTES | SYNCHRONIZE;
    HANDLE h = CreateFileW(w, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                           OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, NULL);
    if (h == INVALID_HANDLE_VALUE && GetLastError() == ERROR_ACCESS_DENIED)
        h = CreateFileW(w, DIR_ACCESS | SYNCHRONIZE,
                        FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                        FILE_FLAG_BACKUP_SEMANTICS, NULL);
    DWORD err = GetLastError();
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return -win_errno(err);
    if (!is_dir(h)) {
        CloseHandle(h);
        return -ENOTDIR;
    }
    return win_fd(h);
}

int
rootdir_open_dir(int base, const char *rel)
{
    HANDLE h;
    int r = rel[0] ? walk(base, rel, DIR_ACCESS | FILE_WRITE_ATTRIBUTES, FILE_OPEN,
                          FILE_DIRECTORY_FILE, true, &h, NULL)
                   : open_node(base, "", DIR_ACCESS | FILE_WRITE_ATTRIBUTES, &h);
    if (r == -EACCES && !rel[0])
        r = open_node(base, "", DIR_ACCESS, &h);
    return r < 0 ? r : win_fd(h);
}

int
rootdir_open_or_make_dir(int dir, const char *name, mode_t mode, bool *created)
{
    (void)mode;
    *created = false;
    HANDLE h;
    ULONG_PTR info = 0;
    int r = walk(dir, name, DIR_ACCESS | FILE_WRITE_ATTRIBUTES, FILE_OPEN_IF, FILE_DIRECTORY_FILE,
                 true, &h, &info);
    if (r < 0)
        return r;
    *created = info == FILE_CREATED;
    return win_fd(h);
}

int
rootdir_open_node(int base, const char *rel)
{
    HANDLE h;
    int r = open_node(base, rel, FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES, &h);
    return r < 0 ? r : win_fd(h);
}

int
rootdir_open_file(int dir, const char *name)
{
    HANDLE h;
    int r = walk(dir, name, GENERIC_READ | FILE_WRITE_ATTRIBUTES, FILE_OPEN, 0, true, &h, NULL);
    return r < 0 ? r : win_fd(h);
}

int
rootdir_open_in_root(int root, const char *rel)
{
    (void)root;
    (void)rel;
    return -ENOTSUP;
}

int
rootdir_open_dir_in_root(int root, const char *rel)
{
    (void)root;
    (void)rel;
    return -ENOTSUP;
}

ssize_t
rootdir_resolve_in_root(int root, const char *rel, char *buf, size_t len)
{
    (void)root;
    (void)rel;
    (void)buf;
    (void)len;
    return -ENOTSUP;
}

ssize_t
rootdir_fd_path_in_root(int root, int fd, char *buf, size_t len)
{
    (void)root;
    (void)fd;
    (void)buf;
    (void)len;
    return -ENOTSUP;
}

int
rootdir_create_file(int dir, const char *name, mode_t mode)
{
    (void)mode;
    HANDLE h;
    int r = walk(dir, name, GENERIC_READ | GENERIC_WRITE | DELETE, FILE_CREATE,
                 FILE_NON_DIRECTORY_FILE, true, &h, NULL);
    return r < 0 ? r : win_fd(h);
}

int
rootdir_stat(int dir, const char *name, struct os_stat *st)
{
    if (name[0] == '\0') {
        HANDLE h = win_handle(dir);
        return h == INVALID_HANDLE_VALUE ? -EBADF : win_stat_handle(h, st);
    }
    HANDLE h;
    int r = open_node(dir, name, FILE_READ_ATTRIBUTES, &h);
    if (r < 0)
        return r;
    r = win_stat_handle(h, st);
    CloseHandle(h);
    return r;
}

ssize_t
rootdir_readlink(int dir, const char *name, char *buf, size_t len)
{
    HANDLE h;
    int r = open_node(dir, name, FILE_READ_ATTRIBUTES, &h);
    if (r < 0)
        return r;
    unsigned char data[MAXIMUM_REPARSE_DATA_BUFFER_SIZE];
    DWORD got = 0;
    BOOL ok = DeviceIoControl(h, FSCTL_GET_REPARSE_POINT, NULL, 0, data, sizeof(data), &got, NULL);
    DWORD e = GetLastError();
    CloseHandle(h);
    if (!ok)
        return e == ERROR_NOT_A_REPARSE_POINT ? -EINVAL : -win_errno(e);
    struct symlink_reparse *rp = (struct symlink_reparse *)data;
    if (rp->tag != IO_REPARSE_TAG_SYMLINK)
        return -EINVAL;
    size_t n = rp->print_length / sizeof(WCHAR);
    wchar_t *w = malloc((n + 1) * sizeof(wchar_t));
    if (!w)
        return -ENOMEM;
    memcpy(w, (char *)rp->path + rp->print_offset, n * sizeof(wchar_t));
    w[n] = L'\0';
    char *s = win_utf8(w);
    free(w);
    if (!s)
        return -ENOMEM;
    /* Stored with Windows separators; given back as the tar had it. */
    for (char *c = s; *c; c++)
        if (*c == '\\')
            *c = '/';
    size_t sl = strlen(s);
    if (sl > len)
        sl = len;
    memcpy(buf, s, sl);
    free(s);
    return (ssize_t)sl;
}

int
rootdir_dup(int fd)
{
    HANDLE h = win_handle(fd), dup;
    if (h == INVALID_HANDLE_VALUE)
        return -EBADF;
    if (!DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &dup, 0, FALSE,
                         DUPLICATE_SAME_ACCESS))
        return -win_errno(GetLastError());
    return win_fd(dup);
}

int
rootdir_mkdir(int dir, const char *name, mode_t mode)
{
    (void)mode;
    HANDLE h;
    int r = walk(dir, name, FILE_READ_ATTRIBUTES, FILE_CREATE, FILE_DIRECTORY_FILE, true, &h, NULL);
    if (r == 0)
        CloseHandle(h);
    return r;
}

/* Is target, seen from dir, an existing directory (for a directory symlink)? */
static bool
target_is_dir(int dir, const char *target)
{
    if (!target[0] || target[0] == '/' || strstr(target, ".."))
        return false;
    int fd = rootdir_open_dir(dir, target);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

int
rootdir_symlink(int dir, const char *name, const char *target)
{
    size_t tlen = strlen(target);
    if (tlen == 0 || tlen > 16000)
        return -EINVAL;
    char *t = strdup(target);
    if (!t)
        return -ENOMEM;
    for (char *c = t; *c; c++)
        if (*c == '/')
            *c = '\\';
    wchar_t *wt = win_wide(t);
    free(t);
    if (!wt)
        return -EILSEQ;
    bool dir_link = target_is_dir(dir, target);
    HANDLE h;
    int r = walk(dir, name, GENERIC_WRITE | DELETE, FILE_CREATE,
                 dir_link ? FILE_DIRECTORY_FILE : FILE_NON_DIRECTORY_FILE, true, &h, NULL);
    if (r < 0) {
        free(wt);
        return r;
    }
    size_t wl = wcslen(wt) * sizeof(WCHAR);
    size_t size = offsetof(struct symlink_reparse, path) + 2 * wl;
    struct symlink_reparse *rp = calloc(1, size);
    BOOL ok = FALSE;
    DWORD e = ERROR_NOT_ENOUGH_MEMORY;
    if (rp) {
        rp->tag = IO_REPARSE_TAG_SYMLINK;
        rp->data_length = (USHORT)(size - 8);
        rp->subst_offset = 0;
        rp->subst_length = (USHORT)wl;
        rp->print_offset = (USHORT)wl;
        rp->print_length = (USHORT)wl;
        bool absolute = wt[0] && wt[1] == L':';
        rp->flags = absolute ? 0 : SYMLINK_RELATIVE;
        memcpy(rp->path, wt, wl);
        memcpy((char *)rp->path + wl, wt, wl);
        DWORD got;
        ok = DeviceIoControl(h, FSCTL_SET_REPARSE_POINT, rp, (DWORD)size, NULL, 0, &got, NULL);
        e = GetLastError();
        /* A filesystem that takes the call and keeps nothing is none. */
        if (ok && !is_reparse(h)) {
            ok = FALSE;
            e = ERROR_NOT_SUPPORTED;
        }
    }
    free(rp);
    free(wt);
    if (!ok) {
        FILE_DISPOSITION_INFO d = {.DeleteFile = TRUE};
        SetFileInformationByHandle(h, FileDispositionInfo, &d, sizeof(d));
    }
    CloseHandle(h);
    return ok ? 0 : -win_errno(e);
}

int
rootdir_mknod(int dir, const char *name, mode_t mode, dev_t dev)
{
    (void)dir;
    (void)name;
    (void)mode;
    (void)dev;
    return -ENOTSUP;
}

/* Sets a name_info class (a link or a rename) on h: the new name in dir. */
static int
set_name(HANDLE h, int dir, const char *name, int cls, bool replace)
{
    int e = 0;
    wchar_t *w = component(name, strlen(name), &e);
    if (!w)
        return e;
    HANDLE dh = win_handle(dir);
    size_t wl = wcslen(w) * sizeof(WCHAR);
    struct name_info *ni = calloc(1, sizeof(*ni) + wl);
    if (!ni || dh == INVALID_HANDLE_VALUE) {
        free(ni);
        free(w);
        return dh == INVALID_HANDLE_VALUE ? -EBADF : -ENOMEM;
    }
    ni->replace = replace;
    ni->root = dh;
    ni->length = (ULONG)wl;
    memcpy(ni->name, w, wl);
    IO_STATUS_BLOCK io;
    NTSTATUS st =
        NtSetInformationFile(h, &io, ni, (ULONG)(sizeof(*ni) + wl), (FILE_INFORMATION_CLASS)cls);
    free(ni);
    free(w);
    return st < 0 ? -win_nt_errno(st) : 0;
}

int
rootdir_link(int from_dir, const char *from_name, int dir, const char *name)
{
    HANDLE h;
    int r = walk(from_dir, from_name, FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES, FILE_OPEN, 0,
                 false, &h, NULL);
    if (r < 0)
        return r;
    if (is_dir(h) && !is_reparse(h))
        r = -EPERM;
    else
        r = set_name(h, dir, name, FILE_LINK_INFO_CLASS, false);
    CloseHandle(h);
    return r;
}

int
rootdir_remove(int dir, const char *name, bool want_dir)
{
    HANDLE h;
    int r = walk(dir, name, DELETE | FILE_READ_ATTRIBUTES, FILE_OPEN, 0, false, &h, NULL);
    if (r < 0)
        return r;
    bool d = is_dir(h) && !is_reparse(h);
    if (d != want_dir)
        r = want_dir ? -ENOTDIR : -EISDIR;
    else
        r = win_delete_handle(h);
    CloseHandle(h);
    return r;
}

int
rootdir_rename(int from_dir, const char *from, int to_dir, const char *to)
{
    HANDLE h;
    int r = walk(from_dir, from, DELETE | FILE_READ_ATTRIBUTES, FILE_OPEN, 0, false, &h, NULL);
    if (r < 0)
        return r;
    r = set_name(h, to_dir, to, FILE_RENAME_INFO_CLASS, false);
    CloseHandle(h);
    return r;
}

int
rootdir_replace(int from_dir, const char *from, int to_dir, const char *to)
{
    HANDLE h;
    int r = walk(from_dir, from, DELETE | FILE_READ_ATTRIBUTES, FILE_OPEN, 0, false, &h, NULL);
    if (r < 0)
        return r;
    r = set_name(h, to_dir, to, FILE_RENAME_INFO_CLASS, true);
    CloseHandle(h);
    return r;
}

/* The parked name of a's exchange. */
static char *
park_name(const char *a)
{
    const char *base = strrchr(a, '/');
    base = base ? base + 1 : a;
    char *p = NULL;
    if (asprintf(&p, "%.*s%s%s", (int)(base - a), a, ROOTDIR_EXCHANGE_PARK, base) < 0)
        return NULL;
    return p;
}

int
rootdir_exchange(int dir_a, const char *a, int dir_b, const char *b)
{
    char *park = park_name(a);
    if (!park)
        return -ENOMEM;
    int r = rootdir_rename(dir_b, b, dir_a, park);
    if (r == 0 && (r = rootdir_rename(dir_a, a, dir_b, b)) < 0)
        rootdir_rename(dir_a, park, dir_b, b); /* back as it was */
    else if (r == 0)
        r = rootdir_rename(dir_a, park, dir_a, a);
    free(park);
    return r;
}

int
rootdir_exchange_repair(int dir_a, const char *a, int dir_b, const char *b)
{
    char *park = park_name(a);
    if (!park)
        return -ENOMEM;
    struct os_stat st;
    int r = 0;
    if (rootdir_stat(dir_a, park, &st) == 0) {
        if (rootdir_stat(dir_a, a, &st) == 0)
            r = rootdir_rename(dir_a, park, dir_b, b); /* cut after the first rename */
        else
            r = rootdir_rename(dir_a, park, dir_a, a); /* cut after the second */
    }
    free(park);
    return r;
}

int
rootdir_set_owner(int dir, const char *name, uid_t uid, gid_t gid)
{
    (void)uid;
    (void)gid;
    struct os_stat st;
    return rootdir_stat(dir, name, &st); /* the entry must be there */
}

int
rootdir_set_mode(int dir, const char *name, mode_t mode)
{
    (void)mode;
    struct os_stat st;
    return rootdir_stat(dir, name, &st);
}

static int
set_times_handle(HANDLE h, const struct timespec ts[2])
{
    FILE_BASIC_INFO bi = {0}; /* 0: leave as it is */
    for (int i = 0; i < 2; i++) {
        LARGE_INTEGER *t = i == 0 ? &bi.LastAccessTime : &bi.LastWriteTime;
        if (ts[i].tv_nsec == UTIME_OMIT)
            continue;
        if (ts[i].tv_nsec == UTIME_NOW) {
            FILETIME ft;
            GetSystemTimeAsFileTime(&ft);
            t->LowPart = ft.dwLowDateTime;
            t->HighPart = (LONG)ft.dwHighDateTime;
        } else {
            t->QuadPart = win_ticks(&ts[i]);
        }
    }
    if (!SetFileInformationByHandle(h, FileBasicInfo, &bi, sizeof(bi)))
        return -win_errno(GetLastError());
    return 0;
}

int
rootdir_set_times(int dir, const char *name, const struct timespec ts[2])
{
    if (name[0] == '\0')
        return rootdir_fd_set_times(dir, ts);
    HANDLE h;
    int r = open_node(dir, name, FILE_WRITE_ATTRIBUTES, &h);
    if (r < 0)
        return r;
    r = set_times_handle(h, ts);
    CloseHandle(h);
    return r;
}

int
rootdir_set_xattr(int dir, const char *name, const char *key, const void *value, size_t len)
{
    (void)dir;
    (void)name;
    (void)key;
    (void)value;
    (void)len;
    return -ENOTSUP;
}

ssize_t
rootdir_get_xattr(int dir, const char *name, const char *key, void *buf, size_t len)
{
    (void)dir;
    (void)name;
    (void)key;
    (void)buf;
    (void)len;
    return -ENODATA;
}

int
rootdir_fd_write_at(int fd, const void *buf, size_t len, int64_t off)
{
    HANDLE h = win_handle(fd);
    if (h == INVALID_HANDLE_VALUE)
        return -EBADF;
    const char *p = buf;
    while (len > 0) {
        DWORD want = len > (1u << 30) ? (1u << 30) : (DWORD)len, done = 0;
        OVERLAPPED ov = {.Offset = (DWORD)((uint64_t)off & 0xffffffffu),
                         .OffsetHigh = (DWORD)((uint64_t)off >> 32)};
        if (!WriteFile(h, p, want, &done, &ov))
            return -win_errno(GetLastError());
        if (done == 0)
            return -EIO;
        p += done;
        len -= done;
        off += done;
    }
    return 0;
}

int
rootdir_fd_truncate(int fd, int64_t size)
{
    HANDLE h = win_handle(fd);
    FILE_END_OF_FILE_INFO eof = {.EndOfFile.QuadPart = size};
    if (h == INVALID_HANDLE_VALUE)
        return -EBADF;
    if (!SetFileInformationByHandle(h, FileEndOfFileInfo, &eof, sizeof(eof)))
        return -win_errno(GetLastError());
    return 0;
}

int
rootdir_close(int fd)
{
    if (fd < 0)
        return 0;
    return close(fd) < 0 ? -errno : 0;
}

int
rootdir_fd_set_mode(int fd, mode_t mode)
{
    (void)mode;
    return win_handle(fd) == INVALID_HANDLE_VALUE ? -EBADF : 0;
}

int
rootdir_fd_set_owner(int fd, uid_t uid, gid_t gid)
{
    (void)uid;
    (void)gid;
    return win_handle(fd) == INVALID_HANDLE_VALUE ? -EBADF : 0;
}

int
rootdir_fd_set_times(int fd, const struct timespec ts[2])
{
    HANDLE h = win_handle(fd);
    return h == INVALID_HANDLE_VALUE ? -EBADF : set_times_handle(h, ts);
}

int
rootdir_fd_set_xattr(int fd, const char *key, const void *value, size_t len)
{
    (void)fd;
    (void)key;
    (void)value;
    (void)len;
    return -ENOTSUP;
}

ssize_t
rootdir_fd_get_xattr(int fd, const char *key, void *buf, size_t len)
{
    (void)fd;
    (void)key;
    (void)buf;
    (void)len;
    return -ENODATA;
}

int
rootdir_fd_remove_xattr(int fd, const char *key)
{
    (void)fd;
    (void)key;
    return -ENODATA;
}

ssize_t
rootdir_fd_list_xattrs(int fd, char *buf, size_t len)
{
    (void)fd;
    (void)buf;
    (void)len;
    return 0;
}

int
rootdir_fd_clear_flags(int fd)
{
    HANDLE h = win_handle(fd);
    FILE_BASIC_INFO bi;
    if (h == INVALID_HANDLE_VALUE)
        return -EBADF;
    if (!GetFileInformationByHandleEx(h, FileBasicInfo, &bi, sizeof(bi)))
        return -win_errno(GetLastError());
    if (!(bi.FileAttributes & FILE_ATTRIBUTE_READONLY))
        return 0;
    bi.FileAttributes &= ~(DWORD)FILE_ATTRIBUTE_READONLY;
    if (!bi.FileAttributes)
        bi.FileAttributes = FILE_ATTRIBUTE_NORMAL;
    bi.CreationTime.QuadPart = bi.LastAccessTime.QuadPart = 0;
    bi.LastWriteTime.QuadPart = bi.ChangeTime.QuadPart = 0;
    if (!SetFileInformationByHandle(h, FileBasicInfo, &bi, sizeof(bi)))
        return -win_errno(GetLastError());
    return 0;
}

int
rootdir_fd_sync_fs(int fd)
{
    HANDLE h = win_handle(fd);
    if (h == INVALID_HANDLE_VALUE)
        return -EBADF;
    /* \\?\Volume{...}\path: the volume is what comes before the path. */
    wchar_t path[MAX_PATH + 64];
    DWORD n = GetFinalPathNameByHandleW(h, path, MAX_PATH + 64, VOLUME_NAME_GUID);
    if (n == 0 || n >= MAX_PATH + 64 || wcsncmp(path, L"\\\\?\\Volume{", 11) != 0)
        return 0;
    wchar_t *end = wcschr(path + 11, L'}');
    if (!end)
        return 0;
    end[1] = L'\0';
    path[2] = L'.'; /* \\.\Volume{...}: the volume's device */
    HANDLE vol = CreateFileW(path, GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                             OPEN_EXISTING, 0, NULL);
    if (vol == INVALID_HANDLE_VALUE)
        return 0; /* not an administrator: best effort, as documented */
    FlushFileBuffers(vol);
    CloseHandle(vol);
    return 0;
}

int
rootdir_umask(void)
{
    return -1;
}
