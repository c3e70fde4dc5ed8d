/*
 * The oci driver's process and runtime records read while they are
 * written, with no runtime and no container: a status read racing the
 * init's pid and exit records, and the removal of a stopped container's
 * runtime state without the runtime. Split from test_runtime_oci, which
 * starts real containers, so that CTest runs the two at once. Each test
 * is bounded by time, not only by rounds, so a busy machine cannot time
 * it out.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "runtime/driver.h"
#include "runtime/oci/proc.h"
#include "runtime/oci/runc.h"
#include "tests/unit/testutil.h"

/* Without the fix a wrong read came within 20 to 50 rounds here; the
 * rounds stop at RACE_SECONDS so a busy machine cannot time the test out
 * (each round is a directory and two files on the disk: 20,000 of them
 * took 11 s to write and over a minute to remove under load). */
#define RACE_ROUNDS 1000
#define FLIP_ROUNDS 20000
#define RACE_SECONDS 3

/*
 * A quick process's pid and exit records come one right after the other
 * (found by the crash campaign: "spawn p76: failed to start", 422, for a
 * process that ran). The init writes pid before exit, so a status read
 * must never see the exit without the pid: here a writer thread plays the
 * init's part over and over while statuses are read.
 */
struct flip {
    char *procs;
    volatile int current; /* the process the writer is on */
    volatile bool stop;
    int rounds;
};

static void *
flip_records(void *arg)
{
    struct flip *f = arg;
    char d[PATH_MAX], p[PATH_MAX], t[PATH_MAX];
    time_t end = time(NULL) + RACE_SECONDS;
    int i = 0;
    for (; i < FLIP_ROUNDS && !f->stop && time(NULL) < end; i++) {
        /* A fresh process each time, records only ever added, as the init does. */
        snprintf(d, sizeof(d), "%s/q%d", f->procs, i);
        mkdir(d, 0700);
        f->current = i;
        snprintf(t, sizeof(t), "%s/.pid.tmp", d);
        snprintf(p, sizeof(p), "%s/pid", d);
        tu_write(t, "42\n", 3);
        rename(t, p);
        snprintf(t, sizeof(t), "%s/.exit.tmp", d);
        snprintf(p, sizeof(p), "%s/exit", d);
        tu_write(t, "code 0\n", 7);
        rename(t, p);
    }
    f->rounds = i;
    f->stop = true;
    return NULL;
}

START_TEST(a_status_never_shows_an_exit_without_the_start_before_it)
{
    char *state = tu_tmpdir("flip");
    struct flip f = {.current = -1};
    f.procs = fs_path_join(state, "procs");
    ck_assert_int_eq(mkdir(f.procs, 0700), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, flip_records, &f), 0);
    long reads = 0, torn = 0;
    while (!f.stop) {
        char id[32];
        snprintf(id, sizeof(id), "q%d", f.current);
        struct rt_proc_status st;
        struct err err = {0};
        if (f.current >= 0 && rt_proc_status_read(state, id, &st, &err) == 0) {
            reads++;
            torn += st.exited && !st.started;
        }
    }
    pthread_join(t, NULL);
    ck_assert_msg(torn == 0, "%ld of %ld reads in %d rounds saw the exit record without the pid",
                  torn, reads, f.rounds);
    ck_assert_int_gt(reads, 0);
    free(f.procs);
    tu_rmtree(state);
    free(state);
}
END_TEST

struct race {
    char *state;
    int current; /* the process directory being written (atomic) */
    int done;    /* atomic */
    int reads;
    int wrong;
    char first_wrong[128];
};

/* As the init writes a record: a temporary file renamed into place. */
static void
race_record(int dfd, const char *name, const char *text)
{
    int fd = openat(dfd, ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ck_assert_int_eq(renameat(dfd, ".tmp", dfd, name), 0);
}

static void *
race_reader(void *arg)
{
    struct race *r = arg;
    while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
        char id[32];
        snprintf(id, sizeof(id), "p%d", __atomic_load_n(&r->current, __ATOMIC_ACQUIRE));
        struct rt_proc_status st;
        struct err err = {0};
        if (rt_proc_status_read(r->state, id, &st, &err) < 0)
            continue;
        __atomic_add_fetch(&r->reads, 1, __ATOMIC_RELAXED);
        if (st.exited && !st.started && __atomic_add_fetch(&r->wrong, 1, __ATOMIC_RELAXED) == 1)
            snprintf(r->first_wrong, sizeof(r->first_wrong), "%s: exit code %d, no pid", id,
                     st.exit_code);
    }
    return NULL;
}

/* The init writes pid right after the exec and exit when it reaps: a
 * status read while a short process starts and ends must never say that
 * it exited without having started (the daemon answers such a spawn 422
 * "failed to start"). Seen under load before the exit record was read
 * first. */
START_TEST(status_read_never_shows_a_started_process_as_never_started)
{
    struct race r = {.state = tu_tmpdir("race")};
    char *procs = fs_path_join(r.state, "procs");
    ck_assert_int_eq(mkdir(procs, 0700), 0);
    int pfd = open(procs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(pfd, 0);
    char id[32] = "p0";
    ck_assert_int_eq(mkdirat(pfd, id, 0700), 0);
    pthread_t readers[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&readers[i], NULL, race_reader, &r), 0);
    time_t end = time(NULL) + RACE_SECONDS;
    int rounds = 0;
    for (int i = 0;
         i < RACE_ROUNDS && time(NULL) < end && !__atomic_load_n(&r.wrong, __ATOMIC_RELAXED);
         i++, rounds++) {
        snprintf(id, sizeof(id), "p%d", i);
        if (i > 0)
            ck_assert_int_eq(mkdirat(pfd, id, 0700), 0);
        __atomic_store_n(&r.current, i, __ATOMIC_RELEASE);
        int dfd = openat(pfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        race_record(dfd, "pid", "4242\n");
        race_record(dfd, "exit", "code 3\n");
        close(dfd);
    }
    __atomic_store_n(&r.done, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(readers[i], NULL);
    ck_assert_msg(r.wrong == 0,
                  "%d of %d reads in %d rounds said exited but never started (first: %s)", r.wrong,
                  r.reads, rounds, r.first_wrong);
    ck_assert_int_gt(r.reads, 0);
    close(pfd);
    free(procs);
    tu_rmtree(r.state);
    free(r.state);
}
END_TEST

/* Writes <root>/<id>/state.json with the given cgroup_paths and hooks. */
static char *
fake_state(const char *root, const char *id, const char *paths, const char *hooks)
{
    char *dir = fs_path_join(root, id);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    char *path = fs_path_join(dir, "state.json");
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "{\"id\":\"%s\",\"init_process_pid\":0,\"cgroup_paths\":%s,"
                     "\"config\":{\"Hooks\":%s},\"intel_rdt_path\":\"\"}",
                     id, paths, hooks);
    tu_write(path, text, (size_t)n);
    free(path);
    return dir;
}

START_TEST(destroy_without_the_runtime_touches_only_the_containers_own_cgroups)
{
    char *root = tu_tmpdir("destroy");
    struct rt_runc rc = {.bin = "/nonexistent", .name = "runc", .root = root};
    struct err err = {0};
    struct stat sb;
    /* Nothing of its own, nothing asked for: the state directory goes. */
    char *plain = fake_state(root, "plain", "{}", "{\"poststop\":null}");
    ck_assert_msg(rt_runc_destroy_stopped(&rc, "plain", &err) == 0, "%s", err.msg);
    ck_assert_int_lt(stat(plain, &sb), 0);
    /* A directory that is not the container's own cgroup is never removed:
     * the runtime's delete is left to judge it. */
    char *elsewhere = fs_path_join(root, "elsewhere");
    ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
    char *victim = fs_path_join(elsewhere, "victim");
    ck_assert_int_eq(mkdir(victim, 0700), 0);
    char paths[512];
    snprintf(paths, sizeof(paths), "{\"memory\":\"%s\"}", victim);
    char *outside = fake_state(root, "victim", paths, "null");
    ck_assert_int_eq(rt_runc_destroy_stopped(&rc, "victim", &err), -ENOTSUP);
    ck_assert_int_eq(stat(victim, &sb), 0);
    ck_assert_int_eq(stat(outside, &sb), 0);
    char *dotdot =
        fake_state(root, "dd", "{\"pids\":\"/sys/fs/cgroup/pids/../../../tmp/dd\"}", "null");
    ck_assert_int_eq(rt_runc_destroy_stopped(&rc, "dd", &err), -ENOTSUP);
    ck_assert_int_eq(stat(dotdot, &sb), 0);
    /* Hooks to run are the runtime's business. */
    char *hooked = fake_state(root, "hooked", "{}", "{\"poststop\":[{\"path\":\"/bin/true\"}]}");
    ck_assert_int_eq(rt_runc_destroy_stopped(&rc, "hooked", &err), -ENOTSUP);
    ck_assert_int_eq(stat(hooked, &sb), 0);
    ck_assert_int_eq(rt_runc_destroy_stopped(&rc, "absent", &err), -ENOENT);
    /* A directory with its state.json is a container: never dropped. */
    ck_assert_int_eq(rt_runc_stateless_drop(&rc, "hooked", &err), 0);
    ck_assert_int_eq(stat(hooked, &sb), 0);
    free(plain);
    free(elsewhere);
    free(victim);
    free(outside);
    free(dotdot);
    free(hooked);
    tu_rmtree(root);
    free(root);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("runtime_oci_records");
    TCase *records = tcase_create("records");
    tcase_set_timeout(records, 120);
    tcase_add_test(records, a_status_never_shows_an_exit_without_the_start_before_it);
    tcase_add_test(records, status_read_never_shows_a_started_process_as_never_started);
    tcase_add_test(records, destroy_without_the_runtime_touches_only_the_containers_own_cgroups);
    suite_add_tcase(s, records);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
