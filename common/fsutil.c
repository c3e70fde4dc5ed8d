/* Filesystem helpers: mkdir -p, safe recursive remove, atomic writes. Blocking. */
#include "common/fsutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/cleanup.h"

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
        if (mkdir(copy, mode) < 0 && errno != EEXIST)
            return err_errno(err, errno, "mkdir %s", copy);
        copy[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return err_errno(err, errno, "stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return err_set(err, ENOTDIR, "mkdir %s: exists and is not a directory", path);
    return 0;
}

/* Removes the contents of the directory open at dirfd (which it closes). */
static int
remove_dir_contents(int dirfd, dev_t dev, const char *path, struct err *err)
{
    DIR *dir = fdopendir(dirfd);
    if (!dir) {
        int e = errno;
        close(dirfd);
        return err_errno(err, e, "open directory %s", path);
    }
    int ret = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            ret = err_errno(err, errno, "stat %s/%s", path, de->d_name);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (st.st_dev != dev) {
                ret = err_set(err, EBUSY, "remove %s/%s: a filesystem is mounted there", path,
                              de->d_name);
                break;
            }
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                ret = err_errno(err, errno, "open %s/%s", path, de->d_name);
                break;
            }
            /* A directory without write permission cannot lose its entries. */
            if ((st.st_mode & 0700) != 0700)
                fchmod(sub, 0700);
            cleanup_free char *subpath = fs_path_join(path, de->d_name);
            ret = remove_dir_contents(sub, dev, subpath ? subpath : path, err);
            if (ret < 0)
                break;
            if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
                ret = err_errno(err, errno, "rmdir %s/%s", path, de->d_name);
                break;
            }
        } else if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT) {
            ret = err_errno(err, errno, "unlink %s/%s", path, de->d_name);
            break;
        }
    }
    closedir(dir);
    return ret;
}

int
fs_remove_tree(const char *path, struct err *err)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return err_errno(err, errno, "stat %s", path);
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) < 0 && errno != ENOENT)
            return err_errno(err, errno, "unlink %s", path);
        return 0;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open %s", path);
    if ((st.st_mode & 0700) != 0700)
        fchmod(fd, 0700);
    int ret = remove_dir_contents(fd, st.st_dev, path, err);
    if (ret < 0)
        return ret;
    if (rmdir(path) < 0 && errno != ENOENT)
        return err_errno(err, errno, "rmdir %s", path);
    return 0;
}

int
fs_fsync_dir(const char *path, struct err *err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open %s", path);
    if (fsync(fd) < 0)
        return err_errno(err, errno, "fsync %s", path);
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
write_replace(const char *path, const void *data, size_t len, mode_t mode, bool durable,
              struct err *err)
{
    cleanup_free char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp.%ld", path, (long)gettid()) < 0) {
        tmp = NULL;
        return err_set(err, ENOMEM, "write %s: out of memory", path);
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return err_errno(err, errno, "create %s", tmp);
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return err_errno(err, e, "write %s", tmp);
        }
        p += n;
        left -= (size_t)n;
    }
    if (durable && fsync(fd) < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return err_errno(err, e, "fsync %s", tmp);
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return err_errno(err, e, "rename %s to %s", tmp, path);
    }
    if (!durable)
        return 0;
    cleanup_free char *dir = dir_of(path);
    if (!dir)
        return err_set(err, ENOMEM, "write %s: out of memory", path);
    return fs_fsync_dir(dir, err);
}

int
fs_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *err)
{
    return write_replace(path, data, len, mode, true, err);
}

int
fs_write_file_replace(const char *path, const void *data, size_t len, mode_t mode, struct err *err)
{
    return write_replace(path, data, len, mode, false, err);
}

int
fs_read_file(const char *path, size_t max, char **out, size_t *out_len, struct err *err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_errno(err, errno, "stat %s", path);
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
    struct statvfs sv;
    if (statvfs(path, &sv) < 0)
        return err_errno(err, errno, "statvfs %s", path);
    *out = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
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
