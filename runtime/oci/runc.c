/*
 * Runs the OCI runtime binary synchronously on the calling (pool) thread.
 * The child is started with posix_spawn (safe in a threaded process),
 * its stdout and stderr read through close-on-exec pipes, and it is
 * waited for by its own PID only, so libuv's reaping of the daemon's other
 * children is never disturbed. A runtime that hangs is killed after
 * RUNC_TIMEOUT_MS.
 */
#include "runtime/oci/runc.h"

#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"

extern char **environ;

#define RUNC_TIMEOUT_MS 60000
#define RUNC_OUT_MAX (256 * 1024)
/* How long runtime calls killed at the end of rt_runc_wait_strays get to go. */
#define STRAY_KILL_WAIT_MS 2000

/* Output of one run; both buffers NUL-terminated, cut at RUNC_OUT_MAX. */
struct run_out {
    char *out;
    size_t out_len;
    char *err;
    size_t err_len;
    int status; /* as from waitpid */
};

static void
run_out_free(struct run_out *r)
{
    free(r->out);
    free(r->err);
}

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
buf_append(char **buf, size_t *len, const char *data, size_t n)
{
    if (*len >= RUNC_OUT_MAX)
        return 0;
    if (n > RUNC_OUT_MAX - *len)
        n = RUNC_OUT_MAX - *len;
    char *nb = realloc(*buf, *len + n + 1);
    if (!nb)
        return -ENOMEM;
    memcpy(nb + *len, data, n);
    *len += n;
    nb[*len] = '\0';
    *buf = nb;
    return 0;
}

/*
 * Runs argv. With stdio_fd >= 0 the child's stdout and stderr are that fd
 * (not captured); otherwise both are captured into r. With pass_fd >= 0
 * the child gets it as its fd 3. Returns 0 when the child ran (whatever
 * its exit status), or a negative errno.
 */
static int
run(const struct rt_runc *rc, const char *cmd, char *const argv[], int stdio_fd, int pass_fd,
    struct run_out *r, struct err *err)
{
    memset(r, 0, sizeof(*r));
    /* dup2 onto itself would leave close-on-exec set: move it off 3 first. */
    cleanup_close int moved = pass_fd == 3 ? fcntl(pass_fd, F_DUPFD_CLOEXEC, 10) : -1;
    if (pass_fd == 3) {
        if (moved < 0)
            return err_errno(err, errno, "%s %s: dup", rc->name, cmd);
        pass_fd = moved;
    }
    int outp[2] = {-1, -1}, errp[2] = {-1, -1};
    if (stdio_fd < 0 && (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (outp[i] >= 0)
                close(outp[i]);
            if (errp[i] >= 0)
                close(errp[i]);
        }
        return err_errno(err, e, "%s %s: pipe", rc->name, cmd);
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, stdio_fd >= 0 ? stdio_fd : outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, stdio_fd >= 0 ? stdio_fd : errp[1], 2);
    if (pass_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, pass_fd, 3);
    /* The runtime gets a clean signal state, whatever the daemon blocks or ignores. */
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGCHLD);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGHUP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc_spawn = posix_spawn(&pid, rc->bin, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (stdio_fd < 0) {
        close(outp[1]);
        close(errp[1]);
    }
    if (rc_spawn != 0) {
        if (stdio_fd < 0) {
            close(outp[0]);
            close(errp[0]);
        }
        return err_errno(err, rc_spawn, "%s %s: run %s", rc->name, cmd, rc->bin);
    }

    int ret = 0;
    if (stdio_fd < 0) {
        struct pollfd pfds[2] = {{.fd = outp[0], .events = POLLIN},
                                 {.fd = errp[0], .events = POLLIN}};
        int64_t deadline = now_ms() + RUNC_TIMEOUT_MS;
        int open_fds = 2;
        while (open_fds > 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0) {
                kill(pid, SIGKILL);
                ret = err_set(err, ETIMEDOUT, "%s %s: no answer after %d ms", rc->name, cmd,
                              RUNC_TIMEOUT_MS);
                break;
            }
            int n = poll(pfds, 2, (int)left);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                ret = err_errno(err, errno, "%s %s: poll", rc->name, cmd);
                kill(pid, SIGKILL);
                break;
            }
            for (int i = 0; i < 2; i++) {
                if (pfds[i].fd < 0 || !pfds[i].revents)
                    continue;
                char chunk[4096];
                ssize_t got = read(pfds[i].fd, chunk, sizeof(chunk));
                if (got < 0 && errno == EINTR)
                    continue;
                if (got <= 0) {
                    close(pfds[i].fd);
                    pfds[i].fd = -1;
                    open_fds--;
                    continue;
                }
                int e = i == 0 ? buf_append(&r->out, &r->out_len, chunk, (size_t)got)
                               : buf_append(&r->err, &r->err_len, chunk, (size_t)got);
                if (e < 0 && ret == 0)
                    ret = err_set(err, ENOMEM, "%s %s: out of memory", rc->name, cmd);
            }
        }
        for (int i = 0; i < 2; i++)
            if (pfds[i].fd >= 0)
                close(pfds[i].fd);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = 0;
            if (ret == 0)
                ret = err_errno(err, errno, "%s %s: wait", rc->name, cmd);
            break;
        }
    }
    r->status = status;
    if (ret < 0) {
        run_out_free(r);
        memset(r, 0, sizeof(*r));
    }
    return ret;
}

/*
 * The runtime's error, as one line: runc logs `... level=error msg="..."`
 * (logrus text); take the msg value when it is there, else the last
 * non-empty line.
 */
static void
runtime_message(const char *text, char *out, size_t outlen)
{
    out[0] = '\0';
    if (!text)
        return;
    const char *m = NULL;
    for (const char *p = text; (p = strstr(p, "msg=\"")) != NULL; p += 5)
        m = p + 5; /* the last one is the final, most specific error */
    if (m) {
        size_t n = 0;
        for (const char *p = m; *p && *p != '\n' && n + 1 < outlen; p++) {
            if (*p == '"' && p[-1] != '\\')
                break;
            if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                continue;
            out[n++] = *p;
        }
        out[n] = '\0';
        return;
    }
    const char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > text && start[-1] != '\n')
        start--;
    snprintf(out, outlen, "%.*s", (int)(end - start), start);
}

/* Turns a failed exit into an error: ENOENT for "does not exist", else EIO. */
static int
status_error(const struct rt_runc *rc, const char *cmd, const char *id, int status,
             const char *text, struct err *err)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char msg[400];
    runtime_message(text, msg, sizeof(msg));
    if (!msg[0])
        snprintf(msg, sizeof(msg), "exit status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    int code = (text && strstr(text, "does not exist")) ? ENOENT : EIO;
    return err_set(err, code, "%s %s %s: %s", rc->name, cmd, id, msg);
}

int
rt_runc_init(struct rt_runc *rc, const char *bin, const char *root, struct err *err)
{
    memset(rc, 0, sizeof(*rc));
    if (!bin || !*bin)
        bin = "runc";
    if (strchr(bin, '/')) {
        rc->bin = strdup(bin);
    } else {
        const char *path = getenv("PATH");
        if (!path)
            path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        while (*path && !rc->bin) {
            size_t len = strcspn(path, ":");
            char *cand = NULL;
            if (len > 0 && asprintf(&cand, "%.*s/%s", (int)len, path, bin) >= 0) {
                if (access(cand, X_OK) == 0)
                    rc->bin = cand;
                else
                    free(cand);
            }
            path += len;
            if (*path == ':')
                path++;
        }
        if (!rc->bin)
            return err_set(err, ERR_UNAVAILABLE, "oci runtime %s: not found on PATH", bin);
    }
    if (!rc->bin)
        return err_set(err, ENOMEM, "oci runtime: out of memory");
    if (access(rc->bin, X_OK) < 0) {
        int e = errno;
        err_errno(err, e, "oci runtime %s", rc->bin);
        err->code = ERR_UNAVAILABLE;
        rt_runc_close(rc);
        return -ERR_UNAVAILABLE;
    }
    const char *base = strrchr(rc->bin, '/');
    rc->name = strdup(base ? base + 1 : rc->bin);
    rc->root = strdup(root);
    if (!rc->name || !rc->root) {
        rt_runc_close(rc);
        return err_set(err, ENOMEM, "oci runtime: out of memory");
    }
    int ret = fs_mkdir_p(rc->root, 0700, err);
    if (ret < 0) {
        rt_runc_close(rc);
        return ret;
    }
    return 0;
}

void
rt_runc_close(struct rt_runc *rc)
{
    if (!rc)
        return;
    free(rc->bin);
    free(rc->name);
    free(rc->root);
    memset(rc, 0, sizeof(*rc));
}

/* ---- runtime calls a dead daemon left running -------------------------------- */

/* Whether pid's command line has "--root" followed by root (a call on our state). */
static bool
stray_matches(pid_t pid, const char *root)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false; /* gone, or a zombie: nothing left to wait for */
    buf[n] = '\0';
    const char *prev = NULL;
    for (const char *a = buf; a < buf + n; a += strlen(a) + 1) {
        if (prev && strcmp(prev, "--root") == 0 && strcmp(a, root) == 0)
            return true;
        prev = a;
    }
    return false;
}

/* Up to max PIDs, not ours, of runtime calls on root. */
static size_t
strays_find(const char *root, pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    size_t n = 0;
    struct dirent *de;
    while (d && n < max && (de = readdir(d)) != NULL) {
        char *end = NULL;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid())
            continue;
        if (stray_matches((pid_t)pid, root))
            out[n++] = (pid_t)pid;
    }
    if (d)
        closedir(d);
    return n;
}

int
rt_runc_wait_strays(const struct rt_runc *rc, int timeout_ms, struct err *err)
{
    int64_t since = now_ms();
    int killed = 0;
    bool signalled = false;
    for (;;) {
        pid_t pids[64];
        size_t n = strays_find(rc->root, pids, 64);
        if (n == 0)
            return killed;
        bool late = now_ms() - since >= (signalled ? STRAY_KILL_WAIT_MS : timeout_ms);
        if (late && signalled)
            return err_set(err, ETIMEDOUT, "%s: %zu calls on %s still running %d ms after SIGKILL",
                           rc->name, n, rc->root, STRAY_KILL_WAIT_MS);
        if (late) {
            for (size_t i = 0; i < n; i++) {
                /* The pidfd pins the process: checked again through it, a
                 * PID reused meanwhile is never signalled. */
                cleanup_close int pfd = (int)syscall(SYS_pidfd_open, pids[i], 0);
                if (pfd >= 0 && stray_matches(pids[i], rc->root) &&
                    syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0)
                    killed++;
            }
            signalled = true;
            since = now_ms();
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int
rt_runc_version(const struct rt_runc *rc, char **out, struct err *err)
{
    char *argv[] = {rc->bin, "--version", NULL};
    struct run_out r = {0};
    int ret = run(rc, "--version", argv, -1, -1, &r, err);
    if (ret < 0)
        return ret;
    ret = status_error(rc, "--version", "", r.status, r.err, err);
    if (ret == 0) {
        const char *text = r.out ? r.out : "";
        *out = strndup(text, strcspn(text, "\n"));
        if (!*out)
            ret = err_set(err, ENOMEM, "%s --version: out of memory", rc->name);
    }
    run_out_free(&r);
    return ret;
}

/* Runs `<bin> --root <root> <cmd> <args...>` and checks its status. */
static int
simple(const struct rt_runc *rc, const char *cmd, const char *id, char *const extra[],
       struct run_out *keep, struct err *err)
{
    char *argv[16];
    size_t n = 0;
    argv[n++] = rc->bin;
    argv[n++] = "--root";
    argv[n++] = rc->root;
    argv[n++] = (char *)cmd;
    for (size_t i = 0; extra && extra[i] && n < 14; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    struct run_out r = {0};
    int ret = run(rc, cmd, argv, -1, -1, &r, err);
    if (ret < 0)
        return ret;
    ret = status_error(rc, cmd, id, r.status, r.err, err);
    if (keep && ret == 0)
        *keep = r;
    else
        run_out_free(&r);
    return ret;
}

static int create_or_run(const struct rt_runc *rc, const char *cmd, const char *id,
                         const char *bundle, const char *log_path, int pass_fd, struct err *err);

int
rt_runc_create(const struct rt_runc *rc, const char *id, const char *bundle, const char *log_path,
               int pass_fd, struct err *err)
{
    return create_or_run(rc, "create", id, bundle, log_path, pass_fd, err);
}

int
rt_runc_run_detached(const struct rt_runc *rc, const char *id, const char *bundle,
                     const char *log_path, int pass_fd, struct err *err)
{
    return create_or_run(rc, "run", id, bundle, log_path, pass_fd, err);
}

int
rt_runc_init_process(const struct rt_runc *rc, const char *id, pid_t *pid,
                     unsigned long long *start, struct err *err)
{
    if (strchr(id, '/') || id[0] == '.')
        return err_set(err, EINVAL, "container id %s: invalid", id);
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%s/%s/state.json", rc->root, id) < 0)
        return err_set(err, ENOMEM, "%s state %s: out of memory", rc->name, id);
    cleanup_free char *text = NULL;
    size_t len = 0;
    struct err rerr = {0};
    int ret = fs_read_file(path, 4 << 20, &text, &len, &rerr);
    if (ret == -ENOENT)
        return err_set(err, ENOENT, "%s state %s: does not exist", rc->name, id);
    if (ret < 0) {
        err_copy(err, &rerr);
        return ret;
    }
    struct json_object *j = json_tokener_parse(text);
    struct json_object *p, *s;
    if (!j || !json_object_object_get_ex(j, "init_process_pid", &p) ||
        !json_object_object_get_ex(j, "init_process_start", &s)) {
        json_object_put(j);
        return err_set(err, EIO, "%s state %s: unreadable state.json", rc->name, id);
    }
    *pid = (pid_t)json_object_get_int(p);
    *start = (unsigned long long)json_object_get_uint64(s);
    json_object_put(j);
    return 0;
}

static int
create_or_run(const struct rt_runc *rc, const char *cmd, const char *id, const char *bundle,
              const char *log_path, int pass_fd, struct err *err)
{
    cleanup_close int fd =
        open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return err_errno(err, errno, "%s %s %s: open %s", rc->name, cmd, id, log_path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_errno(err, errno, "%s %s %s: stat %s", rc->name, cmd, id, log_path);
    char *argv[16];
    size_t argc = 0;
    argv[argc++] = rc->bin;
    argv[argc++] = "--root";
    argv[argc++] = rc->root;
    argv[argc++] = (char *)cmd;
    if (strcmp(cmd, "run") == 0)
        argv[argc++] = "--detach";
    if (pass_fd >= 0) {
        argv[argc++] = "--preserve-fds";
        argv[argc++] = "1";
    }
    argv[argc++] = "--bundle";
    argv[argc++] = (char *)bundle;
    argv[argc++] = (char *)id;
    argv[argc] = NULL;
    struct run_out r = {0};
    int ret = run(rc, cmd, argv, fd, pass_fd, &r, err);
    if (ret < 0)
        return ret;
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
        return 0;
    /* What the runtime wrote since we started it is its error. */
    char text[8192] = "";
    cleanup_close int rfd = open(log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (rfd >= 0) {
        ssize_t n = pread(rfd, text, sizeof(text) - 1, st.st_size);
        text[n > 0 ? n : 0] = '\0';
    }
    return status_error(rc, cmd, id, r.status, text, err);
}

int
rt_runc_start(const struct rt_runc *rc, const char *id, struct err *err)
{
    char *extra[] = {(char *)id, NULL};
    return simple(rc, "start", id, extra, NULL, err);
}

int
rt_runc_kill(const struct rt_runc *rc, const char *id, int sig, bool all, struct err *err)
{
    char signo[16];
    snprintf(signo, sizeof(signo), "%d", sig);
    char *extra[] = {all ? "--all" : (char *)id, all ? (char *)id : signo, all ? signo : NULL,
                     NULL};
    return simple(rc, "kill", id, extra, NULL, err);
}

int
rt_runc_delete(const struct rt_runc *rc, const char *id, bool force, struct err *err)
{
    char *extra[] = {force ? "--force" : (char *)id, force ? (char *)id : NULL, NULL};
    return simple(rc, "delete", id, extra, NULL, err);
}

int
rt_runc_state(const struct rt_runc *rc, const char *id, struct rt_container_state *out,
              struct err *err)
{
    char *extra[] = {(char *)id, NULL};
    struct run_out r = {0};
    int ret = simple(rc, "state", id, extra, &r, err);
    if (ret < 0)
        return ret;
    struct json_object *j = json_tokener_parse(r.out ? r.out : "");
    run_out_free(&r);
    struct json_object *st, *pid;
    if (!j || !json_object_object_get_ex(j, "status", &st) ||
        !json_object_object_get_ex(j, "pid", &pid)) {
        json_object_put(j);
        return err_set(err, EIO, "%s state %s: unreadable answer", rc->name, id);
    }
    const char *s = json_object_get_string(st);
    memset(out, 0, sizeof(*out));
    if (strcmp(s, "created") == 0)
        out->status = RT_CONTAINER_CREATED;
    else if (strcmp(s, "running") == 0)
        out->status = RT_CONTAINER_RUNNING;
    else if (strcmp(s, "stopped") == 0)
        out->status = RT_CONTAINER_STOPPED;
    else
        out->status = RT_CONTAINER_UNKNOWN;
    out->init_pid = out->status == RT_CONTAINER_STOPPED ? 0 : (pid_t)json_object_get_int(pid);
    json_object_put(j);
    return 0;
}
