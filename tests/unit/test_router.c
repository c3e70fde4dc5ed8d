/* Router: literal and parameter segments, 404 vs 405, decoding. */
#include <check.h>
#include <string.h>

#include "api/router.h"

static void
h(struct api_req *req)
{
    (void)req;
}

static const struct route routes[] = {
    {"GET", "/v1/images", h, BODY_NONE, NULL},
    {"POST", "/v1/images", h, BODY_STREAM, NULL},
    {"POST", "/v1/images/prune", h, BODY_JSON, NULL},
    {"GET", "/v1/images/{ref}", h, BODY_NONE, NULL, .rest = true},
    {"DELETE", "/v1/images/{ref}", h, BODY_NONE, NULL},
    {"GET", "/v1/containers/{handle}/processes/{id}", h, BODY_NONE, NULL},
};
#define N (sizeof(routes) / sizeof(routes[0]))

START_TEST(router_matches_literal_path)
{
    struct route_match m;
    char allow[64];
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images", &m, allow, sizeof(allow)),
                     ROUTE_FOUND);
    ck_assert_ptr_eq(m.route, &routes[0]);
    ck_assert_uint_eq(m.nparams, 0);
}
END_TEST

START_TEST(router_extracts_parameters)
{
    struct route_match m;
    ck_assert_int_eq(
        router_match(routes, N, "GET", "/v1/containers/build-42/processes/task", &m, NULL, 0),
        ROUTE_FOUND);
    ck_assert_str_eq(route_param(&m, "handle"), "build-42");
    ck_assert_str_eq(route_param(&m, "id"), "task");
    ck_assert_ptr_null(route_param(&m, "nope"));
}
END_TEST

START_TEST(router_prefers_literal_over_parameter)
{
    struct route_match m;
    ck_assert_int_eq(router_match(routes, N, "POST", "/v1/images/prune", &m, NULL, 0), ROUTE_FOUND);
    ck_assert_ptr_eq(m.route, &routes[2]);
}
END_TEST

START_TEST(router_reports_allowed_methods_for_known_path)
{
    struct route_match m;
    char allow[64];
    ck_assert_int_eq(router_match(routes, N, "PUT", "/v1/images", &m, allow, sizeof(allow)),
                     ROUTE_METHOD_NOT_ALLOWED);
    ck_assert_str_eq(allow, "GET, POST");
    ck_assert_int_eq(router_match(routes, N, "PUT", "/v1/images/abc", &m, allow, sizeof(allow)),
                     ROUTE_METHOD_NOT_ALLOWED);
    ck_assert_str_eq(allow, "GET, DELETE");
}
END_TEST

START_TEST(router_unknown_path_is_not_found)
{
    struct route_match m;
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/nothing", &m, NULL, 0), ROUTE_NOT_FOUND);
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/containers/c/processes/p/x", &m, NULL, 0),
                     ROUTE_NOT_FOUND);
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/", &m, NULL, 0), ROUTE_NOT_FOUND);
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/x/", &m, NULL, 0), ROUTE_NOT_FOUND);
    ck_assert_int_eq(router_match(routes, N, "GET", "", &m, NULL, 0), ROUTE_NOT_FOUND);
}
END_TEST

START_TEST(router_decodes_percent_encoding_in_parameters)
{
    struct route_match m;
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/busybox%3Alatest", &m, NULL, 0),
                     ROUTE_FOUND);
    ck_assert_str_eq(route_param(&m, "ref"), "busybox:latest");
}
END_TEST

START_TEST(router_rest_parameter_takes_slashes)
{
    struct route_match m;
    ck_assert_int_eq(
        router_match(routes, N, "GET", "/v1/images/docker.io/library/busybox:1", &m, NULL, 0),
        ROUTE_FOUND);
    ck_assert_str_eq(route_param(&m, "ref"), "docker.io/library/busybox:1");
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/a%2Fb", &m, NULL, 0), ROUTE_FOUND);
    ck_assert_str_eq(route_param(&m, "ref"), "a/b");
    /* Without rest, a parameter is one segment: DELETE (no rest) does not
     * match, though the path is known to GET. */
    ck_assert_int_eq(router_match(routes, N, "DELETE", "/v1/images/a/b", &m, NULL, 0),
                     ROUTE_METHOD_NOT_ALLOWED);
}
END_TEST

START_TEST(router_refuses_bad_escapes)
{
    struct route_match m;
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/a%zz", &m, NULL, 0),
                     ROUTE_BAD_PATH);
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/a%4", &m, NULL, 0), ROUTE_BAD_PATH);
    ck_assert_int_eq(router_match(routes, N, "GET", "/v1/images/a%00", &m, NULL, 0),
                     ROUTE_BAD_PATH);
}
END_TEST

START_TEST(router_head_matches_get)
{
    struct route_match m;
    ck_assert_int_eq(router_match(routes, N, "HEAD", "/v1/images", &m, NULL, 0), ROUTE_FOUND);
    ck_assert_ptr_eq(m.route, &routes[0]);
}
END_TEST

START_TEST(router_refuses_overlong_parameter)
{
    char path[1024] = "/v1/images/";
    memset(path + strlen(path), 'a', 600);
    struct route_match m;
    ck_assert_int_eq(router_match(routes, N, "GET", path, &m, NULL, 0), ROUTE_BAD_PATH);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("match");
    tcase_add_test(tc, router_matches_literal_path);
    tcase_add_test(tc, router_extracts_parameters);
    tcase_add_test(tc, router_prefers_literal_over_parameter);
    tcase_add_test(tc, router_reports_allowed_methods_for_known_path);
    tcase_add_test(tc, router_unknown_path_is_not_found);
    tcase_add_test(tc, router_decodes_percent_encoding_in_parameters);
    tcase_add_test(tc, router_rest_parameter_takes_slashes);
    tcase_add_test(tc, router_refuses_bad_escapes);
    tcase_add_test(tc, router_head_matches_get);
    tcase_add_test(tc, router_refuses_overlong_parameter);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
