/* Unit tests for store/gc.c: mark and sweep over blobs and snapshots. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/blob.h"
#include "store/gc.h"
#include "store/meta.h"
#include "store/snapshot.h"
#include "tests/unit/testutil.h"

static char *root;
static struct meta *meta;
static struct blob_store *bs;

static void
setup(void)
{
    struct err err = {0};
    root = tu_tmpdir("gc");
    bs = blob_store_open(root, &err);
    ck_assert_msg(bs != NULL, "%s", err.msg);
    ck_assert_msg(meta_open(root, &meta, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    meta_close(meta);
    blob_store_free(bs);
    tu_rmtree(root);
    free(root);
}

static void
store(const char *content, char out[DIGEST_STR_LEN])
{
    struct err err = {0};
    struct blob_writer *w = blob_writer_new(bs, NULL, NULL, -1, -1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(blob_writer_write(w, content, strlen(content), &err), 0);
    ck_assert_msg(blob_writer_finish(w, out, NULL, &err) == 0, "%s", err.msg);
}

/* Creates <root>/snapshots/<hex>/file as an unpacked layer would. */
static void
make_snapshot_dir(const char *chain)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/snapshots/%s/etc/file", root, digest_hex(chain));
    tu_write(path, "data", 4);
}

static bool
snapshot_dir_exists(const char *chain)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof(path), "%s/snapshots/%s", root, digest_hex(chain));
    return stat(path, &st) == 0;
}

struct test_image {
    struct meta_image img;
    struct meta_layer layers[2];
    struct meta_blob blobs[4];
    struct meta_blob_ref refs[3];
};

/*
 * An image whose blobs are really stored: manifest "<seed>-m", config
 * "<seed>-c", layer 0 from shared_layer (shared between seeds) and layer 1
 * from "<seed>-l1". Snapshot directories are created for both layers.
 */
static void
make_image(struct test_image *t, const char *seed, const char *shared_layer)
{
    char buf[128];
    struct err err = {0};
    memset(t, 0, sizeof(*t));
    snprintf(buf, sizeof(buf), "%s-m", seed);
    store(buf, t->img.digest);
    snprintf(buf, sizeof(buf), "%s-c", seed);
    store(buf, t->img.config_digest);
    store(shared_layer, t->layers[0].digest);
    snprintf(buf, sizeof(buf), "%s-l1", seed);
    store(buf, t->layers[1].digest);
    const char *parent = NULL;
    for (int i = 0; i < 2; i++) {
        struct meta_layer *l = &t->layers[i];
        /* Uncompressed layers: the diff id is the blob digest. */
        strcpy(l->diff_id, l->digest);
        ck_assert_int_eq(digest_chain_id(parent, l->diff_id, l->chain_id, &err), 0);
        parent = l->chain_id;
        l->size = 5;
        l->unpacked_size = 100;
        make_snapshot_dir(l->chain_id);
    }
    t->img.platform.os = "linux";
    t->img.platform.architecture = "amd64";
    t->img.size_bytes = 10;
    t->img.unpacked_bytes = 200;
    t->img.layers = t->layers;
    t->img.n_layers = 2;
    strcpy(t->blobs[0].digest, t->img.digest);
    strcpy(t->blobs[1].digest, t->img.config_digest);
    strcpy(t->blobs[2].digest, t->layers[0].digest);
    strcpy(t->blobs[3].digest, t->layers[1].digest);
    for (int i = 0; i < 3; i++) {
        strcpy(t->refs[i].parent, t->img.digest);
        strcpy(t->refs[i].child, t->blobs[i + 1].digest);
    }
    t->img.blobs = t->blobs;
    t->img.n_blobs = 4;
    t->img.refs = t->refs;
    t->img.n_refs = 3;
    ck_assert_msg(meta_image_put(meta, &t->img, seed, NULL, &err) == 0, "%s", err.msg);
}

static void
gc_ok(struct gc_result *res)
{
    struct err err = {0};
    ck_assert_msg(gc_run(bs, meta, root, res, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(res->errors, 0);
}

START_TEST(gc_keeps_everything_images_reach)
{
    struct test_image t;
    struct gc_result res;
    make_image(&t, "one", "layer0");
    gc_ok(&res);
    ck_assert_int_eq(res.blobs_removed, 0);
    ck_assert_int_eq(res.snapshots_removed, 0);
    ck_assert(blob_exists(bs, t.img.digest));
    ck_assert(blob_exists(bs, t.img.config_digest));
    ck_assert(blob_exists(bs, t.layers[0].digest));
    ck_assert(blob_exists(bs, t.layers[1].digest));
    ck_assert(snapshot_dir_exists(t.layers[0].chain_id));
    ck_assert(snapshot_dir_exists(t.layers[1].chain_id));
}
END_TEST

START_TEST(gc_removes_what_a_deleted_image_alone_used)
{
    struct test_image a, b;
    struct gc_result res;
    struct err err = {0};
    bool exists = true;
    make_image(&a, "a", "shared");
    make_image(&b, "b", "shared");
    ck_assert_int_eq(meta_image_delete(meta, "a", NULL, NULL, &err), 0);
    gc_ok(&res);
    /* a's manifest, config and own layer go; the shared layer stays. */
    ck_assert_int_eq(res.blobs_removed, 3);
    ck_assert_int_eq(res.blob_bytes_freed, strlen("a-m") + strlen("a-c") + strlen("a-l1"));
    ck_assert(!blob_exists(bs, a.img.digest));
    ck_assert(!blob_exists(bs, a.img.config_digest));
    ck_assert(!blob_exists(bs, a.layers[1].digest));
    ck_assert(blob_exists(bs, a.layers[0].digest));
    ck_assert(blob_exists(bs, b.img.digest));
    /* Layer 0 is the same snapshot for both; a's layer 1 snapshot goes. */
    ck_assert_str_eq(a.layers[0].chain_id, b.layers[0].chain_id);
    ck_assert_int_eq(res.snapshots_removed, 1);
    ck_assert_int_eq(res.snapshot_bytes_freed, 100);
    ck_assert(!snapshot_dir_exists(a.layers[1].chain_id));
    ck_assert(snapshot_dir_exists(b.layers[1].chain_id));
    ck_assert(snapshot_dir_exists(a.layers[0].chain_id));
    ck_assert_int_eq(meta_snapshot_exists(meta, a.layers[1].chain_id, &exists, &err), 0);
    ck_assert(!exists);
    ck_assert_int_eq(meta_snapshot_exists(meta, b.layers[1].chain_id, &exists, &err), 0);
    ck_assert(exists);

    /* Nothing left to do the second time. */
    gc_ok(&res);
    ck_assert_int_eq(res.blobs_removed, 0);
    ck_assert_int_eq(res.snapshots_removed, 0);
}
END_TEST

START_TEST(gc_keeps_leased_blobs)
{
    struct gc_result res;
    struct err err = {0};
    char id[META_LEASE_ID_LEN], d[DIGEST_STR_LEN], chain[DIGEST_STR_LEN];
    /* An import in progress: blob committed and snapshot unpacked, no image yet. */
    ck_assert_int_eq(meta_lease_new(meta, id, &err), 0);
    ck_assert_int_eq(digest_of("in-flight", 9, d), 0);
    ck_assert_int_eq(meta_lease_add_blob(meta, id, d, &err), 0);
    ck_assert_int_eq(meta_lease_add_snapshot(meta, id, d, &err), 0);
    store("in-flight", d);
    strcpy(chain, d);
    make_snapshot_dir(chain);
    ck_assert_int_eq(meta_snapshot_put(meta, chain, NULL, 42, &err), 0);
    gc_ok(&res);
    ck_assert_int_eq(res.blobs_removed, 0);
    ck_assert_int_eq(res.snapshots_removed, 0);
    ck_assert(blob_exists(bs, d));
    ck_assert(snapshot_dir_exists(chain));

    /* The import failed: its lease goes, and so does what it held. */
    ck_assert_int_eq(meta_lease_remove(meta, id, &err), 0);
    gc_ok(&res);
    ck_assert_int_eq(res.blobs_removed, 1);
    ck_assert_int_eq(res.blob_bytes_freed, 9);
    ck_assert_int_eq(res.snapshots_removed, 1);
    ck_assert_int_eq(res.snapshot_bytes_freed, 42);
    ck_assert(!blob_exists(bs, d));
    ck_assert(!snapshot_dir_exists(chain));
}
END_TEST

START_TEST(gc_removes_orphan_blob_files)
{
    struct test_image t;
    struct gc_result res;
    char d[DIGEST_STR_LEN], junk[1024];
    make_image(&t, "one", "layer0");
    /* A crash between the rename into content/ and the database commit. */
    store("orphan", d);
    snprintf(junk, sizeof(junk), "%s/content/sha256/not-a-digest.tmp", root);
    tu_write(junk, "x", 1);
    gc_ok(&res);
    ck_assert_int_eq(res.blobs_removed, 1);
    ck_assert_int_eq(res.blob_bytes_freed, 6);
    ck_assert(!blob_exists(bs, d));
    ck_assert(blob_exists(bs, t.img.digest));
    ck_assert_int_eq(access(junk, F_OK), 0);
}
END_TEST

START_TEST(gc_removes_orphan_snapshot_dirs_but_not_temporaries)
{
    struct gc_result res;
    char chain[DIGEST_STR_LEN], partial[1024];
    ck_assert_int_eq(digest_of("x", 1, chain), 0);
    make_snapshot_dir(chain);
    snprintf(partial, sizeof(partial), "%s/snapshots/%s.partial/f", root, digest_hex(chain));
    tu_write(partial, "x", 1);
    gc_ok(&res);
    ck_assert_int_eq(res.snapshots_removed, 1);
    ck_assert(!snapshot_dir_exists(chain));
    ck_assert_int_eq(access(partial, F_OK), 0);
}
END_TEST

START_TEST(gc_follows_blob_references_transitively)
{
    struct test_image t;
    struct gc_result res;
    struct err err = {0};
    char index[DIGEST_STR_LEN], extra[DIGEST_STR_LEN], deeper[DIGEST_STR_LEN];
    char stray[DIGEST_STR_LEN];
    store("index", index);
    store("extra", extra);
    store("deeper", deeper);
    store("stray", stray);
    make_image(&t, "one", "layer0");
    /* A second import of the same manifest records manifest -> extra -> deeper. */
    struct meta_blob blobs[3] = {{.size = 5}, {.size = 5}, {.size = 6}};
    strcpy(blobs[0].digest, index);
    strcpy(blobs[1].digest, t.img.digest);
    strcpy(blobs[2].digest, extra);
    struct meta_blob_ref refs[3];
    strcpy(refs[0].parent, index);
    strcpy(refs[0].child, t.img.digest);
    strcpy(refs[1].parent, t.img.digest);
    strcpy(refs[1].child, extra);
    strcpy(refs[2].parent, extra);
    strcpy(refs[2].child, deeper);
    /* Put a fresh image (different identity) carrying these references. */
    struct test_image u = t;
    store("other-manifest", u.img.digest);
    u.img.layers = u.layers;
    u.img.blobs = blobs;
    u.img.n_blobs = 3;
    u.img.refs = refs;
    u.img.n_refs = 3;
    strcpy(blobs[1].digest, u.img.digest);
    strcpy(refs[0].child, u.img.digest);
    strcpy(refs[1].parent, u.img.digest);
    ck_assert_msg(meta_image_put(meta, &u.img, NULL, NULL, &err) == 0, "%s", err.msg);
    gc_ok(&res);
    ck_assert(blob_exists(bs, extra));
    ck_assert(blob_exists(bs, deeper));
    /* Nothing reaches the index (it is above the image) or the stray blob. */
    ck_assert(!blob_exists(bs, index));
    ck_assert(!blob_exists(bs, stray));
    ck_assert_int_eq(res.blobs_removed, 2);
}
END_TEST

START_TEST(gc_keeps_used_snapshots_and_their_parents)
{
    struct gc_result res;
    struct err err = {0};
    char c1[DIGEST_STR_LEN], c2[DIGEST_STR_LEN], c3[DIGEST_STR_LEN];
    ck_assert_int_eq(digest_of("c1", 2, c1), 0);
    ck_assert_int_eq(digest_of("c2", 2, c2), 0);
    ck_assert_int_eq(digest_of("c3", 2, c3), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, c1, NULL, 1, &err), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, c2, c1, 1, &err), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, c3, c1, 1, &err), 0);
    make_snapshot_dir(c1);
    make_snapshot_dir(c2);
    make_snapshot_dir(c3);
    ck_assert_int_eq(meta_snapshot_use_add(meta, c2, "ctr", &err), 0);
    gc_ok(&res);
    ck_assert_int_eq(res.snapshots_removed, 1);
    ck_assert(snapshot_dir_exists(c1));
    ck_assert(snapshot_dir_exists(c2));
    ck_assert(!snapshot_dir_exists(c3));
}
END_TEST

START_TEST(gc_skips_mounted_snapshot)
{
    struct gc_result res;
    struct err err = {0};
    char chain[DIGEST_STR_LEN], path[1024], inside[1100];
    bool exists = false;
    ck_assert_int_eq(digest_of("mounted", 7, chain), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, chain, NULL, 1, &err), 0);
    make_snapshot_dir(chain);
    snprintf(path, sizeof(path), "%s/snapshots/%s", root, digest_hex(chain));
    if (mount("tmpfs", path, "tmpfs", 0, "size=1m") < 0) {
        fprintf(stderr, "gc_skips_mounted_snapshot: cannot mount tmpfs here, skipped\n");
        return;
    }
    snprintf(inside, sizeof(inside), "%s/precious", path);
    tu_write(inside, "x", 1);
    int ret = gc_run(bs, meta, root, &res, &err);
    ck_assert_int_eq(umount(path), 0);
    ck_assert_msg(ret == 0, "%s", err.msg);
    ck_assert_int_eq(res.snapshots_busy, 1);
    ck_assert_int_eq(res.snapshots_removed, 0);
    ck_assert_int_eq(meta_snapshot_exists(meta, chain, &exists, &err), 0);
    ck_assert(exists);
    /* Once unmounted, the next run takes it. */
    gc_ok(&res);
    ck_assert_int_eq(res.snapshots_removed, 1);
    ck_assert(!snapshot_dir_exists(chain));
}
END_TEST

/* The tmp-rm- entry of <root>/snapshots set aside for hex, into out; false if none. */
static bool
find_set_aside(const char *hex, char *out, size_t len)
{
    char dir[1024], prefix[128];
    snprintf(dir, sizeof(dir), "%s/snapshots", root);
    snprintf(prefix, sizeof(prefix), "tmp-rm-%s-", hex);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(out, len, "%s/%s", dir, e->d_name);
            found = true;
        }
    closedir(d);
    return found;
}

/*
 * A removal that fails part-way (here a filesystem mounted below the
 * snapshot; a crash does the same) left the rest of the snapshot at its
 * name with its row: the next import of that chain found it "cached" and
 * recorded an image over a partial layer. Now the snapshot is set aside
 * first, its name and row go, and the next start removes the leftover.
 */
START_TEST(gc_sets_a_snapshot_aside_so_a_failed_removal_leaves_nothing_at_its_name)
{
    struct gc_result res;
    struct err err = {0};
    char chain[DIGEST_STR_LEN], mnt[1024], inner[1100], aside[1024];
    ck_assert_int_eq(digest_of("cut short", 9, chain), 0);
    ck_assert_int_eq(meta_snapshot_put(meta, chain, NULL, 1, &err), 0);
    make_snapshot_dir(chain);
    snprintf(mnt, sizeof(mnt), "%s/snapshots/%s/etc/mnt", root, digest_hex(chain));
    ck_assert_int_eq(mkdir(mnt, 0700), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0) {
        fprintf(stderr, "gc_sets_a_snapshot_aside...: cannot mount tmpfs here, skipped\n");
        return;
    }
    snprintf(inner, sizeof(inner), "%s/kept", mnt);
    tu_write(inner, "x", 1);
    int ret = gc_run(bs, meta, root, &res, &err);
    bool at_name = snapshot_dir_exists(chain);
    bool set_aside = find_set_aside(digest_hex(chain), aside, sizeof(aside));
    /* Unmount wherever it is now, before any assertion can end the test. */
    if (set_aside) {
        snprintf(mnt, sizeof(mnt), "%s/etc/mnt", aside);
    }
    ck_assert_int_eq(umount(mnt), 0);
    ck_assert_msg(ret == 0, "%s", err.msg);
    ck_assert_msg(!at_name, "a snapshot whose removal failed is still at its name");
    ck_assert(set_aside);
    /* Its name and row went; what stays is an error, and no bytes freed. */
    ck_assert_int_eq(res.snapshots_removed, 1);
    ck_assert_int_eq(res.errors, 1);
    ck_assert_int_eq(res.snapshot_bytes_freed, 0);
    bool exists = true;
    ck_assert_int_eq(meta_snapshot_exists(meta, chain, &exists, &err), 0);
    ck_assert(!exists);
    /* The next run takes what was left (and so would the next start). */
    gc_ok(&res);
    ck_assert(!find_set_aside(digest_hex(chain), aside, sizeof(aside)));
}
END_TEST

START_TEST(gc_after_prune_frees_pruned_images)
{
    struct test_image a, b;
    struct gc_result res;
    struct err err = {0};
    char **removed = NULL;
    size_t n = 0;
    make_image(&a, "a", "la");
    make_image(&b, "b", "lb");
    ck_assert_int_eq(meta_image_use_add(meta, b.img.digest, "ctr", &err), 0);
    ck_assert_int_eq(meta_prune_images(meta, -1, -1, 0, &removed, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(removed[0], a.img.digest);
    free(removed[0]);
    free(removed);
    gc_ok(&res);
    ck_assert_int_eq(res.blobs_removed, 4);
    ck_assert_int_eq(res.snapshots_removed, 2);
    ck_assert(!blob_exists(bs, a.layers[0].digest));
    ck_assert(blob_exists(bs, b.layers[0].digest));
    ck_assert(snapshot_dir_exists(b.layers[1].chain_id));
}
END_TEST

static Suite *
gc_suite(void)
{
    Suite *s = suite_create("store_gc");
    TCase *tc = tcase_create("gc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, gc_keeps_everything_images_reach);
    tcase_add_test(tc, gc_removes_what_a_deleted_image_alone_used);
    tcase_add_test(tc, gc_keeps_leased_blobs);
    tcase_add_test(tc, gc_removes_orphan_blob_files);
    tcase_add_test(tc, gc_removes_orphan_snapshot_dirs_but_not_temporaries);
    tcase_add_test(tc, gc_follows_blob_references_transitively);
    tcase_add_test(tc, gc_keeps_used_snapshots_and_their_parents);
    tcase_add_test(tc, gc_skips_mounted_snapshot);
    tcase_add_test(tc, gc_sets_a_snapshot_aside_so_a_failed_removal_leaves_nothing_at_its_name);
    tcase_add_test(tc, gc_after_prune_frees_pruned_images);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(gc_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
