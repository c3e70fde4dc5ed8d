/*
 * One HTTP request from the first access-handler call until MHD's
 * completion callback: its route and parameters, its body, the reply it
 * will send, and whether it is suspended. Handlers reply with the
 * api_reply_* functions (the one place that writes replies and errors)
 * or suspend the request while a job runs and reply from the job's
 * completion. Loop thread only.
 */
#ifndef BERTH_API_REQUEST_H
#define BERTH_API_REQUEST_H

#include <json-c/json.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/router.h"
#include "common/err.h"
#include "daemon/job.h"
#include "daemon/svc.h"

/* JSON request bodies are capped: 413 past this. */
#define API_JSON_BODY_MAX (1024 * 1024)
/* Bytes of a refused upload's body read and dropped before the refusal is
 * sent anyway (the connection then closes under a client still sending). */
#define API_DRAIN_MAX (1024 * 1024)
/* Longest request target (path and query) taken: 414 past this. */
#define API_URI_MAX 8192
/* Largest total of request header names and values taken: 431 past this. */
#define API_HEADERS_MAX 16384
/* Most query parameters taken (MHD keeps a 64-byte record for each in the
 * connection's pool, so they are counted, and refused, before it parses
 * them): 414 past this. */
#define API_QUERY_PARAMS_MAX 64
/* A request body must arrive at this many bytes a second on average over
 * each window of API_BODY_RATE_WINDOW_S seconds (or all that is left of
 * it, when less), or the connection is closed. Time while the request is
 * suspended (berth has not taken the last piece yet) does not count. */
#define API_BODY_MIN_RATE 1024
#define API_BODY_RATE_WINDOW_S 10
/* The window slides in steps of this much counted time. */
#define API_BODY_RATE_MARK_MS 500
#define API_BODY_RATE_MARKS (API_BODY_RATE_WINDOW_S * 1000 / API_BODY_RATE_MARK_MS + 1)

struct api;
struct api_front;
struct bpipe;
struct http_server;

struct api_req {
    struct api *api;
    const struct api_front *front; /* whose routes, errors and headers (api/front.h) */
    struct http_server *http;      /* the server the connection came through */
    int front_version;             /* the Docker API: NN of the 1.NN asked for */
    struct MHD_Connection *conn;
    char method[16];
    char *raw_uri; /* the request target as sent (path and query, not decoded) */
    char *path;    /* the raw path, without the query string; the router decodes it */
    bool started;  /* the first access-handler call happened */
    struct route_match match;
    uint64_t start_ns;

    enum body_mode body_mode;
    char *body;
    size_t body_len, body_cap;
    bool body_too_large;
    uint64_t declared_len; /* a JSON body's Content-Length past the limit, for the 413 */

    /*
     * Streamed request bodies (BODY_STREAM): offered each piece of the
     * upload, returns how many bytes it took. Taking fewer than offered
     * means "no room now": it must have suspended the request and will
     * resume it when there is room, and the rest is offered again.
     * len == 0 means the body is complete.
     */
    size_t (*stream_data)(struct api_req *req, const char *data, size_t len);
    /* Bodies fed to a service's upload pipe (api/upload.h). */
    struct bpipe *upload;
    void (*upload_ended)(struct api_req *req);

    unsigned query_params; /* as counted in the raw target */

    /* The body's rate (API_BODY_MIN_RATE): from the first access call
     * until body_done, time counts while the request is not suspended. */
    bool body_done;          /* the body is complete, or will not be read */
    bool drain_body;         /* refused at its start: the reply waits for the body (see access.c) */
    uint64_t body_seen;      /* body bytes MHD handed over so far, any mode */
    uint64_t rate_since_ms;  /* loop time counted up to */
    uint64_t rate_active_ms; /* counted time so far */
    uint64_t rate_seen_then; /* body_seen at rate_since_ms */
    /* body_seen at every API_BODY_RATE_MARK_MS of counted time, a ring
     * just long enough for one window. */
    uint64_t rate_marks[API_BODY_RATE_MARKS];
    unsigned closed_status; /* for the log: why we closed the connection */

    bool dispatched;          /* the handler has run */
    bool body_ended;          /* stream_data was told the body is complete */
    uint64_t body_received;   /* streamed body bytes taken so far */
    unsigned peer_eof_sweeps; /* sweeps that saw the client's side shut */
    bool suspended;
    bool completed;                /* MHD reported the request complete */
    struct MHD_Response *response; /* queued at the next access call */
    struct api_stream *stream;     /* a streamed reply in progress (api/stream.h) */
    struct hijack *hijack;         /* the connection was hijacked (api/hijack.h) */
    char version[12];              /* "HTTP/1.1" */
    unsigned status;

    /* Handler-owned per-request state, freed with the request. */
    void *ctx;
    void (*ctx_free)(void *ctx);
    /* Called at shutdown, and when the client hangs up in the middle of
     * a streamed upload, so that whatever the request's job waits for (an
     * upload pipe, a follow stream) is aborted rather than waited on. */
    void (*on_shutdown)(struct api_req *req);
    /* The handler waits on a service with nothing to send for a long time
     * (a registry pull): the peer sweep also watches this request's socket
     * and calls on_shutdown when the client hangs up. */
    bool watch_hangup;

    /* A pointer elsewhere (a job's) that refers to this request and is
     * cleared when the request goes away, so a job whose client
     * disconnected finds NULL instead of freed memory. */
    struct api_req **weak_ref;
    /* The service call the request waits on, detached when it goes away. */
    struct svc_call *call;

    /* The error code and (for 5xx) message replied, for the request log. */
    char err_code[32];
    char *err_msg;

    struct api_req *susp_prev, *susp_next; /* suspended list, for shutdown */
    struct api_req *live_prev, *live_next; /* every request in flight */
};

/* Path parameter by name ("ref" in /v1/images/{ref}), or NULL. */
const char *api_req_param(const struct api_req *req, const char *name);
/* Parses the buffered body as a JSON object, strictly (jsonutil.h); errors
 * read "request body: ..." and are EINVAL. Blank gives {} when allow_empty. */
int api_req_body_json(const struct api_req *req, bool allow_empty, json_object **out,
                      struct err *err);
/* Query argument by name, or NULL. */
const char *api_req_query(const struct api_req *req, const char *name);
/*
 * Typed query arguments; each returns 1 when present, 0 when absent (out
 * untouched), or -EINVAL naming the argument and its value.
 * _seconds: a finite number from 0 to max, as milliseconds (nan, inf,
 * negative and trailing garbage are refused); _offset: a decimal byte
 * offset that fits int64 (an overflow is refused, not clamped); _count:
 * the same, where the value counts what (as "a number of lines" says it
 * in the error); _flag: present and not "0" or "false".
 */
int api_req_query_seconds(const struct api_req *req, const char *name, double max, int64_t *ms,
                          struct err *err);
int api_req_query_offset(const struct api_req *req, const char *name, int64_t *out,
                         struct err *err);
int api_req_query_count(const struct api_req *req, const char *name, const char *what, int64_t *out,
                        struct err *err);
bool api_req_query_flag(const struct api_req *req, const char *name, bool dflt);
/* Request header by name (case-insensitive), or NULL. */
const char *api_req_header(const struct api_req *req, const char *name);

/* Records ref as the one weak reference to req; *ref is set to req now
 * and to NULL when the request is freed. (For jobs of the API's own, the
 * debug routes; handlers call services, api_req_wait_call.) */
void api_req_weak_ref(struct api_req *req, struct api_req **ref);

/*
 * Runs a job for the request: records weak (a field of ctx) as the
 * request's weak reference, submits the job and suspends the request, to
 * be answered and resumed from done. Returns 0, or a negative errno after
 * answering 503; then done never runs and ctx is still the caller's to
 * free. Loop thread.
 */
int api_req_run_job(struct api_req *req, struct api_req **weak, const char *name, job_work_fn work,
                    job_done_fn done, void *ctx);

/*
 * Waits on a service call (daemon/svc.h): suspends the request and
 * detaches the call if the request goes away first. The call's callback
 * calls api_req_call_done, replies and resumes.
 */
void api_req_wait_call(struct api_req *req, struct svc_call *call);
void api_req_call_done(struct api_req *req);
/* After a service call returned rc: waits on call, or (rc < 0) replies err. */
void api_req_wait_or_fail(struct api_req *req, int rc, struct svc_call *call,
                          const struct err *err);
/* In a call's callback: ends the wait, and with err replies it, resumes
 * and returns true. */
bool api_req_call_failed(struct api_req *req, const struct err *err);
/* A callback for calls that answer nothing but success: 204 or the error. */
void api_reply_204_cb(void *arg, const struct err *err);

/* Suspends the connection until api_req_resume. */
void api_req_suspend(struct api_req *req);
/* Resumes a suspended request and schedules MHD to process it. */
void api_req_resume(struct api_req *req);

/* Replies with the status err->code maps to (api/err_status.c), then resumes. */
void api_reply_err_resume(struct api_req *req, const struct err *err);
/* Replies with the status code maps to and a formatted message. */
void api_reply_fail(struct api_req *req, int code, const char *fmt, ...) BERTH_FORMAT(3, 4);

/* Replies with a JSON document (takes the reference to body), then resumes. */
void api_reply_json_resume(struct api_req *req, unsigned status, json_object *body);
/* Replies with a JSON document (takes the reference to body). */
void api_reply_json(struct api_req *req, unsigned status, json_object *body);
/* Replies {"error": {"code": code, "message": ...}} with a status picked
 * by hand: only for protocol errors (405, 413, 414, 431); everything
 * else goes through an error code (api_reply_err, api_reply_fail). */
void api_reply_error(struct api_req *req, unsigned status, const char *code, const char *fmt, ...)
    BERTH_FORMAT(4, 5);
/* Replies with the HTTP status and code that err->code maps to. */
void api_reply_err(struct api_req *req, const struct err *err);
/* Replies with a prepared MHD response (takes it). */
void api_reply_response(struct api_req *req, unsigned status, struct MHD_Response *resp);
/* Replies with raw text of the given content type. */
void api_reply_text(struct api_req *req, unsigned status, const char *content_type,
                    const char *text, size_t len);

/* The HTTP status and error code string for an err code (the /v1 table). */
unsigned api_err_status(int code, const char **code_str);
/* The table's i-th status and code string, or 0 past its end (for the
 * test that keeps openapi.yaml's list of codes true). */
unsigned api_err_status_at(size_t i, const char **code_str);
/* The /v1 error body: {"error": {"code": code, "message": msg}}. */
json_object *api_v1_error_body(unsigned status, const char *code, const char *msg);

#endif
