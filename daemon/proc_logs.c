/*
 * Process logs (daemon/proc_logs.h): an open job (the driver's files, the
 * tail's search), then one read job per batch, with the process's change
 * events for follow. Loop thread, except logs_open_work and
 * logs_read_work, which touch only the reader's own files and buffers.
 */
#include "daemon/proc_logs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/svc_processes.h"
#include "runtime/outrec.h"
#include "runtime/outrec_read.h"

#define LOGS_BUF (64 * 1024)
#define LOGS_PIECES 512

struct proc_logs {
    struct svc_call call; /* the open's */
    struct daemon *d;
    proc_logs_open_cb opened;
    proc_logs_data_cb data;
    void *arg;
    struct ctr_target t; /* the reference, and what the jobs need */
    struct ctr_proc *pr; /* NULL once unlinked */
    struct ctr_listener lis;
    struct outrec_log log;
    struct outrec_pos pos;
    struct outrec_filter f;
    int64_t tail;
    bool follow;
    bool closed;            /* the caller let go */
    bool wanted;            /* the caller asked for pieces not yet given */
    bool reading, waiting;  /* a job in flight / at the end, following */
    bool event_during_read; /* new output or an exit came while a job ran */
    bool final_at_read;     /* the process had exited when this read started */
    bool done;              /* nothing more to give but the end */
    bool ended;             /* the end was given */
    bool raw;               /* pos.raw as of the last job (the loop's copy) */
    /* A job's results. */
    int ret;
    struct err err;
    enum outrec_state state;
    struct outrec_piece pieces[LOGS_PIECES];
    struct proc_log_piece out[LOGS_PIECES];
    char buf[LOGS_BUF];
};

static void logs_read(struct proc_logs *l);

static void
logs_unlisten(struct proc_logs *l)
{
    if (l->pr)
        ctr_unlisten(l->pr, &l->lis);
    l->pr = NULL;
}

static void
logs_free(struct proc_logs *l)
{
    logs_unlisten(l);
    /* close(2) of a regular file does not wait on the disk. */
    if (l->log.index_fd >= 0)
        close(l->log.index_fd);
    for (int s = 0; s < 2; s++)
        if (l->log.data_fd[s] >= 0)
            close(l->log.data_fd[s]);
    ctr_target_clear(&l->t);
    free(l);
}

static void
logs_give_end(struct proc_logs *l)
{
    l->wanted = false;
    l->done = l->ended = true;
    logs_unlisten(l);
    l->data(l->arg, NULL, 0);
}

static void
logs_read_work(void *ctx)
{
    struct proc_logs *l = ctx;
    l->ret = outrec_log_read(&l->log, &l->pos, &l->f, l->final_at_read, l->buf, sizeof(l->buf),
                             l->pieces, LOGS_PIECES, &l->state, &l->err);
}

static void
logs_read_done(void *ctx, bool cancelled)
{
    struct proc_logs *l = ctx;
    l->reading = false;
    l->raw = l->pos.raw;
    if (l->closed) {
        logs_free(l);
        return;
    }
    if (cancelled || l->ret < 0) {
        if (!cancelled)
            log_warn("read the log of process %s: %s", l->t.id, l->err.msg);
        logs_give_end(l);
        return;
    }
    if (l->ret > 0) {
        size_t n = (size_t)l->ret;
        for (size_t i = 0; i < n; i++)
            l->out[i] = (struct proc_log_piece){
                .stream = l->pieces[i].stream ? PROC_STDERR : PROC_STDOUT,
                .line_start = l->pieces[i].line_start,
                .time_ns = l->pieces[i].time_ns,
                .data = l->buf + l->pieces[i].at,
                .len = l->pieces[i].len,
            };
        if (l->state == OUTREC_UNTIL)
            l->done = true; /* the end comes with the next ask */
        l->wanted = false;
        l->data(l->arg, l->out, n);
        return;
    }
    if (l->state == OUTREC_MORE) {
        logs_read(l);
        return;
    }
    if (l->state == OUTREC_UNTIL || !l->follow || l->final_at_read || !l->pr) {
        logs_give_end(l);
        return;
    }
    if (l->event_during_read) {
        /* Output or the exit came while this read ran: it may have missed
         * them, so look again rather than wait for an event already seen. */
        logs_read(l);
        return;
    }
    l->waiting = true;
}

static void
logs_read(struct proc_logs *l)
{
    if (l->reading)
        return;
    if (l->done) {
        logs_give_end(l);
        return;
    }
    l->waiting = false;
    l->event_during_read = false;
    l->final_at_read = !l->pr || l->pr->exited;
    l->reading = true;
    int rc = job_submit(l->d->jobs, "process.logs", logs_read_work, logs_read_done, l);
    if (rc < 0) {
        l->reading = false;
        logs_give_end(l);
    }
}

static void
logs_event(struct ctr_listener *lis, enum ctr_event ev)
{
    struct proc_logs *l = lis->ctx;
    if (ev == CTR_EV_GONE)
        logs_unlisten(l);
    /* Without an index, the data files' own changes are the news. */
    bool news = ev == CTR_EV_CHUNKS || ev == CTR_EV_EXIT || ev == CTR_EV_GONE ||
                (l->raw && (ev == CTR_EV_STDOUT || ev == CTR_EV_STDERR));
    if (!news)
        return;
    if (l->waiting)
        logs_read(l);
    else if (l->reading)
        l->event_during_read = true;
}

void
process_logs_next(struct proc_logs *l)
{
    if (l->closed || l->ended || l->wanted)
        return;
    l->wanted = true;
    logs_read(l);
}

void
process_logs_close(struct proc_logs *l)
{
    if (!l || l->closed)
        return;
    l->closed = true;
    if (!l->reading)
        logs_free(l);
    /* else: logs_read_done frees it. */
}

/* ---- open ------------------------------------------------------------------- */

static int
open_fd(int fd, struct err *err, struct err *first)
{
    /* A file that is not there yet reads as empty. */
    if (fd < 0 && err->code != ENOENT && !first->code)
        *first = *err;
    return fd;
}

static void
logs_open_work(void *ctx)
{
    struct proc_logs *l = ctx;
    struct ctr_target *t = &l->t;
    struct err e = {0};
    l->err = (struct err){0};
    for (int s = 0; s < 2; s++)
        l->log.data_fd[s] = open_fd(
            t->drv->proc_output_open(t->drv_ctx, t->handle, t->dir, t->id, s, &e), &e, &l->err);
    l->log.index_fd =
        t->drv->proc_chunks_open
            ? open_fd(t->drv->proc_chunks_open(t->drv_ctx, t->handle, t->dir, t->id, &e), &e,
                      &l->err)
            : -1;
    if (l->err.code) {
        l->ret = -l->err.code;
        return;
    }
    if (l->log.index_fd < 0) {
        /* Records from before the index: the files as they are, timed now. */
        l->pos.raw = true;
        l->pos.last_time = outrec_now_ns();
        l->ret = 0;
        return;
    }
    l->ret =
        l->tail >= 0 ? outrec_log_tail(&l->log, &l->f, (uint64_t)l->tail, &l->pos, &l->err) : 0;
}

static void
logs_open_done(void *ctx, bool cancelled)
{
    struct proc_logs *l = ctx;
    struct ctr_proc *pr = l->t.c->registered ? container_proc_find(l->t.c, l->t.id) : NULL;
    if (cancelled)
        l->ret = err_set(&l->err, ECANCELED, "log of %s: the daemon is shutting down", l->t.id);
    else if (l->ret >= 0 && !pr)
        l->ret = err_set(&l->err, ENOENT, "process %s: not found", l->t.id);
    if (l->call.detached) {
        logs_free(l);
        return;
    }
    if (l->ret < 0) {
        l->opened(l->arg, &l->err, NULL);
        logs_free(l);
        return;
    }
    l->pr = pr;
    l->raw = l->pos.raw;
    l->lis.fn = logs_event;
    l->lis.ctx = l;
    ctr_listen(pr, &l->lis);
    l->opened(l->arg, NULL, l);
}

int
process_logs_open(struct daemon *d, const char *handle, const char *id,
                  const struct proc_logs_opts *o, proc_logs_open_cb opened, proc_logs_data_cb data,
                  void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    int ret = process_lookup(d, handle, id, &c, &pr, err);
    if (ret < 0)
        return ret;
    if (!o->out && !o->err)
        return err_set(err, EINVAL, "log of %s: neither stdout nor stderr asked for", id);
    if (o->since_ns < 0 || o->until_ns < 0)
        return err_set(err, EINVAL, "log of %s: a negative since or until", id);
    if (o->tail < -1)
        return err_set(err, EINVAL, "log of %s: tail %lld is negative", id, (long long)o->tail);
    struct proc_logs *l = calloc(1, sizeof(*l));
    if (!l || ctr_target_init(&l->t, c, pr->id) < 0) {
        free(l);
        return err_set(err, ENOMEM, "log of %s: out of memory", id);
    }
    l->d = d;
    l->opened = opened;
    l->data = data;
    l->arg = arg;
    l->log = (struct outrec_log){.index_fd = -1, .data_fd = {-1, -1}};
    l->f = (struct outrec_filter){.streams = (o->out ? 1u : 0u) | (o->err ? 2u : 0u),
                                  .since_ns = o->since_ns,
                                  .until_ns = o->until_ns};
    l->tail = o->tail;
    l->follow = o->follow;
    if ((ret = job_submit(d->jobs, "process.logs.open", logs_open_work, logs_open_done, l)) < 0) {
        ctr_target_clear(&l->t);
        free(l);
        return err_set(err, ECANCELED, "log of %s: cannot start the job: %s", id, strerror(-ret));
    }
    svc_call_give(&l->call, call);
    return 0;
}
