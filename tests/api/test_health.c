/*
 * GET /v1/health: every field with its JSON type and a plausible value,
 * and the degraded answers (503) for a store root that stops being
 * writable and for an OCI runtime that does not exist.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/api/harness.h"

static void
assert_type(json_object *body, const char *dotted, enum json_type type)
{
    json_object *v = json_at(body, dotted);
    ck_assert_msg(v, "health has no \"%s\": %s", dotted, json_object_to_json_string(body));
    ck_assert_msg(json_object_is_type(v, type), "health \"%s\" is %s, expected %s: %s", dotted,
                  json_type_to_name(json_object_get_type(v)), json_type_to_name(type),
                  json_object_to_json_string(body));
}

START_TEST(health_reports_every_field_with_its_type)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--runtime", "host"}});
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    ck_assert_msg(r.json, "body is not JSON: %s", r.body);
    char ct[128];
    ck_assert_str_eq(hresp_header(&r, "Content-Type", ct, sizeof(ct)), "application/json");

    assert_type(r.json, "status", json_type_string);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "status")), "ok");
    ck_assert_msg(!json_at(r.json, "reason"), "a healthy daemon gives no reason: %s", r.body);
    assert_type(r.json, "version", json_type_string);
    ck_assert_msg(strlen(json_object_get_string(json_at(r.json, "version"))) > 0, "empty version");
    assert_type(r.json, "uptime_s", json_type_double);
    double up = json_object_get_double(json_at(r.json, "uptime_s"));
    ck_assert_msg(up >= 0 && up < 60, "uptime_s %f", up);

    assert_type(r.json, "runtime", json_type_object);
    assert_type(r.json, "runtime.name", json_type_string);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "runtime.name")), "host");
    assert_type(r.json, "runtime.usable", json_type_boolean);
    ck_assert(json_object_get_boolean(json_at(r.json, "runtime.usable")));

    assert_type(r.json, "store", json_type_object);
    assert_type(r.json, "store.root", json_type_string);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "store.root")), b.root);
    assert_type(r.json, "store.free_bytes", json_type_int);
    ck_assert_msg(json_object_get_int64(json_at(r.json, "store.free_bytes")) > 0,
                  "free_bytes not positive: %s", r.body);
    assert_type(r.json, "store.writable", json_type_boolean);
    ck_assert(json_object_get_boolean(json_at(r.json, "store.writable")));
    /* Linux mounts image layers as overlays, whatever the runtime. */
    assert_type(r.json, "store.layer_format", json_type_string);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "store.layer_format")), "overlay");

    assert_type(r.json, "loop", json_type_object);
    assert_type(r.json, "loop.lag_ms", json_type_double);
    double lag = json_object_get_double(json_at(r.json, "loop.lag_ms"));
    ck_assert_msg(lag >= 0 && lag < 1000, "lag_ms %f", lag);

    assert_type(r.json, "jobs", json_type_object);
    assert_type(r.json, "jobs.queued", json_type_int);
    assert_type(r.json, "jobs.running", json_type_int);
    /* Start-up may still have a job of its own (a volume TTL sweep, a
     * container check) in flight, more so in a sanitizer build. */
    ck_assert_int_ge(json_object_get_int64(json_at(r.json, "jobs.queued")), 0);
    ck_assert_int_ge(json_object_get_int64(json_at(r.json, "jobs.running")), 0);
    ck_assert_int_le(json_object_get_int64(json_at(r.json, "jobs.running")), 8);
    hresp_free(&r);

    /* The uptime moves on. */
    sleep_ms(300);
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(json_object_get_double(json_at(r.json, "uptime_s")) > up, "uptime_s stuck: %s",
                  r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(health_head_answers_without_a_body)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--runtime", "host"}});
    struct hresp r;
    http_do(&b, &(struct hreq){.method = "HEAD", .path = "/v1/health"}, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(r.body_len, 0);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/* Polls health until its status is want, up to timeout_ms; leaves the
 * last reply in r. */
static bool
poll_health(struct berthd *b, long want, int timeout_ms, struct hresp *r)
{
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        http_get(b, "/v1/health", r);
        if (r->status == want || now_ms() > deadline)
            return r->status == want;
        hresp_free(r);
        sleep_ms(100);
    }
}

/*
 * The root stops being writable after start: chattr +i on it (root
 * ignores permission bits, and a read-only remount fails while the store
 * holds files open for writing). Skips where the filesystem has no
 * immutable attribute (tmpfs, overlayfs).
 */
START_TEST(health_degraded_when_store_root_becomes_unwritable)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--runtime", "host"}});
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200, "status %ld before: %s", r.status, r.body);
    hresp_free(&r);

    int rc = harness_set_immutable(&b, b.root, true);
    if (rc < 0) {
        fprintf(stderr,
                "SKIP health_degraded_when_store_root_becomes_unwritable: chattr +i %s: "
                "%s\n",
                b.root, strerror(-rc));
        berthd_finish(&b);
        return;
    }
    ck_assert_msg(poll_health(&b, 503, 3000, &r),
                  "health still %ld 3 s after the root became "
                  "unwritable: %s",
                  r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "status")), "degraded");
    json_object *reason = json_at(r.json, "reason");
    ck_assert_msg(reason && json_object_is_type(reason, json_type_string), "no reason: %s", r.body);
    ck_assert_msg(strstr(json_object_get_string(reason), b.root), "reason does not name %s: %s",
                  b.root, r.body);
    ck_assert(!json_object_get_boolean(json_at(r.json, "store.writable")));
    hresp_free(&r);

    /* And it recovers once the root is writable again. */
    ck_assert_int_eq(harness_set_immutable(&b, b.root, false), 0);
    ck_assert_msg(poll_health(&b, 200, 3000, &r),
                  "health still %ld 3 s after the root became "
                  "writable again: %s",
                  r.status, r.body);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(health_degraded_when_oci_runtime_is_missing)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){
                         .args = {"--runtime", "oci", "--oci-runtime", "/nonexistent/runc"}});
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 503, "status %ld: %s", r.status, r.body);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "status")), "degraded");
    ck_assert_msg(json_object_is_type(json_at(r.json, "runtime.usable"), json_type_boolean) &&
                      !json_object_get_boolean(json_at(r.json, "runtime.usable")),
                  "runtime.usable should be false: %s", r.body);
    json_object *e = json_at(r.json, "runtime.error");
    ck_assert_msg(e && strstr(json_object_get_string(e), "/nonexistent/runc"),
                  "runtime.error does not name the path: %s", r.body);
    ck_assert_msg(strstr(json_object_get_string(json_at(r.json, "reason")), "/nonexistent/runc"),
                  "reason does not name the path: %s", r.body);
    /* The store is fine: only the runtime is degraded. */
    ck_assert(json_object_get_boolean(json_at(r.json, "store.writable")));
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

static Suite *
health_suite(void)
{
    Suite *s = suite_create("api_health");
    TCase *tc = tcase_create("health");
    tcase_add_test(tc, health_reports_every_field_with_its_type);
    tcase_add_test(tc, health_head_answers_without_a_body);
    tcase_add_test(tc, health_degraded_when_store_root_becomes_unwritable);
    tcase_add_test(tc, health_degraded_when_oci_runtime_is_missing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(health_suite());
}
