/*
 * The cgroups a daemon leaves on the host: runc makes one parent per
 * store root (berth-<12 hex of sha256(root)>) in every hierarchy, v1 and
 * v2, and a cgroup below it per container, and removes only a container's
 * own, at its delete. A container that stopped and was never deleted, or
 * one a crash left half-made, kept an empty cgroup and so the parent, on
 * every root a CI run used. After a daemon's shutdown nothing of its own
 * is left unless a container still runs in it; a start on a root removes
 * what a killed predecessor left empty. And the harness, which removes a
 * test's root, takes a container still running there with it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_containers.h"

/* Every directory named name in any hierarchy, space-separated (static). */
static const char *
cgroup_dirs(const char *name)
{
    return ctr_sh_out("find /sys/fs/cgroup -maxdepth 8 -type d -name '%s' -printf '%%p ' "
                      "2>/dev/null",
                      name);
}

/* Waits until runc says handle's init has ended. */
static bool
wait_stopped(const struct berthd *b, const char *handle, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        if (ctr_sh("runc --root '%s/runtime/runc' state '%s' 2>/dev/null | "
                   "grep -q '\"status\": \"stopped\"'",
                   b->root, handle) == 0)
            return true;
        sleep_ms(20);
    }
    return false;
}

/* A container whose init died (its program ended, or a kill from
 * outside) and that nobody deleted: its empty cgroup, and with it the
 * parent, went nowhere at the daemon's shutdown. */
START_TEST(a_stopped_containers_cgroup_goes_at_the_daemons_shutdown)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    char parent[64];
    harness_cgroup_parent_name(b.root, parent, sizeof(parent));
    ctr_create_raw(&b, "c-stopped");
    ctr_create_raw(&b, "c-deleted");
    ck_assert_msg(cgroup_dirs("c-stopped")[0] != '\0', "no cgroup of c-stopped while it runs");
    ck_assert_int_eq(ctr_sh("runc --root '%s/runtime/runc' kill c-stopped KILL", b.root), 0);
    ck_assert_msg(wait_stopped(&b, "c-stopped", 10000), "c-stopped's init did not end");
    ctr_delete(&b, "c-deleted");
    /* Looked at before the harness's own cleanup of the root. */
    berthd_stop(&b);
    const char *left = cgroup_dirs(parent);
    ck_assert_msg(left[0] == '\0', "left behind after the shutdown: %s", left);
    berthd_cleanup(&b);
}
END_TEST

/* What a daemon killed on a root left: an empty cgroup with no container
 * of that name (a create or delete a crash cut short) goes at the next
 * start on the root, before any request; a running container's stays. */
START_TEST(a_start_removes_the_empty_cgroups_a_killed_predecessor_left)
{
    struct berthd b1 = {0}, b2 = {0};
    ctr_require_runtime();
    berthd_start(&b1, NULL);
    char parent[64];
    harness_cgroup_parent_name(b1.root, parent, sizeof(parent));
    ctr_create_raw(&b1, "c-live");
    berthd_kill(&b1);
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s", cgroup_dirs(parent));
    ck_assert_msg(dirs[0] != '\0', "no %s while c-live runs", parent);
    /* In each hierarchy, as runc leaves them: a child with no process. */
    ck_assert_int_eq(ctr_sh("for d in %s; do mkdir \"$d/c-crash-left\" || exit 1; done", dirs), 0);

    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b1.root);
    berthd_start(&b2, &(struct berthd_opts){.root = root});
    ctr_track(&b2, "c-live");
    const char *stray = cgroup_dirs("c-crash-left");
    ck_assert_msg(stray[0] == '\0', "left by the killed daemon, still there: %s", stray);
    ck_assert_msg(ctr_sh("for d in %s; do [ -d \"$d/c-live\" ] || exit 1; done", dirs) == 0,
                  "the running container lost a cgroup in %s", dirs);
    ctr_delete(&b2, "c-live");
    berthd_stop(&b2);
    const char *left = cgroup_dirs(parent);
    ck_assert_msg(left[0] == '\0', "left behind after the shutdown: %s", left);
    berthd_cleanup(&b2);
    berthd_cleanup(&b1);
}
END_TEST

/* True once pid is gone or a zombie (its parent, init, has not reaped it yet). */
static bool
wait_gone(pid_t pid, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    do {
        char p[64], st[512] = "";
        snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(p, "r");
        if (!f)
            return true;
        bool got = fgets(st, sizeof(st), f) != NULL;
        fclose(f);
        const char *close = got ? strrchr(st, ')') : NULL;
        if (close && close[1] == ' ' && close[2] == 'Z')
            return true;
        sleep_ms(20);
    } while (now_ms() < deadline);
    return false;
}

/* A container keeps running across a stop of berthd by design: a test
 * that ended with one (the Docker suites do) left its berth-init running,
 * its mounts and its cgroups on the host for ever once the harness removed
 * the root, runc's state with it. The harness's cleanup of a root now
 * deletes what runc still knows there first. */
START_TEST(a_container_left_running_goes_with_the_test_root)
{
    struct berthd b = {0};
    ctr_require_runtime();
    berthd_start(&b, NULL);
    char parent[64];
    harness_cgroup_parent_name(b.root, parent, sizeof(parent));
    ctr_create_raw(&b, "c-left");
    pid_t init = (pid_t)atoi(ctr_sh_out("runc --root '%s/runtime/runc' state c-left 2>/dev/null | "
                                        "sed -n 's/^ *\"pid\": *\\([0-9]*\\).*/\\1/p'",
                                        b.root));
    ck_assert_msg(init > 0, "no pid of c-left's init in runc's state");
    berthd_stop(&b);
    ck_assert_msg(!wait_gone(init, 0), "c-left's init %d ended with the daemon", (int)init);
    char dirs[32][PATH_MAX];
    int n = 0;
    harness_cgroup_parent_dirs(b.root, dirs, 32, &n);
    ck_assert_msg(n > 0, "no %s while c-left runs", parent);
    char tmp[PATH_MAX + 2];
    snprintf(tmp, sizeof(tmp), "%s/", b.tmp);

    berthd_cleanup(&b);
    ck_assert_msg(wait_gone(init, 10000), "c-left's init %d still runs after the cleanup",
                  (int)init);
    const char *left = cgroup_dirs(parent);
    ck_assert_msg(left[0] == '\0', "left behind by the cleanup: %s", left);
    const char *mounts =
        ctr_sh_out("cut -d' ' -f5 /proc/self/mountinfo | grep -F '%s' | head -1", tmp);
    ck_assert_msg(mounts[0] == '\0', "a mount left below the removed root: %s", mounts);
}
END_TEST

static Suite *
cgroups_suite(void)
{
    Suite *s = suite_create("api_containers_cgroups");
    TCase *tc = tcase_create("cgroups");
    tcase_set_timeout(tc, 120);
    ctr_add_fixture(tc);
    tcase_add_test(tc, a_stopped_containers_cgroup_goes_at_the_daemons_shutdown);
    tcase_add_test(tc, a_start_removes_the_empty_cgroups_a_killed_predecessor_left);
    tcase_add_test(tc, a_container_left_running_goes_with_the_test_root);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(cgroups_suite());
}
