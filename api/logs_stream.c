/*
 * A process's log streamed as a request's reply (api/logs_stream.h).
 * Loop thread.
 */
#include "api/logs_stream.h"

#include <stdlib.h>

#include "api/api.h"
#include "api/logtime.h"
#include "api/stream.h"

struct logs_reply {
    struct api_req *req;
    struct api_stream *stream;
    struct proc_logs *l;
    bool timestamps;
    enum api_logs_framing framing;
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

/* One piece: its frame header (Docker), its line's time, its bytes. */
static void
piece_write(struct logs_reply *r, const struct proc_log_piece *p)
{
    char ts[API_LOGTIME_MAX + 1];
    size_t tlen = 0;
    if (r->timestamps && p->line_start) {
        tlen = api_logtime_format(p->time_ns, ts);
        ts[tlen++] = ' ';
    }
    if (r->framing == API_LOGS_DOCKER) {
        size_t len = tlen + p->len;
        unsigned char h[8] = {p->stream == PROC_STDERR ? 2 : 1,
                              0,
                              0,
                              0,
                              (unsigned char)(len >> 24),
                              (unsigned char)(len >> 16),
                              (unsigned char)(len >> 8),
                              (unsigned char)len};
        api_stream_write(r->stream, h, sizeof(h));
    }
    if (tlen)
        api_stream_write(r->stream, ts, tlen);
    api_stream_write(r->stream, p->data, p->len);
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
    for (size_t i = 0; i < n; i++)
        piece_write(r, &p[i]);
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
    r->stream =
        api_stream_start(req, 200,
                         r->framing == API_LOGS_DOCKER ? "application/vnd.docker.multiplexed-stream"
                                                       : "application/octet-stream");
    if (!r->stream) {
        api_req_resume(req);
        return; /* freed with the request */
    }
    api_stream_on_drained(r->stream, logs_drained, r);
    process_logs_next(l);
}

int
api_logs_stream(struct api_req *req, const char *handle, const char *id,
                const struct proc_logs_opts *o, bool timestamps, enum api_logs_framing framing,
                struct err *err)
{
    struct logs_reply *r = calloc(1, sizeof(*r));
    if (!r)
        return err_set(err, ENOMEM, "out of memory");
    r->req = req;
    r->timestamps = timestamps;
    r->framing = framing;
    struct svc_call *call = NULL;
    int ret = process_logs_open(api_daemon(req->api), handle, id, o, logs_opened, logs_data, r,
                                &call, err);
    if (ret < 0) {
        free(r);
        return ret;
    }
    req->ctx = r;
    req->ctx_free = logs_reply_free;
    api_req_wait_call(req, call);
    return 0;
}
