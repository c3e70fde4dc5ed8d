/*
 * Fault injection over a volume tar-in (PUT /v1/volumes/{h}/files) on
 * berthd-fault (see tests/fault/fault_suite.h): every fsync, rename,
 * write and SQLite step of an upload that replaces files, turns a
 * directory into a file and a file into a directory, adds a tree and
 * changes a mode is made to fail in turn. After each failure the volume
 * holds exactly what it held before (the upload is all or nothing), no
 * staging directory or journal is left, and the same upload works when
 * sent again; after a success it holds exactly what the upload made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fault/fault_suite.h"
#include "tests/fixtures/imgfix.h"

#define VOL "tv"

struct tarin_ctx {
    struct fx_buf before; /* the volume's first upload */
    struct fx_buf upload; /* the one walked */
    char *tree_before;    /* the volume after the first upload */
    char *tree_after;     /* ... and after both (from the counting run) */
};

static void
build_tars(struct tarin_ctx *c)
{
    struct fx_buf *t = &c->before;
    fx_tar_add(t, "a/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(t, "a/one", "one, first version\n");
    fx_tar_file(t, "a/two", "two stays\n");
    fx_tar_add(t, "a/dir/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(t, "a/dir/inner", "inside a dir that becomes a file\n");
    fx_tar_file(t, "a/file", "a file that becomes a dir\n");
    fx_tar_add(t, "a/link", '2', "one", NULL, 0, 0777);
    fx_tar_file(t, "top", "top, first version\n");
    fx_tar_end(t);

    t = &c->upload;
    fx_tar_add(t, "a/", '5', NULL, NULL, 0, 0750);
    fx_tar_file(t, "a/one", "one, second version, longer than the first\n");
    fx_tar_file(t, "a/dir", "now a file\n");
    fx_tar_add(t, "a/file/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(t, "a/file/x", "now inside a dir\n");
    fx_tar_add(t, "b/", '5', NULL, NULL, 0, 0755);
    fx_tar_add(t, "b/c/", '5', NULL, NULL, 0, 0755);
    for (int i = 0; i < 4; i++) {
        char name[32], body[64];
        snprintf(name, sizeof(name), "b/c/f%d", i);
        snprintf(body, sizeof(body), "new file %d\n", i);
        fx_tar_file(t, name, body);
    }
    fx_tar_add(t, "top", '0', NULL, "top, second\n", 12, 0600);
    fx_tar_end(t);
}

static void
put_tar(struct berthd *b, const struct fx_buf *t, struct hresp *r)
{
    http_do(b,
            &(struct hreq){.method = "PUT",
                           .path = "/v1/volumes/" VOL "/files?path=/",
                           .body = t->data,
                           .body_len = t->len,
                           .headers =
                               (const char *[]){"Content-Type: application/x-tar", "Expect:", NULL},
                           .timeout_ms = 60000},
            r);
}

static char *
volume_tree(const struct berthd *b)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/volumes/" VOL "/fs/data", b->root);
    return fault_tree(dir);
}

static void
tarin_setup(struct berthd *b, void *ctx)
{
    struct tarin_ctx *c = ctx;
    struct hresp r;
    fault_http(b, "POST", "/v1/volumes", "{\"handle\":\"" VOL "\"}", &r);
    ck_assert_msg(r.status == 201, "create volume: %ld %s", r.status, r.body);
    hresp_free(&r);
    put_tar(b, &c->before, &r);
    ck_assert_msg(r.status == 200, "first upload: %ld %s", r.status, r.body);
    hresp_free(&r);
    char *now = volume_tree(b);
    if (!c->tree_before)
        c->tree_before = strdup(now);
    ck_assert_str_eq(now, c->tree_before);
    free(now);
}

static void
tarin_run(struct berthd *b, void *ctx, struct hresp *r)
{
    struct tarin_ctx *c = ctx;
    put_tar(b, &c->upload, r);
}

static void
tarin_failed(struct berthd *b, void *ctx, const char *what)
{
    struct tarin_ctx *c = ctx;
    char *now = volume_tree(b);
    fault_check(b, what, strcmp(now, c->tree_before) == 0,
                "a failed upload changed the volume; before:\n%s\nnow:\n%s", c->tree_before, now);
    free(now);
}

static void
tarin_done(struct berthd *b, void *ctx, const char *what)
{
    struct tarin_ctx *c = ctx;
    char *now = volume_tree(b);
    if (!c->tree_after) {
        /* The counting run: what the upload makes, checked by hand once. */
        ck_assert_msg(strstr(now, "a/dir 100") && strstr(now, "a/file/x 100") &&
                          strstr(now, "b/c/f3 100") && strstr(now, "a/two 100") &&
                          strstr(now, "top 100600"),
                      "the upload made:\n%s", now);
        c->tree_after = strdup(now);
    }
    fault_check(b, what, strcmp(now, c->tree_after) == 0,
                "the upload made another tree; expected:\n%s\ngot:\n%s", c->tree_after, now);
    free(now);
}

static void
tarin_teardown(struct berthd *b, void *ctx)
{
    struct hresp r;
    fault_http(b, "DELETE", "/v1/volumes/" VOL, NULL, &r);
    ck_assert_msg(r.status == 200, "delete volume: %ld %s", r.status, r.body);
    hresp_free(&r);
}

START_TEST(every_failed_step_of_a_volume_upload_leaves_the_volume_as_it_was)
{
    struct tarin_ctx c = {0};
    build_tars(&c);
    struct berthd b = {0};
    fault_berthd_start(&b, NULL);
    struct fault_op op = {.name = "volume-tar-in",
                          .setup = tarin_setup,
                          .run = tarin_run,
                          .ok_status = {200},
                          .check_failed = tarin_failed,
                          .check_done = tarin_done,
                          .teardown = tarin_teardown,
                          .ctx = &c};
    ck_assert(fault_walk(&b, &op) > 0 || fault_walk_filtered());
    berthd_finish(&b);
    free(c.before.data);
    free(c.upload.data);
    free(c.tree_before);
    free(c.tree_after);
}
END_TEST

/*
 * A merge step fails and so does every rename after it, the undo's too:
 * the journal stays for the next start, and so must the staging tree,
 * which holds the entries the steps done replaced (the upload used to
 * remove it whatever the undo did, and the old files were lost). Every
 * rename of the upload from the Nth on fails, for each N until it gets
 * through; after a restart the volume is as it was, with no staging left.
 */
START_TEST(an_upload_whose_undo_fails_is_rolled_back_by_the_next_start)
{
    struct tarin_ctx c = {0};
    build_tars(&c);
    struct berthd b = {0};
    fault_berthd_start(&b, NULL);
    unsigned undo_failed = 0;
    unsigned long n;
    for (n = 1; n < 400; n++) {
        tarin_setup(&b, &c);
        char spec[32];
        snprintf(spec, sizeof(spec), "rename:%lu+", n);
        fault_arm(&b, spec);
        struct hresp r;
        tarin_run(&b, &c, &r);
        fault_reset(&b);
        long st = r.status;
        hresp_free(&r);
        if (st == 200)
            break; /* every rename of the upload came before the Nth */
        ck_assert_msg(st >= 400, "%s: status %ld", spec, st);
        char *log = berthd_log(&b);
        undo_failed += strstr(log, "left journal") != NULL;
        free(log);
        fault_restart(&b, spec);
        char *now = volume_tree(&b);
        ck_assert_msg(strcmp(now, c.tree_before) == 0,
                      "%s: after the restart the volume is not as it was; before:\n%s\nnow:\n%s",
                      spec, c.tree_before, now);
        free(now);
        fault_check_store(&b, spec);
        tarin_teardown(&b, &c);
    }
    ck_assert_msg(n < 400, "the upload never got through");
    ck_assert_msg(undo_failed > 0, "no N made the undo fail");
    fprintf(stderr, "undo failed at %u of %lu points\n", undo_failed, n - 1);
    berthd_finish(&b);
    free(c.before.data);
    free(c.upload.data);
    free(c.tree_before);
}
END_TEST

static Suite *
fault_volumes_suite(void)
{
    Suite *s = suite_create("api_fault_volumes");
    TCase *tc = tcase_create("walk");
    tcase_set_timeout(tc, fault_walk_timeout(600));
    tcase_add_test(tc, every_failed_step_of_a_volume_upload_leaves_the_volume_as_it_was);
    suite_add_tcase(s, tc);
    TCase *undo = tcase_create("undo_fails");
    tcase_set_timeout(undo, 600);
    tcase_add_test(undo, an_upload_whose_undo_fails_is_rolled_back_by_the_next_start);
    suite_add_tcase(s, undo);
    return s;
}

int
main(void)
{
    fault_suite_init();
    return harness_run_suite(fault_volumes_suite());
}
