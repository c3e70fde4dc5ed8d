/*
 * Unit tests for daemon/volume_ttl.c's sweep step (volume_ttl_delete_listed)
 * on a real store: an expired volume goes, one kept for a reason (mounted)
 * is tried again later, and one that a client renewed, deleted and created
 * again, or whose handle another volume took, between the sweep's listing
 * and its delete stays with its data. The interleaving is made
 * deterministic by running the listing, then the client's change, then the
 * delete step, in that order, on one thread.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/volume_ttl.h"
#include "store/store.h"
#include "tests/unit/testutil.h"

static char *root;
static struct store *st;

static void
setup(void)
{
    struct err err = {0};
    root = tu_tmpdir("volume_ttl");
    ck_assert_msg(store_open(root, &(struct store_opts){0}, &st, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    store_close(st);
    tu_rmtree(root);
    free(root);
}

/* Creates handle with ttl_s (0: none) and a file data/f; returns its creation time. */
static int64_t
make_volume(const char *handle, int64_t ttl_s, const char *content)
{
    struct err err = {0};
    struct volume_rec *rec = NULL;
    struct volume_create_opts o = {.handle = handle, .ttl_s = ttl_s};
    ck_assert_msg(volume_create(st->volumes, &o, &rec, &err) == 0, "%s", err.msg);
    int64_t created_at = rec->created_at;
    volume_rec_free(rec);
    char *data = volume_data_path(st->volumes, handle);
    char path[4096];
    snprintf(path, sizeof(path), "%s/f", data);
    tu_write(path, content, strlen(content));
    free(data);
    return created_at;
}

static void
delete_volume(const char *handle)
{
    struct err err = {0};
    char **gone = NULL;
    size_t n = 0;
    ck_assert_msg(volume_delete(st->volumes, handle, false, &gone, &n, &err) == 0, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        free(gone[i]);
    free(gone);
}

/* The sweep's listing at now: exactly one volume, handle. */
static struct volume_expiry *
list_one(int64_t now, const char *handle)
{
    struct err err = {0};
    struct volume_expiry *listed = NULL;
    size_t n = 0;
    int64_t next = 0;
    ck_assert_msg(vmeta_expired(st->meta, now, &listed, &n, &next, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(listed[0].handle, handle);
    return listed;
}

/* The volume is recorded and its data/f holds content. */
static void
assert_kept(const char *handle, const char *content)
{
    struct err err = {0};
    struct volume_rec *rec = NULL;
    ck_assert_msg(vmeta_get(st->meta, handle, &rec, &err) == 0, "%s", err.msg);
    volume_rec_free(rec);
    char *data = volume_data_path(st->volumes, handle);
    char path[1024], got[256] = "";
    snprintf(path, sizeof(path), "%s/f", data);
    free(data);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: not there", path);
    got[fread(got, 1, sizeof(got) - 1, f)] = '\0';
    fclose(f);
    ck_assert_str_eq(got, content);
}

START_TEST(an_expired_volume_is_deleted_with_its_files)
{
    int64_t c = make_volume("v", 1, "old");
    struct volume_expiry *listed = list_one(c + 5, "v");
    ck_assert_int_eq(volume_ttl_delete_listed(st, listed, 1, c + 5), 0);
    free(listed);
    struct err err = {0};
    struct volume_rec *rec = NULL;
    ck_assert_int_eq(vmeta_get(st->meta, "v", &rec, &err), -ENOENT);
    char *data = volume_data_path(st->volumes, "v");
    ck_assert_int_ne(access(data, F_OK), 0);
    free(data);
}
END_TEST

START_TEST(a_mounted_expired_volume_is_kept_and_tried_again)
{
    int64_t c = make_volume("v", 1, "old");
    struct err err = {0};
    char *path = NULL;
    ck_assert_msg(volume_mount_add(st->volumes, "v", "ctr1", false, &path, &err) == 0, "%s",
                  err.msg);
    free(path);
    struct volume_expiry *listed = list_one(c + 5, "v");
    ck_assert_int_gt(volume_ttl_delete_listed(st, listed, 1, c + 5), c + 5);
    free(listed);
    assert_kept("v", "old");
}
END_TEST

START_TEST(a_volume_renewed_after_the_listing_is_kept)
{
    int64_t c = make_volume("v", 1, "old");
    struct volume_expiry *listed = list_one(c + 5, "v");
    /* A PATCH renewing the TTL commits (and answers 200) before the delete. */
    struct err err = {0};
    ck_assert_msg(vmeta_patch(st->meta, "v", NULL, 0, 3600, c + 5, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(volume_ttl_delete_listed(st, listed, 1, c + 5), 0);
    free(listed);
    assert_kept("v", "old");
}
END_TEST

START_TEST(a_volume_whose_ttl_was_removed_after_the_listing_is_kept)
{
    int64_t c = make_volume("v", 1, "old");
    struct volume_expiry *listed = list_one(c + 5, "v");
    struct err err = {0};
    ck_assert_msg(vmeta_patch(st->meta, "v", NULL, 0, 0, c + 5, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(volume_ttl_delete_listed(st, listed, 1, c + 5), 0);
    free(listed);
    assert_kept("v", "old");
}
END_TEST

START_TEST(a_volume_created_again_after_the_listing_is_kept_with_its_data)
{
    int64_t c = make_volume("v", 1, "old");
    struct volume_expiry *listed = list_one(c + 5, "v");
    /* A client deletes v, creates a new v without a TTL and fills it. */
    delete_volume("v");
    make_volume("v", 0, "new");
    ck_assert_int_eq(volume_ttl_delete_listed(st, listed, 1, c + 5), 0);
    free(listed);
    assert_kept("v", "new");
}
END_TEST

START_TEST(an_expired_volume_that_took_the_handle_since_is_not_the_one_listed)
{
    int64_t c = make_volume("v", 1, "old");
    struct volume_expiry *listed = list_one(c + 5, "v");
    /* The new v is expired too at the sweep's time (a clock that went back
     * would do it), but it is not the volume the sweep found expired. */
    delete_volume("v");
    struct err err = {0};
    struct volume_rec rec = {.created_at = c + 1, .ttl_s = 1, .expires_at = c + 2};
    snprintf(rec.handle, sizeof(rec.handle), "v");
    ck_assert_msg(vmeta_insert(st->meta, &rec, NULL, 0, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(volume_ttl_delete_listed(st, listed, 1, c + 5), 0);
    free(listed);
    struct volume_rec *got = NULL;
    ck_assert_msg(vmeta_get(st->meta, "v", &got, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(got->created_at, c + 1);
    volume_rec_free(got);
}
END_TEST

START_TEST(a_volume_deleted_after_the_listing_is_skipped)
{
    int64_t c = make_volume("v", 1, "old");
    make_volume("w", 2, "other");
    struct err err = {0};
    struct volume_expiry *listed = NULL;
    size_t n = 0;
    int64_t next = 0;
    ck_assert_msg(vmeta_expired(st->meta, c + 5, &listed, &n, &next, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(listed[0].handle, "v");
    delete_volume("v");
    /* The one gone is no reason to keep the other, nor to sweep again. */
    ck_assert_int_eq(volume_ttl_delete_listed(st, listed, n, c + 5), 0);
    free(listed);
    struct volume_rec *rec = NULL;
    ck_assert_int_eq(vmeta_get(st->meta, "w", &rec, &err), -ENOENT);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("volume_ttl");
    TCase *tc = tcase_create("sweep");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, an_expired_volume_is_deleted_with_its_files);
    tcase_add_test(tc, a_mounted_expired_volume_is_kept_and_tried_again);
    tcase_add_test(tc, a_volume_renewed_after_the_listing_is_kept);
    tcase_add_test(tc, a_volume_whose_ttl_was_removed_after_the_listing_is_kept);
    tcase_add_test(tc, a_volume_created_again_after_the_listing_is_kept_with_its_data);
    tcase_add_test(tc, an_expired_volume_that_took_the_handle_since_is_not_the_one_listed);
    tcase_add_test(tc, a_volume_deleted_after_the_listing_is_skipped);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
