/*
 * The access handler: the life of a request from its first MHD callback
 * (route, limits, body mode) through its body (buffered JSON or a stream)
 * to the handler, suspension while a job runs, the reply, and the
 * completion (request log, metrics, free). Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_int.h"
#include "api/front.h"
#include "api/hijack.h"
#include "api/metrics.h"
#include "api/query.h"
#include "api/stream.h"
#include "common/log.h"
#include "common/os.h"
#include "daemon/daemon.h"

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
    http_server_headers_done(req->http, req->conn);
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
    const struct api_front *front = req->front;
    if (http_server_conn_reserved(req->http, req->conn) &&
        !(front->reserve_path && strcmp(req->method, MHD_HTTP_METHOD_GET) == 0 &&
          strcmp(req->path, front->reserve_path) == 0)) {
        api_reply_error(req, 503, "unavailable",
                        "the connection limit of %u is reached; past it only GET %s is served",
                        api->daemon->cfg->max_connections,
                        front->reserve_path ? front->reserve_path : "(nothing)");
        if (req->response)
            MHD_add_response_header(req->response, "Retry-After", "1");
        return;
    }
    if (front->rewrite) {
        front->rewrite(req);
        if (req->response)
            return;
    }

    char allow[128];
    enum route_result rr = router_match(front->routes, front->nroutes, req->method, req->path,
                                        &req->match, allow, sizeof(allow));
    if (rr != ROUTE_FOUND) {
        front->route_failed(req, rr, allow);
        return;
    }
    const struct route *route = req->match.route;
    struct err qerr = {0};
    if (front->strict_query && api_query_check(req, route, &qerr) < 0)
        api_reply_err(req, &qerr);
    else
        req->body_mode = route->begin ? route->begin(req) : route->body;
    if (req->response) {
        /* An upload its route refused at once (no such container, a
         * read-only target): the client is sending the body already, and
         * an answer sent now would be followed by a close under it, a
         * reset that loses the answer ("broken pipe" in the docker CLI).
         * The body is read and dropped first, up to API_DRAIN_MAX; a
         * client that waits for "100 Continue" has sent nothing yet. */
        const char *expect = api_req_header(req, MHD_HTTP_HEADER_EXPECT);
        req->drain_body = route->begin && !(expect && strcasecmp(expect, "100-continue") == 0);
        return;
    }
    if (req->body_mode == BODY_JSON) {
        const char *cl = api_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t len = cl ? strtoull(cl, NULL, 10) : 0;
        if (len <= API_JSON_BODY_MAX)
            return;
        const char *expect = api_req_header(req, MHD_HTTP_HEADER_EXPECT);
        if (expect && strcasecmp(expect, "100-continue") == 0) {
            /* The client waits for "100 Continue" and has sent nothing. */
            api_reply_error(req, 413, "payload_too_large",
                            "request body of %s bytes is over the limit of %d bytes for JSON", cl,
                            API_JSON_BODY_MAX);
            return;
        }
        /* The client is sending the body already. A reply queued now makes
         * MHD stop reading and close the connection once it is sent, with
         * the unread body in the socket: the kernel answers with a reset
         * that loses the 413 at the client, or fails its send first. The
         * body is read and dropped (append_body keeps nothing past the
         * limit, as for a chunked one), and dispatch() refuses it. */
        req->body_too_large = true;
        req->declared_len = len;
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
        else if (req->declared_len)
            api_reply_error(req, 413, "payload_too_large",
                            "request body of %llu bytes is over the limit of %d bytes for JSON",
                            (unsigned long long)req->declared_len, API_JSON_BODY_MAX);
        else
            api_reply_error(req, 413, "payload_too_large",
                            "request body is over the limit of %d bytes for JSON",
                            API_JSON_BODY_MAX);
        return;
    }
    req->match.route->handler(req);
}

void
api_v1_route_failed(struct api_req *req, enum route_result rr, const char *allow)
{
    switch (rr) {
    case ROUTE_NOT_FOUND:
        api_reply_fail(req, ENOENT, "no route for %s", req->path);
        return;
    case ROUTE_BAD_PATH:
        api_reply_fail(req, EINVAL,
                       "path %s: a parameter is empty, too long or badly percent-encoded",
                       req->path);
        return;
    case ROUTE_METHOD_NOT_ALLOWED:
        api_reply_error(req, 405, "method_not_allowed", "%s is not allowed on %s (allowed: %s)",
                        req->method, req->path, allow);
        if (req->response)
            MHD_add_response_header(req->response, MHD_HTTP_HEADER_ALLOW, allow);
        return;
    case ROUTE_FOUND:
        return;
    }
}

enum MHD_Result
api_access_cb(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
              const char *version, const char *upload_data, size_t *upload_data_size,
              void **con_cls)
{
    struct api_listener *lis = cls;
    struct api *api = lis->api;
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
        req->front = lis->front;
        req->http = lis->http;
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
        if (req->drain_body)
            return MHD_YES; /* the answer after the body */
        /* An answer this early ends the request: MHD reads no body. */
        if (req->response)
            req->body_done = true;
        return queue_reply(req);
    }
    req->body_seen += *upload_data_size;
    if (*upload_data_size > 0) {
        if (req->response || req->drain_body) {
            /* Answered before the body ended (an upload that failed
             * early): read and drop the rest; the reply goes at the end,
             * or, for a refusal at the start, past API_DRAIN_MAX. */
            *upload_data_size = 0;
            if (req->drain_body && req->body_seen > API_DRAIN_MAX) {
                req->body_done = true;
                return queue_reply(req);
            }
            return MHD_YES;
        }
        if (req->body_mode == BODY_SNIFF) {
            req->body_mode = req->match.route->sniff(req, upload_data, *upload_data_size);
            if (req->response) {
                /* Refused on the first piece: drop the rest, answer at
                 * its end (or past API_DRAIN_MAX). */
                req->drain_body = true;
                *upload_data_size = 0;
                return MHD_YES;
            }
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
    if (req->response || req->drain_body)
        return queue_reply(req); /* a refusal's answer may have gone at API_DRAIN_MAX */

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

void
api_completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
                 enum MHD_RequestTerminationCode toe)
{
    struct api_listener *lis = cls;
    struct api *api = lis->api;
    struct api_req *req = *con_cls;
    if (!req)
        return;
    *con_cls = NULL;
    if (lis->http)
        http_server_request_done(lis->http, conn);
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
void *
api_uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct api_listener *lis = cls;
    if (lis->http)
        http_server_request_begins(lis->http, conn);
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
