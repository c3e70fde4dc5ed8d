/*
 * Error replies: every one is {"error": {"code", "message"}} with the
 * right status, for unknown paths and methods, oversized or malformed
 * bodies, bodies where none is taken, oversized URIs and headers, too many
 * query parameters, and request framing that could be read two ways.
 *
 * The JSON-body checks are helpers that take the route. They run against
 * the first JSON route this build has (harness_json_route: POST
 * /v1/images/prune once it exists, POST /v1/debug/hash in a build with
 * -DBERTH_BENCH_ROUTES=ON) and say SKIP when there is none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/api/harness.h"

/* A JSON body of exactly len bytes: an object with one long string. */
static char *
big_json(size_t len)
{
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'a', len);
    memcpy(s, "{\"pad\": \"", 9);
    memcpy(s + len - 2, "\"}", 2);
    s[len] = '\0';
    return s;
}

static const char *
json_route_or_skip(struct berthd *b, const char *test)
{
    const char *route = harness_json_route(b);
    if (!route)
        fprintf(stderr,
                "SKIP %s: this build has no JSON route yet (no /v1/images/prune; "
                "/v1/debug/hash needs -DBERTH_BENCH_ROUTES=ON)\n",
                test);
    return route;
}

/* 413 for a JSON body one byte over 1 MiB on route, sent with a
 * Content-Length or chunked. */
static void
check_json_body_too_large(struct berthd *b, const char *route, bool chunked)
{
    size_t len = 1024 * 1024 + 1;
    char *body = big_json(len);
    struct hresp r;
    http_do(b,
            &(struct hreq){
                .method = "POST", .path = route, .body = body, .body_len = len, .chunked = chunked},
            &r);
    ck_assert_error_reply(&r, 413, "payload_too_large", "1048576");
    hresp_free(&r);
    free(body);
    /* The daemon is still fine afterwards. */
    http_get(b, "/v1/health", &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "health after 413: %ld", r.status);
    hresp_free(&r);
}

/* 400 naming the problem for bodies that are not a JSON object. */
static void
check_malformed_json(struct berthd *b, const char *route)
{
    static const struct {
        const char *body;
        const char *substr;
    } cases[] = {
        {"{\"bytes\": ", "malformed JSON"},
        {"{\"bytes\" 1}", "malformed JSON at byte"},
        {"{} trailing", "trailing data"},
        /* A comment after the object is named as one (README), not as
         * trailing data. */
        {"{} // note", "at byte 3: comment (JSON has none)"},
        {"{}\n/* note */", "at byte 3: comment (JSON has none)"},
        {"[1, 2]", "expected a JSON object, got an array"},
        /* An empty body is not in this list: routes whose fields are all
         * optional (prune) take it as {}. */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hresp r;
        http_post_json(b, route, cases[i].body, &r);
        char why[1024];
        ck_assert_msg(error_body_ok(&r, 400, "bad_request", cases[i].substr, why, sizeof(why)),
                      "POST %s '%s': %s", route, cases[i].body, why);
        hresp_free(&r);
    }
}

/* 400 naming the field when a field has the wrong type. */
static void
check_wrong_field_type(struct berthd *b, const char *route, const char *body, const char *field)
{
    struct hresp r;
    http_post_json(b, route, body, &r);
    char quoted[128];
    snprintf(quoted, sizeof(quoted), "\"%s\"", field);
    ck_assert_error_reply(&r, 400, "bad_request", quoted);
    hresp_free(&r);
}

START_TEST(unknown_path_is_404_json)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/no-such-thing", &r);
    ck_assert_error_reply(&r, 404, "not_found", "/v1/no-such-thing");
    hresp_free(&r);
    http_get(&b, "/", &r);
    ck_assert_error_reply(&r, 404, "not_found", NULL);
    hresp_free(&r);
    /* A route's prefix or an extension of it is not the route. */
    http_get(&b, "/v1/health/extra", &r);
    ck_assert_error_reply(&r, 404, "not_found", NULL);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(wrong_method_is_405_with_allow_header)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    static const char *const methods[] = {"POST", "DELETE", "PUT", NULL};
    for (const char *const *m = methods; *m; m++) {
        struct hresp r;
        http_do(&b, &(struct hreq){.method = *m, .path = "/v1/health"}, &r);
        ck_assert_error_reply(&r, 405, "method_not_allowed", *m);
        char allow[128];
        ck_assert_msg(hresp_header(&r, "Allow", allow, sizeof(allow)), "%s: no Allow header", *m);
        ck_assert_str_eq(allow, "GET");
        hresp_free(&r);
    }
    berthd_finish(&b);
}
END_TEST

START_TEST(json_body_over_1mib_with_content_length_is_413)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *route = json_route_or_skip(&b, "json_body_over_1mib_with_content_length_is_413");
    if (route)
        check_json_body_too_large(&b, route, false);
    berthd_finish(&b);
}
END_TEST

/* The refusal comes before the body has been read: the daemon must not
 * close the connection under a client still sending (a reset that loses
 * the 413, or hits the client's send first). Many rounds, bodies just
 * over the limit and several times it, each answered with the message. */
START_TEST(json_body_over_1mib_is_413_every_time)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *route = json_route_or_skip(&b, "json_body_over_1mib_is_413_every_time");
    static const size_t sizes[] = {1024 * 1024 + 1, 3 * 1024 * 1024, 8 * 1024 * 1024};
    for (int i = 0; route && i < 120; i++) {
        size_t len = sizes[i % 3];
        char *body = big_json(len);
        struct hresp r;
        http_do(&b, &(struct hreq){.method = "POST", .path = route, .body = body, .body_len = len},
                &r);
        char why[1024];
        ck_assert_msg(
            error_body_ok(&r, 413, "payload_too_large", "over the limit", why, sizeof(why)),
            "round %d, %zu bytes: curl %d: %s", i, len, r.curl_code, why);
        hresp_free(&r);
        free(body);
    }
    berthd_finish(&b);
}
END_TEST

START_TEST(json_body_over_1mib_chunked_is_413)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *route = json_route_or_skip(&b, "json_body_over_1mib_chunked_is_413");
    if (route)
        check_json_body_too_large(&b, route, true);
    berthd_finish(&b);
}
END_TEST

START_TEST(malformed_json_is_400_naming_the_problem)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *route = json_route_or_skip(&b, "malformed_json_is_400_naming_the_problem");
    if (route)
        check_malformed_json(&b, route);
    berthd_finish(&b);
}
END_TEST

/* What json-c's lenient parser takes is refused, naming what and where;
 * integer fields take integral exponents. */
START_TEST(json_bodies_are_parsed_strictly)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    static const struct {
        const char *body, *why;
    } cases[] = {
        {"{\"handle\":\"t1\",\"properties\":{\"a\":\"1\"},}", "at byte 38: trailing comma"},
        {"{'handle':\"t1\"}", "at byte 1: single-quoted string"},
        {"{\"handle\":\"t1\" /* c */}", "at byte 15: comment"},
        {"{\"handle\":\"t1\",\"handle\":\"t2\"}", "at byte 15: duplicate key \"handle\""},
        {"{\"ttl_s\":NaN}", "at byte 9"},
        {"{\"ttl_s\":Infinity}", "at byte 9"},
        {"{\"ttl_s\":1.5}", "expected an integer"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hresp r;
        http_post_json(&b, "/v1/volumes", cases[i].body, &r);
        ck_assert_error_reply(&r, 400, "bad_request", cases[i].why);
        hresp_free(&r);
    }
    /* Nothing was made by any of them. */
    struct hresp r;
    http_get(&b, "/v1/volumes", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "volumes")), 0);
    hresp_free(&r);
    http_post_json(&b, "/v1/volumes", "{\"handle\":\"e\",\"ttl_s\":1e2}", &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_int_eq(json_object_get_int64(json_at(r.json, "ttl_s")), 100);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(wrong_field_type_is_400_naming_the_field)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    /* Routes whose fields this test knows; add the next ones here. */
    static const struct {
        const char *route, *body, *field;
    } known[] = {
        {"/v1/debug/hash", "{\"bytes\": \"lots\"}", "bytes"},
        {"/v1/images/prune", "{\"keep_bytes\": \"lots\"}", "keep_bytes"},
    };
    const char *route = json_route_or_skip(&b, "wrong_field_type_is_400_naming_the_field");
    bool ran = false;
    for (size_t i = 0; route && i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(known[i].route, route) == 0) {
            check_wrong_field_type(&b, route, known[i].body, known[i].field);
            ran = true;
        }
    }
    if (route && !ran)
        fprintf(stderr, "SKIP wrong_field_type_is_400_naming_the_field: no field known for %s\n",
                route);
    berthd_finish(&b);
}
END_TEST

START_TEST(body_on_a_route_that_takes_none_is_400)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_do(&b, &(struct hreq){.method = "GET", .path = "/v1/health", .body = "{\"x\": 1}"}, &r);
    ck_assert_error_reply(&r, 400, "bad_request", "takes no request body");
    hresp_free(&r);
    http_do(&b,
            &(struct hreq){.method = "GET", .path = "/v1/metrics", .body = "x", .chunked = true},
            &r);
    ck_assert_error_reply(&r, 400, "bad_request", "takes no request body");
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

static char *
long_string(size_t len, char c)
{
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, len);
    s[len] = '\0';
    return s;
}

START_TEST(uri_path_of_10kib_is_414)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char *seg = long_string(10 * 1024, 'a');
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "/v1/%s", seg), 0);
    struct hresp r;
    http_get(&b, path, &r);
    ck_assert_error_reply(&r, 414, "uri_too_long", "8192");
    hresp_free(&r);
    free(path);
    free(seg);
    berthd_finish(&b);
}
END_TEST

/* The query string is part of the request target: a 10 KiB one is as much
 * over the limit as a 10 KiB path. */
START_TEST(uri_query_of_10kib_is_414)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char *val = long_string(10 * 1024, 'q');
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "/v1/health?x=%s", val), 0);
    struct hresp r;
    http_get(&b, path, &r);
    ck_assert_error_reply(&r, 414, "uri_too_long", "8192");
    hresp_free(&r);
    free(path);
    free(val);
    berthd_finish(&b);
}
END_TEST

/* A query parameter the route does not take (a typo, or one that means
 * something on another route) and a flag value that is not 0, 1, true or
 * false are 400 naming them, not ignored; nothing is done. The
 * parameters a route documents still work. */
START_TEST(unknown_query_parameters_and_flag_values_are_400)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    static const struct {
        const char *method, *path, *msg;
    } bad[] = {
        {"GET", "/v1/health?foo=1", "unknown query parameter \"foo\" (GET /v1/health takes: none)"},
        {"GET", "/v1/images?follow=1", "unknown query parameter \"follow\""},
        {"GET", "/v1/volumes?propertyx=1", "unknown query parameter \"propertyx\""},
        {"GET", "/v1/volumes?property.=1", "unknown query parameter \"property.\""},
        {"GET", "/v1/containers/c/processes/p/output?folow=1",
         "unknown query parameter \"folow\" (GET /v1/containers/{handle}/processes/{id}/output "
         "takes: stdout, stderr, since, until, tail, timestamps, follow)"},
        {"GET", "/v1/containers/c/processes/p/output?follow=yes",
         "query \"follow\": yes is not 0, 1, true or false"},
        {"GET", "/v1/containers/c/processes/p/stdout?follow=2",
         "query \"follow\": 2 is not 0, 1, true or false"},
        {"DELETE", "/v1/volumes/v1?force=yes", "query \"force\": yes is not 0, 1, true or false"},
        {"DELETE", "/v1/volumes/v1?forse=1", "unknown query parameter \"forse\""},
        {"POST", "/v1/volumes?handle=v2", "unknown query parameter \"handle\""},
    };
    struct hresp r;
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"v1\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        http_do(&b,
                &(struct hreq){.method = bad[i].method,
                               .path = bad[i].path,
                               .body = strcmp(bad[i].method, "POST") == 0 ? "{}" : NULL,
                               .body_len = strcmp(bad[i].method, "POST") == 0 ? 2 : 0},
                &r);
        char why[1024];
        ck_assert_msg(error_body_ok(&r, 400, "bad_request", bad[i].msg, why, sizeof(why)),
                      "%s %s: %s", bad[i].method, bad[i].path, why);
        hresp_free(&r);
    }
    /* Nothing was done: v1 is still there, no v2. */
    http_get(&b, "/v1/volumes", &r);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "volumes")), 1);
    hresp_free(&r);
    /* What the routes document is taken: a property filter, a flag with
     * or without a value. */
    http_get(&b, "/v1/volumes?property.team=x", &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    ck_assert_int_eq(json_object_array_length(json_at(r.json, "volumes")), 0);
    hresp_free(&r);
    http_do(&b, &(struct hreq){.method = "DELETE", .path = "/v1/volumes/v1?force=true"}, &r);
    ck_assert_msg(r.status == 200 || r.status == 204, "%ld %s", r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(headers_of_20kib_are_431)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    /* Twenty headers of 1 KiB each, then one header of 20 KiB. */
    char *pad = long_string(1024, 'h');
    const char *hdrs[21];
    char *lines[20];
    for (int i = 0; i < 20; i++) {
        ck_assert_int_ge(asprintf(&lines[i], "X-Pad-%d: %s", i, pad), 0);
        hdrs[i] = lines[i];
    }
    hdrs[20] = NULL;
    struct hresp r;
    http_do(&b, &(struct hreq){.path = "/v1/health", .headers = hdrs}, &r);
    ck_assert_error_reply(&r, 431, "headers_too_large", "16384");
    hresp_free(&r);
    for (int i = 0; i < 20; i++)
        free(lines[i]);

    char *one = NULL;
    char *big = long_string(20 * 1024, 'H');
    ck_assert_int_ge(asprintf(&one, "X-Big: %s", big), 0);
    const char *hdrs1[] = {one, NULL};
    http_do(&b, &(struct hreq){.path = "/v1/health", .headers = hdrs1}, &r);
    ck_assert_error_reply(&r, 431, "headers_too_large", "16384");
    hresp_free(&r);
    free(one);
    free(big);
    free(pad);

    /* Just under the limit is fine. */
    char *ok = long_string(8 * 1024, 'k');
    char *okline = NULL;
    ck_assert_int_ge(asprintf(&okline, "X-Ok: %s", ok), 0);
    const char *hdrs2[] = {okline, NULL};
    http_do(&b, &(struct hreq){.path = "/v1/health", .headers = hdrs2}, &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "8 KiB of headers: %ld %s", r.status, r.body);
    hresp_free(&r);
    free(okline);
    free(ok);
    berthd_finish(&b);
}
END_TEST

/* About 1,000 query parameters overran MHD's per-connection memory in the
 * middle of parsing them, and the request got no answer at all. */
START_TEST(query_of_1000_parameters_is_414)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char *path = malloc(16 * 1024);
    ck_assert_ptr_nonnull(path);
    size_t n = (size_t)sprintf(path, "/v1/health?");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(path + n, "%sp%d=v", i ? "&" : "", i);
    ck_assert_uint_lt(n, 8192); /* under the length limit: the count is what is refused */
    struct hresp r;
    http_do(&b, &(struct hreq){.path = path, .timeout_ms = 3000}, &r);
    ck_assert_error_reply(&r, 414, "uri_too_long", "1000 query parameters");
    hresp_free(&r);

    /* As many as the limit pass the count: all are parsed, and the
     * first one /v1/health does not take is what is refused. */
    n = (size_t)sprintf(path, "/v1/health?");
    for (int i = 0; i < 64; i++)
        n += (size_t)sprintf(path + n, "%sp%d=v", i ? "&" : "", i);
    http_do(&b, &(struct hreq){.path = path, .timeout_ms = 5000}, &r);
    ck_assert_error_reply(&r, 400, "bad_request", "unknown query parameter \"p0\"");
    hresp_free(&r);
    free(path);
    berthd_finish(&b);
}
END_TEST

/* A request of n header fields "X-nnnnn: v" (12 bytes each as counted
 * against the limit) and one of pad_len bytes, sent raw. */
static void
raw_headers_request(struct berthd *b, int n, size_t pad_len, struct hresp *r)
{
    size_t cap = (size_t)n * 16 + pad_len + 256;
    char *req = malloc(cap);
    ck_assert_ptr_nonnull(req);
    size_t len = (size_t)sprintf(req, "GET /v1/health HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(req + len, "X-%05d: v\r\n", i);
    if (pad_len) {
        len += (size_t)sprintf(req + len, "X-Pad: ");
        memset(req + len, 'p', pad_len);
        len += pad_len;
        len += (size_t)sprintf(req + len, "\r\n");
    }
    len += (size_t)sprintf(req + len, "Connection: close\r\n\r\n");
    raw_http(b->port, req, len, 5000, r, NULL);
    free(req);
}

/* Header blocks larger than MHD's per-connection pool used to get MHD's
 * own HTML 431 (or, with many small fields, even a block under our
 * limit did); they are answered by berth, in JSON. */
START_TEST(headers_past_64kib_or_in_many_fields_are_431_json)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    raw_headers_request(&b, 0, 100 * 1024, &r);
    ck_assert_error_reply(&r, 431, "headers_too_large", "16384");
    hresp_free(&r);
    raw_headers_request(&b, 1500, 0, &r);
    ck_assert_error_reply(&r, 431, "headers_too_large", "16384");
    hresp_free(&r);
    /* 1,000 small fields are under the limit, and served. */
    raw_headers_request(&b, 1000, 0, &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "1,000 header fields: %ld %s", r.status,
                  r.body);
    ck_assert_ptr_nonnull(r.json);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* A request whose body's length two HTTP parsers could read differently
 * (a proxy in front and berthd) is refused with 400, and the connection
 * is closed without reading what follows as another request. */
static void
check_refused_framing(struct berthd *b, const char *route, const char *headers, const char *body,
                      const char *substr)
{
    char req[4096];
    int len = snprintf(req, sizeof(req),
                       "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n%s\r\n%s"
                       "GET /v1/metrics HTTP/1.1\r\nHost: t\r\n\r\n",
                       route, headers, body);
    struct hresp r;
    bool closed = false;
    raw_http(b->port, req, (size_t)len, 5000, &r, &closed);
    char why[1024];
    ck_assert_msg(error_body_ok(&r, 400, "bad_request", substr, why, sizeof(why)),
                  "headers '%s': %s", headers, why);
    ck_assert_msg(closed, "headers '%s': the connection stayed open, or a second reply came",
                  headers);
    hresp_free(&r);
}

START_TEST(conflicting_or_duplicate_content_length_is_400)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *route = json_route_or_skip(&b, "conflicting_or_duplicate_content_length_is_400");
    if (route) {
        check_refused_framing(&b, route, "Content-Length: 2\r\nContent-Length: 30\r\n", "{}",
                              "Content-Length is given 2 times (2, 30)");
        check_refused_framing(&b, route, "Content-Length: 2\r\nContent-Length: 2\r\n", "{}",
                              "Content-Length is given 2 times (2, 2)");
    }
    berthd_finish(&b);
}
END_TEST

START_TEST(request_smuggling_shapes_are_400)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    const char *route = json_route_or_skip(&b, "request_smuggling_shapes_are_400");
    static const struct {
        const char *headers, *body, *substr;
    } cases[] = {
        /* MHD frames by Transfer-Encoding and ignores Content-Length. */
        {"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n", "2\r\n{}\r\n0\r\n\r\n",
         "both Transfer-Encoding (chunked) and Content-Length (2)"},
        /* MHD reads a body with any other coding until the client closes. */
        {"Transfer-Encoding: gzip\r\n", "{}", "Transfer-Encoding gzip is not supported"},
        {"Transfer-Encoding: identity, chunked\r\n", "2\r\n{}\r\n0\r\n\r\n",
         "Transfer-Encoding identity, chunked is not supported"},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", "2\r\n{}\r\n0\r\n\r\n",
         "Transfer-Encoding is given 2 times"},
        /* To MHD this is no Transfer-Encoding, so no body: the chunks
         * would be read as the next request. */
        {"Transfer-Encoding : chunked\r\n", "2\r\n{}\r\n0\r\n\r\n",
         "header name \"Transfer-Encoding \" has whitespace"},
        {"Content-Length\t: 2\r\n", "{}", "has whitespace"},
    };
    for (size_t i = 0; route && i < sizeof(cases) / sizeof(cases[0]); i++)
        check_refused_framing(&b, route, cases[i].headers, cases[i].body, cases[i].substr);

    /* Chunked in HTTP/1.0, which has no such thing. */
    if (route) {
        char req[512];
        int len = snprintf(req, sizeof(req),
                           "POST %s HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
                           "\r\n",
                           route);
        struct hresp r;
        raw_http(b.port, req, (size_t)len, 5000, &r, NULL);
        ck_assert_error_reply(&r, 400, "bad_request", "HTTP/1.0");
        hresp_free(&r);
    }
    berthd_finish(&b);
}
END_TEST

static Suite *
errors_suite(void)
{
    Suite *s = suite_create("api_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, unknown_path_is_404_json);
    tcase_add_test(tc, wrong_method_is_405_with_allow_header);
    tcase_add_test(tc, json_body_over_1mib_with_content_length_is_413);
    tcase_add_test(tc, json_body_over_1mib_chunked_is_413);
    tcase_add_test(tc, json_body_over_1mib_is_413_every_time);
    tcase_add_test(tc, malformed_json_is_400_naming_the_problem);
    tcase_add_test(tc, wrong_field_type_is_400_naming_the_field);
    tcase_add_test(tc, json_bodies_are_parsed_strictly);
    tcase_add_test(tc, body_on_a_route_that_takes_none_is_400);
    tcase_add_test(tc, uri_path_of_10kib_is_414);
    tcase_add_test(tc, uri_query_of_10kib_is_414);
    tcase_add_test(tc, headers_of_20kib_are_431);
    tcase_add_test(tc, query_of_1000_parameters_is_414);
    tcase_add_test(tc, unknown_query_parameters_and_flag_values_are_400);
    tcase_add_test(tc, headers_past_64kib_or_in_many_fields_are_431_json);
    tcase_add_test(tc, conflicting_or_duplicate_content_length_is_400);
    tcase_add_test(tc, request_smuggling_shapes_are_400);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(errors_suite());
}
