/* Unit tests for store/meta.c: the metadata database. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/meta.h"
#include "tests/unit/testutil.h"

static char *root;
static struct meta *meta;

static void
setup(void)
{
    struct err err = {0};
    root = tu_tmpdir("meta");
    ck_assert_msg(meta_open(root, &meta, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    meta_close(meta);
    tu_rmtree(root);
    free(root);
}

static void
dig(const char *seed, char out[DIGEST_STR_LEN])
{
    ck_assert_int_eq(digest_of(seed, strlen(seed), out), 0);
}

/* An image for tests, with consistent chain IDs; all storage is inside. */
struct test_image {
    struct meta_image img;
    struct meta_layer layers[3];
    struct meta_blob blobs[5];
    struct meta_blob_ref refs[4];
};

static void
make_image(struct test_image *t, const char *seed, size_t n_layers, int64_t size, int64_t unpacked)
{
    char buf[128];
    struct err err = {0};
    memset(t, 0, sizeof(*t));
    snprintf(buf, sizeof(buf), "%s-manifest", seed);
    dig(buf, t->img.digest);
    snprintf(buf, sizeof(buf), "%s-config", seed);
    dig(buf, t->img.config_digest);
    t->img.platform.os = "linux";
    t->img.platform.architecture = "arm64";
    t->img.platform.variant = "v8";
    t->img.platform.os_version = "";
    t->img.size_bytes = size;
    t->img.unpacked_bytes = unpacked;
    ck_assert_uint_le(n_layers, 3);
    const char *parent = NULL;
    snprintf(t->blobs[0].digest, DIGEST_STR_LEN, "%s", t->img.digest);
    t->blobs[0].size = 100;
    t->blobs[0].media_type = "application/vnd.oci.image.manifest.v1+json";
    snprintf(t->blobs[1].digest, DIGEST_STR_LEN, "%s", t->img.config_digest);
    t->blobs[1].size = 50;
    snprintf(t->refs[0].parent, DIGEST_STR_LEN, "%s", t->img.digest);
    snprintf(t->refs[0].child, DIGEST_STR_LEN, "%s", t->img.config_digest);
    for (size_t i = 0; i < n_layers; i++) {
        struct meta_layer *l = &t->layers[i];
        snprintf(buf, sizeof(buf), "%s-layer%zu", seed, i);
        dig(buf, l->digest);
        /* Layers shared between seeds: the diff id depends on i only. */
        snprintf(buf, sizeof(buf), "diff%zu", i);
        dig(buf, l->diff_id);
        ck_assert_int_eq(digest_chain_id(parent, l->diff_id, l->chain_id, &err), 0);
        parent = l->chain_id;
        l->size = 10 * (int64_t)(i + 1);
        l->unpacked_size = 1000 * (int64_t)(i + 1);
        snprintf(t->blobs[2 + i].digest, DIGEST_STR_LEN, "%s", l->digest);
        t->blobs[2 + i].size = l->size;
        snprintf(t->refs[1 + i].parent, DIGEST_STR_LEN, "%s", t->img.digest);
        snprintf(t->refs[1 + i].child, DIGEST_STR_LEN, "%s", l->digest);
    }
    t->img.layers = t->layers;
    t->img.n_layers = n_layers;
    t->img.blobs = t->blobs;
    t->img.n_blobs = 2 + n_layers;
    t->img.refs = t->refs;
    t->img.n_refs = 1 + n_layers;
}

static void
put_ok(struct test_image *t, const char *name)
{
    struct err err = {0};
    bool created = false;
    ck_assert_msg(meta_image_put(meta, &t->img, name, &created, &err) == 0, "%s", err.msg);
    ck_assert(created);
}

START_TEST(meta_image_put_and_get_round_trip)
{
    struct test_image t;
    struct err err = {0};
    make_image(&t, "one", 2, 123, 4567);
    t.img.created_at = 1000;
    t.img.last_used_at = 2000;
    put_ok(&t, "example.com/one:latest");

    struct meta_image *img = NULL;
    ck_assert_msg(meta_image_get(meta, t.img.digest, &img, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(img->digest, t.img.digest);
    ck_assert_str_eq(img->config_digest, t.img.config_digest);
    ck_assert_uint_eq(img->n_names, 1);
    ck_assert_str_eq(img->names[0], "example.com/one:latest");
    ck_assert_str_eq(img->platform.os, "linux");
    ck_assert_str_eq(img->platform.architecture, "arm64");
    ck_assert_str_eq(img->platform.variant, "v8");
    ck_assert_str_eq(img->platform.os_version, "");
    ck_assert_int_eq(img->size_bytes, 123);
    ck_assert_int_eq(img->unpacked_bytes, 4567);
    ck_assert_int_eq(img->created_at, 1000);
    ck_assert_int_eq(img->last_used_at, 2000);
    ck_assert_int_eq(img->users, 0);
    ck_assert_uint_eq(img->n_layers, 2);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_str_eq(img->layers[i].digest, t.layers[i].digest);
        ck_assert_str_eq(img->layers[i].diff_id, t.layers[i].diff_id);
        ck_assert_str_eq(img->layers[i].chain_id, t.layers[i].chain_id);
        ck_assert_int_eq(img->layers[i].size, t.layers[i].size);
        ck_assert_int_eq(img->layers[i].unpacked_size, t.layers[i].unpacked_size);
    }
    ck_assert_str_eq(img->layers[0].chain_id, img->layers[0].diff_id);
    ck_assert_ptr_null(img->blobs);
    meta_image_free(img);
    meta_image_free(NULL);

    /* The layers' snapshots are recorded too. */
    bool exists = false;
    ck_assert_int_eq(meta_snapshot_exists(meta, t.layers[1].chain_id, &exists, &err), 0);
    ck_assert(exists);
}
END_TEST

START_TEST(meta_image_put_existing_adds_name_only)
{
    struct test_image t;
    struct err err = {0};
    bool created = true;
    make_image(&t, "one", 1, 1, 1);
    t.img.last_used_at = 5;
    put_ok(&t, "a");
    t.img.last_used_at = 0;
    ck_assert_int_eq(meta_image_put(meta, &t.img, "b", &created, &err), 0);
    ck_assert(!created);
    struct meta_image *img = NULL;
    ck_assert_int_eq(meta_image_get(meta, "b", &img, &err), 0);
    ck_assert_uint_eq(img->n_names, 2);
    ck_assert_str_eq(img->names[0], "a");
    ck_assert_str_eq(img->names[1], "b");
    ck_assert_int_gt(img->last_used_at, 5);
    meta_image_free(img);
}
END_TEST

START_TEST(meta_image_get_by_prefix_and_name)
{
    struct test_image t;
    struct err err = {0};
    struct meta_image *img = NULL;
    char ref[80];
    make_image(&t, "one", 1, 1, 1);
    put_ok(&t, "busybox:latest");

    ck_assert_int_eq(meta_image_get(meta, "busybox:latest", &img, &err), 0);
    ck_assert_str_eq(img->digest, t.img.digest);
    meta_image_free(img);

    snprintf(ref, sizeof(ref), "%.12s", digest_hex(t.img.digest));
    ck_assert_int_eq(meta_image_get(meta, ref, &img, &err), 0);
    ck_assert_str_eq(img->digest, t.img.digest);
    meta_image_free(img);

    snprintf(ref, sizeof(ref), "%.20s", t.img.digest);
    ck_assert_int_eq(meta_image_get(meta, ref, &img, &err), 0);
    ck_assert_str_eq(img->digest, t.img.digest);
    meta_image_free(img);

    /* Too short a prefix is not a prefix. */
    img = NULL;
    snprintf(ref, sizeof(ref), "%.11s", digest_hex(t.img.digest));
    ck_assert_int_eq(meta_image_get(meta, ref, &img, &err), -ENOENT);
    ck_assert_ptr_null(img);
    ck_assert_int_eq(meta_image_get(meta, "busybox:other", &img, &err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "busybox:other"));
    ck_assert_int_eq(meta_image_get(meta, "", &img, &err), -EINVAL);
}
END_TEST

START_TEST(meta_image_get_ambiguous_prefix_conflicts)
{
    struct test_image a, b;
    struct err err = {0};
    struct meta_image *img = NULL;
    make_image(&a, "a", 0, 1, 1);
    make_image(&b, "b", 0, 1, 1);
    /* Identities need not be real hashes for the database: share 14 digits. */
    strcpy(a.img.digest, "sha256:00112233445566aa000000000000000000000000000000000000000000000000");
    strcpy(b.img.digest, "sha256:00112233445566bb000000000000000000000000000000000000000000000000");
    a.img.n_refs = b.img.n_refs = 0;
    put_ok(&a, NULL);
    put_ok(&b, NULL);
    ck_assert_int_eq(meta_image_get(meta, "00112233445566", &img, &err), -ERR_CONFLICT);
    ck_assert_msg(strstr(err.msg, "ambiguous") && strstr(err.msg, a.img.digest) &&
                      strstr(err.msg, b.img.digest),
                  "message: %s", err.msg);
    ck_assert_ptr_null(img);
    ck_assert_int_eq(meta_image_get(meta, "sha256:00112233445566b", &img, &err), 0);
    ck_assert_str_eq(img->digest, b.img.digest);
    meta_image_free(img);
}
END_TEST

START_TEST(meta_image_name_moves_between_images)
{
    struct test_image a, b;
    struct err err = {0};
    struct meta_image *img = NULL;
    make_image(&a, "a", 1, 1, 1);
    make_image(&b, "b", 1, 1, 1);
    put_ok(&a, "app:latest");
    put_ok(&b, "app:latest");
    ck_assert_int_eq(meta_image_get(meta, "app:latest", &img, &err), 0);
    ck_assert_str_eq(img->digest, b.img.digest);
    meta_image_free(img);
    ck_assert_int_eq(meta_image_get(meta, a.img.digest, &img, &err), 0);
    ck_assert_uint_eq(img->n_names, 0);
    meta_image_free(img);
}
END_TEST

START_TEST(meta_image_put_rejects_wrong_chain_id)
{
    struct test_image t;
    struct err err = {0};
    struct meta_image *img = NULL;
    make_image(&t, "one", 2, 1, 1);
    strcpy(t.layers[1].chain_id, t.layers[1].diff_id);
    ck_assert_int_eq(meta_image_put(meta, &t.img, NULL, NULL, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "layer 1: chain id"), "message: %s", err.msg);
    ck_assert_int_eq(meta_image_get(meta, t.img.digest, &img, &err), -ENOENT);
}
END_TEST

START_TEST(meta_image_put_is_all_or_nothing)
{
    struct test_image t;
    struct err err = {0};
    struct meta_image *img = NULL;
    bool exists = true;
    make_image(&t, "one", 2, 1, 1);
    /* A reference whose parent is not among the blobs fails the foreign key
     * after blobs were inserted: nothing of the import may remain. */
    dig("stranger", t.refs[2].parent);
    ck_assert_int_lt(meta_image_put(meta, &t.img, "x", NULL, &err), 0);
    ck_assert_int_eq(meta_image_get(meta, t.img.digest, &img, &err), -ENOENT);
    ck_assert_int_eq(meta_image_get(meta, "x", &img, &err), -ENOENT);
    ck_assert_int_eq(meta_snapshot_exists(meta, t.layers[0].chain_id, &exists, &err), 0);
    ck_assert(!exists);
}
END_TEST

START_TEST(meta_survives_reopen)
{
    struct test_image t;
    struct err err = {0};
    struct meta_image *img = NULL;
    make_image(&t, "one", 3, 10, 20);
    put_ok(&t, "kept:1");
    ck_assert_int_eq(meta_image_use_add(meta, t.img.digest, "c1", &err), 0);
    meta_close(meta);
    meta = NULL;
    ck_assert_msg(meta_open(root, &meta, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(meta_image_get(meta, "kept:1", &img, &err), 0);
    ck_assert_str_eq(img->digest, t.img.digest);
    ck_assert_uint_eq(img->n_layers, 3);
    ck_assert_str_eq(img->layers[2].chain_id, t.layers[2].chain_id);
    ck_assert_int_eq(img->users, 1);
    meta_image_free(img);
}
END_TEST

START_TEST(meta_open_refuses_newer_schema)
{
    struct err err = {0};
    char path[1024];
    sqlite3 *db;
    meta_close(meta);
    meta = NULL;
    snprintf(path, sizeof(path), "%s/meta.db", root);
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_lt(meta_open(root, &meta, &err), 0);
    ck_assert_ptr_null(meta);
    ck_assert_msg(strstr(err.msg, "schema version 99"), "message: %s", err.msg);
}
END_TEST

START_TEST(image_delete_with_users_conflicts)
{
    struct test_image t;
    struct err err = {0};
    char digest[DIGEST_STR_LEN];
    bool removed = true;
    int64_t count = -1;
    make_image(&t, "one", 1, 1, 1);
    put_ok(&t, "app");
    ck_assert_int_eq(meta_image_use_add(meta, t.img.digest, "ctr-1", &err), 0);
    ck_assert_int_eq(meta_image_use_add(meta, t.img.digest, "ctr-1", &err), 0);
    ck_assert_int_eq(meta_image_use_add(meta, t.img.digest, "ctr-2", &err), 0);
    ck_assert_int_eq(meta_image_use_count(meta, t.img.digest, &count, &err), 0);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(meta_image_delete(meta, "app", digest, &removed, &err), -ERR_CONFLICT);
    ck_assert_msg(strstr(err.msg, "in use by 2 containers"), "message: %s", err.msg);
    ck_assert_int_eq(meta_image_use_remove(meta, t.img.digest, "ctr-1", &err), 0);
    ck_assert_int_eq(meta_image_use_remove(meta, t.img.digest, "ctr-1", &err), -ENOENT);
    ck_assert_int_eq(meta_image_delete(meta, t.img.digest, digest, &removed, &err), -ERR_CONFLICT);
    ck_assert_int_eq(meta_image_use_remove(meta, t.img.digest, "ctr-2", &err), 0);
    ck_assert_int_eq(meta_image_delete(meta, "app", digest, &removed, &err), 0);
    ck_assert(removed);
    ck_assert_str_eq(digest, t.img.digest);
    struct meta_image *img = NULL;
    ck_assert_int_eq(meta_image_get(meta, t.img.digest, &img, &err), -ENOENT);
    ck_assert_int_eq(meta_image_use_add(meta, t.img.digest, "ctr-3", &err), -ENOENT);
}
END_TEST

static bool
keep_ctr_1(void *arg, const char *user_id)
{
    (*(int *)arg)++;
    return strcmp(user_id, "ctr-1") == 0;
}

START_TEST(image_users_retain_drops_only_users_not_kept)
{
    /* The start-up's reconciliation: uses by containers that have no
     * record any more go, in one pass; the others stay. */
    struct test_image a, b;
    struct err err = {0};
    int64_t count = -1;
    int asked = 0;
    unsigned dropped = 99;
    make_image(&a, "one", 1, 1, 1);
    put_ok(&a, "a");
    make_image(&b, "two", 1, 1, 2);
    put_ok(&b, "b");
    ck_assert_int_eq(meta_image_use_add(meta, a.img.digest, "ctr-1", &err), 0);
    ck_assert_int_eq(meta_image_use_add(meta, a.img.digest, "ctr-2", &err), 0);
    ck_assert_int_eq(meta_image_use_add(meta, b.img.digest, "ctr-2", &err), 0);
    ck_assert_int_eq(meta_image_use_add(meta, b.img.digest, "ctr-3", &err), 0);
    ck_assert_msg(meta_image_users_retain(meta, keep_ctr_1, &asked, &dropped, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(asked, 3); /* once per user, not per use */
    ck_assert_uint_eq(dropped, 2);
    ck_assert_int_eq(meta_image_use_count(meta, a.img.digest, &count, &err), 0);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(meta_image_use_count(meta, b.img.digest, &count, &err), 0);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(meta_image_use_remove(meta, a.img.digest, "ctr-1", &err), 0);
    /* Nothing left to drop: zero, and no error. */
    ck_assert_int_eq(meta_image_users_retain(meta, keep_ctr_1, &asked, &dropped, &err), 0);
    ck_assert_uint_eq(dropped, 0);
}
END_TEST

START_TEST(image_delete_by_name_keeps_image_with_other_names)
{
    struct test_image t;
    struct err err = {0};
    struct meta_image *img = NULL;
    bool removed = true;
    make_image(&t, "one", 1, 1, 1);
    put_ok(&t, "a");
    ck_assert_int_eq(meta_image_put(meta, &t.img, "b", NULL, &err), 0);
    ck_assert_int_eq(meta_image_delete(meta, "a", NULL, &removed, &err), 0);
    ck_assert(!removed);
    ck_assert_int_eq(meta_image_get(meta, "a", &img, &err), -ENOENT);
    ck_assert_int_eq(meta_image_get(meta, "b", &img, &err), 0);
    ck_assert_uint_eq(img->n_names, 1);
    meta_image_free(img);
    ck_assert_int_eq(meta_image_delete(meta, "b", NULL, &removed, &err), 0);
    ck_assert(removed);
    ck_assert_int_eq(meta_image_get(meta, t.img.digest, &img, &err), -ENOENT);
    ck_assert_int_eq(meta_image_delete(meta, "b", NULL, &removed, &err), -ENOENT);
}
END_TEST

START_TEST(meta_image_list_and_touch)
{
    struct test_image a, b;
    struct err err = {0};
    struct meta_image **imgs = NULL, *img = NULL;
    size_t n = 99;
    ck_assert_int_eq(meta_image_list(meta, &imgs, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(imgs);
    make_image(&a, "a", 1, 1, 1);
    make_image(&b, "b", 2, 1, 1);
    a.img.created_at = 100;
    b.img.created_at = 200;
    put_ok(&a, "a");
    put_ok(&b, "b");
    ck_assert_int_eq(meta_image_list(meta, &imgs, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(imgs[0]->digest, b.img.digest);
    ck_assert_uint_eq(imgs[0]->n_layers, 2);
    ck_assert_str_eq(imgs[1]->names[0], "a");
    meta_image_list_free(imgs, n);

    ck_assert_int_eq(meta_image_touch(meta, "a", 4242, &err), 0);
    ck_assert_int_eq(meta_image_get(meta, a.img.digest, &img, &err), 0);
    ck_assert_int_eq(img->last_used_at, 4242);
    meta_image_free(img);
    ck_assert_int_eq(meta_image_touch(meta, "nope", 1, &err), -ENOENT);
}
END_TEST

START_TEST(meta_snapshot_put_and_users)
{
    struct err err = {0};
    char c1[DIGEST_STR_LEN], c2[DIGEST_STR_LEN];
    bool exists = true;
    dig("c1", c1);
    dig("c2", c2);
    ck_assert_int_eq(meta_snapshot_exists(meta, c1, &exists, &err), 0);
    ck_assert(!exists);
    ck_assert_int_eq(meta_snapshot_put(meta, c1, NULL, 10, &err), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, c2, c1, 10, &err), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, c2, c1, 10, &err), 0);
    ck_assert_int_eq(meta_snapshot_exists(meta, c2, &exists, &err), 0);
    ck_assert(exists);
    ck_assert_int_eq(meta_snapshot_put(meta, "sha256:bad", NULL, 1, &err), -EINVAL);
    ck_assert_int_eq(meta_snapshot_use_add(meta, c2, "ctr", &err), 0);
    ck_assert_int_eq(meta_snapshot_use_remove(meta, c2, "ctr", &err), 0);
    ck_assert_int_eq(meta_snapshot_use_remove(meta, c2, "ctr", &err), -ENOENT);
    dig("c3", c1);
    ck_assert_int_eq(meta_snapshot_use_add(meta, c1, "ctr", &err), -ENOENT);
}
END_TEST

START_TEST(meta_lease_lifecycle)
{
    struct err err = {0};
    char id[META_LEASE_ID_LEN], id2[META_LEASE_ID_LEN], d[DIGEST_STR_LEN];
    dig("blob", d);
    ck_assert_int_eq(meta_lease_new(meta, id, &err), 0);
    ck_assert_uint_eq(strlen(id), 32);
    ck_assert_int_eq(meta_lease_new(meta, id2, &err), 0);
    ck_assert_str_ne(id, id2);
    ck_assert_int_eq(meta_lease_add_blob(meta, id, d, &err), 0);
    ck_assert_int_eq(meta_lease_add_blob(meta, id, d, &err), 0);
    ck_assert_int_eq(meta_lease_add_snapshot(meta, id, d, &err), 0);
    ck_assert_int_eq(meta_lease_add_blob(meta, id, "sha256:x", &err), -EINVAL);
    ck_assert_int_eq(meta_lease_add_blob(meta, "nolease", d, &err), -ENOENT);
    ck_assert_int_eq(meta_lease_remove(meta, id, &err), 0);
    ck_assert_int_eq(meta_lease_remove(meta, id, &err), -ENOENT);
    ck_assert_int_eq(meta_lease_add_blob(meta, id, d, &err), -ENOENT);
    ck_assert_int_eq(meta_lease_clear_all(meta, &err), 0);
    ck_assert_int_eq(meta_lease_remove(meta, id2, &err), -ENOENT);
}
END_TEST

static void
free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

START_TEST(prune_keep_bytes_removes_lru_first)
{
    struct test_image a, b, c;
    struct err err = {0};
    char **removed = NULL;
    size_t n = 0;
    make_image(&a, "a", 1, 100, 0);
    make_image(&b, "b", 1, 100, 0);
    make_image(&c, "c", 1, 100, 0);
    a.img.last_used_at = 30; /* most recent */
    b.img.last_used_at = 10; /* least recent */
    c.img.last_used_at = 20;
    put_ok(&a, NULL);
    put_ok(&b, NULL);
    put_ok(&c, NULL);
    ck_assert_int_eq(meta_prune_images(meta, -1, 150, 100, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(removed[0], b.img.digest);
    ck_assert_str_eq(removed[1], c.img.digest);
    free_list(removed, n);
    struct meta_image *img = NULL;
    ck_assert_int_eq(meta_image_get(meta, a.img.digest, &img, &err), 0);
    meta_image_free(img);
    /* Already within the budget: nothing more goes. */
    ck_assert_int_eq(meta_prune_images(meta, -1, 100, 100, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(removed);
}
END_TEST

START_TEST(prune_keep_bytes_skips_images_with_users)
{
    struct test_image a, b;
    struct err err = {0};
    char **removed = NULL;
    size_t n = 0;
    make_image(&a, "a", 1, 100, 100);
    make_image(&b, "b", 1, 100, 100);
    a.img.last_used_at = 1;
    b.img.last_used_at = 2;
    put_ok(&a, NULL);
    put_ok(&b, NULL);
    ck_assert_int_eq(meta_image_use_add(meta, a.img.digest, "ctr", &err), 0);
    ck_assert_int_eq(meta_prune_images(meta, -1, 0, 100, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(removed[0], b.img.digest);
    free_list(removed, n);
}
END_TEST

START_TEST(prune_unused_for_removes_only_stale_images)
{
    struct test_image a, b;
    struct err err = {0};
    char **removed = NULL;
    size_t n = 0;
    make_image(&a, "a", 1, 1, 1);
    make_image(&b, "b", 1, 1, 1);
    a.img.last_used_at = 1000;
    b.img.last_used_at = 1900;
    put_ok(&a, NULL);
    put_ok(&b, NULL);
    ck_assert_int_eq(meta_prune_images(meta, 500, -1, 2000, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(removed[0], a.img.digest);
    free_list(removed, n);
}
END_TEST

START_TEST(prune_without_limits_removes_every_unused_image)
{
    struct test_image a, b, c;
    struct err err = {0};
    char **removed = NULL;
    size_t n = 0;
    make_image(&a, "a", 1, 1, 1);
    make_image(&b, "b", 1, 1, 1);
    make_image(&c, "c", 1, 1, 1);
    put_ok(&a, NULL);
    put_ok(&b, NULL);
    put_ok(&c, NULL);
    ck_assert_int_eq(meta_image_use_add(meta, c.img.digest, "ctr", &err), 0);
    ck_assert_int_eq(meta_prune_images(meta, -1, -1, 0, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    free_list(removed, n);
    struct meta_image **imgs = NULL;
    ck_assert_int_eq(meta_image_list(meta, &imgs, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(imgs[0]->digest, c.img.digest);
    meta_image_list_free(imgs, n);
}
END_TEST

/* An import in flight leases its image's manifest digest from before it
 * looks the image up until it has answered: a prune then leaves it. */
START_TEST(prune_skips_an_image_whose_manifest_is_leased)
{
    struct test_image a, b;
    struct err err = {0};
    char **removed = NULL;
    size_t n = 0;
    char lease[META_LEASE_ID_LEN];
    make_image(&a, "a", 1, 1, 1);
    make_image(&b, "b", 1, 1, 1);
    put_ok(&a, NULL);
    put_ok(&b, NULL);
    ck_assert_int_eq(meta_lease_new(meta, lease, &err), 0);
    ck_assert_int_eq(meta_lease_add_blob(meta, lease, a.img.digest, &err), 0);
    ck_assert_int_eq(meta_prune_images(meta, -1, -1, 0, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(removed[0], b.img.digest);
    free_list(removed, n);
    /* The import answered and dropped its lease: the next prune takes it. */
    ck_assert_int_eq(meta_lease_remove(meta, lease, &err), 0);
    ck_assert_int_eq(meta_prune_images(meta, -1, -1, 0, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(removed[0], a.img.digest);
    free_list(removed, n);
}
END_TEST

#define THREADS 4
#define PER_THREAD 25

static void *
put_many(void *arg)
{
    long id = (long)(intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        struct test_image t;
        struct err err = {0};
        char seed[64], name[64];
        snprintf(seed, sizeof(seed), "t%ld-%d", id, i);
        snprintf(name, sizeof(name), "shared-name-%d", i);
        make_image(&t, seed, 3, 1, 1);
        if (meta_image_put(meta, &t.img, name, NULL, &err) < 0)
            return strdup(err.msg);
    }
    return NULL;
}

START_TEST(meta_is_safe_across_threads)
{
    pthread_t th[THREADS];
    struct err err = {0};
    for (long i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, put_many, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *res;
        pthread_join(th[i], &res);
        ck_assert_msg(res == NULL, "thread %d: %s", i, (char *)res);
    }
    struct meta_image **imgs = NULL;
    size_t n = 0, names = 0;
    ck_assert_int_eq(meta_image_list(meta, &imgs, &n, &err), 0);
    ck_assert_uint_eq(n, THREADS * PER_THREAD);
    for (size_t i = 0; i < n; i++)
        names += imgs[i]->n_names;
    ck_assert_uint_eq(names, PER_THREAD); /* each shared name on exactly one image */
    meta_image_list_free(imgs, n);
}
END_TEST

static Suite *
meta_suite(void)
{
    Suite *s = suite_create("store_meta");
    TCase *tc = tcase_create("meta");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, meta_image_put_and_get_round_trip);
    tcase_add_test(tc, meta_image_put_existing_adds_name_only);
    tcase_add_test(tc, meta_image_get_by_prefix_and_name);
    tcase_add_test(tc, meta_image_get_ambiguous_prefix_conflicts);
    tcase_add_test(tc, meta_image_name_moves_between_images);
    tcase_add_test(tc, meta_image_put_rejects_wrong_chain_id);
    tcase_add_test(tc, meta_image_put_is_all_or_nothing);
    tcase_add_test(tc, meta_survives_reopen);
    tcase_add_test(tc, meta_open_refuses_newer_schema);
    tcase_add_test(tc, image_delete_with_users_conflicts);
    tcase_add_test(tc, image_users_retain_drops_only_users_not_kept);
    tcase_add_test(tc, image_delete_by_name_keeps_image_with_other_names);
    tcase_add_test(tc, meta_image_list_and_touch);
    tcase_add_test(tc, meta_snapshot_put_and_users);
    tcase_add_test(tc, meta_lease_lifecycle);
    tcase_add_test(tc, prune_keep_bytes_removes_lru_first);
    tcase_add_test(tc, prune_keep_bytes_skips_images_with_users);
    tcase_add_test(tc, prune_unused_for_removes_only_stale_images);
    tcase_add_test(tc, prune_without_limits_removes_every_unused_image);
    tcase_add_test(tc, prune_skips_an_image_whose_manifest_is_leased);
    tcase_add_test(tc, meta_is_safe_across_threads);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(meta_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
