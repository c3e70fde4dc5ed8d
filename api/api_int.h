/*
 * What the parts of the API's core share: the API object with its two
 * listeners (one per front end) and its lists of requests in flight. api.c
 * starts and stops it, access.c is MHD's access, URI and completion
 * callbacks (a request's life), request.c what handlers call on a
 * request, peer_sweep.c the periodic check of requests in flight. Not for
 * the handlers. Loop thread only.
 */
#ifndef BERTH_API_API_INT_H
#define BERTH_API_API_INT_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api/api.h"
#include "api/http.h"
#include "api/listen_unix.h"
#include "api/request.h"

/* One HTTP server and the front end it serves (api/front.h). */
struct api_listener {
    struct api *api;
    const struct api_front *front;
    struct http_server *http;   /* NULL when this front end is off */
    struct listen_unix sock;    /* a unix socket's file, when it listens on one */
    struct hijack_set *hijacks; /* its upgraded connections; NULL: none can be */
};

struct api {
    struct daemon *daemon;
    struct api_listener v1, docker;
    unsigned servers_running; /* servers not yet stopped at shutdown */
    struct metrics *metrics;
    struct api_req *suspended; /* list of suspended requests */
    struct api_req *live;      /* every request in flight */
    uv_timer_t peer_sweep;
    bool shutting_down;
    uv_timer_t drain_timer; /* final shutdown: lets MHD flush the 503s */
    unsigned drain_rounds;
    void (*done)(void *arg);
    void *done_arg;
};

/* access.c: MHD's callbacks for every request of a listener (cls). */
enum MHD_Result api_access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls);
void api_completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe);
void *api_uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn);

/* peer_sweep.c: counts the time since the request's rate clock last ran
 * as time its body was awaited from the client. */
void api_req_rate_account(struct api_req *req, uint64_t now);
/* The sweep of requests in flight, every PEER_SWEEP_MS (t->data: the api). */
void api_peer_sweep_cb(uv_timer_t *t);

#endif
