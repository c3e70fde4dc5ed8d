/*
 * The access handler: the life of a request from its first MHD callback
 * (route, limits, body mode) through its body (buffered JSON or a stream)
 * to the handler, suspension while a job runs, the reply, and the
 * completion (request log, metrics, free). Loop thread only.
 */
#include "api/api.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/hijack.h"
#include "api/http.h"
#include "api/metrics.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/log.h"
#include "common/os.h"
#include "common/sock.h"
#include "jsonutil/jsonutil.h"
#include "daemon/daemon.h"

/* Deadline for the request line and headers of every request. */
#define HEADER_TIMEOUT_S 10

/* How often uploads in progress are checked for a client that hung up,
 * and request bodies for their rate. */
#define PEER_SWEEP_MS 500

struct api {
    struct daemon *daemon;
    struct http_server *http;
    struct metrics *metrics;
    struct api_req *suspended; /* list of suspended requests */
    struct api_req *live;      /* every request in flight */
    struct hijack_set *hijacks;
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
api_body_json(const char *body, size_t len, bool allow_empty, json_object **out, struct err *err)
{
    int ret = jsonutil_parse_object(body ? body : "", len, allow_empty, out, err);
    return ret < 0 ? err_wrap(err, "request body") : 0;
}

int
api_req_body_json(const struct api_req *req, bool allow_empty, json_object **out, struct err *err)
{
    return api_body_json(req->body, req->body_len, allow_empty, out, err);
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

/*
 * Counts the time since rate_since_ms as time the request's body was
 * awaited from its client, and marks body_seen at every
 * API_BODY_RATE_MARK_MS of that time. Bytes that came during the span are
 * taken to have come at its end (the lenient reading).
 */
static void
rate_account(struct api_req *req, uint64_t now)
{
    uint64_t from = req->rate_active_ms;
    uint64_t to = from + (now - req->rate_since_ms);
    for (uint64_t m = from / API_BODY_RATE_MARK_MS + 1; m <= to / API_BODY_RATE_MARK_MS; m++)
        req->rate_marks[m % API_BODY_RATE_MARKS] = req->rate_seen_then;
    req->rate_active_ms = to;
    req->rate_since_ms = now;
    req->rate_seen_then = req->body_seen;
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
    /* The body's rate clock stops: berth, not the client, is the slow one. */
    if (req->started && !req->body_done)
        rate_account(req, uv_now(api->daemon->loop));
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
    req->rate_since_ms = uv_now(api->daemon->loop);
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

/* What the request's headers say about the framing of its body. */
struct framing {
    unsigned n_cl, n_te;
    const char *cl[2]; /* the first two Content-Length values */
    const char *te;    /* the first Transfer-Encoding value */
    const char *bad_name;
};

static enum MHD_Result
framing_header_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct framing *f = cls;
    /* MHD keeps a name as sent up to the colon: "Content-Length " is not
     * Content-Length to it, but may be to a proxy in front of us. */
    if (!f->bad_name && key[strcspn(key, " \t")] != '\0')
        f->bad_name = key;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->n_cl < 2)
            f->cl[f->n_cl] = value ? value : "";
        f->n_cl++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (!f->n_te)
            f->te = value ? value : "";
        f->n_te++;
    }
    return MHD_YES;
}

/*
 * Refuses (400) the request shapes whose body's length two parsers could
 * read differently, the stuff of request smuggling: RFC 9112 section 6.3
 * has a server reject them and close the connection (an answer before the
 * body makes MHD close it). MHD itself frames by Transfer-Encoding when
 * there is one, whatever its value, and else by the first Content-Length.
 * Returns whether it answered.
 */
static bool
refuse_bad_framing(struct api_req *req, const char *version)
{
    struct framing f = {0};
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, framing_header_cb, &f);
    if (f.bad_name) {
        api_reply_error(req, 400, "bad_request",
                        "header name \"%.64s\" has whitespace in it (before the colon)",
                        f.bad_name);
    } else if (f.n_cl > 1) {
        api_reply_error(req, 400, "bad_request",
                        "Content-Length is given %u times (%.32s, %.32s): send exactly one", f.n_cl,
                        f.cl[0], f.cl[1]);
    } else if (f.n_te && f.n_cl) {
        api_reply_error(req, 400, "bad_request",
                        "both Transfer-Encoding (%.64s) and Content-Length (%.32s) are given: "
                        "send one of them",
                        f.te, f.cl[0]);
    } else if (f.n_te > 1) {
        api_reply_error(req, 400, "bad_request",
                        "Transfer-Encoding is given %u times: send it once, as chunked", f.n_te);
    } else if (f.n_te && strcasecmp(f.te, "chunked") != 0) {
        api_reply_error(req, 400, "bad_request",
                        "Transfer-Encoding %.64s is not supported: only chunked is", f.te);
    } else if (f.n_te && strcmp(version, MHD_HTTP_VERSION_1_0) == 0) {
        api_reply_error(req, 400, "bad_request",
                        "Transfer-Encoding is not allowed in an HTTP/1.0 request");
    } else {
        return false;
    }
    return true;
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
begin_request(struct api_req *req, const char *url, const char *version)
{
    struct api *api = req->api;
    http_server_headers_done(api->http, req->conn);
    req->rate_since_ms = uv_now(api->daemon->loop);

    size_t uri_len = strlen(req->raw_uri ? req->raw_uri : url);
    if (uri_len > API_URI_MAX) {
        api_reply_error(req, 414, "uri_too_long",
                        "request target is %zu bytes, over the limit of %d", uri_len, API_URI_MAX);
        return;
    }
    if (req->query_params > API_QUERY_PARAMS_MAX) {
        api_reply_error(req, 414, "uri_too_long",
                        "request target has %u query parameters, over the limit of %d",
                        req->query_params, API_QUERY_PARAMS_MAX);
        return;
    }
    size_t hs = headers_size(req->conn);
    if (hs > API_HEADERS_MAX) {
        api_reply_error(req, 431, "headers_too_large",
                        "request headers are %zu bytes, over the limit of %d", hs, API_HEADERS_MAX);
        return;
    }
    if (refuse_bad_framing(req, version))
        return;
    if (api->shutting_down) {
        api_reply_fail(req, ECANCELED, "the daemon is shutting down");
        return;
    }
    if (http_server_conn_reserved(api->http, req->conn) &&
        !(strcmp(req->method, MHD_HTTP_METHOD_GET) == 0 && strcmp(req->path, "/v1/health") == 0)) {
        api_reply_error(req, 503, "unavailable",
                        "the connection limit of %u is reached; past it only GET /v1/health is "
                        "served",
                        api->daemon->cfg->max_connections);
        if (req->response)
            MHD_add_response_header(req->response, "Retry-After", "1");
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
        snprintf(req->version, sizeof(req->version), "%s", version);
        /* Route on the raw path: MHD's decoded url would turn %2F into a
         * separator and let %00 cut the path short. */
        const char *raw = req->raw_uri ? req->raw_uri : url;
        size_t plen = strcspn(raw, "?#");
        req->path = strndup(raw, plen);
        if (!req->path)
            return MHD_NO;
        begin_request(req, url, version);
        /* An answer this early ends the request: MHD reads no body. */
        if (req->response)
            req->body_done = true;
        return queue_reply(req);
    }
    req->body_seen += *upload_data_size;
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
            /* What is left is offered again: count it then. */
            req->body_seen -= *upload_data_size;
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
    req->body_done = true;
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
    if (api->http)
        http_server_request_done(api->http, conn);
    if (!req->started) {
        /* MHD refused the request before our handler saw it. */
        free(req->raw_uri);
        free(req);
        return;
    }
    double seconds = (double)(uv_hrtime() - req->start_ns) / 1e9;
    /* 499: the client went away unanswered. */
    unsigned status = req->closed_status ? req->closed_status : req->status ? req->status : 499;
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
    if (req->hijack)
        hijack_detach(req->hijack);
    req->hijack = NULL;
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

/* Query parameters as MHD splits them: one more than there are '&'. */
static unsigned
query_params_count(const char *query)
{
    if (!*query)
        return 0;
    unsigned n = 1;
    for (const char *p = query; (p = strchr(p, '&')); p++)
        n++;
    return n;
}

/*
 * Called by MHD as soon as the request line is parsed, with the target
 * exactly as sent; its return value becomes the request's context, so
 * every request gets its api_req here.
 *
 * It is also the one moment before MHD parses the query: MHD (0.9.75)
 * files every parameter as a 64-byte record in the connection's memory
 * pool, so a target of "a&a&a..." costs 32 times its length there, and
 * when the pool runs out in the middle MHD neither answers nor closes
 * the connection. A query past our limits is therefore cut off here, in
 * MHD's own copy of the request line (which MHD splits at the first '?'
 * right after this call), so that MHD parses none of it; the request is
 * answered 414 from the raw target kept in the api_req.
 */
static void *
uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct api_req *req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->start_ns = uv_hrtime();
    if (!uri)
        return req;
    req->raw_uri = strdup(uri);
    char *query = strchr((char *)uri, '?'); /* MHD's buffer, writable */
    if (query) {
        req->query_params = query_params_count(query + 1);
        if (req->query_params > API_QUERY_PARAMS_MAX || strlen(uri) > API_URI_MAX)
            query[1] = '\0';
    }
    return req;
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
    rate_account(req, now);
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
    http_server_conn_close(api->http, req->conn);
}

/*
 * A client that hangs up while its upload streams into a job: MHD notices
 * only when it next reads the socket, which it does not do while the
 * connection is suspended for want of room in the job's pipe (and, in
 * 0.9.75, may not do after a resume either, having dropped the socket's
 * edge-triggered event). So uploads in progress are checked here: a peer
 * that shut its side down or reset the connection has its request's job
 * aborted, and the request resumed so MHD closes it. Every request whose
 * body is still coming is also held to the minimum rate here.
 */
static void
peer_sweep_cb(uv_timer_t *t)
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
        if (!req->stream_data || req->body_ended || !req->on_shutdown)
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
            if (req->suspended || complete ||
                sock_unread((intptr_t)info->connect_fd, &unread) < 0 || unread > 0) {
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
    /* Without it, only hijacking fails (ENOMEM). */
    api->hijacks = hijack_set_new(d->loop, api->http);
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

struct hijack_set *
api_hijacks(const struct api *api)
{
    return api->hijacks;
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
    /* Hijacked connections are asked to finish, and closed gracefully. */
    hijack_set_begin_shutdown(api->hijacks);
}

static void
http_stopped_cb(void *arg)
{
    struct api *api = arg;
    void (*done)(void *) = api->done;
    void *done_arg = api->done_arg;
    api->daemon->lag.observe = NULL;
    hijack_set_free(api->hijacks);
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
    /* Hijacks closed by api_finish_shutdown may still be closing handles. */
    if ((api->suspended || hijack_set_count(api->hijacks)) && api->drain_rounds++ < 100) {
        while (api->suspended) {
            struct api_req *req = api->suspended;
            if (req->stream)
                api_stream_end(req->stream);
            api_req_resume(req);
        }
        uv_timer_start(t, drain_timer_cb, 50, 0);
        return;
    }
    if (api->suspended || hijack_set_count(api->hijacks))
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
    hijack_set_abort(api->hijacks);
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
