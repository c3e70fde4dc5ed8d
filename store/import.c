/*
 * Image import: gathering blobs (from an upload or a layout directory),
 * resolving the manifest and config, the platform check, unpacking the
 * layers into snapshots and committing the image. See import.h for the
 * guarantees. Runs on a pool thread; blocking.
 *
 * Upload: the tar stream is read once. Each file lands in this import's
 * staging directory as it is hashed: entries named blobs/sha256/<hex> are
 * checked against their name (and skipped unread when the content store
 * already has them); other files (docker save's config and layer.tar
 * files) are staged under the digest they hash to. When the stream ends,
 * index.json or manifest.json says which image it holds.
 *
 * Layout directory: index.json is read first; an image whose manifest is
 * already stored is answered from the database without reading any blob.
 * Otherwise each layer is read once: the bytes go to the staging
 * directory and to the unpacker at the same time.
 *
 * This file runs the steps in order and cleans up after them; the steps
 * are import_layout.c, import_upload.c, import_resolve.c and
 * import_unpack.c, sharing struct import through import_int.h.
 */
#include "store/import.h"

#include <stdlib.h>

#include "common/cleanup.h"
#include "common/strv.h"
#include "store/import_int.h"
#include "store/refname.h"

static void
import_cleanup(struct import *imp, bool failed)
{
    while (imp->files) {
        struct staged_file *f = imp->files;
        imp->files = f->next;
        free(f->path);
        free(f);
    }
    while (imp->links) {
        struct archive_link *l = imp->links;
        imp->links = l->next;
        free(l->path);
        free(l->target);
        free(l);
    }
    free(imp->index_json);
    free(imp->docker_json);
    for (size_t i = 0; i < imp->n_names; i++)
        free(imp->names[i]);
    free(imp->names);
    image_build_end(&imp->b, failed); /* drops the lease, collects a failure's snapshots */
}

int
store_image_import(struct store *st, const struct import_request *req, struct meta_image **out,
                   bool *created, struct err *err)
{
    struct import imp = {.st = st, .req = req};
    int rc;
    bool inflight = false;
    cleanup_strv char **names = NULL;
    size_t n_names = 0;
    cleanup_free char *checked = NULL;
    if (req->name && (rc = image_ref_normalize(req->name, &checked, err)) < 0)
        return rc;
    if ((rc = image_build_begin(&imp.b, st, err)) < 0) {
        err_wrap(err, "import");
        goto out;
    }

    if (req->layout_dir) {
        if ((rc = import_layout_read_index(&imp, err)) < 0 ||
            (rc = import_resolve_oci(&imp, imp.index_json, imp.index_len, err)) < 0)
            goto out;
    } else {
        if ((rc = import_read_upload(&imp, err)) < 0)
            goto out;
        if (imp.index_json) {
            if (!imp.saw_layout_file) {
                rc = err_set(err, ERR_INVALID_CONTENT,
                             "upload: has index.json but no valid oci-layout file");
                goto out;
            }
            rc = import_resolve_oci(&imp, imp.index_json, imp.index_len, err);
        } else if (imp.docker_json) {
            rc = import_resolve_docker(&imp, err);
        } else {
            rc = err_set(err, ERR_INVALID_CONTENT,
                         "upload: neither an OCI image layout (index.json) nor a docker save "
                         "archive (manifest.json)");
        }
        if (rc < 0)
            goto out;
    }

    /* The names it is stored under, canonical (store/refname.h). */
    n_names = import_stored_names(&imp, &names);
    /* One import per image at a time; the second finds it stored. */
    store_inflight_begin(st, imp.b.manifest_digest);
    inflight = true;
    /* Held when stored: nothing of it goes before the answer, whatever a
     * prune or a delete does meanwhile (image_build_hold_stored). */
    struct meta_image *stored = NULL;
    if ((rc = image_build_hold_stored(&imp.b, imp.b.manifest_digest, &stored, err)) < 0)
        goto out;
    if (rc == 1) {
        *created = false;
        rc = image_build_answer_stored(&imp.b, stored, n_names ? names[0] : NULL, out, err);
        goto out;
    }
    if ((rc = import_load_manifest_and_config(&imp, err)) < 0 ||
        (rc = import_unpack_layers(&imp, err)) < 0 ||
        (rc = image_build_commit(&imp.b, NULL, names, n_names, out, created, err)) < 0)
        goto out;
    struct import_event ev = {.step = "image",
                              .status = *created ? "created" : "present",
                              .digest = imp.b.manifest_digest};
    emit(&imp, &ev);
    /* Another import of this image need not wait for the hook. */
    store_inflight_end(st, imp.b.manifest_digest);
    inflight = false;
    /* Before import_cleanup drops the lease on what was just stored. */
    if (*created && req->on_created)
        req->on_created(req->on_created_ctx, *out);
out:
    if (inflight)
        store_inflight_end(st, imp.b.manifest_digest);
    import_cleanup(&imp, rc < 0);
    return rc;
}
