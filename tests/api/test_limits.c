/*
 * Connection limits: many concurrent clients are all served, slow clients
 * cannot crowd out a normal one, idle connections are closed, and
 * --max-connections caps the number of connections served at once.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/api/harness.h"

static const char health_req[] = "GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n";

static size_t
discard_cb(char *p, size_t s, size_t n, void *ud)
{
    return s * n;
}

START_TEST(two_hundred_parallel_requests_all_answered)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--runtime", "host"}});
    enum { N = 200 };
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    char url[128];
    snprintf(url, sizeof(url), "%s/v1/health", b.base_url);
    CURL *easy[N];
    for (int i = 0; i < N; i++) {
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(easy[i], CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(easy[i], CURLOPT_TIMEOUT_MS, 20000L);
        curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, discard_cb);
        curl_multi_add_handle(multi, easy[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(multi, &running);
        if (running)
            curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    int ok = 0;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
        long st = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &st);
        if (msg->data.result == CURLE_OK && st == 200)
            ok++;
        else
            fprintf(stderr, "parallel request: curl %d, status %ld\n", msg->data.result, st);
    }
    for (int i = 0; i < N; i++) {
        curl_multi_remove_handle(multi, easy[i]);
        curl_easy_cleanup(easy[i]);
    }
    curl_multi_cleanup(multi);
    ck_assert_int_eq(ok, N);
    berthd_finish(&b);
}
END_TEST

/* Opens n sockets that send half a request line and then nothing. */
static int *
slow_flood(unsigned port, int n)
{
    int *fds = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        fds[i] = raw_connect(port);
        ck_assert_msg(fds[i] >= 0, "slow client %d could not connect", i);
        raw_send(fds[i], "GET /v1/hea", 11);
    }
    return fds;
}

static void
close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
}

static void
check_health_answered_within(struct berthd *b, long max_ms)
{
    struct hresp r;
    double t0 = now_ms();
    http_do(b, &(struct hreq){.path = "/v1/health", .timeout_ms = 30000}, &r);
    double ms = now_ms() - t0;
    ck_assert_msg(r.status == 200,
                  "health under a slow-client flood: status %ld (curl %d) after "
                  "%.0f ms",
                  r.status, r.curl_code, ms);
    ck_assert_msg(ms <= max_ms, "health under a slow-client flood took %.0f ms (limit %ld ms)", ms,
                  max_ms);
    hresp_free(&r);
}

START_TEST(slow_client_flood_does_not_delay_health)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--runtime", "host"}});
    int *fds = slow_flood(b.port, 300);
    sleep_ms(200);
    check_health_answered_within(&b, 2000);
    close_all(fds, 300);
    berthd_finish(&b);
}
END_TEST

/*
 * More slow clients than connection slots: the header timeout must free
 * slots fast enough that a normal client is answered within a few
 * seconds (the short "under pressure" header timeout is 2 s).
 */
START_TEST(slow_client_flood_beyond_the_cap_does_not_starve_health)
{
    struct berthd b = {0};
    berthd_start(&b,
                 &(struct berthd_opts){.args = {"--runtime", "host", "--max-connections", "100"}});
    int *fds = slow_flood(b.port, 300);
    sleep_ms(200);
    check_health_answered_within(&b, 6000);
    close_all(fds, 300);
    berthd_finish(&b);
}
END_TEST

START_TEST(idle_connection_closed_after_connection_timeout)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--connection-timeout", "2"}});
    /* A connection that never sends anything. */
    int silent = raw_connect(b.port);
    ck_assert_int_ge(silent, 0);
    /* A keep-alive connection that goes idle after one request. */
    int idle = raw_connect(b.port);
    ck_assert_int_ge(idle, 0);
    ck_assert(raw_send(idle, health_req, strlen(health_req)));
    char buf[4096];
    bool eof;
    raw_recv(idle, buf, sizeof(buf), 5000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 ", 9) == 0 && !eof, "no keep-alive reply: %s", buf);

    long silent_ms = raw_wait_closed(silent, 6000);
    long idle_ms = raw_wait_closed(idle, 6000);
    ck_assert_msg(silent_ms >= 0, "a silent connection is still open 6 s later");
    ck_assert_msg(idle_ms >= 0, "an idle keep-alive connection is still open 6 s later");
    /* Closed because of the timeout, not at once. */
    ck_assert_msg(silent_ms >= 1000, "silent connection closed after %ld ms", silent_ms);
    close(silent);
    close(idle);
    berthd_finish(&b);
}
END_TEST

/* A client that trickles its request headers a byte at a time resets an
 * inactivity timer forever; the header timeout must be a deadline. */
START_TEST(trickling_headers_cut_off_by_header_timeout)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--connection-timeout", "2"}});
    int fd = raw_connect(b.port);
    ck_assert_int_ge(fd, 0);
    static const char req[] = "GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaa";
    double t0 = now_ms();
    bool closed = false;
    for (size_t i = 0; i < sizeof(req) - 1 && now_ms() - t0 < 8000; i++) {
        if (!raw_send(fd, req + i, 1)) {
            closed = true;
            break;
        }
        if (raw_wait_closed(fd, 500) >= 0) {
            closed = true;
            break;
        }
    }
    double ms = now_ms() - t0;
    ck_assert_msg(closed && ms < 5000,
                  "a client sending a header byte every 0.5 s was %s after %.0f ms "
                  "(--connection-timeout 2)",
                  closed ? "closed" : "still connected", ms);
    close(fd);
    berthd_finish(&b);
}
END_TEST

START_TEST(max_connections_caps_connections_served)
{
    struct berthd b = {0};
    berthd_start(&b,
                 &(struct berthd_opts){.args = {"--runtime", "host", "--max-connections", "5"}});
    int fds[5];
    char buf[4096];
    bool eof;
    for (int i = 0; i < 5; i++) {
        fds[i] = raw_connect(b.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert(raw_send(fds[i], health_req, strlen(health_req)));
        raw_recv(fds[i], buf, sizeof(buf), 5000, &eof);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "connection %d: %s", i, buf);
    }
    /* The sixth is not served while the five stay open. */
    int extra = raw_connect(b.port);
    if (extra >= 0) {
        raw_send(extra, health_req, strlen(health_req));
        size_t n = raw_recv(extra, buf, sizeof(buf), 1500, &eof);
        ck_assert_msg(n == 0, "a sixth connection was served past --max-connections 5: %s", buf);
    }
    /* Once one closes, the waiting one is served (if it was kept waiting). */
    close(fds[0]);
    if (extra >= 0 && !eof) {
        raw_recv(extra, buf, sizeof(buf), 5000, &eof);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0,
                      "the waiting connection was not served after a slot freed: %s", buf);
        close(extra);
    }
    for (int i = 1; i < 5; i++)
        close(fds[i]);
    /* And new clients are served again. */
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(slow_uploads_do_not_take_every_pool_thread)
{
    struct berthd b = {0};
    /* 3 pool threads: at most 2 jobs at a client's pace at once. */
    berthd_start(&b, &(struct berthd_opts){.args = {"--pool-threads", "3"}});
    struct hresp r;
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"v1\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    /* Six uploads that announce a megabyte and send nothing of it. */
    enum { SLOW = 6 };
    int fds[SLOW];
    static const char put[] = "PUT /v1/volumes/v1/files?path=/x HTTP/1.1\r\nHost: t\r\n"
                              "Content-Type: application/x-tar\r\nContent-Length: 1048576\r\n\r\n";
    for (int i = 0; i < SLOW; i++) {
        fds[i] = raw_connect(b.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert(raw_send(fds[i], put, strlen(put)));
    }
    sleep_ms(500);
    /* Short jobs still find a thread: listing volumes and images. */
    double t0 = now_ms();
    http_get(&b, "/v1/volumes", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    http_get(&b, "/v1/images", &r);
    ck_assert_int_eq(r.status, 200);
    hresp_free(&r);
    double ms = now_ms() - t0;
    ck_assert_msg(ms < 2000, "short jobs took %.0f ms behind %d slow uploads", ms, SLOW);
    for (int i = 0; i < SLOW; i++)
        close(fds[i]);
    berthd_finish(&b);
}
END_TEST

START_TEST(a_complete_upload_from_a_half_closing_client_is_taken)
{
    struct berthd b = {0};
    /* 2 pool threads: one job at a client's pace at a time. */
    berthd_start(&b, &(struct berthd_opts){.args = {"--pool-threads", "2"}});
    struct hresp r;
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"v1\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    /* A slow upload holds the only long-job slot. */
    static const char slow[] = "PUT /v1/volumes/v1/files?path=/slow HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 1048576\r\n\r\n";
    int hold = raw_connect(b.port);
    ck_assert(raw_send(hold, slow, strlen(slow)));
    sleep_ms(300);
    /* A whole tar sent by a client that then shuts its sending side, as
     * nc -N does. It is a little larger than the job's 1 MiB pipe, so
     * while its job waits for the slot the request is suspended with the
     * tail of the body already read out of the socket by MHD. */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/half.tar", b.tmp);
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof(cmd), "cd '%s' && head -c 1060000 /dev/zero > big && tar -cf half.tar big",
             b.tmp);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char tar[2 << 20];
    size_t tar_len = fread(tar, 1, sizeof(tar), f);
    fclose(f);
    ck_assert_uint_gt(tar_len, 1 << 20);
    char head[256];
    snprintf(head, sizeof(head),
             "PUT /v1/volumes/v1/files?path=/ok HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             tar_len);
    int fd = raw_connect(b.port);
    ck_assert(raw_send(fd, head, strlen(head)));
    ck_assert(raw_send(fd, tar, tar_len));
    shutdown(fd, SHUT_WR);
    sleep_ms(1500); /* three sweeps of the hang-up check */
    close(hold);    /* frees the slot */
    char buf[2048] = "";
    bool eof = false;
    raw_recv(fd, buf, sizeof(buf) - 1, 10000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "half-closed upload: %s", buf);
    close(fd);
    berthd_finish(&b);
}
END_TEST

static Suite *
limits_suite(void)
{
    Suite *s = suite_create("api_limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, two_hundred_parallel_requests_all_answered);
    tcase_add_test(tc, slow_client_flood_does_not_delay_health);
    tcase_add_test(tc, slow_client_flood_beyond_the_cap_does_not_starve_health);
    tcase_add_test(tc, idle_connection_closed_after_connection_timeout);
    tcase_add_test(tc, trickling_headers_cut_off_by_header_timeout);
    tcase_add_test(tc, max_connections_caps_connections_served);
    tcase_add_test(tc, slow_uploads_do_not_take_every_pool_thread);
    tcase_add_test(tc, a_complete_upload_from_a_half_closing_client_is_taken);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(limits_suite());
}
