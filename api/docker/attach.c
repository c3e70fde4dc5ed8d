/*
 * POST /containers/{id}/attach: the connection is hijacked (api/hijack.h;
 * 101 with Upgrade: tcp, or the engine's 200 take-over without it) and
 * carries the main process's output out, in the multiplexed framing, and
 * the client's bytes in, to its stdin; the client's write half-close
 * closes that stdin. The output, its waiting for the next run (docker run
 * attaches before it starts) and the stdin are the attach service's
 * (daemon/ctr_attach.h); this file parses, frames and moves bytes, one
 * batch of output queued at a time and one stdin write in flight. Loop
 * thread.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/hijack.h"
#include "api/request.h"
#include "daemon/containers.h"
#include "daemon/ctr_attach.h"

#define FRAME_HEADER 8

struct dattach {
    struct hijack *h;
    struct ctr_attach *a;
    bool in;         /* stdin asked for */
    bool in_ready;   /* ... and it can be written */
    bool in_writing; /* a write to it is out */
    bool out_ended;  /* the output's end came */
    char *frames;    /* the batch being written */
};

static void
frames_written(void *arg, int status)
{
    struct dattach *d = arg;
    free(d->frames);
    d->frames = NULL;
    if (status < 0)
        return; /* the error callback closes */
    container_attach_next(d->a);
}

static void
attach_data(void *arg, const struct proc_log_piece *p, size_t n)
{
    struct dattach *d = arg;
    if (n == 0) {
        d->out_ended = true;
        hijack_close(d->h); /* after what is queued */
        return;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += FRAME_HEADER + p[i].len;
    char *buf = malloc(total);
    if (!buf) {
        hijack_close(d->h);
        return;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = p[i].len;
        unsigned char h[FRAME_HEADER] = {p[i].stream == PROC_STDERR ? 2 : 1,
                                         0,
                                         0,
                                         0,
                                         (unsigned char)(len >> 24),
                                         (unsigned char)(len >> 16),
                                         (unsigned char)(len >> 8),
                                         (unsigned char)len};
        memcpy(buf + at, h, FRAME_HEADER);
        memcpy(buf + at + FRAME_HEADER, p[i].data, len);
        at += FRAME_HEADER + len;
    }
    /* One batch (64 KiB of output at most) is queued at a time: it fits. */
    d->frames = buf;
    if (hijack_write(d->h, buf, total, frames_written, d) < 0) {
        free(buf);
        d->frames = NULL;
        hijack_close(d->h);
    }
}

static void
attach_stdin_ready(void *arg)
{
    struct dattach *d = arg;
    d->in_ready = true;
    hijack_read_start(d->h);
}

static void
attach_stdin_written(void *arg, const struct err *err)
{
    struct dattach *d = arg;
    d->in_writing = false;
    if (!err)
        hijack_read_start(d->h);
    /* A stdin the process closed takes nothing more; the output goes on. */
}

static const struct ctr_attach_cbs attach_cbs = {
    .data = attach_data,
    .stdin_ready = attach_stdin_ready,
    .stdin_written = attach_stdin_written,
};

static size_t
hj_read(struct hijack *h, const char *data, size_t len, void *ctx)
{
    struct dattach *d = ctx;
    if (!d->in || !d->in_ready)
        return len; /* no stdin: what the client sends is dropped */
    if (d->in_writing)
        return 0; /* the completion reads on */
    struct err err = {0};
    if (container_attach_write(d->a, data, len, &err) < 0)
        return len;
    d->in_writing = true;
    return len;
}

static void
hj_eof(struct hijack *h, void *ctx)
{
    struct dattach *d = ctx;
    if (d->in)
        container_attach_close_stdin(d->a);
}

static void
hj_error(struct hijack *h, int err, void *ctx)
{
    hijack_close(h);
}

static void
hj_shutdown(struct hijack *h, void *ctx)
{
    hijack_close(h);
}

static void
hj_closed(struct hijack *h, void *ctx)
{
    struct dattach *d = ctx;
    container_attach_release(d->a);
    free(d->frames);
    free(d);
}

static const struct hijack_cbs hj_cbs = {
    .read = hj_read,
    .eof = hj_eof,
    .error = hj_error,
    .shutdown = hj_shutdown,
    .closed = hj_closed,
};

int
docker_attach_hijack(struct api_req *req, const char *handle, const char *proc_id, bool in,
                     bool out, bool errs, struct err *err)
{
    static const char *const upgrade_headers[] = {
        "Content-Type", "application/vnd.docker.multiplexed-stream", "Upgrade", "tcp", NULL};
    static const char *const raw_headers[] = {"Content-Type",
                                              "application/vnd.docker.multiplexed-stream", NULL};
    struct ctr_attach_opts o = {
        .out = out, .err = errs, .in = in, .logs = docker_query_bool(req, "logs", false)};
    struct dattach *d = calloc(1, sizeof(*d));
    if (!d)
        return err_set(err, ENOMEM, "out of memory");
    d->in = o.in;
    struct daemon *dm = api_daemon(req->api);
    int ret = proc_id ? process_attach(dm, handle, proc_id, &o, &attach_cbs, d, &d->a, err)
                      : container_attach(dm, handle, &o, &attach_cbs, d, &d->a, err);
    if (ret < 0) {
        free(d);
        return ret;
    }
    bool upgrade = hijack_req_upgrade(req);
    struct hijack_opts ho = {
        .mode = upgrade ? HIJACK_UPGRADE : HIJACK_RAW,
        .headers = upgrade ? upgrade_headers : raw_headers,
        .cbs = &hj_cbs,
        .ctx = d,
    };
    d->h = hijack_start(req, &ho, err);
    if (!d->h) {
        container_attach_release(d->a);
        free(d);
        return -err->code;
    }
    if (!d->in)
        hijack_read_start(d->h); /* to see the client go */
    container_attach_next(d->a);
    return 0;
}

/* ---- a stream with only a message: the engine's exec start that failed ---------- */

static void
msg_written(void *arg, int status)
{
    (void)status; /* the close sends or gives up; either way the stream ends */
    hijack_close(arg);
}

static void
msg_error(struct hijack *h, int err, void *ctx)
{
    (void)err;
    (void)ctx;
    hijack_close(h);
}

static void
msg_closed(struct hijack *h, void *ctx)
{
    (void)h;
    (void)ctx;
}

static size_t
msg_read(struct hijack *h, const char *data, size_t len, void *ctx)
{
    (void)h;
    (void)data;
    (void)ctx;
    return len; /* what the client sends is dropped */
}

static const struct hijack_cbs msg_cbs = {
    .read = msg_read,
    .error = msg_error,
    .closed = msg_closed,
};

int
docker_hijack_message(struct api_req *req, const char *msg, struct err *err)
{
    static const char *const upgrade_headers[] = {
        "Content-Type", "application/vnd.docker.multiplexed-stream", "Upgrade", "tcp", NULL};
    static const char *const raw_headers[] = {"Content-Type",
                                              "application/vnd.docker.multiplexed-stream", NULL};
    bool upgrade = hijack_req_upgrade(req);
    struct hijack_opts ho = {
        .mode = upgrade ? HIJACK_UPGRADE : HIJACK_RAW,
        .headers = upgrade ? upgrade_headers : raw_headers,
        .cbs = &msg_cbs,
    };
    size_t len = strlen(msg) + 2;
    unsigned char h[FRAME_HEADER] = {1,
                                     0,
                                     0,
                                     0,
                                     (unsigned char)(len >> 24),
                                     (unsigned char)(len >> 16),
                                     (unsigned char)(len >> 8),
                                     (unsigned char)len};
    struct hijack *hj = hijack_start(req, &ho, err);
    if (!hj)
        return -err->code;
    uv_buf_t bufs[3] = {uv_buf_init((char *)h, FRAME_HEADER), uv_buf_init((char *)msg, len - 2),
                        uv_buf_init("\r\n", 2)};
    if (hijack_writev(hj, bufs, 3, msg_written, hj) < 0)
        hijack_close(hj);
    return 0;
}

void
docker_container_attach(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (!c)
        return;
    if (!docker_query_bool(req, "stream", false)) {
        api_reply_fail(req, EINVAL,
                       "attach without stream=1 is not supported by this host: use the logs "
                       "route for what was written");
        return;
    }
    /* The engine ignores a stdin asked of a container without one. */
    bool in = docker_query_bool(req, "stdin", false) && c->p->main->open_stdin;
    struct err err = {0};
    if (docker_attach_hijack(req, c->p->handle, NULL, in, docker_query_bool(req, "stdout", false),
                             docker_query_bool(req, "stderr", false), &err) < 0)
        api_reply_err(req, &err);
}
