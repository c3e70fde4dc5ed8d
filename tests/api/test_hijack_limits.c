/*
 * Hijacked connections under load and abuse (api/hijack.c, through the
 * test build's POST /v1/debug/echo-upgrade): clients that reset, a slow
 * reader of 50 MiB and a slow reader of its own echo (the daemon's memory
 * stays flat), 200 upgraded connections at once, connections that outlive
 * the idle and header timeouts and are not evicted at the connection
 * limit, and SIGTERM with live hijacked connections (a clean exit 0).
 * A sanitized build (./scripts/test.sh --sanitize) turns any leak into a
 * failure at berthd_finish.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/harness_hijack.h"

/* Memory growth allowed while 50 MiB go through a slow client: the queue
 * is 256 KiB, the read buffer 32 KiB, MHD's pool 128 KiB; the rest is the
 * allocator's slack. An unbounded queue grows by tens of MiB here. */
#define RSS_GROWTH_MAX_KIB (12 * 1024)

static void
start_env(struct berthd *b, const char *const *extra, const char *env)
{
    struct berthd_opts o = {.args = {"--runtime", "host", "--network", "none"}, .env = {env}};
    for (int i = 0; extra && extra[i]; i++)
        o.args[4 + i] = extra[i];
    berthd_start(b, &o);
}

static void
start(struct berthd *b, const char *const *extra)
{
    start_env(b, extra, NULL);
}

/* For the memory tests: ASan keeps freed blocks in a quarantine of 256 MiB,
 * which would count every byte streamed through as resident; a small one
 * keeps what is measured the daemon's own. No effect without ASan. */
static void
start_for_rss(struct berthd *b)
{
    static char env[512];
    const char *cur = getenv("ASAN_OPTIONS");
    snprintf(env, sizeof(env), "ASAN_OPTIONS=%s%squarantine_size_mb=1", cur ? cur : "",
             cur && *cur ? ":" : "");
    start_env(b, NULL, env);
}

static void
expect_frame(struct hj_client *c, unsigned want_stream, const char *want)
{
    char data[65536];
    unsigned stream = 9;
    size_t len = 0;
    ck_assert_msg(hj_read_frame(c, &stream, data, sizeof(data), &len, 10000),
                  "no frame (expected \"%s\")", want);
    ck_assert_msg(stream == want_stream && len == strlen(want) && memcmp(data, want, len) == 0,
                  "frame on stream %u \"%.*s\"; expected stream %u \"%s\"", stream,
                  (int)(len > 200 ? 200 : len), data, want_stream, want);
}

START_TEST(client_resets_are_cleaned_up)
{
    struct berthd b = {0};
    start(&b, NULL);
    /* Mid-stream, while the server writes 50 MiB. */
    struct hj_client c;
    hj_open_upgraded(&c, b.port, "?send=52428800");
    char buf[65536];
    ck_assert(hj_read_exact(&c, buf, sizeof(buf), 10000));
    hj_close(&c, true);
    /* Mid-stream, while the server waits for input. */
    hj_open_upgraded(&c, b.port, NULL);
    ck_assert(hj_send(&c, "x", 1));
    expect_frame(&c, 1, "x");
    hj_close(&c, true);
    /* Right after the request, before the 101 was read (or even sent). */
    for (int i = 0; i < 30; i++) {
        char head[512];
        int st = hj_open(&c, b.port, HJ_ROUTE, HJ_UPGRADE_HEADERS, NULL, "y", head, sizeof(head),
                         i % 2 ? 0 : 1);
        ck_assert_int_ge(st, 0);
        hj_close(&c, true);
    }
    ck_assert_msg(wait_health_int(&b, "http.connections", 1, 5000),
                  "hijacked connections were not all closed after their clients reset");
    /* The daemon still upgrades. */
    hj_open_upgraded(&c, b.port, NULL);
    ck_assert(hj_send(&c, "ok", 2));
    expect_frame(&c, 1, "ok");
    hj_close(&c, false);
    berthd_finish(&b);
}
END_TEST

START_TEST(slow_reader_of_50_mib_keeps_daemon_memory_flat)
{
    struct berthd b = {0};
    start_for_rss(&b);
    /* Warm up what any hijack allocates, then measure from there. */
    struct hj_client c;
    hj_open_upgraded(&c, b.port, "?send=1000");
    hj_half_close(&c);
    char *data = malloc(65536);
    unsigned stream;
    size_t len;
    while (hj_read_frame(&c, &stream, data, 65536, &len, 5000))
        ;
    hj_close(&c, false);
    long base = hj_rss_kib(b.pid), peak = base;
    ck_assert_int_gt(base, 0);
    hj_open_upgraded(&c, b.port, "?send=52428800");
    sleep_ms(300); /* the queue and the socket buffers fill up */
    enum { TOTAL = 50 << 20 };
    size_t got = 0;
    unsigned reads = 0;
    while (got < TOTAL) {
        ck_assert_msg(hj_read_frame(&c, &stream, data, 65536, &len, 10000),
                      "output stopped after %zu bytes", got);
        ck_assert_uint_eq(stream, 1);
        size_t bad = len;
        for (size_t i = 0; i < len && bad == len; i++)
            if ((unsigned char)data[i] != (got + i) % 251)
                bad = i;
        ck_assert_msg(bad == len, "byte %zu is wrong", got + bad);
        got += len;
        /* Slow: a pause every 256 KiB, about 2.5 s over the whole. */
        if (++reads % 8 == 0) {
            sleep_ms(12);
            long rss = hj_rss_kib(b.pid);
            if (rss > peak)
                peak = rss;
        }
    }
    free(data);
    hj_half_close(&c);
    expect_frame(&c, 2, "eof 0\n");
    ck_assert(hj_read_eof(&c, 5000));
    hj_close(&c, false);
    fprintf(stderr, "slow reader: berthd RSS %ld KiB at the start, %ld KiB at most\n", base, peak);
    ck_assert_msg(peak - base < RSS_GROWTH_MAX_KIB,
                  "berthd grew by %ld KiB while a slow client read 50 MiB", peak - base);
    berthd_finish(&b);
}
END_TEST

struct writer {
    struct hj_client *c;
    size_t total;
    bool ok;
};

static void *
writer_main(void *arg)
{
    struct writer *w = arg;
    char block[16384];
    w->ok = true;
    for (size_t sent = 0; sent < w->total && w->ok; sent += sizeof(block)) {
        for (size_t i = 0; i < sizeof(block); i++)
            block[i] = (char)((sent + i) % 241);
        w->ok = hj_send(w->c, block, sizeof(block));
    }
    hj_half_close(w->c);
    return NULL;
}

START_TEST(slow_reader_of_its_own_echo_pauses_the_server_reading)
{
    /* The client writes 32 MiB as fast as it can and reads the echo
     * slowly: the server must stop reading rather than queue. */
    struct berthd b = {0};
    start_for_rss(&b);
    long base = hj_rss_kib(b.pid), peak = base;
    struct hj_client c;
    hj_open_upgraded(&c, b.port, NULL);
    struct writer w = {.c = &c, .total = 32 << 20};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &w), 0);
    size_t got = 0;
    unsigned reads = 0;
    char *data = malloc(65536);
    while (got < w.total) {
        unsigned stream;
        size_t len;
        ck_assert_msg(hj_read_frame(&c, &stream, data, 65536, &len, 10000),
                      "echo stopped after %zu bytes", got);
        ck_assert_uint_eq(stream, 1);
        size_t bad = len;
        for (size_t i = 0; i < len && bad == len; i++)
            if ((unsigned char)data[i] != (got + i) % 241)
                bad = i;
        ck_assert_msg(bad == len, "echoed byte %zu is wrong", got + bad);
        got += len;
        if (++reads % 16 == 0) {
            sleep_ms(10);
            long rss = hj_rss_kib(b.pid);
            if (rss > peak)
                peak = rss;
        }
    }
    free(data);
    pthread_join(t, NULL);
    ck_assert(w.ok);
    char marker[64];
    snprintf(marker, sizeof(marker), "eof %zu\n", w.total);
    expect_frame(&c, 2, marker);
    ck_assert(hj_read_eof(&c, 5000));
    hj_close(&c, false);
    fprintf(stderr, "slow echo reader: berthd RSS %ld KiB at the start, %ld KiB at most\n", base,
            peak);
    ck_assert_msg(peak - base < RSS_GROWTH_MAX_KIB,
                  "berthd grew by %ld KiB while echoing 32 MiB to a slow reader", peak - base);
    berthd_finish(&b);
}
END_TEST

START_TEST(two_hundred_upgraded_connections_at_once)
{
    struct berthd b = {0};
    start(&b, NULL);
    enum { N = 200 };
    struct hj_client *c = calloc(N, sizeof(*c));
    for (int i = 0; i < N; i++)
        hj_open_upgraded(&c[i], b.port, NULL);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_int_eq(r.status, 200);
    json_object *conns = json_at(r.json, "http.connections");
    ck_assert_int_eq(json_object_get_int(conns), N + 1);
    hresp_free(&r);
    for (int i = 0; i < N; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "conn %d", i);
        ck_assert(hj_send(&c[i], msg, strlen(msg)));
    }
    for (int i = 0; i < N; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "conn %d", i);
        expect_frame(&c[i], 1, msg);
        hj_half_close(&c[i]);
    }
    for (int i = 0; i < N; i++) {
        char marker[32];
        snprintf(marker, sizeof(marker), "eof %d\n", i < 10 ? 6 : i < 100 ? 7 : 8);
        expect_frame(&c[i], 2, marker);
        ck_assert_msg(hj_read_eof(&c[i], 5000), "connection %d was not closed", i);
        hj_close(&c[i], false);
    }
    free(c);
    ck_assert_msg(wait_health_int(&b, "http.connections", 1, 5000),
                  "not every upgraded connection went back to MHD and was closed");
    berthd_finish(&b);
}
END_TEST

START_TEST(upgraded_connection_outlives_the_idle_and_header_timeouts)
{
    struct berthd b = {0};
    /* Idle timeout 2 s, and so a header deadline of 2 s. */
    start(&b, (const char *const[]){"--connection-timeout", "2", NULL});
    struct hj_client c;
    hj_open_upgraded(&c, b.port, NULL);
    sleep_ms(4500);
    ck_assert_msg(hj_send(&c, "still here", 10), "the upgraded connection was closed");
    expect_frame(&c, 1, "still here");
    hj_half_close(&c);
    expect_frame(&c, 2, "eof 10\n");
    ck_assert(hj_read_eof(&c, 5000));
    hj_close(&c, false);
    berthd_finish(&b);
}
END_TEST

START_TEST(upgraded_connection_is_not_evicted_at_the_connection_limit)
{
    struct berthd b = {0};
    /* Debug level: eviction is logged there, and the test checks it ran. */
    start(&b, (const char *const[]){"--max-connections", "4", "--log-level", "debug", NULL});
    struct hj_client c;
    hj_open_upgraded(&c, b.port, NULL);
    sleep_ms(150); /* older than any newcomer: the first to go, were it evictable */
    /* 60 slow clients: past the cap plus the reserve, so connections are
     * evicted to make room, oldest first. */
    enum { SLOW = 60 };
    int fds[SLOW];
    for (int i = 0; i < SLOW; i++) {
        fds[i] = raw_connect(b.port);
        ck_assert_int_ge(fds[i], 0);
        raw_send(fds[i], "GET /v1/hea", 11);
    }
    sleep_ms(1000);
    char *log = berthd_log(&b);
    bool evicted = strstr(log, "at the connection limit") != NULL;
    free(log);
    ck_assert_msg(hj_send(&c, "alive", 5), "the upgraded connection was closed");
    expect_frame(&c, 1, "alive");
    for (int i = 0; i < SLOW; i++)
        close(fds[i]);
    hj_close(&c, false);
    ck_assert_msg(evicted, "no connection was evicted: the test did not reach the limit");
    berthd_finish(&b);
}
END_TEST

struct junk_writer {
    struct hj_client *c;
    _Atomic bool stop;
    size_t sent;
};

static void *
junk_main(void *arg)
{
    struct junk_writer *w = arg;
    char block[4096];
    memset(block, 'j', sizeof(block));
    while (!w->stop) {
        ssize_t n = send(w->c->fd, block, sizeof(block), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
            w->sent += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
            break;
        sleep_ms(1);
    }
    return NULL;
}

START_TEST(closing_while_the_client_still_sends_loses_no_output)
{
    /* The server sends 8 MiB and closes after the first bytes it read,
     * while the client keeps sending and reads the output only now and
     * then: a close() with the client's bytes unread would reset the
     * connection and throw away what the kernel still had to send. */
    struct berthd b = {0};
    start(&b, NULL);
    struct hj_client c;
    hj_open_upgraded(&c, b.port, "?send=8388608&close_after=1");
    struct junk_writer w = {.c = &c};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, junk_main, &w), 0);
    char *data = malloc(65536);
    size_t out = 0;
    unsigned stream = 1, reads = 0;
    size_t len = 0;
    while (stream == 1) {
        ck_assert_msg(hj_read_frame(&c, &stream, data, 65536, &len, 10000),
                      "output cut off after %zu bytes (reset?)", out);
        if (stream == 1)
            out += len;
        if (++reads % 16 == 0)
            sleep_ms(5);
    }
    ck_assert_uint_eq(stream, 2);
    unsigned long long echoed = 0;
    ck_assert_msg(len > 6 && sscanf(data, "close %llu", &echoed) == 1, "marker: %.*s", (int)len,
                  data);
    ck_assert_uint_eq(out, (size_t)(8 << 20) + echoed);
    ck_assert_msg(hj_read_eof(&c, 5000), "no clean FIN after the marker");
    w.stop = true;
    pthread_join(t, NULL);
    free(data);
    hj_close(&c, false);
    ck_assert(wait_health_int(&b, "http.connections", 1, 5000));
    berthd_finish(&b);
}
END_TEST

/* SIGTERM with n live upgraded connections; each gets "shutdown\n" and EOF. */
static void
term_with_live(const char *query, bool raw, bool stuck)
{
    struct berthd b = {0};
    start(&b, NULL);
    struct hj_client c[2];
    if (raw) {
        char head[1024];
        int st = hj_open(&c[0], b.port, HJ_ROUTE, NULL, NULL, NULL, head, sizeof(head), 10000);
        ck_assert_int_eq(st, 200);
    } else {
        hj_open_upgraded(&c[0], b.port, query);
    }
    hj_open_upgraded(&c[1], b.port, NULL);
    ck_assert(hj_send(&c[1], "x", 1));
    expect_frame(&c[1], 1, "x");
    double t0 = now_ms();
    kill(b.pid, SIGTERM);
    /* The one that reads gets the shutdown frame and the FIN. */
    expect_frame(&c[1], 2, "shutdown\n");
    ck_assert(hj_read_eof(&c[1], 10000));
    if (!stuck) {
        expect_frame(&c[0], 2, "shutdown\n");
        ck_assert(hj_read_eof(&c[0], 10000));
    }
    int status = berthd_term(&b, 15000);
    double ms = now_ms() - t0;
    char *log = berthd_log(&b);
    ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "berthd with live hijacked connections: wait status 0x%x; log:\n%s", status, log);
    ck_assert_msg(strstr(log, "stopped"), "no \"stopped\" in the log:\n%s", log);
    const char *report = berthd_sanitizer_report(&b);
    ck_assert_msg(!report, "sanitizer report: %s\n%s", report, log);
    free(log);
    fprintf(stderr, "SIGTERM with live hijacks (%s%s): exit 0 after %.0f ms\n", raw ? "raw" : "101",
            stuck ? ", one stuck" : "", ms);
    ck_assert_msg(ms < 8000, "shutdown took %.0f ms", ms);
    hj_close(&c[0], false);
    hj_close(&c[1], false);
    berthd_cleanup(&b);
}

START_TEST(sigterm_with_live_upgraded_connections_exits_cleanly)
{
    term_with_live(NULL, false, false);
}
END_TEST

START_TEST(sigterm_with_a_live_raw_connection_exits_cleanly)
{
    term_with_live(NULL, true, false);
}
END_TEST

START_TEST(sigterm_with_a_client_that_reads_nothing_exits_cleanly)
{
    /* The server has 50 MiB for a client that never reads: the graceful
     * close cannot flush, and the final step ends it anyway. */
    term_with_live("?send=52428800", false, true);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hijack_limits");
    TCase *tc = tcase_create("hijack_limits");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, client_resets_are_cleaned_up);
    tcase_add_test(tc, slow_reader_of_50_mib_keeps_daemon_memory_flat);
    tcase_add_test(tc, slow_reader_of_its_own_echo_pauses_the_server_reading);
    tcase_add_test(tc, closing_while_the_client_still_sends_loses_no_output);
    tcase_add_test(tc, two_hundred_upgraded_connections_at_once);
    tcase_add_test(tc, upgraded_connection_outlives_the_idle_and_header_timeouts);
    tcase_add_test(tc, upgraded_connection_is_not_evicted_at_the_connection_limit);
    tcase_add_test(tc, sigterm_with_live_upgraded_connections_exits_cleanly);
    tcase_add_test(tc, sigterm_with_a_live_raw_connection_exits_cleanly);
    tcase_add_test(tc, sigterm_with_a_client_that_reads_nothing_exits_cleanly);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
