/*
 * The daemon's log as an operator reads it, against a real berthd: each
 * request's line carries its query string and, for an error, its code;
 * an error gets one line, not several; imports are logged like container
 * creation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tests/fixtures/imgfix.h"

/* Lines of the log containing every one of the NULL-terminated needles. */
static int
count_lines(const struct berthd *b, const char *const *needles)
{
    char *log = berthd_log(b);
    int n = 0;
    for (char *line = log, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        bool all = true;
        for (const char *const *s = needles; *s && all; s++)
            all = strstr(line, *s) != NULL;
        n += all;
    }
    free(log);
    return n;
}

/* The request log line is written as the request completes: give it a moment. */
static int
count_lines_soon(const struct berthd *b, const char *const *needles, int want)
{
    int n = 0;
    for (int i = 0; i < 50 && (n = count_lines(b, needles)) != want; i++)
        sleep_ms(20);
    return n;
}

START_TEST(request_lines_carry_the_query_and_the_error_code)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/volumes?property.team=infra", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    ck_assert_int_eq(
        count_lines_soon(&b, (const char *[]){"GET /v1/volumes?property.team=infra 200", NULL}, 1),
        1);
    http_get(&b, "/v1/volumes/nosuch", &r);
    ck_assert_int_eq(r.status, 404);
    hresp_free(&r);
    ck_assert_int_eq(
        count_lines_soon(&b, (const char *[]){"GET /v1/volumes/nosuch 404", "not_found", NULL}, 1),
        1);
    berthd_finish(&b);
}
END_TEST

START_TEST(an_error_gets_one_line)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    /* A tar stream that is no image: the import fails with 422. */
    static const char junk[1024] = "not a tar stream at all";
    struct hresp r;
    struct fx_src src = {.data = junk, .len = sizeof(junk)};
    fx_post(&b, "/v1/images?name=junk", "application/x-tar", NULL, &src, false, 10000, &r);
    ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
    char msg[256];
    snprintf(msg, sizeof(msg), "%.40s", json_object_get_string(json_at(r.json, "error.message")));
    hresp_free(&r);
    ck_assert_int_eq(
        count_lines_soon(
            &b, (const char *[]){"POST /v1/images?name=junk 422", "invalid_content", NULL}, 1),
        1);
    /* Nothing else says it again. */
    ck_assert_int_eq(count_lines(&b, (const char *[]){msg, NULL}), 0);
    ck_assert_int_eq(count_lines(&b, (const char *[]){"import failed", NULL}), 0);
    berthd_finish(&b);
}
END_TEST

START_TEST(imports_are_logged)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/layout", b.tmp);
    struct fx_buf t = {0};
    fx_simple_layer(&t, "logged");
    struct fx_layout s = {.layers = {&t}, .ref_name = "1"};
    fx_write_layout(dir, &s);
    free(t.data);
    struct hresp r;
    fx_import_layout(&b, "?name=logged", dir, NULL, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    char line[160];
    snprintf(line, sizeof(line), "image %s: imported",
             json_object_get_string(json_at(r.json, "digest")));
    hresp_free(&r);
    ck_assert_int_eq(count_lines_soon(&b, (const char *[]){line, "logged:1", NULL}, 1), 1);
    berthd_finish(&b);
}
END_TEST

static Suite *
logs_suite(void)
{
    Suite *s = suite_create("logs");
    TCase *tc = tcase_create("logs");
    tcase_add_test(tc, request_lines_carry_the_query_and_the_error_code);
    tcase_add_test(tc, an_error_gets_one_line);
    tcase_add_test(tc, imports_are_logged);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(logs_suite());
}
