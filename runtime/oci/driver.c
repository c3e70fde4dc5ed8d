/*
 * The oci driver: containers are OCI bundles run by an OCI runtime binary
 * (runc by default) with berth-init as their first process; processes are
 * spawned by that init through the state directory (proc.c), not by
 * `runc exec`. Per container, under the daemon's private dir for it:
 *
 *   <dir>/bundle/config.json   the runtime spec (spec.c)
 *   <dir>/state/               the init's protocol files and the processes' output
 *   <dir>/init.log             the init's (and the runtime's create) stdout/stderr
 *
 * The state directory is never mounted in the container, where any
 * process could write it (and fill the host's disk, past the output cap
 * the init keeps): the init gets it as its fd 3, a detached clone of the
 * directory (open_tree(2)), which no path in the container reaches and
 * whose ".." leads nowhere; the init makes itself non-dumpable, so no
 * process can borrow the fd through /proc/1/fd either. Before the runtime
 * starts, every mount target is made a real directory or file inside the
 * rootfs (rootfs.c), so no symlink of the image leads the runtime's own
 * set-up of /dev to the host.
 *
 * Every operation blocks (a runtime invocation, the disk, the init): pool
 * threads only. The context is read-only after open, so threads share it,
 * but for the set of spawns under way (under its mutex), which tells a
 * process whose spawn a dead daemon left half-done from one being started.
 */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/strv.h"
#include "runtime/driver.h"
#include "runtime/oci/cgroup.h"
#include "runtime/oci/proc.h"
#include "runtime/oci/rootfs.h"
#include "runtime/oci/runc.h"
#include "runtime/oci/spec.h"
#include "runtime/outrec.h"

#define OCI_READY_TIMEOUT_MS 10000
#define OCI_SPAWN_TIMEOUT_MS 10000
#define OCI_KILL_WAIT_MS 2000
/* Runtime calls of a killed daemon get this long to finish at open (runc.c gives its own 60 s). */
#define OCI_STRAY_WAIT_MS 30000

/* A spawn this daemon is carrying out (see oci_proc_status). */
struct oci_spawning {
    char *key; /* "<state dir>/<id>" */
    struct oci_spawning *next;
};

struct oci_ctx {
    struct rt_runc runc;
    bool usable;
    struct err unusable; /* why not, when !usable */
    char *init_path;
    char *cgroup_parent;
    uint64_t max_output_bytes;
    pthread_mutex_t spawning_mu; /* pool threads spawn and read statuses at once */
    struct oci_spawning *spawning;
};

static void
oci_close(void *p)
{
    struct oci_ctx *ctx = p;
    if (!ctx)
        return;
    /* runc makes the parent of the containers' cgroups and removes only
     * theirs, at a delete: without this, every store root a daemon ran on
     * left an empty directory in each hierarchy, and one more below it
     * per container that stopped and was not deleted. Containers that
     * keep running across a restart keep theirs (the kernel refuses). */
    struct err ignored = {0};
    if (ctx->usable && ctx->cgroup_parent &&
        rt_cgroup_parent_remove(ctx->cgroup_parent, &ignored) < 0)
        log_warn("oci runtime: %s", ignored.msg);
    rt_runc_close(&ctx->runc);
    while (ctx->spawning) {
        struct oci_spawning *n = ctx->spawning->next;
        free(ctx->spawning->key);
        free(ctx->spawning);
        ctx->spawning = n;
    }
    pthread_mutex_destroy(&ctx->spawning_mu);
    free(ctx->init_path);
    free(ctx->cgroup_parent);
    free(ctx);
}

/* berth-init beside the running executable (the daemon's install dir or the build dir). */
static char *
default_init_path(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    return fs_path_join(exe, "berth-init");
}

static int
oci_open(const struct rt_config *cfg, void **out, struct err *err)
{
    if (!cfg || !cfg->state_root || cfg->state_root[0] != '/')
        return err_set(err, EINVAL, "oci runtime: state root must be an absolute path");
    struct oci_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return err_set(err, ENOMEM, "oci runtime: out of memory");
    ctx->init_path = cfg->init_path ? strdup(cfg->init_path) : default_init_path();
    ctx->cgroup_parent = strdup(cfg->cgroup_parent ? cfg->cgroup_parent : "berth");
    ctx->max_output_bytes = cfg->max_output_bytes;
    pthread_mutex_init(&ctx->spawning_mu, NULL);
    cleanup_free char *root = fs_path_join(cfg->state_root, "runc");
    if (!ctx->init_path || !ctx->cgroup_parent || !root) {
        oci_close(ctx);
        return err_set(err, ENOMEM, "oci runtime: out of memory");
    }
    /*
     * A missing runtime binary does not stop the daemon: probe() reports
     * it on the health endpoint and each operation fails with it.
     */
    ctx->usable = rt_runc_init(&ctx->runc, cfg->oci_runtime, root, &ctx->unusable) == 0;
    /* What a daemon killed on this root left running finishes first:
     * the caller's clean-up after the crash comes next. */
    struct err ignored = {0};
    if (ctx->usable)
        rt_runc_wait_strays(&ctx->runc, OCI_STRAY_WAIT_MS, &ignored);
    /* A predecessor killed on this root could not remove its empty
     * cgroups at shutdown: this start does (running containers' stay). */
    struct err cgerr = {0};
    if (ctx->usable && rt_cgroup_parent_remove(ctx->cgroup_parent, &cgerr) < 0)
        log_warn("oci runtime: %s", cgerr.msg);
    *out = ctx;
    return 0;
}

static int
check_usable(struct oci_ctx *ctx, struct err *err)
{
    if (ctx->usable)
        return 0;
    err_copy(err, &ctx->unusable);
    return -ctx->unusable.code;
}

static int
oci_probe(void *p, struct err *err)
{
    struct oci_ctx *ctx = p;
    int ret = check_usable(ctx, err);
    if (ret < 0)
        return ret;
    struct stat st;
    if (stat(ctx->init_path, &st) < 0 || !S_ISREG(st.st_mode) || access(ctx->init_path, X_OK))
        return err_set(err, ERR_UNAVAILABLE, "container init %s: missing or not executable",
                       ctx->init_path);
    cleanup_free char *version = NULL;
    ret = rt_runc_version(&ctx->runc, &version, err);
    if (ret < 0) {
        err->code = ERR_UNAVAILABLE;
        return -ERR_UNAVAILABLE;
    }
    return 0;
}

/* Appends the end of init.log (what the init said before dying) to err. */
static void
add_init_log(struct err *err, const char *dir)
{
    cleanup_free char *path = fs_path_join(dir, "init.log");
    cleanup_free char *text = NULL;
    size_t len = 0;
    struct err ignored = {0};
    if (!path || fs_read_file(path, 1 << 20, &text, &len, &ignored) < 0 || len == 0)
        return;
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    const char *tail = len > 200 ? text + len - 200 : text;
    size_t used = strlen(err->msg);
    if (used + 16 < sizeof(err->msg))
        snprintf(err->msg + used, sizeof(err->msg) - used, " (init: %s)", tail);
}

/*
 * A detached clone of the state directory (a bind mount attached nowhere)
 * for the init: nosuid, nodev and noexec, so nothing the init creates
 * there can be run.
 */
static int
state_tree_open(const char *state, struct err *err)
{
    int fd = open_tree(AT_FDCWD, state, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "open_tree of the state directory %s%s", state,
                         errno == ENOSYS ? " (needs Linux 5.2 or later)" : "");
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
    if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 && errno != ENOSYS) {
        int e = errno;
        close(fd);
        return err_errno(err, e, "restrict the state directory %s", state);
    }
    return fd;
}

/* Writes the runtime spec with every mount target made safe in the rootfs first. */
static int
bundle_write(struct oci_ctx *ctx, const struct rt_container_spec *spec, const char *bundle,
             const char *cgpath, struct err *err)
{
    int ret = rt_oci_spec_validate(spec, err);
    if (ret < 0)
        return ret;
    struct rt_mount *mounts = NULL;
    ret = rt_oci_rootfs_prepare(spec, &mounts, err);
    if (ret < 0)
        return ret;
    struct rt_container_spec resolved = *spec;
    resolved.mounts = mounts;
    ret = rt_oci_spec_write(bundle, &resolved, ctx->init_path, cgpath, err);
    rt_oci_mounts_free(mounts, spec->nmounts);
    return ret;
}

static double
ms_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static int
oci_container_create(void *p, const struct rt_container_spec *spec, struct err *err)
{
    struct oci_ctx *ctx = p;
    int ret = check_usable(ctx, err);
    if (ret < 0)
        return ret;
    if (!rt_handle_valid(spec->handle))
        return err_set(err, EINVAL, "container handle %s: invalid (1-128 of [A-Za-z0-9_.-])",
                       spec->handle ? spec->handle : "(null)");
    if (!spec->dir || spec->dir[0] != '/')
        return err_set(err, EINVAL, "container %s: directory must be absolute", spec->handle);
    cleanup_free char *state = rt_proc_state_dir(spec->dir);
    cleanup_free char *bundle = fs_path_join(spec->dir, "bundle");
    cleanup_free char *log = fs_path_join(spec->dir, "init.log");
    cleanup_free char *cgpath = NULL;
    if (!spec->cgroups_path && asprintf(&cgpath, "%s/%s", ctx->cgroup_parent, spec->handle) < 0)
        cgpath = NULL;
    if (!state || !bundle || !log || (!spec->cgroups_path && !cgpath))
        return err_set(err, ENOMEM, "create container %s: out of memory", spec->handle);

    struct timespec t0, t1, t2, t3;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ret = rt_proc_state_init(state, err);
    if (ret == 0)
        ret = fs_mkdir_p(bundle, 0700, err);
    if (ret == 0)
        ret =
            bundle_write(ctx, spec, bundle, spec->cgroups_path ? spec->cgroups_path : cgpath, err);
    cleanup_close int tree = ret == 0 ? state_tree_open(state, err) : -1;
    if (ret == 0 && tree < 0)
        ret = tree;
    if (ret < 0)
        return err_wrap(err, "create container %s", spec->handle);

    /* One invocation instead of create + start: each costs a runtime start.
     * (The network issue will need the gap between the two back.) */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ret = rt_runc_run_detached(&ctx->runc, spec->handle, bundle, log, tree, err);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    if (ret == 0) {
        ret = rt_proc_wait_ready(state, OCI_READY_TIMEOUT_MS, err);
        if (ret < 0)
            add_init_log(err, spec->dir);
    }
    clock_gettime(CLOCK_MONOTONIC, &t3);
    log_debug("create %s: bundle %.1f ms, runc run %.1f ms, init ready %.1f ms", spec->handle,
              ms_between(&t0, &t1), ms_between(&t1, &t2), ms_between(&t2, &t3));
    if (ret < 0) {
        /* Leave nothing half-made behind: no runtime state, no cgroup. */
        struct err ignored = {0};
        rt_runc_delete(&ctx->runc, spec->handle, true, &ignored);
        return ret;
    }
    return 0;
}

/*
 * Field 22 of /proc/PID/stat (start time in clock ticks), or 0; *state, when
 * given, gets field 3 (R, S, Z, X, ...).
 */
static unsigned long long
proc_stat_read(pid_t pid, char *state)
{
    char path[64], buf[1024];
    if (state)
        *state = '?';
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    if (!p)
        return 0;
    if (state && p[1] == ' ' && p[2])
        *state = p[2];
    unsigned long long v = 0;
    /* after ") ": field 3 is the state; the start time is field 22 */
    for (int field = 2; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (p)
        v = strtoull(p + 1, NULL, 10);
    return v;
}

static unsigned long long
proc_start_time(pid_t pid)
{
    return proc_stat_read(pid, NULL);
}

static int
oci_container_delete(void *p, const char *handle, const char *dir, struct err *err)
{
    struct oci_ctx *ctx = p;
    int ret = check_usable(ctx, err);
    if (ret < 0)
        return ret;
    if (!rt_handle_valid(handle))
        return err_set(err, EINVAL, "container handle %s: invalid", handle ? handle : "(null)");
    /*
     * `runc delete --force` of a running container sleeps 100 ms after its
     * SIGKILL before it looks again. Kill the init first (runc kill checks
     * that the PID is still the init's) and wait for it on a pidfd, so the
     * delete finds it stopped; --force stays the fallback.
     */
    pid_t pid = 0;
    unsigned long long start = 0;
    struct err ignored = {0};
    ret = rt_runc_init_process(&ctx->runc, handle, &pid, &start, &ignored);
    if (ret == -ENOENT) /* or a removal that a killed daemon left half done */
        return rt_runc_stateless_drop(&ctx->runc, handle, err);
    if (ret == 0 && pid > 0) {
        /* The pidfd pins the process; its start time proves it is still the
         * init and not a reused PID. Then no runtime call is needed to kill. */
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        bool killed = false, exited = false;
        if (pfd >= 0 && proc_start_time(pid) == start)
            killed = syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0;
        if (killed) {
            struct pollfd pp = {.fd = pfd, .events = POLLIN};
            int n;
            while ((n = poll(&pp, 1, OCI_KILL_WAIT_MS)) < 0 && errno == EINTR)
                ;
            exited = n > 0;
        }
        if (pfd >= 0)
            close(pfd);
        /* The init has exited, and with it every process of its PID
         * namespace: what is left is what `runc delete` would remove, a
         * runtime start (a Go binary) later. */
        if (exited && rt_runc_destroy_stopped(&ctx->runc, handle, &ignored) == 0)
            return 0;
        if (exited)
            log_debug("container %s: %s; running the runtime's delete", handle, ignored.msg);
        if ((killed || pfd < 0) && rt_runc_delete(&ctx->runc, handle, false, &ignored) == 0)
            return 0;
    }
    ret = rt_runc_delete(&ctx->runc, handle, true, err);
    if (ret == -ENOENT)
        return rt_runc_stateless_drop(&ctx->runc, handle, err);
    return ret;
}

static int
oci_container_state(void *p, const char *handle, struct rt_container_state *out, struct err *err)
{
    struct oci_ctx *ctx = p;
    int ret = check_usable(ctx, err);
    if (ret < 0)
        return ret;
    if (!rt_handle_valid(handle))
        return err_set(err, EINVAL, "container handle %s: invalid", handle ? handle : "(null)");
    /*
     * What `runc state` answers, without starting the runtime (a Go binary:
     * a few ms on a quiet machine, tens under load, once per create): its
     * state.json names the init and its start time, and the init is the
     * container. As runc decides: gone, a zombie or another process under
     * a reused PID means stopped; the exec fifo still there means created
     * (berth never pauses a container). Anything unexpected asks runc.
     */
    pid_t pid = 0;
    unsigned long long start = 0;
    struct err ignored = {0};
    if (rt_runc_init_process(&ctx->runc, handle, &pid, &start, &ignored) == 0 && pid > 0) {
        char state = '?';
        unsigned long long now = proc_stat_read(pid, &state);
        memset(out, 0, sizeof(*out));
        if (now != start || state == 'Z' || state == 'X' || state == 'x') {
            out->status = RT_CONTAINER_STOPPED;
            return 0;
        }
        cleanup_free char *fifo = NULL;
        struct stat sb;
        if (asprintf(&fifo, "%s/%s/exec.fifo", ctx->runc.root, handle) >= 0) {
            out->status = lstat(fifo, &sb) == 0 ? RT_CONTAINER_CREATED : RT_CONTAINER_RUNNING;
            out->init_pid = pid;
            return 0;
        }
    }
    return rt_runc_state(&ctx->runc, handle, out, err);
}

/* The OOM kill count of the container's cgroup (its init's). */
static int
oom_kills(void *p, const char *handle, uint64_t *out)
{
    struct rt_container_state st;
    struct err ignored = {0};
    if (oci_container_state(p, handle, &st, &ignored) < 0 || st.init_pid <= 0)
        return -ENOENT;
    return rt_cgroup_oom_kills(st.init_pid, out, &ignored);
}

static int
oci_stats(void *p, const char *handle, struct rt_stats *out, struct err *err)
{
    struct rt_container_state st;
    int ret = oci_container_state(p, handle, &st, err);
    if (ret < 0)
        return ret;
    if (st.init_pid <= 0)
        return err_set(err, ERR_CONFLICT, "stats of container %s: not running", handle);
    ret = rt_cgroup_stats(st.init_pid, out, err);
    return ret < 0 ? err_wrap(err, "stats of container %s", handle) : 0;
}

/*
 * The spawns under way in this daemon, by state directory and id: a
 * process directory with neither a pid nor an exit record that is not
 * among them was left by a daemon that died before its spawn command
 * reached the init (or by a spawn that gave up), and nothing will ever
 * start it.
 */
static bool
spawning_has(struct oci_ctx *ctx, const char *key)
{
    pthread_mutex_lock(&ctx->spawning_mu);
    bool found = false;
    for (struct oci_spawning *s = ctx->spawning; s && !found; s = s->next)
        found = strcmp(s->key, key) == 0;
    pthread_mutex_unlock(&ctx->spawning_mu);
    return found;
}

static int
spawning_add(struct oci_ctx *ctx, const char *key)
{
    struct oci_spawning *s = calloc(1, sizeof(*s));
    if (!s || !(s->key = strdup(key))) {
        free(s);
        return -ENOMEM;
    }
    pthread_mutex_lock(&ctx->spawning_mu);
    s->next = ctx->spawning;
    ctx->spawning = s;
    pthread_mutex_unlock(&ctx->spawning_mu);
    return 0;
}

static void
spawning_remove(struct oci_ctx *ctx, const char *key)
{
    pthread_mutex_lock(&ctx->spawning_mu);
    for (struct oci_spawning **s = &ctx->spawning; *s; s = &(*s)->next) {
        if (strcmp((*s)->key, key) == 0) {
            struct oci_spawning *dead = *s;
            *s = dead->next;
            free(dead->key);
            free(dead);
            break;
        }
    }
    pthread_mutex_unlock(&ctx->spawning_mu);
}

static char *
spawning_key(const char *state, const char *id)
{
    char *key = NULL;
    return asprintf(&key, "%s/%s", state, id ? id : "") < 0 ? NULL : key;
}

static int
oci_proc_spawn(void *p, const char *handle, const char *dir, const struct rt_proc_spec *spec,
               struct rt_proc_status *out, struct err *err)
{
    struct oci_ctx *ctx = p;
    cleanup_free char *state = rt_proc_state_dir(dir);
    cleanup_free char *key = state ? spawning_key(state, spec->id) : NULL;
    if (!key || spawning_add(ctx, key) < 0)
        return err_set(err, ENOMEM, "spawn in %s: out of memory", handle);
    struct rt_proc_spec s = *spec;
    if (!s.max_output_bytes)
        s.max_output_bytes = ctx->max_output_bytes;
    /* The container's OOM kill count before the start: a kill counted
     * after it, with the process dead of SIGKILL, was the OOM killer's. */
    uint64_t kills = 0;
    bool counted = oom_kills(p, handle, &kills) == 0;
    int ret = rt_proc_spawn(state, &s, OCI_SPAWN_TIMEOUT_MS, out, err);
    spawning_remove(ctx, key);
    if (ret == 0 && counted) {
        char text[32];
        snprintf(text, sizeof(text), "%llu\n", (unsigned long long)kills);
        struct err ignored = {0};
        rt_proc_note_write(state, spec->id, "oom_base", text, &ignored);
    }
    return ret;
}

/*
 * Whether an exited process was the OOM killer's: it died of SIGKILL (or
 * exited 137, as a shell does when its child died so) and its container's
 * cgroup counted more OOM kills than when it started.
 * Decided once, at the first look after the exit, and kept in the
 * process's "oom" note, so a later kill of another process does not
 * change it. A SIGKILL of ours (a signal, a delete) while another process
 * of the same container is OOM-killed is counted too: the cgroup does not
 * say whom it killed. Blocking (disk, /proc).
 */
static void
oom_decide(void *p, const char *handle, const char *state, const char *id,
           struct rt_proc_status *st)
{
    /* 137 without a signal: a shell whose pipeline's last command was
     * killed ("dd | tail" with tail OOM-killed) exits with 128 + 9. */
    if (!st->exited || (st->signal != SIGKILL && st->exit_code != 128 + SIGKILL) || st->oom_killed)
        return;
    char buf[64];
    struct err ignored = {0};
    if (rt_proc_note_read(state, id, "oom", buf, sizeof(buf), &ignored) == 0)
        return; /* decided: "0" */
    if (rt_proc_note_read(state, id, "oom_base", buf, sizeof(buf), &ignored) < 0)
        return; /* started before this daemon counted: unknown */
    uint64_t now = 0;
    if (oom_kills(p, handle, &now) < 0)
        return; /* the container is gone: ask again is pointless, but say nothing */
    st->oom_killed = now > strtoull(buf, NULL, 10);
    rt_proc_note_write(state, id, "oom", st->oom_killed ? "1\n" : "0\n", &ignored);
}

static int
oci_proc_signal(void *p, const char *handle, const char *dir, const char *id, int sig,
                struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "signal in %s: out of memory", handle);
    return rt_proc_signal(state, id, sig, err);
}

static int
oci_proc_status(void *p, const char *handle, const char *dir, const char *id,
                struct rt_proc_status *out, struct err *err)
{
    struct oci_ctx *ctx = p;
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "status in %s: out of memory", handle);
    int ret = rt_proc_status_read(state, id, out, err);
    if (ret == 0)
        oom_decide(p, handle, state, id, out);
    if (ret < 0 || out->started || out->exited)
        return ret;
    /* Never started, and no spawn of ours is under way: it never will be. */
    cleanup_free char *key = spawning_key(state, id);
    if (!key || spawning_has(ctx, key))
        return ret;
    /* The PID record is not synced (runtime/init/init.c): after a power
     * loss a process that did start can land here too. */
    ret = rt_proc_settle(state, id,
                         "not started: its spawn was cut short (the daemon stopped), or the "
                         "machine went down before its start was recorded",
                         err);
    return ret < 0 ? ret : rt_proc_status_read(state, id, out, err);
}

static int
oci_proc_output_open(void *p, const char *handle, const char *dir, const char *id, int which,
                     struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "output in %s: out of memory", handle);
    return rt_proc_output_open(state, id, which ? RT_PROC_STDERR : RT_PROC_STDOUT, err);
}

static int
oci_proc_chunks_open(void *p, const char *handle, const char *dir, const char *id, struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "output in %s: out of memory", handle);
    return rt_proc_chunks_open(state, id, err);
}

static int
oci_proc_stdin_open(void *p, const char *handle, const char *dir, const char *id, struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "stdin in %s: out of memory", handle);
    return rt_proc_stdin_open(state, id, err);
}

static int
oci_proc_stdin_close(void *p, const char *handle, const char *dir, const char *id, struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "stdin in %s: out of memory", handle);
    return rt_proc_stdin_close(state, id, err);
}

static char *
oci_proc_watch_dir(void *p, const char *handle, const char *dir, const char *id)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    return state ? rt_proc_dir(state, id) : NULL;
}

/* The init writes stdout and stderr as it goes, pid then exit, and truncated at the cap. */
static enum rt_proc_change
oci_proc_change(const char *filename)
{
    if (strcmp(filename, "stdout") == 0)
        return RT_PROC_CHANGE_STDOUT;
    if (strcmp(filename, "stderr") == 0)
        return RT_PROC_CHANGE_STDERR;
    if (strcmp(filename, OUTREC_INDEX) == 0)
        return RT_PROC_CHANGE_CHUNKS;
    if (strcmp(filename, "exit") == 0 || strcmp(filename, "pid") == 0 ||
        strcmp(filename, "truncated") == 0)
        return RT_PROC_CHANGE_STATUS;
    return RT_PROC_CHANGE_NONE;
}

static int
oci_proc_list(void *p, const char *handle, const char *dir, char ***ids, struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "processes of %s: out of memory", handle);
    return rt_proc_list(state, ids, err);
}

static int
oci_proc_times(void *p, const char *handle, const char *dir, const char *id,
               struct rt_proc_times *out, struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "process %s in %s: out of memory", id, handle);
    return rt_proc_times(state, id, out, err);
}

static int
oci_proc_remove(void *p, const char *handle, const char *dir, const char *id, struct err *err)
{
    cleanup_free char *state = rt_proc_state_dir(dir);
    if (!state)
        return err_set(err, ENOMEM, "process %s in %s: out of memory", id, handle);
    return rt_proc_remove(state, id, err);
}

/* runc keeps one directory per container below its --root. */
static int
oci_container_list(void *p, char ***handles, struct err *err)
{
    struct oci_ctx *ctx = p;
    char **v = calloc(1, sizeof(char *));
    size_t n = 0;
    if (!v)
        return err_set(err, ENOMEM, "list runtime containers: out of memory");
    /* A runtime that cannot run keeps no containers to list. */
    DIR *dp = ctx->usable && ctx->runc.root ? opendir(ctx->runc.root) : NULL;
    struct dirent *de;
    while (dp && (de = readdir(dp)) != NULL) {
        if (rt_handle_valid(de->d_name) && strv_push(&v, &n, de->d_name) < 0) {
            closedir(dp);
            strv_free(v);
            return err_set(err, ENOMEM, "list runtime containers: out of memory");
        }
    }
    if (dp)
        closedir(dp);
    *handles = v;
    return 0;
}

static const char *const oci_isolation[] = {"process", NULL};

const struct rt_driver rt_oci_driver = {
    .name = "oci",
    .isolation = oci_isolation,
    .open = oci_open,
    .close = oci_close,
    .probe = oci_probe,
    .container_create = oci_container_create,
    .container_delete = oci_container_delete,
    .container_state = oci_container_state,
    .stats = oci_stats,
    .proc_spawn = oci_proc_spawn,
    .proc_signal = oci_proc_signal,
    .proc_status = oci_proc_status,
    .proc_output_open = oci_proc_output_open,
    .proc_chunks_open = oci_proc_chunks_open,
    .proc_stdin_open = oci_proc_stdin_open,
    .proc_stdin_close = oci_proc_stdin_close,
    .proc_watch_dir = oci_proc_watch_dir,
    .proc_change = oci_proc_change,
    .proc_list = oci_proc_list,
    .proc_times = oci_proc_times,
    .proc_remove = oci_proc_remove,
    .container_list = oci_container_list,
};
