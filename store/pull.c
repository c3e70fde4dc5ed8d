/*
 * Registry pulls into the store: the plan (resolve, per-layer calls,
 * commit) described in pull.h, on top of the registry client and the
 * import's image_build. Pool threads; blocking.
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

#include <json-c/json.h>
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

#define READ_CHUNK (256 * 1024)
#define PROGRESS_MS 250

enum layer_state { L_PENDING, L_FETCHING, L_STAGED, L_WAIT_DUP, L_UNPACKING, L_DONE };

struct plan_layer {
    enum layer_state state;
    bool called;
    bool has_blob; /* staged or stored */
    long dup_of;   /* an earlier layer with the same blob, or -1 */
};

struct pull_plan {
    struct store *st;
    struct registry_repo *repo;
    struct image_build b;
    bool begun, inflight, stored, committed;
    struct meta_image *stored_img;
    char *name;
    char what[600]; /* "registry/repo:tag", for messages */
    import_progress_fn progress;
    void *progress_ctx;
    const int *cancel;
    int stop; /* atomic: a layer failed or pull_plan_cancel */
    pthread_mutex_t mu;
    pthread_mutex_t progress_mu;
    struct plan_layer *layers;
    size_t n;
    bool failed; /* under mu */
    struct err first_err;
};

static int
plan_cancelled(void *ctx)
{
    struct pull_plan *p = ctx;
    return __atomic_load_n(&p->stop, __ATOMIC_SEQ_CST) ||
           (p->cancel && __atomic_load_n(p->cancel, __ATOMIC_SEQ_CST));
}

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
emit(struct pull_plan *p, const struct import_event *ev)
{
    if (!p->progress)
        return;
    pthread_mutex_lock(&p->progress_mu);
    p->progress(p->progress_ctx, ev);
    pthread_mutex_unlock(&p->progress_mu);
}

static void
emit_layer(struct pull_plan *p, size_t i, const char *status, int64_t done)
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
    emit(p, &ev);
}

/* ---- resolving ---------------------------------------------------------- */

/* The media type a manifest document says it is: its mediaType field,
 * else the Content-Type, else what its keys look like. */
static const char *
doc_kind(const struct registry_manifest *m)
{
    json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, m->body, (int)m->len) : NULL;
    if (tok)
        json_tokener_free(tok);
    const char *kind = NULL;
    json_object *v = NULL;
    if (root && json_object_object_get_ex(root, "mediaType", &v) &&
        json_object_is_type(v, json_type_string)) {
        const char *mt = json_object_get_string(v);
        kind = oci_media_type_is_index(mt)      ? OCI_MT_INDEX
               : oci_media_type_is_manifest(mt) ? OCI_MT_MANIFEST
                                                : NULL;
    }
    if (!kind && m->media_type)
        kind = oci_media_type_is_index(m->media_type)      ? OCI_MT_INDEX
               : oci_media_type_is_manifest(m->media_type) ? OCI_MT_MANIFEST
                                                           : NULL;
    if (!kind && root)
        kind = json_object_object_get_ex(root, "manifests", NULL) ? OCI_MT_INDEX : OCI_MT_MANIFEST;
    json_object_put(root);
    return kind ? kind : OCI_MT_MANIFEST;
}

/* oci_index_resolve's reader for nested indexes: fetched by digest. */
static int
index_read_cb(void *ctx, const char *digest, char **buf, size_t *len, struct err *err)
{
    struct pull_plan *p = ctx;
    struct registry_manifest m = {0};
    int rc = registry_manifest_get(p->repo, digest, &m, err);
    if (rc < 0)
        return rc;
    *buf = steal_ptr(&m.body);
    *len = m.len;
    registry_manifest_clear(&m);
    return 0;
}

/* Puts a document we hold into staging under its digest. */
static int
stage_bytes(struct pull_plan *p, const char *digest, const char *buf, size_t len, struct err *err)
{
    int rc = image_build_lease_blob(&p->b, digest, err);
    if (rc < 0)
        return rc;
    if (image_build_blob_present(&p->b, digest, NULL))
        return 0;
    struct blob_writer *w =
        blob_writer_new(p->st->blobs, p->b.staging, digest, (int64_t)len, -1, err);
    if (!w)
        return -err->code;
    if (blob_writer_write(w, buf, len, err) < 0) {
        blob_writer_abort(w);
        return -err->code;
    }
    return blob_writer_finish(w, NULL, NULL, err);
}

/* A registry blob read for a stage or an unpack, with progress, keeping
 * the registry's error (the unpacker only passes the code on). */
struct net_source {
    struct pull_plan *p;
    size_t layer; /* (size_t)-1: not a layer (the config) */
    struct registry_blob *blob;
    struct err err;
    bool failed;
    int64_t last_ms;
};

static ssize_t
net_read_cb(void *ctx, void *buf, size_t len)
{
    struct net_source *s = ctx;
    ssize_t n = registry_blob_read(s->blob, buf, len, &s->err);
    if (n < 0) {
        s->failed = true;
        return n;
    }
    if (s->layer != (size_t)-1) {
        int64_t t = now_ms();
        if (n == 0 || t - s->last_ms >= PROGRESS_MS) {
            s->last_ms = t;
            emit_layer(s->p, s->layer, "downloading", registry_blob_offset(s->blob));
        }
    }
    return n;
}

/* Downloads blob desc into staging, verified by the blob writer. */
static int
download(struct pull_plan *p, const struct oci_descriptor *desc, size_t layer, int64_t max,
         struct err *err)
{
    struct net_source src = {.p = p, .layer = layer, .last_ms = now_ms()};
    int rc = registry_blob_open(p->repo, desc->digest, desc->size, &src.blob, err);
    if (rc < 0)
        return rc;
    struct blob_writer *w =
        blob_writer_new(p->st->blobs, p->b.staging, desc->digest, desc->size, max, err);
    cleanup_free char *buf = w ? malloc(READ_CHUNK) : NULL;
    if (!w || !buf) {
        blob_writer_abort(w);
        registry_blob_close(src.blob);
        return w ? err_set(err, ENOMEM, "out of memory") : -err->code;
    }
    for (;;) {
        ssize_t n = net_read_cb(&src, buf, READ_CHUNK);
        if (n < 0) {
            err_copy(err, &src.err);
            rc = (int)n;
            break;
        }
        if (n == 0) {
            rc = blob_writer_finish(w, NULL, NULL, err);
            w = NULL;
            break;
        }
        if ((rc = blob_writer_write(w, buf, (size_t)n, err)) < 0)
            break;
    }
    blob_writer_abort(w);
    registry_blob_close(src.blob);
    return rc;
}

static int
load_config(struct pull_plan *p, struct err *err)
{
    const struct oci_descriptor *cd = &p->b.manifest->config;
    if (cd->size > OCI_DOC_MAX)
        return err_set(err, ERR_INVALID_CONTENT,
                       "config %s: %lld bytes is over the limit of %d bytes for a document",
                       cd->digest, (long long)cd->size, OCI_DOC_MAX);
    int rc = image_build_lease_blob(&p->b, cd->digest, err);
    if (rc < 0)
        return rc;
    if (!image_build_blob_present(&p->b, cd->digest, NULL) &&
        (rc = download(p, cd, (size_t)-1, OCI_DOC_MAX, err)) < 0)
        return err_wrap(err, "config %s", cd->digest);
    cleanup_free char *path = image_build_blob_location(&p->b, cd->digest);
    cleanup_free char *buf = NULL;
    size_t len = 0;
    if (!path)
        return err_set(err, ENOMEM, "out of memory");
    if ((rc = fs_read_file(path, OCI_DOC_MAX, &buf, &len, err)) < 0)
        return rc;
    if ((int64_t)len != cd->size)
        return err_set(err, ERR_INVALID_CONTENT, "config %s: %zu bytes, its descriptor says %lld",
                       cd->digest, len, (long long)cd->size);
    return oci_config_parse(buf, len, cd->digest, &p->b.config, err);
}

/* The stored image, answered without touching the network again. */
static bool
lookup_stored(struct pull_plan *p, const char *digest)
{
    struct err ignored = {0};
    struct meta_image *img = NULL;
    if (!digest_valid(digest) || meta_image_get(p->st->meta, digest, &img, &ignored) < 0)
        return false;
    if (strcmp(img->digest, digest) != 0) {
        meta_image_free(img);
        return false;
    }
    p->stored = true;
    p->stored_img = img;
    return true;
}

static int
resolve(struct pull_plan *p, const struct pull_request *req, struct err *err)
{
    const char *ref = req->digest ? req->digest : req->tag;
    struct registry_manifest m = {0};
    int rc = registry_manifest_get(p->repo, ref, &m, err);
    if (rc < 0)
        return rc;
    if (strcmp(doc_kind(&m), OCI_MT_INDEX) == 0) {
        struct oci_index *idx = NULL;
        if ((rc = oci_index_parse(m.body, m.len, m.digest, &idx, err)) < 0)
            goto out;
        struct oci_platform want = req->platform ? *req->platform : p->st->host.platform;
        struct oci_descriptor desc = {0};
        rc = oci_index_resolve(idx, &want, NULL, m.digest, index_read_cb, p, &desc, err);
        oci_index_free(idx);
        if (rc < 0)
            goto out;
        registry_manifest_clear(&m);
        char digest[DIGEST_STR_LEN];
        snprintf(digest, sizeof(digest), "%s", desc.digest);
        int64_t size = desc.size;
        oci_descriptor_clear(&desc);
        /* The platform's manifest may be stored already: no more requests. */
        store_inflight_begin(p->st, digest);
        p->inflight = true;
        snprintf(p->b.manifest_digest, sizeof(p->b.manifest_digest), "%s", digest);
        if (lookup_stored(p, digest))
            return 0;
        if ((rc = registry_manifest_get(p->repo, digest, &m, err)) < 0)
            goto out;
        if ((int64_t)m.len != size) {
            rc = err_set(err, ERR_INVALID_CONTENT,
                         "manifest %s: %zu bytes, the index's descriptor says %lld", digest, m.len,
                         (long long)size);
            goto out;
        }
    } else {
        store_inflight_begin(p->st, m.digest);
        p->inflight = true;
        snprintf(p->b.manifest_digest, sizeof(p->b.manifest_digest), "%s", m.digest);
        if (lookup_stored(p, m.digest))
            goto out;
    }
    p->b.manifest_size = (int64_t)m.len;
    if ((rc = oci_manifest_parse(m.body, m.len, m.digest, &p->b.manifest, err)) < 0 ||
        (rc = stage_bytes(p, m.digest, m.body, m.len, err)) < 0)
        goto out;
out:
    registry_manifest_clear(&m);
    return rc;
}

static int
plan_layers(struct pull_plan *p, struct err *err)
{
    p->n = p->b.manifest->n_layers;
    if (!(p->layers = calloc(p->n + 1, sizeof(*p->layers))))
        return err_set(err, ENOMEM, "out of memory");
    int rc = image_build_chain_ids(&p->b, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < p->n; i++) {
        const struct oci_layer *l = &p->b.manifest->layers[i];
        p->layers[i].dup_of = -1;
        for (size_t k = 0; k < i && p->layers[i].dup_of < 0; k++)
            if (strcmp(p->b.manifest->layers[k].desc.digest, l->desc.digest) == 0)
                p->layers[i].dup_of = (long)k;
        /* Leases first: what GC must keep is leased before it is looked at. */
        if ((rc = image_build_lease_blob(&p->b, l->desc.digest, err)) < 0 ||
            (rc = meta_lease_add_snapshot(p->st->meta, p->b.lease, p->b.chain_ids[i], err)) < 0)
            return rc;
        if (l->nondistributable && !blob_exists(p->st->blobs, l->desc.digest))
            return err_set(err, ENOTSUP,
                           "%s: layer %s (%s) is foreign (non-distributable): registries do not "
                           "serve it and berth does not fetch it from elsewhere; import the image "
                           "with that layer first",
                           p->what, l->desc.digest, l->desc.media_type);
    }
    return 0;
}

int
pull_plan_new(struct store *st, struct registry_client *rc, const struct pull_request *req,
              struct pull_plan **out, struct err *err)
{
    if (!req->registry || !req->repository || (!req->tag && !req->digest))
        return err_set(err, EINVAL,
                       "pull: a registry, a repository and a tag or digest are needed");
    cleanup_free char *checked = NULL;
    if (req->name && image_ref_normalize(req->name, &checked, err) < 0)
        return -err->code;
    struct pull_plan *p = calloc(1, sizeof(*p));
    if (!p)
        return err_set(err, ENOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->progress_mu, NULL);
    p->st = st;
    p->b.st = st;
    p->progress = req->progress;
    p->progress_ctx = req->progress_ctx;
    p->cancel = req->cancel;
    snprintf(p->what, sizeof(p->what), "%s/%s%s%s", req->registry, req->repository,
             req->digest ? "@" : ":", req->digest ? req->digest : req->tag);
    int r = 0;
    if (req->name && !(p->name = strdup(req->name))) {
        r = err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    if (!(p->repo = registry_repo_open(rc, req->registry, req->repository, req->creds,
                                       plan_cancelled, p, err))) {
        r = -err->code;
        goto fail;
    }
    /* By digest, a stored manifest needs no request at all. */
    if (req->digest && digest_valid(req->digest)) {
        store_inflight_begin(st, req->digest);
        p->inflight = true;
        snprintf(p->b.manifest_digest, sizeof(p->b.manifest_digest), "%s", req->digest);
        if (lookup_stored(p, req->digest))
            goto done;
        store_inflight_end(st, req->digest);
        p->inflight = false;
    }
    if ((r = image_build_begin(&p->b, st, err)) < 0) {
        p->begun = true;
        goto fail;
    }
    p->begun = true;
    if ((r = resolve(p, req, err)) < 0)
        goto fail;
    if (p->stored)
        goto done;
    struct import_event ev = {
        .step = "manifest", .status = "resolved", .digest = p->b.manifest_digest};
    emit(p, &ev);
    if ((r = load_config(p, err)) < 0 || (r = image_build_check(&p->b, req->platform, err)) < 0 ||
        (r = plan_layers(p, err)) < 0)
        goto fail;
done:
    *out = p;
    return 0;
fail:
    if (err->code && !strstr(err->msg, p->what))
        err_wrap(err, "pull %s", p->what);
    pull_plan_free(p);
    return r < 0 ? r : -err->code;
}

bool
pull_plan_stored(const struct pull_plan *p)
{
    return p->stored;
}

const char *
pull_plan_digest(const struct pull_plan *p)
{
    return p->stored ? p->stored_img->digest : p->b.manifest_digest;
}

size_t
pull_plan_layer_count(const struct pull_plan *p)
{
    return p->stored ? 0 : p->n;
}

int64_t
pull_plan_download_bytes(const struct pull_plan *p)
{
    int64_t total = 0;
    for (size_t i = 0; !p->stored && i < p->n; i++) {
        const struct oci_layer *l = &p->b.manifest->layers[i];
        if (p->layers[i].dup_of < 0 && !blob_exists(p->st->blobs, l->desc.digest))
            total += l->desc.size;
    }
    return total;
}

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
    emit_layer(p, i, "cached", p->b.manifest->layers[i].desc.size);
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
    emit_layer(p, i, "unpacked", p->b.manifest->layers[i].desc.size);
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
    emit_layer(p, i, "unpacking", 0);
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
        if ((rc = download(p, &l->desc, i, -1, err)) < 0)
            return rc;
        layer_cached(p, i);
        return 0;
    }
    struct net_source net = {.p = p, .layer = i, .last_ms = now_ms()};
    if ((rc = registry_blob_open(p->repo, l->desc.digest, l->desc.size, &net.blob, err)) < 0) {
        snapshot_abort(claim);
        return rc;
    }
    struct image_build_source src = {.read = net_read_cb, .ctx = &net};
    src.tee = blob_writer_new(p->st->blobs, p->b.staging, l->desc.digest, l->desc.size, -1, err);
    if (!src.tee) {
        registry_blob_close(net.blob);
        snapshot_abort(claim);
        return -err->code;
    }
    emit_layer(p, i, "downloading", 0);
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
        if (plan_cancelled(p))
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
        if ((rc = download(p, &l->desc, i, -1, err)) < 0)
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
    if ((rc = download(p, &l->desc, i, -1, err)) < 0)
        return err_wrap(err, "layer %s", l->desc.digest);
    emit_layer(p, i, "downloaded", l->desc.size);
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
    if (plan_cancelled(p)) {
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
        emit(p, &ev);
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
    if (plan_cancelled(p))
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
    emit(p, &ev);
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
