/*
 * store/wcstorage_windows.c against the TEST DOUBLE of computestorage.dll
 * (tests/doubles/computestorage/): each call reaches the double with the
 * paths and documents given, its failures come back as errnos naming the
 * call, and a missing DLL is ERR_UNAVAILABLE. The double is not HCS:
 * these show what berth sends, not that a real host accepts it.
 */
#include "store/wcstorage.h"

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wcs_double.h"

#define G1 "11111111-2222-3333-4444-555555555555"

static struct wcs_api *api;

static void
setup(void)
{
    wcs_double_setup("wcs");
    struct err err = {0};
    ck_assert_msg(wcs_api_open(wcs_dbl_path, &api, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    wcs_api_free(api);
    api = NULL;
    wcs_double_teardown();
}

START_TEST(missing_dll_is_unavailable)
{
    struct wcs_api *none = NULL;
    struct err err = {0};
    ck_assert_int_eq(wcs_api_open(wcs_path(0, "nowhere\\computestorage.dll"), &none, &err),
                     -ERR_UNAVAILABLE);
    ck_assert_msg(strstr(err.msg, "computestorage.dll") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(import_gives_the_double_the_source_and_the_layer_data)
{
    CreateDirectoryA(wcs_path(0, "src"), NULL);
    CreateDirectoryA(wcs_path(0, "src\\Files"), NULL);
    wcs_write(wcs_path(0, "src\\Files\\hello.txt"), "hi");
    struct wcs_layer parent = {G1, wcs_path(1, "base")};
    struct err err = {0};
    char *ld = wcs_layer_data(&parent, 1, &err);
    ck_assert_ptr_nonnull(ld);
    ck_assert_msg(wcs_import_layer(api, wcs_path(0, "layer"), wcs_path(1, "src"), ld, &err) == 0,
                  "%s", err.msg);
    ck_assert(wcs_exists(wcs_path(0, "layer\\Files\\hello.txt")));
    ck_assert_str_eq(wcs_calls(), "HcsImportLayer ");
    char *doc = wcs_doc("HcsImportLayer", 1);
    ck_assert_ptr_nonnull(doc);
    ck_assert_str_eq(doc, ld);
    free(doc);
    free(ld);
}
END_TEST

START_TEST(a_failed_import_names_the_call_and_the_layer)
{
    CreateDirectoryA(wcs_path(0, "src"), NULL);
    CreateDirectoryA(wcs_path(0, "src\\Files"), NULL);
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", "HcsImportLayer");
    struct err err = {0};
    char *ld = wcs_layer_data(NULL, 0, &err);
    ck_assert_int_eq(wcs_import_layer(api, wcs_path(0, "layer"), wcs_path(1, "src"), ld, &err),
                     -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "HcsImportLayer") && strstr(err.msg, "layer") &&
                      strstr(err.msg, "0x80370112"),
                  "%s", err.msg);
    ck_assert(!wcs_exists(wcs_path(0, "layer")));
    free(ld);
}
END_TEST

START_TEST(base_layer_setup_makes_hives_once)
{
    CreateDirectoryA(wcs_path(0, "base"), NULL);
    CreateDirectoryA(wcs_path(0, "base\\Files"), NULL);
    struct err err = {0};
    ck_assert_msg(wcs_setup_base_layer(api, wcs_path(0, "base"), NULL, false, &err) == 0, "%s",
                  err.msg);
    ck_assert(wcs_exists(wcs_path(0, "base\\Hives")));
    char *doc = wcs_doc("HcsSetupBaseOSLayer", 1);
    ck_assert_str_eq(doc, "{\"Type\":\"Container\"}");
    free(doc);
    /* HCS refuses a layer whose Hives already exist. */
    ck_assert_int_eq(wcs_setup_base_layer(api, wcs_path(0, "base"), NULL, false, &err), -EEXIST);
    /* A UtilityVM needs its template VHD's handle. */
    ck_assert_int_eq(wcs_setup_base_layer(api, wcs_path(0, "base"), NULL, true, &err), -EINVAL);
    ck_assert_int_eq(wcs_destroy_layer(api, wcs_path(0, "base"), &err), 0);
    ck_assert(!wcs_exists(wcs_path(0, "base")));
}
END_TEST

START_TEST(scratch_vhd_is_formatted_mounted_and_filtered)
{
    HANDLE vhd = CreateFileA(wcs_path(0, "sandbox.vhdx"), GENERIC_READ | GENERIC_WRITE, 0, NULL,
                             CREATE_NEW, 0, NULL);
    ck_assert(vhd != INVALID_HANDLE_VALUE);
    struct err err = {0};
    char *vol = NULL;
    /* Not formatted yet: no volume. */
    ck_assert_int_lt(wcs_vhd_mount_path(api, vhd, &vol, &err), 0);
    ck_assert_int_eq(wcs_format_vhd(api, vhd, &err), 0);
    ck_assert_msg(wcs_vhd_mount_path(api, vhd, &vol, &err) == 0, "%s", err.msg);
    struct wcs_layer l = {G1, wcs_path(1, "base")};
    char *ld = wcs_layer_data(&l, 1, &err);
    ck_assert_int_eq(wcs_initialize_writable(api, vol, ld, &err), 0);
    ck_assert_int_eq(wcs_attach_filter(api, vol, ld, &err), 0);
    ck_assert_int_eq(wcs_attach_filter(api, vol, ld, &err), -EEXIST);
    ck_assert_int_eq(wcs_detach_filter(api, vol, &err), 0);
    ck_assert_int_eq(wcs_detach_filter(api, vol, &err), -ENOENT);
    ck_assert_str_eq(wcs_calls(), "HcsGetLayerVhdMountPath HcsFormatWritableLayerVhd "
                                  "HcsGetLayerVhdMountPath HcsInitializeWritableLayer "
                                  "HcsAttachLayerStorageFilter HcsAttachLayerStorageFilter "
                                  "HcsDetachLayerStorageFilter HcsDetachLayerStorageFilter ");
    char *doc = wcs_doc("HcsAttachLayerStorageFilter", 1);
    ck_assert_str_eq(doc, ld);
    free(doc);
    free(ld);
    CloseHandle(vhd);
    char *volcopy = strdup(vol);
    free(vol);
    wcs_rm_tree(volcopy);
    free(volcopy);
}
END_TEST

START_TEST(control_file_fails_calls_until_it_is_rewritten)
{
    char ctl[MAX_PATH * 2];
    snprintf(ctl, sizeof(ctl), "%s\\fail", wcs_log_dir);
    wcs_write(ctl, "HcsDestroyLayer\n");
    struct err err = {0};
    ck_assert_int_eq(wcs_destroy_layer(api, wcs_path(0, "x"), &err), -EIO);
    wcs_write(ctl, "\n");
    ck_assert_int_eq(wcs_destroy_layer(api, wcs_path(0, "x"), &err), 0);
}
END_TEST

static Suite *
wcs_suite(void)
{
    Suite *s = suite_create("wcstorage_api");
    TCase *tc = tcase_create("double");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, missing_dll_is_unavailable);
    tcase_add_test(tc, import_gives_the_double_the_source_and_the_layer_data);
    tcase_add_test(tc, a_failed_import_names_the_call_and_the_layer);
    tcase_add_test(tc, base_layer_setup_makes_hives_once);
    tcase_add_test(tc, scratch_vhd_is_formatted_mounted_and_filtered);
    tcase_add_test(tc, control_file_fails_calls_until_it_is_rewritten);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(wcs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
