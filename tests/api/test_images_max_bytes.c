/*
 * --store-max-bytes against a real berthd and runc: an import that takes
 * the store past the limit prunes the least recently used images no
 * container uses, with their blobs and snapshots, before it answers; it
 * never prunes the image it just stored, also when that image is the only
 * one no container uses (the images in use then keep the store over the
 * limit). The images are the fixtures of tests/fixtures/make-images.sh:
 * "base" (busybox) and "other" (a layer of random bytes), which share no
 * blob and no snapshot. Every container is deleted by the test, and the
 * harness's safety net removes any a failed test left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_containers.h"
#include "tests/fixtures/imgfix.h"

/* What the store counts for an image: its blobs and its unpacked layers. */
static int64_t
record_bytes(json_object *img)
{
    return json_object_get_int64(json_at(img, "size_bytes")) +
           json_object_get_int64(json_at(img, "unpacked_bytes"));
}

static void
import_ok(struct berthd *b, const char *layout, struct hresp *r)
{
    fx_import_layout(b, NULL, fx_path(layout), NULL, r);
    ck_assert_msg(r->status == 201, "import %s: %ld %s", layout, r->status, r->body);
}

/*
 * Starts berthd with a --store-max-bytes that either of the layouts a and
 * b fits in alone but not both together: the larger plus half the smaller.
 * Their sizes are measured on a daemon of their own first, as the fixtures
 * are built anew for each run (their size follows this host's busybox).
 */
static void
start_capped(struct berthd *d, const char *a, const char *b)
{
    struct berthd m = {0};
    berthd_start(&m, NULL);
    struct hresp r;
    import_ok(&m, a, &r);
    int64_t a_bytes = record_bytes(r.json);
    hresp_free(&r);
    import_ok(&m, b, &r);
    int64_t b_bytes = record_bytes(r.json);
    hresp_free(&r);
    berthd_finish(&m);
    int64_t big = a_bytes > b_bytes ? a_bytes : b_bytes;
    int64_t small = a_bytes > b_bytes ? b_bytes : a_bytes;
    static char cap[32];
    snprintf(cap, sizeof(cap), "%lld", (long long)(big + small / 2));
    memset(d, 0, sizeof(*d));
    berthd_start(d, &(struct berthd_opts){.args = {"--store-max-bytes", cap, NULL}});
}

/* The first layer's chain ID and blob digest, hex only (file names). */
static void
first_layer(json_object *img, char chain[80], char blob[80])
{
    json_object *l = json_object_array_get_idx(json_at(img, "layers"), 0);
    snprintf(chain, 80, "%s", json_object_get_string(json_at(l, "chain_id")) + 7);
    snprintf(blob, 80, "%s", json_object_get_string(json_at(l, "digest")) + 7);
}

/* Whether the store holds the image's manifest, first layer and snapshot. */
static bool
files_present(const struct berthd *b, json_object *img)
{
    char chain[80], blob[80], path[256];
    first_layer(img, chain, blob);
    const char *manifest = json_object_get_string(json_at(img, "digest")) + 7;
    snprintf(path, sizeof(path), "content/sha256/%s", manifest);
    bool m = access(fx_root_path(b, path), F_OK) == 0;
    snprintf(path, sizeof(path), "content/sha256/%s", blob);
    bool l = access(fx_root_path(b, path), F_OK) == 0;
    snprintf(path, sizeof(path), "snapshots/%s", chain);
    bool s = access(fx_root_path(b, path), F_OK) == 0;
    ck_assert_msg(m == l && l == s, "%s: manifest %d, layer %d, snapshot %d", manifest, m, l, s);
    return m;
}

static long
image_status(const struct berthd *b, json_object *img)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/images/%s", json_object_get_string(json_at(img, "digest")));
    struct hresp r;
    http_get(b, path, &r);
    long status = r.status;
    hresp_free(&r);
    return status;
}

static void
create_from(const struct berthd *b, const char *handle, json_object *img)
{
    char body[256];
    snprintf(body, sizeof(body), "{\"handle\":\"%s\",\"image\":\"%s\"}", handle,
             json_object_get_string(json_at(img, "digest")));
    struct hresp r;
    ctr_create(b, body, &r);
    ck_assert_msg(r.status == 201, "create %s: %ld %s", handle, r.status, r.body);
    hresp_free(&r);
}

START_TEST(an_import_past_the_limit_prunes_the_older_unused_image_and_its_files)
{
    struct berthd b;
    start_capped(&b, "base", "other");
    struct hresp ra, rb;
    import_ok(&b, "base", &ra);
    ck_assert(files_present(&b, ra.json));
    sleep_ms(1100); /* last_used_at has whole seconds: A is the older */
    import_ok(&b, "other", &rb);
    /* Answered with B after the policy ran: A went, with its files. */
    ck_assert_int_eq(image_status(&b, rb.json), 200);
    ck_assert(files_present(&b, rb.json));
    ck_assert_int_eq(image_status(&b, ra.json), 404);
    ck_assert_msg(!files_present(&b, ra.json), "the pruned image's files remain");
    ck_assert_int_eq(fx_image_count(&b), 1);
    ck_assert_int_eq(fx_count_entries(fx_root_path(&b, "snapshots"), NULL), 1);
    char *log = berthd_log(&b);
    ck_assert_msg(strstr(log, "store over --store-max-bytes: pruned 1 images"), "log: %s", log);
    free(log);
    hresp_free(&ra);
    hresp_free(&rb);
    berthd_finish(&b);
}
END_TEST

START_TEST(an_import_past_the_limit_never_prunes_the_image_it_stored)
{
    ctr_require_runtime();
    struct berthd b;
    start_capped(&b, "base", "other");
    struct hresp ra, rb;
    import_ok(&b, "base", &ra);
    create_from(&b, "user-a", ra.json);
    /* A in use and B over the limit: B is the one image a prune could
     * take, and it is the one just stored. */
    import_ok(&b, "other", &rb);
    ck_assert_msg(image_status(&b, rb.json) == 200, "the image answered 201 is gone");
    ck_assert_msg(files_present(&b, rb.json), "the image answered 201 lost its files");
    create_from(&b, "user-b", rb.json);
    /* A stays: it is in use. The store stays over the limit. */
    ck_assert_int_eq(image_status(&b, ra.json), 200);
    ck_assert(files_present(&b, ra.json));
    ck_assert_int_eq(fx_image_count(&b), 2);
    char *log = berthd_log(&b);
    ck_assert_msg(!strstr(log, "store over --store-max-bytes"), "log: %s", log);
    free(log);
    ctr_delete(&b, "user-b");
    ctr_delete(&b, "user-a");
    hresp_free(&ra);
    hresp_free(&rb);
    berthd_finish(&b);
}
END_TEST

static Suite *
max_bytes_suite(void)
{
    Suite *s = suite_create("api_images_max_bytes");
    TCase *tc = tcase_create("max_bytes");
    tcase_set_timeout(tc, 120);
    ctr_add_fixture(tc);
    tcase_add_test(tc, an_import_past_the_limit_prunes_the_older_unused_image_and_its_files);
    tcase_add_test(tc, an_import_past_the_limit_never_prunes_the_image_it_stored);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(max_bytes_suite());
    fx_cleanup();
    return rc;
}
