/*
 * A pull's first step: the reference resolved to one manifest (through
 * indexes, nested ones fetched by digest), the config downloaded and
 * parsed, the stored image answered without the network, and the plan
 * made (pull_plan_new and what it tells). Pool threads; blocking on the
 * network and on disk.
 */
#include "store/pull_int.h"

#include <json-c/json.h>
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
        (rc = pull_download(p, cd, (size_t)-1, OCI_DOC_MAX, err)) < 0)
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
    /* Held (the plan has its lease from the start): neither a prune nor a
     * delete and GC takes any of it before the commit answers with it. */
    if (image_build_hold_stored(&p->b, digest, &img, &ignored) != 1)
        return false;
    p->stored = true;
    p->stored_img = img;
    return true;
}

/* The store's single flight for digest: waits for another import of it,
 * or with no_wait fails with EALREADY naming it. */
static int
plan_inflight_begin(struct pull_plan *p, const char *digest, struct err *err)
{
    if (p->no_wait) {
        if (store_inflight_try_begin(p->st, digest, p->owner, p->busy_owner) < 0)
            return err_set(err, EALREADY, "pull %s: manifest %s is being imported by another call",
                           p->what, digest);
    } else {
        store_inflight_begin(p->st, digest);
    }
    p->inflight = true;
    snprintf(p->b.manifest_digest, sizeof(p->b.manifest_digest), "%s", digest);
    return 0;
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
        if ((rc = plan_inflight_begin(p, digest, err)) < 0)
            goto out;
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
        if ((rc = plan_inflight_begin(p, m.digest, err)) < 0)
            goto out;
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
    p->no_wait = req->no_wait;
    p->owner = req->owner;
    p->busy_owner = req->busy_owner;
    snprintf(p->what, sizeof(p->what), "%s/%s%s%s", req->registry, req->repository,
             req->digest ? "@" : ":", req->digest ? req->digest : req->tag);
    int r = 0;
    if (req->name && !(p->name = strdup(req->name))) {
        r = err_set(err, ENOMEM, "out of memory");
        goto fail;
    }
    if (!(p->repo = registry_repo_open(rc, req->registry, req->repository, req->creds,
                                       pull_plan_cancelled, p, err))) {
        r = -err->code;
        goto fail;
    }
    /* The lease first: a stored image found below is leased before it
     * is looked up, so no prune removes it before the commit answers. */
    r = image_build_begin(&p->b, st, err);
    p->begun = true;
    if (r < 0)
        goto fail;
    /* By digest, a stored manifest needs no request at all. */
    if (req->digest && digest_valid(req->digest)) {
        if ((r = plan_inflight_begin(p, req->digest, err)) < 0)
            goto fail;
        if (lookup_stored(p, req->digest))
            goto done;
        store_inflight_end(st, req->digest);
        p->inflight = false;
    }
    if ((r = resolve(p, req, err)) < 0)
        goto fail;
    if (p->stored)
        goto done;
    struct import_event ev = {
        .step = "manifest", .status = "resolved", .digest = p->b.manifest_digest};
    pull_emit(p, &ev);
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

const char *
pull_plan_layer_digest(const struct pull_plan *p, size_t i, int64_t *size)
{
    const struct oci_layer *l = &p->b.manifest->layers[i];
    if (size)
        *size = l->desc.size;
    return l->desc.digest;
}
