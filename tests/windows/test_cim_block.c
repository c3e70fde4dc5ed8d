/*
 * Block and merged CIMs (store/cim_writer.h: cim_block_layer_write,
 * cim_block_merge) against the TEST DOUBLE of cimfs.dll
 * (tests/doubles/cimfs/): a layer becomes one single-file block CIM with
 * its whiteouts as tombstones, a refused tar or a cimfs.dll error leaves
 * no file, a merge adds its sources top-most first, and a table without
 * the block exports refuses with the reason. The double is not CimFS:
 * these show what berth asks of cimfs.dll, not that a real host accepts
 * it.
 */
#include "store/cim_writer.h"

#include <windows.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fixtures/wclayer_tar.h"
#include "store/cimfs_api.h"
#include "cimfs_double.h"

static struct cimfs_api *api;

static void
setup(void)
{
    api = cimfs_double_open("cimb");
}

static void
teardown(void)
{
    cimfs_double_close(api);
    api = NULL;
}

static const char *
block(const char *name)
{
    static char p[4][MAX_PATH * 2];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s\\%s", cimfs_cims, name);
    return p[k];
}

static int
write_block(struct tbuf *t, const char *file, bool base, struct err *err)
{
    t->off = 0;
    return cim_block_layer_write(api, block(file), "layer.cim", base, tb_read, t, NULL, err);
}

static void
base_tar(struct tbuf *t)
{
    entry(t, "Files", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows/hello.txt", '0', "hello world", NULL, NULL);
    entry(t, "Files/Windows/System32", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows/System32/config", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows/System32/config/SYSTEM", '0', "regf-system", NULL, NULL);
    finish(t);
}

static void
child_tar(struct tbuf *t)
{
    entry(t, "Files", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows/.wh.hello.txt", '0', NULL, NULL, NULL);
    entry(t, "Files/Windows/new.dll", '0', "MZ", NULL, NULL);
    finish(t);
}

START_TEST(a_layer_becomes_one_single_file_block_cim_with_its_whiteouts_as_tombstones)
{
    struct tbuf b = {0}, c = {0};
    base_tar(&b);
    child_tar(&c);
    struct err err = {0};
    ck_assert_msg(write_block(&b, "base.bcim", true, &err) == 0, "%s", err.msg);
    ck_assert_msg(write_block(&c, "child.bcim", false, &err) == 0, "%s", err.msg);
    const char *log = cimfs_slurp("calls.log");
    /* Single-file (0x8) and consistent (0x10), as hcsshim creates them. */
    ck_assert_msg(strstr(log, "CimCreateImage2 flags=0x18 file=") &&
                      strstr(log, "child.bcim new=layer.cim"),
                  "%s", log);
    ck_assert_msg(strstr(log, "CimTombstoneFile Files\\Windows\\hello.txt"), "%s", log);
    ck_assert_msg(!strstr(log, "CimDeletePath"), "%s", log);
    /* One file a layer: no region or object ID files beside it. */
    ck_assert_int_eq(cimfs_files_in("cims"), 2);
    const char *cim = cimfs_slurp("cims\\child.bcim");
    ck_assert_msg(strstr(cim, "berth-cimfs-double 1 block layer.cim\n") &&
                      strstr(cim, "\nt attr=0x0 size=0 ") &&
                      strstr(cim, " Files\\Windows\\hello.txt\n") && strstr(cim, "\nend\n"),
                  "%s", cim);
    /* The base links its hives, as a forked base does; the child does not. */
    ck_assert_msg(strstr(cimfs_slurp("cims\\base.bcim"),
                         " Hives\\SYSTEM_BASE => Files\\Windows\\System32\\config\\SYSTEM"),
                  "%s", cimfs_slurp("cims\\base.bcim"));
    ck_assert_msg(!strstr(cimfs_slurp("cims\\child.bcim"), "Hives"), "%s",
                  cimfs_slurp("cims\\child.bcim"));
    free(b.p);
    free(c.p);
}
END_TEST

START_TEST(a_refused_tar_or_a_failed_tombstone_leaves_no_block_file)
{
    struct tbuf t = {0};
    entry(&t, "Files", '5', NULL, NULL, NULL);
    entry(&t, "Files/ok.txt", '0', "fine", NULL, NULL);
    entry(&t, "Files/../escape.txt", '0', "bad", NULL, NULL);
    finish(&t);
    struct err err = {0};
    ck_assert_int_eq(write_block(&t, "bad.bcim", false, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "escape.txt"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    ck_assert_msg(!strstr(cimfs_slurp("calls.log"), "CimCommitImage"), "%s",
                  cimfs_slurp("calls.log"));
    struct tbuf c = {0};
    child_tar(&c);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "tombstone");
    struct err e2 = {0};
    ck_assert_int_lt(write_block(&c, "child.bcim", false, &e2), 0);
    ck_assert_msg(strstr(e2.msg, "tombstone Files/Windows/hello.txt"), "%s", e2.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    /* A commit cut short leaves nothing either. */
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "commit");
    struct err e3 = {0};
    ck_assert_int_eq(write_block(&c, "child.bcim", false, &e3), -ENOSPC);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    free(t.p);
    free(c.p);
}
END_TEST

START_TEST(a_block_file_that_exists_is_not_written_over)
{
    struct tbuf b = {0};
    base_tar(&b);
    struct err err = {0};
    ck_assert_msg(write_block(&b, "base.bcim", true, &err) == 0, "%s", err.msg);
    const char *before = cimfs_slurp("cims\\base.bcim");
    size_t len = strlen(before);
    ck_assert_int_eq(write_block(&b, "base.bcim", true, &err), -EEXIST);
    ck_assert_uint_eq(strlen(cimfs_slurp("cims\\base.bcim")), len);
    ck_assert_int_eq(cimfs_files_in("cims"), 1);
    free(b.p);
}
END_TEST

START_TEST(a_merge_adds_its_sources_top_most_first)
{
    struct tbuf b = {0}, c = {0};
    base_tar(&b);
    child_tar(&c);
    struct err err = {0};
    ck_assert_msg(write_block(&b, "base.bcim", true, &err) == 0, "%s", err.msg);
    ck_assert_msg(write_block(&c, "child.bcim", false, &err) == 0, "%s", err.msg);
    const char *src[] = {block("child.bcim"), block("base.bcim")};
    ck_assert_msg(
        cim_block_merge(api, block("merged.bcim"), "merged.cim", src, "layer.cim", 2, &err) == 0,
        "%s", err.msg);
    const char *log = cimfs_slurp("calls.log");
    const char *top = strstr(log, "CimAddFsToMergedImage2 flags=0x1 ");
    ck_assert_msg(top && strstr(top, "child.bcim\\layer.cim"), "%s", log);
    const char *low = strstr(top + 1, "CimAddFsToMergedImage2 flags=0x1 ");
    ck_assert_msg(low && strstr(low, "base.bcim\\layer.cim") &&
                      strstr(top, "child.bcim") < strstr(top, "base.bcim"),
                  "%s", log);
    const char *m = cimfs_slurp("cims\\merged.bcim");
    const char *mc = strstr(m, "child.bcim\\layer.cim"), *mb = strstr(m, "base.bcim\\layer.cim");
    ck_assert_msg(strstr(m, "block merged.cim\n") && mc && mb && mc < mb, "%s", m);
    free(b.p);
    free(c.p);
}
END_TEST

START_TEST(a_failed_merge_leaves_no_merged_file_and_one_source_is_refused)
{
    struct tbuf b = {0}, c = {0};
    base_tar(&b);
    child_tar(&c);
    struct err err = {0};
    ck_assert_msg(write_block(&b, "base.bcim", true, &err) == 0, "%s", err.msg);
    ck_assert_msg(write_block(&c, "child.bcim", false, &err) == 0, "%s", err.msg);
    /* A source that is not there. */
    const char *src[] = {block("child.bcim"), block("gone.bcim")};
    ck_assert_int_lt(
        cim_block_merge(api, block("merged.bcim"), "merged.cim", src, "layer.cim", 2, &err), 0);
    ck_assert_msg(strstr(err.msg, "gone.bcim"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 2);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "merge");
    const char *ok[] = {block("child.bcim"), block("base.bcim")};
    ck_assert_int_lt(
        cim_block_merge(api, block("merged.bcim"), "merged.cim", ok, "layer.cim", 2, &err), 0);
    ck_assert_int_eq(cimfs_files_in("cims"), 2);
    struct err e2 = {0};
    ck_assert_int_eq(
        cim_block_merge(api, block("merged.bcim"), "merged.cim", ok, "layer.cim", 1, &e2), -EINVAL);
    ck_assert_msg(strstr(e2.msg, "needs 2 source cims"), "%s", e2.msg);
    free(b.p);
    free(c.p);
}
END_TEST

START_TEST(a_cimfs_dll_without_the_block_exports_refuses_naming_the_missing_one)
{
    struct cimfs_api old = *api;
    old.CimMergeMountImage = NULL;
    snprintf(old.block_why, sizeof(old.block_why),
             "cimfs.dll has no CimMergeMountImage (block and merged CIMs need a later Windows "
             "build)");
    struct err err = {0};
    ck_assert_int_eq(cimfs_api_block(api, &err), 0);
    ck_assert_int_eq(cimfs_api_block(&old, &err), -ERR_UNAVAILABLE);
    struct tbuf b = {0};
    base_tar(&b);
    struct err e2 = {0};
    ck_assert_int_eq(
        cim_block_layer_write(&old, block("base.bcim"), "layer.cim", true, tb_read, &b, NULL, &e2),
        -ERR_UNAVAILABLE);
    ck_assert_msg(strstr(e2.msg, "has no CimMergeMountImage"), "%s", e2.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    free(b.p);
}
END_TEST

static Suite *
cim_block_suite(void)
{
    Suite *s = suite_create("cim_block");
    TCase *tc = tcase_create("cim_block");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_layer_becomes_one_single_file_block_cim_with_its_whiteouts_as_tombstones);
    tcase_add_test(tc, a_refused_tar_or_a_failed_tombstone_leaves_no_block_file);
    tcase_add_test(tc, a_block_file_that_exists_is_not_written_over);
    tcase_add_test(tc, a_merge_adds_its_sources_top_most_first);
    tcase_add_test(tc, a_failed_merge_leaves_no_merged_file_and_one_source_is_refused);
    tcase_add_test(tc, a_cimfs_dll_without_the_block_exports_refuses_naming_the_missing_one);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cim_block_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
