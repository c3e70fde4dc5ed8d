/*
 * Image names by the distribution reference grammar, against a real
 * berthd: what ?name= and a layout's ref.name become, every form a GET
 * finds an image by, what is refused, the 404 that names what was tried,
 * and the image config GET shows. Layouts are written by the test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tests/fixtures/imgfix.h"

static bool
has_str(json_object *arr, const char *s)
{
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), s) == 0)
            return true;
    return false;
}

/* A one-layer layout with ref.name ref (and the given run config) in b's tmp. */
static const char *
layout(struct berthd *b, const char *sub, const char *ref, const char *run_config)
{
    static char dir[4][PATH_MAX];
    static int slot;
    char *d = dir[slot++ % 4];
    snprintf(d, PATH_MAX, "%s/%s", b->tmp, sub);
    struct fx_buf t = {0};
    fx_simple_layer(&t, sub);
    struct fx_layout s = {.layers = {&t}, .ref_name = ref, .run_config = run_config};
    fx_write_layout(d, &s);
    free(t.data);
    return d;
}

static void
get_status(struct berthd *b, const char *ref, long want)
{
    char path[512];
    snprintf(path, sizeof(path), "/v1/images/%s", ref);
    struct hresp r;
    http_get(b, path, &r);
    ck_assert_msg(r.status == want, "GET %s: %ld, expected %ld: %s", path, r.status, want, r.body);
    hresp_free(&r);
}

START_TEST(short_names_mean_docker_io_library_latest)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    fx_import_layout(&b, "?name=busybox", layout(&b, "a", "docker.io/x/y:z", NULL), NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_msg(has_str(json_at(r.json, "names"), "busybox:latest"), "%s", r.body);
    ck_assert_msg(has_str(json_at(r.json, "references"), "docker.io/library/busybox:latest"), "%s",
                  r.body);
    hresp_free(&r);
    const char *forms[] = {"busybox",
                           "busybox:latest",
                           "library/busybox",
                           "docker.io/library/busybox:latest",
                           "index.docker.io/library/busybox",
                           NULL};
    for (const char *const *f = forms; *f; f++)
        get_status(&b, *f, 200);

    fx_import_layout(&b, "?name=team/app", layout(&b, "b", "docker.io/x/y:z", NULL), NULL, &r);
    ck_assert_msg(has_str(json_at(r.json, "names"), "team/app:latest") &&
                      has_str(json_at(r.json, "references"), "docker.io/team/app:latest"),
                  "%s", r.body);
    hresp_free(&r);
    get_status(&b, "docker.io/team/app", 200);

    /* A registry with a port is kept as written. */
    fx_import_layout(&b, "?name=localhost:5000/app:1", layout(&b, "c", "x", NULL), NULL, &r);
    ck_assert_msg(has_str(json_at(r.json, "names"), "localhost:5000/app:1"), "%s", r.body);
    hresp_free(&r);
    get_status(&b, "localhost:5000/app:1", 200);
    berthd_finish(&b);
}
END_TEST

START_TEST(a_bare_tag_ref_name_is_never_a_name)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    /* umoci and skopeo write the tag alone: "1". */
    fx_import_layout(&b, NULL, layout(&b, "a", "1", NULL), NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_msg(has_str(json_at(r.json, "names"), "localhost/1:latest") &&
                      !has_str(json_at(r.json, "names"), "1"),
                  "a bare tag became a name: %s", r.body);
    hresp_free(&r);
    get_status(&b, "localhost/1", 200);

    /* With ?name= the repository comes from it and the tag from the layout. */
    fx_import_layout(&b, "?name=team/app", layout(&b, "b", "2.0", NULL), NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_msg(has_str(json_at(r.json, "names"), "team/app:2.0"), "%s", r.body);
    hresp_free(&r);
    get_status(&b, "team/app:2.0", 200);
    berthd_finish(&b);
}
END_TEST

START_TEST(invalid_references_are_400_and_unknown_ones_404_naming_the_forms_tried)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *dir = layout(&b, "a", "1", NULL);
    static const struct {
        const char *name, *why;
    } bad[] = {
        {"Busybox", "lowercase"},    {"a:b:c", "tag"},       {"busybox@sha256:zz", "digest"},
        {"team//app", "components"}, {"-bad", "components"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char q[128];
        snprintf(q, sizeof(q), "?name=%s", bad[i].name);
        struct hresp r;
        fx_import_layout(&b, q, dir, NULL, &r);
        ck_assert_error_reply(&r, 400, "bad_request", bad[i].why);
        hresp_free(&r);
    }
    ck_assert_int_eq(fx_image_count(&b), 0);
    struct hresp r;
    http_get(&b, "/v1/images/nosuch", &r);
    ck_assert_error_reply(&r, 404, "not_found", "docker.io/library/nosuch:latest");
    ck_assert_msg(
        strstr(json_object_get_string(json_at(r.json, "error.message")), "localhost/nosuch:latest"),
        "%s", r.body);
    hresp_free(&r);
    /* A ref that is no valid name is looked up as typed, and the reply
     * says why it is no name, never naming a localhost/Nope:latest that
     * could not have been stored. */
    http_get(&b, "/v1/images/Nope", &r);
    ck_assert_error_reply(&r, 404, "not_found",
                          "image Nope: not found (no image has that name or ID; as a name it is "
                          "invalid: a repository name must be lowercase)");
    ck_assert_msg(!strstr(r.body, "localhost/"), "%s", r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(get_shows_the_image_config)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    fx_import_layout(
        &b, "?name=cfg:1",
        layout(&b, "a", "1",
               "{\"Env\":[\"PATH=/bin\",\"A=1\"],\"Entrypoint\":[\"/bin/sh\",\"-c\"],"
               "\"Cmd\":[\"echo hi\"],\"WorkingDir\":\"/w\",\"User\":\"nobody\","
               "\"ExposedPorts\":{\"80/tcp\":{},\"53/udp\":{}},\"Labels\":{\"k\":\"v\"}}"),
        NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    hresp_free(&r);
    http_get(&b, "/v1/images/cfg:1", &r);
    ck_assert_int_eq(r.status, 200);
    json_object *c = json_at(r.json, "config");
    ck_assert_msg(c, "no config: %s", r.body);
    ck_assert(has_str(json_at(c, "env"), "A=1") && has_str(json_at(c, "env"), "PATH=/bin"));
    ck_assert(has_str(json_at(c, "entrypoint"), "-c"));
    ck_assert(has_str(json_at(c, "cmd"), "echo hi"));
    ck_assert_str_eq(json_object_get_string(json_at(c, "working_dir")), "/w");
    ck_assert_str_eq(json_object_get_string(json_at(c, "user")), "nobody");
    ck_assert(has_str(json_at(c, "exposed_ports"), "80/tcp") &&
              has_str(json_at(c, "exposed_ports"), "53/udp"));
    ck_assert_str_eq(json_object_get_string(json_at(c, "labels.k")), "v");
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

static Suite *
names_suite(void)
{
    Suite *s = suite_create("images_names");
    TCase *tc = tcase_create("names");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, short_names_mean_docker_io_library_latest);
    tcase_add_test(tc, a_bare_tag_ref_name_is_never_a_name);
    tcase_add_test(tc, invalid_references_are_400_and_unknown_ones_404_naming_the_forms_tried);
    tcase_add_test(tc, get_shows_the_image_config);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(names_suite());
}
