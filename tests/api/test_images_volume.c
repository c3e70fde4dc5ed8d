/*
 * POST /v1/images with {"source": {"volume": ..., "path": ...}}: an OCI
 * layout that a task wrote into a volume becomes a stored image, and a
 * layout in a volume cannot make the import read anything outside it.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/api/harness.h"

static int
sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A busybox OCI layout at <tmp>/layout, made with umoci (unpack/repack:
 * `umoci insert` writes truncated layer tars in Debian's umoci 0.4.7). */
static void
make_layout(const struct berthd *b)
{
    ck_assert_int_eq(
        sh("set -e; cd %s; mkdir -p rootfs/bin rootfs/etc; cp /bin/busybox rootfs/bin/; "
           "for c in sh cat echo true; do ln -sf busybox rootfs/bin/$c; done; "
           "echo 'root:x:0:0:root:/root:/bin/sh' > rootfs/etc/passwd; "
           "umoci init --layout layout; umoci new --image layout:t; "
           "umoci unpack --image layout:t bundle >/dev/null; cp -a rootfs/. bundle/rootfs/; "
           "umoci repack --image layout:t bundle",
           b->tmp),
        0);
}

static void
post(struct berthd *b, const char *path, const char *body, long want, const char *substr)
{
    struct hresp r;
    http_post_json(b, path, body, &r);
    ck_assert_msg(r.status == want, "POST %s %s: %ld %s", path, body, r.status, r.body);
    if (substr)
        ck_assert_msg(strstr(r.body, substr), "POST %s %s: body lacks \"%s\": %s", path, body,
                      substr, r.body);
    hresp_free(&r);
}

/* Streams the layout into volume v1 at path. */
static void
put_layout(struct berthd *b, const char *path)
{
    ck_assert_int_eq(sh("tar -C %s/layout -cf - . | curl -sf -o /dev/null -X PUT -H 'Expect:' "
                        "--data-binary @- '%s/v1/volumes/v1/files?path=%s'",
                        b->tmp, b->base_url, path),
                     0);
}

START_TEST(layout_in_a_volume_imports_as_an_image)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    make_layout(&b);
    post(&b, "/v1/volumes", "{\"handle\": \"v1\"}", 201, NULL);
    put_layout(&b, "/out/image");
    post(&b, "/v1/images?name=built:1",
         "{\"source\": {\"volume\": \"v1\", \"path\": \"/out/image\"}}", 201, "\"built:1\"");
    /* Cached by digest like any other import. */
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"path\": \"/out/image\"}}", 200,
         "\"digest\"");
    struct hresp r;
    http_get(&b, "/v1/images/built:1", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "layers")), 1);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(layout_in_a_volume_cannot_reach_outside_through_symlinks)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    make_layout(&b);
    post(&b, "/v1/volumes", "{\"handle\": \"v1\"}", 201, NULL);
    /* A layout whose blobs directory is a symlink to a directory on the
     * host that holds exactly the right blobs: still refused. */
    ck_assert_int_eq(sh("set -e; cd %s; mkdir -p evil; cp layout/index.json layout/oci-layout "
                        "evil/; ln -s %s/layout/blobs evil/blobs; tar -C evil -cf evil.tar .",
                        b.tmp, b.tmp),
                     0);
    ck_assert_int_eq(sh("curl -sf -o /dev/null -X PUT -H 'Expect:' --data-binary @%s/evil.tar "
                        "'%s/v1/volumes/v1/files?path=/evil'",
                        b.tmp, b.base_url),
                     0);
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"path\": \"/evil\"}}", 422,
         "symbolic link");
    /* A path that leaves the volume is refused too. */
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"path\": \"/../../..\"}}", 400,
         NULL);
    struct hresp r;
    http_get(&b, "/v1/images", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "images")), 0);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(fifo_in_a_layout_is_refused_without_blocking)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    make_layout(&b);
    post(&b, "/v1/volumes", "{\"handle\": \"v1\"}", 201, NULL);
    /* A layout whose index.json is a FIFO: opening it for reading would
     * wait for a writer forever and pin a pool thread. */
    ck_assert_int_eq(sh("set -e; cd %s; mkdir -p fifo/blobs; cp layout/oci-layout fifo/; "
                        "mkfifo fifo/index.json; tar -C fifo -cf fifo.tar .; "
                        "curl -sf -o /dev/null -X PUT -H 'Expect:' --data-binary @fifo.tar "
                        "'%s/v1/volumes/v1/files?path=/fifo'",
                        b.tmp, b.base_url),
                     0);
    double t0 = now_ms();
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"path\": \"/fifo\"}}", 422,
         "not a regular file");
    ck_assert_msg(now_ms() - t0 < 5000, "took %.0f ms", now_ms() - t0);
    /* The same from a layout directory on the host. */
    char body[1024];
    snprintf(body, sizeof(body), "{\"source\": {\"layout\": \"%s/fifo\"}}", b.tmp);
    post(&b, "/v1/images", body, 422, "not a regular file");
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_int_eq(json_object_get_int(json_at(r.json, "jobs.running")), 0);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(volume_source_errors_name_the_problem)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"nope\"}}", 404, "nope");
    post(&b, "/v1/volumes", "{\"handle\": \"v1\"}", 201, NULL);
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"path\": \"/missing\"}}", 404,
         "missing");
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"layout\": \"/x\"}}", 400, "either");
    post(&b, "/v1/images", "{\"source\": {\"layout\": \"/x\", \"path\": \"/y\"}}", 400,
         "source.path");
    post(&b, "/v1/images", "{\"source\": {\"volume\": 7}}", 400, "source.volume");
    /* An empty volume is not a layout: said of the volume and the path
     * the client gave, never of the /proc/self/fd path it is read
     * through. */
    post(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\"}}", 422,
         "\"source.volume v1 path /: not an OCI image layout (no oci-layout file)\"");
    ck_assert_int_eq(
        sh("mkdir -p %s/sub && echo '{\"imageLayoutVersion\": \"1.0.0\"}' > %s/sub/oci-layout",
           b.tmp, b.tmp),
        0);
    ck_assert_int_eq(sh("tar -C %s/sub -cf - . | curl -sf -o /dev/null -X PUT -H 'Expect:' "
                        "--data-binary @- '%s/v1/volumes/v1/files?path=/sub'",
                        b.tmp, b.base_url),
                     0);
    struct hresp r;
    http_post_json(&b, "/v1/images", "{\"source\": {\"volume\": \"v1\", \"path\": \"/sub\"}}", &r);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "\"source.volume v1 path /sub: no index.json\"") &&
                      !strstr(r.body, "/proc/"),
                  "%s", r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("api_images_volume");
    TCase *tc = tcase_create("images_volume");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layout_in_a_volume_imports_as_an_image);
    tcase_add_test(tc, layout_in_a_volume_cannot_reach_outside_through_symlinks);
    tcase_add_test(tc, fifo_in_a_layout_is_refused_without_blocking);
    tcase_add_test(tc, volume_source_errors_name_the_problem);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
