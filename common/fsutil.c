/*
 * Filesystem helpers: mkdir -p, safe recursive remove, atomic writes.
 * Written once over the platform seam (common/osfs.h for paths,
 * common/rootdir.h below a directory). Blocking.
 */
#include "common/fsutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"

int
fs_mkdir_p(const char *path, mode_t mode, struct err *err)
{
    cleanup_free char *copy = strdup(path);
    if (!copy)
        return err_set(err, ENOMEM, "mkdir %s: out of memory", path);
    size_t len = strlen(copy);
    for (size_t i = 1; i <= len; i++) {
        if (copy[i] != '/' && copy[i] != '\0')
            continue;
        char saved = copy[i];
        copy[i] = '\0';
        int r = osfs_mkdir(copy, mode);
        struct os_stat st;
        /* A drive ("C:") or a share cannot be made, only found. */
        if (r < 0 && r != -EEXIST && !(osfs_stat(copy, &st) == 0 && S_ISDIR(st.st_mode)))
            return err_errno(err, -r, "mkdir %s", copy);
        copy[i] = saved;
    }
    struct os_stat st;
    int r = osfs_stat(path, &st);
    if (r < 0)
        return err_errno(err, -r, "stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return err_set(err, ENOTDIR, "mkdir %s: exists and is not a directory", path);
    return 0;
}

/* Removes the contents of the directory open at dirfd (which it closes). */
static int
remove_dir_contents(int dirfd, uint64_t dev, const char *path, struct err *err)
{
    struct osfs_dir *dir = NULL;
    int r = osfs_dir_open_at(dirfd, &dir);
    if (r < 0) {
        rootdir_close(dirfd);
        return err_errno(err, -r, "open directory %s", path);
    }
    int ret = 0;
    const char *name;
    while ((name = osfs_dir_next(dir, &r)) != NULL) {
        struct os_stat st;
        if ((r = rootdir_stat(dirfd, name, &st)) < 0) {
            if (r == -ENOENT)
                continue;
            ret = err_errno(err, -r, "stat %s/%s", path, name);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (st.st_dev != dev) {
                ret =
                    err_set(err, EBUSY, "remove %s/%s: a filesystem is mounted there", path, name);
                break;
            }
            int sub = rootdir_open_dir(dirfd, name);
            if (sub < 0) {
                ret = err_errno(err, -sub, "open %s/%s", path, name);
                break;
            }
            /* A directory without write permission cannot lose its entries. */
            if ((st.st_mode & 0700) != 0700)
                rootdir_fd_set_mode(sub, 0700);
            cleanup_free char *subpath = fs_path_join(path, name);
            ret = remove_dir_contents(sub, dev, subpath ? subpath : path, err);
            if (ret < 0)
                break;
            if ((r = rootdir_remove(dirfd, name, true)) < 0 && r != -ENOENT) {
                ret = err_errno(err, -r, "rmdir %s/%s", path, name);
                break;
            }
        } else if ((r = rootdir_remove(dirfd, name, false)) < 0 && r != -ENOENT) {
            /* A read-only file (Windows) goes once it is writable. */
            int fd = r == -EACCES || r == -EPERM ? rootdir_open_node(dirfd, name) : -1;
            if (fd >= 0) {
                rootdir_fd_clear_flags(fd);
                rootdir_close(fd);
                r = rootdir_remove(dirfd, name, false);
            }
            if (r < 0 && r != -ENOENT) {
                ret = err_errno(err, -r, "unlink %s/%s", path, name);
                break;
            }
        }
    }
    if (ret == 0 && r < 0)
        ret = err_errno(err, -r, "read directory %s", path);
    osfs_dir_close(dir);
    rootdir_close(dirfd);
    return ret;
}

int
fs_remove_tree(const char *path, struct err *err)
{
    struct os_stat st;
    int r = osfs_lstat(path, &st);
    if (r < 0) {
        if (r == -ENOENT)
            return 0;
        return err_errno(err, -r, "stat %s", path);
    }
    if (!S_ISDIR(st.st_mode)) {
        if ((r = osfs_unlink(path)) < 0 && r != -ENOENT)
            return err_errno(err, -r, "unlink %s", path);
        return 0;
    }
    int fd = rootdir_open(path);
    if (fd < 0)
        return err_errno(err, -fd, "open %s", path);
    if ((st.st_mode & 0700) != 0700)
        rootdir_fd_set_mode(fd, 0700);
    int ret = remove_dir_contents(fd, st.st_dev, path, err);
    if (ret < 0)
        return ret;
    if ((r = osfs_rmdir(path)) < 0 && r != -ENOENT)
        return err_errno(err, -r, "rmdir %s", path);
    return 0;
}

int
fs_remove_tree_at(int dirfd, const char *name, struct err *err)
{
    struct os_stat st;
    int r = rootdir_stat(dirfd, name, &st);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return err_errno(err, -r, "stat %s", name);
    if (!S_ISDIR(st.st_mode)) {
        if ((r = rootdir_remove(dirfd, name, false)) < 0 && r != -ENOENT)
            return err_errno(err, -r, "unlink %s", name);
        return 0;
    }
    int fd = rootdir_open_dir(dirfd, name);
    if (fd < 0)
        return err_errno(err, -fd, "open %s", name);
    if ((st.st_mode & 0700) != 0700)
        rootdir_fd_set_mode(fd, 0700);
    int ret = remove_dir_contents(fd, st.st_dev, name, err); /* closes fd */
    if (ret < 0)
        return ret;
    if ((r = rootdir_remove(dirfd, name, true)) < 0 && r != -ENOENT)
        return err_errno(err, -r, "rmdir %s", name);
    return 0;
}

int
fs_fsync_dir(const char *path, struct err *err)
{
    int r = osfs_fsync_dir(path);
    if (r < 0)
        return err_errno(err, -r, "fsync %s", path);
    return 0;
}

static char *
dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int
write_file_replace(const char *path, const void *data, size_t len, mode_t mode, bool sync,
                   struct err *err)
{
    cleanup_free char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp.%ld", path, os_thread_id()) < 0) {
        tmp = NULL;
        return err_set(err, ENOMEM, "write %s: out of memory", path);
    }
    int fd = osfs_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return err_errno(err, -fd, "create %s", tmp);
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            osfs_unlink(tmp);
            return err_errno(err, e, "write %s", tmp);
        }
        p += n;
        left -= (size_t)n;
    }
    int r = sync ? osfs_fsync(fd) : 0;
    if (r < 0) {
        close(fd);
        osfs_unlink(tmp);
        return err_errno(err, -r, "fsync %s", tmp);
    }
    close(fd);
    if ((r = osfs_rename(tmp, path)) < 0) {
        osfs_unlink(tmp);
        return err_errno(err, -r, "rename %s to %s", tmp, path);
    }
    if (!sync)
        return 0;
    cleanup_free char *dir = dir_of(path);
    if (!dir)
        return err_set(err, ENOMEM, "write %s: out of memory", path);
    return fs_fsync_dir(dir, err);
}

/* Reads all of the open fd (of path, for messages). */
static int read_fd(int fd, const char *path, size_t max, char **out, size_t *out_len,
                   struct err *err);

int
fs_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *err)
{
    return write_file_replace(path, data, len, mode, true, err);
}

int
fs_write_file_volatile(const char *path, const void *data, size_t len, mode_t mode, struct err *err)
{
    return write_file_replace(path, data, len, mode, false, err);
}

int
fs_read_file(const char *path, size_t max, char **out, size_t *out_len, struct err *err)
{
    cleanup_close int fd = osfs_open(path, O_RDONLY, 0);
    if (fd < 0)
        return err_errno(err, -fd, "open %s", path);
    return read_fd(fd, path, max, out, out_len, err);
}

int
fs_read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *out_len,
                struct err *err)
{
    cleanup_close int fd = rootdir_open_file(dirfd, name);
    if (fd < 0)
        return err_errno(err, -fd, "open %s", name);
    return read_fd(fd, name, max, out, out_len, err);
}

int
fs_write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                        struct err *err)
{
    cleanup_free char *tmp = NULL;
    if (asprintf(&tmp, ".%s.tmp.%ld", name, os_thread_id()) < 0) {
        tmp = NULL;
        return err_set(err, ENOMEM, "write %s: out of memory", name);
    }
    rootdir_remove(dirfd, tmp, false); /* a crash's leftover */
    int fd = rootdir_create_file(dirfd, tmp, mode);
    if (fd < 0)
        return err_errno(err, -fd, "create %s", tmp);
    int r = rootdir_fd_write_at(fd, data, len, 0);
    if (r == 0)
        r = osfs_fsync(fd);
    int c = rootdir_close(fd);
    if (r == 0)
        r = c;
    if (r == 0)
        r = rootdir_replace(dirfd, tmp, dirfd, name);
    if (r == 0)
        r = osfs_fsync(dirfd);
    if (r < 0) {
        rootdir_remove(dirfd, tmp, false);
        return err_errno(err, -r, "write %s", name);
    }
    return 0;
}

static int
read_fd(int fd, const char *path, size_t max, char **out, size_t *out_len, struct err *err)
{
    struct os_stat st;
    int r = osfs_fstat(fd, &st);
    if (r < 0)
        return err_errno(err, -r, "stat %s", path);
    if (!S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "read %s: not a regular file", path);
    if ((uint64_t)st.st_size > max)
        return err_set(err, EFBIG, "read %s: %lld bytes is over the limit of %zu", path,
                       (long long)st.st_size, max);
    size_t cap = (size_t)st.st_size + 1;
    cleanup_free char *buf = malloc(cap);
    if (!buf)
        return err_set(err, ENOMEM, "read %s: out of memory", path);
    size_t got = 0;
    for (;;) {
        if (got == cap - 1) {
            /* The file grew since fstat: allow it up to max. */
            if (cap - 1 >= max)
                return err_set(err, EFBIG, "read %s: over the limit of %zu bytes", path, max);
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nbuf = realloc(buf, ncap);
            if (!nbuf)
                return err_set(err, ENOMEM, "read %s: out of memory", path);
            buf = nbuf;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(err, errno, "read %s", path);
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = steal_ptr(&buf);
    if (out_len)
        *out_len = got;
    return 0;
}

int
fs_free_bytes(const char *path, uint64_t *out, struct err *err)
{
    int r = osfs_free_bytes(path, out);
    if (r < 0)
        return err_errno(err, -r, "statvfs %s", path);
    return 0;
}

char *
fs_path_join(const char *a, const char *b)
{
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (*b == '/')
        b++;
    char *out = NULL;
    if (asprintf(&out, "%.*s/%s", (int)la, a, b) < 0)
        return NULL;
    return out;
}
