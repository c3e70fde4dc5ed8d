/*
 * Bounded writable layers: a project quota on the directory, or a sparse
 * ext4 image loop-mounted on it; see scratch.h. Pool threads (or start-up);
 * everything here blocks.
 */
#include "store/scratch.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/layer.h"

#define RECORD_MAGIC "berth-scratch 1"
#define RECORD_MAX 8192
#define LOOP_TRIES 16
#define MKFS_TIMEOUT_MS 60000
#define LOOP_MAJOR 7
#define LOOP_DETACH_WAIT_MS 2000

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

extern char **environ;

static const char *
kind_name(enum scratch_kind k)
{
    switch (k) {
    case SCRATCH_PLAIN:
        return "plain";
    case SCRATCH_QUOTA:
        return "quota";
    case SCRATCH_LOOP:
        return "loop";
    }
    return "?";
}

/* ---- the record ------------------------------------------------------------- */

static int
record_write(const char *path, enum scratch_kind kind, const char *dir, uint32_t projid,
             const char *image, struct err *err)
{
    cleanup_free char *text = NULL;
    int n = kind == SCRATCH_QUOTA
                ? asprintf(&text, "%s\nkind quota\ndir %s\nprojid %u\n", RECORD_MAGIC, dir, projid)
                : asprintf(&text, "%s\nkind %s\ndir %s\nimage %s\n", RECORD_MAGIC, kind_name(kind),
                           dir, image);
    if (n < 0) {
        text = NULL;
        return err_set(err, ENOMEM, "writable layer record: out of memory");
    }
    return fs_write_file_atomic(path, text, (size_t)n, 0600, err);
}

struct record {
    enum scratch_kind kind;
    char dir[PATH_MAX];
    char image[PATH_MAX];
    uint32_t projid;
};

static int
record_read(const char *path, struct record *r, struct err *err)
{
    cleanup_free char *text = NULL;
    int ret = fs_read_file(path, RECORD_MAX, &text, NULL, err);
    if (ret < 0)
        return ret;
    memset(r, 0, sizeof(*r));
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, RECORD_MAGIC) != 0)
        return err_set(err, EINVAL, "writable layer record %s: not a berth record", path);
    bool have_kind = false;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        if (strcmp(line, "kind quota") == 0) {
            r->kind = SCRATCH_QUOTA;
            have_kind = true;
        } else if (strcmp(line, "kind loop") == 0) {
            r->kind = SCRATCH_LOOP;
            have_kind = true;
        } else if (strcmp(line, "kind plain") == 0) {
            r->kind = SCRATCH_PLAIN;
            have_kind = true;
        } else if (strncmp(line, "dir /", 5) == 0) {
            snprintf(r->dir, sizeof(r->dir), "%s", line + 4);
        } else if (strncmp(line, "image /", 7) == 0) {
            snprintf(r->image, sizeof(r->image), "%s", line + 6);
        } else if (strncmp(line, "projid ", 7) == 0) {
            r->projid = (uint32_t)strtoul(line + 7, NULL, 10);
        }
    }
    if (!have_kind || !r->dir[0] || (r->kind == SCRATCH_LOOP && !r->image[0]) ||
        (r->kind == SCRATCH_QUOTA && r->projid == 0))
        return err_set(err, EINVAL, "writable layer record %s: missing or bad fields", path);
    return 0;
}

/* ---- project quota ---------------------------------------------------------- */

static long
quotactl_fd(int fd, unsigned cmd, int id, void *addr)
{
    return syscall(SYS_quotactl_fd, fd, cmd, id, addr);
}

/* Does the filesystem of fd enforce project quotas? */
static bool
quota_enforced(int fd)
{
    struct fs_quota_statv qs = {.qs_version = FS_QSTATV_VERSION1};
    if (quotactl_fd(fd, QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &qs) < 0)
        return false;
    return (qs.qs_flags & FS_QUOTA_PDQ_ENFD) != 0;
}

static int
quota_set(int fd, uint32_t projid, uint64_t max_bytes, struct err *err)
{
    struct dqblk q = {0};
    uint64_t blocks = (max_bytes + 1023) / 1024; /* quota blocks are 1 KiB */
    q.dqb_bhardlimit = blocks;
    q.dqb_bsoftlimit = blocks;
    q.dqb_valid = QIF_BLIMITS;
    if (quotactl_fd(fd, QCMD(Q_SETQUOTA, PRJQUOTA), (int)projid, &q) < 0)
        return err_errno(err, errno, "set the quota of project %u", projid);
    return 0;
}

/*
 * Puts dir under a project quota of its own, when its filesystem has them.
 * Returns 1 when it did, 0 when the filesystem cannot (the caller uses an
 * image instead), or a negative errno.
 */
static int
quota_make(const char *dir, uint64_t max_bytes, const char *record_path, struct err *err)
{
    cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open %s", dir);
    if (!quota_enforced(fd))
        return 0;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_errno(err, errno, "stat %s", dir);
    /* The directory's inode number is unique on its filesystem while it
     * exists; a project already in use by someone else is left alone. */
    if (st.st_ino == 0 || st.st_ino >= UINT32_MAX)
        return 0;
    uint32_t projid = (uint32_t)st.st_ino;
    struct dqblk cur = {0};
    if (quotactl_fd(fd, QCMD(Q_GETQUOTA, PRJQUOTA), (int)projid, &cur) == 0 &&
        (cur.dqb_curspace > 0 || cur.dqb_bhardlimit > 0 || cur.dqb_curinodes > 0))
        return 0;
    int ret = record_write(record_path, SCRATCH_QUOTA, dir, projid, NULL, err);
    if (ret < 0)
        return ret;
    struct fsxattr fsx;
    if (ioctl(fd, FS_IOC_FSGETXATTR, &fsx) < 0)
        return err_errno(err, errno, "read the project of %s", dir);
    fsx.fsx_projid = projid;
    fsx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
    if (ioctl(fd, FS_IOC_FSSETXATTR, &fsx) < 0)
        return err_errno(err, errno, "set project %u on %s", projid, dir);
    ret = quota_set(fd, projid, max_bytes, err);
    return ret < 0 ? ret : 1;
}

static int
quota_release(const struct record *r, struct err *err)
{
    cleanup_close int fd = open(r->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : err_errno(err, errno, "open %s", r->dir);
    struct dqblk q = {.dqb_valid = QIF_BLIMITS};
    if (quotactl_fd(fd, QCMD(Q_SETQUOTA, PRJQUOTA), (int)r->projid, &q) < 0 && errno != ESRCH)
        return err_errno(err, errno, "lift the quota of project %u", r->projid);
    return 0;
}

/* ---- a loop-mounted image --------------------------------------------------- */

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* mkfs.ext4 on PATH or in the sbin directories (a daemon's PATH may lack them). */
static char *
find_mkfs(void)
{
    const char *path = getenv("PATH");
    cleanup_free char *dirs = NULL;
    if (asprintf(&dirs, "%s:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : "") < 0)
        return NULL;
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *cand = NULL;
        if (d[0] != '/' || asprintf(&cand, "%s/mkfs.ext4", d) < 0)
            continue;
        if (access(cand, X_OK) == 0)
            return cand;
        free(cand);
    }
    return NULL;
}

/* Runs mkfs.ext4 on image; its last words go in the error. */
static int
mkfs(const char *image, struct err *err)
{
    cleanup_free char *bin = find_mkfs();
    if (!bin)
        return err_set(err, ERR_UNAVAILABLE,
                       "limits.disk_bytes: mkfs.ext4 not found (install e2fsprogs)");
    /* No journal: the layer lives no longer than its container. No
     * reserved blocks: the container gets all of it. */
    char *argv[] = {bin,
                    "-q",
                    "-F",
                    "-m",
                    "0",
                    "-O",
                    "^has_journal",
                    "-E",
                    "nodiscard",
                    "-L",
                    "berth-scratch",
                    (char *)image,
                    NULL};
    int errp[2];
    if (pipe2(errp, O_CLOEXEC) < 0)
        return err_errno(err, errno, "mkfs.ext4: pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGCHLD);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(errp[1]);
    if (rc != 0) {
        close(errp[0]);
        return err_errno(err, rc, "run %s", bin);
    }
    char text[512] = "";
    size_t len = 0;
    int64_t deadline = now_ms() + MKFS_TIMEOUT_MS;
    bool timed_out = false;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        struct pollfd pfd = {.fd = errp[0], .events = POLLIN};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        char chunk[256];
        ssize_t got = read(errp[0], chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        /* Keep the last bytes: the error comes at the end. */
        for (ssize_t i = 0; i < got; i++) {
            if (len == sizeof(text) - 1) {
                memmove(text, text + 1, len - 1);
                len--;
            }
            text[len++] = chunk[i];
        }
        text[len] = '\0';
    }
    close(errp[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out)
        return err_set(err, ETIMEDOUT, "mkfs.ext4 %s: no answer after %d ms", image,
                       MKFS_TIMEOUT_MS);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
            text[--len] = '\0';
        return err_set(err, EIO, "mkfs.ext4 %s: %s", image, text[0] ? text : "failed");
    }
    return 0;
}

/*
 * Attaches image_fd to a free loop device, with autoclear: it detaches by
 * itself once nothing holds it (the last close, or the unmount). Returns
 * the device's fd, its path in devpath.
 */
static int
loop_attach(int image_fd, char *devpath, size_t len, struct err *err)
{
    /* Without loop devices (a daemon in a container, say) the host cannot
     * bound the layer this way: unavailable, not the request's fault. */
    cleanup_close int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        err_errno(err, errno, "limits.disk_bytes: no project quota here, and no loop devices");
        err->code = ERR_UNAVAILABLE;
        return -ERR_UNAVAILABLE;
    }
    for (int tries = 0; tries < LOOP_TRIES; tries++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) {
            err_errno(err, errno, "limits.disk_bytes: find a free loop device");
            err->code = ERR_UNAVAILABLE;
            return -ERR_UNAVAILABLE;
        }
        snprintf(devpath, len, "/dev/loop%d", n);
        int fd = open(devpath, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT &&
            mknod(devpath, S_IFBLK | 0600, makedev(LOOP_MAJOR, (unsigned)n)) == 0)
            fd = open(devpath, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return err_errno(err, errno, "limits.disk_bytes: open %s", devpath);
        struct loop_config cfg = {.fd = (uint32_t)image_fd};
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
            return fd;
        int e = errno;
        close(fd);
        /* Another thread or process took it between the two calls. */
        if (e != EBUSY)
            return err_errno(err, e, "limits.disk_bytes: attach %s", devpath);
    }
    return err_set(err, EBUSY, "limits.disk_bytes: no loop device stayed free after %d tries",
                   LOOP_TRIES);
}

static int
loop_make(const char *dir, uint64_t max_bytes, const char *record_path, const char *image,
          struct err *err)
{
    /* The record first: a crash after any later step leaves a way back. */
    int ret = record_write(record_path, SCRATCH_LOOP, dir, 0, image, err);
    if (ret < 0)
        return ret;
    cleanup_close int ifd = open(image, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (ifd < 0)
        return err_errno(err, errno, "create %s", image);
    if (ftruncate(ifd, (off_t)max_bytes) < 0) {
        if (errno == EFBIG)
            return err_set(err, EINVAL,
                           "limits.disk_bytes %llu: larger than a file on the store's "
                           "filesystem can be",
                           (unsigned long long)max_bytes);
        return err_errno(err, errno, "size %s", image);
    }
    ret = mkfs(image, err);
    if (ret < 0)
        return ret;
    char dev[64];
    cleanup_close int lfd = loop_attach(ifd, dev, sizeof(dev), err);
    if (lfd < 0)
        return lfd;
    if (mount(dev, dir, "ext4", MS_NODEV | MS_NOSUID | MS_NOATIME, "") < 0) {
        int e = errno;
        ioctl(lfd, LOOP_CLR_FD, 0);
        return err_errno(err, e, "mount %s of %s at %s", dev, image, dir);
    }
    log_debug("writable layer %s: %llu bytes on %s", dir, (unsigned long long)max_bytes, dev);
    return 0;
}

/* Is something mounted on dir (another device than its parent's)? */
static int
mounted_on(const char *dir, bool *out, struct err *err)
{
    struct stat st, pst;
    cleanup_free char *parent = fs_path_join(dir, "..");
    if (!parent)
        return err_set(err, ENOMEM, "out of memory");
    if (lstat(dir, &st) < 0) {
        if (errno == ENOENT) {
            *out = false;
            return 0;
        }
        return err_errno(err, errno, "stat %s", dir);
    }
    if (stat(parent, &pst) < 0)
        return err_errno(err, errno, "stat %s", parent);
    *out = S_ISDIR(st.st_mode) && st.st_dev != pst.st_dev;
    return 0;
}

/* Is loop device minor still attached to image (its sysfs backing file names it)? */
static bool
loop_holds(unsigned minor, const char *image)
{
    char path[64], buf[PATH_MAX + 16];
    snprintf(path, sizeof(path), "/sys/block/loop%u/loop/backing_file", minor);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    /* Unlinked already, it reads "<image> (deleted)". */
    size_t len = strlen(image);
    return strncmp(buf, image, len) == 0 &&
           (buf[len] == '\0' || strcmp(buf + len, " (deleted)") == 0);
}

/*
 * The overlay's private clone of the layer's mount is let go after its
 * unmount returns (the kernel frees internal mounts from a work queue), so
 * the last reference to the filesystem, and with it the autoclear of the
 * loop device, can come a few milliseconds after ours. Waits for it, so
 * that a delete that returns has left no loop device.
 */
static void
loop_wait_detached(unsigned minor, const char *image)
{
    int64_t deadline = now_ms() + LOOP_DETACH_WAIT_MS;
    while (loop_holds(minor, image)) {
        if (now_ms() >= deadline) {
            log_warn("writable layer %s: loop%u still attached after %d ms; it detaches by "
                     "itself once the last user lets go",
                     image, minor, LOOP_DETACH_WAIT_MS);
            return;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int
loop_release(const struct record *r, struct err *err)
{
    bool mounted = false;
    int ret = mounted_on(r->dir, &mounted, err);
    if (ret < 0)
        return ret;
    struct stat st;
    bool on_loop = mounted && stat(r->dir, &st) == 0 && major(st.st_dev) == LOOP_MAJOR;
    /* The kernel names the backing file by its real path. */
    char real[PATH_MAX];
    if (on_loop && !realpath(r->image, real))
        snprintf(real, sizeof(real), "%s", r->image);
    /* An overlay whose upper is on it, retired by its unmount, would keep it busy. */
    if (mounted)
        layers_release_retired();
    if (mounted && umount2(r->dir, UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
        return err_errno(err, errno, "unmount the writable layer at %s", r->dir);
    /* Autoclear detaches the loop device with the last reference, the mount's. */
    if (unlink(r->image) < 0 && errno != ENOENT)
        return err_errno(err, errno, "remove %s", r->image);
    if (on_loop)
        loop_wait_detached(minor(st.st_dev), real);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

int
scratch_make(const char *dir, uint64_t max_bytes, const char *record_path, const char *image_path,
             enum scratch_kind *kind, struct err *err)
{
    if (kind)
        *kind = SCRATCH_PLAIN;
    int ret = fs_mkdir_p(dir, 0700, err);
    if (ret < 0 || max_bytes == 0)
        return ret;
    if (max_bytes < SCRATCH_MIN_BYTES)
        return err_set(err, EINVAL, "limits.disk_bytes %llu: under the minimum of %llu (16 MiB)",
                       (unsigned long long)max_bytes, (unsigned long long)SCRATCH_MIN_BYTES);
    if (max_bytes > (uint64_t)INT64_MAX)
        return err_set(err, EINVAL, "limits.disk_bytes %llu: too large",
                       (unsigned long long)max_bytes);
    if (!record_path || !image_path)
        return err_set(err, EINVAL, "writable layer %s: no record or image path", dir);
    ret = quota_make(dir, max_bytes, record_path, err);
    if (ret < 0)
        return ret;
    if (ret == 1) {
        if (kind)
            *kind = SCRATCH_QUOTA;
        return 0;
    }
    ret = loop_make(dir, max_bytes, record_path, image_path, err);
    if (ret < 0)
        return ret;
    if (kind)
        *kind = SCRATCH_LOOP;
    return 0;
}

int
scratch_release(const char *record_path, struct err *err)
{
    struct record r;
    struct err rerr = {0};
    int ret = record_read(record_path, &r, &rerr);
    if (ret == -ENOENT)
        return 0;
    if (ret < 0) {
        err_copy(err, &rerr);
        return ret;
    }
    if (r.kind == SCRATCH_LOOP)
        ret = loop_release(&r, err);
    else if (r.kind == SCRATCH_QUOTA)
        ret = quota_release(&r, err);
    if (ret < 0)
        return ret;
    if (unlink(record_path) < 0 && errno != ENOENT)
        return err_errno(err, errno, "remove %s", record_path);
    return 0;
}
