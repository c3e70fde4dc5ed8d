/*
 * Attaches (daemon/ctr_attach.h): a container event subscription until
 * the run to attach to exists, then a log reader that follows it and,
 * when asked, its stdin stream. Loop thread.
 */
#include "daemon/ctr_attach.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/ctr_events.h"
#include "daemon/daemon.h"
#include "daemon/proc_stdin.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_main.h"
#include "daemon/svc_processes.h"

struct ctr_attach {
    struct daemon *d;
    struct container *c; /* a reference */
    struct ctr_attach_opts o;
    struct ctr_attach_cbs cbs;
    void *arg;
    struct ctr_sub sub;
    bool subscribed;
    struct proc_logs *logs;
    struct svc_call *logs_call; /* the open, until it answered */
    struct proc_stdin *in;
    bool in_ready, writing, close_pending;
    bool wanted; /* the caller asked for output not yet given */
    bool ended;  /* the end was given */
};

static void
attach_end(struct ctr_attach *a)
{
    if (a->ended)
        return;
    a->ended = true;
    a->cbs.data(a->arg, NULL, 0);
}

static void
logs_data(void *arg, const struct proc_log_piece *p, size_t n)
{
    struct ctr_attach *a = arg;
    if (n == 0) {
        process_logs_close(a->logs);
        a->logs = NULL;
        attach_end(a);
        return;
    }
    a->wanted = false;
    a->cbs.data(a->arg, p, n);
}

static void
logs_opened(void *arg, const struct err *err, struct proc_logs *l)
{
    struct ctr_attach *a = arg;
    a->logs_call = NULL;
    if (err) {
        log_warn("attach to %s: %s", a->c->p->handle, err->msg);
        attach_end(a);
        return;
    }
    a->logs = l;
    if (a->wanted)
        process_logs_next(l);
}

static void
stdin_cb(void *arg, const struct err *err)
{
    struct ctr_attach *a = arg;
    if (!a->in_ready) {
        /* The open's completion. */
        if (err) {
            log_warn("attach to the stdin of %s: %s", a->c->p->handle, err->msg);
            return;
        }
        a->in_ready = true;
        if (a->close_pending)
            container_attach_close_stdin(a);
        else if (a->cbs.stdin_ready)
            a->cbs.stdin_ready(a->arg);
        return;
    }
    a->writing = false;
    if (a->close_pending) {
        container_attach_close_stdin(a);
        return;
    }
    if (a->cbs.stdin_written)
        a->cbs.stdin_written(a->arg, err);
}

/* The run to attach to exists: follow its output, open its stdin. */
static void
attach_run(struct ctr_attach *a, struct ctr_proc *pr, bool from_start)
{
    struct err err = {0};
    struct proc_logs_opts lo = {
        .out = a->o.out, .err = a->o.err, .tail = from_start || a->o.logs ? -1 : 0, .follow = true};
    if (lo.out || lo.err) {
        if (process_logs_open(a->d, a->c->p->handle, pr->id, &lo, logs_opened, logs_data, a,
                              &a->logs_call, &err) < 0) {
            log_warn("attach to %s: %s", a->c->p->handle, err.msg);
            attach_end(a);
            return;
        }
    }
    if (a->o.in && process_stdin_open(a->d, a->c->p->handle, pr->id, stdin_cb, a, &a->in, &err) < 0)
        log_warn("attach to the stdin of %s: %s", a->c->p->handle, err.msg);
    if (!lo.out && !lo.err)
        a->wanted = false; /* no output asked for: the end comes with the removal */
}

static void
attach_event(struct ctr_sub *s, const struct ctr_change *ev, struct container *c)
{
    struct ctr_attach *a = s->ctx;
    if (c != a->c)
        return;
    if (ev->kind == CTR_CHANGE_START && c->main_proc && !a->logs && !a->logs_call && !a->in) {
        ctr_events_unsubscribe(a->c->reg, &a->sub);
        a->subscribed = false;
        attach_run(a, c->main_proc, true);
    } else if (ev->kind == CTR_CHANGE_DESTROY) {
        ctr_events_unsubscribe(a->c->reg, &a->sub);
        a->subscribed = false;
        attach_end(a);
    }
}

int
container_attach(struct daemon *d, const char *handle, const struct ctr_attach_opts *o,
                 const struct ctr_attach_cbs *cbs, void *arg, struct ctr_attach **out,
                 struct err *err)
{
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (!c->p->main)
        return err_set(err, EINVAL, "attach to %s: the container has no main process", handle);
    if (o->in && !c->p->main->open_stdin)
        return err_set(err, EINVAL, "attach to %s: the container was created without a stdin",
                       handle);
    if (c->state == CTR_DELETING)
        return err_set(err, ERR_CONFLICT, "attach to %s: being removed", handle);
    struct ctr_attach *a = calloc(1, sizeof(*a));
    if (!a)
        return err_set(err, ENOMEM, "attach to %s: out of memory", handle);
    a->d = d;
    a->c = c;
    container_ref(c);
    a->o = *o;
    a->cbs = *cbs;
    a->arg = arg;
    /* Subscribed first, so a start that comes now is seen; a running
     * run is attached to at once. */
    a->sub.fn = attach_event;
    a->sub.ctx = a;
    ctr_events_subscribe(c->reg, &a->sub);
    a->subscribed = true;
    if (container_main_running(c) && !c->main_starting) {
        ctr_events_unsubscribe(c->reg, &a->sub);
        a->subscribed = false;
        /* Its output from now on, or all of it with logs. */
        attach_run(a, c->main_proc, false);
    }
    *out = a;
    return 0;
}

int
process_attach(struct daemon *d, const char *handle, const char *id,
               const struct ctr_attach_opts *o, const struct ctr_attach_cbs *cbs, void *arg,
               struct ctr_attach **out, struct err *err)
{
    struct container *c = NULL;
    struct ctr_proc *pr = NULL;
    int ret = process_lookup(d, handle, id, &c, &pr, err);
    if (ret < 0)
        return ret;
    if (o->in && !pr->has_stdin)
        return err_set(err, EINVAL, "attach to %s: the process was started without a stdin", id);
    struct ctr_attach *a = calloc(1, sizeof(*a));
    if (!a)
        return err_set(err, ENOMEM, "attach to %s: out of memory", id);
    a->d = d;
    a->c = c;
    container_ref(c);
    a->o = *o;
    a->cbs = *cbs;
    a->arg = arg;
    attach_run(a, pr, true);
    *out = a;
    return 0;
}

void
container_attach_next(struct ctr_attach *a)
{
    if (a->ended || a->wanted)
        return;
    a->wanted = true;
    if (a->logs)
        process_logs_next(a->logs);
}

int
container_attach_write(struct ctr_attach *a, const void *data, size_t len, struct err *err)
{
    if (!a->in || !a->in_ready)
        return err_set(err, ERR_CONFLICT, "attach to %s: no stdin", a->c->p->handle);
    int ret = process_stdin_write(a->in, data, len, stdin_cb, err);
    if (ret == 0)
        a->writing = true;
    return ret;
}

void
container_attach_close_stdin(struct ctr_attach *a)
{
    if (!a->in)
        return;
    if (!a->in_ready || a->writing) {
        a->close_pending = true; /* once it opened, or the write is done */
        return;
    }
    a->close_pending = false;
    struct err err = {0};
    if (process_stdin_close(a->in, true, NULL, &err) < 0)
        log_warn("close the stdin of %s: %s", a->c->p->handle, err.msg);
}

void
container_attach_release(struct ctr_attach *a)
{
    if (!a)
        return;
    if (a->subscribed)
        ctr_events_unsubscribe(a->c->reg, &a->sub);
    svc_call_detach(a->logs_call);
    process_logs_close(a->logs);
    process_stdin_release(a->in);
    container_unref(a->c);
    free(a);
}
