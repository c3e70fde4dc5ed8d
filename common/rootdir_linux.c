/*
 * rootdir.h on Linux: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS for multi-component paths (one system call,
 * whatever the depth), falling back to one openat(O_NOFOLLOW) per
 * component where the kernel or a seccomp filter refuses openat2; the
 * *at() calls with AT_SYMLINK_NOFOLLOW for the rest. Xattrs of entries
 * that must not be opened for reading (symlinks, devices, FIFOs) are set
 * through /proc/self/fd/N of an O_PATH handle, which names the entry
 * itself, never what a symlink points to.
 *
 * Any thread; blocking.
 */
#include "common/rootdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* 1: openat2 works, 0: not tried yet, -1: use the walk. */
static atomic_int openat2_state;
static atomic_bool force_walk;

void
rootdir_test_force_walk(bool on)
{
    atomic_store(&force_walk, on);
}

static int
neg_errno(void)
{
    return errno ? -errno : -EIO;
}

/* openat2, again while the kernel answers EAGAIN: with RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH it does whenever a rename or mount anywhere on the host
 * ran during a lookup through "..", since it could not prove the ".."
 * stayed inside. Busy hosts rename all the time (a CI run's docker cp
 * through a ".." symlink failed so), and a container can rename in a loop:
 * the tries are many, each after a yield, and only then is EAGAIN the
 * answer. */
#define OPENAT2_TRIES 512

static long
openat2_retrying(int dirfd, const char *rel, struct open_how *how)
{
    long fd = -1;
    for (int tries = 0; tries < OPENAT2_TRIES; tries++) {
        fd = syscall(SYS_openat2, dirfd, rel, how, sizeof(*how));
        if (fd >= 0 || errno != EAGAIN)
            return fd;
        sched_yield();
    }
    return fd;
}

/* openat2 beneath base, or -ENOSYS when the walk must do it. */
static int
try_openat2(int base, const char *rel, int flags)
{
    if (atomic_load(&force_walk) || atomic_load(&openat2_state) < 0)
        return -ENOSYS;
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_FLAGS};
    long fd = openat2_retrying(base, rel, &how);
    if (fd >= 0) {
        atomic_store(&openat2_state, 1);
        return (int)fd;
    }
    if (errno == EAGAIN)
        return -ENOSYS; /* renames kept racing: the walk cannot be fooled so */
    if (errno == ENOSYS || errno == E2BIG || (errno == EPERM && atomic_load(&openat2_state) == 0)) {
        /* No openat2 here (old kernel, or a seccomp filter). */
        atomic_store(&openat2_state, -1);
        return -ENOSYS;
    }
    return -errno;
}

/* Walks rel from base one component at a time; the last one is opened
 * with last_flags (never following it). */
static int
walk(int base, const char *rel, int last_flags)
{
    int fd = base;
    const char *p = rel;
    for (;;) {
        const char *end = strchrnul(p, '/');
        size_t n = (size_t)(end - p);
        char name[NAME_MAX + 1];
        if (n > NAME_MAX) {
            if (fd != base)
                close(fd);
            return -ENAMETOOLONG;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        bool last = *end == '\0' || end[strspn(end, "/")] == '\0';
        if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            /* Not a cleaned path: refuse rather than guess. */
            if (fd != base)
                close(fd);
            return -EINVAL;
        }
        int flags = last ? last_flags : O_RDONLY | O_DIRECTORY;
        int nfd = openat(fd, name, flags | O_NOFOLLOW | O_CLOEXEC);
        int e = neg_errno();
        struct stat st;
        /* O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR: tell them apart. */
        if (nfd < 0 && e == -ENOTDIR && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
            e = -ELOOP;
        if (fd != base)
            close(fd);
        if (nfd < 0)
            return e;
        fd = nfd;
        if (last)
            return fd;
        p = end + strspn(end, "/");
    }
}

static int
open_beneath(int base, const char *rel, int flags)
{
    if (rel[0] == '\0') {
        int fd = openat(base, ".", flags | O_CLOEXEC);
        return fd < 0 ? neg_errno() : fd;
    }
    int fd = try_openat2(base, rel, flags | O_NOFOLLOW);
    /* ENOTDIR does not say which component, nor whether it is a symlink
     * (that is ELOOP here): the walk finds out. */
    if (fd != -ENOSYS && fd != -ENOTDIR)
        return fd;
    return walk(base, rel, flags);
}

int
rootdir_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? neg_errno() : fd;
}

int
rootdir_open_dir(int base, const char *rel)
{
    return open_beneath(base, rel, O_RDONLY | O_DIRECTORY);
}

int
rootdir_open_node(int base, const char *rel)
{
    return open_beneath(base, rel, O_PATH);
}

int
rootdir_open_or_make_dir(int dir, const char *name, mode_t mode, bool *created)
{
    *created = false;
    for (int tries = 0; tries < 3; tries++) {
        int fd = walk(dir, name, O_RDONLY | O_DIRECTORY);
        if (fd != -ENOENT)
            return fd;
        if (mkdirat(dir, name, mode) == 0)
            *created = true;
        else if (errno != EEXIST)
            return neg_errno();
    }
    return -ENOENT;
}

/*
 * This process's /proc/self/fd, opened once: a reopen through it looks up
 * one name instead of walking /proc, self, fd and N, which was a good part
 * of the cost of each file a tar export opens. -1 when it cannot be had,
 * and in a child forked without exec, whose /proc/self is not the one
 * the descriptor was opened on (the caller then walks the full path).
 */
static atomic_int proc_fd_dir_fd = -1;
static atomic_int proc_fd_dir_pid;

static int
proc_fd_dir(void)
{
    int pid = (int)getpid();
    int fd = atomic_load(&proc_fd_dir_fd);
    if (fd >= 0)
        return atomic_load(&proc_fd_dir_pid) == pid ? fd : -1;
    int nfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (nfd < 0)
        return -1;
    atomic_store(&proc_fd_dir_pid, pid);
    int expect = -1;
    if (!atomic_compare_exchange_strong(&proc_fd_dir_fd, &expect, nfd)) {
        close(nfd); /* another thread's is in place */
        return atomic_load(&proc_fd_dir_pid) == pid ? expect : -1;
    }
    return nfd;
}

int
rootdir_fd_reopen_regular(int pathfd, const struct stat *want)
{
    struct stat st;
    if (fstat(pathfd, &st) < 0)
        return neg_errno();
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if (want && (st.st_dev != want->st_dev || st.st_ino != want->st_ino))
        return -ESTALE;
    /* The magic link names the inode pathfd holds, whatever happened to
     * its name since: no lookup by name, so nothing can be swapped in. */
    const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    char num[16];
    snprintf(num, sizeof(num), "%d", pathfd);
    int dir = proc_fd_dir();
    int fd = dir >= 0 ? openat(dir, num, flags) : -1;
    if (dir < 0) {
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", num);
        fd = open(link, flags);
    }
    return fd < 0 ? neg_errno() : fd;
}

int
rootdir_open_file(int dir, const char *name)
{
    int pfd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return neg_errno();
    int fd = rootdir_fd_reopen_regular(pfd, NULL);
    close(pfd);
    return fd;
}

int
rootdir_open_in_root(int root, const char *rel)
{
    /* O_PATH first: what the container put there is checked before any
     * open of it runs (rootdir_fd_reopen_regular). */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long pfd = openat2_retrying(root, rel, &how);
    if (pfd < 0)
        return neg_errno();
    int fd = rootdir_fd_reopen_regular((int)pfd, NULL);
    close((int)pfd);
    return fd;
}

int
rootdir_open_dir_in_root(int root, const char *rel)
{
    /* O_DIRECTORY: nothing but a directory is ever opened, so no device's
     * or FIFO's open runs. */
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = openat2_retrying(root, rel[0] ? rel : ".", &how);
    return fd < 0 ? neg_errno() : (int)fd;
}

/* The path the kernel gives for fd (its /proc/self/fd link). */
static ssize_t
fd_path(int fd, char *buf, size_t len)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, buf, len);
    if (n < 0)
        return neg_errno();
    if ((size_t)n >= len)
        return -ENAMETOOLONG;
    buf[n] = '\0';
    return n;
}

ssize_t
rootdir_resolve_in_root(int root, const char *rel, char *buf, size_t len)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = openat2_retrying(root, rel[0] ? rel : ".", &how);
    if (fd < 0)
        return neg_errno();
    ssize_t n = rootdir_fd_path_in_root(root, (int)fd, buf, len);
    close((int)fd);
    return n;
}

ssize_t
rootdir_fd_path_in_root(int root, int fd, char *buf, size_t len)
{
    char top[PATH_MAX], at[PATH_MAX];
    ssize_t tn = fd_path(root, top, sizeof(top));
    ssize_t an = tn < 0 ? tn : fd_path(fd, at, sizeof(at));
    if (tn < 0 || an < 0)
        return tn < 0 ? tn : an;
    /* Opened below root: at is top, or top + "/..." (unless it moved out). */
    if (strncmp(at, top, (size_t)tn) != 0 || (at[tn] != '/' && at[tn] != '\0'))
        return -EXDEV;
    const char *inside = strcmp(top, "/") == 0 ? at : at + tn;
    if (!*inside)
        inside = "/";
    size_t n = strlen(inside);
    if (n >= len)
        return -ENAMETOOLONG;
    memcpy(buf, inside, n + 1);
    return (ssize_t)n;
}

int
rootdir_create_file(int dir, const char *name, mode_t mode)
{
    int fd =
        openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
    return fd < 0 ? neg_errno() : fd;
}

int
rootdir_stat(int dir, const char *name, struct os_stat *st)
{
    int flags = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);
    struct stat s;
    if (fstatat(dir, name, &s, flags) < 0)
        return neg_errno();
    osfs_from_stat(&s, st);
    return 0;
}

ssize_t
rootdir_readlink(int dir, const char *name, char *buf, size_t len)
{
    ssize_t n = readlinkat(dir, name, buf, len);
    return n < 0 ? neg_errno() : n;
}

int
rootdir_dup(int fd)
{
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return nfd < 0 ? neg_errno() : nfd;
}

int
rootdir_mkdir(int dir, const char *name, mode_t mode)
{
    return mkdirat(dir, name, mode) < 0 ? neg_errno() : 0;
}

int
rootdir_symlink(int dir, const char *name, const char *target)
{
    return symlinkat(target, dir, name) < 0 ? neg_errno() : 0;
}

int
rootdir_mknod(int dir, const char *name, mode_t mode, dev_t dev)
{
    return mknodat(dir, name, mode, dev) < 0 ? neg_errno() : 0;
}

int
rootdir_link(int from_dir, const char *from_name, int dir, const char *name)
{
    /* No AT_SYMLINK_FOLLOW: a symlink is linked as itself. */
    return linkat(from_dir, from_name, dir, name, 0) < 0 ? neg_errno() : 0;
}

int
rootdir_remove(int dir, const char *name, bool is_dir)
{
    return unlinkat(dir, name, is_dir ? AT_REMOVEDIR : 0) < 0 ? neg_errno() : 0;
}

int
rootdir_rename(int from_dir, const char *from, int to_dir, const char *to)
{
    return renameat2(from_dir, from, to_dir, to, RENAME_NOREPLACE) < 0 ? neg_errno() : 0;
}

int
rootdir_replace(int from_dir, const char *from, int to_dir, const char *to)
{
    return renameat(from_dir, from, to_dir, to) < 0 ? neg_errno() : 0;
}

int
rootdir_exchange(int dir_a, const char *a, int dir_b, const char *b)
{
    return renameat2(dir_a, a, dir_b, b, RENAME_EXCHANGE) < 0 ? neg_errno() : 0;
}

int
rootdir_exchange_repair(int dir_a, const char *a, int dir_b, const char *b)
{
    (void)dir_a;
    (void)a;
    (void)dir_b;
    (void)b;
    return 0; /* renameat2(RENAME_EXCHANGE) is one step */
}

int
rootdir_set_owner(int dir, const char *name, uid_t uid, gid_t gid)
{
    int flags = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);
    return fchownat(dir, name, uid, gid, flags) < 0 ? neg_errno() : 0;
}

int
rootdir_set_mode(int dir, const char *name, mode_t mode)
{
    if (name[0] == '\0')
        return rootdir_fd_set_mode(dir, mode);
    /* glibc does AT_SYMLINK_NOFOLLOW through an O_PATH handle. */
    return fchmodat(dir, name, mode & 07777, AT_SYMLINK_NOFOLLOW) < 0 ? neg_errno() : 0;
}

int
rootdir_set_times(int dir, const char *name, const struct timespec ts[2])
{
    if (name[0] == '\0')
        return futimens(dir, ts) < 0 ? neg_errno() : 0;
    return utimensat(dir, name, ts, AT_SYMLINK_NOFOLLOW) < 0 ? neg_errno() : 0;
}

/* /proc/self/fd/N of an O_PATH handle on dir/name. */
static int
proc_handle(int dir, const char *name, char path[32])
{
    int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return neg_errno();
    snprintf(path, 32, "/proc/self/fd/%d", fd);
    return fd;
}

int
rootdir_set_xattr(int dir, const char *name, const char *key, const void *value, size_t len)
{
    if (name[0] == '\0')
        return rootdir_fd_set_xattr(dir, key, value, len);
    char path[32];
    int fd = proc_handle(dir, name, path);
    if (fd < 0)
        return fd;
    int r = setxattr(path, key, value, len, 0) < 0 ? neg_errno() : 0;
    close(fd);
    return r;
}

ssize_t
rootdir_get_xattr(int dir, const char *name, const char *key, void *buf, size_t len)
{
    if (name[0] == '\0')
        return rootdir_fd_get_xattr(dir, key, buf, len);
    char path[32];
    int fd = proc_handle(dir, name, path);
    if (fd < 0)
        return fd;
    ssize_t n = getxattr(path, key, buf, len);
    ssize_t r = n < 0 ? neg_errno() : n;
    close(fd);
    return r;
}

int
rootdir_fd_write_at(int fd, const void *buf, size_t len, int64_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return neg_errno();
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int
rootdir_fd_truncate(int fd, int64_t size)
{
    return ftruncate(fd, (off_t)size) < 0 ? neg_errno() : 0;
}

int
rootdir_close(int fd)
{
    if (fd < 0)
        return 0;
    return close(fd) < 0 && errno != EINTR ? neg_errno() : 0;
}

int
rootdir_fd_set_mode(int fd, mode_t mode)
{
    return fchmod(fd, mode & 07777) < 0 ? neg_errno() : 0;
}

int
rootdir_fd_set_owner(int fd, uid_t uid, gid_t gid)
{
    return fchown(fd, uid, gid) < 0 ? neg_errno() : 0;
}

int
rootdir_fd_set_times(int fd, const struct timespec ts[2])
{
    return futimens(fd, ts) < 0 ? neg_errno() : 0;
}

int
rootdir_fd_set_xattr(int fd, const char *key, const void *value, size_t len)
{
    return fsetxattr(fd, key, value, len, 0) < 0 ? neg_errno() : 0;
}

ssize_t
rootdir_fd_get_xattr(int fd, const char *key, void *buf, size_t len)
{
    ssize_t n = fgetxattr(fd, key, buf, len);
    return n < 0 ? neg_errno() : n;
}

int
rootdir_fd_remove_xattr(int fd, const char *key)
{
    return fremovexattr(fd, key) < 0 ? neg_errno() : 0;
}

ssize_t
rootdir_fd_list_xattrs(int fd, char *buf, size_t len)
{
    ssize_t n = flistxattr(fd, buf, len);
    return n < 0 ? neg_errno() : n;
}

int
rootdir_fd_clear_flags(int fd)
{
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
        return neg_errno();
    if ((flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)) == 0)
        return 0;
    flags &= ~(FS_IMMUTABLE_FL | FS_APPEND_FL);
    return ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0 ? neg_errno() : 0;
}

int
rootdir_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    int ret = -1;
    while (f && ret < 0 && fgets(line, sizeof(line), f)) {
        unsigned m;
        if (sscanf(line, "Umask: %o", &m) == 1)
            ret = (int)(m & 0777);
    }
    if (f)
        fclose(f);
    return ret;
}

int
rootdir_fd_sync_fs(int fd)
{
    return syncfs(fd) < 0 ? neg_errno() : 0;
}
