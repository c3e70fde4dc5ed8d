/* The hijacked-connection client of the API tests (harness_hijack.h). */
#include "tests/api/harness_hijack.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/api/harness.h"

/* Waits for input or the deadline; false on timeout. */
static bool
wait_readable(int fd, double deadline)
{
    for (;;) {
        int left = (int)(deadline - now_ms());
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        return r > 0;
    }
}

/* Fills the buffer with what comes next; 1 read, 0 EOF, -1 error or timeout. */
static int
fill(struct hj_client *c, double deadline)
{
    if (c->off && c->len)
        memmove(c->buf, c->buf + c->off, c->len);
    c->off = 0;
    if (!wait_readable(c->fd, deadline))
        return -1;
    ssize_t n;
    do
        n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    c->len += (size_t)n;
    return 1;
}

int
hj_open(struct hj_client *c, unsigned port, const char *target, const char *headers,
        const char *body, const char *early, char *head, size_t head_len, int timeout_ms)
{
    memset(c, 0, sizeof(*c));
    c->fd = raw_connect(port);
    if (c->fd < 0)
        return -1;
    size_t cap = 4096 + (body ? strlen(body) : 0) + (early ? strlen(early) : 0);
    char *req = malloc(cap);
    ck_assert_ptr_nonnull(req);
    int n = snprintf(req, cap, "POST %s HTTP/1.1\r\nHost: t\r\n%s", target, headers ? headers : "");
    if (body)
        n += snprintf(req + n, cap - (size_t)n,
                      "Content-Type: application/json\r\n"
                      "Content-Length: %zu\r\n",
                      strlen(body));
    n += snprintf(req + n, cap - (size_t)n, "\r\n%s%s", body ? body : "", early ? early : "");
    bool sent = hj_send(c, req, (size_t)n);
    free(req);
    if (!sent)
        return 0;
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        char *end = memmem(c->buf + c->off, c->len, "\r\n\r\n", 4);
        if (end) {
            size_t hl = (size_t)(end + 4 - (c->buf + c->off));
            size_t copy = hl < head_len - 1 ? hl : head_len - 1;
            memcpy(head, c->buf + c->off, copy);
            head[copy] = '\0';
            c->off += hl;
            c->len -= hl;
            int status = 0;
            if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
                return 0;
            return status;
        }
        if (c->len == sizeof(c->buf) || fill(c, deadline) <= 0)
            return 0;
    }
}

void
hj_open_upgraded(struct hj_client *c, unsigned port, const char *query)
{
    char target[256], head[2048];
    snprintf(target, sizeof(target), "%s%s", HJ_ROUTE, query ? query : "");
    int status =
        hj_open(c, port, target, HJ_UPGRADE_HEADERS, NULL, NULL, head, sizeof(head), 10000);
    ck_assert_msg(status == 101, "upgrade of %s: status %d, head:\n%s", target, status, head);
}

bool
hj_send(struct hj_client *c, const void *data, size_t len)
{
    return raw_send(c->fd, data, len);
}

bool
hj_read_exact(struct hj_client *c, void *out, size_t len, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    char *o = out;
    while (len) {
        if (!c->len && fill(c, deadline) <= 0)
            return false;
        size_t n = c->len < len ? c->len : len;
        memcpy(o, c->buf + c->off, n);
        c->off += n;
        c->len -= n;
        o += n;
        len -= n;
        if (!c->len)
            c->off = 0;
    }
    return true;
}

bool
hj_read_frame(struct hj_client *c, unsigned *stream, char *data, size_t cap, size_t *len,
              int timeout_ms)
{
    unsigned char hdr[8];
    if (!hj_read_exact(c, hdr, sizeof(hdr), timeout_ms))
        return false;
    size_t n = (size_t)hdr[4] << 24 | (size_t)hdr[5] << 16 | (size_t)hdr[6] << 8 | hdr[7];
    ck_assert_msg(hdr[1] == 0 && hdr[2] == 0 && hdr[3] == 0 && hdr[0] <= 3,
                  "not a frame header: %02x %02x %02x %02x", hdr[0], hdr[1], hdr[2], hdr[3]);
    ck_assert_msg(n <= cap, "frame of %zu bytes, more than the %zu expected", n, cap);
    *stream = hdr[0];
    *len = n;
    return hj_read_exact(c, data, n, timeout_ms);
}

bool
hj_read_eof(struct hj_client *c, int timeout_ms)
{
    if (c->len)
        return false;
    return fill(c, now_ms() + timeout_ms) == 0;
}

void
hj_half_close(struct hj_client *c)
{
    shutdown(c->fd, SHUT_WR);
}

void
hj_close(struct hj_client *c, bool reset)
{
    if (c->fd < 0)
        return;
    if (reset) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    close(c->fd);
    c->fd = -1;
}

long
hj_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}
