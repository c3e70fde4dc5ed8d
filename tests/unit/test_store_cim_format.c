/*
 * The --layer-format rule (store/cim_format.c): which builds have CimFS
 * for containers, what auto picks, and an explicit cimfs refused on a
 * host that cannot, naming why. Portable: runs on Linux and under Wine.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/cim_format.h"

START_TEST(layer_format_parse_takes_the_four_names_only)
{
    enum layer_format f = LAYER_FORMAT_WCIFS;
    ck_assert_int_eq(layer_format_parse("auto", &f), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_AUTO);
    ck_assert_int_eq(layer_format_parse("cimfs", &f), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_CIMFS);
    ck_assert_int_eq(layer_format_parse("blockcim", &f), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_BLOCKCIM);
    ck_assert_str_eq(layer_format_name(LAYER_FORMAT_BLOCKCIM), "blockcim");
    ck_assert_int_eq(layer_format_parse("wcifs", &f), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_WCIFS);
    ck_assert_int_eq(layer_format_parse("CimFS", &f), -EINVAL);
    ck_assert_int_eq(layer_format_parse("overlay", &f), -EINVAL);
    ck_assert_int_eq(layer_format_parse("", &f), -EINVAL);
    ck_assert_int_eq(layer_format_parse(NULL, &f), -EINVAL);
    ck_assert_int_eq(f, LAYER_FORMAT_WCIFS);
    ck_assert_str_eq(layer_format_name(LAYER_FORMAT_CIMFS), "cimfs");
}
END_TEST

START_TEST(cim_host_supported_follows_the_build_and_revision_rule)
{
    ck_assert(!cim_host_supported(17763, 9999)); /* Server 2019 */
    ck_assert(!cim_host_supported(20348, 0));
    ck_assert(!cim_host_supported(20348, 2030));
    ck_assert(cim_host_supported(20348, 2031)); /* Server 2022 from revision 2031 */
    ck_assert(cim_host_supported(20348, 2655));
    ck_assert(!cim_host_supported(22621, 5000)); /* between the two: no */
    ck_assert(!cim_host_supported(25398, 1000)); /* 23H2: no */
    ck_assert(!cim_host_supported(26099, 9999));
    ck_assert(cim_host_supported(26100, 0)); /* Server 2025 */
    ck_assert(cim_host_supported(27766, 1));
}
END_TEST

START_TEST(auto_picks_cimfs_only_when_the_host_and_the_dll_both_can)
{
    enum layer_format f = LAYER_FORMAT_AUTO;
    struct err err = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_AUTO, 26100, 1, true, NULL, &f, &err), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_CIMFS);
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_AUTO, 26100, 1, false, "no dll", &f, &err),
                     0);
    ck_assert_int_eq(f, LAYER_FORMAT_WCIFS);
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_AUTO, 20348, 2030, true, NULL, &f, &err), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_WCIFS);
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_AUTO, 20348, 2031, true, NULL, &f, &err), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_CIMFS);
    ck_assert_int_eq(err.code, 0);
}
END_TEST

START_TEST(wcifs_is_taken_as_asked_even_where_cimfs_could_run)
{
    enum layer_format f = LAYER_FORMAT_AUTO;
    struct err err = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_WCIFS, 26100, 1, true, NULL, &f, &err), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_WCIFS);
}
END_TEST

START_TEST(explicit_cimfs_on_a_host_that_cannot_is_refused_naming_why)
{
    enum layer_format f = LAYER_FORMAT_AUTO;
    struct err err = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_CIMFS, 20348, 1000, true, NULL, &f, &err),
                     -ERR_UNAVAILABLE);
    ck_assert_int_eq(f, LAYER_FORMAT_AUTO);
    ck_assert_msg(strstr(err.msg, "--layer-format cimfs") && strstr(err.msg, "20348.1000") &&
                      strstr(err.msg, "26100") && strstr(err.msg, "2031"),
                  "%s", err.msg);
    struct err e2 = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_CIMFS, 26100, 3, false,
                                         "cimfs.dll cannot be loaded (error 126)", &f, &e2),
                     -ERR_UNAVAILABLE);
    ck_assert_msg(strstr(e2.msg, "cimfs.dll cannot be loaded (error 126)"), "%s", e2.msg);
    struct err e3 = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_CIMFS, 26100, 3, true, NULL, &f, &e3), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_CIMFS);
}
END_TEST

START_TEST(explicit_blockcim_below_build_27766_or_without_the_exports_stops_naming_why)
{
    enum layer_format f = LAYER_FORMAT_AUTO;
    struct err err = {0};
    /* Server 2025 runs forked CIMs, not block ones. */
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_BLOCKCIM, 26100, 4000, true, NULL, &f, &err),
                     -ERR_UNAVAILABLE);
    ck_assert_int_eq(f, LAYER_FORMAT_AUTO);
    ck_assert_msg(strstr(err.msg, "--layer-format blockcim") && strstr(err.msg, "26100.4000") &&
                      strstr(err.msg, "27766"),
                  "%s", err.msg);
    struct err e2 = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_BLOCKCIM, 27766, 1, false,
                                         "cimfs.dll has no CimMergeMountImage", &f, &e2),
                     -ERR_UNAVAILABLE);
    ck_assert_msg(strstr(e2.msg, "blockcim: cimfs.dll has no CimMergeMountImage"), "%s", e2.msg);
    struct err e3 = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_BLOCKCIM, 27766, 1, true, NULL, &f, &e3), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_BLOCKCIM);
    ck_assert(!cim_block_host_supported(27765));
    ck_assert(cim_block_host_supported(27766));
}
END_TEST

START_TEST(auto_never_picks_blockcim)
{
    enum layer_format f = LAYER_FORMAT_AUTO;
    struct err err = {0};
    ck_assert_int_eq(layer_format_choose(LAYER_FORMAT_AUTO, 27766, 1, true, NULL, &f, &err), 0);
    ck_assert_int_eq(f, LAYER_FORMAT_CIMFS);
}
END_TEST

static Suite *
cim_format_suite(void)
{
    Suite *s = suite_create("store_cim_format");
    TCase *tc = tcase_create("cim_format");
    tcase_add_test(tc, layer_format_parse_takes_the_four_names_only);
    tcase_add_test(tc, cim_host_supported_follows_the_build_and_revision_rule);
    tcase_add_test(tc, auto_picks_cimfs_only_when_the_host_and_the_dll_both_can);
    tcase_add_test(tc, explicit_blockcim_below_build_27766_or_without_the_exports_stops_naming_why);
    tcase_add_test(tc, auto_never_picks_blockcim);
    tcase_add_test(tc, wcifs_is_taken_as_asked_even_where_cimfs_could_run);
    tcase_add_test(tc, explicit_cimfs_on_a_host_that_cannot_is_refused_naming_why);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cim_format_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
