/*
 * Mount targets made inside a rootfs (runtime/oci/rootfs.c), on a plain
 * temporary directory: missing targets are created, a symlink as the
 * target is replaced, a symlink as a parent is followed inside the rootfs
 * (never to the host), and wrong types are refused with a message naming
 * the target. A second directory beside the rootfs stands for the host
 * and must never change.
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "runtime/oci/rootfs.h"
#include "tests/unit/testutil.h"

static char *base, *root, *host;
static int rootfd = -1;

static void
setup(void)
{
    base = tu_tmpdir("rtrootfs");
    root = fs_path_join(base, "rootfs");
    host = fs_path_join(base, "host");
    ck_assert_int_eq(tu_sh("mkdir -p %s/etc %s/sub && echo host > %s/ptmx", root, host, host), 0);
    rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(rootfd, 0);
}

static void
teardown(void)
{
    close(rootfd);
    tu_rmtree(base);
    free(base);
    free(root);
    free(host);
}

/* The host directory is as setup made it: sub/ and ptmx, nothing else. */
static void
assert_host_untouched(void)
{
    ck_assert_int_eq(tu_sh("test \"$(ls -A %s | tr '\\n' ' ')\" = 'ptmx sub ' && "
                           "test \"$(cat %s/ptmx)\" = host && test -z \"$(ls -A %s/sub)\"",
                           host, host, host),
                     0);
}

static char *
prepare_ok(const char *target, bool dir)
{
    char *resolved = NULL;
    struct err err = {0};
    int ret = rt_oci_target_prepare(rootfd, target, dir, &resolved, &err);
    ck_assert_msg(ret == 0, "prepare %s: %s", target, err.msg);
    return resolved;
}

static void
prepare_refused(const char *target, bool dir, const char *needle)
{
    char *resolved = NULL;
    struct err err = {0};
    int ret = rt_oci_target_prepare(rootfd, target, dir, &resolved, &err);
    ck_assert_msg(ret < 0, "prepare %s: accepted as %s", target, resolved);
    ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, target) && strstr(err.msg, needle), "%s", err.msg);
}

static bool
is_type(const char *rel, mode_t type)
{
    char *p = fs_path_join(root, rel);
    struct stat st;
    bool ok = lstat(p, &st) == 0 && (st.st_mode & S_IFMT) == type;
    free(p);
    return ok;
}

START_TEST(missing_targets_are_created_with_their_parents)
{
    char *r = prepare_ok("/srv/data/in", true);
    ck_assert_str_eq(r, "/srv/data/in");
    ck_assert(is_type("srv/data/in", S_IFDIR));
    free(r);
    r = prepare_ok("/etc/resolv.conf", false);
    ck_assert_str_eq(r, "/etc/resolv.conf");
    ck_assert(is_type("etc/resolv.conf", S_IFREG));
    free(r);
    /* Existing ones of the right type are left as they are. */
    r = prepare_ok("/etc", true);
    free(r);
    r = prepare_ok("/etc/resolv.conf", false);
    free(r);
}
END_TEST

START_TEST(a_symlink_as_the_target_is_replaced)
{
    ck_assert_int_eq(
        tu_sh("ln -s %s %s/dev && ln -s %s/ptmx %s/.berth-init", host, root, host, root), 0);
    char *r = prepare_ok("/dev", true);
    ck_assert_str_eq(r, "/dev");
    ck_assert(is_type("dev", S_IFDIR));
    free(r);
    r = prepare_ok("/.berth-init", false);
    ck_assert(is_type(".berth-init", S_IFREG));
    free(r);
    /* Things made below the new directory land in the rootfs. */
    r = prepare_ok("/dev/pts", true);
    ck_assert(is_type("dev/pts", S_IFDIR));
    free(r);
    assert_host_untouched();
}
END_TEST

START_TEST(a_symlink_as_a_parent_resolves_inside_the_rootfs)
{
    /* Absolute, relative, and climbing far above the rootfs. */
    ck_assert_int_eq(tu_sh("ln -s %s %s/etc2 && ln -s ../../../../../../..%s/sub %s/data && "
                           "mkdir -p %s/usr/lib && ln -s usr/lib %s/lib",
                           host, root, host, root, root, root),
                     0);
    char resolved_host[PATH_MAX];
    snprintf(resolved_host, sizeof(resolved_host), "%s/foo", host);
    char *r = prepare_ok("/etc2/foo", true);
    ck_assert_str_eq(r, resolved_host);
    free(r);
    r = prepare_ok("/data/x", true);
    char want[PATH_MAX];
    snprintf(want, sizeof(want), "%s/sub/x", host);
    ck_assert_str_eq(r, want);
    free(r);
    r = prepare_ok("/lib/modules", true);
    ck_assert_str_eq(r, "/usr/lib/modules");
    ck_assert(is_type("usr/lib/modules", S_IFDIR));
    free(r);
    assert_host_untouched();
    /* What the host path would have held was made inside the rootfs. */
    char inside[PATH_MAX + 16];
    snprintf(inside, sizeof(inside), "%s/foo", host + 1);
    ck_assert(is_type(inside, S_IFDIR));
}
END_TEST

START_TEST(wrong_types_and_loops_are_refused)
{
    ck_assert_int_eq(tu_sh("echo file > %s/opt && ln -s /opt %s/etc3 && mkfifo %s/fifo && "
                           "ln -s loop1 %s/loop2 && ln -s loop2 %s/loop1 && ln -s '' %s/empty "
                           "2>/dev/null; true",
                           root, root, root, root, root, root),
                     0);
    prepare_refused("/opt", true, "regular file");
    prepare_refused("/opt/x", true, "not a directory");
    prepare_refused("/etc3/x", true, "/opt");
    prepare_refused("/etc", false, "is a directory");
    prepare_refused("/fifo", false, "fifo");
    prepare_refused("/loop1/x", true, "too many symlinks");
    assert_host_untouched();
}
END_TEST

START_TEST(targets_that_are_not_paths_below_root_are_refused)
{
    char *r = NULL;
    struct err err = {0};
    ck_assert_int_eq(rt_oci_target_prepare(rootfd, "/", true, &r, &err), -EINVAL);
    ck_assert_int_eq(rt_oci_target_prepare(rootfd, "/a/../b", true, &r, &err), -EINVAL);
    ck_assert_int_eq(rt_oci_target_prepare(rootfd, "relative", true, &r, &err), -EINVAL);
    /* A parent symlink that leads back to the root: the target is then below it. */
    ck_assert_int_eq(tu_sh("ln -s / %s/up", root), 0);
    r = prepare_ok("/up/up/x", true);
    ck_assert_str_eq(r, "/x");
    free(r);
}
END_TEST

/*
 * Past an earlier mount's target the runtime resolves in that mount's
 * content, not in the rootfs walked here: such a walk is refused, also
 * when the image's own symlinks lead it there. Ending on one is fine.
 */
START_TEST(a_walk_past_another_mount_point_is_refused)
{
    ck_assert_int_eq(
        tu_sh("mkdir -p %s/ws && ln -s /ws %s/lnk && ln -s ws/../ws %s/rel", root, root, root), 0);
    const char *const fences[] = {"/dev/pts", "/ws"};
    const char *refused[] = {"/ws/cache", "/lnk/cache", "/lnk/a/b", "/rel/x", NULL};
    for (size_t i = 0; refused[i]; i++) {
        char *r = NULL;
        struct err err = {0};
        int ret = rt_oci_target_prepare_fenced(rootfd, refused[i], true, fences, 2, &r, &err);
        ck_assert_msg(ret < 0, "prepare %s: accepted as %s", refused[i], r);
        ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(err.msg, refused[i]) && strstr(err.msg, "goes through /ws"), "%s",
                      err.msg);
    }
    /* Nothing was made inside the mount point. */
    ck_assert_int_eq(tu_sh("test -z \"$(ls -A %s/ws)\"", root), 0);
    char *r = NULL;
    struct err err = {0};
    ck_assert_int_eq(rt_oci_target_prepare_fenced(rootfd, "/lnk", true, fences, 2, &r, &err), 0);
    ck_assert_str_eq(r, "/lnk");
    free(r);
    ck_assert_int_eq(rt_oci_target_prepare_fenced(rootfd, "/ws2/x", true, fences, 2, &r, &err), 0);
    ck_assert_str_eq(r, "/ws2/x");
    free(r);
    ck_assert_int_lt(rt_oci_target_prepare_fenced(rootfd, "/dev/pts/x", true, fences, 2, &r, &err),
                     0);
    ck_assert_msg(strstr(err.msg, "goes through /dev/pts"), "%s", err.msg);
    assert_host_untouched();
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("runtime_rootfs");
    TCase *tc = tcase_create("rootfs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, missing_targets_are_created_with_their_parents);
    tcase_add_test(tc, a_symlink_as_the_target_is_replaced);
    tcase_add_test(tc, a_symlink_as_a_parent_resolves_inside_the_rootfs);
    tcase_add_test(tc, wrong_types_and_loops_are_refused);
    tcase_add_test(tc, targets_that_are_not_paths_below_root_are_refused);
    tcase_add_test(tc, a_walk_past_another_mount_point_is_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
