/*
 * store/cim_writer_windows.c against the TEST DOUBLE of cimfs.dll
 * (tests/doubles/cimfs/), with layer tars this suite writes: what each
 * entry becomes in the image (metadata, bytes, streams, links, reparse
 * points, hives), a child layer forked from its parent with its
 * whiteouts, and failures (a refused tar, a cimfs.dll error, a commit
 * that dies half-way) that leave no .cim behind. The double is not
 * CimFS: these show what berth asks of cimfs.dll, not that a real host
 * accepts it.
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

#define SD_B64                                                                                     \
    "AQAEgBQAAAAgAAAAAAAAACwAAAABAQAAAAAABRIAAAABAQAAAAAABRIAAAACABwAAQAAAAAAFAD/AR8AAQEAAAAAAAUS" \
    "AAAA"
#define SD_LEN 72
/* FNV-1a 64 of "hello world", as the double hashes stream bytes. */
#define HELLO_FNV "779a65e7023cd2e7"
/* 1600000000.25 s after 1970 as a FILETIME. */
#define CTIME_FT "132444736002500000"

static struct cimfs_api *api;

static void
setup(void)
{
    api = cimfs_double_open("cimw");
}

static void
teardown(void)
{
    cimfs_double_close(api);
    api = NULL;
}

static bool
exists(const char *rel)
{
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\%s", cimfs_dir, rel);
    return GetFileAttributesA(path) != INVALID_FILE_ATTRIBUTES;
}

static int
write_layer(struct tbuf *t, const char *parent, const char *name, struct wcl_layer_info *info,
            struct err *err)
{
    t->off = 0;
    return cim_layer_write(api, cimfs_cims, parent, name, tb_read, t, info, err);
}

/* A base layer: directories, a file with every record, its stream, a link to it, hives. */
static void
base_tar(struct tbuf *t)
{
    entry(t, "Files", '5', NULL, NULL, (const char *const[]){"MSWINDOWS.fileattr=16", NULL});
    entry(t, "Files/Windows", '5', NULL, NULL, NULL);
    entry(t, "Files/Windows/hello.txt", '0', "hello world", NULL,
          (const char *const[]){"MSWINDOWS.rawsd=" SD_B64, "MSWINDOWS.fileattr=33",
                                "LIBARCHIVE.creationtime=1600000000.25", NULL});
    entry(t, "Files/Windows/hello.txt:Zone.Identifier", '0', "zone", NULL, NULL);
    entry(t, "Files/Windows/again.txt", '1', NULL, "Files/Windows/hello.txt", NULL);
    entry(t, "Files/Windows/link", '2', NULL, "hello.txt", NULL);
    entry(t, "Files/ProgramData", '5', NULL, NULL,
          (const char *const[]){"MSWINDOWS.sd=O:BAG:BAD:(A;;FA;;;SY)", NULL});
    entry(t, "Hives", '5', NULL, NULL, NULL);
    entry(t, "Hives/Software_Delta", '0', "regf", NULL, NULL);
    finish(t);
}

START_TEST(a_base_layer_becomes_an_image_with_every_record_kept)
{
    struct tbuf t = {0};
    base_tar(&t);
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(write_layer(&t, NULL, "base.cim", &info, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(info.entries, 9);
    ck_assert_uint_eq(info.hives, 1u << WCL_HIVE_SOFTWARE);
    const char *log = cimfs_slurp("calls.log");
    ck_assert_msg(strstr(log, "CimCreateImage dir=") && strstr(log, "existing=- new=base.cim"),
                  "%s", log);
    /* The file: attributes, descriptor, size, creation time, and its bytes. */
    ck_assert_msg(
        strstr(log, "CimCreateFile attr=0x21 size=11 sd=72 reparse=0 ctime=" CTIME_FT " mtime="),
        "%s", log);
    ck_assert_msg(
        strstr(log, "CimCloseStream bytes=11 hash=" HELLO_FNV " Files\\Windows\\hello.txt"), "%s",
        log);
    ck_assert_msg(
        strstr(log, "CimCreateAlternateStream size=4 Files\\Windows\\hello.txt:Zone.Identifier"),
        "%s", log);
    ck_assert_msg(
        strstr(log, "CimCreateHardLink Files\\Windows\\again.txt => Files\\Windows\\hello.txt"),
        "%s", log);
    /* The symlink: a reparse point (tag, lengths, flags and two UTF-16 names of 9 characters). */
    ck_assert_msg(strstr(log, "CimCreateFile attr=0x480 size=0 sd=0 reparse=60 "), "%s", log);
    ck_assert_msg(strstr(log, "CimCloseStream bytes=4 hash="), "%s", log);
    ck_assert_msg(strstr(log, "CimCommitImage name=base.cim entries=9"), "%s", log);
    /* The image the double wrote lists them all, the hive delta too. */
    const char *cim = cimfs_slurp("cims\\base.cim");
    ck_assert_msg(strncmp(cim, "berth-cimfs-double 1\n", 21) == 0 && strstr(cim, "\nend\n"), "%s",
                  cim);
    ck_assert_msg(strstr(cim, "hash=" HELLO_FNV " Files\\Windows\\hello.txt\n"), "%s", cim);
    ck_assert_msg(strstr(cim, " Hives\\Software_Delta\n"), "%s", cim);
    ck_assert_msg(strstr(cim, " Files\\Windows\\again.txt => Files\\Windows\\hello.txt"), "%s",
                  cim);
    free(t.p);
}
END_TEST

START_TEST(a_legacy_sddl_descriptor_reaches_the_image_in_binary)
{
    struct tbuf t = {0};
    base_tar(&t);
    struct err err = {0};
    ck_assert_msg(write_layer(&t, NULL, "base.cim", NULL, &err) == 0, "%s", err.msg);
    const char *log = cimfs_slurp("calls.log");
    const char *line = strstr(log, " Files\\ProgramData\n");
    ck_assert_ptr_nonnull(line);
    while (line > log && line[-1] != '\n')
        line--;
    unsigned sd = 0;
    ck_assert_msg(sscanf(line, "CimCreateFile attr=0x10 size=0 sd=%u", &sd) == 1, "%s", line);
    ck_assert_uint_gt(sd, 20); /* a header, an owner, a group and a DACL */
    free(t.p);
}
END_TEST

START_TEST(a_child_layer_is_forked_from_its_parent_and_applies_its_whiteouts)
{
    struct tbuf base = {0}, child = {0};
    base_tar(&base);
    struct err err = {0};
    ck_assert_msg(write_layer(&base, NULL, "base.cim", NULL, &err) == 0, "%s", err.msg);
    entry(&child, "Files", '5', NULL, NULL, NULL);
    entry(&child, "Files/Windows", '5', NULL, NULL, NULL);
    entry(&child, "Files/Windows/.wh.hello.txt", '0', NULL, NULL, NULL);
    entry(&child, "Files/.wh.never-there", '0', NULL, NULL, NULL);
    entry(&child, "Files/Windows/new.dll", '0', "MZ", NULL, NULL);
    entry(&child, "Hives", '5', NULL, NULL, NULL);
    entry(&child, "Hives/System_Delta", '0', "regf2", NULL, NULL);
    finish(&child);
    ck_assert_msg(write_layer(&child, "base.cim", "child.cim", NULL, &err) == 0, "%s", err.msg);
    const char *log = cimfs_slurp("calls.log");
    ck_assert_msg(strstr(log, "existing=base.cim new=child.cim"), "%s", log);
    ck_assert_msg(strstr(log, "CimDeletePath Files\\Windows\\hello.txt"), "%s", log);
    const char *cim = cimfs_slurp("cims\\child.cim");
    /* The fork holds the parent's entries but the deleted file and its stream;
     * the hard link to it keeps its bytes, as on NTFS. */
    ck_assert_msg(!strstr(cim, "hash=" HELLO_FNV " Files\\Windows\\hello.txt\n") &&
                      !strstr(cim, "Zone.Identifier"),
                  "%s", cim);
    ck_assert_msg(strstr(cim, "hash=" HELLO_FNV " Files\\Windows\\again.txt => "), "%s", cim);
    ck_assert_msg(strstr(cim, " Files\\Windows\\new.dll\n") &&
                      strstr(cim, " Hives\\Software_Delta\n") &&
                      strstr(cim, " Hives\\System_Delta\n") && strstr(cim, " Files\\ProgramData\n"),
                  "%s", cim);
    /* The parent image is untouched. */
    ck_assert_msg(
        strstr(cimfs_slurp("cims\\base.cim"), "hash=" HELLO_FNV " Files\\Windows\\hello.txt\n"),
        "base changed");
    free(base.p);
    free(child.p);
}
END_TEST

START_TEST(a_commit_that_fails_half_way_leaves_no_cim_behind)
{
    struct tbuf t = {0};
    base_tar(&t);
    struct err err = {0};
    ck_assert_msg(write_layer(&t, NULL, "base.cim", NULL, &err) == 0, "%s", err.msg);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "commit");
    ck_assert_int_eq(write_layer(&t, "base.cim", "child.cim", NULL, &err), -ENOSPC);
    ck_assert_msg(strstr(err.msg, "commit image child.cim"), "%s", err.msg);
    ck_assert(!exists("cims\\child.cim"));
    ck_assert(exists("cims\\base.cim"));
    /* base.cim with its region and object ID files; none of child's. */
    ck_assert_int_eq(cimfs_files_in("cims"), 3);
    free(t.p);
}
END_TEST

START_TEST(a_refused_tar_leaves_no_cim_and_commits_nothing)
{
    struct tbuf t = {0};
    entry(&t, "Files", '5', NULL, NULL, NULL);
    entry(&t, "Files/ok.txt", '0', "fine", NULL, NULL);
    entry(&t, "Files/../escape.txt", '0', "bad", NULL, NULL);
    finish(&t);
    struct err err = {0};
    ck_assert_int_eq(write_layer(&t, NULL, "bad.cim", NULL, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "escape.txt"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    const char *log = cimfs_slurp("calls.log");
    ck_assert_msg(!strstr(log, "CimCommitImage") && strstr(log, "CimCloseImage"), "%s", log);
    free(t.p);
}
END_TEST

START_TEST(a_cimfs_error_names_the_entry_and_leaves_no_cim)
{
    struct tbuf t = {0};
    base_tar(&t);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "write-stream");
    struct err err = {0};
    ck_assert_int_eq(write_layer(&t, NULL, "base.cim", NULL, &err), -ENOSPC);
    ck_assert_msg(strstr(err.msg, "write Files/Windows/hello.txt"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "hard-link");
    ck_assert_int_lt(write_layer(&t, NULL, "base.cim", NULL, &err), 0);
    ck_assert_msg(strstr(err.msg, "link Files/Windows/again.txt"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    free(t.p);
}
END_TEST

START_TEST(an_image_name_taken_or_malformed_is_refused_before_cimfs_is_called)
{
    struct tbuf t = {0};
    base_tar(&t);
    struct err err = {0};
    ck_assert_msg(write_layer(&t, NULL, "base.cim", NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(write_layer(&t, NULL, "base.cim", NULL, &err), -EEXIST);
    ck_assert(strstr(cimfs_slurp("cims\\base.cim"), "\nend\n")); /* still the first one */
    ck_assert_int_eq(write_layer(&t, NULL, "x\\..\\y.cim", NULL, &err), -EINVAL);
    ck_assert_int_eq(write_layer(&t, NULL, "layer.vhdx", NULL, &err), -EINVAL);
    ck_assert_int_eq(write_layer(&t, "../base.cim", "c.cim", NULL, &err), -EINVAL);
    ck_assert_int_eq(cimfs_files_in("cims"), 3); /* base.cim, its region and object ID files */
    free(t.p);
}
END_TEST

START_TEST(a_missing_parent_image_fails_the_create)
{
    struct tbuf t = {0};
    base_tar(&t);
    struct err err = {0};
    ck_assert_int_lt(write_layer(&t, "nope.cim", "child.cim", NULL, &err), 0);
    ck_assert_msg(strstr(err.msg, "create image child.cim"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("cims"), 0);
    free(t.p);
}
END_TEST

START_TEST(a_base_layer_links_its_registry_hives_under_hives_and_a_child_does_not)
{
    struct tbuf t = {0}, c = {0};
    entry(&t, "Files", '5', NULL, NULL, NULL);
    entry(&t, "Files/Windows", '5', NULL, NULL, NULL);
    entry(&t, "Files/Windows/System32", '5', NULL, NULL, NULL);
    entry(&t, "Files/Windows/System32/config", '5', NULL, NULL, NULL);
    entry(&t, "Files/Windows/System32/config/SYSTEM", '0', "regf-system", NULL, NULL);
    entry(&t, "Files/Windows/System32/config/DEFAULT", '0', "regf-default", NULL, NULL);
    finish(&t); /* no Hives/ in the tar: the writer makes it */
    struct err err = {0};
    ck_assert_msg(write_layer(&t, NULL, "base.cim", NULL, &err) == 0, "%s", err.msg);
    const char *cim = cimfs_slurp("cims\\base.cim");
    ck_assert_msg(strstr(cim, " Hives\n"), "%s", cim);
    ck_assert_msg(
        strstr(cim, " Hives\\SYSTEM_BASE => Files\\Windows\\System32\\config\\SYSTEM\n") &&
            strstr(cim, " Hives\\DEFAULTUSER_BASE => Files\\Windows\\System32\\config\\DEFAULT\n"),
        "%s", cim);
    ck_assert_msg(!strstr(cim, "SOFTWARE_BASE") && !strstr(cim, "SAM_BASE"), "%s", cim);

    entry(&c, "Files", '5', NULL, NULL, NULL);
    entry(&c, "Hives", '5', NULL, NULL, NULL);
    entry(&c, "Hives/System_Delta", '0', "delta", NULL, NULL);
    finish(&c);
    ck_assert_msg(write_layer(&c, "base.cim", "child.cim", NULL, &err) == 0, "%s", err.msg);
    const char *log = cimfs_slurp("calls.log");
    const char *child = strstr(log, "new=child.cim");
    ck_assert_ptr_nonnull(child);
    ck_assert_msg(!strstr(child, "CimCreateHardLink"), "%s", child);
    free(t.p);
    free(c.p);
}
END_TEST

static Suite *
cimfs_writer_suite(void)
{
    Suite *s = suite_create("cimfs_writer");
    TCase *tc = tcase_create("writer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_base_layer_becomes_an_image_with_every_record_kept);
    tcase_add_test(tc, a_legacy_sddl_descriptor_reaches_the_image_in_binary);
    tcase_add_test(tc, a_child_layer_is_forked_from_its_parent_and_applies_its_whiteouts);
    tcase_add_test(tc, a_commit_that_fails_half_way_leaves_no_cim_behind);
    tcase_add_test(tc, a_refused_tar_leaves_no_cim_and_commits_nothing);
    tcase_add_test(tc, a_cimfs_error_names_the_entry_and_leaves_no_cim);
    tcase_add_test(tc, an_image_name_taken_or_malformed_is_refused_before_cimfs_is_called);
    tcase_add_test(tc, a_missing_parent_image_fails_the_create);
    tcase_add_test(tc, a_base_layer_links_its_registry_hives_under_hives_and_a_child_does_not);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cimfs_writer_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
