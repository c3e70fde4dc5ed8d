/*
 * berth-init: PID 1 of every oci container. It keeps the container alive,
 * reaps orphans, and spawns the daemon's processes itself, so that each
 * process's output and exit status live in files that outlive the daemon
 * and no runtime invocation is needed per process. The protocol (the
 * state directory, the `ctl` FIFO, the spec and exit records) is in
 * PROTOCOL.md beside this file.
 *
 * A process writes its stdout and stderr into pipes, and the init copies
 * them into the output files, so that the output cap of the process (its
 * spec's output_limit) holds: past it the process is killed and the rest
 * dropped. The state directory is an fd (--state-fd) that no path in the
 * container reaches, and the init is not dumpable, so no process can
 * write the files itself.
 *
 * Static, libc only, single-threaded: one poll loop over the `ctl` FIFO,
 * a signalfd and the output pipes. It must never depend on anything in
 * the image.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/outrec.h"

#define INIT_DEFAULT_STATE "/.berth"
#define INIT_SPEC_MAX (1024 * 1024)
#define INIT_LINE_MAX 256
#define INIT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define INIT_CHUNK (64 * 1024)
/* Reads of a pipe when its process exits, before the exit record: what it
 * wrote is all there; a child it left behind cannot hold the init longer. */
#define INIT_DRAIN_READS 64
/* The init's saved uid (never a process's): see main. */
#define INIT_SAVED_UID ((uid_t)0xfffffffeu)

struct proc {
    pid_t pid; /* 0 once reaped */
    char id[65];
    int stdin_keeper; /* the init's write end of the stdin FIFO, or -1 */
    char error[256];  /* set when the exec failed */
    int pipe[2];      /* read ends of its stdout and stderr pipes, -1 once closed */
    int file[2];      /* the stdout and stderr files, -1 once closed */
    int index;        /* the chunk index (runtime/outrec.h), -1 once closed */
    uint64_t off[2];  /* where the next chunk of each stream starts in its file */
    uint64_t limit;   /* output cap, stdout and stderr together; 0: none */
    uint64_t written;
    uint64_t index_bytes; /* the index is kept within the cap too (see output_pump) */
    bool truncated;
};

struct spawn_spec {
    char *path;
    char **argv;
    size_t argc;
    char **envp;
    size_t envc;
    char *dir;
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    size_t ngroups;
    bool want_stdin;
    uint64_t output_limit;
};

static int procs_fd = -1;
static struct proc *procs;
static size_t nprocs, procs_cap;
static bool terminating;
static sigset_t orig_mask;

static void
say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(buf) - 2)
        n = sizeof(buf) - 2;
    buf[n++] = '\n';
    /* stderr is the container's init.log; a failing write has nowhere to go. */
    ssize_t w = write(STDERR_FILENO, "berth-init: ", 12);
    w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

static bool
id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 64 || id[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static int
write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * fsync of a directory. The state directory's fd is an open_tree(2) clone,
 * an O_PATH descriptor, which fsync refuses (EBADF): the directory is then
 * synced through a descriptor opened from it.
 */
static int
sync_dir(int dirfd)
{
    int fl = fcntl(dirfd, F_GETFL);
    if (fl >= 0 && !(fl & O_PATH))
        return fsync(dirfd);
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

/*
 * Writes dirfd/name atomically (tmp file, rename); durable: also fsync of
 * the file and of the directory, for a record that must survive a power
 * loss (an exit, a truncation: what a process did). A record of what
 * lives only while the machine runs (the init is ready, a process's PID)
 * needs only the page cache: each fsync was a wait for the root disk on
 * the way to a process's start.
 */
static int
write_record(int dirfd, const char *name, const char *data, bool durable)
{
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (write_all(fd, data, strlen(data)) < 0 || (durable && fsync(fd) < 0)) {
        close(fd);
        unlinkat(dirfd, tmp, 0);
        return -1;
    }
    close(fd);
    if (renameat(dirfd, tmp, dirfd, name) < 0) {
        unlinkat(dirfd, tmp, 0);
        return -1;
    }
    if (durable && sync_dir(dirfd) < 0)
        say("sync the directory of %s: %s", name, strerror(errno));
    return 0;
}

static int
open_proc_dir(const char *id)
{
    return openat(procs_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Records a process's end in procs/<id>/exit. */
static void
record_exit(const char *id, int code, int sig, const char *error)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "code %d\n", code);
    if (sig > 0)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "signal %d\n", sig);
    if (error && *error) {
        /* One line: the record's format has no escapes. */
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "error ");
        for (const char *p = error; *p && (size_t)n < sizeof(buf) - 2; p++)
            buf[n++] = (*p == '\n') ? ' ' : *p;
        buf[n++] = '\n';
        buf[n] = '\0';
    }
    int dfd = open_proc_dir(id);
    if (dfd < 0 || write_record(dfd, "exit", buf, true) < 0)
        say("write exit record of %s: %s", id, strerror(errno));
    if (dfd >= 0)
        close(dfd);
}

/* A spawn that failed before any program ran: message in stderr, code 127. */
static void
fail_spawn(const char *id, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int dfd = open_proc_dir(id);
    if (dfd >= 0) {
        char line[300];
        int n = snprintf(line, sizeof(line), "berth-init: %s\n", msg);
        if (n > 0 && outrec_write_output(dfd, 1, line, strlen(line)) < 0)
            say("write stderr of %s: %s", id, strerror(errno));
        close(dfd);
    }
    record_exit(id, 127, 0, msg);
}

static void
spec_free(struct spawn_spec *s)
{
    free(s->path);
    for (size_t i = 0; i < s->argc; i++)
        free(s->argv[i]);
    free(s->argv);
    for (size_t i = 0; i < s->envc; i++)
        free(s->envp[i]);
    free(s->envp);
    free(s->dir);
    free(s->groups);
    memset(s, 0, sizeof(*s));
}

/* Appends v to a NULL-terminated vector; takes ownership of v. */
static int
vec_push(char ***vec, size_t *n, char *v)
{
    char **nv = realloc(*vec, (*n + 2) * sizeof(char *));
    if (!nv) {
        free(v);
        return -1;
    }
    nv[(*n)++] = v;
    nv[*n] = NULL;
    *vec = nv;
    return 0;
}

/* Undoes the spec's escapes (\\ and \n) in place. */
static void
unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\\' && r[1] == 'n') {
            *w++ = '\n';
            r++;
        } else if (*r == '\\' && r[1] == '\\') {
            *w++ = '\\';
            r++;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

static int
parse_u32(const char *s, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > 0xfffffffful || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

/* Reads procs/<id>/spec into s. On failure fills why and returns -1. */
static int
spec_read(int dfd, struct spawn_spec *s, char *why, size_t whylen)
{
    int fd = openat(dfd, "spec", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whylen, "open spec: %s", strerror(errno));
        return -1;
    }
    char *buf = malloc(INIT_SPEC_MAX + 1);
    size_t got = 0;
    if (!buf) {
        close(fd);
        snprintf(why, whylen, "read spec: out of memory");
        return -1;
    }
    for (;;) {
        ssize_t n = read(fd, buf + got, INIT_SPEC_MAX - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, whylen, "read spec: %s", strerror(errno));
            close(fd);
            free(buf);
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got == INIT_SPEC_MAX) {
            snprintf(why, whylen, "read spec: larger than %d bytes", INIT_SPEC_MAX);
            close(fd);
            free(buf);
            return -1;
        }
    }
    close(fd);
    buf[got] = '\0';

    int ret = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        char *val = sp ? sp + 1 : line + strlen(line);
        if (sp)
            *sp = '\0';
        unescape(val);
        unsigned long num;
        if (strcmp(line, "path") == 0) {
            free(s->path);
            s->path = strdup(val);
        } else if (strcmp(line, "arg") == 0) {
            ret = vec_push(&s->argv, &s->argc, strdup(val));
        } else if (strcmp(line, "env") == 0) {
            ret = vec_push(&s->envp, &s->envc, strdup(val));
        } else if (strcmp(line, "dir") == 0) {
            free(s->dir);
            s->dir = strdup(val);
        } else if (strcmp(line, "uid") == 0 || strcmp(line, "gid") == 0 ||
                   strcmp(line, "group") == 0) {
            if (parse_u32(val, &num) < 0) {
                snprintf(why, whylen, "spec: bad %s %.32s", line, val);
                ret = -1;
                break;
            }
            if (line[0] == 'u') {
                s->uid = (uid_t)num;
            } else if (line[1] == 'i') {
                s->gid = (gid_t)num;
            } else {
                gid_t *ng = realloc(s->groups, (s->ngroups + 1) * sizeof(gid_t));
                if (!ng) {
                    ret = -1;
                    break;
                }
                s->groups = ng;
                s->groups[s->ngroups++] = (gid_t)num;
            }
        } else if (strcmp(line, "stdin") == 0) {
            s->want_stdin = strcmp(val, "1") == 0;
        } else if (strcmp(line, "output_limit") == 0) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (errno || end == val || *end || val[0] == '-') {
                snprintf(why, whylen, "spec: bad output_limit %.32s", val);
                ret = -1;
                break;
            }
            s->output_limit = v;
        }
        /* Unknown keys are skipped, so a newer daemon can add optional ones. */
        if (ret < 0) {
            snprintf(why, whylen, "spec: out of memory");
            break;
        }
    }
    free(buf);
    if (ret == 0 && (!s->path || !*s->path)) {
        snprintf(why, whylen, "spec: no path");
        ret = -1;
    }
    if (ret == 0 && !s->argv)
        ret = vec_push(&s->argv, &s->argc, strdup(s->path));
    if (ret == 0 && !s->envp)
        ret = vec_push(&s->envp, &s->envc, strdup("PATH=" INIT_DEFAULT_PATH));
    if (ret < 0 && !*why)
        snprintf(why, whylen, "spec: out of memory");
    return ret;
}

/*
 * Runs in the child after fork: execs path, searching the process's own
 * PATH when path has no slash (execvpe would search the init's).
 * Returns only on failure, with errno set.
 */
static void
exec_path(const struct spawn_spec *s)
{
    if (strchr(s->path, '/')) {
        execve(s->path, s->argv, s->envp);
        return;
    }
    const char *path = INIT_DEFAULT_PATH;
    for (size_t i = 0; i < s->envc; i++)
        if (strncmp(s->envp[i], "PATH=", 5) == 0)
            path = s->envp[i] + 5;
    int saved = ENOENT;
    char buf[PATH_MAX];
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len + strlen(s->path) + 2 < sizeof(buf)) {
            memcpy(buf, path, len);
            buf[len] = '/';
            strcpy(buf + len + 1, s->path);
            execve(buf, s->argv, s->envp);
            if (errno == EACCES)
                saved = EACCES;
            else if (errno != ENOENT && errno != ENOTDIR)
                saved = errno;
        }
        path += len;
        if (*path == ':')
            path++;
    }
    errno = saved;
}

/* The child side of a spawn; never returns. status_fd is close-on-exec. */
static void __attribute__((noreturn))
child_exec(const struct spawn_spec *s, int in, int out, int err, int status_fd)
{
    const char *what = "setup";
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &orig_mask, NULL);
    setsid();
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
        what = "dup2";
        goto fail;
    }
    int fl = fcntl(0, F_GETFL);
    if (fl >= 0)
        fcntl(0, F_SETFL, fl & ~O_NONBLOCK);
    /* The init itself is shielded from the OOM killer; its children are not. */
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
        ssize_t w = write(oom, "0", 1);
        (void)w;
        close(oom);
    }
    what = "setgroups";
    if (setgroups(s->ngroups, s->groups) < 0)
        goto fail;
    what = "setgid";
    if (setgid(s->gid) < 0)
        goto fail;
    what = "setuid";
    /* With the init's saved uid a process could signal it without CAP_KILL. */
    if (s->uid == INIT_SAVED_UID) {
        errno = EPERM;
        goto fail;
    }
    if (setuid(s->uid) < 0)
        goto fail;
    what = "chdir";
    if (chdir(s->dir ? s->dir : "/") < 0)
        goto fail;
    what = "exec";
    exec_path(s);
fail:;
    int e = errno;
    dprintf(2, "berth-init: %s %s: %s\n", what,
            strcmp(what, "chdir") == 0 ? (s->dir ? s->dir : "/") : s->path, strerror(e));
    char msg[256];
    int n = snprintf(msg, sizeof(msg), "%s %s: %s", what,
                     strcmp(what, "chdir") == 0 ? (s->dir ? s->dir : "/") : s->path, strerror(e));
    if (n > 0)
        write_all(status_fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    _exit(127);
}

/* A process the init still knows: running, or reaped with output pipes still open. */
static struct proc *
proc_find_id(const char *id)
{
    for (size_t i = 0; i < nprocs; i++)
        if (strcmp(procs[i].id, id) == 0)
            return &procs[i];
    return NULL;
}

/* Processes not yet reaped. */
static size_t
procs_running(void)
{
    size_t n = 0;
    for (size_t i = 0; i < nprocs; i++)
        n += procs[i].pid != 0;
    return n;
}

static void
output_close(struct proc *p, int k)
{
    if (p->pipe[k] >= 0)
        close(p->pipe[k]);
    if (p->file[k] >= 0)
        close(p->file[k]);
    p->pipe[k] = p->file[k] = -1;
    if (p->pipe[0] < 0 && p->pipe[1] < 0 && p->index >= 0) {
        close(p->index);
        p->index = -1;
    }
}

/*
 * The output reached the cap: record it, kill the process (its group too:
 * it is a session leader), and drop the rest. A process already reaped is
 * never signalled: its PID may be another's now.
 */
static void
output_truncate(struct proc *p)
{
    p->truncated = true;
    char rec[64];
    snprintf(rec, sizeof(rec), "limit %llu\n", (unsigned long long)p->limit);
    int dfd = open_proc_dir(p->id);
    if (dfd < 0 || write_record(dfd, "truncated", rec, true) < 0)
        say("write truncated record of %s: %s", p->id, strerror(errno));
    if (dfd >= 0)
        close(dfd);
    if (p->pid > 0) {
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
    }
    output_close(p, 0);
    output_close(p, 1);
}

/*
 * Copies what is in pipe k of p into its file, up to the cap. Returns 1
 * when it read something, 0 when the pipe is empty (or closed now).
 */
static int
output_pump(struct proc *p, int k)
{
    static char buf[INIT_CHUNK];
    if (p->pipe[k] < 0)
        return 0;
    ssize_t n;
    do {
        n = read(p->pipe[k], buf, sizeof(buf));
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0) {
        output_close(p, k);
        return 0;
    }
    size_t take = (size_t)n;
    int64_t now = outrec_now_ns();
    if (p->limit && p->written + take > p->limit)
        take = (size_t)(p->limit - p->written);
    size_t put = 0;
    while (put < take) {
        ssize_t w = write(p->file[k], buf + put, take - put);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            say("write %s of %s: %s", k ? "stderr" : "stdout", p->id,
                w < 0 ? strerror(errno) : "short write");
            break;
        }
        put += (size_t)w;
    }
    /*
     * The chunk's entry goes after its bytes, so an entry never names
     * bytes that are not in the file. A process writing a byte at a time
     * makes an entry per byte: the index is kept within the output cap as
     * well, and past it chunks go unindexed (readers give the rest of the
     * files as one late chunk), so the disk a process can fill stays
     * bounded.
     */
    if (put > 0 && p->index >= 0 && (!p->limit || p->index_bytes + OUTREC_SIZE <= p->limit)) {
        struct outrec r = {
            .stream = (uint8_t)k, .time_ns = now, .offset = p->off[k], .len = (uint32_t)put};
        int e = outrec_append(p->index, &r);
        if (e < 0)
            say("write chunk index of %s: %s", p->id, strerror(-e));
        p->index_bytes += OUTREC_SIZE;
    }
    p->off[k] += put;
    p->written += take;
    if (take < (size_t)n)
        output_truncate(p);
    return 1;
}

/* Forgets processes that are reaped and whose output pipes are closed. */
static void
procs_sweep(void)
{
    for (size_t i = 0; i < nprocs;) {
        struct proc *p = &procs[i];
        if (p->pid == 0 && p->pipe[0] < 0 && p->pipe[1] < 0)
            procs[i] = procs[--nprocs];
        else
            i++;
    }
}

/* An output pipe: the init's read end non-blocking, the child's end blocking. */
static int
output_pipe(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    int fl = fcntl(fds[0], F_GETFL);
    if (fl < 0 || fcntl(fds[0], F_SETFL, fl | O_NONBLOCK) < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    return 0;
}

static void
do_spawn(const char *id)
{
    if (proc_find_id(id)) {
        say("spawn %s: already running", id);
        return;
    }
    int dfd = open_proc_dir(id);
    if (dfd < 0) {
        say("spawn %s: open procs/%s: %s", id, id, strerror(errno));
        return;
    }
    if (faccessat(dfd, "pid", F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
        faccessat(dfd, "exit", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
        say("spawn %s: already started once", id);
        close(dfd);
        return;
    }
    if (nprocs == procs_cap) {
        size_t ncap = procs_cap ? procs_cap * 2 : 16;
        struct proc *np = realloc(procs, ncap * sizeof(*np));
        if (!np) {
            close(dfd);
            fail_spawn(id, "out of memory");
            return;
        }
        procs = np;
        procs_cap = ncap;
    }

    struct spawn_spec s = {0};
    char why[256] = "";
    int in = -1, keeper = -1, out = -1, err = -1, chunks = -1, pfd[2] = {-1, -1};
    int opipe[2] = {-1, -1}, epipe[2] = {-1, -1};
    if (spec_read(dfd, &s, why, sizeof(why)) < 0)
        goto fail;
    int oflags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC;
    out = openat(dfd, "stdout", oflags, 0640);
    err = openat(dfd, "stderr", oflags, 0640);
    chunks = openat(dfd, OUTREC_INDEX, oflags, 0640);
    struct stat ost, est;
    if (out < 0 || err < 0 || chunks < 0 || fstat(out, &ost) < 0 || fstat(err, &est) < 0) {
        snprintf(why, sizeof(why), "open stdout/stderr/chunks: %s", strerror(errno));
        goto fail;
    }
    if (output_pipe(opipe) < 0 || output_pipe(epipe) < 0) {
        snprintf(why, sizeof(why), "output pipe: %s", strerror(errno));
        goto fail;
    }
    if (s.want_stdin) {
        if (mkfifoat(dfd, "stdin", 0600) < 0 && errno != EEXIST) {
            snprintf(why, sizeof(why), "mkfifo stdin: %s", strerror(errno));
            goto fail;
        }
        /* Reader first: opening a FIFO for writing without a reader fails. */
        in = openat(dfd, "stdin", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (in >= 0)
            keeper = openat(dfd, "stdin", O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (in < 0 || keeper < 0 || fstat(in, &st) < 0 || !S_ISFIFO(st.st_mode)) {
            snprintf(why, sizeof(why), "open stdin fifo: %s",
                     errno ? strerror(errno) : "not a fifo");
            goto fail;
        }
    } else {
        in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0) {
            /* A container without /dev/null: an empty pipe reads EOF just the same. */
            int p[2];
            if (pipe2(p, O_CLOEXEC) < 0) {
                snprintf(why, sizeof(why), "open /dev/null: %s", strerror(errno));
                goto fail;
            }
            close(p[1]);
            in = p[0];
        }
    }
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(why, sizeof(why), "pipe: %s", strerror(errno));
        goto fail;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, sizeof(why), "fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        close(pfd[0]);
        child_exec(&s, in, opipe[1], epipe[1], pfd[1]);
    }
    close(pfd[1]);
    close(in);
    close(opipe[1]);
    close(epipe[1]);

    struct proc *p = &procs[nprocs++];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    snprintf(p->id, sizeof(p->id), "%s", id);
    p->stdin_keeper = keeper;
    p->pipe[0] = opipe[0];
    p->pipe[1] = epipe[0];
    p->file[0] = out;
    p->file[1] = err;
    p->index = chunks;
    p->off[0] = (uint64_t)ost.st_size;
    p->off[1] = (uint64_t)est.st_size;
    p->limit = s.output_limit;
    /* EOF on the close-on-exec pipe means the exec succeeded. */
    ssize_t n;
    do {
        n = read(pfd[0], p->error, sizeof(p->error) - 1);
    } while (n < 0 && errno == EINTR);
    close(pfd[0]);
    if (n > 0) {
        p->error[n] = '\0';
    } else {
        char rec[32];
        snprintf(rec, sizeof(rec), "%d\n", (int)pid);
        if (write_record(dfd, "pid", rec, false) < 0)
            say("write pid record of %s: %s", id, strerror(errno));
    }
    close(dfd);
    spec_free(&s);
    return;

fail:
    int fds[] = {in,     keeper,   out,      err,      chunks,  pfd[0],
                 pfd[1], opipe[0], opipe[1], epipe[0], epipe[1]};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    close(dfd);
    spec_free(&s);
    fail_spawn(id, "%s", why);
}

static void
do_signal(const char *id, const char *signo)
{
    struct proc *p = proc_find_id(id);
    char *end;
    long sig = strtol(signo, &end, 10);
    if (!p || p->pid == 0 || *end || sig < 1 || sig >= NSIG) {
        say("signal %s %s: no such process or signal", id, signo);
        return;
    }
    /* Still our unreaped child, so the PID cannot have been reused. */
    if (kill(p->pid, (int)sig) < 0)
        say("signal %s: %s", id, strerror(errno));
}

static void
do_close(const char *id)
{
    struct proc *p = proc_find_id(id);
    if (p && p->stdin_keeper >= 0) {
        close(p->stdin_keeper);
        p->stdin_keeper = -1;
    }
}

static void
handle_line(char *line)
{
    char *save = NULL;
    char *cmd = strtok_r(line, " ", &save);
    char *id = strtok_r(NULL, " ", &save);
    char *arg = strtok_r(NULL, " ", &save);
    if (!cmd || !id || !id_valid(id)) {
        say("ctl: ignoring a malformed command");
        return;
    }
    if (strcmp(cmd, "spawn") == 0)
        do_spawn(id);
    else if (strcmp(cmd, "signal") == 0 && arg)
        do_signal(id, arg);
    else if (strcmp(cmd, "close") == 0)
        do_close(id);
    else
        say("ctl: unknown command %.32s", cmd);
}

/* Reads what is in the FIFO and runs each complete line. */
static void
read_ctl(int fd)
{
    static char buf[INIT_LINE_MAX];
    static size_t len;
    static bool skipping; /* discarding the rest of an over-long line */
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        len += (size_t)n;
        char *start = buf;
        char *nl;
        while ((nl = memchr(start, '\n', len - (size_t)(start - buf))) != NULL) {
            *nl = '\0';
            if (!skipping)
                handle_line(start);
            skipping = false;
            start = nl + 1;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len);
        if (len == sizeof(buf)) {
            skipping = true;
            len = 0;
        }
    }
}

static void
reap(void)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (size_t i = 0; i < nprocs; i++) {
            if (procs[i].pid != pid)
                continue;
            struct proc *p = &procs[i];
            int code = 0, sig = 0;
            if (WIFEXITED(status)) {
                code = WEXITSTATUS(status);
            } else if (WIFSIGNALED(status)) {
                sig = WTERMSIG(status);
                code = 128 + sig;
            }
            p->pid = 0;
            /* Everything it wrote is in its pipes now: into the files
             * before the exit record, so a reader that saw the exit has
             * all of it. What a child it left behind writes later is
             * appended while its pipes stay open. */
            for (int k = 0; k < 2; k++)
                for (int r = 0; r < INIT_DRAIN_READS && output_pump(p, k) > 0; r++)
                    ;
            record_exit(p->id, code, sig, p->error);
            if (p->stdin_keeper >= 0)
                close(p->stdin_keeper);
            p->stdin_keeper = -1;
            break;
        }
        /* Anything else was an orphan: reaping it is all there is to do. */
    }
}

static void
forward(int sig)
{
    for (size_t i = 0; i < nprocs; i++)
        if (procs[i].pid > 0)
            kill(procs[i].pid, sig);
}

/* The state directory given as an fd (--state-fd N): it must be a directory. */
static int
state_from_fd(const char *arg)
{
    char *end;
    long fd = strtol(arg, &end, 10);
    struct stat st;
    if (*end || fd < 0 || fd > 1024 || fstat((int)fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
        errno = EBADF;
        return -1;
    }
    if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
        return -1;
    return (int)fd;
}

int
main(int argc, char **argv)
{
    /*
     * Not dumpable: a process of the container (root, like the init) can
     * then neither ptrace the init nor open /proc/1/fd, where the state
     * directory and init.log are.
     */
    prctl(PR_SET_DUMPABLE, 0);
    /*
     * prlimit(2) on another process asks for no ptrace access, only the
     * same real, effective and saved IDs: a root process of the container
     * set the init's RLIMIT_FSIZE or RLIMIT_NOFILE and no process's output
     * or exit could be recorded any more (RLIMIT_CPU had the kernel kill
     * the init). A saved uid of its own, which no process is given (see
     * child_exec), makes those IDs differ; the real and effective uids
     * stay 0, so the init keeps its capabilities.
     */
    if (getuid() == 0 && setresuid(0, 0, INIT_SAVED_UID) < 0)
        say("set the saved uid: %s", strerror(errno));
    const char *state = INIT_DEFAULT_STATE;
    const char *state_fd = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--state") == 0 && i + 1 < argc)
            state = argv[++i];
        else if (strcmp(argv[i], "--state-fd") == 0 && i + 1 < argc)
            state_fd = argv[++i];
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, &orig_mask) < 0) {
        say("sigprocmask: %s", strerror(errno));
        return 1;
    }
    /* Also reaps orphans when it is not PID 1 (a test, a nested runtime). */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        say("signalfd: %s", strerror(errno));
        return 1;
    }
    if (chdir("/") < 0)
        say("chdir /: %s", strerror(errno));

    int sdfd = state_fd ? state_from_fd(state_fd) : open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sdfd < 0) {
        say("open state directory %s: %s", state_fd ? state_fd : state, strerror(errno));
        return 1;
    }
    if (state_fd)
        state = "(fd)";
    if (mkdirat(sdfd, "procs", 0700) < 0 && errno != EEXIST) {
        say("mkdir %s/procs: %s", state, strerror(errno));
        return 1;
    }
    procs_fd = openat(sdfd, "procs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (procs_fd < 0) {
        say("open %s/procs: %s", state, strerror(errno));
        return 1;
    }
    if (mkfifoat(sdfd, "ctl", 0600) < 0 && errno != EEXIST) {
        say("mkfifo %s/ctl: %s", state, strerror(errno));
        return 1;
    }
    /* O_RDWR: the FIFO never reports EOF, whether or not a daemon has it open. */
    int cfd = openat(sdfd, "ctl", O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0) {
        say("open %s/ctl: %s", state, strerror(errno));
        return 1;
    }
    if (write_record(sdfd, "ready", "1\n", false) < 0)
        say("write %s/ready: %s", state, strerror(errno));

    struct pollfd *pfds = NULL;
    size_t pfds_cap = 0;
    for (;;) {
        if (terminating && procs_running() == 0)
            return 0;
        /* ctl, the signalfd, then each open output pipe. */
        size_t want = 2 + 2 * nprocs;
        if (want > pfds_cap) {
            struct pollfd *np = realloc(pfds, want * sizeof(*np));
            if (!np) {
                say("poll set: out of memory");
                sleep(1);
                continue;
            }
            pfds = np;
            pfds_cap = want;
        }
        size_t n = 0;
        pfds[n++] = (struct pollfd){.fd = cfd, .events = POLLIN};
        pfds[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        for (size_t i = 0; i < nprocs; i++)
            for (int k = 0; k < 2; k++)
                pfds[n++] = (struct pollfd){.fd = procs[i].pipe[k], .events = POLLIN};
        int r = poll(pfds, (nfds_t)n, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            say("poll: %s", strerror(errno));
            continue;
        }
        /* Output first: the pipes are where the processes wait. The set
         * matches procs as it was: nothing is added or removed until the
         * sweep below. */
        size_t polled = (n - 2) / 2;
        for (size_t i = 0; i < polled && i < nprocs; i++)
            for (int k = 0; k < 2; k++)
                if (pfds[2 + 2 * i + (size_t)k].revents)
                    output_pump(&procs[i], k);
        if (pfds[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                forward((int)si.ssi_signo);
                if (si.ssi_signo != SIGHUP)
                    terminating = true;
            }
            reap();
        }
        if (pfds[0].revents & POLLIN)
            read_ctl(cfd);
        /* A child can exit between two signalfd reads; reaping is cheap. */
        reap();
        procs_sweep();
    }
}
