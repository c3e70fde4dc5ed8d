/*
 * Fault injection over image imports and prune (berthd-fault, see
 * tests/fault/fault_suite.h): every fsync, rename, write and SQLite step
 * of an import from a layout directory (two layers, one a whiteout), of a
 * `docker save` upload, and of a prune that must keep the image a
 * container uses (and the layer it shares with a pruned image) is made to
 * fail in turn; after each failure the image is listed whole or not at
 * all, no blob, snapshot or temporary is left, and the import or prune
 * works when tried again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fault/fault_suite.h"
#include "tests/fixtures/imgfix.h"

#define IMG "fault:1"

static void
image_absent(struct berthd *b, const char *ref, const char *what)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/images/%s", ref);
    struct hresp r;
    http_get(b, path, &r);
    fault_check(b, what, r.status == 404, "a failed import left %s listed: %ld %.300s", ref,
                r.status, r.body);
    hresp_free(&r);
}

static void
image_present(struct berthd *b, const char *ref, size_t layers, const char *what)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/images/%s", ref);
    struct hresp r;
    http_get(b, path, &r);
    fault_check(b, what, r.status == 200, "image %s not listed: %ld %.300s", ref, r.status, r.body);
    json_object *l = json_at(r.json, "layers");
    fault_check(b, what, l && json_object_array_length(l) == layers,
                "image %s: %zu layers, expected %zu", ref, l ? json_object_array_length(l) : 0,
                layers);
    hresp_free(&r);
}

static void
image_delete(struct berthd *b, const char *ref)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/images/%s", ref);
    struct hresp r;
    fault_http(b, "DELETE", path, NULL, &r);
    ck_assert_msg(r.status == 200, "delete %s: %ld %s", ref, r.status, r.body);
    hresp_free(&r);
}

/* ---- import ------------------------------------------------------------------------- */

struct import_ctx {
    const char *layout; /* a layout directory, or NULL */
    char *data;         /* else an upload */
    size_t len;
    size_t layers;
};

static void
import_setup(struct berthd *b, void *ctx)
{
    (void)b;
    (void)ctx;
}

static void
import_run(struct berthd *b, void *ctx, struct hresp *r)
{
    struct import_ctx *c = ctx;
    if (c->layout) {
        fx_import_layout(b, "?name=" IMG, c->layout, NULL, r);
    } else {
        struct fx_src src = {.data = c->data, .len = c->len};
        fx_post(b, "/v1/images?name=" IMG, "application/x-tar", NULL, &src, false, 60000, r);
    }
}

static void
import_failed(struct berthd *b, void *ctx, const char *what)
{
    image_absent(b, IMG, what);
}

static void
import_done(struct berthd *b, void *ctx, const char *what)
{
    struct import_ctx *c = ctx;
    image_present(b, IMG, c->layers, what);
}

static void
import_teardown(struct berthd *b, void *ctx)
{
    image_delete(b, IMG);
}

static void
walk_import(struct import_ctx *c, const char *name, const char *kinds, bool full)
{
    struct berthd b = {0};
    fault_berthd_start(&b, NULL);
    struct fault_op op = {.name = name,
                          .kinds = kinds,
                          .full = full,
                          .setup = import_setup,
                          .run = import_run,
                          .ok_status = {201},
                          .check_failed = import_failed,
                          .check_done = import_done,
                          .teardown = import_teardown,
                          .ctx = c};
    ck_assert(fault_walk(&b, &op) > 0 || fault_walk_filtered());
    berthd_finish(&b);
}

START_TEST(every_failed_step_of_a_layout_import_leaves_nothing_and_the_retry_works)
{
    struct import_ctx c = {.layout = fx_path("child"), .layers = 2};
    walk_import(&c, "import-layout", NULL, false);
}
END_TEST

START_TEST(every_failed_step_of_an_upload_leaves_nothing_and_the_retry_works)
{
    struct import_ctx c = {.layers = 1};
    c.data = fx_read_file(fx_path("docker.tar"), &c.len);
    ck_assert_ptr_nonnull(c.data);
    walk_import(&c, "import-upload", NULL, false);
    free(c.data);
}
END_TEST

/*
 * A docker save archive has no manifest: the import writes one, and when
 * its fsync failed the writer was freed twice (the daemon aborted). Every
 * fsync of the upload, whatever the quick walk picks.
 */
START_TEST(every_failed_fsync_of_an_upload_is_answered_even_the_written_manifests)
{
    struct import_ctx c = {.layers = 1};
    c.data = fx_read_file(fx_path("docker.tar"), &c.len);
    ck_assert_ptr_nonnull(c.data);
    walk_import(&c, "import-upload-fsync", "fsync", true);
    free(c.data);
}
END_TEST

/* ---- prune -------------------------------------------------------------------------- */

/*
 * The kept image is "base", used by container "keeper" (made once); each
 * setup imports "child" (base's layer plus one) and "other"; the prune
 * removes those two and must keep base, its blobs and its snapshot, which
 * child shares.
 */
static void
prune_setup(struct berthd *b, void *ctx)
{
    struct hresp r;
    fx_import_layout(b, "?name=child:1", fx_path("child"), NULL, &r);
    ck_assert_msg(r.status == 201, "import child: %ld %s", r.status, r.body);
    hresp_free(&r);
    fx_import_layout(b, "?name=other:1", fx_path("other"), NULL, &r);
    ck_assert_msg(r.status == 201, "import other: %ld %s", r.status, r.body);
    hresp_free(&r);
}

static void
prune_run(struct berthd *b, void *ctx, struct hresp *r)
{
    fault_http(b, "POST", "/v1/images/prune", "{}", r);
}

static void
prune_done(struct berthd *b, void *ctx, const char *what)
{
    image_present(b, "base:1", 1, what);
    image_absent(b, "child:1", what);
    image_absent(b, "other:1", what);
    /* Only base is left, so the store checks prove that child's and
     * other's blobs and snapshots are gone and base's are all there. */
}

static void
prune_failed(struct berthd *b, void *ctx, const char *what)
{
    /* The kept image must be whole; the others listed whole (the store
     * checks) or gone. */
    image_present(b, "base:1", 1, what);
}

START_TEST(every_failed_step_of_a_prune_keeps_what_is_used_and_the_retry_works)
{
    ctr_require_runtime();
    struct berthd b = {0};
    fault_berthd_start(&b, NULL);
    struct hresp r;
    fx_import_layout(&b, "?name=base:1", fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "import base: %ld %s", r.status, r.body);
    hresp_free(&r);
    ctr_track(&b, "keeper");
    ctr_create(&b, "{\"handle\":\"keeper\",\"image\":\"base:1\"}", &r);
    ck_assert_msg(r.status == 201, "create keeper: %ld %s", r.status, r.body);
    hresp_free(&r);
    struct fault_op op = {.name = "prune",
                          .setup = prune_setup,
                          .run = prune_run,
                          .ok_status = {200},
                          .check_failed = prune_failed,
                          .check_done = prune_done};
    ck_assert(fault_walk(&b, &op) > 0 || fault_walk_filtered());
    ctr_delete(&b, "keeper");
    berthd_finish(&b);
}
END_TEST

static Suite *
fault_images_suite(void)
{
    Suite *s = suite_create("api_fault_images");
    TCase *tc = tcase_create("walk");
    tcase_set_timeout(tc, fault_walk_timeout(600));
    ctr_add_fixture(tc);
    tcase_add_test(tc, every_failed_step_of_a_layout_import_leaves_nothing_and_the_retry_works);
    tcase_add_test(tc, every_failed_step_of_an_upload_leaves_nothing_and_the_retry_works);
    tcase_add_test(tc, every_failed_fsync_of_an_upload_is_answered_even_the_written_manifests);
    tcase_add_test(tc, every_failed_step_of_a_prune_keeps_what_is_used_and_the_retry_works);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    fault_suite_init();
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(fault_images_suite());
    fx_cleanup();
    return rc;
}
