/*
 * The documents store/wcstorage_doc.c builds for computestorage.dll
 * (LayerData, its UnionFS form for CimFS scratches, OsLayerOptions) and the errno of its HRESULTs:
 * escaping of Windows paths, the order of the layers as given, hostile strings refused. Portable:
 * runs on Linux and under Wine. The calls themselves are tests/windows/test_wcstorage_api.c's
 * (against the double).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/wcstorage.h"

#define G1 "11111111-2222-3333-4444-555555555555"
#define G2 "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

START_TEST(layer_data_lists_parents_in_the_order_given_with_paths_escaped)
{
    struct wcs_layer l[] = {{G1, "C:\\berth\\snapshots\\top \"x\""}, {G2, "D:\\b\xc3\xa9se"}};
    struct err err = {0};
    char *s = wcs_layer_data(l, 2, &err);
    ck_assert_msg(s != NULL, "%s", err.msg);
    ck_assert_str_eq(s,
                     "{\"SchemaVersion\":{\"Major\":2,\"Minor\":1},\"Layers\":["
                     "{\"Id\":\"" G1 "\",\"Path\":\"C:\\\\berth\\\\snapshots\\\\top \\\"x\\\"\"},"
                     "{\"Id\":\"" G2 "\",\"Path\":\"D:\\\\b\xc3\xa9se\"}]}");
    free(s);
}
END_TEST

START_TEST(layer_data_of_a_base_layer_has_no_layers)
{
    struct err err = {0};
    char *s = wcs_layer_data(NULL, 0, &err);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "{\"SchemaVersion\":{\"Major\":2,\"Minor\":1},\"Layers\":[]}");
    free(s);
}
END_TEST

START_TEST(layer_data_refuses_control_characters_and_bad_utf8)
{
    const char *bad[] = {"C:\\a\nb", "C:\\a\x01", "C:\\\xc3", "C:\\\xc0\xaf", "C:\\\xff"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct wcs_layer l = {G1, bad[i]};
        struct err err = {0};
        ck_assert_ptr_null(wcs_layer_data(&l, 1, &err));
        ck_assert_int_eq(err.code, EINVAL);
        ck_assert_msg(strstr(err.msg, "layer 0") != NULL, "%s", err.msg);
    }
}
END_TEST

START_TEST(union_layer_data_names_the_unionfs_filter_for_attach_and_detach)
{
    struct wcs_layer l = {G1, "\\\\?\\Volume{" G2 "}\\Files"};
    struct err err = {0};
    char *s = wcs_union_layer_data(&l, 1, &err);
    ck_assert_msg(s != NULL, "%s", err.msg);
    ck_assert_str_eq(s, "{\"SchemaVersion\":{\"Major\":2,\"Minor\":1},\"Layers\":["
                        "{\"Id\":\"" G1 "\",\"Path\":\"\\\\\\\\?\\\\Volume{" G2
                        "}\\\\Files\"}],\"FilterType\":\"UnionFS\"}");
    free(s);
    /* The detach names the filter only. */
    s = wcs_union_layer_data(NULL, 0, &err);
    ck_assert_str_eq(s, "{\"SchemaVersion\":{\"Major\":2,\"Minor\":1},\"Layers\":[],"
                        "\"FilterType\":\"UnionFS\"}");
    free(s);
    /* The same refusals as the WCIFS document's. */
    struct wcs_layer bad = {G1, "C:\\a\nb"};
    ck_assert_ptr_null(wcs_union_layer_data(&bad, 1, &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(os_layer_options_name_the_type)
{
    ck_assert_str_eq(wcs_os_layer_options(false), "{\"Type\":\"Container\"}");
    ck_assert_str_eq(wcs_os_layer_options(true), "{\"Type\":\"Vm\"}");
}
END_TEST

START_TEST(hresults_map_to_errnos)
{
    ck_assert_int_eq(wcs_hresult_errno(0x80070002u), ENOENT);
    ck_assert_int_eq(wcs_hresult_errno(0x80070490u), ENOENT);
    ck_assert_int_eq(wcs_hresult_errno(0x800700B7u), EEXIST);
    ck_assert_int_eq(wcs_hresult_errno(0x80070005u), EACCES);
    ck_assert_int_eq(wcs_hresult_errno(0x8037011Bu), EACCES);
    ck_assert_int_eq(wcs_hresult_errno(0x80070057u), EINVAL);
    ck_assert_int_eq(wcs_hresult_errno(0x8007000Eu), ENOMEM);
    ck_assert_int_eq(wcs_hresult_errno(0x80070070u), ENOSPC);
    ck_assert_int_eq(wcs_hresult_errno(0x80370112u), ERR_INVALID_CONTENT);
    ck_assert_int_eq(wcs_hresult_errno(0x80004005u), EIO);
}
END_TEST

/* The known answers are Python's uuid.uuid5 in the layer namespace, which is
 * what runtime/hcs/guid.c's hcs_guid_layer computes too. */
START_TEST(layer_ids_are_version_5_guids_of_the_chain_id)
{
    char id[WCS_LAYER_ID_SIZE];
    struct err err = {0};
    char chain[80] = "sha256:";
    for (int i = 0; i < 32; i++)
        strcat(chain, "ab");
    ck_assert_int_eq(wcs_layer_id(chain, id, &err), 0);
    ck_assert_str_eq(id, "ed1f02b4-3eba-55e9-86bb-7dc2386ce4a0");
    ck_assert_int_eq(wcs_layer_id("fs", id, &err), 0);
    ck_assert_str_eq(id, "53325b6f-3f60-5e24-9195-8eb1e9b70efc");
}
END_TEST

static Suite *
wcstorage_suite(void)
{
    Suite *s = suite_create("store_wcstorage");
    TCase *tc = tcase_create("docs");
    tcase_add_test(tc, layer_data_lists_parents_in_the_order_given_with_paths_escaped);
    tcase_add_test(tc, layer_data_of_a_base_layer_has_no_layers);
    tcase_add_test(tc, layer_data_refuses_control_characters_and_bad_utf8);
    tcase_add_test(tc, union_layer_data_names_the_unionfs_filter_for_attach_and_detach);
    tcase_add_test(tc, os_layer_options_name_the_type);
    tcase_add_test(tc, hresults_map_to_errnos);
    tcase_add_test(tc, layer_ids_are_version_5_guids_of_the_chain_id);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(wcstorage_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
