/*
 * The source-independent half of an import: lease and staging, the image
 * checks, chain IDs, the one-pass layer unpack with its digest checks,
 * and the commit. See image_build.h. Pool threads; blocking.
 */
#include "store/image_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/osfs.h"
#include "common/log.h"
#include "store/gc.h"
#include "store/refname.h"
#include "store/unpack.h"
#include "store/wclayer_import.h"

int
image_build_begin(struct image_build *b, struct store *st, struct err *err)
{
    memset(b, 0, sizeof(*b));
    b->st = st;
    int rc = meta_lease_new(st->meta, b->lease, err);
    if (rc < 0)
        return rc;
    b->leased = true;
    return blob_staging_dir_new(st->blobs, &b->staging, err);
}

/*
 * Drops the build's lease. A lease left in the database keeps what it
 * names from every GC until the next start clears all leases: the blobs
 * and snapshots of an image deleted meanwhile would stay on disk. A
 * failed removal (a disk error, a full disk, a busy database) is tried
 * again a few times, then logged.
 */
static void
lease_drop(struct image_build *b)
{
    struct err err = {0};
    for (int attempt = 0; attempt < 4; attempt++) {
        int r = meta_lease_remove(b->st->meta, b->lease, &err);
        if (r == 0 || r == -ENOENT)
            return;
        usleep(10000u << attempt);
    }
    log_error("import: lease %s stays until the next start, and with it what it holds: %s",
              b->lease, err.msg);
}

void
image_build_end(struct image_build *b, bool failed)
{
    struct err ignored = {0};
    if (b->staging) {
        fs_remove_tree(b->staging, &ignored);
        free(b->staging);
        b->staging = NULL;
    }
    if (b->leased)
        lease_drop(b);
    b->leased = false;
    /* chain_ids has one entry per layer of the manifest: free it first. */
    for (size_t i = 0; b->chain_ids && b->manifest && i < b->manifest->n_layers; i++)
        free(b->chain_ids[i]);
    free(b->chain_ids);
    b->chain_ids = NULL;
    free(b->unpacked);
    b->unpacked = NULL;
    oci_manifest_free(b->manifest);
    b->manifest = NULL;
    oci_config_free(b->config);
    b->config = NULL;
    if (failed && __atomic_load_n(&b->snapshots_built, __ATOMIC_SEQ_CST) > 0) {
        /* Snapshots this failed build unpacked belong to no image: collect
         * them now rather than at the next prune (another build that uses
         * one holds a lease on it, which GC respects). */
        struct gc_result gr = {0};
        gc_run(b->st->blobs, b->st->meta, b->st->root, &gr, &ignored);
    }
}

int
image_build_lease_blob(struct image_build *b, const char *digest, struct err *err)
{
    return meta_lease_add_blob(b->st->meta, b->lease, digest, err);
}

bool
image_build_blob_present(struct image_build *b, const char *digest, int64_t *size)
{
    if (!digest_valid(digest))
        return false;
    cleanup_free char *staged = fs_path_join(b->staging, digest_hex(digest));
    struct os_stat sb;
    if (staged && osfs_stat(staged, &sb) == 0) {
        if (size)
            *size = (int64_t)sb.st_size;
        return true;
    }
    if (!blob_exists(b->st->blobs, digest))
        return false;
    if (size) {
        struct err ignored = {0};
        if (blob_stat(b->st->blobs, digest, size, &ignored) < 0)
            return false;
    }
    return true;
}

char *
image_build_blob_location(struct image_build *b, const char *digest)
{
    char *staged = fs_path_join(b->staging, digest_hex(digest));
    if (staged && osfs_exists(staged))
        return staged;
    free(staged);
    return blob_path(b->st->blobs, digest);
}

int
image_build_check(struct image_build *b, const struct oci_platform *asked, struct err *err)
{
    int rc = oci_image_check_consistent(b->manifest, b->config, b->manifest_digest, err);
    if (rc < 0)
        return rc;
    /* A platform asked for is one platform: an image that is another one
     * (a layout holding a single manifest, say) is refused, not taken. */
    if (asked && !oci_platform_match(asked, &b->config->platform)) {
        char want[128], have[128];
        oci_platform_format(asked, want, sizeof(want));
        oci_platform_format(&b->config->platform, have, sizeof(have));
        return err_set(err, ERR_INVALID_CONTENT, "image %s is %s, not the %s asked for",
                       b->manifest_digest, have, want);
    }
    /* The one platform check, before any layer is unpacked. */
    struct err perr = {0};
    if (platform_check(&b->config->platform, &b->st->host, ISOLATION_ANY, &perr) ==
        PLATFORM_REFUSED)
        return err_set(err, ERR_INVALID_CONTENT, "image %s: %s", b->manifest_digest, perr.msg);
    return 0;
}

int
image_build_chain_ids(struct image_build *b, struct err *err)
{
    size_t n = b->manifest->n_layers;
    b->chain_ids = calloc(n + 1, sizeof(*b->chain_ids));
    b->unpacked = calloc(n + 1, sizeof(*b->unpacked));
    if (!b->chain_ids || !b->unpacked)
        return err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!(b->chain_ids[i] = malloc(DIGEST_STR_LEN)))
            return err_set(err, ENOMEM, "out of memory");
        int rc = digest_chain_id(i ? b->chain_ids[i - 1] : NULL, b->config->diff_ids[i],
                                 b->chain_ids[i], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

char **
image_build_lowers(struct image_build *b, size_t i)
{
    char **lowers = calloc(i + 1, sizeof(*lowers));
    if (!lowers)
        return NULL;
    for (size_t k = 0; k < i; k++) {
        if (!(lowers[k] = snapshot_path(b->st->snaps, b->chain_ids[i - 1 - k]))) {
            image_build_lowers_free(lowers);
            return NULL;
        }
    }
    return lowers;
}

void
image_build_lowers_free(char **lowers)
{
    for (size_t k = 0; lowers && lowers[k]; k++)
        free(lowers[k]);
    free(lowers);
}

struct tee_reader {
    const struct image_build_source *src;
    struct err tee_err;
    bool tee_failed;
};

static ssize_t
tee_read_cb(void *ctx, void *buf, size_t len)
{
    struct tee_reader *t = ctx;
    ssize_t n = t->src->read(t->src->ctx, buf, len);
    if (n > 0 && t->src->tee && blob_writer_write(t->src->tee, buf, (size_t)n, &t->tee_err) < 0) {
        t->tee_failed = true;
        return -t->tee_err.code;
    }
    return n;
}

int
image_build_layer_unpack(struct image_build *b, size_t i, const char *const *lowers,
                         struct snapshot_claim *claim, const struct image_build_source *src,
                         struct err *err)
{
    const struct oci_layer *l = &b->manifest->layers[i];
    struct tee_reader t = {.src = src};
    struct unpack_input in = {.read = tee_read_cb, .ctx = &t, .media_type = l->desc.media_type};
    /* A Windows image's layers are never overlay lower layers: the hcs
     * driver imports them into its own layer format, which applies their
     * whiteouts itself, so they keep their ".wh." files as the tar has
     * them (and no Windows filesystem has the 0/0 devices overlayfs uses). */
    struct unpack_opts opts = {.target_dir = snapshot_claim_dir(claim),
                               .lower_dirs = lowers,
                               .allow_device_nodes = b->st->allow_device_nodes,
                               .no_whiteouts = strcmp(b->config->platform.os, "windows") == 0};
    struct unpack_result res = {0};
    int rc;
#ifdef _WIN32
    /* On Windows a Windows image's layers go through the platform's layer
     * writer (store/wclayer_import.h), never the generic unpack. */
    if (opts.no_whiteouts) {
        const char *below[OCI_LAYERS_MAX + 1] = {NULL};
        for (size_t k = 0; k < i && k < OCI_LAYERS_MAX; k++)
            below[k] = b->chain_ids[i - 1 - k];
        rc = wclayer_blob_import(tee_read_cb, &t, snapshot_claim_dir(claim), lowers, below,
                                 l->desc.digest, b->config->diff_ids[i], &res, err);
    } else
#endif
        rc = layer_unpack(&in, &opts, &res, err);
    if (rc < 0) {
        blob_writer_abort(src->tee);
        if (t.tee_failed)
            err_copy(err, &t.tee_err);
        return err_wrap(err, "layer %s", l->desc.digest);
    }
    if (strcmp(res.digest, l->desc.digest) != 0 || (int64_t)res.size != l->desc.size) {
        blob_writer_abort(src->tee);
        return err_set(err, ERR_INVALID_CONTENT,
                       "layer %s: content is %s, %llu bytes (descriptor: %lld bytes)",
                       l->desc.digest, res.digest, (unsigned long long)res.size,
                       (long long)l->desc.size);
    }
    if (strcmp(res.diff_id, b->config->diff_ids[i]) != 0) {
        blob_writer_abort(src->tee);
        return err_set(err, ERR_INVALID_CONTENT,
                       "layer %s: uncompressed digest is %s, but the config's rootfs.diff_ids[%zu] "
                       "is %s",
                       l->desc.digest, res.diff_id, i, b->config->diff_ids[i]);
    }
    if (src->tee && blob_writer_finish(src->tee, NULL, NULL, err) < 0)
        return err_wrap(err, "layer %s", l->desc.digest);
    b->unpacked[i] = (int64_t)res.unpacked_bytes;
    return 0;
}

static const char *
config_media_type(const struct image_build *b)
{
    return b->manifest->config.media_type ? b->manifest->config.media_type : OCI_MT_CONFIG;
}

int
image_build_commit(struct image_build *b, const char *name, char *const *names, size_t n_names,
                   struct meta_image **out, bool *created, struct err *err)
{
    size_t n = b->manifest->n_layers;
    struct meta_layer *layers = calloc(n + 1, sizeof(*layers));
    struct meta_blob *blobs = calloc(n + 2, sizeof(*blobs));
    struct meta_blob_ref *refs = calloc(n + 1, sizeof(*refs));
    int rc = 0;
    /* Declared before the first goto: a jump may not bypass a cleanup. */
    cleanup_free char *canon = NULL;
    if (!layers || !blobs || !refs) {
        rc = err_set(err, ENOMEM, "out of memory");
        goto out;
    }
    struct meta_image img = {0};
    snprintf(img.digest, sizeof(img.digest), "%s", b->manifest_digest);
    snprintf(img.config_digest, sizeof(img.config_digest), "%s", b->manifest->config.digest);
    /* The record's strings are borrowed from the config for the put. */
    img.platform.os = b->config->platform.os;
    img.platform.architecture = b->config->platform.architecture;
    img.platform.variant = b->config->platform.variant;
    img.platform.os_version = b->config->platform.os_version;

    snprintf(blobs[0].digest, sizeof(blobs[0].digest), "%s", b->manifest_digest);
    blobs[0].size = b->manifest_size;
    blobs[0].media_type = b->manifest->media_type ? b->manifest->media_type : OCI_MT_MANIFEST;
    snprintf(blobs[1].digest, sizeof(blobs[1].digest), "%s", b->manifest->config.digest);
    blobs[1].size = b->manifest->config.size;
    blobs[1].media_type = config_media_type(b);
    snprintf(refs[0].parent, sizeof(refs[0].parent), "%s", b->manifest_digest);
    snprintf(refs[0].child, sizeof(refs[0].child), "%s", b->manifest->config.digest);
    size_t nb = 2, nr = 1;
    img.size_bytes = b->manifest_size + b->manifest->config.size;
    for (size_t i = 0; i < n; i++) {
        const struct oci_layer *l = &b->manifest->layers[i];
        snprintf(layers[i].digest, sizeof(layers[i].digest), "%s", l->desc.digest);
        snprintf(layers[i].diff_id, sizeof(layers[i].diff_id), "%s", b->config->diff_ids[i]);
        snprintf(layers[i].chain_id, sizeof(layers[i].chain_id), "%s", b->chain_ids[i]);
        layers[i].size = l->desc.size;
        layers[i].unpacked_size = b->unpacked[i];
        img.unpacked_bytes += b->unpacked[i];
        bool dup = false;
        for (size_t k = 0; k < nb; k++)
            if (strcmp(blobs[k].digest, l->desc.digest) == 0)
                dup = true;
        if (!dup) {
            snprintf(blobs[nb].digest, sizeof(blobs[nb].digest), "%s", l->desc.digest);
            blobs[nb].size = l->desc.size;
            blobs[nb].media_type = l->desc.media_type;
            nb++;
            img.size_bytes += l->desc.size;
            snprintf(refs[nr].parent, sizeof(refs[nr].parent), "%s", b->manifest_digest);
            snprintf(refs[nr].child, sizeof(refs[nr].child), "%s", l->desc.digest);
            nr++;
        }
    }
    img.layers = layers;
    img.n_layers = n;
    img.blobs = blobs;
    img.n_blobs = nb;
    img.refs = refs;
    img.n_refs = nr;

    /* Blobs first (made durable by their rename), then the record. */
    for (size_t k = 0; k < nb; k++)
        if ((rc = blob_commit_staged(b->st->blobs, b->staging, blobs[k].digest, err)) < 0)
            goto out;
    /* A name given is stored in its canonical form (store/refname.h). */
    struct err ignored;
    if (name && image_ref_normalize(name, &canon, &ignored) == 0)
        name = canon;
    const char *first_name = name;
    for (size_t k = 0; !first_name && k < n_names; k++)
        if (image_name_valid(names[k]))
            first_name = names[k];
    if ((rc = meta_image_put(b->st->meta, &img, first_name, created, err)) < 0)
        goto out;
    if (!name)
        for (size_t k = 0; k < n_names; k++)
            if (names[k] != first_name && image_name_valid(names[k]))
                meta_image_put(b->st->meta, &img, names[k], NULL, err);
    rc = meta_image_get(b->st->meta, b->manifest_digest, out, err);
out:
    free(layers);
    free(blobs);
    free(refs);
    return rc;
}

/* Leases what the stored record img names: blobs and snapshots. */
static int
lease_stored(struct image_build *b, const struct meta_image *img, struct err *err)
{
    int rc = image_build_lease_blob(b, img->digest, err);
    if (rc == 0)
        rc = image_build_lease_blob(b, img->config_digest, err);
    for (size_t i = 0; rc == 0 && i < img->n_layers; i++) {
        rc = image_build_lease_blob(b, img->layers[i].digest, err);
        if (rc == 0)
            rc = meta_lease_add_snapshot(b->st->meta, b->lease, img->layers[i].chain_id, err);
    }
    return rc;
}

int
image_build_hold_stored(struct image_build *b, const char *digest, struct meta_image **out,
                        struct err *err)
{
    *out = NULL;
    if (!digest_valid(digest))
        return 0;
    /* The manifest first: no prune removes the image from here on. */
    int rc = image_build_lease_blob(b, digest, err);
    if (rc < 0)
        return rc;
    struct meta_image *img = NULL;
    struct err missing = {0};
    if (meta_image_get(b->st->meta, digest, &img, &missing) < 0)
        return 0;
    if (strcmp(img->digest, digest) != 0 || (rc = lease_stored(b, img, err)) < 0) {
        meta_image_free(img);
        return rc;
    }
    /* Still there once all it names is leased: from now on no GC takes
     * any of it, whatever happens to the image's names. */
    struct meta_image *again = NULL;
    if (meta_image_get(b->st->meta, digest, &again, &missing) < 0) {
        meta_image_free(img);
        return 0;
    }
    meta_image_free(again);
    *out = img;
    return 1;
}

int
image_build_answer_stored(struct image_build *b, struct meta_image *stored, const char *name,
                          struct meta_image **out, struct err *err)
{
    cleanup_free char *canon = NULL;
    struct err ignored;
    if (name && image_ref_normalize(name, &canon, &ignored) == 0)
        name = canon;
    int rc = meta_image_put(b->st->meta, stored, name, NULL, err);
    meta_image_free(stored);
    if (rc < 0)
        return rc;
    return meta_image_get(b->st->meta, b->manifest_digest, out, err);
}
