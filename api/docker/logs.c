/*
 * GET /containers/{id}/logs: the main process's output (its latest run)
 * as the engine gives it to a non-TTY container's readers, in the
 * multiplexed framing: one frame per line (or part of a long one), an
 * 8-byte header (1 stdout or 2 stderr, three zeros, the length
 * big-endian) and the bytes, with ?timestamps=1 the line's time first.
 * The lines, their order and times, since, until, tail and follow are the
 * log service's (daemon/proc_logs.h); this file parses and frames. The
 * next batch is asked for once the client took the last. Loop thread.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/logtime.h"
#include "api/request.h"
#include "api/stream.h"
#include "daemon/containers.h"
#include "daemon/proc_logs.h"

struct dlogs {
    struct api_req *req;
    struct api_stream *stream;
    struct proc_logs *l;
    bool timestamps;
};

static void
dlogs_free(void *ctx)
{
    struct dlogs *r = ctx;
    process_logs_close(r->l);
    api_stream_release(r->stream);
    free(r);
}

static void
dlogs_drained(void *ctx)
{
    struct dlogs *r = ctx;
    if (r->l)
        process_logs_next(r->l);
}

static void
dlogs_data(void *arg, const struct proc_log_piece *p, size_t n)
{
    struct dlogs *r = arg;
    if (n == 0) {
        api_stream_end(r->stream);
        process_logs_close(r->l);
        r->l = NULL;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char ts[API_LOGTIME_MAX + 1];
        size_t tlen = 0;
        if (r->timestamps && p[i].line_start) {
            tlen = api_logtime_format(p[i].time_ns, ts);
            ts[tlen++] = ' ';
        }
        size_t len = tlen + p[i].len;
        unsigned char h[8] = {p[i].stream == PROC_STDERR ? 2 : 1,
                              0,
                              0,
                              0,
                              (unsigned char)(len >> 24),
                              (unsigned char)(len >> 16),
                              (unsigned char)(len >> 8),
                              (unsigned char)len};
        api_stream_write(r->stream, h, sizeof(h));
        if (tlen)
            api_stream_write(r->stream, ts, tlen);
        api_stream_write(r->stream, p[i].data, p[i].len);
    }
}

static void
dlogs_opened(void *arg, const struct err *err, struct proc_logs *l)
{
    struct dlogs *r = arg;
    struct api_req *req = r->req;
    if (api_req_call_failed(req, err))
        return;
    r->l = l;
    r->stream = api_stream_start(req, 200, "application/vnd.docker.multiplexed-stream");
    if (!r->stream) {
        api_req_resume(req);
        return; /* freed with the request */
    }
    api_stream_on_drained(r->stream, dlogs_drained, r);
    process_logs_next(l);
}

/* The engine's query: since and until unix seconds ("0": none), tail N or "all". */
static int
dlogs_query(struct api_req *req, struct proc_logs_opts *o, struct err *err)
{
    *o = (struct proc_logs_opts){.out = docker_query_bool(req, "stdout", false),
                                 .err = docker_query_bool(req, "stderr", false),
                                 .tail = -1,
                                 .follow = docker_query_bool(req, "follow", false)};
    if (!o->out && !o->err)
        return err_set(err, EINVAL, "Bad parameters: you must choose at least one stream");
    const char *v;
    if ((v = api_req_query(req, "since")) && *v &&
        api_logtime_parse("since", v, &o->since_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "until")) && *v &&
        api_logtime_parse("until", v, &o->until_ns, err) < 0)
        return -EINVAL;
    if ((v = api_req_query(req, "tail")) && *v && strcmp(v, "all") != 0 &&
        docker_query_int(req, "tail", 0, INT64_MAX, &o->tail, err) < 0)
        return -EINVAL;
    return 0;
}

void
docker_container_logs(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    struct err err = {0};
    struct proc_logs_opts o;
    if (dlogs_query(req, &o, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    if (c->p->main && c->p->main->tty) {
        api_reply_fail(req, EINVAL, "logs of a TTY container are not supported by this host");
        return;
    }
    if (!c->main_proc) {
        /* Never started: nothing written yet. */
        api_reply_text(req, 200, "application/vnd.docker.multiplexed-stream", "", 0);
        return;
    }
    struct dlogs *r = calloc(1, sizeof(*r));
    if (!r) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    r->req = req;
    r->timestamps = docker_query_bool(req, "timestamps", false);
    struct svc_call *call = NULL;
    if (process_logs_open(api_daemon(req->api), c->p->handle, c->main_proc->id, &o, dlogs_opened,
                          dlogs_data, r, &call, &err) < 0) {
        free(r);
        api_reply_err(req, &err);
        return;
    }
    req->ctx = r;
    req->ctx_free = dlogs_free;
    api_req_wait_call(req, call);
}
