/*
 * Hijacked connections: a request answered with an upgrade becomes a raw
 * two-way byte stream driven from the loop. This is what the Docker
 * Engine API's attach and exec start do: the client sends "Upgrade: tcp"
 * and "Connection: Upgrade", the server answers 101 and from then on the
 * connection carries multiplexed output one way and stdin the other, and
 * the client's write half-close (shutdown(SHUT_WR)) means "stdin closed"
 * while output keeps flowing until the process ends.
 *
 * Two ways in:
 *  - HIJACK_UPGRADE: "HTTP/1.1 101 Switching Protocols" with the caller's
 *    headers, through MHD's own upgrade support. Needs an HTTP/1.1
 *    request and an Upgrade header in the reply.
 *  - HIJACK_RAW: the engine's answer to a request without an Upgrade
 *    header: "HTTP/1.1 200 OK" and the caller's headers, no framing, and
 *    the connection taken over all the same. MHD cannot do this (it sends
 *    an upgrade response only with status 101), so the request is
 *    suspended and the socket used directly. Bytes the client pipelined
 *    behind its request before this answer was sent may sit in MHD's
 *    read buffer, out of reach: a client must wait for the status line
 *    before it sends (the old clients that relied on this did).
 * The docker CLI (20.10 and 28) and docker-py (5 and 7) always send the
 * Upgrade header and insist on 101; hijack_req_upgrade() says which way a
 * request asks for.
 *
 * The stream: reads with back-pressure (a read callback takes what it can,
 * the rest waits until hijack_read_start), writes copied into a bounded
 * queue with a completion each (a write that does not fit is refused with
 * -EAGAIN, so a slow client cannot grow memory), the client's FIN told
 * apart from a reset, and a close that sends what is queued, half-closes,
 * waits briefly for the client's FIN and hands the socket back to MHD.
 * Callbacks never run inside a call of this API: always later, on the loop.
 * Loop thread only.
 */
#ifndef BERTH_API_HIJACK_H
#define BERTH_API_HIJACK_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/err.h"

struct api_req;
struct http_server;
struct hijack;
struct hijack_set;

/* Bytes a hijack queues for the client at most, unless opts say otherwise. */
#define HIJACK_WRITE_MAX (256 * 1024)
/* Bytes read from the socket at once: what a read callback is offered at
 * most, except the bytes MHD read with the request (up to its pool). */
#define HIJACK_READ_BUF (32 * 1024)
/* A close waits this long for the queued bytes to be taken by the client;
 * then for the client's FIN until it has been quiet for HIJACK_LINGER_MS,
 * or HIJACK_LINGER_MAX_MS in all, before it gives up. */
#define HIJACK_FLUSH_TIMEOUT_MS 30000
#define HIJACK_LINGER_MS 2000
#define HIJACK_LINGER_MAX_MS 30000

enum hijack_mode {
    HIJACK_UPGRADE, /* 101 through MHD's upgrade */
    HIJACK_RAW,     /* 200, then the connection is taken over */
};

/* A write's completion: 0 once all of it was handed to the kernel, else a
 * negative errno (-ECONNRESET, -EPIPE: the client went away; -ECANCELED:
 * the hijack ended first; -ETIMEDOUT: a close gave up on a stuck client). */
typedef void (*hijack_write_cb)(void *arg, int status);

struct hijack_cbs {
    /* Bytes from the client, valid during the call only. Returns how many
     * it took; taking fewer than len stops reading (as hijack_read_stop)
     * and the rest is offered again after hijack_read_start. */
    size_t (*read)(struct hijack *h, const char *data, size_t len, void *ctx);
    /* The client's FIN: it sends nothing more (a write half-close, or a
     * close: TCP cannot tell them apart until a write fails), and every
     * byte before it was taken. Writes still go out. At most once, and
     * only while reading. May be NULL. */
    void (*eof)(struct hijack *h, void *ctx);
    /* The connection broke: err is -ECONNRESET or -EPIPE (the client reset
     * or closed it and a write found out) or another negative errno. The
     * queued writes fail; the owner calls hijack_close. At most once,
     * never after hijack_close. */
    void (*error)(struct hijack *h, int err, void *ctx);
    /* The daemon is shutting down: the owner may write a last message and
     * calls hijack_close (if it does not, the hijack closes itself after
     * this call; what is queued still goes out). May be NULL. */
    void (*shutdown)(struct hijack *h, void *ctx);
    /* The last call: every write has completed, and h is gone once it
     * returns. Always comes, once, after hijack_close (or after the
     * daemon's final shutdown step closed the hijack itself). */
    void (*closed)(struct hijack *h, void *ctx);
};

struct hijack_opts {
    enum hijack_mode mode;
    /* Reply headers as name, value pairs, NULL-terminated; no CR or LF.
     * HIJACK_UPGRADE must have an Upgrade header; its Connection header is
     * MHD's ("Connection: Upgrade"), so one given here is left out. */
    const char *const *headers;
    const struct hijack_cbs *cbs; /* copied */
    void *ctx;                    /* for the callbacks; the owner's */
    size_t write_max;             /* queue cap in bytes; 0 means HIJACK_WRITE_MAX */
};

/* Whether req asks for an upgrade: it has an Upgrade header, which is all
 * the Docker Engine looks at (101 then, 200 otherwise). */
bool hijack_req_upgrade(const struct api_req *req);

/*
 * Answers req as opts say and returns the stream, or NULL with err set
 * (EINVAL: a 101 without an Upgrade header or to an HTTP/1.0 request, a
 * header with CR or LF, a request already answered; ECANCELED: the daemon
 * is shutting down; ENOMEM) and nothing answered: the caller replies.
 * Called from a route handler once the request's body is complete, or
 * later while the request is suspended (it is resumed if need be); the
 * handler neither replies nor suspends after it. The request stays valid
 * (hijack_req) until the hijack's error or closed callback.
 */
struct hijack *hijack_start(struct api_req *req, const struct hijack_opts *opts, struct err *err);

/* The request that was hijacked, or NULL once it is gone. */
struct api_req *hijack_req(const struct hijack *h);

/* Starts (or resumes) and stops offering the client's bytes to the read
 * callback. A hijack does not read until started. */
void hijack_read_start(struct hijack *h);
void hijack_read_stop(struct hijack *h);

/*
 * Queues a copy of bufs for the client; cb (may be NULL) runs once it was
 * written, in the order of the writes. Returns 0; -EAGAIN when it does not
 * fit in the room left (nothing was queued: write again after a
 * completion); -EMSGSIZE when it is larger than the whole queue; -EPIPE
 * after hijack_close; the error once the connection broke. cb runs only
 * when 0 was returned. Writes made before the client got the 101 wait.
 */
int hijack_writev(struct hijack *h, const uv_buf_t *bufs, unsigned n, hijack_write_cb cb,
                  void *arg);
int hijack_write(struct hijack *h, const void *data, size_t len, hijack_write_cb cb, void *arg);

/* Bytes queued and not yet written, and the room left for the next write. */
size_t hijack_write_queued(const struct hijack *h);
size_t hijack_write_room(const struct hijack *h);

/*
 * Ends the stream: no more read, eof, error or shutdown callbacks. What is
 * queued is sent (for up to HIJACK_FLUSH_TIMEOUT_MS), then the sending
 * side is shut down (the client reads EOF) and the client's last bytes
 * are read and dropped until its FIN (see HIJACK_LINGER_MS), so
 * that closing does not reset a connection the client is still writing
 * to; then the socket goes back to MHD, which closes it, and the closed
 * callback runs. A second call does nothing.
 */
void hijack_close(struct hijack *h);

/* ---- The set of a server's hijacks: api.c's side ---- */

/* One set per HTTP server; NULL on allocation failure. */
struct hijack_set *hijack_set_new(uv_loop_t *loop, struct http_server *http);

/* Shutdown, first step: refuses new hijacks and asks every owner to finish
 * (the shutdown callback), closing gracefully those that do not. */
void hijack_set_begin_shutdown(struct hijack_set *set);

/* Shutdown, last step (before the 503s and MHD_stop_daemon): ends every
 * hijack now, without flushing; every socket is back with MHD when it
 * returns, and every closed callback has run. */
void hijack_set_abort(struct hijack_set *set);

/* Hijacks not yet freed (their handles may still be closing). */
unsigned hijack_set_count(const struct hijack_set *set);

/* Frees the set, or, while hijacks are still closing their handles, once
 * the last of them is freed. */
void hijack_set_free(struct hijack_set *set);

/* From the request's completion (api/access.c): req is going away. */
void hijack_detach(struct hijack *h);

#endif
