/*
 * How libmicrohttpd is driven from the libuv loop on this OS, for
 * api/http.c (one per MHD daemon). The rest of the server (limits,
 * deadlines, eviction) is the same everywhere.
 *
 * Linux (http_loop_linux.c): MHD runs with MHD_USE_EPOLL; one uv_poll_t
 * watches MHD's epoll fd. MHD 0.9.75 drops the edge of a socket that was
 * suspended, so the sockets of resumed connections are re-armed in that
 * epoll set after the run that took them back. Whether an idle
 * keep-alive connection has begun its next request comes from the
 * kernel's TCP_INFO (tcpi_last_data_recv).
 *
 * Windows (http_loop_windows.c): MHD has no epoll there, so it runs in
 * its external-select mode and every socket it wants to wait on (the
 * listening socket, its inter-thread channel, each connection) gets a
 * uv_poll_t of its own, re-synced from MHD_get_fdset2() after every
 * MHD_run(), which selects over them itself (MHD on W32 is built with an
 * FD_SETSIZE of 2048). A connection's watch goes at MHD's CLOSED
 * notification, before MHD closes the socket, so a socket value reused
 * by a new connection is never watched with a stale handle. There is no
 * TCP_INFO with a time of the last data: the time a connection's socket
 * was last reported readable is recorded instead, which is when the next
 * request's first bytes came (to the loop's wake-up).
 *
 * Loop thread only.
 */
#ifndef BERTH_API_HTTP_LOOP_H
#define BERTH_API_HTTP_LOOP_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"

struct http_loop;

/* The MHD_USE_* flags this glue needs MHD started with. */
unsigned http_loop_mhd_flags(void);

/* Starts watching mhd; run(arg) is to call MHD_run (between
 * http_loop_run_begin and _end) whenever MHD has something to do. */
int http_loop_start(uv_loop_t *loop, struct MHD_Daemon *mhd, void (*run)(void *arg), void *arg,
                    struct http_loop **out, struct err *err);

/* Around the MHD_run()s of one wake-up. */
void http_loop_run_begin(struct http_loop *l);
void http_loop_run_end(struct http_loop *l);

/* conn was resumed (the next run takes it back). */
void http_loop_resumed(struct http_loop *l, struct MHD_Connection *conn);

/* conn is closing (MHD's CLOSED notification): its socket fd is closed
 * right after. */
void http_loop_conn_closed(struct http_loop *l, struct MHD_Connection *conn, intptr_t fd);

/* The listening socket fd is about to be closed (MHD_quiesce_daemon). */
void http_loop_listener_closed(struct http_loop *l, intptr_t fd);

/*
 * Whether the connection on fd has received data later than since_ms
 * (+ margin_ms), on uv_hrtime's clock in ms, with now_ms that clock now;
 * *ago_ms is how long ago the latest data came.
 */
bool http_loop_new_data(struct http_loop *l, intptr_t fd, uint64_t since_ms, uint64_t now_ms,
                        uint64_t margin_ms, uint64_t *ago_ms);

/* Stops watching and closes the handles; done(arg) runs once they are
 * closed. Call before MHD_stop_daemon. */
void http_loop_stop(struct http_loop *l, void (*done)(void *arg), void *arg);

#endif
