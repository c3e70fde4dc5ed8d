/*
 * libmicrohttpd driven from the libuv loop: MHD runs with MHD_USE_EPOLL
 * and no thread of its own; a uv_poll_t watches MHD's epoll fd and a
 * uv_timer_t fires at MHD's next timeout, and every MHD_run() is followed
 * by re-arming that timer. Resumed connections are only processed on the
 * next MHD_run(), so http_server_kick() schedules one (a zero timeout),
 * once for any number of resumes. Loop thread only.
 *
 * Client limits live here too: a connection cap, an idle timeout, and a
 * deadline for the request line and headers of every request (shorter
 * when the server is nearly full), so a flood of slow clients cannot hold
 * every slot. Past the cap, HTTP_RESERVE_CONNECTIONS more connections are
 * accepted that only GET /v1/health may use (access.c answers anything else
 * on them with 503); and whenever MHD's own limit is reached, the oldest
 * connection that is still sending its headers, or else the oldest idle
 * keep-alive one, is closed so the next client is accepted at once.
 */
#ifndef BERTH_API_HTTP_H
#define BERTH_API_HTTP_H

#include <microhttpd.h>
#include <stdbool.h>
#include <uv.h>

#include "common/err.h"

/* Connections accepted past --max-connections, for GET /v1/health only
 * (the /v1 server's; the Docker API's server has none). */
#define HTTP_RESERVE_CONNECTIONS 32

/*
 * MHD's per-connection memory pool. It holds the request line and the
 * headers as received plus a 64-byte record for every header and query
 * parameter (and cookie), so it bounds what berth gets to see at all: a
 * request over it is answered by MHD itself (431 or 414 with an HTML
 * body) before any callback of ours. At 128 KiB a request line or a
 * header block of up to ~127 KiB, or of up to ~1,700 fields, reaches
 * access.c (measured), which answers JSON past API_URI_MAX and
 * API_HEADERS_MAX. MHD zeroes the whole pool between two requests, so an
 * idle keep-alive connection holds this much memory (1,000 of them: 136
 * MiB of RSS, against 74 MiB at 64 KiB).
 */
#define HTTP_CONNECTION_POOL_BYTES (128 * 1024)

struct http_server;

struct http_server_opts {
    const char *host; /* numeric IPv4 or IPv6 address */
    unsigned port;    /* 0 picks a free port */
    /* A listening socket bound by the caller (a unix socket: api/listen_unix.h)
     * instead of host and port; the server owns it from the call on. */
    bool has_listen_fd;
    int listen_fd;
    unsigned max_connections;
    unsigned reserve_connections; /* accepted past max_connections (see below) */
    unsigned idle_timeout_s;      /* once a request's headers are in */
    unsigned header_timeout_s;    /* to send the request line and headers */
    MHD_AccessHandlerCallback access;
    MHD_RequestCompletedCallback completed;
    void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *conn);
    void *cls; /* passed to both */
};

/* Binds and starts serving. Loop thread. */
int http_server_start(uv_loop_t *loop, const struct http_server_opts *opts,
                      struct http_server **out, struct err *err);

/* The port actually bound (useful with port 0). */
unsigned http_server_port(const struct http_server *s);

/* Number of open connections. */
unsigned http_server_connections(const struct http_server *s);

/* Schedules an MHD_run() on the next loop iteration (after resumes). */
void http_server_kick(struct http_server *s);

/* Tells that conn was resumed (MHD_resume_connection): schedules a run and
 * re-arms the socket after it (see rearm_resumed in http.c). */
void http_server_resumed(struct http_server *s, struct MHD_Connection *conn);

/* Tells that a connection's next request has begun (its request line is
 * in): an idle keep-alive connection gets its header deadline from now.
 * On TCP the sweep sees the first byte of it earlier; on a unix socket,
 * which has no TCP_INFO, this is the first sign. */
void http_server_request_begins(struct http_server *s, struct MHD_Connection *conn);

/* Tells that a connection's request headers are complete: its header
 * deadline no longer applies. Called from the access handler. */
void http_server_headers_done(struct http_server *s, struct MHD_Connection *conn);

/* Tells that a connection's request completed (MHD's completion
 * callback): the connection is idle until its next request begins, whose
 * headers get the deadline from their first byte. */
void http_server_request_done(struct http_server *s, struct MHD_Connection *conn);

/* Tells that conn was hijacked (api/hijack.c): it is a raw stream now,
 * which the header deadline, eviction and idle sweeps leave alone until
 * MHD closes it. */
void http_server_conn_upgraded(struct http_server *s, struct MHD_Connection *conn);

/* Number of hijacked connections open. */
unsigned http_server_upgraded(const struct http_server *s);

/* Whether conn was accepted past max_connections, into the reserve that
 * only GET /v1/health may use. */
bool http_server_conn_reserved(struct http_server *s, struct MHD_Connection *conn);

/* Shuts conn's socket down; MHD closes the connection on its next run
 * (after which its request's completion callback runs). For a client that
 * breaks a limit in the middle of a request. */
void http_server_conn_close(struct http_server *s, struct MHD_Connection *conn);

/* Stops accepting new connections; existing ones are still served. */
void http_server_quiesce(struct http_server *s);

/*
 * Stops MHD (every suspended connection must have been resumed first),
 * closes the handles and frees the server; done (may be NULL) runs once
 * its handles are closed.
 */
void http_server_stop(struct http_server *s, void (*done)(void *arg), void *arg);

#endif
