/* struct err's wrapping (common/err.c): a context is said once, however many layers add it. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "common/err.h"

START_TEST(wrap_prefixes_the_message_and_keeps_the_code)
{
    struct err e = {0};
    err_set(&e, ENOENT, "mount source /nope: No such file or directory");
    ck_assert_int_eq(err_wrap(&e, "create container %s", "x1"), -ENOENT);
    ck_assert_str_eq(e.msg, "create container x1: mount source /nope: No such file or directory");
    ck_assert_int_eq(e.code, ENOENT);
    /* No code yet: EIO. */
    struct err z = {0};
    ck_assert_int_eq(err_wrap(&z, "ctx"), -EIO);
    ck_assert_str_eq(z.msg, "ctx: ");
}
END_TEST

START_TEST(wrap_does_not_repeat_a_context_the_message_starts_with)
{
    struct err e = {0};
    /* The driver names the operation, then the registry's job does. */
    err_set(&e, ENOENT, "mount source /nope: No such file or directory");
    err_wrap(&e, "create container %s", "x1");
    err_wrap(&e, "create container %s", "x1");
    ck_assert_str_eq(e.msg, "create container x1: mount source /nope: No such file or directory");
    /* Only the whole context followed by ": " counts as said. */
    err_wrap(&e, "create container %s", "x");
    ck_assert_str_eq(e.msg,
                     "create container x: create container x1: mount source /nope: No such file "
                     "or directory");
    err_set(&e, EINVAL, "create container x1");
    err_wrap(&e, "create container x1");
    ck_assert_str_eq(e.msg, "create container x1: create container x1");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("common_err");
    TCase *tc = tcase_create("err");
    tcase_add_test(tc, wrap_prefixes_the_message_and_keeps_the_code);
    tcase_add_test(tc, wrap_does_not_repeat_a_context_the_message_starts_with);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
