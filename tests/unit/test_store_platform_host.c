/*
 * store/platform_host.c: this host's platform, as uname(2) tells it, and
 * the isolation modes it offers. Linux only (see cmake/windows.cmake).
 */
#include "store/platform.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

START_TEST(host_platform_follows_uname)
{
    struct utsname u;
    struct oci_platform p;
    struct host_caps caps;
    struct err err = {0};
    ck_assert_int_eq(uname(&u), 0);
    ck_assert_msg(host_platform(&p, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(p.os, "linux");
    if (strcmp(u.machine, "x86_64") == 0) {
        ck_assert_str_eq(p.architecture, "amd64");
        ck_assert_str_eq(p.variant, "");
    } else if (strcmp(u.machine, "aarch64") == 0) {
        ck_assert_str_eq(p.architecture, "arm64");
        ck_assert_str_eq(p.variant, "v8");
    }
    ck_assert_msg(host_caps_detect(&caps, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(caps.isolations, ISOLATION_PROCESS);
    ck_assert_str_eq(caps.platform.architecture, p.architecture);
}
END_TEST

static Suite *
platform_host_suite(void)
{
    Suite *s = suite_create("store_platform_host");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, host_platform_follows_uname);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(platform_host_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
