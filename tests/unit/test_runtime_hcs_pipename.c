/*
 * runtime/hcs/pipename: stdio pipe names carry the container handle, the
 * process id and a random part, so two tasks called "task" never share
 * one (the seed's "Access is denied").
 */
#include "runtime/hcs/pipename.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(name_has_handle_id_random_and_stream)
{
    struct err err = {0};
    uint8_t random[HCS_PIPE_RANDOM_BYTES];
    for (int i = 0; i < HCS_PIPE_RANDOM_BYTES; i++)
        random[i] = (uint8_t)(0xf0 + i);
    char name[HCS_PIPE_NAME_SIZE];
    ck_assert_int_eq(hcs_pipe_name("build-42", "task", HCS_STDOUT, random, name, &err), 0);
    ck_assert_str_eq(name,
                     "\\\\.\\pipe\\berth-build-42-task-f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff-stdout");
    ck_assert_int_eq(hcs_pipe_name("build-42", "task", HCS_STDIN, random, name, &err), 0);
    ck_assert_ptr_nonnull(strstr(name, "-stdin"));
    ck_assert_int_eq(hcs_pipe_name("build-42", "task", HCS_STDERR, random, name, &err), 0);
    ck_assert_ptr_nonnull(strstr(name, "-stderr"));
}
END_TEST

START_TEST(longest_name_fits_windows_limit)
{
    struct err err = {0};
    char handle[129], id[65];
    memset(handle, 'h', 128);
    handle[128] = '\0';
    memset(id, 'i', 64);
    id[64] = '\0';
    struct hcs_pipe_names n;
    ck_assert_int_eq(hcs_pipe_names_new(handle, id, &n, &err), 0);
    ck_assert_int_eq(strlen(n.name[HCS_STDOUT]), HCS_PIPE_NAME_SIZE - 1);
    ck_assert_int_le(strlen(n.name[HCS_STDOUT]), 256);
}
END_TEST

START_TEST(two_tasks_called_task_get_different_names)
{
    struct err err = {0};
    struct hcs_pipe_names a, b, c;
    ck_assert_int_eq(hcs_pipe_names_new("build-1", "task", &a, &err), 0);
    ck_assert_int_eq(hcs_pipe_names_new("build-2", "task", &b, &err), 0);
    /* The same container and id again (a restart, a second start). */
    ck_assert_int_eq(hcs_pipe_names_new("build-1", "task", &c, &err), 0);
    for (int s = HCS_STDIN; s <= HCS_STDERR; s++) {
        ck_assert_str_ne(a.name[s], b.name[s]);
        ck_assert_str_ne(a.name[s], c.name[s]);
    }
    /* One start's three names share their random part. */
    ck_assert_int_eq(memcmp(a.name[0], a.name[1], strlen(a.name[0]) - strlen("stdin")), 0);
    ck_assert_str_ne(a.name[0], a.name[1]);
}
END_TEST

START_TEST(invalid_handles_and_ids_are_refused)
{
    struct err err = {0};
    struct hcs_pipe_names n;
    char big[130];
    memset(big, 'a', 129);
    big[129] = '\0';
    ck_assert_int_eq(hcs_pipe_names_new("a\\b", "task", &n, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "container handle a\\b"));
    ck_assert_int_eq(hcs_pipe_names_new(".x", "task", &n, &err), -EINVAL);
    ck_assert_int_eq(hcs_pipe_names_new(big, "task", &n, &err), -EINVAL);
    ck_assert_int_eq(hcs_pipe_names_new("c", "", &n, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "process id"));
    ck_assert_int_eq(hcs_pipe_names_new("c", "a b", &n, &err), -EINVAL);
    ck_assert_int_eq(hcs_pipe_names_new(NULL, "t", &n, &err), -EINVAL);
    uint8_t r[HCS_PIPE_RANDOM_BYTES] = {0};
    char name[HCS_PIPE_NAME_SIZE];
    ck_assert_int_eq(hcs_pipe_name("c", "t", (enum hcs_stdio_stream)3, r, name, &err), -EINVAL);
}
END_TEST

static Suite *
pipename_suite(void)
{
    Suite *s = suite_create("runtime_hcs_pipename");
    TCase *tc = tcase_create("pipename");
    tcase_add_test(tc, name_has_handle_id_random_and_stream);
    tcase_add_test(tc, longest_name_fits_windows_limit);
    tcase_add_test(tc, two_tasks_called_task_get_different_names);
    tcase_add_test(tc, invalid_handles_and_ids_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(pipename_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
