/*
 * Which image an import holds: index.json resolved to the manifest for
 * the wanted platform, or a docker save manifest.json turned into an OCI
 * manifest; the manifest and config read, parsed and checked; and the
 * names the image is stored under. Runs on the import's pool thread;
 * blocking (it reads blobs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/strv.h"
#include "store/blob.h"
#include "store/import_int.h"
#include "store/oci.h"
#include "store/refname.h"

/*
 * Reads a JSON document blob (index, manifest, config) of at most
 * OCI_DOC_MAX bytes, refusing a larger declared size before reading.
 * In layout mode a blob missing from the store is staged from the layout
 * first, which verifies it.
 */
static int
read_doc(struct import *imp, const char *what, const char *digest, int64_t declared, char **buf,
         size_t *len, struct err *err)
{
    if (declared > OCI_DOC_MAX)
        return err_set(err, ERR_INVALID_CONTENT,
                       "%s %s: %lld bytes is over the limit of %d bytes for a document", what,
                       digest, (long long)declared, OCI_DOC_MAX);
    int rc = lease_blob(imp, digest, err);
    if (rc < 0)
        return rc;
    int64_t have = -1;
    if (!blob_present(imp, digest, &have)) {
        if (!imp->req->layout_dir)
            return err_set(err, ERR_INVALID_CONTENT, "%s %s: missing from the archive", what,
                           digest);
        if ((rc = import_layout_blob_stage(imp, digest, declared, OCI_DOC_MAX, err)) < 0)
            return err_wrap(err, "%s %s", what, digest);
        have = declared;
    }
    if (declared >= 0 && have != declared)
        return err_set(err, ERR_INVALID_CONTENT,
                       "%s %s: size is %lld bytes, its descriptor says %lld", what, digest,
                       (long long)have, (long long)declared);
    cleanup_free char *path = blob_location(imp, digest);
    if (!path)
        return err_set(err, ENOMEM, "out of memory");
    rc = fs_read_file(path, OCI_DOC_MAX, buf, len, err);
    if (rc == -EFBIG)
        return err_set(err, ERR_INVALID_CONTENT, "%s %s: over the limit of %d bytes for a document",
                       what, digest, OCI_DOC_MAX);
    return rc;
}

static int
read_doc_cb(void *ctx, const char *digest, char **buf, size_t *len, struct err *err)
{
    return read_doc(ctx, "index", digest, -1, buf, len, err);
}

/* ---- resolving the image ------------------------------------------------ */

static int
add_name(struct import *imp, const char *name)
{
    if (!name || !*name)
        return 0;
    char **n = realloc(imp->names, (imp->n_names + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    imp->names = n;
    if (!(n[imp->n_names] = strdup(name)))
        return -ENOMEM;
    imp->n_names++;
    return 0;
}

static int
want_platform(struct import *imp, struct oci_platform *want, struct err *err)
{
    if (imp->req->platform) {
        *want = *imp->req->platform;
        return 0;
    }
    *want = imp->st->host.platform;
    return 0;
}

/* Reads and checks the manifest and config named by imp->b.manifest_digest. */
int
import_load_manifest_and_config(struct import *imp, struct err *err)
{
    cleanup_free char *buf = NULL;
    size_t len = 0;
    int rc =
        read_doc(imp, "manifest", imp->b.manifest_digest, imp->b.manifest_size, &buf, &len, err);
    if (rc < 0)
        return rc;
    if ((rc = oci_manifest_parse(buf, len, imp->b.manifest_digest, &imp->b.manifest, err)) < 0)
        return rc;
    free(buf);
    buf = NULL;
    const struct oci_descriptor *cd = &imp->b.manifest->config;
    if ((rc = read_doc(imp, "config", cd->digest, cd->size, &buf, &len, err)) < 0)
        return rc;
    if ((rc = oci_config_parse(buf, len, cd->digest, &imp->b.config, err)) < 0)
        return rc;
    return image_build_check(&imp->b, imp->req->platform, err);
}

int
import_resolve_oci(struct import *imp, const char *index_json, size_t index_len, struct err *err)
{
    struct oci_index *idx = NULL;
    int rc = oci_index_parse(index_json, index_len, "index.json", &idx, err);
    if (rc < 0)
        return rc;
    struct oci_platform want;
    want_platform(imp, &want, err);
    struct oci_descriptor desc = {0};
    rc = oci_index_resolve(idx, &want, NULL, "index.json", read_doc_cb, imp, &desc, err);
    oci_index_free(idx);
    if (rc < 0)
        return rc;
    snprintf(imp->b.manifest_digest, sizeof(imp->b.manifest_digest), "%s", desc.digest);
    imp->b.manifest_size = desc.size;
    if (desc.ref_name && add_name(imp, desc.ref_name) < 0)
        rc = err_set(err, ENOMEM, "out of memory");
    oci_descriptor_clear(&desc);
    return rc;
}

/* Do two references name the same image once normalised? */
static bool
ref_same(const char *a, const char *b)
{
    struct err ignored;
    cleanup_free char *na = NULL;
    cleanup_free char *nb = NULL;
    return image_ref_normalize(a, &na, &ignored) == 0 &&
           image_ref_normalize(b, &nb, &ignored) == 0 && strcmp(na, nb) == 0;
}

/* Picks the docker save image to import and turns it into an OCI manifest. */
int
import_resolve_docker(struct import *imp, struct err *err)
{
    struct docker_manifest *dm = NULL;
    /* Declared before the first goto: a jump into the scope of a cleanup
     * variable would free whatever the stack held there. */
    cleanup_free char *json = NULL;
    size_t json_len = 0;
    int rc = docker_manifest_parse(imp->docker_json, imp->docker_len, "manifest.json", &dm, err);
    if (rc < 0)
        return rc;
    const struct docker_image *pick = NULL;
    if (dm->n_images == 0) {
        docker_manifest_free(dm);
        return err_set(err, ERR_INVALID_CONTENT, "manifest.json: lists no image");
    }
    if (imp->req->name)
        for (size_t i = 0; i < dm->n_images && !pick; i++)
            for (size_t t = 0; t < dm->images[i].n_repo_tags; t++)
                if (strcmp(dm->images[i].repo_tags[t], imp->req->name) == 0 ||
                    ref_same(dm->images[i].repo_tags[t], imp->req->name))
                    pick = &dm->images[i];
    if (!pick)
        pick = &dm->images[0];
    if (dm->n_images > 1 && !imp->req->name)
        log_info("import: manifest.json lists %zu images; importing the first", dm->n_images);

    struct staged_file *cf = import_find_staged(imp, pick->config);
    if (!cf) {
        rc = err_set(err, ERR_INVALID_CONTENT, "manifest.json: config %s is not in the archive",
                     pick->config);
        goto out;
    }
    struct oci_layer_ref *refs = calloc(pick->n_layers ? pick->n_layers : 1, sizeof(*refs));
    if (!refs) {
        rc = err_set(err, ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < pick->n_layers; i++) {
        struct staged_file *lf = import_find_staged(imp, pick->layers[i]);
        if (!lf) {
            free(refs);
            rc = err_set(err, ERR_INVALID_CONTENT, "manifest.json: layer %s is not in the archive",
                         pick->layers[i]);
            goto out;
        }
        snprintf(refs[i].digest, sizeof(refs[i].digest), "%s", lf->digest);
        refs[i].size = lf->size;
        /* docker save layers are plain tars, newer Docker may compress. */
        unsigned char magic[4] = {0};
        cleanup_free char *loc = blob_location(imp, lf->digest);
        int fd = loc ? osfs_open(loc, O_RDONLY, 0) : -1;
        if (fd >= 0) {
            if (read(fd, magic, sizeof(magic)) < 0)
                memset(magic, 0, sizeof(magic));
            close(fd);
        }
        if (magic[0] == 0x1f && magic[1] == 0x8b)
            refs[i].compression = OCI_LAYER_GZIP;
        else if (magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
            refs[i].compression = OCI_LAYER_ZSTD;
        else
            refs[i].compression = OCI_LAYER_TAR;
    }
    rc = oci_manifest_synthesize(cf->digest, cf->size, refs, pick->n_layers, &json, &json_len,
                                 imp->b.manifest_digest, err);
    free(refs);
    if (rc < 0)
        goto out;
    imp->b.manifest_size = (int64_t)json_len;
    if ((rc = lease_blob(imp, imp->b.manifest_digest, err)) < 0)
        goto out;
    struct blob_writer *w = blob_writer_new(imp->st->blobs, imp->b.staging, imp->b.manifest_digest,
                                            (int64_t)json_len, -1, err);
    if (!w) {
        rc = -err->code;
        goto out;
    }
    if (blob_writer_write(w, json, json_len, err) < 0) {
        blob_writer_abort(w);
        rc = -err->code;
        goto out;
    }
    /* finish frees the writer whether it succeeds or not. */
    if ((rc = blob_writer_finish(w, NULL, NULL, err)) < 0)
        goto out;
    for (size_t t = 0; t < pick->n_repo_tags; t++)
        if (add_name(imp, pick->repo_tags[t]) < 0) {
            rc = err_set(err, ENOMEM, "out of memory");
            goto out;
        }
out:
    docker_manifest_free(dm);
    return rc;
}

/* ---- commit ------------------------------------------------------------- */

/*
 * The names the image is stored under, canonical (store/refname.h): the
 * request's ?name= alone when given (its repository taking the layout's
 * bare tag when it has no tag of its own), else every name the archive
 * gives, a bare tag as localhost/<tag>:latest. Names that are no
 * reference are dropped. Caller frees with strv_free.
 */
size_t
import_stored_names(const struct import *imp, char ***out)
{
    char **v = NULL;
    size_t n = 0;
    struct err ignored;
    const char *bare = NULL;
    for (size_t k = 0; !bare && k < imp->n_names; k++)
        if (image_ref_is_bare_tag(imp->names[k]))
            bare = imp->names[k];
    for (size_t k = 0; k < (imp->req->name ? 1 : imp->n_names); k++) {
        const char *given = imp->req->name ? imp->req->name : imp->names[k];
        cleanup_free char *raw = NULL;
        if (imp->req->name && bare && !image_ref_has_tag(given)) {
            if (asprintf(&raw, "%s:%s", given, bare) < 0)
                raw = NULL;
        } else if (!imp->req->name && image_ref_is_bare_tag(given)) {
            if (asprintf(&raw, "localhost/%s:latest", given) < 0)
                raw = NULL;
        }
        char *canon = NULL;
        if (image_ref_normalize(raw ? raw : given, &canon, &ignored) < 0)
            continue;
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = strcmp(v[i], canon) == 0;
        if (dup || strv_push(&v, &n, canon) < 0) {
            free(canon);
            continue;
        }
        free(canon);
    }
    *out = v;
    return n;
}
