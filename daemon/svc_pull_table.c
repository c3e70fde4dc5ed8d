/*
 * The pull service's table (daemon/svc_pull.h): the pulls in progress,
 * found by who may share them, joined by callers and left by them (a pull
 * nobody waits for goes on for its grace time, then is cancelled), and
 * the service's lifetime: new, shutdown, free. Loop thread.
 */
#include "daemon/svc_pull_int.h"

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

void
pull_op_closed_cb(uv_handle_t *h)
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
        pull_op_end(op);
        if (held)
            op_interest_lost(held);
        return;
    }
    if (op->ps->shutting_down)
        op_cancel(op, "the daemon is shutting down");
    else
        uv_timer_start(&op->grace, grace_cb, op->ps->grace_ms, 0);
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
        (!(op->progress = bpipe_new(ps->d->loop, PROGRESS_PIPE_BYTES, pull_progress_notify, op)) &&
         err_set(err, ENOMEM, "pull: out of memory"))) {
        uv_close((uv_handle_t *)&op->grace, pull_op_closed_cb);
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
        uv_close((uv_handle_t *)&op->grace, pull_op_closed_cb);
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
        uv_timer_start(&ps->replay_timer, pull_replay_cb, 0, 0);
    } else {
        op->next = ps->ops;
        ps->ops = op;
        pull_op_start(op);
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
            pull_op_end(o);
            next = ps->ops; /* pull_op_end may have changed the list: start over */
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
