/*
 * Hijacked connections (api/hijack.h): MHD's upgrade hand-over, the raw
 * take-over of a suspended request, and a hijack's lifetime (its deferred
 * step, its end, the sets of them and their shutdown); the byte stream on
 * the socket is api/hijack_stream.c's. Loop thread only.
 *
 * What libmicrohttpd 0.9.75 (Debian's) does with an upgrade when it runs
 * with MHD_USE_EPOLL and no thread, as read in its src/microhttpd/:
 *  - MHD_queue_response() takes an upgrade response only with status 101
 *    (connection.c:5145), for an HTTP/1.1 request (connection.c:5178), on a
 *    daemon started with MHD_ALLOW_UPGRADE (connection.c:5136). The
 *    response gets "Connection: Upgrade" from MHD_create_response_for_upgrade
 *    (response.c:1924); without an Upgrade header of ours the hand-over
 *    fails and MHD closes the connection (response.c:1639).
 *  - Once the 101's header is sent (connection.c:4700), MHD suspends the
 *    connection itself (response.c:1853): the socket leaves MHD's epoll set
 *    and its timeout lists (daemon.c:3159, 3129), so MHD neither polls it
 *    nor times it out, and the request's completion callback waits.
 *  - The upgrade handler gets the connection's own socket, not a copy
 *    (response.c:1856; the socketpair is for TLS only), and as extra_in the
 *    bytes MHD had read past the request (response.c:1656: the read buffer,
 *    which always starts at the first unprocessed byte, connection.c:2621).
 *    MHD has switched TCP_NODELAY off on it (response.c:1658); we switch it
 *    back on, as the Docker Engine's Go sockets have it.
 *  - After a complete request MHD reads nothing more (the connection waits
 *    in MHD_EVENT_LOOP_INFO_BLOCK, connection.c:2523), so a FIN the client
 *    sent before the 101 went out is still in the socket for us.
 *  - MHD keeps owning the fd: the application may shutdown() it but not
 *    close it, and ends with MHD_upgrade_action(CLOSE) (response.c:1573),
 *    which only marks the connection closed and resumes it (response.c:1592).
 *    The next MHD_run() (MHD_get_timeout() does not count a pending resume:
 *    we kick the server) runs the completion callback (daemon.c:3380) and
 *    closes the socket (daemon.c:3845).
 *  - MHD_stop_daemon() with an upgraded connection still open logs it,
 *    marks it closed and closes its socket (daemon.c:7534); with a
 *    suspended connection that is not upgraded it panics (daemon.c:7518).
 *
 * Hence a uv_poll_t on MHD's fd rather than uv_tcp_open() on a dup() of it:
 * MHD owns the fd and closes it only after our CLOSE (or at
 * MHD_stop_daemon, which api.c reaches only once every hijack is closed),
 * so a second descriptor would buy nothing and cost one more fd per
 * connection against RLIMIT_NOFILE. uv_poll_stop() and uv_close() drop the
 * fd from libuv's epoll at once (libuv 1.44 src/unix/poll.c,
 * uv__poll_stop), so MHD may close it any time after them; a request that
 * goes away under a live hijack (MHD_stop_daemon) closes the poll first.
 *
 * The raw mode (200) uses the same poll on the fd of a request it
 * suspended (MHD_suspend_connection() takes the socket out of MHD's epoll
 * set as well, daemon.c:3159), writes the status line and headers itself,
 * and at the end shuts the socket down, leaves a reply that cannot be sent
 * and resumes the request: MHD fails the send and closes the connection.
 */
#include "api/hijack.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "api/api.h"
#include "api/hijack_int.h"
#include "api/http.h"
#include "api/request.h"
#include "common/log.h"

static void
hj_maybe_free(struct hijack *h)
{
    if (h->handles || h->pending_mhd)
        return;
    struct hijack_set *set = h->set;
    if (h->prev)
        h->prev->next = h->next;
    else
        set->first = h->next;
    if (h->next)
        h->next->prev = h->prev;
    set->count--;
    free(h->rx);
    free(h);
    if (set->free_pending && set->count == 0)
        free(set);
}

static void
handle_closed_cb(uv_handle_t *hd)
{
    struct hijack *h = hd->data;
    h->handles--;
    hj_maybe_free(h);
}

static void defer_cb(uv_timer_t *t);

void
hj_schedule(struct hijack *h)
{
    if (h->state != HJ_DONE)
        uv_timer_start(&h->defer, defer_cb, 0, 0);
}

/* The owner's close, or an error, moves the stream on from here. */
static void
defer_cb(uv_timer_t *t)
{
    struct hijack *h = t->data;
    if (h->state == HJ_DONE)
        return;
    if (h->error) {
        hj_fail_writes(h, h->error);
        if (!h->closing && !h->error_told) {
            h->error_told = true;
            if (h->cbs.error)
                h->cbs.error(h, h->error, h->ctx);
        }
        if (h->closing && (h->state != HJ_PENDING || h->detached))
            hj_finish(h);
        return;
    }
    if (h->closing) {
        if (h->state == HJ_OPEN)
            hj_begin_flush(h);
        hj_update_poll(h);
        return;
    }
    if (h->state == HJ_OPEN)
        hj_offer(h);
    hj_update_poll(h);
}

/* Gives the socket back to MHD, which closes it. */
static void
hj_hand_back(struct hijack *h)
{
    /* A 101 not sent yet has nothing to give back; its request keeps
     * pointing at h so that its completion lets go of h (detach). */
    if (h->pending_mhd)
        return;
    struct api_req *req = h->req;
    h->req = NULL;
    if (req)
        req->hijack = NULL;
    if (h->mode == HIJACK_UPGRADE) {
        if (h->urh) {
            MHD_upgrade_action(h->urh, MHD_UPGRADE_ACTION_CLOSE);
            h->urh = NULL;
            /* The resume is only looked at by the next MHD_run. */
            http_server_kick(h->set->http);
        }
    } else if (req) {
        /* MHD sends this into a socket that is shut: the send fails and MHD
         * closes the connection. The status is the one the client got. */
        shutdown(h->fd, SHUT_RDWR);
        api_reply_text(req, 200, "application/octet-stream", "", 0);
        api_req_resume(req);
    }
    h->fd = -1;
}

/* The end: every write completes, the owner's closed callback runs, and
 * the socket goes back to MHD. h itself goes once its handles are closed
 * (and, for a 101 not sent yet, once MHD let go of it). */
void
hj_finish(struct hijack *h)
{
    if (h->state == HJ_DONE)
        return;
    h->state = HJ_DONE;
    h->reading = false;
    if (h->poll_open) {
        /* Out of libuv's epoll now, before MHD can close the fd. */
        uv_close((uv_handle_t *)&h->poll, handle_closed_cb);
        h->poll_open = false;
    }
    uv_close((uv_handle_t *)&h->defer, handle_closed_cb);
    uv_close((uv_handle_t *)&h->deadline, handle_closed_cb);
    uv_close((uv_handle_t *)&h->head, handle_closed_cb);
    hj_fail_writes(h, h->error ? h->error : -ECANCELED);
    if (h->cbs.closed)
        h->cbs.closed(h, h->ctx);
    /* A 101 still queued (pending_mhd): MHD calls the upgrade handler with
     * h later, which closes at once, or completes the request without it
     * (hijack_detach). */
    hj_hand_back(h);
}

static void
set_nodelay(int fd)
{
    int one = 1;
    /* Fails on a unix socket, which has no Nagle to turn off. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void
upgrade_cb(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
           size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    struct hijack *h = cls;
    h->pending_mhd = false;
    if (h->state == HJ_DONE) {
        /* Ended at shutdown before the 101 went out. */
        if (h->req)
            h->req->hijack = NULL;
        h->req = NULL;
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        http_server_kick(h->set->http);
        hj_maybe_free(h);
        return;
    }
    h->urh = urh;
    h->fd = sock;
    http_server_conn_upgraded(h->set->http, conn);
    set_nodelay(sock);
    h->state = HJ_OPEN;
    hj_hold_after_head(h); /* MHD has sent the 101 */
    if (extra_in_size > h->rx_cap) {
        char *n = realloc(h->rx, extra_in_size);
        if (!n) {
            hj_fail(h, -ENOMEM);
            return;
        }
        h->rx = n;
        h->rx_cap = extra_in_size;
    }
    memcpy(h->rx, extra_in, extra_in_size);
    h->rx_off = 0;
    h->rx_len = extra_in_size;
    int rc = uv_poll_init(h->set->loop, &h->poll, sock);
    if (rc < 0) {
        hj_fail(h, rc);
        return;
    }
    h->poll.data = h;
    h->poll_open = true;
    h->handles++;
    hj_update_poll(h);
    hj_schedule(h);
}

bool
hijack_req_upgrade(const struct api_req *req)
{
    return api_req_header(req, MHD_HTTP_HEADER_UPGRADE) != NULL;
}

static int
check_headers(const char *const *hdrs, enum hijack_mode mode, struct err *err)
{
    bool upgrade = false;
    for (size_t i = 0; hdrs && hdrs[i]; i += 2) {
        const char *name = hdrs[i], *value = hdrs[i + 1];
        if (!value)
            return err_set(err, EINVAL, "hijack: header %.64s has no value", name);
        if (!*name || name[strcspn(name, "\r\n: \t")] || value[strcspn(value, "\r\n")])
            return err_set(err, EINVAL, "hijack: header %.64s: bad name or value", name);
        if (strcasecmp(name, MHD_HTTP_HEADER_UPGRADE) == 0)
            upgrade = true;
    }
    if (mode == HIJACK_UPGRADE && !upgrade)
        return err_set(err, EINVAL, "hijack: a 101 reply needs an Upgrade header");
    return 0;
}

/* Queues the raw mode's status line and headers, ahead of everything. */
static int
queue_raw_head(struct hijack *h, const char *const *hdrs)
{
    static const char status[] = "HTTP/1.1 200 OK\r\n";
    size_t len = strlen(status) + 2;
    for (size_t i = 0; hdrs && hdrs[i]; i += 2)
        len += strlen(hdrs[i]) + 2 + strlen(hdrs[i + 1]) + 2;
    struct hj_chunk *c = malloc(sizeof(*c) + len + 1);
    if (!c)
        return -ENOMEM;
    char *p = c->data;
    p = stpcpy(p, status);
    for (size_t i = 0; hdrs && hdrs[i]; i += 2) {
        p = stpcpy(p, hdrs[i]);
        p = stpcpy(p, ": ");
        p = stpcpy(p, hdrs[i + 1]);
        p = stpcpy(p, "\r\n");
    }
    stpcpy(p, "\r\n");
    c->next = NULL;
    c->len = len;
    c->off = 0;
    c->cb = NULL;
    c->arg = NULL;
    h->wq_head = h->wq_tail = c;
    h->queued = len;
    h->raw_head = true;
    return 0;
}

static struct MHD_Response *
upgrade_response(struct hijack *h, const char *const *hdrs)
{
    struct MHD_Response *resp = MHD_create_response_for_upgrade(upgrade_cb, h);
    if (!resp)
        return NULL;
    for (size_t i = 0; hdrs && hdrs[i]; i += 2) {
        if (strcasecmp(hdrs[i], MHD_HTTP_HEADER_CONNECTION) == 0)
            continue; /* MHD's own "Connection: Upgrade" */
        if (MHD_add_response_header(resp, hdrs[i], hdrs[i + 1]) != MHD_YES) {
            MHD_destroy_response(resp);
            return NULL;
        }
    }
    return resp;
}

struct hijack *
hijack_start(struct api_req *req, const struct hijack_opts *opts, struct err *err)
{
    struct hijack_set *set = api_req_hijacks(req);
    if (!set) {
        err_set(err, ENOMEM, "hijack: out of memory");
        return NULL;
    }
    if (set->shutting_down) {
        err_set(err, ECANCELED, "the daemon is shutting down");
        return NULL;
    }
    if (req->response || req->hijack || req->stream) {
        err_set(err, EINVAL, "hijack: %s %s was answered already", req->method, req->path);
        return NULL;
    }
    if (check_headers(opts->headers, opts->mode, err) < 0)
        return NULL;
    if (opts->mode == HIJACK_UPGRADE && strcmp(req->version, MHD_HTTP_VERSION_1_0) == 0) {
        err_set(err, EINVAL, "an upgrade needs HTTP/1.1, and the request is %s", req->version);
        return NULL;
    }
    struct hijack *h = calloc(1, sizeof(*h));
    char *rx = malloc(HIJACK_READ_BUF);
    if (!h || !rx) {
        free(h);
        free(rx);
        err_set(err, ENOMEM, "hijack: out of memory");
        return NULL;
    }
    h->set = set;
    h->mode = opts->mode;
    h->cbs = *opts->cbs;
    h->ctx = opts->ctx;
    h->rx = rx;
    h->rx_cap = HIJACK_READ_BUF;
    h->write_max = opts->write_max ? opts->write_max : HIJACK_WRITE_MAX;
    h->fd = -1;

    struct MHD_Response *resp = NULL;
    if (h->mode == HIJACK_UPGRADE) {
        resp = upgrade_response(h, opts->headers);
        if (!resp) {
            free(rx);
            free(h);
            err_set(err, EINVAL, "hijack: cannot build the 101 reply (a header MHD refused)");
            return NULL;
        }
        h->state = HJ_PENDING;
        h->pending_mhd = true;
    } else {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        int rc = queue_raw_head(h, opts->headers);
        if (rc == 0)
            rc = info ? uv_poll_init(set->loop, &h->poll, info->connect_fd) : UV_EBADF;
        if (rc < 0) {
            free(h->wq_head);
            free(rx);
            free(h);
            err_set(err, -rc, "hijack: cannot take the connection over: %s", uv_strerror(rc));
            return NULL;
        }
        h->fd = info->connect_fd;
        h->poll.data = h;
        h->poll_open = true;
        h->handles++;
        h->state = HJ_OPEN;
    }
    uv_timer_init(set->loop, &h->defer);
    uv_timer_init(set->loop, &h->deadline);
    uv_timer_init(set->loop, &h->head);
    h->defer.data = h->deadline.data = h->head.data = h;
    h->handles += 3;
    h->next = set->first;
    if (set->first)
        set->first->prev = h;
    set->first = h;
    set->count++;
    h->req = req;
    req->hijack = h;

    if (h->mode == HIJACK_UPGRADE) {
        api_reply_response(req, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
        if (req->suspended)
            api_req_resume(req);
        log_debug("%s %s: upgrading the connection", req->method, req->path);
    } else {
        /* MHD must not touch the socket from now on. */
        if (!req->suspended)
            api_req_suspend(req);
        http_server_conn_upgraded(set->http, req->conn);
        set_nodelay(h->fd);
        hj_update_poll(h);
        log_debug("%s %s: taking the connection over after a 200", req->method, req->path);
    }
    return h;
}

struct api_req *
hijack_req(const struct hijack *h)
{
    return h->req;
}

void
hijack_close(struct hijack *h)
{
    if (h->closing || h->state == HJ_DONE)
        return;
    h->closing = true;
    h->reading = false;
    hj_schedule(h);
}

struct hijack_set *
hijack_set_new(uv_loop_t *loop, struct http_server *http)
{
    struct hijack_set *set = calloc(1, sizeof(*set));
    if (!set)
        return NULL;
    set->loop = loop;
    set->http = http;
    return set;
}

void
hijack_set_begin_shutdown(struct hijack_set *set)
{
    if (!set)
        return;
    set->shutting_down = true;
    struct hijack *next;
    for (struct hijack *h = set->first; h; h = next) {
        next = h->next;
        if (h->closing || h->state == HJ_DONE)
            continue;
        if (h->cbs.shutdown)
            h->cbs.shutdown(h, h->ctx);
        hijack_close(h);
    }
}

/* Ends h now: what is queued goes out as far as the socket takes it
 * without waiting, then the FIN (hj_begin_linger does not linger while
 * aborting), then the end. */
static void
hj_abort(struct hijack *h)
{
    h->closing = true;
    h->reading = false;
    if (h->fd >= 0 && !h->error && (h->state == HJ_OPEN || h->state == HJ_FLUSHING)) {
        h->state = HJ_FLUSHING;
        if (h->wq_head)
            hj_flush(h);
        else
            hj_begin_linger(h);
    }
    if (h->state != HJ_DONE && h->fd >= 0)
        hj_drop_input(h->fd);
    hj_finish(h);
}

void
hijack_set_abort(struct hijack_set *set)
{
    if (!set)
        return;
    set->shutting_down = true;
    set->aborting = true;
    struct hijack *next;
    for (struct hijack *h = set->first; h; h = next) {
        next = h->next;
        if (h->state != HJ_DONE)
            hj_abort(h);
    }
}

unsigned
hijack_set_count(const struct hijack_set *set)
{
    return set ? set->count : 0;
}

void
hijack_set_free(struct hijack_set *set)
{
    if (!set)
        return;
    if (set->count == 0) {
        free(set);
        return;
    }
    log_debug("hijack: %u hijacks still closing; the set goes with the last", set->count);
    set->free_pending = true;
}

void
hijack_detach(struct hijack *h)
{
    h->req = NULL;
    h->detached = true;
    h->pending_mhd = false;
    if (h->state == HJ_DONE) {
        hj_maybe_free(h);
        return;
    }
    /* MHD closes the socket right after this: out of libuv's epoll now. */
    if (h->poll_open) {
        uv_close((uv_handle_t *)&h->poll, handle_closed_cb);
        h->poll_open = false;
    }
    h->urh = NULL;
    h->fd = -1;
    if (h->set->aborting) {
        h->closing = true;
        if (!h->error)
            h->error = -ECONNRESET;
        hj_finish(h);
        return;
    }
    hj_fail(h, -ECONNRESET);
}
