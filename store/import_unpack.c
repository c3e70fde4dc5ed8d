/*
 * An import's layers: each blob checked against its manifest size, each
 * layer whose snapshot is not stored unpacked once (read from staging, the
 * store, or straight from a layout directory while it is staged), with
 * progress every PROGRESS_STEP bytes. Runs on the import's pool thread;
 * blocking.
 */
#include <errno.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/osfs.h"
#include "store/blob.h"
#include "store/import_int.h"
#include "store/oci.h"
#include "store/snapshot.h"

/* ---- unpacking ---------------------------------------------------------- */

/* A layer blob read from a file (staged, stored, or in the layout), with
 * progress every PROGRESS_STEP bytes. */
struct layer_source {
    int fd;
    struct import *imp;
    const struct import_event *base;
    int64_t done, next_report;
};

static ssize_t
layer_read_cb(void *ctx, void *buf, size_t len)
{
    struct layer_source *src = ctx;
    for (;;) {
        ssize_t n = read(src->fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        src->done += n;
        if (src->done >= src->next_report) {
            struct import_event ev = *src->base;
            ev.done = src->done;
            emit(src->imp, &ev);
            src->next_report = src->done + PROGRESS_STEP;
        }
        return n;
    }
}

static int
unpack_layer(struct import *imp, size_t i, const char *const *lowers, struct snapshot_claim *claim,
             struct err *err)
{
    const struct oci_layer *l = &imp->b.manifest->layers[i];
    struct layer_source src = {.fd = -1, .imp = imp, .next_report = PROGRESS_STEP};
    struct image_build_source bsrc = {.read = layer_read_cb, .ctx = &src};
    if (blob_present(imp, l->desc.digest, NULL)) {
        cleanup_free char *loc = blob_location(imp, l->desc.digest);
        src.fd = loc ? osfs_open(loc, O_RDONLY, 0) : -ENOMEM;
        if (src.fd < 0)
            return err_errno(err, -src.fd, "layer %s: open", l->desc.digest);
    } else if (imp->req->layout_dir) {
        /* Read once: to the unpacker and into staging at the same time. */
        src.fd = import_layout_blob_open(imp, l->desc.digest, err);
        if (src.fd < 0)
            return src.fd;
        bsrc.tee =
            blob_writer_new(imp->st->blobs, imp->b.staging, l->desc.digest, l->desc.size, -1, err);
        if (!bsrc.tee) {
            close(src.fd);
            return -err->code;
        }
    } else {
        return err_set(err, ERR_INVALID_CONTENT, "layer %s: missing from the archive",
                       l->desc.digest);
    }
    struct import_event ev = {.step = "layer",
                              .status = "unpacking",
                              .digest = l->desc.digest,
                              .chain_id = imp->b.chain_ids[i],
                              .done = 0,
                              .total = l->desc.size,
                              .index = (unsigned)i + 1,
                              .count = (unsigned)imp->b.manifest->n_layers};
    src.base = &ev;
    emit(imp, &ev);
    int rc = image_build_layer_unpack(&imp->b, i, lowers, claim, &bsrc, err);
    close(src.fd);
    if (rc < 0)
        return rc;
    ev.status = "unpacked";
    ev.done = l->desc.size;
    emit(imp, &ev);
    return 0;
}

int
import_unpack_layers(struct import *imp, struct err *err)
{
    size_t n = imp->b.manifest->n_layers;
    int rc = image_build_chain_ids(&imp->b, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const struct oci_layer *l = &imp->b.manifest->layers[i];
        if ((rc = lease_blob(imp, l->desc.digest, err)) < 0 ||
            (rc = meta_lease_add_snapshot(imp->st->meta, imp->b.lease, imp->b.chain_ids[i], err)) <
                0)
            return rc;
        /* Every layer blob must be there and of the declared size. */
        int64_t have = -1;
        if (blob_present(imp, l->desc.digest, &have)) {
            if (have != l->desc.size)
                return err_set(err, ERR_INVALID_CONTENT,
                               "layer %s: size is %lld bytes, the manifest says %lld",
                               l->desc.digest, (long long)have, (long long)l->desc.size);
        } else if (!imp->req->layout_dir) {
            return err_set(err, ERR_INVALID_CONTENT, "layer %s: missing from the archive",
                           l->desc.digest);
        }
        struct snapshot_claim *claim = NULL;
        if ((rc = snapshot_acquire(imp->st->snaps, imp->b.chain_ids[i], &claim, err)) < 0)
            return rc;
        if (rc == SNAPSHOT_CLAIMED) {
            /* The snapshots below this layer, top first. */
            char **lowers = image_build_lowers(&imp->b, i);
            if (!lowers) {
                snapshot_abort(claim);
                return err_set(err, ENOMEM, "out of memory");
            }
            rc = unpack_layer(imp, i, (const char *const *)lowers, claim, err);
            image_build_lowers_free(lowers);
            if (rc < 0) {
                snapshot_abort(claim);
                return rc;
            }
            if ((rc = snapshot_commit(claim, err)) < 0)
                return rc;
            __atomic_add_fetch(&imp->b.snapshots_built, 1, __ATOMIC_SEQ_CST);
        } else {
            bool exists = false;
            int64_t size = 0;
            if (meta_snapshot_size(imp->st->meta, imp->b.chain_ids[i], &size, &exists, err) < 0)
                size = 0;
            imp->b.unpacked[i] = size;
            if (imp->req->layout_dir && !blob_present(imp, l->desc.digest, NULL) &&
                (rc = import_layout_blob_stage(imp, l->desc.digest, l->desc.size, -1, err)) < 0)
                return rc;
            struct import_event ev = {.step = "layer",
                                      .status = "cached",
                                      .digest = l->desc.digest,
                                      .chain_id = imp->b.chain_ids[i],
                                      .done = l->desc.size,
                                      .total = l->desc.size,
                                      .index = (unsigned)i + 1,
                                      .count = (unsigned)n};
            emit(imp, &ev);
        }
    }
    return 0;
}
