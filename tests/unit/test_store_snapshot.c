/*
 * Snapshots: build under tmp-* and rename, single flight per chain ID,
 * unpack slots, clean-up at start, removal.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "store/snapshot.h"
#include "tests/unit/testutil.h"

#define CHAIN_A "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CHAIN_B "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static char *root;

static void
setup(void)
{
    root = tu_tmpdir("snapshot");
}

static void
teardown(void)
{
    tu_rmtree(root);
    free(root);
}

static struct snapshot_store *
store_open(unsigned slots)
{
    struct snapshot_store *s = NULL;
    struct err err = {0};
    ck_assert_msg(snapshot_store_open(root, slots, &s, &err) == 0, "%s", err.msg);
    return s;
}

static int
count_tmp(void)
{
    char *dir = fs_path_join(root, "snapshots");
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, "tmp-", 4) == 0;
    closedir(d);
    free(dir);
    return n;
}

START_TEST(snapshot_commit_renames_into_place)
{
    struct snapshot_store *s = store_open(2);
    struct snapshot_claim *c = NULL;
    struct err err = {0};
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c, &err), SNAPSHOT_CLAIMED);
    ck_assert_ptr_nonnull(c);
    char *f = fs_path_join(snapshot_claim_dir(c), "file");
    tu_write(f, "x", 1);
    free(f);
    /* Half-built: never at its final name. */
    ck_assert(!snapshot_exists(s, CHAIN_A));
    ck_assert_int_eq(count_tmp(), 1);
    ck_assert_msg(snapshot_commit(c, &err) == 0, "%s", err.msg);
    ck_assert(snapshot_exists(s, CHAIN_A));
    ck_assert_int_eq(count_tmp(), 0);
    char *p = snapshot_path(s, CHAIN_A);
    char *want = NULL;
    ck_assert_int_ge(asprintf(&want, "%s/snapshots/%s/fs", root, CHAIN_A + 7), 0);
    ck_assert_str_eq(p, want);
    char *pf = fs_path_join(p, "file");
    struct stat st;
    ck_assert_int_eq(stat(pf, &st), 0);
    /* A second acquire finds it ready. */
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c, &err), SNAPSHOT_EXISTS);
    ck_assert_ptr_null(c);
    ck_assert_ptr_null(snapshot_path(s, "sha256:../../etc"));
    ck_assert_int_eq(snapshot_acquire(s, "sha256:xyz", &c, &err), -EINVAL);
    free(pf), free(want), free(p);
    snapshot_store_free(s);
}
END_TEST

/* <root>/snapshots/<prefix><hex of CHAIN_A>-<pid>-<seq>/stuck for seq 0..n-1. */
static void
leftovers(const char *prefix, unsigned n)
{
    char path[1024];
    for (unsigned seq = 0; seq < n; seq++) {
        snprintf(path, sizeof(path), "%s/snapshots/%s%s-%ld-%u/stuck", root, prefix, CHAIN_A + 7,
                 (long)getpid(), seq);
        tu_write(path, "x", 1);
    }
}

/*
 * A daemon that is pid 1 in its container names its temporaries the same
 * way at every start, and the store now opens past a leftover that will
 * not go: a build and a set-aside pick the next free name instead of
 * failing on it (each test runs in a process of its own, so the names
 * this one picks first are those with sequence 0 and up).
 */
START_TEST(temporaries_of_an_earlier_run_with_the_same_names_are_passed_over)
{
    struct snapshot_store *s = store_open(2);
    struct snapshot_claim *c = NULL;
    struct err err = {0};
    leftovers("tmp-", 4);
    ck_assert_msg(snapshot_acquire(s, CHAIN_A, &c, &err) == SNAPSHOT_CLAIMED, "%s", err.msg);
    ck_assert_msg(snapshot_commit(c, &err) == 0, "%s", err.msg);
    ck_assert(snapshot_exists(s, CHAIN_A));
    leftovers(SNAPSHOT_ASIDE_PREFIX, 4);
    char *dir = fs_path_join(root, "snapshots"), *aside = NULL;
    ck_assert_msg(snapshot_dir_set_aside(dir, CHAIN_A + 7, &aside, &err) == 0, "%s", err.msg);
    ck_assert_ptr_nonnull(aside);
    ck_assert(!snapshot_exists(s, CHAIN_A));
    free(aside);
    free(dir);
    snapshot_store_free(s);
}
END_TEST

struct waiter {
    struct snapshot_store *s;
    const char *chain;
    atomic_int done;
    int result;
    struct snapshot_claim *claim;
    struct err err;
};

static void *
waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->result = snapshot_acquire(w->s, w->chain, &w->claim, &w->err);
    atomic_store(&w->done, 1);
    return NULL;
}

START_TEST(snapshot_acquire_single_flight_waits_for_builder)
{
    struct snapshot_store *s = store_open(4);
    struct snapshot_claim *c = NULL;
    struct err err = {0};
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c, &err), SNAPSHOT_CLAIMED);
    struct waiter w = {.s = s, .chain = CHAIN_A};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    usleep(200 * 1000);
    ck_assert_msg(!atomic_load(&w.done), "the second thread did not wait for the build");
    char *f = fs_path_join(snapshot_claim_dir(c), "built");
    tu_write(f, "1", 1);
    free(f);
    ck_assert_msg(snapshot_commit(c, &err) == 0, "%s", err.msg);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.result, SNAPSHOT_EXISTS);
    ck_assert_ptr_null(w.claim);
    char *p = snapshot_path(s, CHAIN_A);
    char *pf = fs_path_join(p, "built");
    struct stat st;
    ck_assert_int_eq(stat(pf, &st), 0);
    free(pf), free(p);
    snapshot_store_free(s);
}
END_TEST

START_TEST(snapshot_abort_hands_the_build_to_a_waiter)
{
    struct snapshot_store *s = store_open(4);
    struct snapshot_claim *c = NULL;
    struct err err = {0};
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c, &err), SNAPSHOT_CLAIMED);
    struct waiter w = {.s = s, .chain = CHAIN_A};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    usleep(100 * 1000);
    ck_assert(!atomic_load(&w.done));
    snapshot_abort(c);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.result, SNAPSHOT_CLAIMED);
    ck_assert_ptr_nonnull(w.claim);
    ck_assert(!snapshot_exists(s, CHAIN_A));
    ck_assert_int_eq(count_tmp(), 1); /* the waiter's build, the aborted one is gone */
    snapshot_abort(w.claim);
    ck_assert_int_eq(count_tmp(), 0);
    snapshot_store_free(s);
}
END_TEST

START_TEST(snapshot_slots_limit_concurrent_builds)
{
    struct snapshot_store *s = store_open(1);
    struct snapshot_claim *c = NULL;
    struct err err = {0};
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c, &err), SNAPSHOT_CLAIMED);
    struct waiter w = {.s = s, .chain = CHAIN_B};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    usleep(150 * 1000);
    ck_assert_msg(!atomic_load(&w.done), "a second build started with one slot");
    ck_assert_msg(snapshot_commit(c, &err) == 0, "%s", err.msg);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.result, SNAPSHOT_CLAIMED);
    /* All slots taken: a ready snapshot is still returned at once. */
    struct snapshot_claim *c2 = NULL;
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c2, &err), SNAPSHOT_EXISTS);
    snapshot_abort(w.claim);
    snapshot_store_free(s);
}
END_TEST

START_TEST(snapshot_store_clean_removes_tmp_dirs)
{
    char *tmp = NULL, *keep = NULL;
    ck_assert_int_ge(asprintf(&tmp, "%s/snapshots/tmp-x-1-0/fs/deep/file", root), 0);
    ck_assert_int_ge(asprintf(&keep, "%s/snapshots/%s/fs/file", root, CHAIN_A + 7), 0);
    tu_write(tmp, "x", 1);
    tu_write(keep, "x", 1);
    tu_sh("chmod 0500 %s/snapshots/tmp-x-1-0/fs/deep", root);
    struct err err = {0};
    ck_assert_msg(snapshot_store_clean(root, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(count_tmp(), 0);
    struct stat st;
    ck_assert_int_eq(stat(keep, &st), 0);
    struct snapshot_store *s = store_open(1);
    ck_assert(snapshot_exists(s, CHAIN_A));
    snapshot_store_free(s);
    free(tmp), free(keep);
}
END_TEST

START_TEST(snapshot_remove_refuses_while_building)
{
    struct snapshot_store *s = store_open(2);
    struct snapshot_claim *c = NULL;
    struct err err = {0};
    ck_assert_int_eq(snapshot_acquire(s, CHAIN_A, &c, &err), SNAPSHOT_CLAIMED);
    ck_assert_int_eq(snapshot_remove(s, CHAIN_A, &err), -ERR_CONFLICT);
    ck_assert_msg(snapshot_commit(c, &err) == 0, "%s", err.msg);
    ck_assert_msg(snapshot_remove(s, CHAIN_A, &err) == 0, "%s", err.msg);
    ck_assert(!snapshot_exists(s, CHAIN_A));
    ck_assert_int_eq(count_tmp(), 0);
    ck_assert_int_eq(snapshot_remove(s, CHAIN_A, &err), 0);
    snapshot_store_free(s);
}
END_TEST

/* The directory's FS_IOC_GETFLAGS flags, or -1 where it has none. */
static int
dir_flags(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    int flags = 0;
    int r = ioctl(fd, FS_IOC_GETFLAGS, &flags);
    close(fd);
    return r < 0 ? -1 : flags;
}

START_TEST(snapshot_store_marks_its_directory_as_a_top_directory)
{
    /* Only where the test root's filesystem keeps the flag (ext4 does). */
    char *probe = fs_path_join(root, "probe");
    ck_assert_int_eq(mkdir(probe, 0700), 0);
    int flags = dir_flags(probe);
    int fd = open(probe, O_RDONLY | O_DIRECTORY);
    int topdir = flags | FS_TOPDIR_FL;
    bool supported =
        flags >= 0 && ioctl(fd, FS_IOC_SETFLAGS, &topdir) == 0 && (dir_flags(probe) & FS_TOPDIR_FL);
    close(fd);
    free(probe);
    struct snapshot_store *s = store_open(1);
    char *dir = fs_path_join(root, "snapshots");
    if (supported)
        ck_assert_msg(dir_flags(dir) & FS_TOPDIR_FL, "snapshots/ lacks FS_TOPDIR_FL");
    /* A store opened again on a marked directory opens as before. */
    snapshot_store_free(s);
    s = store_open(1);
    snapshot_store_free(s);
    free(dir);
}
END_TEST

static Suite *
snapshot_suite(void)
{
    Suite *s = suite_create("store_snapshot");
    TCase *tc = tcase_create("snapshot");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, snapshot_commit_renames_into_place);
    tcase_add_test(tc, snapshot_acquire_single_flight_waits_for_builder);
    tcase_add_test(tc, snapshot_abort_hands_the_build_to_a_waiter);
    tcase_add_test(tc, snapshot_slots_limit_concurrent_builds);
    tcase_add_test(tc, snapshot_store_clean_removes_tmp_dirs);
    tcase_add_test(tc, temporaries_of_an_earlier_run_with_the_same_names_are_passed_over);
    tcase_add_test(tc, snapshot_remove_refuses_while_building);
    tcase_add_test(tc, snapshot_store_marks_its_directory_as_a_top_directory);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(snapshot_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
