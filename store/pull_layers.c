/*
 * A pull's per-layer calls (pull_plan_layer) and the advance() after each
 * that unpacks, in order, the layers whose blobs are in; the states are
 * described in pull.c. Pool threads; blocking on the network and on disk.
 */
#include "store/pull_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "store/image_build.h"
#include "store/oci.h"
#include "store/refname.h"

/* ---- layers ------------------------------------------------------------- */

static void
set_state(struct pull_plan *p, size_t i, enum layer_state s, bool has_blob)
{
    pthread_mutex_lock(&p->mu);
    p->layers[i].state = s;
    if (has_blob)
        p->layers[i].has_blob = true;
    pthread_mutex_unlock(&p->mu);
}

static bool
lowers_done(struct pull_plan *p, size_t i)
{
    pthread_mutex_lock(&p->mu);
    bool done = true;
    for (size_t k = 0; k < i && done; k++)
        done = p->layers[k].state == L_DONE;
    pthread_mutex_unlock(&p->mu);
    return done;
}

/* A layer whose snapshot is there: nothing to unpack. */
static void
layer_cached(struct pull_plan *p, size_t i)
{
    bool exists = false;
    int64_t size = 0;
    struct err ignored = {0};
    if (meta_snapshot_size(p->st->meta, p->b.chain_ids[i], &size, &exists, &ignored) < 0)
        size = 0;
    p->b.unpacked[i] = size;
    pull_emit_layer(p, i, "cached", p->b.manifest->layers[i].desc.size);
}

static int
unpack_claimed(struct pull_plan *p, size_t i, struct snapshot_claim *claim,
               const struct image_build_source *src, struct err *err)
{
    char **lowers = image_build_lowers(&p->b, i);
    if (!lowers) {
        snapshot_abort(claim);
        blob_writer_abort(src->tee);
        return err_set(err, ENOMEM, "out of memory");
    }
    int rc = image_build_layer_unpack(&p->b, i, (const char *const *)lowers, claim, src, err);
    image_build_lowers_free(lowers);
    if (rc < 0) {
        snapshot_abort(claim);
        return rc;
    }
    if ((rc = snapshot_commit(claim, err)) < 0)
        return rc;
    __atomic_add_fetch(&p->b.snapshots_built, 1, __ATOMIC_SEQ_CST);
    pull_emit_layer(p, i, "unpacked", p->b.manifest->layers[i].desc.size);
    return 0;
}

struct fd_source {
    int fd;
};

static ssize_t
fd_read_cb(void *ctx, void *buf, size_t len)
{
    struct fd_source *s = ctx;
    for (;;) {
        ssize_t n = read(s->fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -errno : n;
    }
}

/* Unpacks layer i from its staged or stored blob (the layers below are done). */
static int
unpack_from_blob(struct pull_plan *p, size_t i, struct err *err)
{
    const struct oci_layer *l = &p->b.manifest->layers[i];
    if (snapshot_exists(p->st->snaps, p->b.chain_ids[i])) {
        layer_cached(p, i);
        return 0;
    }
    struct snapshot_claim *claim = NULL;
    int rc = snapshot_acquire(p->st->snaps, p->b.chain_ids[i], &claim, err);
    if (rc < 0)
        return rc;
    if (rc == SNAPSHOT_EXISTS) {
        layer_cached(p, i);
        return 0;
    }
    cleanup_free char *path = image_build_blob_location(&p->b, l->desc.digest);
    struct fd_source fs = {.fd = path ? osfs_open(path, O_RDONLY, 0) : -ENOMEM};
    if (fs.fd < 0) {
        snapshot_abort(claim);
        return err_errno(err, -fs.fd, "layer %s: open its blob", l->desc.digest);
    }
    pull_emit_layer(p, i, "unpacking", 0);
    struct image_build_source src = {.read = fd_read_cb, .ctx = &fs};
    rc = unpack_claimed(p, i, claim, &src, err);
    close(fs.fd);
    return rc;
}

/* Downloads layer i and unpacks it in the same pass (the layers below are done). */
static int
download_and_unpack(struct pull_plan *p, size_t i, struct err *err)
{
    const struct oci_layer *l = &p->b.manifest->layers[i];
    struct snapshot_claim *claim = NULL;
    int rc = snapshot_acquire(p->st->snaps, p->b.chain_ids[i], &claim, err);
    if (rc < 0)
        return rc;
    if (rc == SNAPSHOT_EXISTS) { /* another import built it meanwhile */
        if ((rc = pull_download(p, &l->desc, i, -1, err)) < 0)
            return rc;
        layer_cached(p, i);
        return 0;
    }
    struct net_source net = {.p = p, .layer = i, .last_ms = pull_now_ms()};
    if ((rc = registry_blob_open(p->repo, l->desc.digest, l->desc.size, &net.blob, err)) < 0) {
        snapshot_abort(claim);
        return rc;
    }
    struct image_build_source src = {.read = pull_net_read_cb, .ctx = &net};
    src.tee = blob_writer_new(p->st->blobs, p->b.staging, l->desc.digest, l->desc.size, -1, err);
    if (!src.tee) {
        registry_blob_close(net.blob);
        snapshot_abort(claim);
        return -err->code;
    }
    pull_emit_layer(p, i, "downloading", 0);
    rc = unpack_claimed(p, i, claim, &src, err);
    registry_blob_close(net.blob);
    if (rc < 0 && net.failed) {
        /* The registry's failure, not the unpacker's view of it. */
        err_copy(err, &net.err);
        err_wrap(err, "layer %s", l->desc.digest);
    }
    return rc;
}

/* Unpacks, in order, the first layers not done whose blobs are in. */
static int
advance(struct pull_plan *p, struct err *err)
{
    for (;;) {
        if (pull_plan_cancelled(p))
            return 0;
        pthread_mutex_lock(&p->mu);
        size_t j = 0;
        while (j < p->n && p->layers[j].state == L_DONE)
            j++;
        bool ready = false;
        if (j < p->n) {
            struct plan_layer *L = &p->layers[j];
            ready =
                L->state == L_STAGED || (L->state == L_WAIT_DUP && p->layers[L->dup_of].has_blob);
            if (ready)
                L->state = L_UNPACKING;
        }
        pthread_mutex_unlock(&p->mu);
        if (!ready)
            return 0;
        int rc = unpack_from_blob(p, j, err);
        if (rc < 0)
            return rc;
        set_state(p, j, L_DONE, true);
    }
}

static int
layer_work(struct pull_plan *p, size_t i, struct err *err)
{
    const struct oci_layer *l = &p->b.manifest->layers[i];
    const char *chain = p->b.chain_ids[i];
    /* The same blob as an earlier layer: it comes with that layer. */
    if (p->layers[i].dup_of >= 0) {
        set_state(p, i, L_WAIT_DUP, false);
        return 0;
    }
    bool have = image_build_blob_present(&p->b, l->desc.digest, NULL);
    if (have && snapshot_exists(p->st->snaps, chain)) {
        layer_cached(p, i);
        set_state(p, i, L_DONE, true);
        return 0;
    }
    if (have) { /* stored before: advance() unpacks it from there */
        set_state(p, i, L_STAGED, true);
        return 0;
    }
    int rc;
    if (snapshot_exists(p->st->snaps, chain)) {
        /* Unpacked for another image whose blob was compressed otherwise. */
        if ((rc = pull_download(p, &l->desc, i, -1, err)) < 0)
            return err_wrap(err, "layer %s", l->desc.digest);
        layer_cached(p, i);
        set_state(p, i, L_DONE, true);
        return 0;
    }
    if (lowers_done(p, i)) {
        if ((rc = download_and_unpack(p, i, err)) < 0)
            return rc;
        set_state(p, i, L_DONE, true);
        return 0;
    }
    if ((rc = pull_download(p, &l->desc, i, -1, err)) < 0)
        return err_wrap(err, "layer %s", l->desc.digest);
    pull_emit_layer(p, i, "downloaded", l->desc.size);
    set_state(p, i, L_STAGED, true);
    return 0;
}

static void
record_failure(struct pull_plan *p, const struct err *e)
{
    pthread_mutex_lock(&p->mu);
    /* The first real failure wins over the cancellations it caused. */
    if (!p->failed || (p->first_err.code == ECANCELED && e->code != ECANCELED)) {
        err_copy(&p->first_err, e);
        p->failed = true;
    }
    pthread_mutex_unlock(&p->mu);
    __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
}

int
pull_plan_layer(struct pull_plan *p, size_t i, struct err *err)
{
    if (p->stored || i >= p->n)
        return err_set(err, EINVAL, "pull %s: no layer %zu", p->what, i + 1);
    pthread_mutex_lock(&p->mu);
    bool twice = p->layers[i].called;
    p->layers[i].called = true;
    if (!twice)
        p->layers[i].state = L_FETCHING;
    pthread_mutex_unlock(&p->mu);
    if (twice)
        return err_set(err, EINVAL, "pull %s: layer %zu pulled twice", p->what, i + 1);
    if (pull_plan_cancelled(p)) {
        int rc = err_set(err, ECANCELED, "pull %s: cancelled", p->what);
        record_failure(p, err);
        return rc;
    }
    int rc = layer_work(p, i, err);
    if (rc == 0)
        rc = advance(p, err);
    if (rc < 0) {
        if (!strstr(err->msg, p->what))
            err_wrap(err, "pull %s", p->what);
        record_failure(p, err);
    }
    return rc;
}

void
pull_plan_cancel(struct pull_plan *p)
{
    __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
}
