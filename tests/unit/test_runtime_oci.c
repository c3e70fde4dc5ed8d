/*
 * The oci driver against real runc, a busybox rootfs built here and the
 * berth-init from the build directory (beside this executable, or
 * $BERTH_INIT). Needs root and runc; each container started here is
 * registered before it is created and removed by its handle in the
 * teardown (runc delete --force), whether its test passed or not.
 */
#include <check.h>
#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "runtime/driver.h"
#include "runtime/oci/cgroup.h"
#include "runtime/oci/proc.h"
#include "runtime/oci/runc.h"
#include "tests/unit/testutil.h"

static char *base;   /* everything of this run lives below it */
static char *rootfs; /* the busybox image */
static char *runc_root;
static const struct rt_driver *drv;
static void *ctx;
static char shared_handle[64];
static char *shared_dir;

static void
make_rootfs(const char *dir)
{
    ck_assert_int_eq(tu_sh("mkdir -p %s/bin %s/etc %s/tmp %s/root && cp /bin/busybox %s/bin/", dir,
                           dir, dir, dir, dir),
                     0);
    const char *applets[] = {"sh", "cat", "echo", "sleep", "dd",  "true",  "id", "grep",
                             "wc", "ls",  "head", "seq",   "yes", "false", NULL};
    for (size_t i = 0; applets[i]; i++)
        ck_assert_int_eq(tu_sh("ln -s busybox %s/bin/%s", dir, applets[i]), 0);
    char *p = fs_path_join(dir, "etc/passwd");
    const char *pw = "root:x:0:0:root:/root:/bin/sh\n"
                     "imageuser:x:4242:4343:from the image:/tmp:/bin/sh\n";
    tu_write(p, pw, strlen(pw));
    free(p);
    p = fs_path_join(dir, "etc/group");
    const char *gr = "root:x:0:\nimagegroup:x:4343:\n";
    tu_write(p, gr, strlen(gr));
    free(p);
}

/* Records handle in the registry the teardown deletes from. */
static void
register_handle(const char *handle)
{
    char *reg = fs_path_join(base, "handles");
    FILE *f = fopen(reg, "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", handle);
    fclose(f);
    free(reg);
}

/* Creates a container; returns its private dir (caller frees). */
static char *
create(const char *name, const struct rt_limits *limits, char *handle, size_t hlen)
{
    snprintf(handle, hlen, "bt%d-%s", (int)getpid(), name);
    register_handle(handle);
    char *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/containers/%s", base, handle), 0);
    struct err err = {0};
    ck_assert_int_eq(fs_mkdir_p(dir, 0700, &err), 0);
    struct rt_container_spec spec = {
        .handle = handle,
        .dir = dir,
        .rootfs = rootfs,
        .cgroups_path = NULL,
    };
    if (limits)
        spec.limits = *limits;
    int ret = drv->container_create(ctx, &spec, &err);
    ck_assert_msg(ret == 0, "create %s: %s", handle, err.msg);
    return dir;
}

static void
setup(void)
{
    base = tu_tmpdir("rtoci");
    rootfs = fs_path_join(base, "rootfs");
    runc_root = fs_path_join(base, "rt/runc");
    make_rootfs(rootfs);
    struct err err = {0};
    drv = rt_driver_lookup("oci", &err);
    ck_assert_ptr_nonnull(drv);
    char *rt = fs_path_join(base, "rt");
    struct rt_config cfg = {
        .state_root = rt,
        .init_path = getenv("BERTH_INIT"),
        .cgroup_parent = "berth-test",
    };
    ck_assert_int_eq(drv->open(&cfg, &ctx, &err), 0);
    free(rt);
    ck_assert_msg(drv->probe(ctx, &err) == 0, "probe: %s", err.msg);
    shared_dir = create("shared", NULL, shared_handle, sizeof(shared_handle));
}

static void
teardown(void)
{
    char *reg = fs_path_join(base, "handles");
    FILE *f = fopen(reg, "r");
    char line[128];
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        /* Only the handles this run registered, one by one. */
        tu_sh("runc --root %s delete --force %s >/dev/null 2>&1", runc_root, line);
    }
    /* The parent cgroups of this suite, if no other run still has containers in them. */
    tu_sh("find /sys/fs/cgroup -maxdepth 4 -type d -name berth-test -exec rmdir {} + "
          ">/dev/null 2>&1");
    if (f)
        fclose(f);
    free(reg);
    drv->close(ctx);
    tu_rmtree(base);
    free(base);
    free(rootfs);
    free(runc_root);
    free(shared_dir);
}

static char *
state_of(const char *dir)
{
    return rt_proc_state_dir(dir);
}

/* Spawns in the shared (or given) container; asserts it started. */
static void
spawn_in(const char *dir, const char *id, char *const argv[], bool want_stdin, uint32_t uid,
         uint32_t gid)
{
    struct rt_proc_spec spec = {
        .id = id,
        .path = argv[0],
        .argv = argv,
        .has_stdin = want_stdin,
        .uid = uid,
        .gid = gid,
    };
    struct rt_proc_status st;
    struct err err = {0};
    int ret = drv->proc_spawn(ctx, "", dir, &spec, &st, &err);
    ck_assert_msg(ret == 0, "spawn %s: %s", id, err.msg);
    ck_assert(st.started);
    ck_assert_int_gt(st.pid, 1);
}

static struct rt_proc_status
wait_exit(const char *dir, const char *id)
{
    char *state = state_of(dir);
    struct rt_proc_status st;
    struct err err = {0};
    int ret = rt_proc_wait(state, id, 30000, &st, &err);
    ck_assert_msg(ret == 0, "wait %s: %s", id, err.msg);
    free(state);
    return st;
}

static char *
output(const char *dir, const char *id, enum rt_proc_stream which)
{
    char *state = state_of(dir);
    struct err err = {0};
    int fd = rt_proc_output_open(state, id, which, &err);
    ck_assert_msg(fd >= 0, "open output of %s: %s", id, err.msg);
    char *buf = calloc(1, 65536);
    ssize_t n = read(fd, buf, 65535);
    ck_assert_int_ge(n, 0);
    close(fd);
    free(state);
    return buf;
}

START_TEST(spawn_writes_output_files_and_exit_record)
{
    char *argv[] = {"sh", "-c", "echo to-out; echo to-err >&2; exit 3", NULL};
    spawn_in(shared_dir, "echo3", argv, false, 0, 0);
    struct rt_proc_status st = wait_exit(shared_dir, "echo3");
    ck_assert_int_eq(st.exit_code, 3);
    ck_assert_int_eq(st.signal, 0);
    char *out = output(shared_dir, "echo3", RT_PROC_STDOUT);
    char *errs = output(shared_dir, "echo3", RT_PROC_STDERR);
    ck_assert_str_eq(out, "to-out\n");
    ck_assert_str_eq(errs, "to-err\n");
    free(out);
    free(errs);
}
END_TEST

START_TEST(spawn_reports_exec_failure_as_127)
{
    char *argv[] = {"/bin/no-such-program", NULL};
    struct rt_proc_spec spec = {.id = "nope", .path = argv[0], .argv = argv};
    struct rt_proc_status st;
    struct err err = {0};
    ck_assert_int_eq(drv->proc_spawn(ctx, "", shared_dir, &spec, &st, &err), -ENOEXEC);
    ck_assert_msg(strstr(err.msg, "No such file"), "%s", err.msg);
    ck_assert(st.exited);
    ck_assert(!st.started);
    ck_assert_int_eq(st.exit_code, 127);
    char *errs = output(shared_dir, "nope", RT_PROC_STDERR);
    ck_assert_msg(strstr(errs, "/bin/no-such-program"), "%s", errs);
    free(errs);
    /* The same id again is a conflict, not a second run. */
    ck_assert_int_lt(drv->proc_spawn(ctx, "", shared_dir, &spec, &st, &err), 0);
    ck_assert_int_eq(err.code, ERR_CONFLICT);
}
END_TEST

START_TEST(stdin_round_trips_through_the_fifo)
{
    char *argv[] = {"cat", NULL};
    spawn_in(shared_dir, "cat", argv, true, 0, 0);
    char *state = state_of(shared_dir);
    struct err err = {0};
    /* Two writers one after the other: the first closing is no EOF. */
    int fd = rt_proc_stdin_open(state, "cat", &err);
    ck_assert_msg(fd >= 0, "%s", err.msg);
    ck_assert_int_eq(write(fd, "hello ", 6), 6);
    close(fd);
    usleep(50 * 1000);
    struct rt_proc_status st;
    ck_assert_int_eq(rt_proc_status_read(state, "cat", &st, &err), 0);
    ck_assert(!st.exited);
    fd = rt_proc_stdin_open(state, "cat", &err);
    ck_assert_msg(fd >= 0, "%s", err.msg);
    ck_assert_int_eq(write(fd, "world\n", 6), 6);
    close(fd);
    ck_assert_int_eq(rt_proc_stdin_close(state, "cat", &err), 0);
    st = wait_exit(shared_dir, "cat");
    ck_assert_int_eq(st.exit_code, 0);
    char *out = output(shared_dir, "cat", RT_PROC_STDOUT);
    ck_assert_str_eq(out, "hello world\n");
    free(out);
    free(state);
}
END_TEST

START_TEST(sigkill_gives_137)
{
    char *argv[] = {"sleep", "1000", NULL};
    spawn_in(shared_dir, "sleeper", argv, false, 0, 0);
    struct err err = {0};
    ck_assert_int_eq(drv->proc_signal(ctx, "", shared_dir, "sleeper", SIGKILL, &err), 0);
    struct rt_proc_status st = wait_exit(shared_dir, "sleeper");
    ck_assert_int_eq(st.exit_code, 137);
    ck_assert_int_eq(st.signal, SIGKILL);
    /* Signalling an exited process is refused, never sent to whatever has that PID now. */
    ck_assert_int_lt(drv->proc_signal(ctx, "", shared_dir, "sleeper", SIGKILL, &err), 0);
    ck_assert_int_eq(err.code, ERR_CONFLICT);
}
END_TEST

START_TEST(process_runs_as_requested_user_with_image_etc)
{
    char *argv[] = {"id", NULL};
    spawn_in(shared_dir, "id", argv, false, 4242, 4343);
    struct rt_proc_status st = wait_exit(shared_dir, "id");
    ck_assert_int_eq(st.exit_code, 0);
    char *out = output(shared_dir, "id", RT_PROC_STDOUT);
    ck_assert_msg(strstr(out, "uid=4242(imageuser) gid=4343(imagegroup)"), "%s", out);
    free(out);
}
END_TEST

START_TEST(container_has_security_defaults_inside)
{
    char *argv[] = {"sh", "-c",
                    "echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null; echo sysrc=$?;"
                    "grep -E '^(CapEff|Seccomp|NoNewPrivs):' /proc/self/status;"
                    "echo kcore=$(cat /proc/kcore | wc -c); echo pid=$$;"
                    "grep ' /proc/sys ' /proc/self/mountinfo; exit 0",
                    NULL};
    spawn_in(shared_dir, "sec", argv, false, 0, 0);
    struct rt_proc_status st = wait_exit(shared_dir, "sec");
    ck_assert_int_eq(st.exit_code, 0);
    char *out = output(shared_dir, "sec", RT_PROC_STDOUT);
    ck_assert_msg(strstr(out, "sysrc=1\n"), "/proc/sys writable: %s", out);
    ck_assert_msg(strstr(out, " /proc/sys ro,"), "/proc/sys not mounted read-only: %s", out);
    ck_assert_msg(strstr(out, "NoNewPrivs:\t1"), "%s", out);
    ck_assert_msg(strstr(out, "Seccomp:\t2"), "%s", out);
    ck_assert_msg(strstr(out, "kcore=0\n"), "/proc/kcore not masked: %s", out);
    const char *cap = strstr(out, "CapEff:\t");
    ck_assert_ptr_nonnull(cap);
    unsigned long long eff = strtoull(cap + 8, NULL, 16);
    ck_assert_msg(!(eff & (1ull << 21)), "CAP_SYS_ADMIN effective: %llx", eff);
    ck_assert_msg(eff & (1ull << 0), "CAP_CHOWN missing: %llx", eff);
    /* A PID namespace of its own: the init is 1, so a shell is a small number. */
    const char *pid = strstr(out, "pid=");
    ck_assert_ptr_nonnull(pid);
    ck_assert_int_lt(atoi(pid + 4), 1000);
    free(out);
}
END_TEST

START_TEST(init_survives_when_nothing_reads)
{
    /* 20 MiB of output that nobody reads: it lands in the file, no SIGPIPE, no blocking. */
    char *argv[] = {"sh", "-c", "dd if=/dev/zero bs=1048576 count=20 2>/dev/null; echo done >&2",
                    NULL};
    spawn_in(shared_dir, "flood", argv, false, 0, 0);
    struct rt_proc_status st = wait_exit(shared_dir, "flood");
    ck_assert_int_eq(st.exit_code, 0);
    char *state = state_of(shared_dir);
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/procs/flood/stdout", state), 0);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_size, 20 << 20);
    /* Still alive and serving: another process runs afterwards. */
    struct rt_container_state cs;
    struct err err = {0};
    ck_assert_int_eq(drv->container_state(ctx, shared_handle, &cs, &err), 0);
    ck_assert_int_eq(cs.status, RT_CONTAINER_RUNNING);
    char *argv2[] = {"true", NULL};
    spawn_in(shared_dir, "after-flood", argv2, false, 0, 0);
    ck_assert_int_eq(wait_exit(shared_dir, "after-flood").exit_code, 0);
    free(path);
    free(state);
}
END_TEST

/* 3x the cap on stdout and stderr together: the files hold exactly the first cap bytes. */
START_TEST(output_past_the_cap_stops_the_process)
{
    char *argv[] = {"sh", "-c", "seq 1 30000; seq 1 30000 >&2; echo never-reached", NULL};
    struct rt_proc_spec spec = {
        .id = "chatty", .path = argv[0], .argv = argv, .max_output_bytes = 100000};
    struct rt_proc_status st;
    struct err err = {0};
    ck_assert_msg(drv->proc_spawn(ctx, "", shared_dir, &spec, &st, &err) == 0, "%s", err.msg);
    st = wait_exit(shared_dir, "chatty");
    ck_assert_int_eq(st.exit_code, 137);
    ck_assert_int_eq(st.signal, SIGKILL);
    ck_assert(st.output_truncated);
    char *state = state_of(shared_dir);
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/procs/chatty/stdout", state), 0);
    struct stat so, se;
    ck_assert_int_eq(stat(path, &so), 0);
    path[strlen(path) - 3] = 'e';
    path[strlen(path) - 2] = 'r';
    path[strlen(path) - 1] = 'r';
    ck_assert_int_eq(stat(path, &se), 0);
    ck_assert_int_eq(so.st_size + se.st_size, 100000);
    /* What is kept is what the process wrote first, byte for byte; the
     * cap fell in its stdout (169 kB), so stderr got nothing. */
    ck_assert_int_eq(se.st_size, 0);
    ck_assert_int_eq(tu_sh("seq 1 30000 | head -c 100000 | cmp - %s/procs/chatty/stdout", state),
                     0);
    free(path);
    free(state);
    /* Under the cap nothing is cut and nothing is stopped. */
    char *argv2[] = {"sh", "-c", "seq 1 10000; seq 1 10000 >&2", NULL};
    struct rt_proc_spec quiet = {
        .id = "quiet", .path = argv2[0], .argv = argv2, .max_output_bytes = 100000};
    ck_assert_msg(drv->proc_spawn(ctx, "", shared_dir, &quiet, &st, &err) == 0, "%s", err.msg);
    st = wait_exit(shared_dir, "quiet");
    ck_assert_int_eq(st.exit_code, 0);
    ck_assert(!st.output_truncated);
}
END_TEST

START_TEST(stats_read_the_container_cgroup)
{
    char *argv[] = {"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", NULL};
    spawn_in(shared_dir, "busy", argv, false, 0, 0);
    ck_assert_int_eq(wait_exit(shared_dir, "busy").exit_code, 0);
    struct rt_stats stats;
    struct err err = {0};
    ck_assert_msg(drv->stats(ctx, shared_handle, &stats, &err) == 0, "%s", err.msg);
    ck_assert_uint_gt(stats.memory_bytes, 0);
    ck_assert_uint_gt(stats.cpu_ns, 1000000);
}
END_TEST

START_TEST(memory_limit_kills_with_137)
{
    struct rt_limits lim = {.memory_bytes = 64ull << 20};
    char handle[64];
    char *dir = create("mem", &lim, handle, sizeof(handle));
    char *argv[] = {"dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1", NULL};
    spawn_in(dir, "dd", argv, false, 0, 0);
    struct rt_proc_status st = wait_exit(dir, "dd");
    ck_assert_int_eq(st.exit_code, 137);
    /* The init itself survived the OOM kill. */
    char *argv2[] = {"true", NULL};
    spawn_in(dir, "after-oom", argv2, false, 0, 0);
    ck_assert_int_eq(wait_exit(dir, "after-oom").exit_code, 0);
    free(dir);
}
END_TEST

/* Reads a cgroup v1 file of the container's init. */
static char *
cgroup_file(pid_t pid, const char *controller, const char *name)
{
    struct err err = {0};
    char *cg = NULL, *text = NULL;
    ck_assert_msg(rt_cgroup_dir(pid, controller, &cg, &err) == 0, "%s", err.msg);
    char *path = fs_path_join(cg, name);
    ck_assert_msg(fs_read_file(path, 4096, &text, NULL, &err) == 0, "%s", err.msg);
    free(path);
    free(cg);
    return text;
}

START_TEST(pids_and_cpu_limits_apply)
{
    struct rt_limits lim = {.pids = 8, .cpu_shares = 512, .cpu_quota_pct = 150};
    char handle[64];
    char *dir = create("pids", &lim, handle, sizeof(handle));
    struct rt_container_state cs;
    struct err err = {0};
    ck_assert_int_eq(drv->container_state(ctx, handle, &cs, &err), 0);
    char *max = cgroup_file(cs.init_pid, "pids", "pids.max");
    ck_assert_str_eq(max, "8\n");
    /* CPU limits land in the same container's cgroup (this host runs cgroup v1). */
    char *quota = cgroup_file(cs.init_pid, "cpu", "cpu.cfs_quota_us");
    char *period = cgroup_file(cs.init_pid, "cpu", "cpu.cfs_period_us");
    char *shares = cgroup_file(cs.init_pid, "cpu", "cpu.shares");
    ck_assert_str_eq(quota, "150000\n");
    ck_assert_str_eq(period, "100000\n");
    ck_assert_str_eq(shares, "512\n");
    free(quota);
    free(period);
    free(shares);
    char *argv[] = {"sh", "-c",
                    "i=0; while [ $i -lt 20 ]; do sleep 30 & i=$((i+1)); done; echo end", NULL};
    spawn_in(dir, "bomb", argv, false, 0, 0);
    wait_exit(dir, "bomb");
    char *errs = output(dir, "bomb", RT_PROC_STDERR);
    ck_assert_msg(strstr(errs, "fork"), "no fork failure: %s", errs);
    free(errs);
    free(max);
    free(dir);
}
END_TEST

struct spawn_job {
    const char *dir;
    char *word;
    int ret;
    struct err err;
};

static void *
spawn_task(void *arg)
{
    struct spawn_job *job = arg;
    char *argv[] = {"echo", job->word, NULL};
    struct rt_proc_spec spec = {.id = "task", .path = "echo", .argv = argv};
    struct rt_proc_status st;
    job->ret = drv->proc_spawn(ctx, "", job->dir, &spec, &st, &job->err);
    return NULL;
}

START_TEST(containers_keep_same_process_ids_apart)
{
    char h1[64], h2[64];
    char *d1 = create("twin1", NULL, h1, sizeof(h1));
    char *d2 = create("twin2", NULL, h2, sizeof(h2));
    struct spawn_job a = {.dir = d1, .word = "from-one"}, b = {.dir = d2, .word = "from-two"};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, spawn_task, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, spawn_task, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_msg(a.ret == 0, "%s", a.err.msg);
    ck_assert_msg(b.ret == 0, "%s", b.err.msg);
    ck_assert_int_eq(wait_exit(d1, "task").exit_code, 0);
    ck_assert_int_eq(wait_exit(d2, "task").exit_code, 0);
    char *o1 = output(d1, "task", RT_PROC_STDOUT);
    char *o2 = output(d2, "task", RT_PROC_STDOUT);
    ck_assert_str_eq(o1, "from-one\n");
    ck_assert_str_eq(o2, "from-two\n");
    free(o1);
    free(o2);
    free(d1);
    free(d2);
}
END_TEST

START_TEST(delete_leaves_no_runtime_state_or_cgroup)
{
    char handle[64];
    struct rt_limits lim = {.memory_bytes = 128ull << 20};
    char *dir = create("del", &lim, handle, sizeof(handle));
    char *argv[] = {"sleep", "1000", NULL};
    spawn_in(dir, "long", argv, false, 0, 0);
    struct rt_container_state cs;
    struct err err = {0};
    ck_assert_int_eq(drv->container_state(ctx, handle, &cs, &err), 0);
    ck_assert_int_gt(cs.init_pid, 0);
    char *memcg = NULL;
    ck_assert_msg(rt_cgroup_dir(cs.init_pid, "memory", &memcg, &err) == 0, "%s", err.msg);
    ck_assert_msg(strstr(memcg, handle), "cgroup %s is not the container's", memcg);
    struct stat sb;
    ck_assert_int_eq(stat(memcg, &sb), 0);
    char *rstate = fs_path_join(runc_root, handle);
    ck_assert_int_eq(stat(rstate, &sb), 0);

    ck_assert_msg(drv->container_delete(ctx, handle, dir, &err) == 0, "%s", err.msg);
    ck_assert_int_lt(stat(rstate, &sb), 0);
    ck_assert_int_lt(stat(memcg, &sb), 0);
    ck_assert_int_eq(drv->container_state(ctx, handle, &cs, &err), -ENOENT);
    /* Deleting again is fine; the init is gone, so spawning is refused. */
    ck_assert_int_eq(drv->container_delete(ctx, handle, dir, &err), 0);
    char *argv2[] = {"true", NULL};
    struct rt_proc_spec spec = {.id = "late", .path = "true", .argv = argv2};
    struct rt_proc_status st;
    ck_assert_int_lt(drv->proc_spawn(ctx, "", dir, &spec, &st, &err), 0);
    ck_assert_int_eq(err.code, ERR_UNAVAILABLE);
    /* The refused spawn left nothing: the same id fails the same way, not
     * as "exists", and no directory of it is left behind. */
    ck_assert_int_lt(drv->proc_spawn(ctx, "", dir, &spec, &st, &err), 0);
    ck_assert_msg(err.code == ERR_UNAVAILABLE, "second spawn: %s", err.msg);
    char *state = state_of(dir);
    char *late = fs_path_join(state, "procs/late");
    ck_assert_int_lt(stat(late, &sb), 0);
    free(late);
    free(state);
    free(rstate);
    free(memcg);
    free(dir);
}
END_TEST

struct niced_run {
    char handle[64];
    char *dir;
    char *out;
};

static void *
niced_create_and_run(void *arg)
{
    struct niced_run *n = arg;
    /* As a pool thread of the daemon runs (daemon/job.c). */
    ck_assert_int_eq(setpriority(PRIO_PROCESS, (id_t)gettid(), 10), 0);
    n->dir = create("niced", NULL, n->handle, sizeof(n->handle));
    char *argv[] = {"sh", "-c",
                    "read a b c d e f g h i j k l m n o p q r s rest </proc/self/stat; echo $s",
                    NULL};
    spawn_in(n->dir, "nice", argv, false, 0, 0);
    wait_exit(n->dir, "nice");
    n->out = output(n->dir, "nice", RT_PROC_STDOUT);
    return NULL;
}

START_TEST(a_container_runs_at_the_daemons_priority_not_its_calling_threads)
{
    struct niced_run n = {0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, niced_create_and_run, &n), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    errno = 0;
    int daemon_nice = getpriority(PRIO_PROCESS, (id_t)getpid());
    ck_assert_int_eq(errno, 0);
    char want[16];
    snprintf(want, sizeof(want), "%d\n", daemon_nice);
    ck_assert_msg(strcmp(n.out, want) == 0, "a process of the container runs at nice %s, not %d",
                  n.out, daemon_nice);
    struct err err = {0};
    ck_assert_msg(drv->container_delete(ctx, n.handle, n.dir, &err) == 0, "%s", err.msg);
    free(n.out);
    free(n.dir);
}
END_TEST

/* What a daemon killed in the middle of its own removal of the runtime's
 * state leaves: the directory without state.json. */
START_TEST(delete_finishes_a_runtime_state_left_without_its_state_json)
{
    char *dir = fs_path_join(runc_root, "half-gone");
    ck_assert_int_eq(mkdir(dir, 0711), 0);
    char *fifo = fs_path_join(dir, "exec.fifo");
    tu_write(fifo, "", 0);
    struct err err = {0};
    struct stat sb;
    char *cdir = fs_path_join(runc_root, "../half-gone-dir");
    ck_assert_msg(drv->container_delete(ctx, "half-gone", cdir, &err) == 0, "%s", err.msg);
    ck_assert_msg(stat(dir, &sb) < 0 && errno == ENOENT, "%s is still there", dir);
    free(cdir);
    free(fifo);
    free(dir);
}
END_TEST

START_TEST(container_joins_the_given_network_namespace_with_its_etc_files)
{
    /* A namespace made outside the runtime, with an interface of its own,
     * as the network service makes one (bound at a file). */
    char handle[64];
    snprintf(handle, sizeof(handle), "bt%d-netns", (int)getpid());
    register_handle(handle);
    char *dir = NULL, *netns = NULL, *hosts = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/containers/%s", base, handle), 0);
    ck_assert_int_ge(asprintf(&netns, "%s/netns-%s", base, handle), 0);
    ck_assert_int_ge(asprintf(&hosts, "%s/hosts", dir), 0);
    struct err err = {0};
    ck_assert_int_eq(fs_mkdir_p(dir, 0700, &err), 0);
    ck_assert_int_eq(tu_sh("touch %s && unshare --net=%s sh -c 'ip link set lo up && "
                           "ip link add btnsv0 type veth peer name btnsv1'",
                           netns, netns),
                     0);
    const char *text = "10.88.0.9\tnetns-test\n";
    tu_write(hosts, text, strlen(text));
    struct rt_mount m = {.source = hosts, .target = "/etc/hosts", .readonly = true};
    struct rt_container_spec spec = {.handle = handle,
                                     .dir = dir,
                                     .rootfs = rootfs,
                                     .mounts = &m,
                                     .nmounts = 1,
                                     .netns_path = netns};
    ck_assert_msg(drv->container_create(ctx, &spec, &err) == 0, "create: %s", err.msg);
    char *argv[] = {"cat", "/proc/net/dev", "/etc/hosts", NULL};
    spawn_in(dir, "look", argv, false, 0, 0);
    struct rt_proc_status st = wait_exit(dir, "look");
    ck_assert_int_eq(st.exit_code, 0);
    char *out = output(dir, "look", RT_PROC_STDOUT);
    ck_assert_msg(strstr(out, "btnsv0:") && strstr(out, "10.88.0.9\tnetns-test"), "%s", out);
    free(out);
    char *argv2[] = {"sh", "-c", "echo x >> /etc/hosts", NULL};
    spawn_in(dir, "write", argv2, false, 0, 0);
    st = wait_exit(dir, "write");
    ck_assert_int_ne(st.exit_code, 0);
    ck_assert_msg(drv->container_delete(ctx, handle, dir, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(tu_sh("umount %s && rm %s", netns, netns), 0);
    free(hosts);
    free(netns);
    free(dir);
}
END_TEST

/*
 * A daemon killed after making a spawn's directory and before its spec
 * was written (found by the crash campaign after the spec was briefly
 * required: "p107: still running after the timeout") left a process that
 * nothing will start: it reads as not started too.
 */
START_TEST(a_spawn_cut_before_its_spec_reads_as_not_started)
{
    char *state = state_of(shared_dir);
    ck_assert_int_eq(tu_sh("mkdir %s/procs/nospec", state), 0);
    struct rt_proc_status st;
    struct err err = {0};
    ck_assert_msg(drv->proc_status(ctx, "", shared_dir, "nospec", &st, &err) == 0, "%s", err.msg);
    ck_assert_msg(st.exited && !st.started, "a spawn without its spec reads as running");
    ck_assert_int_eq(st.exit_code, 127);
    free(state);
}
END_TEST

/*
 * Removing an exited process's record while its status is read over and
 * over: the removal renames the directory away first, so no read settles
 * it half-removed and writes into it ("Directory not empty").
 */
static void *
status_hammer(void *arg)
{
    volatile bool *stop = arg;
    while (!*stop) {
        struct rt_proc_status st;
        struct err err = {0};
        drv->proc_status(ctx, "", shared_dir, "removed", &st, &err);
    }
    return NULL;
}

START_TEST(a_process_record_removed_while_its_status_is_read_goes_whole)
{
    volatile bool stop = false;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, status_hammer, (void *)&stop), 0);
    for (int i = 0; i < 30; i++) {
        char *argv[] = {"sh", "-c", "echo out; echo err >&2", NULL};
        spawn_in(shared_dir, "removed", argv, false, 0, 0);
        ck_assert_int_eq(wait_exit(shared_dir, "removed").exit_code, 0);
        struct err err = {0};
        int rc = drv->proc_remove(ctx, "", shared_dir, "removed", &err);
        if (rc < 0) {
            stop = true;
            pthread_join(t, NULL);
            ck_abort_msg("round %d: %s", i, err.msg);
        }
    }
    stop = true;
    pthread_join(t, NULL);
}
END_TEST

/*
 * A daemon killed between writing a spawn's spec and sending "spawn" to
 * the init (found by the crash campaign) left a process directory that
 * nothing will ever start: it must read as never started (exit 127 with
 * the reason), not as running forever, and a spawn command that comes
 * late must not start it.
 */
START_TEST(a_spawn_cut_before_its_command_reads_as_not_started)
{
    char *state = state_of(shared_dir);
    const char *spec = "path sh\narg sh\narg -c\narg echo ran\ndir /\nuid 0\ngid 0\nstdin 0\n";
    ck_assert_int_eq(
        tu_sh("mkdir %s/procs/cut && printf '%%s' '%s' > %s/procs/cut/spec", state, spec, state),
        0);
    struct rt_proc_status st;
    struct err err = {0};
    ck_assert_msg(drv->proc_status(ctx, "", shared_dir, "cut", &st, &err) == 0, "%s", err.msg);
    ck_assert_msg(st.exited && !st.started, "a spawn that was never sent reads as running");
    ck_assert_int_eq(st.exit_code, 127);
    ck_assert_msg(strstr(st.error, "not started"), "error: %s", st.error);
    char *errs = output(shared_dir, "cut", RT_PROC_STDERR);
    ck_assert_msg(strstr(errs, "not started"), "stderr: %s", errs);
    free(errs);
    /* The command, sent late, is ignored: the process never runs. */
    ck_assert_int_eq(tu_sh("echo 'spawn cut' > %s/ctl", state), 0);
    char *argv[] = {"true", NULL};
    spawn_in(shared_dir, "after-cut", argv, false, 0, 0); /* the init took the command before */
    ck_assert_int_eq(wait_exit(shared_dir, "after-cut").exit_code, 0);
    struct stat sb;
    char *pid = fs_path_join(state, "procs/cut/pid");
    char *out = fs_path_join(state, "procs/cut/stdout");
    ck_assert_msg(stat(pid, &sb) < 0 && stat(out, &sb) < 0, "the late spawn ran it");
    free(pid);
    free(out);
    ck_assert_int_eq(drv->proc_status(ctx, "", shared_dir, "cut", &st, &err), 0);
    ck_assert_int_eq(st.exit_code, 127);
    free(state);
}
END_TEST

/* A spawn under way is not taken for a cut one: statuses read while it
 * starts never settle it. */
static void *
status_reader(void *arg)
{
    volatile bool *stop = arg;
    while (!*stop) {
        struct rt_proc_status st;
        struct err err = {0};
        if (drv->proc_status(ctx, "", shared_dir, "racing", &st, &err) == 0 && st.exited &&
            st.exit_code == 127)
            return (void *)1;
    }
    return NULL;
}

START_TEST(statuses_read_during_a_spawn_do_not_settle_it)
{
    volatile bool stop = false;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, status_reader, (void *)&stop), 0);
    char *argv[] = {"sh", "-c", "exit 4", NULL};
    spawn_in(shared_dir, "racing", argv, false, 0, 0);
    stop = true;
    void *settled = NULL;
    pthread_join(t, &settled);
    ck_assert_msg(!settled, "a status read settled a spawn under way");
    ck_assert_int_eq(wait_exit(shared_dir, "racing").exit_code, 4);
}
END_TEST

/*
 * A daemon killed while `runc run` ran leaves that call running; the next
 * daemon's clean-up must come after it (found by the crash campaign: the
 * undo of the interrupted create ran first, and the container the stray
 * call then finished creating was left mounted and running, unlisted).
 * So open waits for runtime calls on its state root, and only those.
 */
static double
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

START_TEST(open_waits_for_runtime_calls_a_killed_daemon_left_on_its_root)
{
    char *rt = fs_path_join(base, "stray-rt");
    char *other = fs_path_join(base, "other-rt");
    ck_assert_int_eq(tu_sh("mkdir -p %s/runc %s/runc && printf '#!/bin/sh\\nsleep \"$1\"\\n' > "
                           "%s/fake && chmod +x %s/fake",
                           rt, other, base, base),
                     0);
    char *fake = fs_path_join(base, "fake");
    char *root = fs_path_join(rt, "runc");
    char *other_root = fs_path_join(other, "runc");
    /* A call on this root (1.2 s), and one on another root that must not be waited for. */
    pid_t mine = fork();
    if (mine == 0) {
        execl(fake, fake, "1.2", "--root", root, "run", "--detach", "h", (char *)NULL);
        _exit(127);
    }
    pid_t theirs = fork();
    if (theirs == 0) {
        execl(fake, fake, "30", "--root", other_root, "run", "h", (char *)NULL);
        _exit(127);
    }
    usleep(200 * 1000);
    struct rt_config cfg = {.state_root = rt, .cgroup_parent = "berth-test"};
    void *c2 = NULL;
    struct err err = {0};
    double t0 = mono_ms();
    ck_assert_int_eq(drv->open(&cfg, &c2, &err), 0);
    double took = mono_ms() - t0;
    int st;
    bool mine_done = waitpid(mine, &st, WNOHANG) == mine;
    bool theirs_done = waitpid(theirs, &st, WNOHANG) == theirs;
    kill(theirs, SIGKILL);
    kill(mine, SIGKILL);
    waitpid(theirs, &st, 0);
    waitpid(mine, &st, 0);
    ck_assert_msg(mine_done,
                  "open returned (after %.0f ms) while a runtime call on its root still ran", took);
    ck_assert_msg(took > 500, "open took %.0f ms", took);
    ck_assert_msg(took < 10000 && !theirs_done,
                  "open waited for (or killed) a call on another root (%.0f ms)", took);
    drv->close(c2);
    free(rt);
    free(other);
    free(fake);
    free(root);
    free(other_root);
}
END_TEST

START_TEST(create_reports_the_runtime_error)
{
    char handle[64];
    snprintf(handle, sizeof(handle), "bt%d-badroot", (int)getpid());
    register_handle(handle);
    char *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/containers/%s", base, handle), 0);
    struct err err = {0};
    ck_assert_int_eq(fs_mkdir_p(dir, 0700, &err), 0);
    struct rt_container_spec spec = {.handle = handle, .dir = dir, .rootfs = "/nonexistent/rootfs"};
    ck_assert_int_lt(drv->container_create(ctx, &spec, &err), 0);
    /* Caught before the runtime runs, while its mount targets are made. */
    ck_assert_msg(strstr(err.msg, handle) && strstr(err.msg, "/nonexistent/rootfs"), "%s", err.msg);
    char *rstate = fs_path_join(runc_root, handle);
    struct stat sb;
    ck_assert_int_lt(stat(rstate, &sb), 0);
    free(rstate);
    free(dir);
}
END_TEST

int
main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_runtime_oci needs root (runc); skipped\n");
        return 77;
    }
    Suite *s = suite_create("runtime_oci");
    TCase *tc = tcase_create("oci");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, spawn_writes_output_files_and_exit_record);
    tcase_add_test(tc, spawn_reports_exec_failure_as_127);
    tcase_add_test(tc, stdin_round_trips_through_the_fifo);
    tcase_add_test(tc, sigkill_gives_137);
    tcase_add_test(tc, process_runs_as_requested_user_with_image_etc);
    tcase_add_test(tc, container_has_security_defaults_inside);
    tcase_add_test(tc, init_survives_when_nothing_reads);
    tcase_add_test(tc, output_past_the_cap_stops_the_process);
    tcase_add_test(tc, stats_read_the_container_cgroup);
    tcase_add_test(tc, container_joins_the_given_network_namespace_with_its_etc_files);
    tcase_add_test(tc, memory_limit_kills_with_137);
    tcase_add_test(tc, pids_and_cpu_limits_apply);
    tcase_add_test(tc, containers_keep_same_process_ids_apart);
    tcase_add_test(tc, delete_leaves_no_runtime_state_or_cgroup);
    tcase_add_test(tc, delete_finishes_a_runtime_state_left_without_its_state_json);
    tcase_add_test(tc, a_container_runs_at_the_daemons_priority_not_its_calling_threads);
    tcase_add_test(tc, create_reports_the_runtime_error);
    tcase_add_test(tc, a_spawn_cut_before_its_command_reads_as_not_started);
    tcase_add_test(tc, a_spawn_cut_before_its_spec_reads_as_not_started);
    tcase_add_test(tc, a_process_record_removed_while_its_status_is_read_goes_whole);
    tcase_add_test(tc, statuses_read_during_a_spawn_do_not_settle_it);
    tcase_add_test(tc, open_waits_for_runtime_calls_a_killed_daemon_left_on_its_root);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
