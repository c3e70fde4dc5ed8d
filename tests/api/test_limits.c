/*
 * Connection limits: many concurrent clients are all served, slow clients
 * cannot crowd out a normal one, idle connections are closed, every
 * request's headers have a deadline, a request body has a minimum rate,
 * --max-connections caps the number of connections served at once, and
 * GET /v1/health answers in 100 ms whatever slow clients hold.
 */
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
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

/*
 * Past --max-connections a connection is still accepted, into a reserve
 * that only GET /v1/health may use: anything else on it is answered 503
 * (and the connection closed) instead of being served.
 */
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
    /* A sixth is not served while the five stay open... */
    static const char volumes_req[] = "GET /v1/volumes HTTP/1.1\r\nHost: t\r\n\r\n";
    struct hresp r;
    bool closed = false;
    raw_http(b.port, volumes_req, strlen(volumes_req), 5000, &r, &closed);
    ck_assert_error_reply(&r, 503, "unavailable", "connection limit of 5");
    char retry[16];
    ck_assert_msg(hresp_header(&r, "Retry-After", retry, sizeof(retry)), "no Retry-After");
    ck_assert_msg(closed, "the connection past the limit stayed open");
    hresp_free(&r);
    /* ...but health is. */
    raw_http(b.port, health_req, strlen(health_req), 5000, &r, NULL);
    ck_assert_msg(r.status == 200, "health past --max-connections: %ld %s", r.status, r.body);
    hresp_free(&r);
    /* Once one of the five closes, others are served again. */
    close(fds[0]);
    sleep_ms(200);
    http_get(&b, "/v1/volumes", &r);
    ck_assert_msg(r.status == 200, "after a slot freed: %ld %s", r.status, r.body);
    hresp_free(&r);
    for (int i = 1; i < 5; i++)
        close(fds[i]);
    berthd_finish(&b);
}
END_TEST

/* Trickles the second request of a keep-alive connection, a byte every
 * 0.5 s, for up to limit_ms; returns the ms from its first byte until the
 * server closed the connection, or -1. */
static long
trickle_second_request(int fd, long limit_ms)
{
    char buf[4096];
    bool eof;
    ck_assert(raw_send(fd, health_req, strlen(health_req)));
    raw_recv(fd, buf, sizeof(buf), 5000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 ", 9) == 0 && !eof, "first request: %s", buf);
    sleep_ms(100);
    static const char req[] = "GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    double t0 = now_ms();
    for (size_t i = 0; now_ms() - t0 < limit_ms; i++) {
        const char *byte = i < sizeof(req) - 1 ? req + i : "a";
        if (!raw_send(fd, byte, 1) || raw_wait_closed(fd, 500) >= 0)
            return (long)(now_ms() - t0);
    }
    return -1;
}

/*
 * The header deadline holds for every request on a connection, not only
 * its first: a keep-alive connection that trickles its second request is
 * closed 10 s after that request began, however often each byte reset
 * the 30 s inactivity timer. One that is merely idle between requests is
 * left alone until the idle timeout.
 */
START_TEST(keep_alive_request_trickling_its_headers_is_closed_at_the_deadline)
{
    struct berthd b = {0};
    berthd_start(
        &b, &(struct berthd_opts){.args = {"--runtime", "host", "--connection-timeout", "30"}});
    int idle = raw_connect(b.port);
    ck_assert_int_ge(idle, 0);
    char buf[4096];
    bool eof;
    ck_assert(raw_send(idle, health_req, strlen(health_req)));
    raw_recv(idle, buf, sizeof(buf), 5000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 ", 9) == 0 && !eof, "idle's first request: %s", buf);

    int fd = raw_connect(b.port);
    ck_assert_int_ge(fd, 0);
    long ms = trickle_second_request(fd, 16000);
    ck_assert_msg(ms >= 0, "a keep-alive connection trickling its second request's headers "
                           "was still open after 16 s (header deadline 10 s)");
    ck_assert_msg(ms >= 9000 && ms <= 12000,
                  "the trickling second request was closed %ld ms after it began "
                  "(header deadline 10 s)",
                  ms);
    close(fd);

    /* The idle one, silent for as long, is still open and served. */
    ck_assert(raw_send(idle, health_req, strlen(health_req)));
    raw_recv(idle, buf, sizeof(buf), 5000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 ", 9) == 0,
                  "an idle keep-alive connection was not served after 11 s: %s", buf);
    close(idle);
    berthd_finish(&b);
}
END_TEST

/* A request body sent a byte a second is closed by the end of the first
 * 10 s window of the 1 KiB/s minimum rate. */
START_TEST(body_at_one_byte_a_second_is_closed_within_the_rate_window)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.args = {"--connection-timeout", "30"}});
    const char *route = harness_json_route(&b);
    ck_assert_ptr_nonnull(route);
    char head[512];
    snprintf(head, sizeof(head),
             "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
             "Content-Length: 100000\r\n\r\n",
             route);
    int fd = raw_connect(b.port);
    ck_assert_int_ge(fd, 0);
    ck_assert(raw_send(fd, head, strlen(head)));
    double t0 = now_ms();
    long ms = -1;
    while (now_ms() - t0 < 16000) {
        if (!raw_send(fd, " ", 1) || raw_wait_closed(fd, 1000) >= 0) {
            ms = (long)(now_ms() - t0);
            break;
        }
    }
    ck_assert_msg(ms >= 0, "a body at 1 byte/s was still being read after 16 s");
    ck_assert_msg(ms >= 9000 && ms <= 12000,
                  "a body at 1 byte/s was closed after %ld ms (window 10 s)", ms);
    close(fd);
    sleep_ms(100);
    char *log = berthd_log(&b);
    ck_assert_msg(strstr(log, "under the minimum of 1024 bytes/s"), "nothing logged: %s", log);
    free(log);
    berthd_finish(&b);
}
END_TEST

/* A tar of one file of file_len bytes, read into a fresh buffer. */
static char *
make_tar(struct berthd *b, const char *name, size_t file_len, size_t *len)
{
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof(cmd), "cd '%s' && head -c %zu /dev/urandom > %s && tar -cf %s.tar %s",
             b->tmp, file_len, name, name, name);
    ck_assert_int_eq(system(cmd), 0);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s.tar", b->tmp, name);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(fread(data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return data;
}

/*
 * The body rate is the client's: an upload whose job waits for the one
 * slot for long jobs is suspended with its pipe full, and receives
 * nothing for longer than a rate window, through no fault of its client.
 * It must still be taken whole once its job runs.
 */
START_TEST(upload_waiting_on_berth_is_not_held_to_the_body_rate)
{
    struct berthd b = {0};
    /* 2 pool threads: one job at a client's pace at a time. */
    berthd_start(&b, &(struct berthd_opts){.args = {"--pool-threads", "2"}});
    struct hresp r;
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"v1\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);

    /* A holds the slot for ~12 s, sending at 4 KiB/s (over the minimum). */
    size_t a_len = 0, b_len = 0;
    char *a_tar = make_tar(&b, "a", 40000, &a_len);
    char *b_tar = make_tar(&b, "b", 3 << 20, &b_len);
    char head[256];
    snprintf(head, sizeof(head),
             "PUT /v1/volumes/v1/files?path=/a HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             a_len);
    int a = raw_connect(b.port);
    ck_assert_int_ge(a, 0);
    ck_assert(raw_send(a, head, strlen(head)));
    size_t sent = 0;
    ck_assert(raw_send(a, a_tar, 2048));
    sent = 2048;
    sleep_ms(500);

    /* B, 3 MiB, fills its 1 MiB pipe at once and then waits for the slot. */
    struct bg_req bg;
    bg_start(&bg, &b,
             &(struct hreq){.method = "PUT",
                            .path = "/v1/volumes/v1/files?path=/b",
                            .body = b_tar,
                            .body_len = b_len,
                            .timeout_ms = 60000});
    while (sent < a_len) {
        size_t n = a_len - sent < 1024 ? a_len - sent : 1024;
        ck_assert_msg(raw_send(a, a_tar + sent, n), "A's upload was cut off after %zu bytes", sent);
        sent += n;
        sleep_ms(250);
    }
    char buf[2048] = "";
    bool eof = false;
    raw_recv(a, buf, sizeof(buf) - 1, 10000, &eof);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "A: %s", buf);
    close(a);
    bg_join(&bg);
    ck_assert_msg(bg.resp.status == 200, "B, which waited on berth: %ld (curl %d) %s",
                  bg.resp.status, bg.resp.curl_code, bg.resp.body);
    hresp_free(&bg.resp);
    free(a_tar);
    free(b_tar);
    berthd_finish(&b);
}
END_TEST

/* ---- a slowloris attacker, on a thread of its own ---- */

enum slow_kind {
    SLOW_HEADERS,      /* trickles its first request's headers */
    SLOW_NEXT_HEADERS, /* one quick request, then trickles the next */
    SLOW_BODY,         /* whole headers, then a body at 1 byte/s */
    SLOW_KINDS,
};

struct slowloris {
    pthread_t thread;
    unsigned port;
    int n;
    bool mixed;           /* kinds in turn; else all SLOW_HEADERS */
    long reopen_delay_ms; /* how soon a closed one comes back */
    const char *body_route;
    atomic_bool stop;
    atomic_uint reopened; /* connections the server closed and we reopened */
};

static const char slow_head[] = "GET /v1/health HTTP/1.1\r\nHost: t\r\nX-Slow: ";

static int
slow_open(struct slowloris *sl, enum slow_kind kind)
{
    int fd = raw_connect(sl->port);
    if (fd < 0)
        return -1;
    if (kind == SLOW_NEXT_HEADERS) {
        raw_send(fd, health_req, strlen(health_req));
    } else if (kind == SLOW_BODY) {
        char head[512];
        snprintf(head, sizeof(head),
                 "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                 "Content-Length: 1000000\r\n\r\n",
                 sl->body_route);
        raw_send(fd, head, strlen(head));
    }
    return fd;
}

static void *
slowloris_main(void *arg)
{
    struct slowloris *sl = arg;
    int *fds = calloc((size_t)sl->n, sizeof(int));
    size_t *pos = calloc((size_t)sl->n, sizeof(size_t));
    double *closed_at = calloc((size_t)sl->n, sizeof(double));
    ck_assert(fds && pos && closed_at);
    for (int i = 0; i < sl->n; i++)
        fds[i] = -1;
    double next_byte = 0;
    while (!atomic_load(&sl->stop)) {
        bool tick = now_ms() >= next_byte;
        if (tick)
            next_byte = now_ms() + 1000;
        for (int i = 0; i < sl->n; i++) {
            enum slow_kind kind = sl->mixed ? (enum slow_kind)(i % SLOW_KINDS) : SLOW_HEADERS;
            if (fds[i] >= 0) {
                /* Read what comes (the first reply of SLOW_NEXT_HEADERS);
                 * a close means the server cut us off: come back. */
                char buf[4096];
                ssize_t n = recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                    close(fds[i]);
                    fds[i] = -1;
                    closed_at[i] = now_ms();
                    atomic_fetch_add(&sl->reopened, 1);
                }
            }
            if (fds[i] < 0) {
                if (now_ms() - closed_at[i] < sl->reopen_delay_ms)
                    continue;
                fds[i] = slow_open(sl, kind);
                pos[i] = 0;
                continue;
            }
            if (!tick)
                continue;
            const char *byte = kind == SLOW_BODY                ? " "
                               : pos[i] < sizeof(slow_head) - 1 ? slow_head + pos[i]
                                                                : "a";
            pos[i]++;
            if (!raw_send(fds[i], byte, 1)) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
        sleep_ms(20);
    }
    for (int i = 0; i < sl->n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    free(pos);
    free(closed_at);
    return NULL;
}

static void
slowloris_start(struct slowloris *sl, const struct berthd *b, int n, bool mixed,
                long reopen_delay_ms)
{
    memset(sl, 0, sizeof(*sl));
    sl->port = b->port;
    sl->n = n;
    sl->mixed = mixed;
    sl->reopen_delay_ms = reopen_delay_ms;
    sl->body_route = harness_json_route(b);
    ck_assert_ptr_nonnull(sl->body_route);
    ck_assert_int_eq(pthread_create(&sl->thread, NULL, slowloris_main, sl), 0);
}

static void
slowloris_stop(struct slowloris *sl)
{
    atomic_store(&sl->stop, true);
    pthread_join(sl->thread, NULL);
}

/*
 * Samples GET /v1/health every 100 ms for duration_ms, on a fresh
 * connection each time (a monitor's probe) and on one keep-alive
 * connection opened at the start (a busy client's); every answer must be a
 * 200 within 100 ms, and the keep-alive connection must stay open.
 */
static void
check_health_fast_throughout(struct berthd *b, long duration_ms, const char *what)
{
    /* Its first request goes at once: a connection that has sent nothing
     * is as good as a slow one when the server is full. */
    int keep = raw_connect(b->port);
    ck_assert_int_ge(keep, 0);
    ck_assert(raw_send(keep, health_req, strlen(health_req)));
    char first[4096];
    bool first_eof = false;
    raw_recv(keep, first, sizeof(first), 5000, &first_eof);
    ck_assert_msg(strncmp(first, "HTTP/1.1 200", 12) == 0 && !first_eof,
                  "first keep-alive health request %s: %.40s", what, first);
    double t_end = now_ms() + duration_ms;
    int samples = 0;
    double worst = 0, worst_keep = 0;
    while (now_ms() < t_end) {
        struct hresp r;
        double t0 = now_ms();
        http_do(b, &(struct hreq){.path = "/v1/health", .timeout_ms = 5000}, &r);
        double ms = now_ms() - t0;
        samples++;
        if (ms > worst)
            worst = ms;
        ck_assert_msg(r.status == 200 && ms < 100,
                      "health sample %d %s: status %ld (curl %d) after %.1f ms (limit 100 ms)",
                      samples, what, r.status, r.curl_code, ms);
        hresp_free(&r);

        char buf[4096];
        bool eof = false;
        t0 = now_ms();
        ck_assert_msg(raw_send(keep, health_req, strlen(health_req)),
                      "keep-alive health sample %d %s: the connection was closed", samples, what);
        raw_recv(keep, buf, sizeof(buf), 5000, &eof);
        ms = now_ms() - t0;
        if (ms > worst_keep)
            worst_keep = ms;
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0 && !eof && ms < 100,
                      "keep-alive health sample %d %s: %s after %.1f ms (limit 100 ms): %.40s",
                      samples, what, eof ? "closed" : "answered", ms, buf);
        sleep_ms(100);
    }
    close(keep);
    fprintf(stderr, "health %s: %d samples, worst %.1f ms (new connection), %.1f ms (keep-alive)\n",
            what, samples, worst, worst_keep);
}

/*
 * Slow clients holding every one of --max-connections 40 (headers
 * trickled on new and on keep-alive connections, bodies at 1 byte/s,
 * each reopened as soon as it is closed): health still answers within
 * 100 ms every time, over a run longer than the body rate's window.
 */
START_TEST(health_answers_in_100ms_while_slow_clients_hold_every_connection)
{
    struct berthd b = {0};
    berthd_start(&b,
                 &(struct berthd_opts){.args = {"--runtime", "host", "--max-connections", "40"}});
    struct slowloris sl;
    slowloris_start(&sl, &b, 40, true, 0);
    sleep_ms(500);
    check_health_fast_throughout(&b, 12000, "with 40 slow clients at --max-connections 40");
    unsigned reopened = atomic_load(&sl.reopened);
    slowloris_stop(&sl);
    ck_assert_msg(reopened >= 40, "the slow clients were closed only %u times in 12 s", reopened);
    berthd_finish(&b);
}
END_TEST

/*
 * Five times as many slow clients as --max-connections (more than the
 * reserve for health too), each back 50 ms after it is closed: health
 * still answers within 100 ms. (Back at once, they make a connection
 * flood that keeps the loop busy with nothing but accepting and closing;
 * bench/api.sh measures that case.)
 */
START_TEST(health_answers_in_100ms_with_slow_clients_beyond_max_connections)
{
    struct berthd b = {0};
    berthd_start(&b,
                 &(struct berthd_opts){.args = {"--runtime", "host", "--max-connections", "20"}});
    struct slowloris sl;
    slowloris_start(&sl, &b, 100, false, 50);
    sleep_ms(500);
    check_health_fast_throughout(&b, 5000, "with 100 slow clients at --max-connections 20");
    unsigned reopened = atomic_load(&sl.reopened);
    slowloris_stop(&sl);
    ck_assert_msg(reopened >= 100, "the slow clients were closed only %u times in 5 s", reopened);
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
    tcase_add_test(tc, keep_alive_request_trickling_its_headers_is_closed_at_the_deadline);
    tcase_add_test(tc, body_at_one_byte_a_second_is_closed_within_the_rate_window);
    tcase_add_test(tc, upload_waiting_on_berth_is_not_held_to_the_body_rate);
    tcase_add_test(tc, health_answers_in_100ms_while_slow_clients_hold_every_connection);
    tcase_add_test(tc, health_answers_in_100ms_with_slow_clients_beyond_max_connections);
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
