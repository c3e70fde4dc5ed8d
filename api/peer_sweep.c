/*
 * The sweep of requests in flight, every PEER_SWEEP_MS (api.c): a request body
 * that arrives under the minimum rate closes its connection, and a client
 * that hung up on an upload, a streamed reply or a long wait has its
 * request's work aborted, where MHD would not notice (it does not look at
 * a suspended connection's socket). Also the body's rate clock, which
 * stops while a request is suspended. Loop thread only.
 */
#include <stdint.h>
#include <stdlib.h>

#include "api/api_int.h"
#include "api/stream.h"
#include "common/log.h"
#include "common/sock.h"
#include "daemon/daemon.h"

/*
 * Counts the time since rate_since_ms as time the request's body was
 * awaited from its client, and marks body_seen at every
 * API_BODY_RATE_MARK_MS of that time. Bytes that came during the span are
 * taken to have come at its end (the lenient reading).
 */
void
api_req_rate_account(struct api_req *req, uint64_t now)
{
    uint64_t from = req->rate_active_ms;
    uint64_t to = from + (now - req->rate_since_ms);
    for (uint64_t m = from / API_BODY_RATE_MARK_MS + 1; m <= to / API_BODY_RATE_MARK_MS; m++)
        req->rate_marks[m % API_BODY_RATE_MARKS] = req->rate_seen_then;
    req->rate_active_ms = to;
    req->rate_since_ms = now;
    req->rate_seen_then = req->body_seen;
}

/*
 * Whether a request's body is arriving under API_BODY_MIN_RATE over the
 * last API_BODY_RATE_WINDOW_S of the time it was awaited from the client
 * (suspended time, while berth's job had not taken the last piece, is not
 * counted). The window must bring the rate's worth of bytes, or all that
 * the Content-Length says was left at its start.
 */
static bool
body_too_slow(struct api_req *req, uint64_t now)
{
    if (!req->started || req->body_done || req->suspended)
        return false;
    api_req_rate_account(req, now);
    if (req->rate_active_ms < API_BODY_RATE_WINDOW_S * 1000)
        return false;
    uint64_t mark = (req->rate_active_ms - API_BODY_RATE_WINDOW_S * 1000) / API_BODY_RATE_MARK_MS;
    uint64_t window_ms = req->rate_active_ms - mark * API_BODY_RATE_MARK_MS;
    uint64_t from = req->rate_marks[mark % API_BODY_RATE_MARKS];
    uint64_t got = req->body_seen - from;
    uint64_t need = (uint64_t)API_BODY_MIN_RATE * window_ms / 1000;
    const char *cl = api_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        uint64_t total = strtoull(cl, NULL, 10);
        uint64_t left = total > from ? total - from : 0;
        if (left < need)
            need = left;
    }
    if (got >= need)
        return false;
    log_info("%s %s: %llu body bytes in the last %.1f s, under the minimum of %d bytes/s: "
             "closing the connection",
             req->method, req->path, (unsigned long long)got, (double)window_ms / 1000.0,
             API_BODY_MIN_RATE);
    return true;
}

/* Closes the connection of a request whose client broke a limit in the
 * middle of its body; whatever its job waits for is aborted first. */
static void
close_slow_request(struct api *api, struct api_req *req)
{
    req->body_done = true; /* once */
    req->closed_status = 408;
    if (req->on_shutdown) {
        void (*hook)(struct api_req *) = req->on_shutdown;
        req->on_shutdown = NULL;
        hook(req);
    }
    if (req->suspended)
        api_req_resume(req);
    http_server_conn_close(req->http, req->conn);
}

/*
 * Whether the client of a streamed reply that waits for its next bytes (a
 * follow, a Docker wait or event feed, suspended meanwhile) has closed its
 * side: MHD does not look at a suspended connection's socket, so without
 * this such a request would hold its wait until the next byte to send.
 * Its request is complete, so nothing is left for it to read from the
 * client, and a hang-up can only mean it is gone.
 */
static bool
stream_client_gone(struct api_req *req)
{
    if (!req->stream || !req->body_done || !req->suspended)
        return false;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info)
        return false;
    int unread = 0;
    return sock_peer((intptr_t)info->connect_fd) != SOCK_PEER_OPEN &&
           sock_unread((intptr_t)info->connect_fd, &unread) == 0 && unread == 0;
}

/*
 * A client that hangs up while its upload streams into a job: MHD notices
 * only when it next reads the socket, which it does not do while the
 * connection is suspended for want of room in the job's pipe (and, in
 * 0.9.75, may not do after a resume either, having dropped the socket's
 * edge-triggered event). So uploads in progress are checked here: a peer
 * that shut its side down or reset the connection has its request's job
 * aborted, and the request resumed so MHD closes it. Requests that wait
 * long with nothing to send (watch_hangup: a registry pull) are watched
 * the same way, so their callers stop waiting when they leave. Every
 * request whose body is still coming is also held to the minimum rate
 * here.
 */
void
api_peer_sweep_cb(uv_timer_t *t)
{
    struct api *api = t->data;
    struct api_req *next;
    uint64_t now = uv_now(api->daemon->loop);
    for (struct api_req *req = api->live; req; req = next) {
        next = req->live_next;
        if (body_too_slow(req, now)) {
            close_slow_request(api, req);
            continue;
        }
        if (stream_client_gone(req)) {
            /* Ended as failed: MHD closes the connection, and the request's
             * completion drops whatever it waited on (a wait, an event feed). */
            log_debug("%s %s: the client went away from the streamed reply", req->method,
                      req->path);
            api_stream_fail(req->stream);
            continue;
        }
        bool uploading = req->stream_data && !req->body_ended;
        if (!req->on_shutdown || !(uploading || req->watch_hangup))
            continue;
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info)
            continue;
        enum sock_peer peer = sock_peer((intptr_t)info->connect_fd);
        if (peer == SOCK_PEER_OPEN)
            continue;
        /* A reset (POLLHUP/POLLERR) is final. A FIN is not always: a
         * client may shut its sending side after the whole body (a
         * half-close) while MHD still holds the tail of it for us. It means
         * the client is gone only when nothing is left to read, the body is
         * short of its Content-Length, and we are not the ones holding MHD
         * back (a suspended request waits for its job, not for the client),
         * and it stays so for two sweeps. */
        if (peer == SOCK_PEER_FIN) {
            int unread = 0;
            const char *cl = api_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
            bool complete = cl && strtoull(cl, NULL, 10) <= req->body_received;
            /* A request waiting for its answer (watch_hangup) has had its
             * whole body: a FIN then is the client leaving. */
            bool held = uploading && (req->suspended || complete);
            if (held || sock_unread((intptr_t)info->connect_fd, &unread) < 0 || unread > 0) {
                req->peer_eof_sweeps = 0;
                continue;
            }
            if (++req->peer_eof_sweeps < 2)
                continue;
        }
        log_debug("%s %s: the client hung up %s", req->method, req->path,
                  uploading ? "during the upload" : "while waiting");
        void (*hook)(struct api_req *) = req->on_shutdown;
        req->on_shutdown = NULL; /* once */
        hook(req);
        if (req->suspended)
            api_req_resume(req);
    }
}
