/*
 * The main-process service (daemon/svc_main.h): start (a process_start
 * of the next run), stop (a signal, a listener on the run's exit and a
 * timer for the KILL, without a pool thread), kill, restart, the waits
 * (event subscribers, daemon/ctr_events.h) and what follows an exit.
 * Loop thread.
 */
#include "daemon/svc_main.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/ctr_events.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_processes.h"

#define MAIN_PREFIX "main."

bool
container_main_running(const struct container *c)
{
    return c->state == CTR_RUNNING && c->main_proc && !c->main_proc->exited;
}

int
container_main_exit_code(const struct container *c)
{
    const struct ctr_proc *pr = c->main_proc;
    if (c->main_start_failed)
        return c->main_start_failed;
    if (!pr || !pr->exited)
        return 0;
    return pr->lost ? 255 : pr->exit_code;
}

void
container_main_spec(const struct ctr_main *m, struct process_spec *spec)
{
    *spec = (struct process_spec){.entrypoint = m->entrypoint,
                                  .has_entrypoint = m->has_entrypoint,
                                  .args = m->cmd,
                                  .has_args = m->has_cmd,
                                  .has_stdin = m->open_stdin};
}

/* The container, when it has a main process. */
static int
main_lookup(struct daemon *d, const char *handle, struct container **out, struct err *err)
{
    int ret = container_lookup(d, handle, out, err);
    if (ret == 0 && !(*out)->p->main)
        return err_set(err, EINVAL, "container %s: has no main process", handle);
    return ret;
}

static void
noop_done_cb(void *arg, const struct err *err)
{
    if (err)
        log_warn("%s", err->msg);
}

static void
handle_free_cb(uv_handle_t *h)
{
    free(h);
}

/* ---- after an exit ---------------------------------------------------------- */

/* Everything else in the container dies with its main process, as in Docker. */
static void
kill_the_rest(struct container *c)
{
    struct daemon *d = c->reg->d;
    for (struct ctr_proc *pr = c->procs; pr; pr = pr->next) {
        if (pr->exited || pr == c->main_proc)
            continue;
        struct err err = {0};
        struct svc_call *call = NULL;
        if (process_signal(d, c->p->handle, pr->id, SIGKILL, noop_done_cb, NULL, &call, &err) < 0)
            log_warn("container %s: kill process %s: %s", c->p->handle, pr->id, err.msg);
    }
}

/* Deletes c at once (no grace); done (arg) when the delete ended. False,
 * logged, when it could not begin: done is not called then. */
static bool
auto_remove_then(struct container *c, const char *why, container_delete_cb done, void *arg)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    log_info("container %s: %s; removing it (auto-remove)", c->p->handle, why);
    if (container_delete_grace(c->reg->d, c->p->handle, 0, done, arg, &call, &err) < 0) {
        log_warn("container %s: auto-remove: %s", c->p->handle, err.msg);
        return false;
    }
    return true;
}

static void
auto_remove(struct container *c, const char *why)
{
    auto_remove_then(c, why, noop_done_cb, NULL);
}

void
ctr_main_exited(struct container *c)
{
    ctr_events_emit(c, CTR_CHANGE_DIE, container_main_exit_code(c), 0);
    if (!c->registered || c->deleting || c->state == CTR_DELETING)
        return;
    if (c->p->main && c->p->main->auto_remove && !c->spawning) {
        auto_remove(c, "its main process exited");
        return;
    }
    if (c->state == CTR_RUNNING)
        kill_the_rest(c);
}

void
ctr_main_reload(struct container *c)
{
    for (struct ctr_proc *pr = c->procs; pr; pr = pr->next) {
        if (strncmp(pr->id, MAIN_PREFIX, strlen(MAIN_PREFIX)) != 0)
            continue;
        char *end = NULL;
        unsigned long n = strtoul(pr->id + strlen(MAIN_PREFIX), &end, 10);
        if (!end || *end || n == 0 || n > CTR_MAIN_RUNS_MAX)
            continue;
        if (n > c->main_runs) {
            c->main_runs = (unsigned)n;
            c->main_proc = pr;
        }
    }
    c->main_exit_pending = c->p->main && c->main_proc && c->main_proc->exited;
}

/* Whether a run of the main process its records keep began or ended at or after at_ms. */
static bool
main_ran_since(const struct container *c, int64_t at_ms)
{
    for (const struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        if (strncmp(pr->id, MAIN_PREFIX, strlen(MAIN_PREFIX)) == 0 &&
            (pr->started_at >= at_ms || pr->finished_at >= at_ms))
            return true;
    return false;
}

/*
 * Whether a run of the main process replaced the failed start f: the
 * start's job runs the program before it removes the record, so a daemon
 * killed between the two leaves the record of an earlier attempt beside a
 * run that began. Not by the clock, which may have stepped back (and a
 * run's start is 0 when its times could not be read): a run numbered as
 * the failed start or later, and in any case a latest run that is alive.
 * A record without its number (written before it was kept) falls back to
 * the times.
 */
static bool
main_replaced_start_failure(const struct container *c, const struct ctr_start_failure *f)
{
    if (c->main_proc && !c->main_proc->exited)
        return true;
    if (f->run)
        return c->main_runs >= f->run;
    return main_ran_since(c, f->at_ms);
}

void
ctr_main_reload_start_failure(struct container *c, const struct ctr_start_failure *f)
{
    if (!c->p->main || main_replaced_start_failure(c, f))
        return;
    c->main_start_failed = f->exit_code;
    snprintf(c->main_start_error, sizeof(c->main_start_error), "%s", f->error);
    /* As a run that exited while the daemon was down: an auto-remove
     * container whose removal the daemon's end cut short goes now. */
    c->main_exit_pending = true;
}

void
containers_main_resume(struct daemon *d)
{
    if (!d->containers)
        return;
    struct container *next;
    for (struct container *c = d->containers->list; c; c = next) {
        next = c->next; /* a delete may not take it out now, but be safe */
        bool pending = c->main_exit_pending;
        c->main_exit_pending = false;
        if (pending && c->p->main->auto_remove)
            auto_remove(c, "its main process exited");
    }
}

/* ---- start ------------------------------------------------------------------ */

static void waiters_after_start(struct container *c, bool began);

struct start_op {
    struct svc_call call;
    container_main_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct svc_call *inner;
    enum ctr_change_kind event; /* START, or RESTART after a restart's stop */
    struct err failure;         /* the start's error, answered after an auto-remove */
};

static void
start_op_end(struct start_op *op)
{
    container_unref(op->c);
    free(op);
}

/* The auto-remove of a container whose program could not start ended:
 * now the start is answered, with the start's own error. */
static void
start_answer_after_remove(void *arg, const struct err *err)
{
    struct start_op *op = arg;
    if (err)
        log_warn("container %s: auto-remove: %s", op->c->p->handle, err->msg);
    if (!op->call.detached)
        op->cb(op->arg, &op->failure);
    start_op_end(op);
}

/*
 * An auto-remove container whose program could not start goes before the
 * start is answered, as the engine does: a client that stops waiting for
 * the removal once the start failed (docker 20.10's CLI cancels that wait
 * with its attach) finds it gone, not "removing". False when the delete
 * could not begin: the caller answers at once.
 */
static bool
auto_remove_then_answer(struct start_op *op, const struct err *failure)
{
    err_copy(&op->failure, failure);
    return auto_remove_then(op->c, "its main process could not start", start_answer_after_remove,
                            op);
}

static void
start_done(void *arg, const struct err *err, struct ctr_proc *pr)
{
    struct start_op *op = arg;
    struct container *c = op->c;
    c->main_starting = false;
    /* A program that cannot start is the run's end, as in the engine: its
     * exit code (127: not there) is the container's, and an auto-remove
     * container goes, which ends the waits for its removal. */
    bool failed = err && err->code == ERR_INVALID_CONTENT;
    /* A start the shutdown cancelled before its job ran neither ran the
     * program nor failed to: an earlier failure stays, here as beside the
     * container's record (the job did not get to it), which the next
     * daemon reads back. */
    bool never_ran = err && err->code == ECANCELED;
    if (!never_ran) {
        c->main_start_failed = failed ? process_start_exit_code(err) : 0;
        snprintf(c->main_start_error, sizeof(c->main_start_error), "%s", failed ? err->msg : "");
    }
    if (!err) {
        c->main_proc = pr;
        log_info("container %s: main process %s started", c->p->handle, pr->id);
        ctr_events_emit(c, CTR_CHANGE_START, -1, 0);
        if (op->event == CTR_CHANGE_RESTART)
            ctr_events_emit(c, CTR_CHANGE_RESTART, -1, 0);
        /* It may have exited before its record was in: its exit was seen then. */
        if (pr->exited)
            ctr_main_exited(c);
    }
    waiters_after_start(c, !err);
    if (failed && c->registered && !c->deleting && c->state == CTR_RUNNING &&
        c->p->main->auto_remove && !c->spawning && auto_remove_then_answer(op, err))
        return;
    if (!op->call.detached)
        op->cb(op->arg, err);
    start_op_end(op);
}

static int
start_submit(struct daemon *d, struct container *c, enum ctr_change_kind event,
             container_main_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    const struct ctr_main *m = c->p->main;
    if (c->state != CTR_RUNNING)
        return err_set(err, ERR_CONFLICT, "container %s: %s, cannot start its main process",
                       c->p->handle,
                       c->state == CTR_STOPPED ? "its init is gone (remove it and create it again)"
                                               : ctr_state_name(c->state));
    if (container_main_running(c) || c->main_starting)
        return err_set(err, EALREADY, "container %s: already running", c->p->handle);
    char id[CTR_ID_MAX + 1];
    snprintf(id, sizeof(id), MAIN_PREFIX "%u", c->main_runs + 1);
    struct process_spec spec;
    container_main_spec(m, &spec);
    spec.id = id;
    spec.keeps_start_failure = true;
    spec.main_run = c->main_runs + 1;
    struct start_op *op = calloc(1, sizeof(*op));
    if (!op)
        return err_set(err, ENOMEM, "start container %s: out of memory", c->p->handle);
    op->cb = cb;
    op->arg = arg;
    op->c = c;
    op->event = event;
    int ret = process_start(d, c->p->handle, &spec, start_done, op, &op->inner, err);
    if (ret < 0) {
        free(op);
        return ret;
    }
    /* A run that never started leaves no record: its number is simply skipped. */
    c->main_runs++;
    c->main_starting = true;
    container_ref(c);
    svc_call_give(&op->call, call);
    return 0;
}

int
container_start(struct daemon *d, const char *handle, container_main_cb cb, void *arg,
                struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    int ret = main_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    return start_submit(d, c, CTR_CHANGE_START, cb, arg, call, err);
}

/* ---- stop, restart ------------------------------------------------------------ */

struct ctr_stop {
    struct svc_call call;
    container_main_cb cb;
    void *arg;
    struct ctr_stop *next; /* the container's stops in progress */
    struct container *c;   /* a reference */
    struct ctr_proc *pr;   /* the run being stopped; NULL once it is gone */
    struct ctr_listener lis;
    uv_timer_t *timer;
    bool killed; /* KILL was sent: the timer is the last wait */
    bool restart;
    int64_t timeout_s;
};

static void
stop_unlink(struct ctr_stop *op)
{
    for (struct ctr_stop **pp = &op->c->stopping; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            break;
        }
}

static void
stop_free(struct ctr_stop *op)
{
    stop_unlink(op);
    if (op->pr)
        ctr_unlisten(op->pr, &op->lis);
    if (op->timer) {
        uv_timer_stop(op->timer);
        uv_close((uv_handle_t *)op->timer, handle_free_cb);
    }
    container_unref(op->c);
    free(op);
}

static void
restart_started_cb(void *arg, const struct err *err)
{
    struct ctr_stop *op = arg;
    if (!op->call.detached)
        op->cb(op->arg, err);
    stop_free(op);
}

/* The run exited (err NULL), or the stop gave up. */
static void
stop_end(struct ctr_stop *op, const struct err *err)
{
    struct container *c = op->c;
    if (op->pr)
        ctr_unlisten(op->pr, &op->lis);
    op->pr = NULL;
    if (op->timer)
        uv_timer_stop(op->timer);
    if (!err && c->registered)
        ctr_events_emit(c, CTR_CHANGE_STOP, container_main_exit_code(c), 0);
    if (!err && op->restart && c->registered) {
        /* No longer a stop: the start's callback ends it. */
        stop_unlink(op);
        struct err serr = {0};
        struct svc_call *inner = NULL;
        int rc =
            start_submit(c->reg->d, c, CTR_CHANGE_RESTART, restart_started_cb, op, &inner, &serr);
        if (rc == 0 || rc == -EALREADY) {
            if (rc == -EALREADY) /* someone else started it meanwhile */
                restart_started_cb(op, NULL);
            return;
        }
        err = &serr;
        if (!op->call.detached)
            op->cb(op->arg, err);
        stop_free(op);
        return;
    }
    if (!op->call.detached)
        op->cb(op->arg, err);
    stop_free(op);
}

static void
stop_event(struct ctr_listener *l, enum ctr_event ev)
{
    struct ctr_stop *op = l->ctx;
    if (ev == CTR_EV_EXIT || ev == CTR_EV_GONE) {
        ctr_unlisten(op->pr, &op->lis);
        op->pr = NULL;
        stop_end(op, NULL);
    }
}

static void stop_timer_cb(uv_timer_t *t);

static void
stop_send(struct ctr_stop *op, int sig)
{
    struct container *c = op->c;
    struct err err = {0};
    struct svc_call *call = NULL;
    if (!op->pr)
        return;
    if (process_signal(c->reg->d, c->p->handle, op->pr->id, sig, noop_done_cb, NULL, &call, &err) <
        0)
        log_debug("container %s: stop: %s", c->p->handle, err.msg);
    else
        ctr_events_emit(c, CTR_CHANGE_KILL, -1, sig);
}

static void
stop_timer_cb(uv_timer_t *t)
{
    struct ctr_stop *op = t->data;
    if (op->killed) {
        struct err err;
        err_set(&err, ETIMEDOUT, "container %s: still running %d s after SIGKILL", op->c->p->handle,
                CTR_KILL_WAIT_S);
        stop_end(op, &err);
        return;
    }
    op->killed = true;
    stop_send(op, SIGKILL);
    uv_timer_start(op->timer, stop_timer_cb, CTR_KILL_WAIT_S * 1000, 0);
}

static int
stop_begin(struct daemon *d, const char *handle, int sig, int64_t timeout_s, bool restart,
           container_main_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    int ret = main_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (sig < 0 || sig > 64)
        return err_set(err, EINVAL, "signal %d: expected 1 to 64", sig);
    if (!container_main_running(c)) {
        if (restart)
            return start_submit(d, c, CTR_CHANGE_RESTART, cb, arg, call, err);
        return err_set(err, EALREADY, "container %s: not running", c->p->handle);
    }
    struct ctr_stop *op = calloc(1, sizeof(*op));
    uv_timer_t *timer = op ? malloc(sizeof(*timer)) : NULL;
    if (!timer) {
        free(op);
        return err_set(err, ENOMEM, "stop container %s: out of memory", handle);
    }
    op->cb = cb;
    op->arg = arg;
    op->c = c;
    container_ref(c);
    op->restart = restart;
    op->timeout_s = timeout_s >= 0 ? timeout_s : c->p->grace_time_s;
    op->pr = c->main_proc;
    op->lis.fn = stop_event;
    op->lis.ctx = op;
    ctr_listen(op->pr, &op->lis);
    uv_timer_init(d->loop, timer);
    timer->data = op;
    op->timer = timer;
    op->next = c->stopping;
    c->stopping = op;
    if (!sig)
        sig = c->p->main->stop_signal ? c->p->main->stop_signal : SIGTERM;
    stop_send(op, sig);
    /* A KILL first is already the last word; the timer then only bounds the wait. */
    op->killed = sig == SIGKILL;
    uv_timer_start(timer, stop_timer_cb,
                   op->killed ? CTR_KILL_WAIT_S * 1000 : (uint64_t)op->timeout_s * 1000, 0);
    svc_call_give(&op->call, call);
    return 0;
}

int
container_stop(struct daemon *d, const char *handle, int sig, int64_t timeout_s,
               container_main_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    return stop_begin(d, handle, sig, timeout_s, false, cb, arg, call, err);
}

int
container_restart(struct daemon *d, const char *handle, int64_t timeout_s, container_main_cb cb,
                  void *arg, struct svc_call **call, struct err *err)
{
    return stop_begin(d, handle, 0, timeout_s, true, cb, arg, call, err);
}

void
ctr_stop_abandon(struct container *c)
{
    while (c->stopping) {
        struct ctr_stop *op = c->stopping;
        op->call.detached = true;
        stop_free(op);
    }
}

/* ---- kill ------------------------------------------------------------------- */

struct kill_op {
    struct svc_call call;
    container_main_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct svc_call *inner;
    int sig;
};

static void
killed_cb(void *arg, const struct err *err)
{
    struct kill_op *op = arg;
    if (!err && op->c->registered)
        ctr_events_emit(op->c, CTR_CHANGE_KILL, -1, op->sig);
    if (!op->call.detached)
        op->cb(op->arg, err);
    container_unref(op->c);
    free(op);
}

int
container_kill(struct daemon *d, const char *handle, int sig, container_main_cb cb, void *arg,
               struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    int ret = main_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (!container_main_running(c))
        return err_set(err, ERR_CONFLICT, "container %s is not running", c->p->handle);
    struct kill_op *op = calloc(1, sizeof(*op));
    if (!op)
        return err_set(err, ENOMEM, "kill container %s: out of memory", handle);
    op->cb = cb;
    op->arg = arg;
    op->c = c;
    op->sig = sig;
    if ((ret = process_signal(d, handle, c->main_proc->id, sig, killed_cb, op, &op->inner, err)) <
        0) {
        free(op);
        return ret;
    }
    container_ref(c);
    svc_call_give(&op->call, call);
    return 0;
}

/* ---- wait ------------------------------------------------------------------- */

struct container_waiter {
    struct ctr_sub sub;
    container_wait_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct containers *reg;
    enum container_wait_cond cond;
    uv_timer_t *now; /* answers a condition already met, on the next turn */
    bool ended;
    int exit_code;
    /* In c->start_waiters: a not-running wait that came during a start. */
    struct container_waiter *start_next, **start_link;
};

static void
waiter_start_unlink(struct container_waiter *w)
{
    if (!w->start_link)
        return;
    *w->start_link = w->start_next;
    if (w->start_next)
        w->start_next->start_link = w->start_link;
    w->start_next = NULL;
    w->start_link = NULL;
}

static void
waiter_start_link(struct container_waiter *w)
{
    struct container *c = w->c;
    w->start_next = c->start_waiters;
    if (c->start_waiters)
        c->start_waiters->start_link = &w->start_next;
    c->start_waiters = w;
    w->start_link = &c->start_waiters;
}

static void
waiter_end(struct container_waiter *w, bool report, const struct err *err)
{
    if (w->ended)
        return;
    w->ended = true;
    waiter_start_unlink(w);
    ctr_events_unsubscribe(w->reg, &w->sub);
    if (report)
        w->cb(w->arg, err, w->exit_code);
    if (w->now) {
        uv_timer_stop(w->now);
        uv_close((uv_handle_t *)w->now, handle_free_cb);
    }
    container_unref(w->c);
    free(w);
}

static void
waiter_event(struct ctr_sub *s, const struct ctr_change *ev, struct container *c)
{
    struct container_waiter *w = s->ctx;
    if (c != w->c)
        return;
    if ((ev->kind == CTR_CHANGE_DIE && w->cond != CTR_WAIT_REMOVED) ||
        ev->kind == CTR_CHANGE_DESTROY) {
        w->exit_code = ev->exit_code >= 0 ? ev->exit_code : container_main_exit_code(c);
        waiter_end(w, true, NULL);
    }
}

static void
waiter_now_cb(uv_timer_t *t)
{
    struct container_waiter *w = t->data;
    w->exit_code = container_main_exit_code(w->c);
    waiter_end(w, true, NULL);
}

int
container_wait(struct daemon *d, const char *handle, enum container_wait_cond cond,
               container_wait_cb cb, void *arg, struct container_waiter **out, struct err *err)
{
    struct container *c = NULL;
    int ret = main_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    struct container_waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return err_set(err, ENOMEM, "wait for container %s: out of memory", handle);
    w->cb = cb;
    w->arg = arg;
    w->c = c;
    container_ref(c);
    w->reg = c->reg;
    w->cond = cond;
    w->sub.fn = waiter_event;
    w->sub.ctx = w;
    if (cond == CTR_WAIT_NOT_RUNNING && !container_main_running(c) && !c->main_starting) {
        w->now = malloc(sizeof(*w->now));
        if (!w->now) {
            container_unref(c);
            free(w);
            return err_set(err, ENOMEM, "wait for container %s: out of memory", handle);
        }
        uv_timer_init(d->loop, w->now);
        w->now->data = w;
        uv_timer_start(w->now, waiter_now_cb, 0, 0);
    } else if (cond == CTR_WAIT_NOT_RUNNING && c->main_starting) {
        waiter_start_link(w);
    }
    ctr_events_subscribe(c->reg, &w->sub);
    *out = w;
    return 0;
}

/*
 * The end of a start, for the not-running waits that came while it ran:
 * they follow the run it began; when none began, the container does not
 * run, and they are met now with its exit code (a program that could not
 * start: 127 or 126). The engine answers them so once the start let go of
 * the container.
 */
static void
waiters_after_start(struct container *c, bool began)
{
    struct container_waiter *w;
    while ((w = c->start_waiters)) {
        waiter_start_unlink(w);
        if (!began) {
            w->exit_code = container_main_exit_code(c);
            waiter_end(w, true, NULL);
        }
    }
}

void
container_wait_cancel(struct container_waiter *w)
{
    if (w)
        waiter_end(w, false, NULL);
}
