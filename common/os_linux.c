/*
 * common/os.h on Linux: getrandom, gettid, setpriority, strsignal,
 * procfs for the process's usage, posix_spawn for a quiet child, and
 * pidfd_open. Any thread.
 */
#include "common/os.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int
os_random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? -errno : -EIO;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

long
os_thread_id(void)
{
    return (long)gettid();
}

long
os_pid(void)
{
    return (long)getpid();
}

int
os_thread_lower_priority(int nice)
{
    /* Relative to the main thread's nice (a daemon started under nice -n 5
     * puts its pool 5 further down), clamped to the lowest, 19. */
    errno = 0;
    int base = getpriority(PRIO_PROCESS, (id_t)getpid());
    if (base == -1 && errno)
        return -errno;
    int target = base + nice > 19 ? 19 : base + nice;
    return setpriority(PRIO_PROCESS, (id_t)gettid(), target) < 0 ? -errno : 0;
}

int
os_thread_restore_priority(void)
{
    errno = 0;
    int base = getpriority(PRIO_PROCESS, (id_t)getpid());
    if (base == -1 && errno)
        return -errno;
    return setpriority(PRIO_PROCESS, (id_t)gettid(), base) < 0 ? -errno : 0;
}

const char *
os_signal_name(int sig)
{
    return strsignal(sig);
}

int
os_setenv(const char *name, const char *value)
{
    return setenv(name, value, 1) < 0 ? -errno : 0;
}

int
os_usage_read(struct os_usage *out, struct err *err)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return err_errno(err, errno, "open /proc/self/stat");
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command may hold spaces */
    unsigned long long utime = 0, stime = 0;
    long long rss = 0;
    /* After ") ": field 3 is the state; utime 14, stime 15, rss 24. */
    for (int field = 2; p && field < 24; field++) {
        p = strchr(p + 1, ' ');
        if (p && field + 1 == 14)
            utime = strtoull(p + 1, NULL, 10);
        else if (p && field + 1 == 15)
            stime = strtoull(p + 1, NULL, 10);
        else if (p && field + 1 == 24)
            rss = strtoll(p + 1, NULL, 10);
    }
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    out->cpu_seconds = tick > 0 ? (double)(utime + stime) / (double)tick : 0;
    out->rss_bytes = page > 0 && rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
    DIR *dp = opendir("/proc/self/fd");
    uint64_t fds = 0;
    for (struct dirent *de; dp && (de = readdir(dp));)
        fds += de->d_name[0] != '.';
    if (dp) {
        closedir(dp);
        fds--; /* the directory's own fd */
    }
    out->open_fds = fds;
    return 0;
}

bool
os_is_superuser(void)
{
    return geteuid() == 0;
}

char *
os_default_root(void)
{
    if (geteuid() == 0)
        return strdup("/var/lib/berth");
    char *out = NULL;
    const char *xdg = getenv("XDG_DATA_HOME");
    if (xdg && xdg[0] == '/') {
        if (asprintf(&out, "%s/berth", xdg) < 0)
            return NULL;
        return out;
    }
    const char *home = getenv("HOME");
    if (asprintf(&out, "%s/.local/share/berth", home && *home ? home : "/tmp") < 0)
        return NULL;
    return out;
}

const char *
os_default_runtime(void)
{
    return "oci";
}

bool
os_path_is_absolute(const char *path)
{
    return path && path[0] == '/';
}

int
os_path_absolute(const char *path, char **out, struct err *err)
{
    if (!os_path_is_absolute(path))
        return err_set(err, EINVAL, "%s: must be an absolute path", path ? path : "");
    if (!(*out = strdup(path)))
        return err_set(err, ENOMEM, "out of memory");
    return 0;
}

char *
os_find_program(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/%s", dir, name) < 0)
            continue;
        if (access(cand, X_OK) == 0) {
            free(copy);
            return cand;
        }
        free(cand);
    }
    free(copy);
    return NULL;
}

int
os_run_quiet(char *const *argv, int *status, struct err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return err_errno(err, rc, "run %s", argv[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return 0;
}

const int *
os_stop_signals(size_t *n)
{
    static const int sigs[] = {SIGTERM, SIGINT};
    *n = sizeof(sigs) / sizeof(sigs[0]);
    return sigs;
}

void
os_process_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
}

int
os_open_files_raise(uint64_t want, uint64_t *have)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    *have = rl.rlim_cur;
    if (rl.rlim_cur >= want)
        return 0;
    rlim_t cur = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -EMFILE;
    *have = rl.rlim_cur > cur ? rl.rlim_cur : cur;
    return rl.rlim_cur < want ? -EMFILE : 0;
}

int
os_service_run(int (*run)(void *arg), void (*stop)(void *arg), void *arg, struct err *err)
{
    (void)run;
    (void)stop;
    (void)arg;
    return err_set(err, ENOTSUP, "a Windows service is for Windows; on Linux use systemd");
}

int
os_windows_version(unsigned v[4], struct err *err)
{
    v[0] = v[1] = v[2] = v[3] = 0;
    return err_set(err, ENOTSUP, "windows version: this is Linux");
}

int
os_library_probe(const char *dll, struct err *err)
{
    return err_set(err, ENOTSUP, "%s: a Windows library; this is Linux", dll);
}

int
os_pidfd_open(long pid)
{
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    return fd < 0 ? -errno : fd;
}
