/*
 * The setup's outline, shared by the Linux and the Windows network
 * service (daemon/net_setup.h): state, error, queued callbacks, the
 * job's queueing and undo, and the teardown's end. Loop thread, except net_probe_disabled.
 */
#include "daemon/net_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct net_setup_cb {
    struct net_setup_cb *next;
    net_done_cb cb;
    void *arg;
};

void
net_setup_init(struct net_setup *s, struct job_queue *jobs, unsigned *inflight,
               const bool *shutting_down)
{
    memset(s, 0, sizeof(*s));
    s->jobs = jobs;
    s->inflight = inflight;
    s->shutting_down = shutting_down;
}

void
net_setup_close(struct net_setup *s)
{
    while (s->cbs) {
        struct net_setup_cb *c = s->cbs;
        s->cbs = c->next;
        free(c);
    }
}

static void
job_drop(const struct net_setup_job *ops, void *job)
{
    if (job)
        ops->free(job);
}

int
net_setup_begin(struct net_setup *s, const struct net_setup_job *ops, void *job, net_done_cb cb,
                void *arg, struct err *err)
{
    if (*s->shutting_down) {
        job_drop(ops, job);
        return err_set(err, ECANCELED, "network: shutting down");
    }
    if (cb) {
        struct net_setup_cb *c = calloc(1, sizeof(*c));
        if (!c) {
            job_drop(ops, job);
            return err_set(err, ENOMEM, "network setup: out of memory");
        }
        c->cb = cb;
        c->arg = arg;
        c->next = s->cbs;
        s->cbs = c;
    }
    if (s->state == NET_SETUP_RUNNING) {
        job_drop(ops, job);
        return 0;
    }
    int rc = job ? job_submit(s->jobs, ops->name, ops->work, ops->done, job) : -ENOMEM;
    if (rc < 0) {
        job_drop(ops, job);
        if (cb) {
            struct net_setup_cb *c = s->cbs;
            s->cbs = c->next;
            free(c);
        }
        return err_set(err, -rc, "network setup: %s",
                       rc == -ECANCELED ? "shutting down" : "cannot queue the job");
    }
    s->state = NET_SETUP_RUNNING;
    (*s->inflight)++;
    return 0;
}

void
net_setup_end(struct net_setup *s, bool cancelled, const char *network, int *rc, struct err *err)
{
    (*s->inflight)--;
    if (cancelled && *rc == 0)
        *rc = err_set(err, ECANCELED, "network %s: setup cancelled (shutting down)", network);
    s->state = *rc < 0 ? NET_SETUP_FAILED : NET_SETUP_DONE;
    if (*rc < 0) {
        err_copy(&s->err, err);
        log_error("net: %s", err->msg);
    } else {
        memset(&s->err, 0, sizeof(s->err));
    }
}

void
net_setup_notify(struct net_setup *s, int rc, const struct err *err)
{
    struct net_setup_cb *cbs = s->cbs;
    s->cbs = NULL;
    while (cbs) {
        struct net_setup_cb *c = cbs;
        cbs = c->next;
        c->cb(c->arg, rc < 0 ? err : NULL);
        free(c);
    }
}

int
net_setup_busy(const struct net_setup *s, const char *network, struct err *err)
{
    if (s->state == NET_SETUP_RUNNING)
        return err_set(err, EBUSY, "network %s: a setup is running", network);
    return 0;
}

void
net_teardown_end(struct net_setup *s, bool cancelled, int *rc, struct err *err)
{
    (*s->inflight)--;
    if (cancelled && *rc == 0)
        *rc = err_set(err, ECANCELED, "network teardown cancelled");
}

const struct err *
net_setup_failure(const struct net_setup *s)
{
    return s->state == NET_SETUP_FAILED ? &s->err : NULL;
}

void
net_setup_waiter_err(const struct net_setup *s, struct err *out)
{
    memset(out, 0, sizeof(*out));
    err_set(out, ERR_UNAVAILABLE, "%s", s->err.msg);
}

bool
net_probe_disabled(bool disabled, struct net_health *out)
{
    memset(out, 0, sizeof(*out));
    if (!disabled)
        return false;
    out->disabled = true;
    snprintf(out->reason, sizeof(out->reason), "networking is off (--network none)");
    return true;
}
