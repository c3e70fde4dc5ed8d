/*
 * Registry pulls through the API when several callers meet and when
 * things go wrong mid-pull, against a real registry on loopback with
 * regproxy.py in front (which counts requests, and which the tests stop
 * with SIGSTOP to make a registry that stops answering): two pulls of one
 * image make one download (the same reference, and a tag and a digest of
 * one manifest); a corrupted blob, and a blob longer or shorter than
 * its manifest says, are 422 with nothing stored; a registry
 * that stops answering mid-blob is 504 with nothing stored; kill -9
 * mid-pull, a restart and a pull again; a pull nobody waits for is
 * cancelled after its grace (NDJSON and plain callers); a caller that
 * comes back within it joins the pull and nothing is fetched twice;
 * SIGTERM mid-pull stops cleanly; download progress through a throttled
 * proxy comes at a few lines a second and ends at the layer's size. The big image (one ~50 MB
 * layer) is built once per run by tests/fixtures/make-images.sh.
 */
#include "tests/fixtures/pullfix.h"

static const struct pf_env *current;

static void
assert_status(const struct hresp *r, long want)
{
    if (r->status == want)
        return;
    char *log = current ? berthd_log(&current->b) : NULL;
    size_t n = log ? strlen(log) : 0;
    ck_abort_msg("status %ld (curl %d), expected %ld: %s\n--- log tail:\n%s", r->status,
                 r->curl_code, want, r->body, log ? log + (n > 3000 ? n - 3000 : 0) : "");
}

static void
big_env(struct pf_env *e)
{
    pf_init(e);
    current = e;
    pf_registry(e, NULL);
    pf_push(e, "big", "test/big:1", NULL);
    pf_proxy(e, NULL);
}

/* GETs of the big image's layer blob through the proxy. */
static int
big_layer_gets(const struct pf_env *e)
{
    char layer[72], needle[160];
    pf_layer("big", 0, layer);
    snprintf(needle, sizeof(needle), "front GET /v2/test/big/blobs/%s", layer);
    return rf_count_lines(e->proxy.log, needle);
}

/* Waits until the daemon's log has needle; false after timeout_ms. */
static bool
wait_log(const struct pf_env *e, const char *needle, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    do {
        char *log = berthd_log(&e->b);
        bool found = strstr(log, needle) != NULL;
        free(log);
        if (found)
            return true;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return false;
}

static void
start_bg_pull(struct bg_req *bg, const struct pf_env *e, const char *ref, char **body)
{
    *body = pf_body(ref, NULL);
    bg_start(
        bg, &e->b,
        &(struct hreq){.method = "POST", .path = "/v1/images", .body = *body, .timeout_ms = 60000});
}

/* ---- single flight ---------------------------------------------------------- */

START_TEST(two_concurrent_pulls_of_one_image_make_one_download)
{
    struct pf_env e;
    big_env(&e);
    pf_start(&e, NULL, NULL, false);
    /* The registry holds both pulls at their first request, so they are
     * surely at once. */
    kill(e.proxy.pid, SIGSTOP);
    struct bg_req a, b;
    char *ba, *bb;
    start_bg_pull(&a, &e, pf_ref(&e, "test/big:1"), &ba);
    start_bg_pull(&b, &e, pf_ref(&e, "test/big:1"), &bb);
    sleep_ms(500);
    kill(e.proxy.pid, SIGCONT);
    bg_join(&a);
    bg_join(&b);
    assert_status(&a.resp, 201);
    assert_status(&b.resp, 201);
    ck_assert_str_eq(pf_str(a.resp.json, "digest"), pf_str(b.resp.json, "digest"));
    ck_assert_int_eq(rf_count_lines(e.proxy.log, "front GET /v2/test/big/manifests/1"), 1);
    ck_assert_int_eq(big_layer_gets(&e), 1);
    hresp_free(&a.resp);
    hresp_free(&b.resp);
    free(ba);
    free(bb);
    ck_assert_int_eq(fx_image_count(&e.b), 1);
    pf_finish(&e);
}
END_TEST

START_TEST(a_tag_and_a_digest_of_one_manifest_wait_on_each_other_not_in_the_pool)
{
    struct pf_env e;
    big_env(&e);
    /* With two pool threads one takes long jobs, the other short ones: a pull that
     * parked a thread waiting for the other would leave none for its
     * layer. */
    pf_start(&e, (const char *[]){"--log-level", "debug", "--pool-threads", "2", NULL}, NULL,
             false);
    char digest[72], by_digest[256];
    pf_manifest("big", digest);
    snprintf(by_digest, sizeof(by_digest), "%s/test/big@%s", pf_host(&e), digest);
    kill(e.proxy.pid, SIGSTOP);
    struct bg_req a, b;
    char *ba, *bb;
    start_bg_pull(&a, &e, pf_ref(&e, "test/big:1"), &ba);
    start_bg_pull(&b, &e, by_digest, &bb);
    sleep_ms(500);
    kill(e.proxy.pid, SIGCONT);
    bg_join(&a);
    bg_join(&b);
    ck_assert_msg((a.resp.status == 201 && b.resp.status == 200) ||
                      (a.resp.status == 200 && b.resp.status == 201),
                  "statuses %ld and %ld: %s / %s", a.resp.status, b.resp.status, a.resp.body,
                  b.resp.body);
    ck_assert_str_eq(pf_str(a.resp.json, "digest"), digest);
    ck_assert_str_eq(pf_str(b.resp.json, "digest"), digest);
    ck_assert_int_eq(big_layer_gets(&e), 1);
    ck_assert(wait_log(&e, "waits for the pull of", 1000));
    hresp_free(&a.resp);
    hresp_free(&b.resp);
    free(ba);
    free(bb);
    /* One image with both names. */
    ck_assert_int_eq(fx_image_count(&e.b), 1);
    struct hresp r;
    http_get(&e.b, "/v1/images", &r);
    json_object *names = json_at(json_object_array_get_idx(json_at(r.json, "images"), 0), "names");
    ck_assert_int_eq(json_object_array_length(names), 2);
    hresp_free(&r);
    pf_finish(&e);
}
END_TEST

/* ---- failures mid-pull -------------------------------------------------------- */

START_TEST(a_corrupted_blob_is_422_naming_it_and_nothing_is_stored)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "base", "test/base:1", NULL);
    char layer[72];
    pf_layer("base", 0, layer);
    /* Same size, one byte different near the end (past the gzip header). */
    ck_assert(rf_corrupt_blob(&e.reg, layer));
    pf_start(&e, NULL, NULL, false);
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/base:1"), NULL, &r);
    ck_assert_error_reply(&r, 422, "invalid_content", layer);
    hresp_free(&r);
    pf_assert_nothing_stored(&e);
    pf_finish(&e);
}
END_TEST

/* base's manifest with layer 0's size changed by delta, served as tag by the proxy. */
static void
serve_resized(const struct pf_env *e, const char *tag, int64_t delta, char spec[PATH_MAX + 128])
{
    char md[72], path[PATH_MAX + 128], file[PATH_MAX + 32];
    pf_manifest("base", md);
    snprintf(path, sizeof(path), "%s/blobs/sha256/%s", fx_path("base"), md + 7);
    json_object *m = json_object_from_file(path);
    json_object *l = json_object_array_get_idx(json_at(m, "layers"), 0);
    int64_t size = json_object_get_int64(json_at(l, "size"));
    json_object_object_add(l, "size", json_object_new_int64(size + delta));
    snprintf(file, sizeof(file), "%s/%s.json", e->work, tag);
    rf_write(file, json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN));
    json_object_put(m);
    snprintf(spec, PATH_MAX + 128, "/v2/test/base/manifests/%s=%s=%s", tag, file,
             "application/vnd.oci.image.manifest.v1+json");
}

START_TEST(a_blob_longer_or_shorter_than_its_manifest_says_is_422_and_nothing_is_stored)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "base", "test/base:1", NULL);
    char shorter[PATH_MAX + 128], longer[PATH_MAX + 128], layer[72];
    serve_resized(&e, "shorter", -1000, shorter);
    serve_resized(&e, "longer", 1000, longer);
    pf_layer("base", 0, layer);
    pf_proxy(&e, (const char *[]){"--serve", shorter, "--serve", longer, NULL});
    pf_start(&e, NULL, NULL, false);
    static const char *const tags[] = {"test/base:shorter", "test/base:longer"};
    for (size_t i = 0; i < 2; i++) {
        struct hresp r;
        pf_pull(&e, pf_ref(&e, tags[i]), NULL, &r);
        ck_assert_error_reply(&r, 422, "invalid_content", layer);
        hresp_free(&r);
        pf_assert_nothing_stored(&e);
    }
    pf_finish(&e);
}
END_TEST

START_TEST(a_registry_that_stops_answering_mid_blob_is_504_and_nothing_is_stored)
{
    struct pf_env e;
    big_env(&e);
    pf_start(&e, NULL, (const char *[]){PF_FAST_TIMEOUTS, NULL}, false);
    char *body = pf_body(pf_ref(&e, "test/big:1"), NULL);
    struct pf_trigger t = {.stop = e.proxy.pid, .min_bytes = 0};
    struct pf_stream s;
    pf_stream(&e, body, pf_trigger_cb, &t, &s);
    kill(e.proxy.pid, SIGCONT);
    ck_assert(t.fired);
    json_object *last = pf_last(&s);
    ck_assert_msg(strcmp(pf_str(last, "step"), "error") == 0 &&
                      json_object_get_int(json_at(last, "status")) == 504 &&
                      strcmp(pf_str(json_at(last, "error"), "code"), "gateway_timeout") == 0 &&
                      strstr(pf_str(json_at(last, "error"), "message"), pf_host(&e)),
                  "last line: %s", json_object_to_json_string(last));
    pf_stream_free(&s);
    free(body);
    pf_assert_nothing_stored(&e);
    /* And the registry back: the pull works. */
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/big:1"), NULL, &r);
    assert_status(&r, 201);
    hresp_free(&r);
    pf_finish(&e);
}
END_TEST

START_TEST(kill9_mid_pull_then_a_restart_leaves_nothing_and_pulls_again)
{
    struct pf_env e;
    big_env(&e);
    pf_start(&e, NULL, NULL, false);
    char *body = pf_body(pf_ref(&e, "test/big:1"), NULL);
    struct pf_trigger t = {.stop = e.proxy.pid, .min_bytes = 0, .kill9 = e.b.pid};
    struct pf_stream s;
    pf_stream(&e, body, pf_trigger_cb, &t, &s);
    ck_assert(t.fired);
    pf_stream_free(&s);
    kill(e.proxy.pid, SIGCONT);
    berthd_kill(&e.b); /* killed already: reaps it */
    pf_run(&e, NULL, NULL, false, true);
    ck_assert_int_eq(fx_image_count(&e.b), 0);
    ck_assert_msg(fx_count_entries(fx_root_path(&e.b, "tmp"), NULL) == 0,
                  "<root>/tmp not emptied at start-up: %s", fx_names(fx_root_path(&e.b, "tmp")));
    ck_assert_int_eq(fx_count_entries(fx_root_path(&e.b, "snapshots"), "tmp-"), 0);
    struct hresp r;
    pf_pull(&e, pf_ref(&e, "test/big:1"), NULL, &r);
    assert_status(&r, 201);
    hresp_free(&r);
    free(body);
    pf_finish(&e);
}
END_TEST

/* ---- progress ------------------------------------------------------------------ */

START_TEST(download_progress_is_a_few_lines_a_second_and_reaches_the_total)
{
    struct pf_env e;
    pf_init(&e);
    current = &e;
    pf_registry(&e, NULL);
    pf_push(&e, "big", "test/big:1", NULL);
    /* 50 MB at 16 MB/s: about 3 s of download. */
    pf_proxy(&e, (const char *[]){"--rate", "16000000", NULL});
    pf_start(&e, NULL, NULL, false);
    char *body = pf_body(pf_ref(&e, "test/big:1"), NULL);
    struct pf_stream s;
    pf_stream(&e, body, NULL, NULL, &s);
    free(body);
    json_object *last = pf_last(&s);
    ck_assert_msg(strcmp(pf_str(last, "step"), "done") == 0 &&
                      json_object_get_int(json_at(last, "status")) == 201,
                  "last line: %s", json_object_to_json_string(last));
    double secs = (s.last_line_ms - s.start_ms) / 1000.0;
    int downloading = pf_count(&s, "layer", "downloading");
    int lines = (int)json_object_array_length(s.lines);
    /* One line per 250 ms at most, plus each layer's last; but lines all
     * along, not only at the end. */
    ck_assert_msg(secs >= 2.5, "the throttled pull took only %.2f s", secs);
    ck_assert_msg(downloading <= 4 * secs + 2, "%d downloading lines in %.2f s", downloading, secs);
    ck_assert_msg(lines <= 4 * secs + 12, "%d lines in %.2f s", lines, secs);
    ck_assert_msg(downloading >= 4, "%d downloading lines in %.2f s", downloading, secs);
    int64_t prev = -1, total = -1;
    for (size_t i = 0; i < json_object_array_length(s.lines); i++) {
        json_object *l = json_object_array_get_idx(s.lines, i);
        if (strcmp(pf_str(l, "status"), "downloading") != 0)
            continue;
        int64_t b = json_object_get_int64(json_at(l, "bytes"));
        total = json_object_get_int64(json_at(l, "total"));
        ck_assert_msg(b >= prev && b <= total, "bytes %lld after %lld of %lld", (long long)b,
                      (long long)prev, (long long)total);
        prev = b;
    }
    ck_assert_msg(prev == total && total > (40 << 20), "the last downloading line: %lld of %lld",
                  (long long)prev, (long long)total);
    pf_stream_free(&s);
    pf_finish(&e);
}
END_TEST

/* ---- callers that leave ----------------------------------------------------------- */

START_TEST(a_pull_nobody_waits_for_is_cancelled_after_its_grace)
{
    struct pf_env e;
    big_env(&e);
    pf_start(&e, NULL, (const char *[]){"BERTH_TEST_PULL_GRACE_MS=1000", NULL}, false);
    /* An NDJSON caller that hangs up mid-blob (the registry stalled). */
    char *body = pf_body(pf_ref(&e, "test/big:1"), NULL);
    struct pf_trigger t = {.stop = e.proxy.pid, .min_bytes = 0, .hang_up = true};
    struct pf_stream s;
    double left = now_ms();
    pf_stream(&e, body, pf_trigger_cb, &t, &s);
    ck_assert(t.fired && s.hung_up);
    pf_stream_free(&s);
    ck_assert_msg(wait_log(&e, "cancelled: no caller has waited for it", 10000),
                  "the pull was not cancelled");
    double took = now_ms() - left;
    ck_assert_msg(took >= 900, "cancelled after %.0f ms, before the grace", took);
    kill(e.proxy.pid, SIGCONT);
    ck_assert(wait_health_int(&e.b, "jobs.running", 0, 10000));
    pf_assert_nothing_stored(&e);
    /* A plain caller that gives up while the manifest request hangs: the
     * daemon sees the hang-up on the idle socket, and cancels as well. */
    kill(e.proxy.pid, SIGSTOP);
    struct hresp r;
    http_do(
        &e.b,
        &(struct hreq){.method = "POST", .path = "/v1/images", .body = body, .timeout_ms = 1000},
        &r);
    ck_assert_int_eq(r.status, 0);
    hresp_free(&r);
    double deadline = now_ms() + 10000;
    while (rf_count_lines(e.b.log_path, "cancelled: no caller has waited for it") < 2 &&
           now_ms() < deadline)
        sleep_ms(50);
    ck_assert_msg(rf_count_lines(e.b.log_path, "cancelled: no caller has waited for it") == 2,
                  "the plain caller's pull was not cancelled");
    ck_assert(wait_health_int(&e.b, "jobs.running", 0, 10000));
    kill(e.proxy.pid, SIGCONT);
    pf_assert_nothing_stored(&e);
    free(body);
    pf_finish(&e);
}
END_TEST

START_TEST(a_caller_back_within_the_grace_joins_and_nothing_is_fetched_twice)
{
    struct pf_env e;
    big_env(&e);
    pf_start(&e, NULL, (const char *[]){"BERTH_TEST_PULL_GRACE_MS=8000", NULL}, false);
    char *body = pf_body(pf_ref(&e, "test/big:1"), NULL);
    struct pf_trigger t = {.stop = e.proxy.pid, .min_bytes = 0, .hang_up = true};
    struct pf_stream s;
    pf_stream(&e, body, pf_trigger_cb, &t, &s);
    ck_assert(t.fired && s.hung_up);
    pf_stream_free(&s);
    sleep_ms(300);
    /* Back (as a CI client retries): joins the pull, gets what it missed. */
    struct pf_stream s2;
    kill(e.proxy.pid, SIGCONT);
    pf_stream(&e, body, NULL, NULL, &s2);
    json_object *last = pf_last(&s2);
    ck_assert_msg(strcmp(pf_str(last, "step"), "done") == 0 &&
                      json_object_get_int(json_at(last, "status")) == 201,
                  "last line: %s", json_object_to_json_string(last));
    ck_assert_int_ge(pf_count(&s2, "manifest", "resolved"), 1);
    ck_assert_int_ge(pf_count(&s2, "layer", NULL), 2);
    pf_stream_free(&s2);
    ck_assert_int_eq(big_layer_gets(&e), 1);
    char *log = berthd_log(&e.b);
    ck_assert_msg(!strstr(log, "cancelled"), "cancelled although a caller came back");
    free(log);
    free(body);
    pf_finish(&e);
}
END_TEST

START_TEST(sigterm_mid_pull_stops_cleanly_and_answers_503)
{
    struct pf_env e;
    big_env(&e);
    pf_start(&e, NULL, NULL, false);
    kill(e.proxy.pid, SIGSTOP);
    struct bg_req a;
    char *ba;
    start_bg_pull(&a, &e, pf_ref(&e, "test/big:1"), &ba);
    sleep_ms(500);
    int st = berthd_term(&e.b, 10000);
    bg_join(&a);
    kill(e.proxy.pid, SIGCONT);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "berthd did not stop cleanly during a pull: status 0x%x", st);
    ck_assert_msg(a.resp.status == 503 || a.resp.status == 0, "reply during shutdown: %ld %s",
                  a.resp.status, a.resp.body);
    hresp_free(&a.resp);
    free(ba);
    pf_run(&e, NULL, NULL, false, true);
    pf_assert_nothing_stored(&e);
    pf_finish(&e);
}
END_TEST

static Suite *
flight_suite(void)
{
    Suite *s = suite_create("api_images_pull_flight");
    TCase *tc = tcase_create("flight");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, two_concurrent_pulls_of_one_image_make_one_download);
    tcase_add_test(tc, a_tag_and_a_digest_of_one_manifest_wait_on_each_other_not_in_the_pool);
    tcase_add_test(tc, a_corrupted_blob_is_422_naming_it_and_nothing_is_stored);
    tcase_add_test(tc,
                   a_blob_longer_or_shorter_than_its_manifest_says_is_422_and_nothing_is_stored);
    tcase_add_test(tc, a_registry_that_stops_answering_mid_blob_is_504_and_nothing_is_stored);
    tcase_add_test(tc, download_progress_is_a_few_lines_a_second_and_reaches_the_total);
    tcase_add_test(tc, kill9_mid_pull_then_a_restart_leaves_nothing_and_pulls_again);
    tcase_add_test(tc, a_pull_nobody_waits_for_is_cancelled_after_its_grace);
    tcase_add_test(tc, a_caller_back_within_the_grace_joins_and_nothing_is_fetched_twice);
    tcase_add_test(tc, sigterm_mid_pull_stops_cleanly_and_answers_503);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (!pf_tools_present("api_images_pull_flight"))
        return 77;
    if (!fx_build(true)) {
        fx_cleanup();
        return 1;
    }
    int rc = harness_run_suite(flight_suite());
    fx_cleanup();
    return rc;
}
