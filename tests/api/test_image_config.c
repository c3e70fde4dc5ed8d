/*
 * The image config as Docker applies it, against a real berthd and runc:
 * a busybox image whose config sets Env, Entrypoint, Cmd, WorkingDir and
 * User gives its containers and processes their defaults; HOME comes
 * from the container's /etc/passwd. Every container is deleted by the
 * test, and the harness's safety net removes any a failed test left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_containers.h"
#include "tests/fixtures/imgfix.h"

static bool
has_str(json_object *arr, const char *s)
{
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), s) == 0)
            return true;
    return false;
}

/* busybox with the given run config, imported as name. */
static void
import_configured(struct berthd *b, const char *name, const char *run_config)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/cfg-layout", b->tmp);
    /* busybox with its applets, a passwd, and the usual directories. */
    struct fx_buf t = {0};
    fx_tar_add(&t, "bin/", '5', NULL, NULL, 0, 0755);
    size_t len = 0;
    char *bb = fx_read_file("/bin/busybox", &len);
    ck_assert_ptr_nonnull(bb);
    fx_tar_add(&t, "bin/busybox", '0', NULL, bb, len, 0755);
    free(bb);
    FILE *p = popen("/bin/busybox --list", "r");
    ck_assert_ptr_nonnull(p);
    char applet[128];
    while (fgets(applet, sizeof(applet), p)) {
        applet[strcspn(applet, "\n")] = '\0';
        char n[160];
        snprintf(n, sizeof(n), "bin/%s", applet);
        if (applet[0] && strcmp(applet, "busybox") != 0)
            fx_tar_add(&t, n, '2', "busybox", NULL, 0, 0777);
    }
    pclose(p);
    const char *dirs[] = {"tmp/", "root/", "etc/", "proc/", "sys/", "dev/", NULL};
    for (const char *const *d = dirs; *d; d++)
        fx_tar_add(&t, *d, '5', NULL, NULL, 0, 0755);
    fx_tar_file(&t, "etc/passwd",
                "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n");
    fx_tar_end(&t);
    struct fx_layout s = {.layers = {&t}, .ref_name = "1", .run_config = run_config};
    fx_write_layout(dir, &s);
    free(t.data);
    char q[256];
    snprintf(q, sizeof(q), "?name=%s", name);
    struct hresp r;
    fx_import_layout(b, q, dir, NULL, &r);
    ck_assert_msg(r.status == 201, "import: %ld %s", r.status, r.body);
    hresp_free(&r);
}

static char *
run(struct berthd *b, const char *handle, const char *id, const char *body)
{
    proc_start(b, handle, body);
    ck_assert_int_eq(proc_wait(b, handle, id), 0);
    return proc_output(b, handle, id, "stdout", "");
}

START_TEST(image_config_gives_containers_and_processes_their_defaults)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    import_configured(&b, "cfgimg",
                      "{\"Env\":[\"PATH=/bin\",\"GREETING=from-image\",\"KEEP=image\"],"
                      "\"Entrypoint\":[\"/bin/sh\",\"-c\"],"
                      "\"Cmd\":[\"echo $GREETING $KEEP $(pwd) $(id -u) $HOME $PATH\"],"
                      "\"WorkingDir\":\"/tmp\",\"User\":\"nobody\"}");
    struct hresp r;
    ctr_create(&b, "{\"handle\":\"cfg\",\"image\":\"cfgimg:1\",\"env\":[\"KEEP=container\"]}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    /* The container's env is layered over the image's. */
    json_object *env = json_at(r.json, "env");
    ck_assert_msg(has_str(env, "GREETING=from-image") && has_str(env, "KEEP=container") &&
                      !has_str(env, "KEEP=image") && has_str(env, "PATH=/bin"),
                  "env: %s", r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "working_dir")), "/tmp");
    hresp_free(&r);

    /* No path: Entrypoint + Cmd, in WorkingDir, as User, HOME from passwd. */
    char *out = run(&b, "cfg", "def", "{\"id\":\"def\"}");
    ck_assert_str_eq(out, "from-image container /tmp 65534 / /bin\n");
    free(out);
    /* args replace Cmd, after Entrypoint. */
    out = run(&b, "cfg", "args", "{\"id\":\"args\",\"args\":[\"echo replaced $(id -un)\"]}");
    ck_assert_str_eq(out, "replaced nobody\n");
    free(out);
    /* A path runs as given; the user's HOME follows the user. */
    out = run(&b, "cfg", "root",
              "{\"id\":\"root\",\"path\":\"sh\",\"args\":[\"-c\",\"echo $HOME $(id -u) "
              "$(pwd)\"],\"user\":\"root\",\"dir\":\"/\"}");
    ck_assert_str_eq(out, "/root 0 /\n");
    free(out);
    /* A HOME of the process's own wins. */
    out = run(&b, "cfg", "home",
              "{\"id\":\"home\",\"path\":\"sh\",\"args\":[\"-c\",\"echo $HOME\"],"
              "\"env\":[\"HOME=/custom\"]}");
    ck_assert_str_eq(out, "/custom\n");
    free(out);
    ctr_delete(&b, "cfg");
    berthd_finish(&b);
}
END_TEST

START_TEST(without_an_image_path_the_default_path_applies)
{
    ctr_require_runtime();
    struct berthd b = {0};
    berthd_start(&b, NULL);
    import_configured(&b, "nopath", "{\"Cmd\":[\"/bin/sh\",\"-c\",\"echo $PATH\"]}");
    struct hresp r;
    ctr_create(&b, "{\"handle\":\"nopath\",\"image\":\"nopath:1\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    char *out = run(&b, "nopath", "p", "{\"id\":\"p\"}");
    ck_assert_str_eq(out, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
    free(out);
    /* An image without Entrypoint or Cmd needs a path. */
    ctr_delete(&b, "nopath");
    import_configured(&b, "nocmd", "{}");
    ctr_create(&b, "{\"handle\":\"nocmd\",\"image\":\"nocmd:1\"}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    http_post_json(&b, "/v1/containers/nocmd/processes", "{\"id\":\"x\"}", &r);
    ck_assert_error_reply(&r, 400, "bad_request", "path");
    hresp_free(&r);
    ctr_delete(&b, "nocmd");
    berthd_finish(&b);
}
END_TEST

static Suite *
config_suite(void)
{
    Suite *s = suite_create("image_config");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 120);
    ctr_add_fixture(tc);
    tcase_add_test(tc, image_config_gives_containers_and_processes_their_defaults);
    tcase_add_test(tc, without_an_image_path_the_default_path_applies);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(config_suite());
}
