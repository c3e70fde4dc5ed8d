/*
 * runtime/hcs/guid: GUID text, version 5 GUIDs against hcsshim's SCSI
 * controller keys (v5 GUIDs of "0" and "1" in its namespace), layer ids
 * and random GUIDs.
 */
#include "runtime/hcs/guid.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(v5_matches_hcsshim_scsi_controller_keys)
{
    struct err err = {0};
    struct hcs_guid ns, g;
    char s[HCS_GUID_SIZE];
    ck_assert_int_eq(hcs_guid_parse("d422512d-2bf2-4752-809d-7b82b5fcb1b4", &ns, &err), 0);
    ck_assert_int_eq(hcs_guid_v5(&ns, "0", 1, &g, &err), 0);
    hcs_guid_format(&g, s);
    ck_assert_str_eq(s, "df6d0690-79e5-55b6-a5ec-c1e2f77f580a");
    ck_assert_int_eq(hcs_guid_v5(&ns, "1", 1, &g, &err), 0);
    hcs_guid_format(&g, s);
    ck_assert_str_eq(s, "0110f83b-de10-5172-a266-78bca56bf50a");
}
END_TEST

START_TEST(layer_ids_are_stable_v5_and_distinct)
{
    struct err err = {0};
    char a[HCS_GUID_SIZE], b[HCS_GUID_SIZE], c[HCS_GUID_SIZE];
    const char *chain = "sha256:8f2b6c1e7a9d4f3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b";
    ck_assert_int_eq(hcs_guid_layer(chain, a, &err), 0);
    ck_assert_int_eq(hcs_guid_layer(chain, b, &err), 0);
    ck_assert_int_eq(hcs_guid_layer("sha256:00", c, &err), 0);
    ck_assert_str_eq(a, b);
    ck_assert_str_ne(a, c);
    ck_assert(hcs_guid_valid(a));
    ck_assert_int_eq(a[14], '5');                 /* version 5 */
    ck_assert_ptr_nonnull(strchr("89ab", a[19])); /* RFC 4122 variant */
    /* Python's uuid.uuid5 in the layer namespace; store/wcstorage.h's
     * wcs_layer_id must give the same (test_store_wcstorage checks it). */
    ck_assert_int_eq(hcs_guid_layer("fs", c, &err), 0);
    ck_assert_str_eq(c, "53325b6f-3f60-5e24-9195-8eb1e9b70efc");
}
END_TEST

START_TEST(parse_takes_either_case_and_format_writes_lowercase)
{
    struct err err = {0};
    struct hcs_guid g;
    char s[HCS_GUID_SIZE];
    ck_assert_int_eq(hcs_guid_parse("BAAC0FD5-16B7-405B-9621-112AA8E3D973", &g, &err), 0);
    hcs_guid_format(&g, s);
    ck_assert_str_eq(s, "baac0fd5-16b7-405b-9621-112aa8e3d973");
    ck_assert_int_eq(g.b[0], 0xba);
    ck_assert_int_eq(g.b[15], 0x73);
}
END_TEST

START_TEST(parse_refuses_what_is_not_a_guid)
{
    static const char *bad[] = {
        "",
        "{baac0fd5-16b7-405b-9621-112aa8e3d973}",
        "baac0fd5-16b7-405b-9621-112aa8e3d97",
        "baac0fd5-16b7-405b-9621-112aa8e3d9733",
        "baac0fd516b7-405b-9621-112aa8e3d973-",
        "baac0fd5-16b7-405b-9621-112aa8e3d97g",
        "baac0fd5 16b7 405b 9621 112aa8e3d973",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        struct hcs_guid g;
        ck_assert_msg(hcs_guid_parse(bad[i], &g, &err) == -EINVAL, "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err.msg, "is not a guid"));
        ck_assert(!hcs_guid_valid(bad[i]));
    }
    ck_assert(!hcs_guid_valid(NULL));
}
END_TEST

START_TEST(random_guids_are_v4_and_differ)
{
    struct err err = {0};
    char prev[HCS_GUID_SIZE] = "";
    for (int i = 0; i < 100; i++) {
        struct hcs_guid g;
        char s[HCS_GUID_SIZE];
        ck_assert_int_eq(hcs_guid_random(&g, &err), 0);
        hcs_guid_format(&g, s);
        ck_assert_int_eq(s[14], '4');
        ck_assert_ptr_nonnull(strchr("89ab", s[19]));
        ck_assert_str_ne(s, prev);
        memcpy(prev, s, sizeof(s));
    }
}
END_TEST

static Suite *
guid_suite(void)
{
    Suite *s = suite_create("runtime_hcs_guid");
    TCase *tc = tcase_create("guid");
    tcase_add_test(tc, v5_matches_hcsshim_scsi_controller_keys);
    tcase_add_test(tc, layer_ids_are_stable_v5_and_distinct);
    tcase_add_test(tc, parse_takes_either_case_and_format_writes_lowercase);
    tcase_add_test(tc, parse_refuses_what_is_not_a_guid);
    tcase_add_test(tc, random_guids_are_v4_and_differ);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(guid_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
