/*
 * Orderly shutdown on SIGTERM: exit status 0 and "stopped" in the log; a
 * job in flight still answers its request (200, or 503 if it was still
 * queued); requests arriving once shutdown began are refused. The tests
 * with a job need POST /v1/debug/hash (-DBERTH_BENCH_ROUTES=ON) and say
 * SKIP without it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/harness.h"

/* 1 GiB: a second or more of SHA-256 on one core. */
#define LONG_HASH "{\"bytes\": 1073741824}"

static bool
have_hash_route(struct berthd *b, const char *test)
{
    struct hresp r;
    http_post_json(b, "/v1/debug/hash", "{", &r);
    bool have = r.status == 400;
    hresp_free(&r);
    if (!have)
        fprintf(stderr, "SKIP %s: needs POST /v1/debug/hash (-DBERTH_BENCH_ROUTES=ON)\n", test);
    return have;
}

static bool
log_contains(struct berthd *b, const char *s)
{
    char *log = berthd_log(b);
    bool has = strstr(log, s) != NULL;
    free(log);
    return has;
}

START_TEST(sigterm_exits_0_and_logs_stopped)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    hresp_free(&r);
    double t0 = now_ms();
    berthd_finish(&b); /* asserts exit 0, "stopped", no sanitizer report */
    ck_assert_msg(now_ms() - t0 < 5000, "an idle daemon took %.0f ms to stop", now_ms() - t0);
}
END_TEST

START_TEST(sigterm_lets_running_job_answer_and_cancels_queued_one)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--pool-threads", "2"}});
    if (!have_hash_route(&b, "sigterm_lets_running_job_answer_and_cancels_queued_one")) {
        berthd_finish(&b);
        return;
    }
    /* Start-up's own job (the garbage collection) ends first. */
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    /* Two jobs fill the pool, a third waits in the queue. */
    struct bg_req jobs[3];
    for (int i = 0; i < 3; i++) {
        bg_start(&jobs[i], &b,
                 &(struct hreq){.method = "POST",
                                .path = "/v1/debug/hash",
                                .body = LONG_HASH,
                                .timeout_ms = 60000});
        if (i == 1)
            ck_assert_msg(wait_health_int(&b, "jobs.running", 2, 5000), "jobs never ran");
    }
    ck_assert_msg(wait_health_int(&b, "jobs.queued", 1, 5000), "third job never queued");
    kill(b.pid, SIGTERM);
    int ok = 0, cancelled = 0;
    for (int i = 0; i < 3; i++) {
        bg_join(&jobs[i]);
        struct hresp *r = &jobs[i].resp;
        if (r->status == 200) {
            json_object *d = json_at(r->json, "digest");
            ck_assert_msg(d && strncmp(json_object_get_string(d), "sha256:", 7) == 0, "%s",
                          r->body);
            ok++;
        } else {
            ck_assert_error_reply(r, 503, "unavailable", "shutting down");
            cancelled++;
        }
        hresp_free(r);
    }
    ck_assert_msg(ok == 2 && cancelled == 1, "%d answered, %d cancelled", ok, cancelled);
    berthd_finish(&b);
}
END_TEST

START_TEST(requests_after_shutdown_began_are_refused)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    if (!have_hash_route(&b, "requests_after_shutdown_began_are_refused")) {
        berthd_finish(&b);
        return;
    }
    /* A keep-alive connection opened before shutdown. */
    static const char req[] = "GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n";
    int kept = raw_connect(b.port);
    ck_assert_int_ge(kept, 0);
    char buf[8192];
    bool eof;
    ck_assert(raw_send(kept, req, strlen(req)));
    raw_recv(kept, buf, sizeof(buf), 5000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);

    /* Start-up's own job (the garbage collection) ends first, so the one
     * job seen running below is the request's. */
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    struct bg_req job;
    bg_start(
        &job, &b,
        &(struct hreq){
            .method = "POST", .path = "/v1/debug/hash", .body = LONG_HASH, .timeout_ms = 60000});
    ck_assert_msg(wait_health_int(&b, "jobs.running", 1, 5000), "the job never ran");
    kill(b.pid, SIGTERM);
    double deadline = now_ms() + 5000;
    while (!log_contains(&b, "shutting down") && now_ms() < deadline)
        sleep_ms(10);

    /* The kept connection gets a 503. */
    ck_assert(raw_send(kept, req, strlen(req)));
    size_t n = raw_recv(kept, buf, sizeof(buf), 5000, &eof);
    ck_assert_msg(n > 0 && strncmp(buf, "HTTP/1.1 503", 12) == 0,
                  "request on a kept connection after SIGTERM: %s", buf);
    ck_assert_msg(strstr(buf, "\"unavailable\"") && strstr(buf, "shutting down"), "%s", buf);
    close(kept);

    /* A new connection is not served. */
    struct hresp r;
    http_do(&b, &(struct hreq){.path = "/v1/health", .timeout_ms = 2000}, &r);
    ck_assert_msg(r.status == 0 || r.status == 503, "a new request after SIGTERM got %ld: %s",
                  r.status, r.body);
    hresp_free(&r);

    bg_join(&job);
    ck_assert_msg(job.resp.status == 200, "the running job's request got %ld: %s", job.resp.status,
                  job.resp.body);
    hresp_free(&job.resp);
    berthd_finish(&b);
}
END_TEST

START_TEST(client_gone_before_job_finished_is_harmless)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    if (!have_hash_route(&b, "client_gone_before_job_finished_is_harmless")) {
        berthd_finish(&b);
        return;
    }
    struct hresp r;
    http_do(&b,
            &(struct hreq){.method = "POST",
                           .path = "/v1/debug/hash",
                           .body = "{\"bytes\": 536870912}",
                           .timeout_ms = 100},
            &r);
    ck_assert_int_eq(r.status, 0); /* curl gave up */
    hresp_free(&r);
    ck_assert_msg(wait_health_int(&b, "jobs.running", 0, 30000), "the job never finished");
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "%ld", r.status);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

static Suite *
shutdown_suite(void)
{
    Suite *s = suite_create("api_shutdown");
    TCase *tc = tcase_create("shutdown");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sigterm_exits_0_and_logs_stopped);
    tcase_add_test(tc, sigterm_lets_running_job_answer_and_cancels_queued_one);
    tcase_add_test(tc, requests_after_shutdown_began_are_refused);
    tcase_add_test(tc, client_gone_before_job_finished_is_harmless);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(shutdown_suite());
}
