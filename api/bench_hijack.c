/*
 * A test-only route for api/hijack.c, compiled with -DBERTH_BENCH_ROUTES=ON
 * (the test build; never the default one, and not in openapi.yaml):
 *
 *   POST /v1/debug/echo-upgrade[?send=N][&close_after=N][&write_max=N]
 *
 * answers 101 (Content-Type: application/vnd.docker.raw-stream, Upgrade:
 * tcp) when the request has an Upgrade header and "200 OK" with the raw
 * take-over otherwise, as the Docker Engine's attach does; a body (exec
 * start's JSON) is read and ignored. Then every chunk the client sends
 * comes back as a Docker stdout frame (stream 1, three zero bytes, a
 * big-endian length, the bytes); with send=N it also writes N bytes of
 * generated data (byte i is i % 251) as stdout frames of up to 32 KiB.
 * When the client has half-closed and everything is written, it writes a
 * stderr frame (stream 2) "eof <bytes read>\n" and closes; with
 * close_after=N it stops reading once it has read N bytes and, when
 * everything is written, writes "close <bytes read>\n" and closes, whatever
 * the client still sends. At daemon
 * shutdown it writes a stderr frame "shutdown\n" and closes. Both ways
 * keep to the hijack's bounded queue (write_max, default HIJACK_WRITE_MAX):
 * a full queue pauses reading from the client and generating, until a
 * write completes. Loop thread.
 */
#ifdef BERTH_BENCH_ROUTES

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "api/hijack.h"
#include "api/request.h"

#define ECHO_SEND_MAX (1ULL << 32)
#define ECHO_WRITE_MAX_MAX (16u << 20)
#define ECHO_FRAME_MAX (32 * 1024)
#define FRAME_HEADER 8

struct echo {
    struct hijack *h;
    uint64_t read_total, close_after;
    uint64_t send_left, send_pos;
    const char *end; /* the marker's word once the end is decided */
    bool paused, done;
};

static void
frame_header(char hdr[FRAME_HEADER], unsigned stream, size_t len)
{
    hdr[0] = (char)stream;
    hdr[1] = hdr[2] = hdr[3] = 0;
    hdr[4] = (char)(len >> 24);
    hdr[5] = (char)(len >> 16);
    hdr[6] = (char)(len >> 8);
    hdr[7] = (char)len;
}

static void echo_pump(struct echo *e);

static void
echo_written_cb(void *arg, int status)
{
    struct echo *e = arg;
    if (status < 0)
        return; /* the error callback closes */
    if (e->paused) {
        e->paused = false;
        hijack_read_start(e->h);
    }
    echo_pump(e);
}

static int
echo_frame(struct echo *e, unsigned stream, const char *data, size_t len)
{
    char hdr[FRAME_HEADER];
    frame_header(hdr, stream, len);
    uv_buf_t bufs[2] = {uv_buf_init(hdr, FRAME_HEADER), uv_buf_init((char *)data, (unsigned)len)};
    return hijack_writev(e->h, bufs, 2, echo_written_cb, e);
}

/* Generates what is left to send, then ends after the client's FIN. */
static void
echo_pump(struct echo *e)
{
    static char block[ECHO_FRAME_MAX];
    while (e->send_left && !e->done) {
        size_t room = hijack_write_room(e->h);
        if (room <= FRAME_HEADER)
            return;
        size_t n = room - FRAME_HEADER;
        if (n > ECHO_FRAME_MAX)
            n = ECHO_FRAME_MAX;
        if (n > e->send_left)
            n = (size_t)e->send_left;
        for (size_t i = 0; i < n; i++)
            block[i] = (char)((e->send_pos + i) % 251);
        if (echo_frame(e, 1, block, n) < 0)
            return;
        e->send_pos += n;
        e->send_left -= n;
    }
    if (e->end && !e->send_left && !e->done) {
        char msg[64];
        int len =
            snprintf(msg, sizeof(msg), "%s %llu\n", e->end, (unsigned long long)e->read_total);
        if (echo_frame(e, 2, msg, (size_t)len) == -EAGAIN)
            return; /* again after a completion */
        e->done = true;
        hijack_close(e->h);
    }
}

static size_t
echo_read_cb(struct hijack *h, const char *data, size_t len, void *ctx)
{
    struct echo *e = ctx;
    size_t room = hijack_write_room(h);
    size_t take = room > FRAME_HEADER ? room - FRAME_HEADER : 0;
    if (take > len)
        take = len;
    if (!take || echo_frame(e, 1, data, take) < 0) {
        e->paused = true; /* a completion resumes */
        return 0;
    }
    e->read_total += take;
    if (e->close_after && e->read_total >= e->close_after && !e->end) {
        e->end = "close";
        e->paused = false;
        hijack_read_stop(h);
        echo_pump(e);
        return take;
    }
    if (take < len)
        e->paused = true;
    return take;
}

static void
echo_eof_cb(struct hijack *h, void *ctx)
{
    struct echo *e = ctx;
    e->end = "eof";
    echo_pump(e);
}

static void
echo_error_cb(struct hijack *h, int err, void *ctx)
{
    hijack_close(h);
}

static void
echo_shutdown_cb(struct hijack *h, void *ctx)
{
    struct echo *e = ctx;
    static const char msg[] = "shutdown\n";
    e->done = true;
    (void)echo_frame(e, 2, msg, sizeof(msg) - 1);
    hijack_close(h);
}

static void
echo_closed_cb(struct hijack *h, void *ctx)
{
    free(ctx);
}

static const struct hijack_cbs echo_cbs = {
    .read = echo_read_cb,
    .eof = echo_eof_cb,
    .error = echo_error_cb,
    .shutdown = echo_shutdown_cb,
    .closed = echo_closed_cb,
};

/* A whole decimal number from 0 to max, or -1. */
static long long
query_count(struct api_req *req, const char *name, unsigned long long max)
{
    const char *v = api_req_query(req, name);
    if (!v)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *v == '+' || *end || errno || n > max) {
        api_reply_error(req, 400, "bad_request",
                        "query \"%s\": %.40s is not a number from 0 to %llu", name, v, max);
        return -1;
    }
    return (long long)n;
}

void
bench_echo_upgrade_post(struct api_req *req)
{
    static const char *const upgrade_headers[] = {
        "Content-Type", "application/vnd.docker.raw-stream", "Upgrade", "tcp", NULL};
    static const char *const raw_headers[] = {"Content-Type", "application/vnd.docker.raw-stream",
                                              NULL};
    long long send = query_count(req, "send", ECHO_SEND_MAX);
    long long write_max = send < 0 ? -1 : query_count(req, "write_max", ECHO_WRITE_MAX_MAX);
    long long close_after = write_max < 0 ? -1 : query_count(req, "close_after", ECHO_SEND_MAX);
    if (send < 0 || write_max < 0 || close_after < 0)
        return;
    struct echo *e = calloc(1, sizeof(*e));
    if (!e) {
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    e->send_left = (uint64_t)send;
    e->close_after = (uint64_t)close_after;
    bool upgrade = hijack_req_upgrade(req);
    struct hijack_opts opts = {
        .mode = upgrade ? HIJACK_UPGRADE : HIJACK_RAW,
        .headers = upgrade ? upgrade_headers : raw_headers,
        .cbs = &echo_cbs,
        .ctx = e,
        .write_max = (size_t)write_max,
    };
    struct err err = {0};
    e->h = hijack_start(req, &opts, &err);
    if (!e->h) {
        free(e);
        api_reply_err(req, &err);
        return;
    }
    hijack_read_start(e->h);
    echo_pump(e); /* queued until the client has the 101 */
}

#endif
