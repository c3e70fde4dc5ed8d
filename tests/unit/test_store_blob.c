/* Unit tests for store/blob.c: the content store and its writers. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "store/blob.h"
#include "tests/unit/testutil.h"

/* sha256("abc") and sha256("hello") */
#define D_ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define D_HELLO "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

static char *root;
static struct blob_store *bs;

static void
setup(void)
{
    struct err err = {0};
    root = tu_tmpdir("blob");
    bs = blob_store_open(root, &err);
    ck_assert_msg(bs != NULL, "%s", err.msg);
}

static void
teardown(void)
{
    blob_store_free(bs);
    tu_rmtree(root);
    free(root);
}

/* Number of entries (other than . and ..) in root/sub. */
static int
count_entries(const char *sub)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, sub);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static int
put(const char *content, const char *expected, char out[DIGEST_STR_LEN], struct err *err)
{
    struct blob_writer *w = blob_writer_new(bs, NULL, expected, -1, -1, err);
    ck_assert_ptr_nonnull(w);
    int ret = blob_writer_write(w, content, strlen(content), err);
    if (ret < 0) {
        blob_writer_abort(w);
        return ret;
    }
    return blob_writer_finish(w, out, NULL, err);
}

START_TEST(blob_writer_stores_blob_under_its_digest)
{
    struct err err = {0};
    char digest[DIGEST_STR_LEN];
    int64_t size = -1;
    struct blob_writer *w = blob_writer_new(bs, NULL, D_ABC, 3, 100, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(blob_writer_write(w, "a", 1, &err), 0);
    ck_assert_int_eq(blob_writer_write(w, "bc", 2, &err), 0);
    ck_assert_int_eq(blob_writer_size(w), 3);
    ck_assert_int_eq(blob_writer_finish(w, digest, &size, &err), 0);
    ck_assert_str_eq(digest, D_ABC);
    ck_assert_int_eq(size, 3);
    ck_assert(blob_exists(bs, D_ABC));

    char *path = blob_path(bs, D_ABC);
    char want[1024];
    snprintf(want, sizeof(want), "%s/content/sha256/%s", root, D_ABC + 7);
    ck_assert_str_eq(path, want);
    free(path);

    char *data = NULL;
    size_t len = 0;
    ck_assert_int_eq(blob_read_small(bs, D_ABC, 16, &data, &len, &err), 0);
    ck_assert_uint_eq(len, 3);
    ck_assert_str_eq(data, "abc");
    free(data);
    ck_assert_int_eq(blob_stat(bs, D_ABC, &size, &err), 0);
    ck_assert_int_eq(size, 3);
    ck_assert_int_eq(count_entries("tmp"), 0);
}
END_TEST

START_TEST(blob_writer_without_expected_digest_reports_it)
{
    struct err err = {0};
    char digest[DIGEST_STR_LEN];
    ck_assert_int_eq(put("hello", NULL, digest, &err), 0);
    ck_assert_str_eq(digest, D_HELLO);
    ck_assert(blob_exists(bs, D_HELLO));
}
END_TEST

START_TEST(blob_writer_rejects_wrong_digest)
{
    struct err err = {0};
    char digest[DIGEST_STR_LEN] = "";
    ck_assert_int_eq(put("hello", D_ABC, digest, &err), -ERR_INVALID_CONTENT);
    ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "blob " D_ABC) && strstr(err.msg, "content digest is " D_HELLO),
                  "message: %s", err.msg);
    ck_assert(!blob_exists(bs, D_ABC));
    ck_assert(!blob_exists(bs, D_HELLO));
    ck_assert_int_eq(count_entries("content/sha256"), 0);
    ck_assert_int_eq(count_entries("tmp"), 0);
    ck_assert_str_eq(digest, "");
}
END_TEST

START_TEST(blob_writer_rejects_short_content)
{
    struct err err = {0};
    struct blob_writer *w = blob_writer_new(bs, NULL, D_ABC, 4, -1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3, &err), 0);
    ck_assert_int_eq(blob_writer_finish(w, NULL, NULL, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "3 bytes, expected 4"), "message: %s", err.msg);
    ck_assert(!blob_exists(bs, D_ABC));
    ck_assert_int_eq(count_entries("tmp"), 0);
}
END_TEST

/* The temporary file holds what was accepted and nothing of the refused chunk. */
static void
assert_tmp_file_size(off_t want)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/tmp", root);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int files = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char f[1400];
        struct stat st;
        snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
        ck_assert_int_eq(stat(f, &st), 0);
        ck_assert_int_eq(st.st_size, want);
        files++;
    }
    closedir(d);
    ck_assert_int_eq(files, 1);
}

START_TEST(blob_writer_refuses_past_max_size_without_buffering)
{
    struct err err = {0};
    struct blob_writer *w = blob_writer_new(bs, NULL, D_ABC, -1, 10, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(blob_writer_write(w, "12345678", 8, &err), 0);
    ck_assert_int_eq(blob_writer_write(w, "12345", 5, &err), -ERR_INVALID_CONTENT);
    ck_assert_int_eq(err.code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, D_ABC) && strstr(err.msg, "limit of 10 bytes") &&
                      strstr(err.msg, "at least 13"),
                  "message: %s", err.msg);
    assert_tmp_file_size(8);
    blob_writer_abort(w);
    ck_assert_int_eq(count_entries("tmp"), 0);
}
END_TEST

START_TEST(blob_writer_refuses_past_expected_size)
{
    struct err err = {0};
    struct blob_writer *w = blob_writer_new(bs, NULL, D_HELLO, 5, 1000, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(blob_writer_write(w, "hello!", 6, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "expected 5 bytes"), "message: %s", err.msg);
    assert_tmp_file_size(0);
    blob_writer_abort(w);
    ck_assert(!blob_exists(bs, D_HELLO));
}
END_TEST

START_TEST(blob_writer_rejects_invalid_expected_digest)
{
    struct err err = {0};
    ck_assert_ptr_null(blob_writer_new(bs, NULL, "sha256:../../etc", -1, -1, &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(blob_staged_is_invisible_until_committed)
{
    struct err err = {0};
    char *staging = NULL;
    ck_assert_int_eq(blob_staging_dir_new(bs, &staging, &err), 0);
    struct blob_writer *w = blob_writer_new(bs, staging, D_ABC, 3, -1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3, &err), 0);
    ck_assert_int_eq(blob_writer_finish(w, NULL, NULL, &err), 0);
    ck_assert(!blob_exists(bs, D_ABC));
    char staged[1024];
    snprintf(staged, sizeof(staged), "%s/%s", staging, D_ABC + 7);
    struct stat st;
    ck_assert_int_eq(stat(staged, &st), 0);

    ck_assert_int_eq(blob_commit_staged(bs, staging, D_ABC, &err), 0);
    ck_assert(blob_exists(bs, D_ABC));
    ck_assert_int_eq(stat(staged, &st), -1);
    /* Committing again is fine: the blob is there. */
    ck_assert_int_eq(blob_commit_staged(bs, staging, D_ABC, &err), 0);
    ck_assert_int_eq(blob_commit_staged(bs, staging, D_HELLO, &err), -ENOENT);
    tu_rmtree(staging);
    free(staging);
}
END_TEST

START_TEST(blob_commit_staged_drops_copy_when_blob_exists)
{
    struct err err = {0};
    char *staging = NULL;
    ck_assert_int_eq(put("abc", D_ABC, NULL, &err), 0);
    ck_assert_int_eq(blob_staging_dir_new(bs, &staging, &err), 0);
    struct blob_writer *w = blob_writer_new(bs, staging, D_ABC, 3, -1, &err);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3, &err), 0);
    ck_assert_int_eq(blob_writer_finish(w, NULL, NULL, &err), 0);
    ck_assert_int_eq(blob_commit_staged(bs, staging, D_ABC, &err), 0);
    char staged[1024];
    struct stat st;
    snprintf(staged, sizeof(staged), "%s/%s", staging, D_ABC + 7);
    ck_assert_int_eq(stat(staged, &st), -1);
    ck_assert(blob_exists(bs, D_ABC));
    tu_rmtree(staging);
    free(staging);
}
END_TEST

START_TEST(blob_writer_existing_blob_drops_temporary)
{
    struct err err = {0};
    ck_assert_int_eq(put("abc", D_ABC, NULL, &err), 0);
    ck_assert_int_eq(put("abc", D_ABC, NULL, &err), 0);
    ck_assert_int_eq(count_entries("content/sha256"), 1);
    ck_assert_int_eq(count_entries("tmp"), 0);
}
END_TEST

START_TEST(blob_read_small_refuses_large_blob)
{
    struct err err = {0};
    char *data = NULL;
    ck_assert_int_eq(put("hello", NULL, NULL, &err), 0);
    ck_assert_int_eq(blob_read_small(bs, D_HELLO, 4, &data, NULL, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_null(data);
    ck_assert_msg(strstr(err.msg, "5 bytes is over the limit of 4"), "message: %s", err.msg);
    ck_assert_int_eq(blob_read_small(bs, D_ABC, 4, &data, NULL, &err), -ENOENT);
}
END_TEST

START_TEST(blob_paths_refuse_invalid_digests)
{
    struct err err = {0};
    int64_t size;
    char *data = NULL;
    ck_assert_ptr_null(blob_path(bs, "sha256:../../../etc/passwd"));
    ck_assert_ptr_null(blob_path(bs, NULL));
    ck_assert(!blob_exists(bs, "sha256:.."));
    ck_assert_int_eq(blob_stat(bs, "../meta.db", &size, &err), -EINVAL);
    ck_assert_int_eq(blob_read_small(bs, "sha256:/etc/passwd", 100, &data, NULL, &err), -EINVAL);
    ck_assert_int_eq(blob_remove(bs, "sha256:abc", &err), -EINVAL);
    ck_assert_int_eq(blob_commit_staged(bs, root, "tmp", &err), -EINVAL);
}
END_TEST

START_TEST(blob_remove_then_missing)
{
    struct err err = {0};
    int64_t size;
    ck_assert_int_eq(put("abc", D_ABC, NULL, &err), 0);
    ck_assert_int_eq(blob_remove(bs, D_ABC, &err), 0);
    ck_assert(!blob_exists(bs, D_ABC));
    ck_assert_int_eq(blob_stat(bs, D_ABC, &size, &err), -ENOENT);
    ck_assert_int_eq(blob_remove(bs, D_ABC, &err), -ENOENT);
    ck_assert_int_eq(err.code, ENOENT);
}
END_TEST

struct listed {
    int n;
    int64_t total;
    bool abc, hello;
};

static int
list_cb(const char *digest, int64_t size, void *ctx)
{
    struct listed *l = ctx;
    l->n++;
    l->total += size;
    l->abc |= strcmp(digest, D_ABC) == 0;
    l->hello |= strcmp(digest, D_HELLO) == 0;
    return 0;
}

static int
stop_cb(const char *digest, int64_t size, void *ctx)
{
    return 42;
}

START_TEST(blob_list_reports_blobs_and_skips_other_files)
{
    struct err err = {0};
    struct listed l = {0};
    char junk[1024];
    ck_assert_int_eq(put("abc", NULL, NULL, &err), 0);
    ck_assert_int_eq(put("hello", NULL, NULL, &err), 0);
    snprintf(junk, sizeof(junk), "%s/content/sha256/not-a-digest", root);
    tu_write(junk, "x", 1);
    ck_assert_int_eq(blob_list(bs, list_cb, &l, &err), 0);
    ck_assert_int_eq(l.n, 2);
    ck_assert_int_eq(l.total, 8);
    ck_assert(l.abc && l.hello);
    ck_assert_int_eq(blob_list(bs, stop_cb, NULL, &err), 42);
}
END_TEST

START_TEST(blob_store_clean_tmp_removes_leftovers)
{
    struct err err = {0};
    char path[1024];
    char *staging = NULL;
#ifdef _WIN32
    /* Windows keeps the name of an open file until it is closed, and a
     * crash closes it: the writer's leftover is a closed file here. */
    struct blob_writer *w = NULL;
    snprintf(path, sizeof(path), "%s/tmp/blob-leftover", root);
    tu_write(path, "abc", 3);
#else
    struct blob_writer *w = blob_writer_new(bs, NULL, NULL, -1, -1, &err);
    ck_assert_int_eq(blob_writer_write(w, "abc", 3, &err), 0);
#endif
    ck_assert_int_eq(blob_staging_dir_new(bs, &staging, &err), 0);
    snprintf(path, sizeof(path), "%s/sub/file", staging);
    tu_write(path, "x", 1);
    ck_assert_int_eq(count_entries("tmp"), 2);
    /* A crash: the writer is never finished. */
    ck_assert_int_eq(blob_store_clean_tmp(bs, &err), 0);
    ck_assert_int_eq(count_entries("tmp"), 0);
    blob_writer_abort(w);
    free(staging);
    /* The store still works afterwards. */
    ck_assert_int_eq(put("abc", D_ABC, NULL, &err), 0);
}
END_TEST

START_TEST(blob_store_open_creates_layout)
{
    struct err err = {0};
    char path[1024];
    struct stat st;
    snprintf(path, sizeof(path), "%s/nested/root", root);
    struct blob_store *other = blob_store_open(path, &err);
    ck_assert_msg(other != NULL, "%s", err.msg);
    snprintf(path, sizeof(path), "%s/nested/root/content/sha256", root);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    snprintf(path, sizeof(path), "%s/nested/root/tmp", root);
    ck_assert_int_eq(stat(path, &st), 0);
    blob_store_free(other);
    blob_store_free(NULL);
}
END_TEST

static Suite *
blob_suite(void)
{
    Suite *s = suite_create("store_blob");
    TCase *tc = tcase_create("blob");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, blob_writer_stores_blob_under_its_digest);
    tcase_add_test(tc, blob_writer_without_expected_digest_reports_it);
    tcase_add_test(tc, blob_writer_rejects_wrong_digest);
    tcase_add_test(tc, blob_writer_rejects_short_content);
    tcase_add_test(tc, blob_writer_refuses_past_max_size_without_buffering);
    tcase_add_test(tc, blob_writer_refuses_past_expected_size);
    tcase_add_test(tc, blob_writer_rejects_invalid_expected_digest);
    tcase_add_test(tc, blob_staged_is_invisible_until_committed);
    tcase_add_test(tc, blob_commit_staged_drops_copy_when_blob_exists);
    tcase_add_test(tc, blob_writer_existing_blob_drops_temporary);
    tcase_add_test(tc, blob_read_small_refuses_large_blob);
    tcase_add_test(tc, blob_paths_refuse_invalid_digests);
    tcase_add_test(tc, blob_remove_then_missing);
    tcase_add_test(tc, blob_list_reports_blobs_and_skips_other_files);
    tcase_add_test(tc, blob_store_clean_tmp_removes_leftovers);
    tcase_add_test(tc, blob_store_open_creates_layout);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(blob_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
