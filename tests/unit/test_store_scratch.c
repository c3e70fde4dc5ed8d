/*
 * Bounded writable layers (store/scratch.c): the plain directory, the
 * loop-mounted ext4 image (needs root and loop devices; skipped, saying
 * so, without them), writes failing at the limit, the release that
 * leaves no mount, loop device or image, and the release of what a
 * crashed daemon left (a record, an image, maybe no mount).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "store/scratch.h"
#include "tests/unit/testutil.h"

#define LIMIT (32ull << 20)

static char *base, *dir, *record, *image;

static void
setup(void)
{
    base = tu_tmpdir("scratch");
    dir = fs_path_join(base, "scratch");
    record = fs_path_join(base, "scratch.disk");
    image = fs_path_join(base, "scratch.img");
}

static void
teardown(void)
{
    tu_sh("umount %s 2>/dev/null", dir);
    tu_rmtree(base);
    free(base);
    free(dir);
    free(record);
    free(image);
}

static bool
can_loop(void)
{
    if (geteuid() != 0 || access("/dev/loop-control", W_OK) != 0 ||
        tu_sh("command -v mkfs.ext4 >/dev/null || test -x /sbin/mkfs.ext4") != 0) {
        fprintf(stderr, "skipped: needs root, /dev/loop-control and mkfs.ext4\n");
        return false;
    }
    return true;
}

static bool
is_mounted(const char *path)
{
    return tu_sh("mountpoint -q %s", path) == 0;
}

/* Fills dir with a file until the write fails; returns the errno and the bytes written. */
static int
fill(const char *d, long long *written)
{
    char *p = fs_path_join(d, "big");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    static char buf[1 << 20];
    *written = 0;
    int e = 0;
    for (int i = 0; i < 200; i++) {
        ssize_t n = write(fd, buf, sizeof(buf));
        if (n < 0) {
            e = errno;
            break;
        }
        *written += n;
    }
    if (e == 0 && fsync(fd) < 0)
        e = errno;
    close(fd);
    free(p);
    return e;
}

START_TEST(without_a_limit_the_layer_is_a_plain_directory)
{
    struct err err = {0};
    enum scratch_kind kind = SCRATCH_LOOP;
    ck_assert_int_eq(scratch_make(dir, 0, record, image, &kind, &err), 0);
    ck_assert_int_eq(kind, SCRATCH_PLAIN);
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert(access(record, F_OK) != 0);
    ck_assert(access(image, F_OK) != 0);
    /* Nothing to release: no record is success. */
    ck_assert_int_eq(scratch_release(record, &err), 0);
}
END_TEST

START_TEST(a_limit_under_the_minimum_is_refused)
{
    struct err err = {0};
    ck_assert_int_eq(scratch_make(dir, SCRATCH_MIN_BYTES - 1, record, image, NULL, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "16777215"), "%s", err.msg);
    ck_assert(access(record, F_OK) != 0);
}
END_TEST

/* Past the largest file of the store's filesystem: the request's fault (400), not 413 or 500. */
START_TEST(a_limit_larger_than_a_file_can_be_is_refused_and_released)
{
    struct err err = {0};
    uint64_t huge = 1ull << 62;
    ck_assert_int_eq(scratch_make(dir, huge, record, image, NULL, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "limits.disk_bytes 4611686018427387904"), "%s", err.msg);
    ck_assert_msg(scratch_release(record, &err) == 0, "%s", err.msg);
    ck_assert(access(image, F_OK) != 0);
    ck_assert(access(record, F_OK) != 0);
}
END_TEST

START_TEST(a_loop_layer_fills_at_its_limit_and_releases_everything)
{
    if (!can_loop())
        return;
    struct err err = {0};
    enum scratch_kind kind = SCRATCH_PLAIN;
    ck_assert_msg(scratch_make(dir, LIMIT, record, image, &kind, &err) == 0, "%s", err.msg);
    if (kind == SCRATCH_QUOTA) {
        fprintf(stderr, "the test directory's filesystem has project quotas: no loop here\n");
        ck_assert_int_eq(scratch_release(record, &err), 0);
        return;
    }
    ck_assert_int_eq(kind, SCRATCH_LOOP);
    ck_assert(is_mounted(dir));
    long long written = 0;
    int e = fill(dir, &written);
    ck_assert_msg(e == ENOSPC, "writing 200 MiB into a 32 MiB layer: %s after %lld bytes",
                  strerror(e), written);
    ck_assert_int_le(written, (long long)LIMIT);
    ck_assert_int_gt(written, (long long)LIMIT * 8 / 10);
    struct stat st;
    ck_assert_int_eq(stat(image, &st), 0);
    ck_assert_int_le((long long)st.st_blocks * 512, (long long)LIMIT);
    /* Busy: a file open in it keeps the unmount from happening. */
    char *inside = fs_path_join(dir, "big");
    int fd = open(inside, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_lt(scratch_release(record, &err), 0);
    ck_assert(is_mounted(dir));
    close(fd);
    free(inside);
    ck_assert_msg(scratch_release(record, &err) == 0, "%s", err.msg);
    ck_assert(!is_mounted(dir));
    ck_assert(access(image, F_OK) != 0);
    ck_assert(access(record, F_OK) != 0);
    ck_assert_msg(tu_sh("losetup -a | grep -q %s", image) != 0, "a loop device still holds %s",
                  image);
    /* Released twice is still success. */
    ck_assert_int_eq(scratch_release(record, &err), 0);
}
END_TEST

START_TEST(what_a_crash_left_is_released)
{
    /* A record and an image, nothing mounted: the crash came before mount(2). */
    struct err err = {0};
    ck_assert_int_eq(fs_mkdir_p(dir, 0700, &err), 0);
    char *text = NULL;
    ck_assert_int_ge(asprintf(&text, "berth-scratch 1\nkind loop\ndir %s\nimage %s\n", dir, image),
                     0);
    tu_write(record, text, strlen(text));
    tu_write(image, "x", 1);
    free(text);
    ck_assert_msg(scratch_release(record, &err) == 0, "%s", err.msg);
    ck_assert(access(image, F_OK) != 0);
    ck_assert(access(record, F_OK) != 0);
    /* A record that is not one is an error, and is kept for a look. */
    tu_write(record, "garbage\n", 8);
    ck_assert_int_eq(scratch_release(record, &err), -EINVAL);
    ck_assert(access(record, F_OK) == 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("store_scratch");
    TCase *tc = tcase_create("scratch");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, without_a_limit_the_layer_is_a_plain_directory);
    tcase_add_test(tc, a_limit_under_the_minimum_is_refused);
    tcase_add_test(tc, a_limit_larger_than_a_file_can_be_is_refused_and_released);
    tcase_add_test(tc, a_loop_layer_fills_at_its_limit_and_releases_everything);
    tcase_add_test(tc, what_a_crash_left_is_released);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
