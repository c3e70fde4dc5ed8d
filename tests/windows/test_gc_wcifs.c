/*
 * store/gc.c on Windows against the TEST DOUBLE of computestorage.dll:
 * an unreferenced snapshot that is a WCIFS layer folder (it has Files\)
 * is given to HcsDestroyLayer before its tree goes, so HCS undoes what it
 * made of the layer; a folder that is no WCIFS layer (a CimFS layer's
 * .cim files, a half-written unpack) goes as a tree, with no HCS call.
 * The double is not HCS: this is what berth asks, in which order. A CIM
 * in <root>\cims that no image uses goes with the files its record
 * names (store/cim_chain.h; the cases are test_cim_chain's).
 */
#include "store/gc.h"

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/blob.h"
#include "store/meta.h"
#include "wcs_double.h"

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static struct meta *meta;
static struct blob_store *bs;
static char root[MAX_PATH * 2];

static void
setup(void)
{
    wcs_double_setup("gc");
    static char env[MAX_PATH * 2];
    snprintf(env, sizeof(env), "BERTH_TEST_HCS_STORAGE_DLL=%s", wcs_dbl_path);
    _putenv(env);
    snprintf(root, sizeof(root), "%s", wcs_path(0, "store"));
    CreateDirectoryA(root, NULL);
    struct err err = {0};
    bs = blob_store_open(root, &err);
    ck_assert_msg(bs != NULL, "%s", err.msg);
    ck_assert_msg(meta_open(root, &meta, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    meta_close(meta);
    blob_store_free(bs);
    wcs_double_teardown();
}

/* <root>\snapshots\<hex>\<rel> with a little content. */
static void
make(const char *hex, const char *rel)
{
    char dir[MAX_PATH * 2], file[MAX_PATH * 3];
    snprintf(dir, sizeof(dir), "%s\\snapshots", root);
    CreateDirectoryA(dir, NULL);
    snprintf(dir, sizeof(dir), "%s\\snapshots\\%s", root, hex);
    CreateDirectoryA(dir, NULL);
    snprintf(file, sizeof(file), "%s\\%s", dir, rel);
    char *slash = strrchr(file, '\\');
    *slash = '\0';
    CreateDirectoryA(file, NULL);
    *slash = '\\';
    wcs_write(file, "data");
}

static bool
snap_exists(const char *hex)
{
    char dir[MAX_PATH * 2];
    snprintf(dir, sizeof(dir), "%s\\snapshots\\%s", root, hex);
    return wcs_exists(dir);
}

START_TEST(an_unreferenced_wcifs_layer_folder_is_destroyed_through_hcs)
{
    make(HEX_A, "Files\\win.ini");
    make(HEX_B, "layer.cim");
    struct gc_result res = {0};
    struct err err = {0};
    ck_assert_msg(gc_run(bs, meta, root, &res, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(res.snapshots_removed, 2);
    ck_assert_uint_eq(res.errors, 0);
    ck_assert(!snap_exists(HEX_A));
    ck_assert(!snap_exists(HEX_B));
    /* One HcsDestroyLayer, of the WCIFS folder, as a Windows path. */
    ck_assert_str_eq(wcs_calls(), "HcsDestroyLayer ");
    char path[MAX_PATH * 2], log[4096] = "", want[MAX_PATH * 3];
    snprintf(path, sizeof(path), "%s\\calls.log", wcs_log_dir);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    log[fread(log, 1, sizeof(log) - 1, f)] = '\0';
    fclose(f);
    snprintf(want, sizeof(want), "HcsDestroyLayer %s\\snapshots\\%s\n", root, HEX_A);
    ck_assert_msg(strstr(log, want) != NULL, "want \"%s\" in %s", want, log);
}
END_TEST

START_TEST(a_layer_hcs_will_not_destroy_is_kept_and_counted)
{
    make(HEX_A, "Files\\win.ini");
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", "HcsDestroyLayer");
    struct gc_result res = {0};
    struct err err = {0};
    ck_assert_msg(gc_run(bs, meta, root, &res, &err) == 0, "%s", err.msg);
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", NULL);
    ck_assert_uint_eq(res.snapshots_removed, 0);
    ck_assert_uint_eq(res.errors, 1);
    ck_assert(snap_exists(HEX_A));
    /* The next run, with HCS willing, removes it. */
    ck_assert_msg(gc_run(bs, meta, root, &res, &err) == 0, "%s", err.msg);
    ck_assert(!snap_exists(HEX_A));
}
END_TEST

/* <root>\cims\<name> holding text. */
static void
cim_file(const char *name, const char *text)
{
    char path[MAX_PATH * 3];
    snprintf(path, sizeof(path), "%s\\cims", root);
    CreateDirectoryA(path, NULL);
    snprintf(path, sizeof(path), "%s\\cims\\%s", root, name);
    wcs_write(path, text);
}

START_TEST(a_cim_no_image_uses_goes_with_its_region_files)
{
    cim_file(HEX_A ".cim", "cim");
    cim_file(HEX_A ".own", "berth-cim 1\nfile region_1_0\nfile objectid_1_0\n");
    cim_file("region_1_0", "r");
    cim_file("objectid_1_0", "o");
    struct gc_result res = {0};
    struct err err = {0};
    ck_assert_msg(gc_run(bs, meta, root, &res, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(res.cims_removed, 1);
    ck_assert_uint_eq(res.errors, 0);
    char path[MAX_PATH * 3];
    const char *gone[] = {HEX_A ".cim", HEX_A ".own", "region_1_0", "objectid_1_0"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s\\cims\\%s", root, gone[i]);
        ck_assert_msg(!wcs_exists(path), "%s", path);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("gc_wcifs");
    TCase *tc = tcase_create("double");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, an_unreferenced_wcifs_layer_folder_is_destroyed_through_hcs);
    tcase_add_test(tc, a_layer_hcs_will_not_destroy_is_kept_and_counted);
    tcase_add_test(tc, a_cim_no_image_uses_goes_with_its_region_files);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
