/*
 * What a handler calls on its request (api/request.h): its route
 * parameters, query, headers and JSON body, and its suspension while a
 * job or a service call runs, with the resume that follows. Loop thread
 * only.
 */
#include "api/request.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "jsonutil/jsonutil.h"
#include "daemon/daemon.h"

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
    return api_req_query_count(req, name, "a byte offset", out, err);
}

int
api_req_query_count(const struct api_req *req, const char *name, const char *what, int64_t *out,
                    struct err *err)
{
    const char *t = api_req_query(req, name);
    if (!t)
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (end == t || *end || v < 0 || t[0] == '-' || t[0] == '+' || t[0] == ' ')
        return err_set(err, EINVAL, "query \"%s\": %.40s is not %s", name, t, what);
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
    /* The body's rate clock stops: berth, not the client, is the slow one. */
    if (req->started && !req->body_done)
        api_req_rate_account(req, uv_now(api->daemon->loop));
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
    if (req->http)
        http_server_resumed(req->http, req->conn);
}
