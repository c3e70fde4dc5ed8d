/*
 * Registry pulls into the store: the plan (resolve, per-layer calls,
 * commit) described in pull.h, on top of the registry client and the
 * import's image_build. This file holds the progress events, the commit
 * and the whole pull with threads of its own; the resolving is
 * pull_resolve.c, the blob downloads pull_fetch.c, the layers'
 * calls pull_layers.c. Pool threads; blocking.
 *
 * Layer states, under the plan's mutex:
 *   PENDING    its call has not started
 *   FETCHING   its call is downloading (and, if the layers below were
 *              done when it started, unpacking in the same pass)
 *   STAGED     its blob is staged or stored; unpacking waits for the
 *              layers below
 *   WAIT_DUP   the same blob as an earlier layer: it arrives with that
 *              layer's call
 *   UNPACKING  being unpacked from its blob by some call's advance()
 *   DONE       snapshot there, blob staged or stored
 * After every call, advance() unpacks, in order, the first layers that
 * are not DONE as long as their blobs are in; so whichever call completes
 * the layers below a staged one unpacks it, and no call ever waits for
 * another (a pool thread is never parked on a lock for a layer).
 */
#include "store/pull.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "store/image_build.h"
#include "store/oci.h"
#include "store/refname.h"
#include "store/pull_int.h"

int
pull_plan_cancelled(void *ctx)
{
    struct pull_plan *p = ctx;
    return __atomic_load_n(&p->stop, __ATOMIC_SEQ_CST) ||
           (p->cancel && __atomic_load_n(p->cancel, __ATOMIC_SEQ_CST));
}

int64_t
pull_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
pull_emit(struct pull_plan *p, const struct import_event *ev)
{
    if (!p->progress)
        return;
    pthread_mutex_lock(&p->progress_mu);
    p->progress(p->progress_ctx, ev);
    pthread_mutex_unlock(&p->progress_mu);
}

void
pull_emit_layer(struct pull_plan *p, size_t i, const char *status, int64_t done)
{
    const struct oci_layer *l = &p->b.manifest->layers[i];
    struct import_event ev = {.step = "layer",
                              .status = status,
                              .digest = l->desc.digest,
                              .chain_id = p->b.chain_ids[i],
                              .done = done,
                              .total = l->desc.size,
                              .index = (unsigned)i + 1,
                              .count = (unsigned)p->n};
    pull_emit(p, &ev);
}

/* ---- commit ------------------------------------------------------------- */

int
pull_plan_commit(struct pull_plan *p, struct meta_image **out, bool *created, struct err *err)
{
    if (p->stored) {
        *created = false;
        int rc = meta_image_put(p->st->meta, p->stored_img, p->name, NULL, err);
        if (rc < 0)
            return rc;
        if ((rc = meta_image_get(p->st->meta, p->stored_img->digest, out, err)) < 0)
            return rc;
        struct import_event ev = {.step = "image", .status = "present", .digest = (*out)->digest};
        pull_emit(p, &ev);
        return 0;
    }
    pthread_mutex_lock(&p->mu);
    bool failed = p->failed;
    if (failed)
        err_copy(err, &p->first_err);
    size_t missing = p->n;
    for (size_t i = 0; i < p->n && missing == p->n; i++)
        if (p->layers[i].state != L_DONE)
            missing = i;
    pthread_mutex_unlock(&p->mu);
    if (failed)
        return -err->code;
    if (pull_plan_cancelled(p))
        return err_set(err, ECANCELED, "pull %s: cancelled", p->what);
    if (missing < p->n)
        return err_set(err, EINVAL, "pull %s: layer %zu was not pulled", p->what, missing + 1);
    int rc = image_build_commit(&p->b, p->name, NULL, 0, out, created, err);
    if (rc < 0)
        return err_wrap(err, "pull %s", p->what);
    p->committed = true;
    struct import_event ev = {.step = "image",
                              .status = *created ? "created" : "present",
                              .digest = p->b.manifest_digest};
    pull_emit(p, &ev);
    return 0;
}

void
pull_plan_free(struct pull_plan *p)
{
    if (!p)
        return;
    if (p->inflight)
        store_inflight_end(p->st, p->b.manifest_digest);
    if (p->begun)
        image_build_end(&p->b, !p->committed);
    else {
        oci_manifest_free(p->b.manifest);
        oci_config_free(p->b.config);
    }
    meta_image_free(p->stored_img);
    registry_repo_close(p->repo);
    free(p->layers);
    free(p->name);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->progress_mu);
    free(p);
}

/* ---- the whole pull with threads of its own ------------------------------ */

struct pull_workers {
    struct pull_plan *p;
    size_t next; /* atomic */
};

static void *
worker_main(void *arg)
{
    struct pull_workers *w = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_SEQ_CST);
        if (i >= w->p->n)
            return NULL;
        struct err e = {0};
        if (pull_plan_layer(w->p, i, &e) < 0)
            return NULL;
    }
}

int
image_pull(struct store *st, struct registry_client *rc, const struct pull_request *req,
           unsigned parallel, struct meta_image **out, bool *created, struct err *err)
{
    struct pull_plan *p = NULL;
    int r = pull_plan_new(st, rc, req, &p, err);
    if (r < 0)
        return r;
    if (!p->stored) {
        unsigned n = parallel ? parallel : 1;
        if (n > p->n)
            n = p->n ? (unsigned)p->n : 1;
        struct pull_workers w = {.p = p};
        pthread_t *threads = calloc(n, sizeof(*threads));
        unsigned started = 0;
        for (unsigned k = 1; threads && k < n; k++)
            if (pthread_create(&threads[started], NULL, worker_main, &w) == 0)
                started++;
        worker_main(&w);
        for (unsigned k = 0; k < started; k++)
            pthread_join(threads[k], NULL);
        free(threads);
    }
    r = pull_plan_commit(p, out, created, err);
    pull_plan_free(p);
    return r;
}
