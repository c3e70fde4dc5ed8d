/*
 * The access handler: the life of a request from its first MHD callback
 * (route, limits, body mode) through its body (buffered JSON or a stream)
 * to the handler, suspension while a job runs, the reply, and the
 * completion (request log, metrics, free). Loop thread only.
 */
#include "api/api.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"
#include "api/metrics.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/log.h"
#include "jsonutil/jsonutil.h"
#include "daemon/daemon.h"

/* Headers-phase timeout for new connections. */
#define HEADER_TIMEOUT_S 10

/* How often uploads in progress are checked for a client that hung up. */
#define PEER_SWEEP_MS 500

struct api {
    struct daemon *daemon;
    struct http_server *http;
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

const char *
api_req_param(const struct api_req *req, const char *name)
{
    return route_param(&req->match, name);
}

int
api_req_body_json(const struct api_req *req, bool allow_empty, json_object **out, struct err *err)
{
    int ret =
        jsonutil_parse_object(req->body ? req->body : "", req->body_len, allow_empty, out, err);
    return ret < 0 ? err_wrap(err, "request body") : 0;
}

const char *
api_req_query(const struct api_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

int
api_req_query_seconds(const struct api_req *req, const char *name, double max, int64_t *ms,
                      struct err *err)
{
    const char *t = api_req_query(req, name);
    if (!t)
        return 0;
    char *end = NULL;
    errno = 0;
    double v = strtod(t, &end);
    if (end == t || *end || errno == ERANGE || !isfinite(v) || v < 0 || v > max)
        return err_set(err, EINVAL, "query \"%s\": %.40s is not a number of seconds (0 to %.0f)",
                       name, t, max);
    *ms = (int64_t)(v * 1000.0);
    return 1;
}

int
api_req_query_offset(const struct api_req *req, const char *name, int64_t *out, struct err *err)
{
    const char *t = api_req_query(req, name);
    if (!t)
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (end == t || *end || v < 0 || t[0] == '-' || t[0] == '+' || t[0] == ' ')
        return err_set(err, EINVAL, "query \"%s\": %.40s is not a byte offset", name, t);
    if (errno == ERANGE)
        return err_set(err, EINVAL, "query \"%s\": %.40s is out of range (at most %lld)", name, t,
                       (long long)INT64_MAX);
    *out = v;
    return 1;
}

bool
api_req_query_flag(const struct api_req *req, const char *name, bool dflt)
{
    const char *v = api_req_query(req, name);
    if (!v)
        return dflt;
    return strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

const char *
api_req_header(const struct api_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

void
api_req_weak_ref(struct api_req *req, struct api_req **ref)
{
    req->weak_ref = ref;
    *ref = req;
}

int
api_req_run_job(struct api_req *req, struct api_req **weak, const char *name, job_work_fn work,
                job_done_fn done, void *ctx)
{
    api_req_weak_ref(req, weak);
    int rc = job_submit(req->api->daemon->jobs, name, work, done, ctx);
    if (rc < 0) {
        req->weak_ref = NULL;
        *weak = NULL;
        api_reply_fail(req, ECANCELED, "cannot start the job %s: %s", name, strerror(-rc));
        return rc;
    }
    api_req_suspend(req);
    return 0;
}

void
api_req_wait_call(struct api_req *req, struct svc_call *call)
{
    req->call = call;
    api_req_suspend(req);
}

void
api_req_call_done(struct api_req *req)
{
    req->call = NULL;
}

void
api_req_wait_or_fail(struct api_req *req, int rc, struct svc_call *call, const struct err *err)
{
    if (rc < 0)
        api_reply_err(req, err);
    else
        api_req_wait_call(req, call);
}

bool
api_req_call_failed(struct api_req *req, const struct err *err)
{
    api_req_call_done(req);
    if (!err)
        return false;
    api_reply_err_resume(req, err);
    return true;
}

void
api_reply_204_cb(void *arg, const struct err *err)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    api_reply_text(req, 204, "application/json", "", 0);
    api_req_resume(req);
}

void
api_req_suspend(struct api_req *req)
{
    if (req->suspended)
        return;
    MHD_suspend_connection(req->conn);
    req->suspended = true;
    struct api *api = req->api;
    req->susp_prev = NULL;
    req->susp_next = api->suspended;
    if (api->suspended)
        api->suspended->susp_prev = req;
    api->suspended = req;
}

void
api_req_resume(struct api_req *req)
{
    if (!req->suspended)
        return;
    struct api *api = req->api;
    if (req->susp_prev)
        req->susp_prev->susp_next = req->susp_next;
    else
        api->suspended = req->susp_next;
    if (req->susp_next)
        req->susp_next->susp_prev = req->susp_prev;
    req->susp_prev = req->susp_next = NULL;
    req->suspended = false;
    MHD_resume_connection(req->conn);
    if (api->http)
        http_server_resumed(api->http, req->conn);
}

static enum MHD_Result
add_header_size_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    size_t *total = cls;
    *total += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
    return MHD_YES;
}

static size_t
headers_size(struct MHD_Connection *conn)
{
    size_t total = 0;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, add_header_size_cb, &total);
    return total;
}

/* Queues the reply the handler prepared, if there is one. */
static enum MHD_Result
queue_reply(struct api_req *req)
{
    if (!req->response)
        return MHD_YES;
    struct MHD_Response *resp = req->response;
    req->response = NULL;
    enum MHD_Result r = MHD_queue_response(req->conn, req->status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* Sets up a request on its first callback; may reply at once. */
static void
begin_request(struct api_req *req, const char *url)
{
    struct api *api = req->api;
    http_server_headers_done(api->http, req->conn);

    size_t uri_len = strlen(req->raw_uri ? req->raw_uri : url);
    if (uri_len > API_URI_MAX) {
        api_reply_error(req, 414, "uri_too_long",
                        "request target is %zu bytes, over the limit of %d", uri_len, API_URI_MAX);
        return;
    }
    size_t hs = headers_size(req->conn);
    if (hs > API_HEADERS_MAX) {
        api_reply_error(req, 431, "headers_too_large",
                        "request headers are %zu bytes, over the limit of %d", hs, API_HEADERS_MAX);
        return;
    }
    if (api->shutting_down) {
        api_reply_fail(req, ECANCELED, "the daemon is shutting down");
        return;
    }

    char allow[128];
    enum route_result rr = router_match(api_routes, api_routes_count, req->method, req->path,
                                        &req->match, allow, sizeof(allow));
    switch (rr) {
    case ROUTE_NOT_FOUND:
        api_reply_fail(req, ENOENT, "no route for %s", req->path);
        return;
    case ROUTE_BAD_PATH:
        api_reply_fail(req, EINVAL,
                       "path %s: a parameter is empty, too long or badly percent-encoded",
                       req->path);
        return;
    case ROUTE_METHOD_NOT_ALLOWED: {
        api_reply_error(req, 405, "method_not_allowed", "%s is not allowed on %s (allowed: %s)",
                        req->method, req->path, allow);
        if (req->response)
            MHD_add_response_header(req->response, MHD_HTTP_HEADER_ALLOW, allow);
        return;
    }
    case ROUTE_FOUND:
        break;
    }
    const struct route *route = req->match.route;
    req->body_mode = route->begin ? route->begin(req) : route->body;
    if (req->response)
        return;
    if (req->body_mode == BODY_JSON) {
        const char *cl = api_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > API_JSON_BODY_MAX)
            api_reply_error(req, 413, "payload_too_large",
                            "request body of %s bytes is over the limit of %d bytes for JSON", cl,
                            API_JSON_BODY_MAX);
    }
}

/* Takes a piece of a buffered body; returns false on allocation failure. */
static bool
append_body(struct api_req *req, const char *data, size_t len)
{
    if (req->body_too_large)
        return true;
    size_t limit = req->body_mode == BODY_JSON ? API_JSON_BODY_MAX : 0;
    if (req->body_len + len > limit) {
        req->body_too_large = true;
        free(req->body);
        req->body = NULL;
        req->body_len = req->body_cap = 0;
        return true;
    }
    if (req->body_len + len + 1 > req->body_cap) {
        size_t ncap = req->body_cap ? req->body_cap : 4096;
        while (ncap < req->body_len + len + 1)
            ncap *= 2;
        char *n = realloc(req->body, ncap);
        if (!n)
            return false;
        req->body = n;
        req->body_cap = ncap;
    }
    memcpy(req->body + req->body_len, data, len);
    req->body_len += len;
    req->body[req->body_len] = '\0';
    return true;
}

static void
dispatch(struct api_req *req)
{
    req->dispatched = true;
    if (req->body_too_large) {
        if (req->body_mode == BODY_NONE)
            api_reply_fail(req, EINVAL, "%s %s takes no request body", req->method,
                           req->match.route->pattern);
        else
            api_reply_error(req, 413, "payload_too_large",
                            "request body is over the limit of %d bytes for JSON",
                            API_JSON_BODY_MAX);
        return;
    }
    req->match.route->handler(req);
}

static enum MHD_Result
access_cb(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
          const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    struct api *api = cls;
    struct api_req *req = *con_cls;
    if (!req) {
        /* No URI log call happened (it always does; be safe anyway). */
        req = calloc(1, sizeof(*req));
        if (!req)
            return MHD_NO;
        *con_cls = req;
    }
    if (!req->started) {
        req->started = true;
        req->api = api;
        req->conn = conn;
        req->live_next = api->live;
        if (api->live)
            api->live->live_prev = req;
        api->live = req;
        if (!req->start_ns)
            req->start_ns = uv_hrtime();
        snprintf(req->method, sizeof(req->method), "%s", method);
        /* Route on the raw path: MHD's decoded url would turn %2F into a
         * separator and let %00 cut the path short. */
        const char *raw = req->raw_uri ? req->raw_uri : url;
        size_t plen = strcspn(raw, "?#");
        req->path = strndup(raw, plen);
        if (!req->path)
            return MHD_NO;
        begin_request(req, url);
        return queue_reply(req);
    }
    if (*upload_data_size > 0) {
        if (req->response) {
            /* Answered before the body ended (an upload that failed
             * early): read and drop the rest; the reply goes at the end. */
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (req->dispatched && req->body_mode != BODY_STREAM) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (req->body_mode == BODY_STREAM) {
            if (!req->dispatched)
                dispatch(req); /* the route's stream_data takes the pieces */
            if (req->response || !req->stream_data) {
                *upload_data_size = 0;
                return MHD_YES;
            }
            size_t took = req->stream_data(req, upload_data, *upload_data_size);
            *upload_data_size -= took;
            req->body_received += took;
            return MHD_YES;
        }
        if (req->body_mode == BODY_NONE) {
            req->body_too_large = true; /* any body at all is refused below */
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (!append_body(req, upload_data, *upload_data_size))
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (req->response)
        return queue_reply(req);

    /* The body is complete. */
    if (!req->dispatched)
        dispatch(req);
    if (req->body_mode == BODY_STREAM && req->stream_data && !req->body_ended && !req->response &&
        !req->suspended) {
        req->body_ended = true;
        req->stream_data(req, NULL, 0);
    }
    if (!req->response && !req->suspended) {
        /* A handler must reply or suspend; anything else is a bug, and the
         * client still deserves an answer rather than a hang. */
        log_error("%s %s: handler neither replied nor suspended", req->method, req->path);
        api_reply_fail(req, EIO, "the handler did not answer");
    }
    return queue_reply(req);
}

static void
completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    struct api *api = cls;
    struct api_req *req = *con_cls;
    if (!req)
        return;
    *con_cls = NULL;
    if (!req->started) {
        /* MHD refused the request before our handler saw it. */
        free(req->raw_uri);
        free(req);
        return;
    }
    double seconds = (double)(uv_hrtime() - req->start_ns) / 1e9;
    unsigned status = req->status ? req->status : 499; /* client went away unanswered */
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && req->status)
        log_debug("%s %s: connection ended before the reply was complete (%d)", req->method,
                  req->path, (int)toe);
    const char *raw = req->raw_uri ? req->raw_uri : "";
    const char *q = strchr(raw, '?');
    struct log_req lr = {.method = req->method,
                         .path = req->path,
                         .query = q && q[1] ? q + 1 : NULL,
                         .status = status,
                         .duration_ms = seconds * 1000.0,
                         .code = req->err_code[0] ? req->err_code : NULL,
                         .error = req->err_msg};
    log_request(&lr);
    metrics_observe_request(api->metrics, req->method,
                            req->match.pattern ? req->match.pattern : "unmatched", status, seconds);
    if (req->suspended) {
        /* MHD does not complete suspended connections; be safe anyway. */
        if (req->susp_prev)
            req->susp_prev->susp_next = req->susp_next;
        else
            api->suspended = req->susp_next;
        if (req->susp_next)
            req->susp_next->susp_prev = req->susp_prev;
    }
    if (req->live_prev)
        req->live_prev->live_next = req->live_next;
    else
        api->live = req->live_next;
    if (req->live_next)
        req->live_next->live_prev = req->live_prev;
    req->completed = true;
    if (req->stream)
        api_stream_detach(req->stream);
    req->stream = NULL;
    if (req->weak_ref)
        *req->weak_ref = NULL;
    if (req->call)
        svc_call_detach(req->call);
    if (req->ctx_free)
        req->ctx_free(req->ctx);
    if (req->response)
        MHD_destroy_response(req->response);
    free(req->body);
    free(req->path);
    free(req->raw_uri);
    free(req->err_msg);
    free(req);
}

/*
 * Called by MHD as soon as the request line is parsed, with the target
 * exactly as sent; its return value becomes the request's context, so
 * every request gets its api_req here.
 */
static void *
uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct api_req *req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->start_ns = uv_hrtime();
    req->raw_uri = strdup(uri);
    return req;
}

/*
 * A client that hangs up while its upload streams into a job: MHD notices
 * only when it next reads the socket, which it does not do while the
 * connection is suspended for want of room in the job's pipe (and, in
 * 0.9.75, may not do after a resume either, having dropped the socket's
 * edge-triggered event). So uploads in progress are checked here: a peer
 * that shut its side down or reset the connection has its request's job
 * aborted, and the request resumed so MHD closes it.
 */
static void
peer_sweep_cb(uv_timer_t *t)
{
    struct api *api = t->data;
    struct api_req *next;
    for (struct api_req *req = api->live; req; req = next) {
        next = req->live_next;
        if (!req->stream_data || req->body_ended || !req->on_shutdown)
            continue;
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info)
            continue;
        struct pollfd pfd = {.fd = info->connect_fd, .events = POLLRDHUP};
        if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            continue;
        /* A reset (POLLHUP/POLLERR) is final. A FIN is not always: a
         * client may shut its sending side after the whole body (a
         * half-close) while MHD still holds the tail of it for us. It means
         * the client is gone only when nothing is left to read, the body is
         * short of its Content-Length, and we are not the ones holding MHD
         * back (a suspended request waits for its job, not for the client),
         * and it stays so for two sweeps. */
        if (!(pfd.revents & (POLLHUP | POLLERR))) {
            int unread = 0;
            const char *cl = api_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
            bool complete = cl && strtoull(cl, NULL, 10) <= req->body_received;
            if (req->suspended || complete || ioctl(info->connect_fd, FIONREAD, &unread) < 0 ||
                unread > 0) {
                req->peer_eof_sweeps = 0;
                continue;
            }
            if (++req->peer_eof_sweeps < 2)
                continue;
        }
        log_debug("%s %s: the client hung up during the upload", req->method, req->path);
        void (*hook)(struct api_req *) = req->on_shutdown;
        req->on_shutdown = NULL; /* once */
        hook(req);
        if (req->suspended)
            api_req_resume(req);
    }
}

static void
lag_observe(void *ctx, double lag_ms)
{
    metrics_observe_lag(ctx, lag_ms);
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
        .max_connections = d->cfg->max_connections,
        .idle_timeout_s = d->cfg->connection_timeout_s,
        .header_timeout_s = HEADER_TIMEOUT_S < d->cfg->connection_timeout_s
                                ? HEADER_TIMEOUT_S
                                : d->cfg->connection_timeout_s,
        .access = access_cb,
        .completed = completed_cb,
        .uri_log = uri_log_cb,
        .cls = api,
    };
    if (http_server_start(d->loop, &opts, &api->http, err) < 0) {
        metrics_free(api->metrics);
        free(api);
        return -err->code;
    }
    d->lag.observe = lag_observe;
    d->lag.observe_ctx = api->metrics;
    uv_timer_init(d->loop, &api->peer_sweep);
    api->peer_sweep.data = api;
    uv_timer_start(&api->peer_sweep, peer_sweep_cb, PEER_SWEEP_MS, PEER_SWEEP_MS);
    *out = api;
    return 0;
}

unsigned
api_port(const struct api *api)
{
    return http_server_port(api->http);
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
    return http_server_connections(api->http);
}

void
api_begin_shutdown(struct api *api)
{
    api->shutting_down = true;
    http_server_quiesce(api->http);
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
}

static void
http_stopped_cb(void *arg)
{
    struct api *api = arg;
    void (*done)(void *) = api->done;
    void *done_arg = api->done_arg;
    api->daemon->lag.observe = NULL;
    metrics_free(api->metrics);
    free(api);
    if (done)
        done(done_arg);
}

static void
peer_sweep_closed_cb(uv_handle_t *h)
{
    struct api *api = h->data;
    http_server_stop(api->http, http_stopped_cb, api);
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
    if (api->suspended && api->drain_rounds++ < 100) {
        while (api->suspended) {
            struct api_req *req = api->suspended;
            if (req->stream)
                api_stream_end(req->stream);
            api_req_resume(req);
        }
        uv_timer_start(t, drain_timer_cb, 50, 0);
        return;
    }
    if (api->suspended)
        log_error("shutdown: connections still suspended after 5 s");
    uv_close((uv_handle_t *)t, drain_timer_closed_cb);
}

void
api_finish_shutdown(struct api *api, void (*done)(void *arg), void *arg)
{
    api->done = done;
    api->done_arg = arg;
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
