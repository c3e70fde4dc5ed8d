/*
 * GET /v1/containers/{handle}/processes/{id}/output: a process's stdout
 * and stderr together, in the order they were written, as raw bytes;
 * with ?timestamps=1 each line begins with the time it was written. The
 * query picks the streams (stdout, stderr), the lines (since, until,
 * tail) and follow. Parses, calls the log service (daemon/proc_logs.h),
 * and streams what it gives with back-pressure: the next batch is asked
 * for once the client took the last. Loop thread.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/handlers.h"
#include "api/logtime.h"
#include "api/request.h"
#include "api/stream.h"
#include "daemon/proc_logs.h"

struct logs_reply {
    struct api_req *req;
    struct api_stream *stream;
    struct proc_logs *l;
    bool timestamps;
};

static void
logs_reply_free(void *ctx)
{
    struct logs_reply *r = ctx;
    process_logs_close(r->l);
    api_stream_release(r->stream);
    free(r);
}

static void
logs_drained(void *ctx)
{
    struct logs_reply *r = ctx;
    if (r->l)
        process_logs_next(r->l);
}

static void
logs_data(void *arg, const struct proc_log_piece *p, size_t n)
{
    struct logs_reply *r = arg;
    if (n == 0) {
        api_stream_end(r->stream);
        process_logs_close(r->l);
        r->l = NULL;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (r->timestamps && p[i].line_start) {
            char ts[API_LOGTIME_MAX + 1];
            size_t len = api_logtime_format(p[i].time_ns, ts);
            ts[len++] = ' ';
            api_stream_write(r->stream, ts, len);
        }
        api_stream_write(r->stream, p[i].data, p[i].len);
    }
    /* The next batch when drained. */
}

static void
logs_opened(void *arg, const struct err *err, struct proc_logs *l)
{
    struct logs_reply *r = arg;
    struct api_req *req = r->req;
    if (api_req_call_failed(req, err))
        return;
    r->l = l;
    r->stream = api_stream_start(req, 200, "application/octet-stream");
    if (!r->stream) {
        api_req_resume(req);
        return; /* freed with the request */
    }
    api_stream_on_drained(r->stream, logs_drained, r);
    process_logs_next(l);
}

/* since, until and tail from the query, as the log service takes them. */
static int
logs_query(struct api_req *req, struct proc_logs_opts *o, struct err *err)
{
    *o = (struct proc_logs_opts){.out = api_req_query_flag(req, "stdout", true),
                                 .err = api_req_query_flag(req, "stderr", true),
                                 .tail = -1,
                                 .follow = api_req_query_flag(req, "follow", false)};
    const char *v;
    if ((v = api_req_query(req, "since")) && api_logtime_parse("since", v, &o->since_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "until")) && api_logtime_parse("until", v, &o->until_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "tail")) && strcmp(v, "all") != 0 &&
        api_req_query_offset(req, "tail", &o->tail, err) < 0)
        return -EINVAL;
    if (!o->out && !o->err)
        return err_set(err, EINVAL, "stdout=0 and stderr=0: at least one stream is needed");
    return 0;
}

void
processes_output(struct api_req *req)
{
    struct err err = {0};
    struct proc_logs_opts o;
    struct svc_call *call = NULL;
    struct logs_reply *r = calloc(1, sizeof(*r));
    if (!r) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    r->req = req;
    r->timestamps = api_req_query_flag(req, "timestamps", false);
    if (logs_query(req, &o, &err) < 0 ||
        process_logs_open(api_daemon(req->api), api_req_param(req, "handle"),
                          api_req_param(req, "id"), &o, logs_opened, logs_data, r, &call,
                          &err) < 0) {
        free(r);
        api_reply_err(req, &err);
        return;
    }
    req->ctx = r;
    req->ctx_free = logs_reply_free;
    api_req_wait_call(req, call);
}
