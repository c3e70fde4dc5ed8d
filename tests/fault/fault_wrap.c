/*
 * Fault injection for berthd-fault, the test-only daemon that
 * tests/fault/fault.cmake links from berthd's own objects plus this file
 * (with BERTH_TESTS only; berthd itself never contains it).
 *
 * How the calls are reached. The link passes -Wl,--wrap=SYMBOL for each
 * system call below, so every call of that symbol *from berth's own
 * objects* (the static libraries of common/, store/, runtime/, daemon/ and
 * api/) goes to __wrap_SYMBOL here, which counts it and either fails it or
 * calls the real one (__real_SYMBOL). --wrap rewrites undefined references
 * at static link time only: the calls that libarchive, libuv,
 * libmicrohttpd, SQLite, OpenSSL and libc make inside their shared
 * libraries are untouched, and so are runc and our container init, which
 * are other programs. SQLite's own file steps are reached another way:
 * fault_vfs.c's VFS wraps the default one and is registered as the new
 * default before main() runs (the constructor below), so store/ needs no
 * change; it fails xWrite/xTruncate, xSync, xRead, and xLock/xShmLock.
 *
 * With -D_FILE_OFFSET_BITS=64 glibc's headers name pwrite and ftruncate
 * pwrite64 and ftruncate64 (even on 64-bit targets): those are the
 * symbols berth's objects reference, so those are the ones wrapped.
 *
 * The kinds (each with its own counter):
 *   fsync     fsync, fdatasync, syncfs                     EIO
 *   rename    rename, renameat, renameat2                  EIO (or EXDEV, ENOSPC)
 *   write     write, pwrite, ftruncate                     EIO (or ENOSPC; "short")
 *   mount     mount, open_tree, mount_setattr              ENOMEM (or EBUSY)
 *   umount    umount2                                      EBUSY
 *   unlink    unlink, unlinkat, rmdir                      EIO (or EBUSY, EROFS)
 *   mkdir     mkdir, mkdirat                               ENOSPC (or EIO, EDQUOT)
 *   sqlwrite  SQLite xWrite, xTruncate                     SQLITE_IOERR_WRITE/_TRUNCATE
 *                                                          (SQLITE_FULL with ENOSPC)
 *   sqlsync   SQLite xSync                                 SQLITE_IOERR_FSYNC
 *   sqlread   SQLite xRead                                 SQLITE_IOERR_READ
 *   sqllock   SQLite xLock, xShmLock                       SQLITE_BUSY
 * "short" makes the chosen write write half of what it was given (at
 * least one byte) and return that, as a real write may near a full disk;
 * "kill" (any kind) makes the daemon SIGKILL itself instead of making the
 * call, a crash at an exact point, for the suites that walk the recovery.
 *
 * Not counted: writes to fds 0-2 (the log, whose line count depends on
 * timing) and writes to the health monitor's <root>/.health-probe (it
 * writes one every second whatever the daemon is doing, so counting it
 * would make "the Nth write of an operation" depend on timing).
 *
 * Control. BERTH_FAULT arms faults from the start (the start-up and
 * crash recovery are walked that way); BERTH_FAULT_CTL names a Unix
 * socket on which a thread of ours answers one line per connection, so a
 * suite can count and arm within one operation on a running daemon:
 *   arm SPEC    zero every counter, disarm all, then arm SPEC      -> "ok"
 *   reset       zero every counter and disarm all                   -> "ok"
 *   counts      "fsync=N rename=N ... fired=N" and a line "last: ..."
 * SPEC is a comma-separated list of KIND:N[+][:ERRNO]: fail the Nth call
 * of KIND counted since the last arm or reset (1-based), or with "+" the
 * Nth and every later one, with ERRNO (a name: EIO, ENOSPC, EXDEV,
 * ENOMEM, EBUSY, EROFS, EDQUOT, EPERM, EEXIST, "short" or "kill") instead of the kind's
 * default. Each fault that fires is logged to stderr as one
 * "berth-fault: ..." line with the call's arguments and a backtrace.
 *
 * Threads: the wrappers run on whichever thread calls them (the loop,
 * pool threads, the monitor); the counters are atomics. The control
 * thread blocks every signal and only uses calls that are not wrapped.
 */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/fault/fault_wrap.h"

/* The real calls, resolved by the linker's --wrap. */
int __real_fsync(int fd);
int __real_fdatasync(int fd);
int __real_syncfs(int fd);
int __real_rename(const char *from, const char *to);
int __real_renameat(int fd1, const char *from, int fd2, const char *to);
int __real_renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags);
ssize_t __real_write(int fd, const void *buf, size_t len);
ssize_t __real_pwrite64(int fd, const void *buf, size_t len, off_t off);
int __real_ftruncate64(int fd, off_t len);
int __real_mount(const char *src, const char *target, const char *type, unsigned long flags,
                 const void *data);
int __real_umount2(const char *target, int flags);
int __real_unlink(const char *path);
int __real_unlinkat(int dfd, const char *path, int flags);
int __real_rmdir(const char *path);
int __real_mkdir(const char *path, mode_t mode);
int __real_mkdirat(int dfd, const char *path, mode_t mode);
int __real_open_tree(int dfd, const char *path, unsigned flags);
int __real_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr,
                         size_t size);

struct fault_point {
    const char *name;
    int default_errno;
    atomic_ulong calls;
    atomic_ulong at; /* the call to fail, 1-based; 0: none */
    atomic_bool sticky;
    atomic_int err;
};

static struct fault_point points[FAULT_KINDS] = {
    [FAULT_FSYNC] = {.name = "fsync", .default_errno = EIO},
    [FAULT_RENAME] = {.name = "rename", .default_errno = EIO},
    [FAULT_WRITE] = {.name = "write", .default_errno = EIO},
    [FAULT_MOUNT] = {.name = "mount", .default_errno = ENOMEM},
    [FAULT_UMOUNT] = {.name = "umount", .default_errno = EBUSY},
    [FAULT_UNLINK] = {.name = "unlink", .default_errno = EIO},
    [FAULT_MKDIR] = {.name = "mkdir", .default_errno = ENOSPC},
    [FAULT_SQLWRITE] = {.name = "sqlwrite", .default_errno = EIO},
    [FAULT_SQLSYNC] = {.name = "sqlsync", .default_errno = EIO},
    [FAULT_SQLREAD] = {.name = "sqlread", .default_errno = EIO},
    [FAULT_SQLLOCK] = {.name = "sqllock", .default_errno = EBUSY},
};

static atomic_ulong fired;
static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;
static char last[768];

static const struct {
    const char *name;
    int value;
} errno_names[] = {
    {"EIO", EIO},       {"ENOSPC", ENOSPC},     {"EXDEV", EXDEV},     {"ENOMEM", ENOMEM},
    {"EBUSY", EBUSY},   {"EROFS", EROFS},       {"EDQUOT", EDQUOT},   {"EPERM", EPERM},
    {"EEXIST", EEXIST}, {"short", FAULT_SHORT}, {"kill", FAULT_KILL},
};

static const char *
errno_name(int e)
{
    for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
        if (errno_names[i].value == e)
            return errno_names[i].name;
    return "?";
}

static _Thread_local unsigned long hit_number; /* the call that fault_hit failed */

bool
fault_hit(enum fault_kind k, int *e)
{
    struct fault_point *p = &points[k];
    unsigned long n = atomic_fetch_add(&p->calls, 1) + 1;
    unsigned long at = atomic_load(&p->at);
    if (at == 0 || n < at || (n > at && !atomic_load(&p->sticky)))
        return false;
    *e = atomic_load(&p->err);
    hit_number = n;
    atomic_fetch_add(&fired, 1);
    return true;
}

void
fault_report(enum fault_kind k, int e, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    char line[768];
    int len = snprintf(line, sizeof(line), "berth-fault: failing %s #%lu (%s) with %s\n",
                       points[k].name, hit_number, what, errno_name(e));
    if (len > (int)sizeof(line) - 1)
        len = (int)sizeof(line) - 1;
    pthread_mutex_lock(&last_mu);
    snprintf(last, sizeof(last), "%.*s", len - 1, line);
    pthread_mutex_unlock(&last_mu);
    if (__real_write(STDERR_FILENO, line, (size_t)len) >= 0) {
        void *frames[24];
        int n = backtrace(frames, 24);
        backtrace_symbols_fd(frames, n, STDERR_FILENO);
    }
    if (e == FAULT_KILL)
        kill(getpid(), SIGKILL);
}

/* The path an fd names, for the report and the write filter. */
static const char *
fd_path(int fd, char *buf, size_t len)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, len - 1);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return buf;
}

static int
fail_with(int e)
{
    errno = e;
    return -1;
}

/* ---- fsync ------------------------------------------------------------------ */

static int
sync_call(const char *call, int fd, int (*real)(int))
{
    int e;
    if (fault_hit(FAULT_FSYNC, &e)) {
        char p[PATH_MAX];
        fault_report(FAULT_FSYNC, e, "%s fd %d %s", call, fd, fd_path(fd, p, sizeof(p)));
        return fail_with(e);
    }
    return real(fd);
}

int
__wrap_fsync(int fd)
{
    return sync_call("fsync", fd, __real_fsync);
}

int
__wrap_fdatasync(int fd)
{
    return sync_call("fdatasync", fd, __real_fdatasync);
}

int
__wrap_syncfs(int fd)
{
    return sync_call("syncfs", fd, __real_syncfs);
}

/* ---- rename ----------------------------------------------------------------- */

int
__wrap_rename(const char *from, const char *to)
{
    int e;
    if (fault_hit(FAULT_RENAME, &e)) {
        fault_report(FAULT_RENAME, e, "rename %s -> %s", from, to);
        return fail_with(e);
    }
    return __real_rename(from, to);
}

int
__wrap_renameat(int fd1, const char *from, int fd2, const char *to)
{
    int e;
    if (fault_hit(FAULT_RENAME, &e)) {
        char p[PATH_MAX];
        fault_report(FAULT_RENAME, e, "renameat %s/%s -> %s", fd_path(fd1, p, sizeof(p)), from, to);
        return fail_with(e);
    }
    return __real_renameat(fd1, from, fd2, to);
}

int
__wrap_renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags)
{
    int e;
    if (fault_hit(FAULT_RENAME, &e)) {
        char p[PATH_MAX];
        fault_report(FAULT_RENAME, e, "renameat2 %s/%s -> %s flags %#x", fd_path(fd1, p, sizeof(p)),
                     from, to, flags);
        return fail_with(e);
    }
    return __real_renameat2(fd1, from, fd2, to, flags);
}

/* ---- write ------------------------------------------------------------------ */

/* Whether a write to fd is counted (see the file's comment). */
static bool
write_counted(int fd, char *path, size_t len)
{
    if (fd <= STDERR_FILENO)
        return false;
    fd_path(fd, path, len);
    const char *slash = strrchr(path, '/');
    return !(slash && strcmp(slash, "/.health-probe") == 0);
}

ssize_t
__wrap_write(int fd, const void *buf, size_t len)
{
    char p[PATH_MAX];
    int e;
    if (write_counted(fd, p, sizeof(p)) && fault_hit(FAULT_WRITE, &e)) {
        fault_report(FAULT_WRITE, e, "write fd %d %s, %zu bytes", fd, p, len);
        if (e != FAULT_SHORT || len < 2)
            return fail_with(e == FAULT_SHORT ? EIO : e);
        return __real_write(fd, buf, len / 2);
    }
    return __real_write(fd, buf, len);
}

ssize_t
__wrap_pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    char p[PATH_MAX];
    int e;
    if (write_counted(fd, p, sizeof(p)) && fault_hit(FAULT_WRITE, &e)) {
        fault_report(FAULT_WRITE, e, "pwrite fd %d %s, %zu bytes at %lld", fd, p, len,
                     (long long)off);
        if (e != FAULT_SHORT || len < 2)
            return fail_with(e == FAULT_SHORT ? EIO : e);
        return __real_pwrite64(fd, buf, len / 2, off);
    }
    return __real_pwrite64(fd, buf, len, off);
}

int
__wrap_ftruncate64(int fd, off_t len)
{
    char p[PATH_MAX];
    int e;
    if (write_counted(fd, p, sizeof(p)) && fault_hit(FAULT_WRITE, &e)) {
        fault_report(FAULT_WRITE, e, "ftruncate fd %d %s to %lld", fd, p, (long long)len);
        return fail_with(e == FAULT_SHORT ? EIO : e);
    }
    return __real_ftruncate64(fd, len);
}

/* ---- mount ------------------------------------------------------------------ */

int
__wrap_mount(const char *src, const char *target, const char *type, unsigned long flags,
             const void *data)
{
    int e;
    if (fault_hit(FAULT_MOUNT, &e)) {
        fault_report(FAULT_MOUNT, e, "mount %s on %s type %s flags %#lx", src ? src : "-",
                     target ? target : "-", type ? type : "-", flags);
        return fail_with(e);
    }
    return __real_mount(src, target, type, flags, data);
}

int
__wrap_open_tree(int dfd, const char *path, unsigned flags)
{
    int e;
    if (fault_hit(FAULT_MOUNT, &e)) {
        fault_report(FAULT_MOUNT, e, "open_tree %s flags %#x", path, flags);
        return fail_with(e);
    }
    return __real_open_tree(dfd, path, flags);
}

int
__wrap_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr,
                     size_t size)
{
    int e;
    if (fault_hit(FAULT_MOUNT, &e)) {
        char p[PATH_MAX];
        fault_report(FAULT_MOUNT, e, "mount_setattr fd %d %s", dfd, fd_path(dfd, p, sizeof(p)));
        return fail_with(e);
    }
    return __real_mount_setattr(dfd, path, flags, attr, size);
}

int
__wrap_umount2(const char *target, int flags)
{
    int e;
    if (fault_hit(FAULT_UMOUNT, &e)) {
        fault_report(FAULT_UMOUNT, e, "umount2 %s flags %#x", target, (unsigned)flags);
        return fail_with(e);
    }
    return __real_umount2(target, flags);
}

/* ---- unlink and mkdir -------------------------------------------------------------- */

int
__wrap_unlink(const char *path)
{
    int e;
    if (fault_hit(FAULT_UNLINK, &e)) {
        fault_report(FAULT_UNLINK, e, "unlink %s", path);
        return fail_with(e);
    }
    return __real_unlink(path);
}

int
__wrap_unlinkat(int dfd, const char *path, int flags)
{
    int e;
    if (fault_hit(FAULT_UNLINK, &e)) {
        char p[PATH_MAX];
        fault_report(FAULT_UNLINK, e, "unlinkat %s/%s flags %#x", fd_path(dfd, p, sizeof(p)), path,
                     (unsigned)flags);
        return fail_with(e);
    }
    return __real_unlinkat(dfd, path, flags);
}

int
__wrap_rmdir(const char *path)
{
    int e;
    if (fault_hit(FAULT_UNLINK, &e)) {
        fault_report(FAULT_UNLINK, e, "rmdir %s", path);
        return fail_with(e);
    }
    return __real_rmdir(path);
}

int
__wrap_mkdir(const char *path, mode_t mode)
{
    int e;
    if (fault_hit(FAULT_MKDIR, &e)) {
        fault_report(FAULT_MKDIR, e, "mkdir %s", path);
        return fail_with(e);
    }
    return __real_mkdir(path, mode);
}

int
__wrap_mkdirat(int dfd, const char *path, mode_t mode)
{
    int e;
    if (fault_hit(FAULT_MKDIR, &e)) {
        char p[PATH_MAX];
        fault_report(FAULT_MKDIR, e, "mkdirat %s/%s", fd_path(dfd, p, sizeof(p)), path);
        return fail_with(e);
    }
    return __real_mkdirat(dfd, path, mode);
}

/* ---- arming and the control socket ---------------------------------------------- */

static void
fault_reset(void)
{
    for (int k = 0; k < FAULT_KINDS; k++) {
        atomic_store(&points[k].at, 0);
        atomic_store(&points[k].calls, 0);
        atomic_store(&points[k].sticky, false);
    }
    atomic_store(&fired, 0);
    pthread_mutex_lock(&last_mu);
    last[0] = '\0';
    pthread_mutex_unlock(&last_mu);
}

/* Arms one "KIND:N[+][:ERRNO]"; 0 or -1 with why filled in. */
static int
fault_arm_one(const char *spec, size_t len, char *why, size_t why_len)
{
    char buf[96];
    if (len == 0 || len >= sizeof(buf)) {
        snprintf(why, why_len, "bad fault %.*s", (int)len, spec);
        return -1;
    }
    memcpy(buf, spec, len);
    buf[len] = '\0';
    char *colon = strchr(buf, ':');
    if (!colon) {
        snprintf(why, why_len, "fault %s: want KIND:N[+][:ERRNO]", buf);
        return -1;
    }
    *colon = '\0';
    int k = 0;
    while (k < FAULT_KINDS && strcmp(points[k].name, buf) != 0)
        k++;
    if (k == FAULT_KINDS) {
        snprintf(why, why_len, "fault %s: unknown kind", buf);
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long n = strtoul(colon + 1, &end, 10);
    if (errno || end == colon + 1 || n == 0) {
        snprintf(why, why_len, "fault %s: bad call number %s", buf, colon + 1);
        return -1;
    }
    bool sticky = *end == '+';
    if (sticky)
        end++;
    int e = points[k].default_errno;
    if (*end == ':') {
        size_t i = 0, count = sizeof(errno_names) / sizeof(errno_names[0]);
        while (i < count && strcmp(errno_names[i].name, end + 1) != 0)
            i++;
        if (i == count || (errno_names[i].value == FAULT_SHORT && k != FAULT_WRITE)) {
            snprintf(why, why_len, "fault %s: errno %s not known for it", buf, end + 1);
            return -1;
        }
        e = errno_names[i].value;
    } else if (*end) {
        snprintf(why, why_len, "fault %s: junk after the call number: %s", buf, end);
        return -1;
    }
    atomic_store(&points[k].err, e);
    atomic_store(&points[k].sticky, sticky);
    atomic_store(&points[k].at, n);
    return 0;
}

static int
fault_arm(const char *spec, char *why, size_t why_len)
{
    fault_reset();
    while (*spec) {
        size_t len = strcspn(spec, ",");
        if (fault_arm_one(spec, len, why, why_len) < 0) {
            fault_reset();
            return -1;
        }
        spec += len;
        if (*spec == ',')
            spec++;
    }
    return 0;
}

static void
ctl_reply(int fd, const char *s)
{
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        s += n;
        len -= (size_t)n;
    }
}

static void
ctl_serve(int fd)
{
    char cmd[512];
    size_t got = 0;
    while (got < sizeof(cmd) - 1) {
        ssize_t n = recv(fd, cmd + got, sizeof(cmd) - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(cmd, '\n', got))
            break;
    }
    cmd[got] = '\0';
    cmd[strcspn(cmd, "\r\n")] = '\0';
    char out[2048], why[256];
    if (strncmp(cmd, "arm ", 4) == 0) {
        if (fault_arm(cmd + 4, why, sizeof(why)) == 0) {
            ctl_reply(fd, "ok\n");
        } else {
            ctl_reply(fd, why);
            ctl_reply(fd, "\n");
        }
    } else if (strcmp(cmd, "reset") == 0) {
        fault_reset();
        ctl_reply(fd, "ok\n");
    } else if (strcmp(cmd, "counts") == 0) {
        size_t used = 0;
        for (int k = 0; k < FAULT_KINDS; k++)
            used += (size_t)snprintf(out + used, sizeof(out) - used, "%s=%lu ", points[k].name,
                                     atomic_load(&points[k].calls));
        pthread_mutex_lock(&last_mu);
        snprintf(out + used, sizeof(out) - used, "fired=%lu\nlast: %s\n", atomic_load(&fired),
                 last);
        pthread_mutex_unlock(&last_mu);
        ctl_reply(fd, out);
    } else {
        snprintf(out, sizeof(out), "unknown command: %.400s\n", cmd);
        ctl_reply(fd, out);
    }
}

static void *
ctl_main(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        ctl_serve(fd);
        close(fd);
    }
}

static void
ctl_start(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "berth-fault: BERTH_FAULT_CTL %s: path too long\n", path);
        exit(2);
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    __real_unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0) {
        fprintf(stderr, "berth-fault: control socket %s: %s\n", path, strerror(errno));
        exit(2);
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, ctl_main, (void *)(intptr_t)fd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, "berth-fault: control thread: %s\n", strerror(rc));
        exit(2);
    }
    pthread_detach(t);
}

__attribute__((constructor)) static void
fault_init(void)
{
    if (fault_vfs_install() < 0) {
        fprintf(stderr, "berth-fault: cannot register the SQLite fault VFS\n");
        exit(2);
    }
    const char *spec = getenv("BERTH_FAULT");
    char why[256];
    if (spec && *spec && fault_arm(spec, why, sizeof(why)) < 0) {
        fprintf(stderr, "berth-fault: BERTH_FAULT: %s\n", why);
        exit(2);
    }
    const char *ctl = getenv("BERTH_FAULT_CTL");
    if (ctl && *ctl)
        ctl_start(ctl);
}
