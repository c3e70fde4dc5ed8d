/*
 * The byte stream of a hijacked connection (api/hijack.h): the poll on the
 * socket, reads offered with back-pressure, the bounded write queue and
 * its flush, the wait for the client to read the reply's head, and the
 * close's flush and linger. The hand-over and the hijack's lifetime are
 * api/hijack.c's. Loop thread only.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "api/hijack_int.h"
#include "api/peer_unread.h"
#include "common/log.h"

/* Writes sent in one sendmsg() at most. */
#define IOV_BATCH 64
/*
 * The stream's first bytes wait until the client has read the head (the
 * 101, or the raw mode's status line and headers). docker-py parses the
 * head with http.client, whose buffered reader takes whatever the socket
 * holds, and then reads the stream from the raw socket: bytes that came
 * with the head are lost to it (docker-py issue #3332: exec_run's output
 * empty now and then). The engine starts an exec only after the 101, so
 * its output usually comes too late to be caught; ours can be waiting
 * already. For a unix socket or a TCP peer on this host the kernel says
 * what the client has not read (api/peer_unread.h), checked after
 * HEAD_CHECK_MS and then at twice the interval each time, up to
 * HEAD_CHECK_MAX_MS, until it is nothing; for a peer elsewhere the stream
 * waits HEAD_GRACE_MS, longer than an exec's start takes the engine. A
 * client that has not read the head after HEAD_HOLD_MAX_MS is not
 * waited for any more (it reads nothing at all: the bytes queue as for
 * any slow client).
 */
#define HEAD_CHECK_MS 1
#define HEAD_CHECK_MAX_MS 32
#define HEAD_GRACE_MS 50
#define HEAD_HOLD_MAX_MS 2000

static void poll_cb(uv_poll_t *p, int status, int events);
static void head_check_cb(uv_timer_t *t);

/* Starts the poll with what the stream needs now, or stops it. */
void
hj_update_poll(struct hijack *h)
{
    if (!h->poll_open)
        return;
    int ev = 0;
    if (!h->error && (h->state == HJ_OPEN || h->state == HJ_FLUSHING || h->state == HJ_LINGER)) {
        if (h->state == HJ_LINGER ||
            (h->state == HJ_OPEN && h->reading && !h->rx_len && !h->eof_seen))
            ev |= UV_READABLE;
        if (h->wq_head && !h->head_hold)
            ev |= UV_WRITABLE;
        if (h->head_hold && !uv_is_active((uv_handle_t *)&h->head))
            uv_timer_start(&h->head, head_check_cb, h->head_check_ms, 0);
    }
    if (ev == h->poll_events)
        return;
    h->poll_events = ev;
    if (!ev) {
        uv_poll_stop(&h->poll);
        return;
    }
    int rc = uv_poll_start(&h->poll, ev, poll_cb);
    if (rc < 0 && !h->error) {
        h->poll_events = 0;
        h->error = rc;
        hj_schedule(h);
    }
}

/* The connection broke: the owner hears of it from the deferred step. */
void
hj_fail(struct hijack *h, int err)
{
    if (h->error || h->state == HJ_DONE)
        return;
    log_debug("hijack: connection broke: %s", strerror(-err));
    h->error = err;
    hj_update_poll(h);
    hj_schedule(h);
}

void
hj_fail_writes(struct hijack *h, int status)
{
    struct hj_chunk *c;
    while ((c = h->wq_head)) {
        h->wq_head = c->next;
        if (!h->wq_head)
            h->wq_tail = NULL;
        h->queued -= c->len - c->off;
        if (c->cb)
            c->cb(c->arg, status);
        free(c);
    }
}

/* Offers the buffered bytes, then the FIN, to the owner while it reads. */
void
hj_offer(struct hijack *h)
{
    while (h->reading && !h->closing && !h->error && h->state == HJ_OPEN && h->rx_len) {
        size_t len = h->rx_len;
        size_t took = h->cbs.read ? h->cbs.read(h, h->rx + h->rx_off, len, h->ctx) : len;
        if (took > len)
            took = len;
        h->rx_off += took;
        h->rx_len -= took;
        if (took < len)
            h->reading = false;
    }
    if (!h->rx_len)
        h->rx_off = 0;
    if (h->eof_seen && !h->eof_told && !h->rx_len && h->reading && !h->closing && !h->error &&
        h->state == HJ_OPEN) {
        h->eof_told = true;
        if (h->cbs.eof)
            h->cbs.eof(h, h->ctx);
    }
}

/* Reads and drops what the client sent and nobody read, so that MHD's
 * close() of the socket sends no reset (which would lose the client
 * what it has not read yet). */
void
hj_drop_input(int fd)
{
    char buf[LINGER_BUF];
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && errno == EINTR))
            return;
    }
}

static void
linger_timeout_cb(uv_timer_t *t)
{
    hj_finish(t->data);
}

/* Sends the FIN; then waits for the client's, unless it came already. */
void
hj_begin_linger(struct hijack *h)
{
    shutdown(h->fd, SHUT_WR);
    if (h->eof_seen || h->set->aborting) {
        if (!h->eof_seen)
            hj_drop_input(h->fd);
        hj_finish(h);
        return;
    }
    h->state = HJ_LINGER;
    h->rx_len = h->rx_off = 0;
    h->linger_until = uv_now(h->set->loop) + HIJACK_LINGER_MAX_MS;
    uv_timer_start(&h->deadline, linger_timeout_cb, HIJACK_LINGER_MS, 0);
    hj_update_poll(h);
}

static void
flush_timeout_cb(uv_timer_t *t)
{
    struct hijack *h = t->data;
    log_debug("hijack: the client took nothing of %zu queued bytes for %d ms: closing", h->queued,
              HIJACK_FLUSH_TIMEOUT_MS);
    hj_fail_writes(h, -ETIMEDOUT);
    hj_finish(h);
}
/* A close: what is queued goes out, within HIJACK_FLUSH_TIMEOUT_MS, then
 * the FIN. */
void
hj_begin_flush(struct hijack *h)
{
    h->state = HJ_FLUSHING;
    uv_timer_start(&h->deadline, flush_timeout_cb, HIJACK_FLUSH_TIMEOUT_MS, 0);
    if (!h->wq_head)
        hj_begin_linger(h);
}

/* Whether the client has read the head: what it has not read is nothing,
 * or, where that cannot be known, the grace is over. */
static bool
hj_head_read(struct hijack *h)
{
    long unread = h->peer_known && h->fd >= 0 ? peer_unread_bytes(h->fd) : -1;
    if (unread >= 0)
        return unread == 0;
    return uv_now(h->set->loop) - h->head_sent_at >= HEAD_GRACE_MS;
}

/* The head is all sent: the stream waits for the client to read it. */
void
hj_hold_after_head(struct hijack *h)
{
    h->head_hold = true;
    h->head_check_ms = HEAD_CHECK_MS;
    h->head_sent_at = uv_now(h->set->loop);
    h->peer_known = peer_unread_bytes(h->fd) >= 0;
}

static void
head_check_cb(uv_timer_t *t)
{
    struct hijack *h = t->data;
    if (h->state == HJ_DONE || !h->head_hold || h->error || hj_head_read(h) ||
        uv_now(h->set->loop) - h->head_sent_at >= HEAD_HOLD_MAX_MS) {
        h->head_hold = false;
        hj_update_poll(h);
        return;
    }
    if (h->head_check_ms < HEAD_CHECK_MAX_MS)
        h->head_check_ms *= 2;
    uv_timer_start(t, head_check_cb, h->head_check_ms, 0);
}

void
hj_flush(struct hijack *h)
{
    /* While aborting, what the socket takes goes out without waiting. */
    while (h->wq_head && !h->error && h->state != HJ_DONE && (!h->head_hold || h->set->aborting)) {
        struct iovec iov[IOV_BATCH];
        int n = 0;
        size_t total = 0;
        /* The raw mode's head goes alone, so that the stream can wait. */
        int batch = h->raw_head && !h->set->aborting ? 1 : IOV_BATCH;
        for (struct hj_chunk *c = h->wq_head; c && n < batch; c = c->next) {
            if (c->len == c->off)
                continue;
            iov[n].iov_base = c->data + c->off;
            iov[n].iov_len = c->len - c->off;
            total += iov[n].iov_len;
            n++;
        }
        ssize_t sent = 0;
        if (n) {
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            sent = sendmsg(h->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (sent < 0) {
                if (errno == EINTR)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    hj_fail(h, -errno);
                break;
            }
        }
        size_t left = (size_t)sent;
        h->queued -= left;
        struct hj_chunk *c;
        while ((c = h->wq_head)) {
            size_t rest = c->len - c->off;
            if (rest > left) {
                c->off += left;
                break;
            }
            left -= rest;
            h->wq_head = c->next;
            if (!h->wq_head)
                h->wq_tail = NULL;
            if (h->raw_head) {
                h->raw_head = false;
                hj_hold_after_head(h);
            }
            /* May write more or close: both only queue or schedule. */
            if (c->cb)
                c->cb(c->arg, 0);
            free(c);
        }
        if ((size_t)sent < total)
            break; /* the socket's buffer is full */
    }
    if (h->state == HJ_FLUSHING && !h->wq_head && !h->error)
        hj_begin_linger(h);
}

static void
hj_on_readable(struct hijack *h)
{
    if (h->state == HJ_LINGER) {
        char buf[LINGER_BUF];
        for (;;) {
            ssize_t n = recv(h->fd, buf, sizeof(buf), 0);
            if (n > 0 || (n < 0 && errno == EINTR))
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                /* Still sending: it may still be reading too. Wait for it
                 * to go quiet, within the overall limit. */
                uint64_t now = uv_now(h->set->loop);
                if (now < h->linger_until) {
                    uint64_t left = h->linger_until - now;
                    uv_timer_start(&h->deadline, linger_timeout_cb,
                                   left < HIJACK_LINGER_MS ? left : HIJACK_LINGER_MS, 0);
                }
                return;
            }
            hj_finish(h); /* the FIN, or a reset: nothing more to wait for */
            return;
        }
    }
    if (h->state != HJ_OPEN || !h->reading || h->rx_len || h->eof_seen || h->error)
        return;
    ssize_t n = recv(h->fd, h->rx, h->rx_cap, 0);
    if (n > 0) {
        h->rx_off = 0;
        h->rx_len = (size_t)n;
        hj_offer(h);
    } else if (n == 0) {
        h->eof_seen = true;
        hj_offer(h);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        hj_fail(h, -errno);
    }
}

static void
poll_cb(uv_poll_t *p, int status, int events)
{
    struct hijack *h = p->data;
    if (status < 0) {
        /* POLLERR: libuv has stopped the handle and says EBADF; the
         * socket's own error tells what happened (a reset, usually). */
        h->poll_events = 0;
        int soerr = 0;
        socklen_t len = sizeof(soerr);
        if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || !soerr)
            soerr = ECONNRESET;
        if (h->state == HJ_LINGER)
            hj_finish(h);
        else
            hj_fail(h, -soerr);
        return;
    }
    if (events & UV_WRITABLE)
        hj_flush(h);
    if ((events & UV_READABLE) && h->state != HJ_DONE)
        hj_on_readable(h);
    hj_update_poll(h);
}

void
hijack_read_start(struct hijack *h)
{
    if (h->reading || h->closing || h->state == HJ_DONE)
        return;
    h->reading = true;
    if (h->rx_len || (h->eof_seen && !h->eof_told))
        hj_schedule(h);
    hj_update_poll(h);
}

void
hijack_read_stop(struct hijack *h)
{
    h->reading = false;
    hj_update_poll(h);
}

int
hijack_writev(struct hijack *h, const uv_buf_t *bufs, unsigned n, hijack_write_cb cb, void *arg)
{
    if (h->closing || h->state == HJ_DONE)
        return -EPIPE;
    if (h->error)
        return h->error;
    size_t len = 0;
    for (unsigned i = 0; i < n; i++)
        len += bufs[i].len;
    if (len > h->write_max)
        return -EMSGSIZE;
    if (h->queued + len > h->write_max)
        return -EAGAIN;
    struct hj_chunk *c = malloc(sizeof(*c) + len);
    if (!c)
        return -ENOMEM;
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(c->data + off, bufs[i].base, bufs[i].len);
        off += bufs[i].len;
    }
    c->next = NULL;
    c->len = len;
    c->off = 0;
    c->cb = cb;
    c->arg = arg;
    if (h->wq_tail)
        h->wq_tail->next = c;
    else
        h->wq_head = c;
    h->wq_tail = c;
    h->queued += len;
    hj_update_poll(h);
    return 0;
}

int
hijack_write(struct hijack *h, const void *data, size_t len, hijack_write_cb cb, void *arg)
{
    uv_buf_t buf = uv_buf_init((char *)data, (unsigned)len);
    return hijack_writev(h, &buf, 1, cb, arg);
}

size_t
hijack_write_queued(const struct hijack *h)
{
    return h->queued;
}

size_t
hijack_write_room(const struct hijack *h)
{
    if (h->closing || h->error || h->state == HJ_DONE || h->queued >= h->write_max)
        return 0;
    return h->write_max - h->queued;
}
