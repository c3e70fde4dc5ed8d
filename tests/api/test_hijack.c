/*
 * Hijacked connections (api/hijack.c), through the test build's echo route
 * POST /v1/debug/echo-upgrade (api/bench_hijack.c): the 101 exchange as
 * the docker CLI and docker-py do it, bytes both ways, bytes sent with the
 * request before the 101 was read, the client's half-close (the server
 * still writes, then closes), the 200 take-over for a request without an
 * Upgrade header, the refusals, and docker-py's own socket code.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/harness.h"
#include "tests/api/harness_hijack.h"

/* The route exists only with -DBERTH_BENCH_ROUTES=ON; scripts/test.sh builds so. */
static void
start(struct berthd *b, const char *const *extra)
{
    struct berthd_opts o = {.args = {"--runtime", "host", "--network", "none"}};
    for (int i = 0; extra && extra[i]; i++)
        o.args[4 + i] = extra[i];
    berthd_start(b, &o);
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
                  "frame on stream %u of %zu bytes \"%.*s\"; expected stream %u \"%s\"", stream,
                  len, (int)(len > 200 ? 200 : len), data, want_stream, want);
}

/* A header's value in a reply head, or NULL. */
static const char *
head_value(const char *head, const char *name, char *buf, size_t len)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
            const char *v = p + 3 + nl;
            while (*v == ' ')
                v++;
            size_t n = strcspn(v, "\r\n");
            snprintf(buf, len, "%.*s", (int)n, v);
            return buf;
        }
    }
    return NULL;
}

START_TEST(upgrade_is_answered_101_with_the_given_headers)
{
    struct berthd b = {0};
    start(&b, NULL);
    struct hj_client c;
    char head[2048], v[256];
    int status =
        hj_open(&c, b.port, HJ_ROUTE, HJ_UPGRADE_HEADERS, NULL, NULL, head, sizeof(head), 10000);
    ck_assert_msg(status == 101, "status %d, head:\n%s", status, head);
    ck_assert_msg(strncmp(head, "HTTP/1.1 101 ", 13) == 0, "status line: %s", head);
    ck_assert_str_eq(head_value(head, "Content-Type", v, sizeof(v)),
                     "application/vnd.docker.raw-stream");
    ck_assert_str_eq(head_value(head, "Upgrade", v, sizeof(v)), "tcp");
    ck_assert_str_eq(head_value(head, "Connection", v, sizeof(v)), "Upgrade");
    ck_assert_msg(!head_value(head, "Content-Length", v, sizeof(v)) &&
                      !head_value(head, "Transfer-Encoding", v, sizeof(v)),
                  "a 101 has no body framing:\n%s", head);
    hj_close(&c, false);
    berthd_finish(&b);
}
END_TEST

START_TEST(bytes_flow_both_ways_in_order)
{
    struct berthd b = {0};
    start(&b, NULL);
    struct hj_client c;
    hj_open_upgraded(&c, b.port, NULL);
    ck_assert(hj_send(&c, "hello", 5));
    expect_frame(&c, 1, "hello");
    /* 4 MiB in pieces of 100 KiB: every byte comes back, in order. */
    enum { TOTAL = 4 << 20, PIECE = 100 * 1024 };
    char *out = malloc(TOTAL), *in = malloc(TOTAL);
    for (size_t i = 0; i < TOTAL; i++)
        out[i] = (char)(i * 13 + 5);
    size_t sent = 0, got = 0;
    while (got < TOTAL) {
        if (sent < TOTAL && sent - got < 2 * PIECE) {
            size_t n = TOTAL - sent < PIECE ? TOTAL - sent : PIECE;
            ck_assert(hj_send(&c, out + sent, n));
            sent += n;
        }
        unsigned stream;
        size_t len;
        ck_assert_msg(hj_read_frame(&c, &stream, in + got, TOTAL - got, &len, 10000),
                      "echo stopped after %zu of %d bytes", got, TOTAL);
        ck_assert_uint_eq(stream, 1);
        got += len;
    }
    ck_assert_msg(memcmp(out, in, TOTAL) == 0, "the echo differs from what was sent");
    free(out);
    free(in);
    hj_half_close(&c);
    char marker[64];
    snprintf(marker, sizeof(marker), "eof %d\n", TOTAL + 5);
    expect_frame(&c, 2, marker);
    ck_assert_msg(hj_read_eof(&c, 5000), "the server did not close after its marker");
    hj_close(&c, false);
    berthd_finish(&b);
}
END_TEST

START_TEST(bytes_sent_with_the_request_come_back_first)
{
    struct berthd b = {0};
    start(&b, NULL);
    /* The request, then stream bytes, in one send(): MHD reads them with
     * the headers and must hand them over. */
    struct hj_client c;
    char head[2048];
    int status = hj_open(&c, b.port, HJ_ROUTE, HJ_UPGRADE_HEADERS, NULL, "early bytes", head,
                         sizeof(head), 10000);
    ck_assert_msg(status == 101, "status %d:\n%s", status, head);
    expect_frame(&c, 1, "early bytes");
    ck_assert(hj_send(&c, "later", 5));
    expect_frame(&c, 1, "later");
    hj_close(&c, false);

    /* After a JSON body (as exec start sends one), and half-closed at once. */
    status = hj_open(&c, b.port, HJ_ROUTE, HJ_UPGRADE_HEADERS, "{\"Detach\":false,\"Tty\":false}",
                     "stdin!", head, sizeof(head), 10000);
    ck_assert_msg(status == 101, "status %d:\n%s", status, head);
    hj_half_close(&c);
    expect_frame(&c, 1, "stdin!");
    expect_frame(&c, 2, "eof 6\n");
    ck_assert(hj_read_eof(&c, 5000));
    hj_close(&c, false);
    berthd_finish(&b);
}
END_TEST

START_TEST(half_close_still_lets_the_server_write_then_close)
{
    struct berthd b = {0};
    start(&b, NULL);
    struct hj_client c;
    hj_open_upgraded(&c, b.port, NULL);
    ck_assert(hj_send(&c, "abc", 3));
    hj_half_close(&c);
    expect_frame(&c, 1, "abc");
    expect_frame(&c, 2, "eof 3\n");
    ck_assert_msg(hj_read_eof(&c, 5000), "no FIN after the marker");
    hj_close(&c, false);

    /* Half-closed before anything: the server still sends its 2 MiB. */
    enum { SEND = 2 << 20 };
    hj_open_upgraded(&c, b.port, "?send=2097152");
    hj_half_close(&c);
    char *data = malloc(65536);
    size_t got = 0;
    while (got < SEND) {
        unsigned stream;
        size_t len;
        ck_assert_msg(hj_read_frame(&c, &stream, data, 65536, &len, 10000),
                      "output stopped after %zu bytes", got);
        ck_assert_uint_eq(stream, 1);
        size_t bad = len;
        for (size_t i = 0; i < len && bad == len; i++)
            if ((unsigned char)data[i] != (got + i) % 251)
                bad = i;
        ck_assert_msg(bad == len, "byte %zu is wrong", got + bad);
        got += len;
    }
    free(data);
    ck_assert_uint_eq(got, SEND);
    expect_frame(&c, 2, "eof 0\n");
    ck_assert(hj_read_eof(&c, 5000));
    hj_close(&c, false);
    ck_assert(wait_health_int(&b, "http.connections", 1, 5000));
    berthd_finish(&b);
}
END_TEST

START_TEST(request_without_upgrade_is_taken_over_after_a_200)
{
    struct berthd b = {0};
    start(&b, NULL);
    struct hj_client c;
    char head[2048], v[256];
    int status =
        hj_open(&c, b.port, HJ_ROUTE, NULL, "{\"Detach\":false}", NULL, head, sizeof(head), 10000);
    ck_assert_msg(status == 200, "status %d:\n%s", status, head);
    ck_assert_msg(strncmp(head, "HTTP/1.1 200 OK\r\n", 17) == 0, "status line: %s", head);
    ck_assert_str_eq(head_value(head, "Content-Type", v, sizeof(v)),
                     "application/vnd.docker.raw-stream");
    ck_assert_msg(!head_value(head, "Content-Length", v, sizeof(v)) &&
                      !head_value(head, "Transfer-Encoding", v, sizeof(v)),
                  "the raw stream has no body framing:\n%s", head);
    ck_assert(hj_send(&c, "raw in", 6));
    expect_frame(&c, 1, "raw in");
    hj_half_close(&c);
    expect_frame(&c, 2, "eof 6\n");
    ck_assert_msg(hj_read_eof(&c, 5000), "no FIN after the marker");
    hj_close(&c, false);
    /* MHD got the connection back and closed it. */
    ck_assert(wait_health_int(&b, "http.connections", 1, 5000));
    berthd_finish(&b);
}
END_TEST

START_TEST(upgrade_refused_over_http_1_0_and_bad_query)
{
    struct berthd b = {0};
    start(&b, NULL);
    static const char req10[] = "POST " HJ_ROUTE " HTTP/1.0\r\n" HJ_UPGRADE_HEADERS "\r\n";
    struct hresp r;
    raw_http(b.port, req10, sizeof(req10) - 1, 5000, &r, NULL);
    ck_assert_error_reply(&r, 400, "bad_request", "HTTP/1.1");
    hresp_free(&r);
    static const char bad[] =
        "POST " HJ_ROUTE "?send=lots HTTP/1.1\r\nHost: t\r\n" HJ_UPGRADE_HEADERS "\r\n";
    raw_http(b.port, bad, sizeof(bad) - 1, 5000, &r, NULL);
    ck_assert_error_reply(&r, 400, "bad_request", "lots");
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

/*
 * docker-py's own socket path (what APIClient.attach_socket and
 * exec_start(socket=True) run): a POST with the Upgrade headers and
 * stream=True, _get_raw_response_socket, stdin sent and half-closed on
 * the socket as GitLab-Runner-like flows do, frames read with its
 * frames_iter.
 */
static const char dockerpy_script[] =
    "import socket, sys\n"
    "import docker\n"
    "from docker.utils.socket import frames_iter\n"
    "api = docker.APIClient(base_url='tcp://127.0.0.1:' + sys.argv[1], version='1.44')\n"
    "resp = api.post(api.base_url + '" HJ_ROUTE "', None, stream=True,\n"
    "                headers={'Connection': 'Upgrade', 'Upgrade': 'tcp'})\n"
    "assert resp.status_code == 101, resp.status_code\n"
    "sock = api._get_raw_response_socket(resp)\n"
    "raw = getattr(sock, '_sock', sock)\n"
    "raw.sendall(b'echo from docker-py\\n')\n"
    "raw.shutdown(socket.SHUT_WR)\n"
    "frames = list(frames_iter(sock, tty=False))\n"
    "assert frames == [(1, b'echo from docker-py\\n'), (2, b'eof 20\\n')], frames\n"
    "print('docker-py', docker.__version__, 'ok')\n";

/* Runs the script with python; 0 passed, 77 no docker module, else failed. */
static int
run_dockerpy(const char *python, unsigned port, char *out, size_t out_len)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s -c 'import docker' 2>/dev/null", python);
    if (system(cmd) != 0)
        return 77;
    char script[PATH_MAX];
    snprintf(script, sizeof(script), "/tmp/berth-hijack-dockerpy-%d.py", (int)getpid());
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs(dockerpy_script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "timeout 30 %s %s %u 2>&1", python, script, port);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, out_len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    unlink(script);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

START_TEST(docker_py_raw_socket_exchange)
{
    struct berthd b = {0};
    start(&b, NULL);
    /* Debian's python3-docker (5.0.3) and, where the PATH has another
     * python3 with docker-py (7.1.0 on the development machines), that. */
    static const char *const pythons[] = {"/usr/bin/python3", "python3"};
    int ran = 0;
    for (size_t i = 0; i < sizeof(pythons) / sizeof(pythons[0]); i++) {
        char out[4096];
        int rc = run_dockerpy(pythons[i], b.port, out, sizeof(out));
        if (rc == 77)
            continue;
        ck_assert_msg(rc == 0, "%s: docker-py exchange failed (%d):\n%s", pythons[i], rc, out);
        fprintf(stderr, "%s: %s", pythons[i], out);
        ran++;
    }
    if (!ran)
        fprintf(stderr, "SKIP docker_py_raw_socket_exchange: no python3 with docker-py "
                        "(python3-docker)\n");
    berthd_finish(&b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("hijack");
    TCase *tc = tcase_create("hijack");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, upgrade_is_answered_101_with_the_given_headers);
    tcase_add_test(tc, bytes_flow_both_ways_in_order);
    tcase_add_test(tc, bytes_sent_with_the_request_come_back_first);
    tcase_add_test(tc, half_close_still_lets_the_server_write_then_close);
    tcase_add_test(tc, request_without_upgrade_is_taken_over_after_a_200);
    tcase_add_test(tc, upgrade_refused_over_http_1_0_and_bad_query);
    tcase_add_test(tc, docker_py_raw_socket_exchange);
    suite_add_tcase(s, tc);
    return harness_run_suite(s);
}
