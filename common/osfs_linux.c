/*
 * common/osfs.h on Linux: the POSIX calls themselves, with O_CLOEXEC on
 * every descriptor. Any thread; blocking.
 */
#include "common/osfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int
neg_errno(void)
{
    return errno ? -errno : -EIO;
}

static void
from_stat(const struct stat *s, struct os_stat *o)
{
    o->st_mode = s->st_mode;
    o->st_ino = (uint64_t)s->st_ino;
    o->st_dev = (uint64_t)s->st_dev;
    o->st_nlink = (uint64_t)s->st_nlink;
    o->st_uid = s->st_uid;
    o->st_gid = s->st_gid;
    o->st_rdev = (uint64_t)s->st_rdev;
    o->st_size = (int64_t)s->st_size;
    o->st_atim = s->st_atim;
    o->st_mtim = s->st_mtim;
}

void
osfs_from_stat(const struct stat *s, struct os_stat *o)
{
    from_stat(s, o);
}

int
osfs_open(const char *path, int flags, mode_t mode)
{
    int f = flags & ~OSFS_NOFOLLOW;
    if (flags & OSFS_NOFOLLOW)
        f |= O_NOFOLLOW;
    int fd = open(path, f | O_CLOEXEC | O_NOCTTY, mode);
    return fd < 0 ? neg_errno() : fd;
}

int
osfs_stat(const char *path, struct os_stat *st)
{
    struct stat s;
    if (stat(path, &s) < 0)
        return neg_errno();
    from_stat(&s, st);
    return 0;
}

int
osfs_lstat(const char *path, struct os_stat *st)
{
    struct stat s;
    if (lstat(path, &s) < 0)
        return neg_errno();
    from_stat(&s, st);
    return 0;
}

int
osfs_fstat(int fd, struct os_stat *st)
{
    struct stat s;
    if (fstat(fd, &s) < 0)
        return neg_errno();
    from_stat(&s, st);
    return 0;
}

bool
osfs_exists(const char *path)
{
    struct stat s;
    return lstat(path, &s) == 0;
}

int
osfs_mkdir(const char *path, mode_t mode)
{
    return mkdir(path, mode) < 0 ? neg_errno() : 0;
}

int
osfs_unlink(const char *path)
{
    return unlink(path) < 0 ? neg_errno() : 0;
}

int
osfs_rmdir(const char *path)
{
    return rmdir(path) < 0 ? neg_errno() : 0;
}

int
osfs_chmod(const char *path, mode_t mode)
{
    return chmod(path, mode) < 0 ? neg_errno() : 0;
}

int
osfs_rename(const char *from, const char *to)
{
    return rename(from, to) < 0 ? neg_errno() : 0;
}

int
osfs_fsync(int fd)
{
    return fsync(fd) < 0 ? neg_errno() : 0;
}

int
osfs_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return neg_errno();
    int r = fsync(fd) < 0 ? neg_errno() : 0;
    close(fd);
    return r;
}

int
osfs_mkstemp(char *tmpl)
{
    int fd = mkostemp(tmpl, O_CLOEXEC);
    return fd < 0 ? neg_errno() : fd;
}

int
osfs_mkdtemp(char *tmpl)
{
    return mkdtemp(tmpl) ? 0 : neg_errno();
}

int
osfs_dir_spread(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return neg_errno();
    int flags = 0;
    int r = ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0 ? neg_errno() : 0;
    if (r == 0 && !(flags & FS_TOPDIR_FL)) {
        flags |= FS_TOPDIR_FL;
        r = ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0 ? neg_errno() : 0;
    }
    close(fd);
    return r;
}

int
osfs_free_bytes(const char *path, uint64_t *out)
{
    struct statvfs sv;
    if (statvfs(path, &sv) < 0)
        return neg_errno();
    *out = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    return 0;
}

struct osfs_dir {
    DIR *d;
};

static int
dir_wrap(DIR *d, struct osfs_dir **out)
{
    struct osfs_dir *od = malloc(sizeof(*od));
    if (!od) {
        closedir(d);
        return -ENOMEM;
    }
    od->d = d;
    *out = od;
    return 0;
}

int
osfs_dir_open(const char *path, struct osfs_dir **out)
{
    DIR *d = opendir(path);
    return d ? dir_wrap(d, out) : neg_errno();
}

int
osfs_dir_open_at(int dirfd, struct osfs_dir **out)
{
    /* A descriptor of its own: closedir closes it, the caller's stays. */
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return neg_errno();
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = neg_errno();
        close(fd);
        return e;
    }
    return dir_wrap(d, out);
}

const char *
osfs_dir_next(struct osfs_dir *d, int *err)
{
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d->d);
        if (!e) {
            if (err)
                *err = errno ? -errno : 0;
            return NULL;
        }
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return e->d_name;
    }
}

void
osfs_dir_rewind(struct osfs_dir *d)
{
    rewinddir(d->d);
}

void
osfs_dir_close(struct osfs_dir *d)
{
    if (!d)
        return;
    closedir(d->d);
    free(d);
}
