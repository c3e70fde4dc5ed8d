/*
 * Process output readers (daemon/proc_output.h): the open job, then
 * uv_fs_read on the loop with the process's change events for follow.
 * Loop thread, except out_open_work.
 */
#include "daemon/proc_output.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/svc_processes.h"

#define OUTPUT_CHUNK (64 * 1024)

struct proc_output {
    proc_output_data_cb data;
    void *arg;
    bool closed;         /* the caller let go */
    struct container *c; /* a reference */
    struct ctr_proc *pr; /* NULL once unlinked */
    struct ctr_listener lis;
    enum proc_stream which;
    uv_file fd;
    int64_t offset;
    bool follow;
    bool wanted;            /* the caller asked for a chunk not yet given */
    bool reading, waiting;  /* a uv_fs_read in flight / at the end, following */
    bool event_during_read; /* new output or an exit came while a read ran */
    bool exited_at_read;    /* the process had exited when this read started */
    bool done;              /* the end was given */
    uv_fs_t fsreq;
    char buf[OUTPUT_CHUNK];
};

static void reader_read(struct proc_output *r);

static void
reader_unlisten(struct proc_output *r)
{
    if (r->pr)
        ctr_unlisten(r->pr, &r->lis);
    r->pr = NULL;
}

static void
reader_free(struct proc_output *r)
{
    reader_unlisten(r);
    if (r->fd >= 0) {
        uv_fs_t creq;
        /* close(2) of a regular file does not wait on the disk. */
        uv_fs_close(NULL, &creq, r->fd, NULL);
        uv_fs_req_cleanup(&creq);
    }
    container_unref(r->c);
    free(r);
}

/* Gives the caller its chunk or the end. */
static void
reader_give(struct proc_output *r, const char *data, size_t len)
{
    r->wanted = false;
    if (len == 0) {
        r->done = true;
        reader_unlisten(r);
    }
    r->data(r->arg, data, len);
}

static void
read_cb(uv_fs_t *fsreq)
{
    struct proc_output *r = fsreq->data;
    ssize_t n = fsreq->result;
    uv_fs_req_cleanup(fsreq);
    r->reading = false;
    if (r->closed) {
        reader_free(r);
        return;
    }
    if (n < 0) {
        log_warn("read output of a process: %s", uv_strerror((int)n));
        reader_give(r, NULL, 0);
        return;
    }
    if (n > 0) {
        r->offset += n;
        reader_give(r, r->buf, (size_t)n);
        return;
    }
    /* The end of what is written so far. */
    if (!r->follow || r->exited_at_read || !r->pr) {
        reader_give(r, NULL, 0);
        return;
    }
    if (r->event_during_read) {
        /* Output or the exit came while this read ran: it may have missed
         * them, so look again rather than wait for an event already seen. */
        reader_read(r);
        return;
    }
    r->waiting = true;
}

static void
reader_read(struct proc_output *r)
{
    if (r->reading || r->done)
        return;
    r->waiting = false;
    r->event_during_read = false;
    r->exited_at_read = !r->pr || r->pr->exited;
    r->reading = true;
    r->fsreq.data = r;
    uv_buf_t b = uv_buf_init(r->buf, sizeof(r->buf));
    int rc = uv_fs_read(r->c->reg->d->loop, &r->fsreq, r->fd, &b, 1, r->offset, read_cb);
    if (rc < 0) {
        r->reading = false;
        log_warn("read output of a process: %s", uv_strerror(rc));
        reader_give(r, NULL, 0);
    }
}

static void
reader_event(struct ctr_listener *l, enum ctr_event ev)
{
    struct proc_output *r = l->ctx;
    bool mine = (ev == CTR_EV_STDOUT && r->which == PROC_STDOUT) ||
                (ev == CTR_EV_STDERR && r->which == PROC_STDERR);
    if (ev == CTR_EV_GONE)
        reader_unlisten(r);
    if (!mine && ev != CTR_EV_EXIT && ev != CTR_EV_GONE)
        return;
    if (r->waiting)
        reader_read(r);
    else if (r->reading)
        r->event_during_read = true;
}

void
process_output_next(struct proc_output *r)
{
    if (r->closed || r->done || r->wanted)
        return;
    r->wanted = true;
    reader_read(r);
}

void
process_output_close(struct proc_output *r)
{
    if (!r || r->closed)
        return;
    r->closed = true;
    if (!r->reading)
        reader_free(r);
    /* else: read_cb frees it. */
}

/* ---- open ------------------------------------------------------------------- */

struct out_open_job {
    struct svc_call call;
    proc_output_open_cb opened;
    proc_output_data_cb data;
    void *arg;
    struct ctr_target t;
    enum proc_stream which;
    int fd;
    struct err err;
    int64_t offset;
    bool follow;
};

static void
out_open_work(void *ctx)
{
    struct out_open_job *j = ctx;
    struct ctr_target *t = &j->t;
    j->fd = t->drv->proc_output_open(t->drv_ctx, t->handle, t->dir, t->id, j->which, &j->err);
}

static void
out_open_done(void *ctx, bool cancelled)
{
    struct out_open_job *j = ctx;
    struct ctr_proc *pr = j->t.c->registered ? container_proc_find(j->t.c, j->t.id) : NULL;
    if (cancelled && j->fd >= 0) {
        close(j->fd);
        j->fd = err_set(&j->err, ECANCELED, "output of %s: the daemon is shutting down", j->t.id);
    }
    if (j->fd >= 0 && (!pr || j->call.detached)) {
        close(j->fd);
        j->fd = err_set(&j->err, ENOENT, "process %s: not found", j->t.id);
    }
    struct proc_output *r = j->fd >= 0 ? calloc(1, sizeof(*r)) : NULL;
    if (j->fd >= 0 && !r) {
        close(j->fd);
        j->fd = err_set(&j->err, ENOMEM, "output of %s: out of memory", j->t.id);
    }
    if (r) {
        r->data = j->data;
        r->arg = j->arg;
        r->c = j->t.c; /* the job's reference moves to the reader */
        j->t.c = NULL;
        r->pr = pr;
        r->which = j->which;
        r->fd = j->fd;
        r->offset = j->offset;
        r->follow = j->follow;
        r->lis.fn = reader_event;
        r->lis.ctx = r;
        ctr_listen(pr, &r->lis);
    }
    if (!j->call.detached)
        j->opened(j->arg, r ? NULL : &j->err, r);
    ctr_target_clear(&j->t);
    free(j);
}

int
process_output_open(struct daemon *d, const char *handle, const char *id, enum proc_stream which,
                    int64_t offset, bool follow, proc_output_open_cb opened,
                    proc_output_data_cb data, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    int ret = process_lookup(d, handle, id, &c, &pr, err);
    if (ret < 0)
        return ret;
    if (offset < 0)
        return err_set(err, EINVAL, "output of %s: offset %lld is negative", id, (long long)offset);
    struct out_open_job *j = calloc(1, sizeof(*j));
    if (!j || ctr_target_init(&j->t, c, pr->id) < 0) {
        free(j);
        return err_set(err, ENOMEM, "output of %s: out of memory", id);
    }
    j->opened = opened;
    j->data = data;
    j->arg = arg;
    j->which = which;
    j->offset = offset;
    j->follow = follow;
    if ((ret = job_submit(d->jobs, "process.output", out_open_work, out_open_done, j)) < 0) {
        ctr_target_clear(&j->t);
        free(j);
        return err_set(err, ECANCELED, "output of %s: cannot start the job: %s", id,
                       strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}
