/*
 * runtime/hcs/winpath: POSIX paths to Windows ones, the refusals, and
 * raw:// rootfs URIs with percent-encoded Windows paths.
 */
#include "runtime/hcs/winpath.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(posix_and_drive_paths_convert_to_the_normal_form)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"/tmp/build/x", "C:\\tmp\\build\\x"},
        {"/", "C:\\"},
        {"/tmp//build/./x/", "C:\\tmp\\build\\x"},
        {"/tmp/build in/x y", "C:\\tmp\\build in\\x y"},
        {"/.hidden/..x/x..y", "C:\\.hidden\\..x\\x..y"},
        {"/caf\xc3\xa9", "C:\\caf\xc3\xa9"},
        {"C:\\work", "C:\\work"},
        {"c:/work/", "C:\\work"},
        {"d:\\x\\/y", "D:\\x\\y"},
        {"C:\\", "C:\\"},
        {"/CONSOLE/nul1/COM0/LPT10", "C:\\CONSOLE\\nul1\\COM0\\LPT10"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct err err = {0};
        char out[256];
        ck_assert_msg(hcs_path_to_windows(cases[i].in, out, sizeof(out), &err) == 0, "%s: %s",
                      cases[i].in, err.msg);
        ck_assert_str_eq(out, cases[i].out);
        ck_assert(hcs_path_is_windows(out));
    }
}
END_TEST

START_TEST(paths_windows_would_misread_are_refused)
{
    static const struct {
        const char *in, *msg;
    } cases[] = {
        {"", "empty"},
        {"tmp/x", "not absolute"},
        {"/tmp/../etc", "\"..\" component"},
        {"/tmp/..", "\"..\" component"},
        {"/tmp\\..\\x", "\"..\" component"},
        {"C:\\x\\..", "\"..\" component"},
        {"C:x", "drive-relative"},
        {"C:", "drive-relative"},
        {"\\tmp", "rooted without a drive"},
        {"\\\\server\\share", "UNC or device path"},
        {"\\\\?\\C:\\x", "UNC or device path"},
        {"//tmp", "UNC or device path"},
        {"/tmp/a:b", "has a ':'"},
        {"/tmp/a*", "has a '*'"},
        {"/tmp/a?", "has a '?'"},
        {"/tmp/a\"b", "has a '\"'"},
        {"/tmp/a|b", "has a '|'"},
        {"/tmp/a<b>", "has a '<'"},
        {"/tmp/a\x01", "control character (0x01)"},
        {"/tmp/x.", "ending in a dot or a space"},
        {"/tmp/x ", "ending in a dot or a space"},
        {"/dev/nul", "reserved device name \"nul\""},
        {"/x/CON.txt", "reserved device name \"CON.txt\""},
        {"/x/Com1", "reserved device name \"Com1\""},
        {"/x/lpt9.log", "reserved device name"},
        {"/x/AUX .c", "reserved device name"},
        {"1:\\x", "not absolute"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct err err = {0};
        char out[256];
        ck_assert_msg(hcs_path_to_windows(cases[i].in, out, sizeof(out), &err) == -EINVAL,
                      "%s accepted as %s", cases[i].in, out);
        ck_assert_int_eq(err.code, EINVAL);
        ck_assert_msg(strstr(err.msg, cases[i].msg), "%s: \"%s\" lacks \"%s\"", cases[i].in,
                      err.msg, cases[i].msg);
    }
}
END_TEST

START_TEST(long_paths_and_small_buffers_are_refused)
{
    struct err err = {0};
    char out[16];
    ck_assert_int_eq(hcs_path_to_windows("/tmp/build/x/y/z", out, sizeof(out), &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "does not fit"));
    char *longc = malloc(300);
    longc[0] = '/';
    memset(longc + 1, 'a', 256);
    longc[257] = '\0';
    char big[512];
    ck_assert_int_eq(hcs_path_to_windows(longc, big, sizeof(big), &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "longer than 255 bytes"));
    free(longc);
    char *huge = malloc(HCS_PATH_MAX + 2);
    memset(huge, 'a', HCS_PATH_MAX + 1);
    huge[0] = '/';
    huge[HCS_PATH_MAX + 1] = '\0';
    ck_assert_int_eq(hcs_path_to_windows(huge, big, sizeof(big), &err), -EINVAL);
    free(huge);
}
END_TEST

START_TEST(normal_form_predicate)
{
    ck_assert(hcs_path_is_windows("C:\\x\\y"));
    ck_assert(!hcs_path_is_windows("c:\\x"));
    ck_assert(!hcs_path_is_windows("C:/x"));
    ck_assert(!hcs_path_is_windows("C:\\x\\"));
    ck_assert(!hcs_path_is_windows("C:\\x\\\\y"));
    ck_assert(!hcs_path_is_windows("C:\\x\\.\\y"));
    ck_assert(!hcs_path_is_windows("/x"));
    ck_assert(!hcs_path_is_windows(NULL));
}
END_TEST

START_TEST(raw_uris_with_encoded_windows_paths_are_accepted)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"raw:///C%3A%5Cworker%5Cvolumes%5Clive%5Cabc%5Cvolume",
         "C:\\worker\\volumes\\live\\abc\\volume"},
        {"raw:///c%3a%5cw", "C:\\w"},
        {"raw:///C:/worker/volumes/x", "C:\\worker\\volumes\\x"},
        {"raw:///D%3A%2Fbuild%20dir%2F", "D:\\build dir"},
        {"raw:///C%3A%5Ccaf%C3%A9", "C:\\caf\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct err err = {0};
        char out[256];
        ck_assert_msg(hcs_path_from_raw_uri(cases[i].in, out, sizeof(out), &err) == 0, "%s: %s",
                      cases[i].in, err.msg);
        ck_assert_str_eq(out, cases[i].out);
    }
}
END_TEST

START_TEST(bad_raw_uris_are_refused)
{
    static const struct {
        const char *in, *msg;
    } cases[] = {
        {"docker:///busybox", "not a raw:// uri"},
        {"raw://C%3A%5Cw", "want raw:///"},
        {"raw:///tmp/rootfs", "is not a windows path"},
        {"raw:///C%3A%5Cw%5C..%5Cx", "\"..\" component"},
        {"raw:///C%3A%5Cw%00x", "an escaped NUL"},
        {"raw:///C%3A%5Cw%4", "is not two hex digits"},
        {"raw:///C%3A%5Cw%zz", "not two hex digits"},
        {"raw:///C%3Aw", "drive-relative"},
        {"raw:///%5C%5Cserver%5Cshare", "is not a windows path"},
        {"raw:///C%3A%5Cx%3Astream", "has a ':'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct err err = {0};
        char out[256];
        ck_assert_msg(hcs_path_from_raw_uri(cases[i].in, out, sizeof(out), &err) == -EINVAL,
                      "%s accepted as %s", cases[i].in, out);
        ck_assert_msg(strstr(err.msg, cases[i].msg), "%s: \"%s\" lacks \"%s\"", cases[i].in,
                      err.msg, cases[i].msg);
    }
    struct err err = {0};
    char out[8];
    ck_assert_int_eq(hcs_path_from_raw_uri(NULL, out, sizeof(out), &err), -EINVAL);
}
END_TEST

/* What the API hands on: the URI's path decoded, its leading "/" kept. */
START_TEST(decoded_raw_paths_take_the_same_rules)
{
    struct err err = {0};
    char out[256];
    ck_assert_int_eq(hcs_path_from_raw_path("/Z:\\tmp\\root", out, sizeof(out), &err), 0);
    ck_assert_str_eq(out, "Z:\\tmp\\root");
    ck_assert_int_eq(hcs_path_from_raw_path("c:/w/", out, sizeof(out), &err), 0);
    ck_assert_str_eq(out, "C:\\w");
    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"/tmp/rootfs", "is not a windows path"}, {"//C:\\x", "is not a windows path"},
        {"/C:\\w\\..\\x", "\"..\" component"},    {"/C:w", "drive-relative"},
        {"/C:\\x:stream", "has a ':'"},           {"", "is not a windows path"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(hcs_path_from_raw_path(bad[i].in, out, sizeof(out), &err) == -EINVAL,
                      "%s accepted as %s", bad[i].in, out);
        ck_assert_msg(strstr(err.msg, bad[i].msg) && strstr(err.msg, bad[i].in),
                      "%s: \"%s\" lacks \"%s\"", bad[i].in, err.msg, bad[i].msg);
    }
    ck_assert_int_eq(hcs_path_from_raw_path(NULL, out, sizeof(out), &err), -EINVAL);
}
END_TEST

static Suite *
winpath_suite(void)
{
    Suite *s = suite_create("runtime_hcs_winpath");
    TCase *tc = tcase_create("winpath");
    tcase_add_test(tc, posix_and_drive_paths_convert_to_the_normal_form);
    tcase_add_test(tc, paths_windows_would_misread_are_refused);
    tcase_add_test(tc, long_paths_and_small_buffers_are_refused);
    tcase_add_test(tc, normal_form_predicate);
    tcase_add_test(tc, raw_uris_with_encoded_windows_paths_are_accepted);
    tcase_add_test(tc, bad_raw_uris_are_refused);
    tcase_add_test(tc, decoded_raw_paths_take_the_same_rules);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(winpath_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
