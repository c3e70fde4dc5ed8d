/*
 * Daemon side of the berth-init protocol: the request and record files
 * under a container's state directory and the commands on its ctl FIFO.
 * Runs on pool threads; every function blocks on the disk, some on the
 * init. The container can write everything under the state directory, so
 * paths are walked with O_NOFOLLOW from a directory fd, never resolved
 * as strings.
 */
#include "runtime/oci/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/strv.h"
#include "runtime/outrec.h"

#define RECORD_MAX 4096

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps a little longer each round: 1 ms, 2, 4 ... capped at 20 ms. */
static void
backoff(int *round)
{
    long ms = 1L << (*round < 5 ? *round : 5);
    if (ms > 20)
        ms = 20;
    (*round)++;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/*
 * Waiting for the init to write a record: an inotify watch on the
 * directory (dirfd, through /proc/self/fd so no path is resolved), so
 * the waiter wakes when a record is renamed into place instead of at its
 * next backoff round (up to 20 ms late, twice per container start: the
 * init ready, a process started). One inotify instance per thread, kept
 * for the thread's life, watches removed after each wait: closing an
 * instance waits for an SRCU grace period in the kernel (fsnotify's mark
 * reaper), which cost 15-20 ms per wait on this machine, more than the
 * backoff it replaced. -1 when inotify is unavailable (its per-user
 * limit): change_wait then backs off.
 */
static __thread int watch_fd = -1;

static void
watch_drain(void)
{
    char buf[4096];
    while (read(watch_fd, buf, sizeof(buf)) > 0) {
    }
}

static int
change_watch(int dirfd)
{
    if (watch_fd < 0)
        watch_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (watch_fd < 0)
        return -1;
    watch_drain(); /* a removed watch's last events */
    char path[40];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", dirfd);
    /* Records are renamed into place: output files, temporaries and the
     * like wake no one. */
    return inotify_add_watch(watch_fd, path, IN_MOVED_TO | IN_DELETE_SELF);
}

/* For cleanup(): removes the watch change_watch added (no blocking). */
static void
change_unwatch(int *wd)
{
    if (*wd >= 0 && watch_fd >= 0)
        inotify_rm_watch(watch_fd, *wd);
}
#define cleanup_unwatch __attribute__((cleanup(change_unwatch)))

/* Waits for a change under the watch wd (at most 50 ms, a safety net), or
 * backs off without one. */
static void
change_wait(int wd, int *round, int64_t deadline)
{
    if (wd < 0) {
        backoff(round);
        return;
    }
    int64_t left = deadline - now_ms();
    struct pollfd p = {.fd = watch_fd, .events = POLLIN};
    if (left > 0 && poll(&p, 1, left > 50 ? 50 : (int)left) > 0)
        watch_drain();
}

static int
open_state(const char *state_dir, struct err *err)
{
    int fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open state directory %s", state_dir);
    return fd;
}

/* Opens procs/<id> below the state directory without following symlinks. */
static int
open_proc_dir(const char *state_dir, const char *id, struct err *err)
{
    if (!rt_id_valid(id))
        return err_set(err, EINVAL, "process id %s: invalid (1-64 of [A-Za-z0-9_.-])",
                       id ? id : "(null)");
    cleanup_close int sfd = open_state(state_dir, err);
    if (sfd < 0)
        return sfd;
    cleanup_close int pfd = openat(sfd, "procs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return err_errno(err, errno, "open %s/procs", state_dir);
    int dfd = openat(pfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return err_errno(err, errno, "process %s", id);
    return dfd;
}

/* Reads a small record file; missing → -ENOENT without touching err. */
static int
read_record(int dfd, const char *name, char *buf, size_t len, struct err *err)
{
    cleanup_close int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return -ENOENT;
        return err_errno(err, errno, "open %s record", name);
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return err_set(err, EIO, "%s record: not a regular file", name);
    ssize_t n = pread(fd, buf, len - 1, 0);
    if (n < 0)
        return err_errno(err, errno, "read %s record", name);
    buf[n] = '\0';
    return 0;
}

static int
parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || (*end && *end != '\n') || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int
status_from_dir(int dfd, const char *id, struct rt_proc_status *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    char buf[RECORD_MAX];
    /*
     * The exit record before the pid record: the init (one thread) writes
     * pid right after the exec and exit only when it reaps the process, so
     * once exit is there, a missing pid means the process never started.
     * Read the other way round, a process that started and exited between
     * the two reads looked as if it had never started.
     */
    int ret = read_record(dfd, "exit", buf, sizeof(buf), err);
    if (ret < 0 && ret != -ENOENT)
        return ret;
    if (ret == 0) {
        bool have_code = false;
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            long v;
            if (strncmp(line, "code ", 5) == 0 && parse_int(line + 5, 0, 255, &v) == 0) {
                out->exit_code = (int)v;
                have_code = true;
            } else if (strncmp(line, "signal ", 7) == 0 && parse_int(line + 7, 1, 64, &v) == 0) {
                out->signal = (int)v;
            } else if (strncmp(line, "error ", 6) == 0) {
                snprintf(out->error, sizeof(out->error), "%s", line + 6);
            }
        }
        if (!have_code)
            return err_set(err, EIO, "process %s: bad exit record", id);
        out->exited = true;
    }
    ret = read_record(dfd, "pid", buf, sizeof(buf), err);
    if (ret == 0) {
        long v;
        if (parse_int(buf, 1, INT32_MAX, &v) < 0)
            return err_set(err, EIO, "process %s: bad pid record", id);
        out->started = true;
        out->pid = (pid_t)v;
    } else if (ret != -ENOENT) {
        return ret;
    }
    out->output_truncated = faccessat(dfd, "truncated", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    /* The driver's verdict, once it made one (runtime/oci/driver.c). */
    out->oom_killed = read_record(dfd, "oom", buf, sizeof(buf), err) == 0 && buf[0] == '1';
    return 0;
}

/*
 * Writes one command line to the ctl FIFO. Opening without a reader fails
 * with ENXIO: the init is gone. SIGPIPE (the init dying between open and
 * write) is blocked for this thread and consumed, so it never reaches the
 * daemon.
 */
static int
send_command(const char *state_dir, const char *line, int timeout_ms, struct err *err)
{
    cleanup_close int sfd = open_state(state_dir, err);
    if (sfd < 0)
        return sfd;
    cleanup_close int fd = openat(sfd, "ctl", O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENXIO)
        return err_set(err, ERR_UNAVAILABLE, "container init in %s is not running", state_dir);
    if (fd < 0)
        return err_errno(err, errno, "open %s/ctl", state_dir);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
        return err_set(err, EIO, "%s/ctl: not a fifo", state_dir);

    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    size_t len = strlen(line);
    int64_t deadline = now_ms() + timeout_ms;
    int round = 0, ret = 0;
    for (;;) {
        /* Under PIPE_BUF bytes: written whole or not at all. */
        ssize_t n = write(fd, line, len);
        if (n == (ssize_t)len)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && now_ms() < deadline) {
            backoff(&round);
            continue;
        }
        if (n < 0 && errno == EPIPE) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_set, NULL, &zero);
            ret = err_set(err, ERR_UNAVAILABLE, "container init in %s is not running", state_dir);
        } else {
            ret = err_errno(err, n < 0 ? errno : EIO, "write %s/ctl", state_dir);
        }
        break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return ret;
}

int
rt_proc_state_init(const char *state_dir, struct err *err)
{
    int ret = fs_mkdir_p(state_dir, 0700, err);
    if (ret < 0)
        return ret;
    cleanup_close int sfd = open_state(state_dir, err);
    if (sfd < 0)
        return sfd;
    if (mkdirat(sfd, "procs", 0700) < 0 && errno != EEXIST)
        return err_errno(err, errno, "mkdir %s/procs", state_dir);
    if (mkfifoat(sfd, "ctl", 0600) < 0 && errno != EEXIST)
        return err_errno(err, errno, "mkfifo %s/ctl", state_dir);
    if (unlinkat(sfd, "ready", 0) < 0 && errno != ENOENT)
        return err_errno(err, errno, "remove %s/ready", state_dir);
    return 0;
}

int
rt_proc_wait_ready(const char *state_dir, int timeout_ms, struct err *err)
{
    cleanup_close int sfd = open_state(state_dir, err);
    if (sfd < 0)
        return sfd;
    int64_t deadline = now_ms() + timeout_ms;
    int round = 0;
    cleanup_unwatch int wd = change_watch(sfd);
    while (faccessat(sfd, "ready", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
        if (now_ms() >= deadline)
            return err_set(err, ETIMEDOUT, "container init in %s: not ready after %d ms", state_dir,
                           timeout_ms);
        change_wait(wd, &round, deadline);
    }
    return 0;
}

/* Appends "key value\n" to buf, escaping backslashes and newlines in value. */
static int
spec_line(char **buf, size_t *len, size_t *cap, const char *key, const char *value)
{
    size_t need = strlen(key) + 2 + 2 * strlen(value) + 1;
    if (*len + need > *cap) {
        size_t ncap = (*cap ? *cap * 2 : 1024) + need;
        char *nb = realloc(*buf, ncap);
        if (!nb)
            return -ENOMEM;
        *buf = nb;
        *cap = ncap;
    }
    char *p = *buf + *len;
    p += sprintf(p, "%s ", key);
    for (const char *v = value; *v; v++) {
        if (*v == '\\') {
            *p++ = '\\';
            *p++ = '\\';
        } else if (*v == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else {
            *p++ = *v;
        }
    }
    *p++ = '\n';
    *p = '\0';
    *len = (size_t)(p - *buf);
    return 0;
}

static char *
spec_text(const struct rt_proc_spec *spec, size_t *len)
{
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    char num[16];
    int ret = spec_line(&buf, len, &cap, "path", spec->path);
    for (size_t i = 0; ret == 0 && spec->argv && spec->argv[i]; i++)
        ret = spec_line(&buf, len, &cap, "arg", spec->argv[i]);
    for (size_t i = 0; ret == 0 && spec->env && spec->env[i]; i++)
        ret = spec_line(&buf, len, &cap, "env", spec->env[i]);
    if (ret == 0)
        ret = spec_line(&buf, len, &cap, "dir", spec->dir ? spec->dir : "/");
    snprintf(num, sizeof(num), "%u", spec->uid);
    if (ret == 0)
        ret = spec_line(&buf, len, &cap, "uid", num);
    snprintf(num, sizeof(num), "%u", spec->gid);
    if (ret == 0)
        ret = spec_line(&buf, len, &cap, "gid", num);
    for (size_t i = 0; ret == 0 && i < spec->ngroups; i++) {
        snprintf(num, sizeof(num), "%u", spec->groups[i]);
        ret = spec_line(&buf, len, &cap, "group", num);
    }
    if (ret == 0)
        ret = spec_line(&buf, len, &cap, "stdin", spec->has_stdin ? "1" : "0");
    char limit[24];
    snprintf(limit, sizeof(limit), "%llu", (unsigned long long)spec->max_output_bytes);
    if (ret == 0 && spec->max_output_bytes)
        ret = spec_line(&buf, len, &cap, "output_limit", limit);
    if (ret < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/*
 * Writes dfd/name atomically (tmp, rename) without following symlinks;
 * durable: also fsync of the file and of the directory.
 */
static int
write_at(int dfd, const char *name, const char *data, size_t len, bool durable, struct err *err)
{
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".%s.daemon.tmp", name);
    unlinkat(dfd, tmp, 0);
    cleanup_close int fd =
        openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_errno(err, errno, "create %s", tmp);
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(err, errno, "write %s", tmp);
        off += (size_t)n;
    }
    if (durable && fsync(fd) < 0)
        return err_errno(err, errno, "fsync %s", tmp);
    if (renameat(dfd, tmp, dfd, name) < 0)
        return err_errno(err, errno, "rename %s", tmp);
    if (durable && fsync(dfd) < 0)
        return err_errno(err, errno, "fsync process directory");
    return 0;
}

/* Undoes a process directory whose spawn was never asked of the init, so
 * the id can be used again. */
static void
proc_dir_discard(int pfd, const char *id)
{
    int dfd = openat(pfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        DIR *d = fdopendir(dfd);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(dfd, de->d_name, 0);
        if (d)
            closedir(d);
        else
            close(dfd);
    }
    unlinkat(pfd, id, AT_REMOVEDIR);
}

int
rt_proc_spawn(const char *state_dir, const struct rt_proc_spec *spec, int timeout_ms,
              struct rt_proc_status *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    if (!rt_id_valid(spec->id))
        return err_set(err, EINVAL, "process id %s: invalid (1-64 of [A-Za-z0-9_.-])",
                       spec->id ? spec->id : "(null)");
    if (!spec->path || !*spec->path)
        return err_set(err, EINVAL, "process %s: no path", spec->id);
    cleanup_close int sfd = open_state(state_dir, err);
    if (sfd < 0)
        return sfd;
    cleanup_close int pfd = openat(sfd, "procs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return err_errno(err, errno, "open %s/procs", state_dir);
    if (mkdirat(pfd, spec->id, 0700) < 0) {
        if (errno == EEXIST)
            return err_set(err, ERR_CONFLICT, "process %s: exists", spec->id);
        return err_errno(err, errno, "mkdir process %s", spec->id);
    }
    /* Declared before the first goto: cleanup attributes must not be
     * jumped over. */
    cleanup_free char *text = NULL;
    cleanup_unwatch int wd = -1;
    size_t len = 0;
    cleanup_close int dfd = openat(pfd, spec->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int ret = 0;
    if (dfd < 0) {
        ret = err_errno(err, errno, "open process %s", spec->id);
        goto discard;
    }
    if (spec->has_stdin && mkfifoat(dfd, "stdin", 0600) < 0) {
        ret = err_errno(err, errno, "mkfifo stdin of %s", spec->id);
        goto discard;
    }
    text = spec_text(spec, &len);
    if (!text) {
        ret = err_set(err, ENOMEM, "process %s: out of memory", spec->id);
        goto discard;
    }
    /* Unsynced: the init reads it at once, and after a power loss only
     * its time (the process's start) is read back. */
    ret = write_at(dfd, "spec", text, len, false, err);
    if (ret < 0) {
        err_wrap(err, "process %s", spec->id);
        goto discard;
    }

    char line[128];
    snprintf(line, sizeof(line), "spawn %s\n", spec->id);
    ret = send_command(state_dir, line, timeout_ms, err);
    if (ret < 0) {
        /* The command never reached the init (it is gone or not ready):
         * nothing will start, so the id is free again. */
        err_wrap(err, "spawn %s", spec->id);
        goto discard;
    }

    int64_t deadline = now_ms() + timeout_ms;
    int round = 0;
    wd = change_watch(dfd);
    for (;;) {
        ret = status_from_dir(dfd, spec->id, out, err);
        if (ret < 0)
            return ret;
        if (out->started)
            return 0;
        if (out->exited)
            return err_set(err, ENOEXEC, "spawn %s: %s", spec->id,
                           out->error[0] ? out->error : "failed to start");
        if (now_ms() >= deadline)
            return err_set(err, ETIMEDOUT, "spawn %s: the init did not start it in %d ms", spec->id,
                           timeout_ms);
        change_wait(wd, &round, deadline);
    }
discard:
    proc_dir_discard(pfd, spec->id);
    return ret;
}

int
rt_proc_settle(const char *state_dir, const char *id, const char *why, struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    /* Removals rename a directory away first (rt_proc_remove, the
     * container's delete), so one found here is not on its way out. */
    if (faccessat(dfd, "pid", F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
        faccessat(dfd, "exit", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    /* As the init records a spawn that failed: the reason in stderr (and
     * its chunk entry), then code 127. */
    char line[512];
    snprintf(line, sizeof(line), "berth: %s\n", why);
    if (outrec_write_output(dfd, 1, line, strlen(line)) < 0) {
        /* The exit record below says it all the same. */
    }
    char rec[512];
    int n = snprintf(rec, sizeof(rec), "code 127\nerror %s\n", why);
    int ret = write_at(dfd, "exit", rec, (size_t)n, true, err);
    return ret < 0 ? err_wrap(err, "process %s", id) : 1;
}

int
rt_proc_note_write(const char *state_dir, const char *id, const char *name, const char *text,
                   struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    return write_at(dfd, name, text, strlen(text), false, err);
}

int
rt_proc_note_read(const char *state_dir, const char *id, const char *name, char *buf, size_t len,
                  struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    return read_record(dfd, name, buf, len, err);
}

int
rt_proc_status_read(const char *state_dir, const char *id, struct rt_proc_status *out,
                    struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    return status_from_dir(dfd, id, out, err);
}

int
rt_proc_wait(const char *state_dir, const char *id, int timeout_ms, struct rt_proc_status *out,
             struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    int64_t deadline = now_ms() + timeout_ms;
    int round = 0;
    for (;;) {
        int ret = status_from_dir(dfd, id, out, err);
        if (ret < 0 || out->exited)
            return ret;
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return err_set(err, ETIMEDOUT, "process %s: still running after %d ms", id, timeout_ms);
        backoff(&round);
    }
}

int
rt_proc_signal(const char *state_dir, const char *id, int sig, struct err *err)
{
    if (sig < 1 || sig >= 65)
        return err_set(err, EINVAL, "signal %d: out of range", sig);
    struct rt_proc_status st;
    int ret = rt_proc_status_read(state_dir, id, &st, err);
    if (ret < 0)
        return ret;
    if (st.exited)
        return err_set(err, ERR_CONFLICT, "signal process %s: exited", id);
    char line[128];
    snprintf(line, sizeof(line), "signal %s %d\n", id, sig);
    return send_command(state_dir, line, 1000, err);
}

int
rt_proc_stdin_open(const char *state_dir, const char *id, struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    int fd = openat(dfd, "stdin", O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ENOENT || errno == ENXIO))
        return err_set(err, ERR_CONFLICT, "stdin of %s: %s", id,
                       errno == ENOENT ? "the process has no stdin" : "closed");
    if (fd < 0)
        return err_errno(err, errno, "open stdin of %s", id);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
        close(fd);
        return err_set(err, EIO, "stdin of %s: not a fifo", id);
    }
    return fd;
}

int
rt_proc_stdin_close(const char *state_dir, const char *id, struct err *err)
{
    if (!rt_id_valid(id))
        return err_set(err, EINVAL, "process id %s: invalid", id ? id : "(null)");
    char line[128];
    snprintf(line, sizeof(line), "close %s\n", id);
    return send_command(state_dir, line, 1000, err);
}

int
rt_proc_output_open(const char *state_dir, const char *id, enum rt_proc_stream which,
                    struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    const char *name = which == RT_PROC_STDERR ? "stderr" : "stdout";
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open %s of %s", name, id);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, EIO, "%s of %s: not a regular file", name, id);
    }
    /* Regular files ignore O_NONBLOCK; it only kept a planted FIFO from blocking us. */
    return fd;
}

int
rt_proc_chunks_open(const char *state_dir, const char *id, struct err *err)
{
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    int fd = openat(dfd, OUTREC_INDEX, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open the chunk index of %s", id);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, EIO, "chunk index of %s: not a regular file", id);
    }
    return fd;
}

int
rt_proc_remove(const char *state_dir, const char *id, struct err *err)
{
    struct rt_proc_status st;
    int ret = rt_proc_status_read(state_dir, id, &st, err);
    if (ret < 0)
        return ret;
    if (!st.exited)
        return err_set(err, ERR_CONFLICT, "remove process %s: still running", id);
    cleanup_close int sfd = open_state(state_dir, err);
    if (sfd < 0)
        return sfd;
    cleanup_close int pfd = openat(sfd, "procs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return err_errno(err, errno, "open %s/procs", state_dir);
    /*
     * Renamed away first (ids never start with a dot): a status read racing
     * the removal then finds no directory, instead of a half-removed one
     * that it would settle as a cut spawn, writing an exit record back into
     * it. Removed through the fd's magic link, so a symlink planted as
     * procs/ cannot redirect the removal.
     */
    char trash[80], path[128];
    snprintf(trash, sizeof(trash), ".removing-%s", id);
    snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", pfd, trash);
    ret = fs_remove_tree(path, err); /* one a crash left */
    if (ret < 0)
        return ret;
    if (renameat(pfd, id, pfd, trash) < 0)
        return err_errno(err, errno, "remove process %s", id);
    return fs_remove_tree(path, err);
}

char *
rt_proc_state_dir(const char *dir)
{
    return fs_path_join(dir, "state");
}

char *
rt_proc_dir(const char *state_dir, const char *id)
{
    char *path = NULL;
    if (!rt_id_valid(id) || asprintf(&path, "%s/procs/%s", state_dir, id) < 0)
        return NULL;
    return path;
}

int
rt_proc_list(const char *state_dir, char ***ids, struct err *err)
{
    char **v = calloc(1, sizeof(char *));
    size_t n = 0;
    if (!v)
        return err_set(err, ENOMEM, "list processes: out of memory");
    cleanup_close int sfd = open_state(state_dir, err);
    int pfd = sfd < 0 ? -1 : openat(sfd, "procs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dp = pfd < 0 ? NULL : fdopendir(pfd);
    if (!dp) {
        if (pfd >= 0)
            close(pfd);
        *ids = v; /* no records: no processes */
        return 0;
    }
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (!rt_id_valid(de->d_name))
            continue;
        if (strv_push(&v, &n, de->d_name) < 0) {
            closedir(dp);
            strv_free(v);
            return err_set(err, ENOMEM, "list processes: out of memory");
        }
    }
    closedir(dp);
    *ids = v;
    return 0;
}

static int64_t
mtime_ms(int dfd, const char *name)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    return (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
}

int
rt_proc_times(const char *state_dir, const char *id, struct rt_proc_times *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    cleanup_close int dfd = open_proc_dir(state_dir, id, err);
    if (dfd < 0)
        return dfd;
    out->started_ms = mtime_ms(dfd, "spec");
    out->finished_ms = mtime_ms(dfd, "exit");
    out->has_stdin = faccessat(dfd, "stdin", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    return 0;
}
