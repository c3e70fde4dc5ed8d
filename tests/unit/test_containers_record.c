/*
 * The container records beside container.json (daemon/containers_record.c):
 * a failed start of the main process, main-start-failure.json, written,
 * read back and cleared, and every file berthd did not write as it is
 * refused at once with a reason (never blocking on a FIFO, never
 * following a symlink).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/containers.h"
#include "testutil.h"

static char *dir;

static void
setup(void)
{
    dir = tu_tmpdir("ctr-record");
}

static void
teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

static void
record_path(char *out, size_t len)
{
    snprintf(out, len, "%s/main-start-failure.json", dir);
}

static void
put_record(const char *content)
{
    char path[4096];
    record_path(path, sizeof(path));
    tu_write(path, content, strlen(content));
}

START_TEST(start_failure_round_trips_and_clear_removes_it)
{
    struct ctr_start_failure f = {.exit_code = 127, .at_ms = 1764806400123};
    snprintf(f.error, sizeof(f.error), "exec: \"nosuchprog\": executable file not found in $PATH");
    struct err err = {0};
    ck_assert_int_eq(ctr_start_failure_write(dir, &f, &err), 0);
    struct ctr_start_failure back;
    ck_assert_int_eq(ctr_start_failure_read(dir, &back, &err), 0);
    ck_assert_int_eq(back.exit_code, 127);
    ck_assert_str_eq(back.error, f.error);
    ck_assert_int_eq(back.at_ms, f.at_ms);
    ck_assert_uint_eq(back.run, 0);
    /* A second failure replaces the first, its run kept. */
    f.run = 3;
    f.exit_code = 126;
    snprintf(f.error, sizeof(f.error), "exec: \"/etc\": permission denied");
    ck_assert_int_eq(ctr_start_failure_write(dir, &f, &err), 0);
    ck_assert_int_eq(ctr_start_failure_read(dir, &back, &err), 0);
    ck_assert_int_eq(back.exit_code, 126);
    ck_assert_str_eq(back.error, f.error);
    ck_assert_uint_eq(back.run, 3);
    ck_assert_int_eq(ctr_start_failure_clear(dir, &err), 0);
    ck_assert_int_eq(ctr_start_failure_read(dir, &back, &err), -ENOENT);
    /* Nothing to clear is no error. */
    ck_assert_int_eq(ctr_start_failure_clear(dir, &err), 0);
}
END_TEST

START_TEST(start_failure_longest_message_with_escapes_round_trips)
{
    struct ctr_start_failure f = {.exit_code = 128, .at_ms = 1};
    /* Every byte escaped in JSON: the largest record berthd writes. */
    memset(f.error, '\x01', sizeof(f.error) - 1);
    f.error[sizeof(f.error) - 1] = '\0';
    f.error[0] = '"';
    struct err err = {0};
    ck_assert_int_eq(ctr_start_failure_write(dir, &f, &err), 0);
    struct ctr_start_failure back;
    ck_assert_msg(ctr_start_failure_read(dir, &back, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(back.error, f.error);
}
END_TEST

START_TEST(start_failure_read_refuses_what_berthd_did_not_write)
{
    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "null",
        "{\"exit_code\":127,\"error\":\"x\"}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"more\":1}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"at_ms\":2}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1} {}",
        "{\"exit_code\":\"127\",\"error\":\"x\",\"at_ms\":1}",
        "{\"exit_code\":127.5,\"error\":\"x\",\"at_ms\":1}",
        "{\"exit_code\":0,\"error\":\"x\",\"at_ms\":1}",
        "{\"exit_code\":255,\"error\":\"x\",\"at_ms\":1}",
        "{\"exit_code\":127,\"error\":\"\",\"at_ms\":1}",
        "{\"exit_code\":127,\"error\":\"a\\u0000b\",\"at_ms\":1}",
        "{\"exit_code\":127,\"error\":7,\"at_ms\":1}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":0}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":-5}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1e400}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":0}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":-1}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":1000001}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":4294967297}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":\"2\"}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":2.5}",
        "{\"exit_code\":127,\"error\":\"x\",\"at_ms\":1,\"run\":null}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put_record(bad[i]);
        struct ctr_start_failure back;
        struct err err = {0};
        int ret = ctr_start_failure_read(dir, &back, &err);
        ck_assert_msg(ret < 0 && ret != -ENOENT, "%s: %d", bad[i], ret);
        ck_assert_msg(strstr(err.msg, "start failure record in ") && strstr(err.msg, dir), "%s: %s",
                      bad[i], err.msg);
    }
    /* A message longer than the longest berthd keeps. */
    char big[ERR_MSG_MAX + 64];
    int n = snprintf(big, sizeof(big), "{\"exit_code\":127,\"at_ms\":1,\"error\":\"");
    memset(big + n, 'x', ERR_MSG_MAX);
    snprintf(big + n + ERR_MSG_MAX, sizeof(big) - (size_t)n - ERR_MSG_MAX, "\"}");
    put_record(big);
    struct ctr_start_failure back;
    struct err err = {0};
    ck_assert_int_eq(ctr_start_failure_read(dir, &back, &err), -EINVAL);
}
END_TEST

START_TEST(start_failure_read_bounds_the_file)
{
    size_t len = 1 << 20;
    char *text = malloc(len + 1);
    ck_assert_ptr_nonnull(text);
    memset(text, ' ', len);
    text[len] = '\0';
    put_record(text);
    free(text);
    struct ctr_start_failure back;
    struct err err = {0};
    ck_assert_int_eq(ctr_start_failure_read(dir, &back, &err), -EFBIG);
    ck_assert_msg(strstr(err.msg, "over the limit"), "%s", err.msg);
}
END_TEST

START_TEST(start_failure_read_never_opens_a_fifo_or_follows_a_symlink)
{
    char path[4096], real[4096];
    record_path(path, sizeof(path));
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    struct ctr_start_failure back;
    struct err err = {0};
    int ret = ctr_start_failure_read(dir, &back, &err);
    ck_assert_msg(ret < 0 && ret != -ENOENT, "a FIFO: %d", ret);
    ck_assert_int_eq(unlink(path), 0);
    /* A valid record elsewhere, reached through a symlink. */
    struct ctr_start_failure f = {.exit_code = 127, .error = "x", .at_ms = 1};
    char *other = tu_tmpdir("ctr-record-other");
    ck_assert_int_eq(ctr_start_failure_write(other, &f, &err), 0);
    snprintf(real, sizeof(real), "%s/main-start-failure.json", other);
    ck_assert_int_eq(symlink(real, path), 0);
    ret = ctr_start_failure_read(dir, &back, &err);
    ck_assert_msg(ret < 0 && ret != -ENOENT, "a symlink: %d", ret);
    /* A clear removes the link, not what it points at. */
    ck_assert_int_eq(ctr_start_failure_clear(dir, &err), 0);
    ck_assert_int_eq(access(real, F_OK), 0);
    tu_rmtree(other);
    free(other);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("containers_record");
    TCase *tc = tcase_create("start_failure");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, start_failure_round_trips_and_clear_removes_it);
    tcase_add_test(tc, start_failure_longest_message_with_escapes_round_trips);
    tcase_add_test(tc, start_failure_read_refuses_what_berthd_did_not_write);
    tcase_add_test(tc, start_failure_read_bounds_the_file);
    tcase_add_test(tc, start_failure_read_never_opens_a_fifo_or_follows_a_symlink);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
