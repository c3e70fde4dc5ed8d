/*
 * A service's tar stream as a request's reply (api/tar_download.h).
 * Loop thread.
 */
#include "api/tar_download.h"

#include <stdlib.h>

#include "api/request.h"
#include "api/stream.h"

struct api_tar_dl {
    struct api_req *req;
    struct volume_stream_out *op;
    enum volume_compression comp;
    struct api_tar_dl_hooks hooks;
    struct api_stream *stream;
    bool answered;
};

/* The response's source: the service's pipe straight into the send buffer. */
static size_t
dl_source(void *ctx, char *out, size_t max, int *end)
{
    struct api_tar_dl *d = ctx;
    if (!d->op) {
        *end = 2;
        return 0;
    }
    bool eof = false;
    size_t n = volume_stream_out_read(d->op, out, max, &eof);
    if (n > 0)
        return n;
    const struct err *err = NULL;
    bool done = volume_stream_out_result(d->op, &err);
    if (done && (eof || err) && volume_stream_out_buffered(d->op) == 0)
        *end = err ? 2 : 1;
    return 0;
}

void
api_tar_dl_notify(void *arg)
{
    struct api_tar_dl *d = arg;
    struct api_req *req = d->req;
    if (d->stream) {
        api_stream_kick(d->stream);
        return;
    }
    if (d->answered || !d->op)
        return;
    const struct err *err = NULL;
    bool done = volume_stream_out_result(d->op, &err);
    if (err) {
        d->answered = true;
        if (d->hooks.failed)
            d->hooks.failed(req, err);
        else
            api_reply_err_resume(req, err);
        return;
    }
    if (!volume_stream_out_ready(d->op) && !done)
        return;
    d->answered = true;
    d->stream = api_stream_start(req, 200, "application/x-tar");
    if (!d->stream) {
        volume_stream_out_detach(d->op);
        d->op = NULL;
        return;
    }
    if (req->response && d->comp != VOLUME_COMPRESS_NONE)
        MHD_add_response_header(req->response, MHD_HTTP_HEADER_CONTENT_ENCODING,
                                d->comp == VOLUME_COMPRESS_GZIP ? "gzip" : "zstd");
    if (req->response && d->hooks.started)
        d->hooks.started(req, d->op);
    api_stream_set_source(d->stream, dl_source, d);
}

static void
dl_reply_free(void *ctx)
{
    struct api_tar_dl *d = ctx;
    volume_stream_out_detach(d->op);
    api_stream_release(d->stream);
    free(d);
}

static void
dl_on_shutdown(struct api_req *req)
{
    struct api_tar_dl *d = req->ctx;
    if (d && d->op)
        volume_stream_out_cancel(d->op);
}

struct api_tar_dl *
api_tar_dl_new(struct api_req *req, enum volume_compression comp,
               const struct api_tar_dl_hooks *hooks)
{
    struct api_tar_dl *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->req = req;
    d->comp = comp;
    if (hooks)
        d->hooks = *hooks;
    return d;
}

void
api_tar_dl_wait(struct api_tar_dl *d, struct volume_stream_out *op)
{
    struct api_req *req = d->req;
    d->op = op;
    req->ctx = d;
    req->ctx_free = dl_reply_free;
    req->on_shutdown = dl_on_shutdown;
    api_req_suspend(req);
}

void
api_tar_dl_free(struct api_tar_dl *d)
{
    free(d);
}
