/*
 * The API's start and shutdown: its servers (the /v1 API and, when
 * asked, the Docker API on TCP or a unix socket), the sweep timer, and
 * the stop that answers what is still suspended before MHD stops.
 * Requests themselves are access.c's. Loop thread only.
 */
#include "api/api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "api/docker/docker.h"
#include "api/front.h"
#include "api/hijack.h"
#include "api/metrics.h"
#include "api/stream.h"
#include "common/log.h"
#include "daemon/daemon.h"

/* Deadline for the request line and headers of every request. */
#define HEADER_TIMEOUT_S 10

/* How often uploads in progress are checked for a client that hung up,
 * and request bodies for their rate. */
#define PEER_SWEEP_MS 500

static void
lag_observe(void *ctx, double lag_ms)
{
    metrics_observe_lag(ctx, lag_ms);
}

static int
listener_start(struct api *api, struct api_listener *lis, const struct api_front *front,
               struct http_server_opts *opts, struct err *err)
{
    struct daemon *d = api->daemon;
    lis->api = api;
    lis->front = front;
    opts->max_connections = d->cfg->max_connections;
    opts->idle_timeout_s = d->cfg->connection_timeout_s;
    opts->header_timeout_s = HEADER_TIMEOUT_S < d->cfg->connection_timeout_s
                                 ? HEADER_TIMEOUT_S
                                 : d->cfg->connection_timeout_s;
    opts->access = api_access_cb;
    opts->completed = api_completed_cb;
    opts->uri_log = api_uri_log_cb;
    opts->cls = lis;
    int ret = http_server_start(d->loop, opts, &lis->http, err);
    /* Without it, only hijacking fails (ENOMEM). */
    if (ret == 0)
        lis->hijacks = hijack_set_new(d->loop, lis->http);
    return ret;
}

/*
 * The Docker API's server (--docker-listen), on a unix socket or TCP. A
 * listen address that was asked for and cannot be had stops the start;
 * the default socket that cannot be had (another daemon holds it) is
 * logged, and berthd serves /v1 without it.
 */
static int
docker_start(struct api *api, struct err *err)
{
    const struct config *cfg = api->daemon->cfg;
    struct http_server_opts opts = {.host = cfg->docker_host, .port = cfg->docker_port};
    struct err e = {0};
    int ret = 0;
    if (cfg->docker_listen == CONFIG_DOCKER_NONE)
        return 0;
    if (cfg->docker_listen == CONFIG_DOCKER_UNIX) {
        ret = listen_unix_open(cfg->docker_path, "docker", &api->docker.sock, &e);
        opts.has_listen_fd = true;
        opts.listen_fd = api->docker.sock.fd;
    }
    if (ret == 0)
        ret = listener_start(api, &api->docker, &docker_front, &opts, &e);
    if (ret < 0) {
        if (cfg->docker_listen == CONFIG_DOCKER_UNIX && api->docker.sock.fd >= 0)
            listen_unix_remove(&api->docker.sock);
        memset(&api->docker.sock, 0, sizeof(api->docker.sock));
        if (cfg->docker_listen_given)
            return err_set(err, e.code, "--docker-listen: %s", e.msg);
        log_error("docker API: not served: %s", e.msg);
        return 0;
    }
    if (cfg->docker_listen == CONFIG_DOCKER_UNIX)
        log_info("docker API: serving unix://%s (mode 0660, group %s)", cfg->docker_path,
                 api->docker.sock.group ? api->docker.sock.group : "root");
    else
        log_info("docker API: serving tcp://%s%s%s:%u", strchr(cfg->docker_host, ':') ? "[" : "",
                 cfg->docker_host, strchr(cfg->docker_host, ':') ? "]" : "",
                 http_server_port(api->docker.http));
    return 0;
}

int
api_start(struct daemon *d, struct api **out, struct err *err)
{
    struct api *api = calloc(1, sizeof(*api));
    if (!api || !(api->metrics = metrics_new())) {
        free(api);
        return err_set(err, ENOMEM, "api: out of memory");
    }
    api->daemon = d;
    struct http_server_opts opts = {
        .host = d->cfg->listen_host,
        .port = d->cfg->listen_port,
        .reserve_connections = HTTP_RESERVE_CONNECTIONS,
    };
    if (listener_start(api, &api->v1, &api_front_v1, &opts, err) < 0) {
        metrics_free(api->metrics);
        free(api);
        return -err->code;
    }
    api->servers_running = 1;
    if (docker_start(api, err) < 0) {
        /* The server's handles close on the loop's next turn; nothing of
         * api is referenced by them. */
        http_server_stop(api->v1.http, NULL, NULL);
        hijack_set_free(api->v1.hijacks);
        metrics_free(api->metrics);
        free(api);
        return -err->code;
    }
    if (api->docker.http)
        api->servers_running++;
    d->lag.observe = lag_observe;
    d->lag.observe_ctx = api->metrics;
    uv_timer_init(d->loop, &api->peer_sweep);
    api->peer_sweep.data = api;
    uv_timer_start(&api->peer_sweep, api_peer_sweep_cb, PEER_SWEEP_MS, PEER_SWEEP_MS);
    *out = api;
    return 0;
}

unsigned
api_port(const struct api *api)
{
    return http_server_port(api->v1.http);
}

unsigned
api_docker_port(const struct api *api)
{
    return api->docker.http && !api->docker.sock.path[0] ? http_server_port(api->docker.http) : 0;
}

struct daemon *
api_daemon(const struct api *api)
{
    return api->daemon;
}

struct metrics *
api_metrics(const struct api *api)
{
    return api->metrics;
}

unsigned
api_connections(const struct api *api)
{
    return http_server_connections(api->v1.http) +
           (api->docker.http ? http_server_connections(api->docker.http) : 0);
}

struct hijack_set *
api_hijacks(const struct api *api)
{
    return api->v1.hijacks;
}

struct hijack_set *
api_req_hijacks(const struct api_req *req)
{
    const struct api *api = req->api;
    return req->front == api->docker.front && api->docker.http ? api->docker.hijacks
                                                               : api->v1.hijacks;
}

/* Hijacks not yet freed, on both servers. */
static unsigned
hijacks_count(const struct api *api)
{
    return hijack_set_count(api->v1.hijacks) + hijack_set_count(api->docker.hijacks);
}

void
api_begin_shutdown(struct api *api)
{
    api->shutting_down = true;
    http_server_quiesce(api->v1.http);
    if (api->docker.http)
        http_server_quiesce(api->docker.http);
    /* New clients get a refused connection, not a socket file nobody serves. */
    listen_unix_remove(&api->docker.sock);
    /* Every request with a hook, suspended or not: an upload waiting for
     * its client's next bytes must not hold the shutdown up either. */
    struct api_req *next;
    for (struct api_req *req = api->live; req; req = next) {
        next = req->live_next;
        if (req->on_shutdown) {
            void (*hook)(struct api_req *) = req->on_shutdown;
            req->on_shutdown = NULL;
            hook(req);
        }
    }
    /* Hijacked connections are asked to finish, and closed gracefully. */
    hijack_set_begin_shutdown(api->v1.hijacks);
    hijack_set_begin_shutdown(api->docker.hijacks);
}

static void
http_stopped_cb(void *arg)
{
    struct api *api = arg;
    if (--api->servers_running > 0)
        return;
    void (*done)(void *) = api->done;
    void *done_arg = api->done_arg;
    api->daemon->lag.observe = NULL;
    hijack_set_free(api->v1.hijacks);
    hijack_set_free(api->docker.hijacks);
    metrics_free(api->metrics);
    free(api);
    if (done)
        done(done_arg);
}

static void
peer_sweep_closed_cb(uv_handle_t *h)
{
    struct api *api = h->data;
    if (api->docker.http)
        http_server_stop(api->docker.http, http_stopped_cb, api);
    http_server_stop(api->v1.http, http_stopped_cb, api);
}

static void
drain_timer_closed_cb(uv_handle_t *h)
{
    struct api *api = h->data;
    uv_close((uv_handle_t *)&api->peer_sweep, peer_sweep_closed_cb);
}

/* Lets MHD send the last answers, then stops it; MHD refuses to stop
 * (it aborts) with a suspended connection, so whatever suspended itself
 * again meanwhile is ended and resumed first, and MHD gets another run. */
static void
drain_timer_cb(uv_timer_t *t)
{
    struct api *api = t->data;
    /* Hijacks closed by api_finish_shutdown may still be closing handles. */
    if ((api->suspended || hijacks_count(api)) && api->drain_rounds++ < 100) {
        while (api->suspended) {
            struct api_req *req = api->suspended;
            if (req->stream)
                api_stream_end(req->stream);
            api_req_resume(req);
        }
        uv_timer_start(t, drain_timer_cb, 50, 0);
        return;
    }
    if (api->suspended || hijacks_count(api))
        log_error("shutdown: connections still suspended after 5 s");
    uv_close((uv_handle_t *)t, drain_timer_closed_cb);
}

void
api_finish_shutdown(struct api *api, void (*done)(void *arg), void *arg)
{
    api->done = done;
    api->done_arg = arg;
    /* Hijacked connections end first: one taken over after a 200 is
     * suspended, and must not get the 503 below in its raw stream. */
    hijack_set_abort(api->v1.hijacks);
    hijack_set_abort(api->docker.hijacks);
    /* Every streamed reply ends now, suspended or not: one still sending
     * would suspend itself again for more data, and MHD refuses to stop
     * with a suspended connection. */
    for (struct api_req *req = api->live; req; req = req->live_next)
        if (req->stream)
            api_stream_end(req->stream);
    while (api->suspended) {
        struct api_req *req = api->suspended;
        if (req->stream) {
            api_stream_end(req->stream); /* resumes it */
            api_req_resume(req);
            continue;
        }
        if (!req->response)
            api_reply_fail(req, ECANCELED, "the daemon is shutting down");
        api_req_resume(req);
    }
    /* Give MHD a moment to write the 503s, then stop it. */
    uv_timer_init(api->daemon->loop, &api->drain_timer);
    api->drain_timer.data = api;
    uv_timer_start(&api->drain_timer, drain_timer_cb, 200, 0);
}
