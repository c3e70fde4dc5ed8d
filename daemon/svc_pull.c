/*
 * Registry pulls (daemon/svc_pull.h): the state machine that drives one
 * pull's plan (store/pull.h) as pool jobs, and its end; the table of pulls
 * in progress is svc_pull_table.c, their progress svc_pull_progress.c.
 * Loop thread, except the *_work functions, which call store/ only
 * and touch nothing of the op but what their job owns: the plan job
 * writes plan, rc, err, busy_owner, image and created; a layer job its
 * own struct layer_job; the finishing job plan, rc, err, image, created.
 * Progress events come back from every job of a pull through one bounded
 * pipe of fixed-size records, as an import's do.
 *
 * A pull's stages:
 *   RESOLVING  its plan job runs (pull_plan_new; for a stored image also
 *              the commit and the end, so a warm pull is one job)
 *   FOLLOWING  the store said another pull of ours holds the same
 *              manifest: no job, it starts again when that one ends
 *   LAYERS     layer jobs, at most ps->parallel at once, in index order
 *   FINISHING  the commit-and-free job runs
 *   DONE       answered; unlinked; its timer is closing
 */
#include "daemon/svc_pull.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "store/pull.h"
#include "store/registry.h"
#include "store/store.h"
#include "daemon/svc_pull_int.h"

struct layer_job {
    struct pull_op *op;
    size_t index;
    int rc;
    struct err err;
};

/* ---- the jobs ----------------------------------------------------------------- */

static void
plan_request(struct pull_op *op, struct pull_request *req, struct registry_creds *creds)
{
    *creds = (struct registry_creds){.username = op->username,
                                     .password = op->password,
                                     .token = op->token,
                                     .identity_token = op->identity_token};
    *req = (struct pull_request){.registry = op->registry,
                                 .repository = op->repository,
                                 .tag = op->tag,
                                 .digest = op->digest,
                                 .name = op->reference,
                                 .platform = op->has_platform ? &op->platform : NULL,
                                 .creds = op->has_creds ? creds : NULL,
                                 .progress = pull_progress_event,
                                 .progress_ctx = op,
                                 .cancel = &op->cancel,
                                 .no_wait = op->no_wait,
                                 .owner = op,
                                 .busy_owner = &op->busy_owner};
}

static void
resolve_work(void *ctx)
{
    struct pull_op *op = ctx;
    struct store *st = op->ps->d->store;
    struct pull_request req;
    struct registry_creds creds;
    plan_request(op, &req, &creds);
    op->busy_owner = NULL;
    op->rc = pull_plan_new(st, op->ps->rc, &req, &op->plan, &op->err);
    if (op->rc < 0)
        return;
    if (pull_plan_stored(op->plan)) {
        /* Stored already: the name is added now, in this job. */
        op->rc = pull_plan_commit(op->plan, &op->image, &op->created, &op->err);
        pull_plan_free(op->plan);
        op->plan = NULL;
        op->finished_early = true;
        bpipe_close_job(op->progress);
        return;
    }
    /* Every layer is known now: what Docker shows as "Pulling fs layer". */
    size_t n = pull_plan_layer_count(op->plan);
    for (size_t i = 0; i < n; i++) {
        int64_t size = 0;
        const char *digest = pull_plan_layer_digest(op->plan, i, &size);
        struct import_event ev = {.step = "layer",
                                  .status = "waiting",
                                  .digest = digest,
                                  .total = size,
                                  .index = (unsigned)i + 1,
                                  .count = (unsigned)n};
        pull_progress_event(op, &ev);
    }
}

static void
finish_work(void *ctx)
{
    struct pull_op *op = ctx;
    if (op->local_err.code) {
        err_copy(&op->err, &op->local_err);
        op->rc = -op->local_err.code;
    } else {
        op->rc = pull_plan_commit(op->plan, &op->image, &op->created, &op->err);
        /* Before pull_plan_free: the plan's lease keeps the image just
         * stored out of the policy's prune. */
        if (op->rc == 0)
            images_size_policy(op->ps->d, op->image, op->created);
    }
    pull_plan_free(op->plan);
    op->plan = NULL;
    bpipe_close_job(op->progress);
}

static void
finish_done(void *ctx, bool cancelled)
{
    struct pull_op *op = ctx;
    if (cancelled) {
        /* Shutdown cancelled it before it ran: the plan still has to go,
         * and shutdown is the one time the loop may wait on disk here. */
        if (!op->local_err.code)
            err_set(&op->local_err, ECANCELED, "pull %s: the daemon is shutting down",
                    op->reference);
        finish_work(op);
    }
    pull_op_end(op);
}

static void
finish_start(struct pull_op *op)
{
    op->stage = STAGE_FINISHING;
    if (job_submit(op->ps->d->jobs, "image.pull", finish_work, finish_done, op) == 0)
        return;
    /* The queue is shutting down: the plan still has to go. Shutdown is the
     * one time the loop may wait on disk here. */
    if (!op->local_err.code)
        err_set(&op->local_err, ECANCELED, "pull %s: the daemon is shutting down", op->reference);
    finish_work(op);
    pull_op_end(op);
}

static void
layer_work(void *ctx)
{
    struct layer_job *j = ctx;
    j->rc = pull_plan_layer(j->op->plan, j->index, &j->err);
}

static void layers_schedule(struct pull_op *op);

static void
layer_done(void *ctx, bool cancelled)
{
    struct layer_job *j = ctx;
    struct pull_op *op = j->op;
    op->running--;
    if (cancelled) {
        /* Never ran: the plan cannot be committed. */
        op->stop_layers = true;
        if (!op->local_err.code)
            err_set(&op->local_err, ECANCELED, "pull %s: the daemon is shutting down",
                    op->reference);
    } else if (j->rc < 0) {
        op->stop_layers = true; /* the commit reports the first error */
    }
    free(j);
    layers_schedule(op);
}

static void
layers_schedule(struct pull_op *op)
{
    while (!op->stop_layers && !op->cancelled && op->running < op->ps->parallel &&
           op->next_layer < op->n_layers) {
        struct layer_job *j = calloc(1, sizeof(*j));
        if (j) {
            j->op = op;
            j->index = op->next_layer;
        }
        if (!j ||
            job_submit_long(op->ps->d->jobs, "image.pull.layer", layer_work, layer_done, j) < 0) {
            op->stop_layers = true;
            err_set(&op->local_err, j ? ECANCELED : ENOMEM, "pull %s: %s", op->reference,
                    j ? "the daemon is shutting down" : "out of memory");
            free(j);
            break;
        }
        op->next_layer++;
        op->running++;
    }
    if (op->running == 0 && (op->next_layer == op->n_layers || op->stop_layers || op->cancelled))
        finish_start(op);
}

/* The op the store named as holding our manifest, if it is one of ours. */
static struct pull_op *
op_holder(struct pull_op *op)
{
    for (struct pull_op *o = op->ps->ops; o; o = o->next)
        if (o == op->busy_owner && o != op)
            return o;
    return NULL;
}

static void
resolve_done(void *ctx, bool cancelled)
{
    struct pull_op *op = ctx;
    if (cancelled && op->rc == 0 && !op->plan)
        op->rc =
            err_set(&op->err, ECANCELED, "pull %s: the daemon is shutting down", op->reference);
    if (op->rc == -EALREADY && (op->cancelled || op->ps->shutting_down))
        op->rc = err_set(&op->err, ECANCELED, "pull %s: %s", op->reference,
                         op->ps->shutting_down ? "the daemon is shutting down" : "cancelled");
    if (op->rc == -EALREADY) {
        /* Another import holds this manifest. One of our pulls: wait for
         * its end here, on the loop. An upload or a layout import (no owner
         * tag): it needs no job of ours to finish, so the store's own wait
         * is safe. */
        struct pull_op *holder = op_holder(op);
        if (holder) {
            op->stage = STAGE_FOLLOWING;
            op->following = holder;
            log_debug("pull %s: waits for the pull of %s (the same image)", op->reference,
                      holder->reference);
            return;
        }
        if (!op->busy_owner)
            op->no_wait = false;
        pull_op_start(op);
        return;
    }
    if (op->rc < 0 || op->finished_early) {
        pull_op_end(op);
        return;
    }
    op->stage = STAGE_LAYERS;
    op->n_layers = pull_plan_layer_count(op->plan);
    layers_schedule(op);
}

/* (Re)starts the plan job. */
void
pull_op_start(struct pull_op *op)
{
    op->stage = STAGE_RESOLVING;
    op->following = NULL;
    op->rc = 0;
    memset(&op->err, 0, sizeof(op->err));
    if (op->ps->shutting_down ||
        job_submit_long(op->ps->d->jobs, "image.pull", resolve_work, resolve_done, op) < 0) {
        op->rc =
            err_set(&op->err, ECANCELED, "pull %s: the daemon is shutting down", op->reference);
        pull_op_end(op);
    }
}

/* ---- the end ------------------------------------------------------------------ */

static void
op_unlink(struct pull_op *op)
{
    for (struct pull_op **p = &op->ps->ops; *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            break;
        }
}

void
pull_op_end(struct pull_op *op)
{
    op->stage = STAGE_DONE;
    op_unlink(op);
    uv_timer_stop(&op->grace);
    pull_progress_notify(op); /* what the jobs wrote last comes before the answer */
    for (struct pull_waiter *w = op->waiters; w; w = w->next)
        if (w->replay)
            pull_progress_replay(op, w);
    const struct err *err = op->rc < 0 ? &op->err : NULL;
    if (!err)
        log_info("image %s: pulled %s%s", op->image->digest, op->reference,
                 op->created ? "" : " (was stored)");
    else if (!op->waiters && err->code != ECANCELED)
        log_info("pull failed: %s", err->msg); /* nobody else will report it */
    while (op->waiters) {
        struct pull_waiter *w = op->waiters;
        op->waiters = w->next;
        w->op = NULL;
        w->done(w->arg, err, op->image, op->created);
    }
    /* Pulls that waited for this one try again (and find it stored). */
    struct pull_op *next;
    for (struct pull_op *o = op->ps->ops; o; o = next) {
        next = o->next;
        if (o->following == op)
            pull_op_start(o);
    }
    uv_close((uv_handle_t *)&op->grace, pull_op_closed_cb);
}
