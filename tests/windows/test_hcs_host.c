/*
 * runtime/hcs/host_win.c under Wine: the host's commit as admission reads
 * it, the version the platform check gets, and stdio pipes created
 * first-instance-only, so two tasks called "task" get pipes of their own.
 */
#include "runtime/hcs/host.h"

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/platform.h"

START_TEST(commit_is_read_in_pages)
{
    struct err err = {0};
    struct hcs_commit_info ci = {0};
    ck_assert_int_eq(hcs_host_commit(NULL, &ci, &err), 0);
    ck_assert_uint_gt(ci.page_size, 0);
    ck_assert_uint_gt(ci.commit_limit, 0);
    ck_assert_uint_gt(ci.commit_total, 0);
    /* The ledger takes the reader as it is. */
    struct hcs_admit *a = hcs_admit_new(hcs_host_commit, NULL);
    uint64_t t;
    ck_assert_int_eq(hcs_admit_reserve(a, 2, &t, &err), 0);
    hcs_admit_release(a, t);
    /* No host has a petabyte of commit to spare. */
    ck_assert_int_eq(hcs_admit_reserve(a, 1024u * 1024u * 1024u, &t, &err), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err.msg, "CommitLimit"));
    hcs_admit_free(a);
}
END_TEST

START_TEST(version_makes_a_windows_host)
{
    struct err err = {0};
    unsigned major = 0, minor = 99, build = 0, rev = 0;
    ck_assert_int_eq(hcs_host_version(&major, &minor, &build, &rev, &err), 0);
    ck_assert_uint_ge(major, 6);
    ck_assert_uint_gt(build, 0);
    struct host_caps caps;
    ck_assert_int_eq(
        host_caps_windows("amd64", major, minor, build, rev, ISOLATION_PROCESS, &caps, &err), 0);
    char want[64];
    snprintf(want, sizeof(want), "%u.%u.%u.%u", major, minor, build, rev);
    ck_assert_str_eq(caps.platform.os_version, want);
    /* An image of the host's own build runs under process isolation. */
    struct oci_platform img = {.os = "windows", .architecture = "amd64"};
    snprintf(img.os_version, sizeof(img.os_version), "%u.%u.%u.1", major, minor, build);
    ck_assert_int_eq(platform_check(&img, &caps, ISOLATION_PROCESS, &err), PLATFORM_RUNS_PROCESS);
}
END_TEST

START_TEST(a_taken_pipe_name_is_eexist)
{
    struct err err = {0};
    void *a = NULL, *b = NULL;
    const char *name = "\\\\.\\pipe\\berth-test-host-taken";
    ck_assert_int_eq(hcs_pipe_create_named(name, true, &a, &err), 0);
    ck_assert_int_eq(hcs_pipe_create_named(name, true, &b, &err), -EEXIST);
    ck_assert_ptr_nonnull(strstr(err.msg, "the name is taken"));
    CloseHandle(a);
    ck_assert_int_eq(hcs_pipe_create_named("no\\pipe", true, &b, &err), -EIO);
}
END_TEST

START_TEST(two_tasks_called_task_get_pipes_of_their_own)
{
    struct err err = {0};
    void *p1 = NULL, *p2 = NULL;
    char n1[HCS_PIPE_NAME_SIZE], n2[HCS_PIPE_NAME_SIZE];
    ck_assert_int_eq(hcs_pipe_create("build-1", "task", HCS_STDOUT, &p1, n1, &err), 0);
    ck_assert_int_eq(hcs_pipe_create("build-2", "task", HCS_STDOUT, &p2, n2, &err), 0);
    ck_assert_str_ne(n1, n2);
    ck_assert_ptr_nonnull(strstr(n1, "\\\\.\\pipe\\berth-build-1-task-"));

    /* A client writes into the first; berth reads it there, not in the second. */
    HANDLE c = CreateFileA(n1, GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
    ck_assert_msg(c != INVALID_HANDLE_VALUE, "open %s: %lu", n1, GetLastError());
    OVERLAPPED ov = {0};
    ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (!ConnectNamedPipe(p1, &ov)) {
        DWORD e = GetLastError();
        ck_assert(e == ERROR_PIPE_CONNECTED || e == ERROR_IO_PENDING);
        if (e == ERROR_IO_PENDING)
            WaitForSingleObject(ov.hEvent, 5000);
    }
    DWORD n = 0;
    ck_assert(WriteFile(c, "hello", 5, &n, NULL));
    char buf[16] = {0};
    ResetEvent(ov.hEvent);
    if (!ReadFile(p1, buf, sizeof(buf), &n, &ov)) {
        ck_assert_int_eq(GetLastError(), ERROR_IO_PENDING);
        ck_assert(GetOverlappedResult(p1, &ov, &n, TRUE));
    }
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(buf, "hello");
    CloseHandle(ov.hEvent);
    CloseHandle(c);
    CloseHandle(p1);
    CloseHandle(p2);
    ck_assert_int_eq(hcs_pipe_create("a\\b", "task", HCS_STDIN, &p1, n1, &err), -EINVAL);
}
END_TEST

static Suite *
host_suite(void)
{
    Suite *s = suite_create("hcs_host");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, commit_is_read_in_pages);
    tcase_add_test(tc, version_makes_a_windows_host);
    tcase_add_test(tc, a_taken_pipe_name_is_eexist);
    tcase_add_test(tc, two_tasks_called_task_get_pipes_of_their_own);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(host_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
