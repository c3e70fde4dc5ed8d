/*
 * Registry pulls (daemon/svc_pull.h): the table of pulls in progress and
 * the state machine that drives one pull's plan (store/pull.h) as pool
 * jobs. Loop thread, except the *_work functions, which call store/ only
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
#include "store/refname.h"
#include "store/registry.h"
#include "store/store.h"

#define PROGRESS_PIPE_BYTES (64 << 10)
/* Byte counts of a pull's downloads go out at most this often (the state
 * changes of each layer always do). */
#define BYTES_LINE_MS 250

struct image_pulls {
    struct daemon *d;
    struct registry_client *rc;
    unsigned parallel;
    unsigned grace_ms;
    bool shutting_down;
    struct pull_op *ops; /* every pull not DONE, newest first */
    /* Callers that joined a running pull get what they missed on the next
     * loop iteration, never inside the call (daemon/svc.h). */
    uv_timer_t replay_timer;
    bool replay_timer_live;
};

enum pull_stage { STAGE_RESOLVING, STAGE_FOLLOWING, STAGE_LAYERS, STAGE_FINISHING, STAGE_DONE };

struct pull_waiter {
    struct pull_op *op; /* NULL once answered */
    struct pull_waiter *next;
    image_loaded_cb done;
    void (*progress)(void *arg, const struct image_progress *ev);
    void *arg;
    bool replay; /* joined late: owed what it missed, and nothing before that */
};

struct pull_op {
    struct image_pulls *ps;
    struct pull_op *next;
    char *key; /* reference, platform and credentials: who may share it */
    /* What to pull (owned). reference is canonical, and the image's name. */
    char *reference, *registry, *repository, *tag, *digest;
    bool has_platform;
    struct oci_platform platform;
    bool has_creds;
    char *username, *password, *token, *identity_token; /* wiped when freed */

    enum pull_stage stage;
    struct pull_op *following; /* STAGE_FOLLOWING */
    int cancel;                /* atomic; the plan polls it */
    bool cancelled;            /* the loop's record of setting it */
    bool no_wait;              /* false: an upload holds the manifest, waiting is safe */
    bool finished_early;       /* the plan job also committed and freed */
    struct pull_waiter *waiters;
    uv_timer_t grace;

    struct pull_plan *plan;
    size_t n_layers, next_layer;
    unsigned running;       /* layer jobs submitted, not done */
    bool stop_layers;       /* a layer failed: submit no more */
    struct err local_err;   /* a failure of ours (a job that never ran) */
    const void *busy_owner; /* EALREADY: the holder's owner tag */
    int rc;                 /* plan job, then finishing job */
    struct err err;
    struct meta_image *image;
    bool created;

    struct bpipe *progress; /* every job -> loop */
    struct image_progress pending;
    size_t pending_len;
    struct image_progress resolved; /* replayed to callers that join late */
    struct image_progress *layer_last;
    size_t n_layer_last;
    uint64_t bytes_line_ms;
};

struct layer_job {
    struct pull_op *op;
    size_t index;
    int rc;
    struct err err;
};

static void op_end(struct pull_op *op);
static void op_start(struct pull_op *op);

/* ---- the table ---------------------------------------------------------------- */

static struct pull_op *
op_find(struct image_pulls *ps, const char *key)
{
    for (struct pull_op *o = ps->ops; o; o = o->next)
        if (!o->cancelled && strcmp(o->key, key) == 0)
            return o;
    return NULL;
}

static void
wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static void
op_closed_cb(uv_handle_t *h)
{
    struct pull_op *op = h->data;
    if (op->progress) {
        bpipe_release_job(op->progress);
        bpipe_release_loop(op->progress);
    }
    meta_image_free(op->image);
    free(op->layer_last);
    free(op->key);
    free(op->reference);
    free(op->registry);
    free(op->repository);
    free(op->tag);
    free(op->digest);
    wipe_free(op->username);
    wipe_free(op->password);
    wipe_free(op->token);
    wipe_free(op->identity_token);
    free(op);
}

static bool
op_interest(const struct pull_op *op)
{
    if (op->waiters)
        return true;
    for (struct pull_op *o = op->ps->ops; o; o = o->next)
        if (o->following == op && o->waiters)
            return true;
    return false;
}

static void
op_cancel(struct pull_op *op, const char *why)
{
    if (op->cancelled)
        return;
    op->cancelled = true;
    __atomic_store_n(&op->cancel, 1, __ATOMIC_SEQ_CST);
    log_info("pull %s: cancelled: %s", op->reference, why);
}

static void
grace_cb(uv_timer_t *t)
{
    struct pull_op *op = t->data;
    if (!op_interest(op))
        op_cancel(op, "no caller has waited for it for a while");
}

/* Nobody waits for op any more (directly or through a follower). */
static void
op_interest_lost(struct pull_op *op)
{
    if (op->stage == STAGE_DONE || op_interest(op))
        return;
    if (op->stage == STAGE_FOLLOWING) {
        /* No job runs for it: it just ends (and no caller hears of it). */
        struct pull_op *held = op->following;
        err_set(&op->err, ECANCELED, "pull %s: no caller waits for it", op->reference);
        op->rc = -ECANCELED;
        op_end(op);
        if (held)
            op_interest_lost(held);
        return;
    }
    if (op->ps->shutting_down)
        op_cancel(op, "the daemon is shutting down");
    else
        uv_timer_start(&op->grace, grace_cb, op->ps->grace_ms, 0);
}

/* ---- progress ----------------------------------------------------------------- */

/* On a job's thread: a copy of the event into the pipe, dropped when the
 * loop lags (byte counts first; the next one carries the sum anyway). */
static void
progress_put(struct pull_op *op, const struct image_progress *rec)
{
    size_t limit =
        strcmp(rec->status, "downloading") == 0 ? PROGRESS_PIPE_BYTES / 2 : PROGRESS_PIPE_BYTES;
    if (bpipe_buffered(op->progress) + sizeof(*rec) <= limit)
        bpipe_write(op->progress, rec, sizeof(*rec));
}

static void
progress_event(void *ctx, const struct import_event *ev)
{
    struct image_progress rec;
    image_progress_set(&rec, ev);
    progress_put(ctx, &rec);
}

static void
fan_out(struct pull_op *op, const struct image_progress *rec)
{
    struct pull_waiter *next;
    for (struct pull_waiter *w = op->waiters; w; w = next) {
        next = w->next;
        if (w->progress && !w->replay)
            w->progress(w->arg, rec);
    }
}

/* A layer's last state, kept for callers that join later. */
static struct image_progress *
layer_slot(struct pull_op *op, const struct image_progress *rec)
{
    if (rec->count == 0 || rec->index == 0 || rec->index > rec->count)
        return NULL;
    if (op->n_layer_last != rec->count) {
        struct image_progress *a = calloc(rec->count, sizeof(*a));
        if (!a)
            return NULL;
        free(op->layer_last);
        op->layer_last = a;
        op->n_layer_last = rec->count;
    }
    return &op->layer_last[rec->index - 1];
}

/*
 * Each layer of a pull goes waiting -> downloading (byte counts) ->
 * downloaded -> [unpacking ->] unpacked, or straight to cached. A layer
 * unpacked in the same pass as its download (its lower layers were done
 * when it started) gets its "downloaded" here, just before "unpacked", so
 * that every front end sees the same sequence.
 */
static void
op_progress(void *ctx, const struct image_progress *rec)
{
    struct pull_op *op = ctx;
    if (strcmp(rec->step, "manifest") == 0)
        op->resolved = *rec;
    struct image_progress *last = strcmp(rec->step, "layer") == 0 ? layer_slot(op, rec) : NULL;
    if (!last) {
        fan_out(op, rec);
        return;
    }
    if (strcmp(rec->status, "downloading") == 0) {
        bool first = strcmp(last->status, "downloading") != 0;
        bool same = !first && last->done == rec->done;
        bool final = rec->total >= 0 && rec->done >= rec->total;
        *last = *rec;
        uint64_t now = uv_now(op->ps->d->loop);
        if (same || (!first && !final && now - op->bytes_line_ms < BYTES_LINE_MS))
            return;
        op->bytes_line_ms = now;
    } else if (strcmp(rec->status, "unpacked") == 0 &&
               (strcmp(last->status, "downloading") == 0 || strcmp(last->status, "waiting") == 0)) {
        struct image_progress dl = *rec;
        snprintf(dl.status, sizeof(dl.status), "downloaded");
        dl.done = rec->total;
        fan_out(op, &dl);
        *last = *rec;
    } else {
        *last = *rec;
    }
    fan_out(op, rec);
}

static void
progress_notify(void *ctx)
{
    struct pull_op *op = ctx;
    image_progress_drain(op->progress, &op->pending, &op->pending_len, op_progress, op);
}

/* What a caller that joins a running pull has missed: each layer's latest state. */
static void
progress_replay(struct pull_op *op, struct pull_waiter *w)
{
    w->replay = false;
    if (!w->progress)
        return;
    if (op->resolved.step[0])
        w->progress(w->arg, &op->resolved);
    for (size_t i = 0; i < op->n_layer_last; i++)
        if (op->layer_last[i].step[0])
            w->progress(w->arg, &op->layer_last[i]);
}

static void
replay_cb(uv_timer_t *t)
{
    struct image_pulls *ps = t->data;
    for (struct pull_op *o = ps->ops; o; o = o->next) {
        struct pull_waiter *next;
        for (struct pull_waiter *w = o->waiters; w; w = next) {
            next = w->next;
            if (w->replay)
                progress_replay(o, w);
        }
    }
}

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
                                 .progress = progress_event,
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
        progress_event(op, &ev);
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
    op_end(op);
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
    op_end(op);
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
        op_start(op);
        return;
    }
    if (op->rc < 0 || op->finished_early) {
        op_end(op);
        return;
    }
    op->stage = STAGE_LAYERS;
    op->n_layers = pull_plan_layer_count(op->plan);
    layers_schedule(op);
}

/* (Re)starts the plan job. */
static void
op_start(struct pull_op *op)
{
    op->stage = STAGE_RESOLVING;
    op->following = NULL;
    op->rc = 0;
    memset(&op->err, 0, sizeof(op->err));
    if (op->ps->shutting_down ||
        job_submit_long(op->ps->d->jobs, "image.pull", resolve_work, resolve_done, op) < 0) {
        op->rc =
            err_set(&op->err, ECANCELED, "pull %s: the daemon is shutting down", op->reference);
        op_end(op);
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

static void
op_end(struct pull_op *op)
{
    op->stage = STAGE_DONE;
    op_unlink(op);
    uv_timer_stop(&op->grace);
    progress_notify(op); /* what the jobs wrote last comes before the answer */
    for (struct pull_waiter *w = op->waiters; w; w = w->next)
        if (w->replay)
            progress_replay(op, w);
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
            op_start(o);
    }
    uv_close((uv_handle_t *)&op->grace, op_closed_cb);
}

/* ---- joining ------------------------------------------------------------------ */

static int
op_set_reference(struct pull_op *op, const char *ref, struct err *err)
{
    if (image_ref_normalize(ref, &op->reference, err) < 0)
        return err_wrap(err, "field \"source.registry\"");
    /* domain/path[:tag][@digest], as the normaliser writes it. */
    const char *slash = strchr(op->reference, '/');
    const char *at = strchr(op->reference, '@');
    const char *end = at ? at : op->reference + strlen(op->reference);
    const char *colon = NULL;
    for (const char *p = slash; p && p < end; p++)
        if (*p == ':')
            colon = p;
    if (!slash)
        return err_set(err, EINVAL, "field \"source.registry\": %s has no repository", ref);
    op->registry = strndup(op->reference, (size_t)(slash - op->reference));
    op->repository = strndup(slash + 1, (size_t)((colon ? colon : end) - slash - 1));
    op->tag = colon ? strndup(colon + 1, (size_t)(end - colon - 1)) : NULL;
    op->digest = at ? strdup(at + 1) : NULL;
    if (!op->registry || !op->repository || (colon && !op->tag) || (at && !op->digest))
        return err_set(err, ENOMEM, "pull: out of memory");
    return 0;
}

static int
op_set_creds(struct pull_op *op, const struct registry_creds *c, struct err *err)
{
    if (!c || registry_creds_empty(c))
        return 0;
    bool basic = c->username || c->password;
    if (basic && (!c->username || !*c->username || !c->password))
        return err_set(err, EINVAL,
                       "field \"auth\": give \"username\" and \"password\" together, or "
                       "\"token\"");
    if ((basic || c->identity_token) && c->token)
        return err_set(
            err, EINVAL,
            "field \"auth\": give \"username\" and \"password\", or \"token\", not both");
    op->has_creds = true;
    if ((c->username && !(op->username = strdup(c->username))) ||
        (c->password && !(op->password = strdup(c->password))) ||
        (c->token && !(op->token = strdup(c->token))) ||
        (c->identity_token && !(op->identity_token = strdup(c->identity_token))))
        return err_set(err, ENOMEM, "pull: out of memory");
    return 0;
}

static int
op_set_key(struct pull_op *op, const struct registry_creds *c, struct err *err)
{
    char plat[128] = "host", who[72];
    if (op->has_platform)
        oci_platform_format(&op->platform, plat, sizeof(plat));
    registry_creds_id(op->has_creds ? c : &(struct registry_creds){0}, who);
    if (asprintf(&op->key, "%s\n%s\n%s", op->reference, plat, who) < 0) {
        op->key = NULL;
        return err_set(err, ENOMEM, "pull: out of memory");
    }
    return 0;
}

static struct pull_op *
op_new(struct image_pulls *ps, const struct image_source *o, struct err *err)
{
    struct pull_op *op = calloc(1, sizeof(*op));
    if (!op) {
        err_set(err, ENOMEM, "pull: out of memory");
        return NULL;
    }
    op->ps = ps;
    op->no_wait = true;
    if (o->platform) {
        op->platform = *o->platform;
        op->has_platform = true;
    }
    uv_timer_init(ps->d->loop, &op->grace);
    op->grace.data = op;
    if (op_set_reference(op, o->registry, err) < 0 || op_set_creds(op, o->creds, err) < 0 ||
        op_set_key(op, o->creds, err) < 0 ||
        (!(op->progress = bpipe_new(ps->d->loop, PROGRESS_PIPE_BYTES, progress_notify, op)) &&
         err_set(err, ENOMEM, "pull: out of memory"))) {
        uv_close((uv_handle_t *)&op->grace, op_closed_cb);
        return NULL;
    }
    return op;
}

int
pull_join(struct daemon *d, const struct image_source *o, image_loaded_cb done, void *arg,
          struct pull_waiter **out, struct err *err)
{
    struct image_pulls *ps = d->pulls;
    if (!ps || ps->shutting_down)
        return err_set(err, ECANCELED, "pull: the daemon is shutting down");
    if (o->name)
        return err_set(err, EINVAL,
                       "query ?name=: a pulled image is named by its reference (%.200s)",
                       o->registry);
    struct pull_waiter *w = calloc(1, sizeof(*w));
    struct pull_op *op = w ? op_new(ps, o, err) : NULL;
    if (!op) {
        if (!w)
            err_set(err, ENOMEM, "pull: out of memory");
        free(w);
        return -err->code;
    }
    w->done = done;
    w->progress = o->progress;
    w->arg = arg;
    struct pull_op *running = op_find(ps, op->key);
    if (running) {
        uv_close((uv_handle_t *)&op->grace, op_closed_cb);
        op = running;
        uv_timer_stop(&op->grace);
        if (op->following)
            uv_timer_stop(&op->following->grace);
        w->replay = true;
        if (!ps->replay_timer_live) {
            uv_timer_init(d->loop, &ps->replay_timer);
            ps->replay_timer.data = ps;
            ps->replay_timer_live = true;
        }
        uv_timer_start(&ps->replay_timer, replay_cb, 0, 0);
    } else {
        op->next = ps->ops;
        ps->ops = op;
        op_start(op);
        if (op->stage == STAGE_DONE) { /* the job could not start: op is ending */
            free(w);
            return err_set(err, ECANCELED, "pull: the daemon is shutting down");
        }
    }
    w->op = op;
    w->next = op->waiters;
    op->waiters = w;
    *out = w;
    return 0;
}

void
pull_waiter_detach(struct pull_waiter *w)
{
    if (!w)
        return;
    struct pull_op *op = w->op;
    if (op) {
        for (struct pull_waiter **p = &op->waiters; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
            }
    }
    free(w);
    if (op)
        op_interest_lost(op);
}

/* ---- the service -------------------------------------------------------------- */

#ifdef BERTH_TEST_HOOKS
/* Test builds: BERTH_TEST_REGISTRY_TIMEOUTS="connect_ms,low_speed_s,doc_ms,
 * attempts,backoff_ms" for loopback registries that stall on purpose, and
 * BERTH_TEST_PULL_GRACE_MS for the grace of a pull nobody waits for. */
static void
test_hooks(struct registry_opts *o, unsigned *grace_ms)
{
    const char *t = getenv("BERTH_TEST_REGISTRY_TIMEOUTS");
    if (t)
        sscanf(t, "%u,%u,%u,%u,%u", &o->connect_timeout_ms, &o->low_speed_time_s,
               &o->doc_timeout_ms, &o->max_attempts, &o->backoff_ms);
    const char *g = getenv("BERTH_TEST_PULL_GRACE_MS");
    if (g)
        *grace_ms = (unsigned)strtoul(g, NULL, 10);
}
#endif

int
image_pulls_new(struct daemon *d, struct image_pulls **out, struct err *err)
{
    const struct config *cfg = d->cfg;
    struct image_pulls *ps = calloc(1, sizeof(*ps));
    struct registry_ca *cas = calloc(cfg->n_registry_cas + 1, sizeof(*cas));
    struct registry_mirror *mirrors = calloc(cfg->n_registry_mirrors + 1, sizeof(*mirrors));
    if (!ps || !cas || !mirrors) {
        free(ps);
        free(cas);
        free(mirrors);
        return err_set(err, ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < cfg->n_registry_cas; i++)
        cas[i] = (struct registry_ca){.host = cfg->registry_ca_hosts[i],
                                      .file = cfg->registry_ca_files[i]};
    /* Mirrors are docker.io's, as Docker's registry-mirrors are. */
    for (size_t i = 0; i < cfg->n_registry_mirrors; i++)
        mirrors[i] = (struct registry_mirror){.host = "docker.io", .url = cfg->registry_mirrors[i]};
    struct registry_opts o = {.auth_file = cfg->registry_auth,
                              .cas = cas,
                              .n_cas = cfg->n_registry_cas,
                              .insecure = (const char *const *)cfg->insecure_registries,
                              .n_insecure = cfg->n_insecure_registries,
                              .mirrors = mirrors,
                              .n_mirrors = cfg->n_registry_mirrors};
    ps->d = d;
    ps->parallel = cfg->pull_parallel ? cfg->pull_parallel : 1;
    ps->grace_ms = PULL_GRACE_MS;
#ifdef BERTH_TEST_HOOKS
    test_hooks(&o, &ps->grace_ms);
#endif
    ps->rc = registry_client_new(&o, err);
    free(cas);
    free(mirrors);
    if (!ps->rc) {
        free(ps);
        return -err->code;
    }
    *out = ps;
    return 0;
}

void
image_pulls_shutdown(struct image_pulls *ps)
{
    if (!ps)
        return;
    ps->shutting_down = true;
    if (ps->replay_timer_live) {
        uv_close((uv_handle_t *)&ps->replay_timer, NULL);
        ps->replay_timer_live = false;
    }
    struct pull_op *next;
    for (struct pull_op *o = ps->ops; o; o = next) {
        next = o->next;
        if (o->stage == STAGE_FOLLOWING) {
            o->rc =
                err_set(&o->err, ECANCELED, "pull %s: the daemon is shutting down", o->reference);
            op_end(o);
            next = ps->ops; /* op_end may have changed the list: start over */
            continue;
        }
        op_cancel(o, "the daemon is shutting down");
    }
}

void
image_pulls_free(struct image_pulls *ps)
{
    if (!ps)
        return;
    if (ps->ops)
        log_error("pulls freed with some still running");
    registry_client_free(ps->rc);
    free(ps);
}
