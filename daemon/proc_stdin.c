/*
 * Process stdin streams (daemon/proc_stdin.h): the open and close jobs
 * and the uv_pipe_t between them. Loop thread, except the *_work
 * functions.
 */
#include "daemon/proc_stdin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/svc_processes.h"

struct proc_stdin {
    proc_stdin_cb opened, written, closed;
    void *arg;
    bool released;
    struct daemon *d;
    struct ctr_target t;
    int fd; /* from the open job */
    struct err err;
    bool job_running, writing, pipe_open, is_open;
    uv_pipe_t pipe;
    uv_write_t wreq;
    char *wbuf;
    uint64_t written_bytes;
};

static void
stdin_maybe_free(struct proc_stdin *s)
{
    if (!s->released || s->job_running || s->writing || s->pipe_open)
        return;
    ctr_target_clear(&s->t);
    free(s->wbuf);
    free(s);
}

static void
pipe_closed_cb(uv_handle_t *h)
{
    struct proc_stdin *s = h->data;
    s->pipe_open = false;
    stdin_maybe_free(s);
}

static void
stdin_close_pipe(struct proc_stdin *s)
{
    if (s->pipe_open && !uv_is_closing((uv_handle_t *)&s->pipe))
        uv_close((uv_handle_t *)&s->pipe, pipe_closed_cb);
}

static void
report(struct proc_stdin *s, proc_stdin_cb cb, int rc)
{
    if (!s->released && cb)
        cb(s->arg, rc < 0 ? &s->err : NULL);
}

static void
open_work(void *ctx)
{
    struct proc_stdin *s = ctx;
    s->fd = s->t.drv->proc_stdin_open(s->t.drv_ctx, s->t.handle, s->t.dir, s->t.id, &s->err);
}

static void
open_done(void *ctx, bool cancelled)
{
    struct proc_stdin *s = ctx;
    s->job_running = false;
    if (cancelled && s->fd >= 0) {
        close(s->fd);
        s->fd = err_set(&s->err, ECANCELED, "stdin of %s: the daemon is shutting down", s->t.id);
    }
    int rc = s->fd < 0 ? s->fd : 0;
    if (rc == 0) {
        uv_pipe_init(s->d->loop, &s->pipe, 0);
        s->pipe.data = s;
        s->pipe_open = true;
        int urc = uv_pipe_open(&s->pipe, s->fd);
        if (urc < 0) {
            close(s->fd);
            rc = err_set(&s->err, EIO, "stdin of %s: %s", s->t.id, uv_strerror(urc));
        } else {
            s->is_open = true;
        }
    }
    if (s->released)
        stdin_close_pipe(s);
    report(s, s->opened, rc);
    stdin_maybe_free(s);
}

int
process_stdin_open(struct daemon *d, const char *handle, const char *id, proc_stdin_cb opened,
                   void *arg, struct proc_stdin **out, struct err *err)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    int ret = process_lookup(d, handle, id, &c, &pr, err);
    if (ret < 0)
        return ret;
    if (!pr->has_stdin || pr->exited)
        return err_set(err, ERR_CONFLICT, "stdin of process %s: %s", pr->id,
                       pr->exited ? "the process exited"
                                  : "the process was started without \"stdin\": true");
    struct proc_stdin *s = calloc(1, sizeof(*s));
    if (!s || ctr_target_init(&s->t, c, pr->id) < 0) {
        free(s);
        return err_set(err, ENOMEM, "stdin of %s: out of memory", id);
    }
    s->d = d;
    s->opened = opened;
    s->arg = arg;
    s->fd = -1;
    s->job_running = true;
    if ((ret = job_submit(d->jobs, "process.stdin.open", open_work, open_done, s)) < 0) {
        ctr_target_clear(&s->t);
        free(s);
        return err_set(err, ECANCELED, "stdin of %s: cannot start the job: %s", id, strerror(-ret));
    }
    *out = s;
    return 0;
}

static void
write_cb(uv_write_t *w, int status)
{
    struct proc_stdin *s = w->data;
    s->writing = false;
    free(s->wbuf);
    s->wbuf = NULL;
    int rc = 0;
    if (status < 0)
        rc = err_set(&s->err, status == UV_EPIPE ? ERR_CONFLICT : EIO, "stdin of process %s: %s",
                     s->t.id,
                     status == UV_EPIPE ? "the process closed it or exited" : uv_strerror(status));
    if (s->released)
        stdin_close_pipe(s);
    report(s, s->written, rc);
    stdin_maybe_free(s);
}

int
process_stdin_write(struct proc_stdin *s, const void *data, size_t len, proc_stdin_cb written,
                    struct err *err)
{
    if (!s->is_open || s->writing || s->released)
        return err_set(err, EBUSY, "stdin of process %s: not ready for a write", s->t.id);
    s->wbuf = malloc(len ? len : 1);
    if (!s->wbuf)
        return err_set(err, ENOMEM, "stdin of process %s: out of memory", s->t.id);
    memcpy(s->wbuf, data, len);
    uv_buf_t b = uv_buf_init(s->wbuf, (unsigned)len);
    s->wreq.data = s;
    int rc = uv_write(&s->wreq, (uv_stream_t *)&s->pipe, &b, 1, write_cb);
    if (rc < 0) {
        free(s->wbuf);
        s->wbuf = NULL;
        return err_set(err, rc == UV_EPIPE ? ERR_CONFLICT : EIO, "stdin of process %s: %s", s->t.id,
                       uv_strerror(rc));
    }
    s->written = written;
    s->writing = true;
    s->written_bytes += len;
    return 0;
}

static void
close_work(void *ctx)
{
    struct proc_stdin *s = ctx;
    struct err err = {0};
    if (s->t.drv->proc_stdin_close(s->t.drv_ctx, s->t.handle, s->t.dir, s->t.id, &err) < 0 &&
        err.code != ERR_UNAVAILABLE)
        log_info("close stdin of %s: %s", s->t.id, err.msg);
}

static void
close_nothing_work(void *ctx)
{
}

static void
close_done(void *ctx, bool cancelled)
{
    struct proc_stdin *s = ctx;
    s->job_running = false;
    report(s, s->closed, 0);
    stdin_maybe_free(s);
}

int
process_stdin_close(struct proc_stdin *s, bool eof, proc_stdin_cb closed, struct err *err)
{
    if (s->writing || s->job_running)
        return err_set(err, EBUSY, "stdin of process %s: a write is in flight", s->t.id);
    stdin_close_pipe(s);
    s->is_open = false;
    s->closed = closed;
    s->job_running = true;
    /* Without eof the close job does nothing but answer on the next turn. */
    int ret = job_submit(s->d->jobs, "process.stdin.close", eof ? close_work : close_nothing_work,
                         close_done, s);
    if (ret < 0) {
        s->job_running = false;
        return err_set(err, ECANCELED, "stdin of %s: cannot start the job: %s", s->t.id,
                       strerror(-ret));
    }
    return 0;
}

uint64_t
process_stdin_written(const struct proc_stdin *s)
{
    return s->written_bytes;
}

void
process_stdin_release(struct proc_stdin *s)
{
    if (!s || s->released)
        return;
    s->released = true;
    if (!s->writing && !s->job_running)
        stdin_close_pipe(s);
    stdin_maybe_free(s);
}
