/*
 * What the parts of an image import share: the state of one import
 * (struct import) and the steps one part calls in another. import.c runs
 * the steps in order; import_layout.c reads an OCI layout directory,
 * import_upload.c the tar stream of an upload, import_resolve.c finds the
 * manifest and config and the names, import_unpack.c unpacks the layers.
 * Not for other modules. One struct import per call of
 * store_image_import, on one pool thread; every step blocks.
 */
#ifndef BERTH_STORE_IMPORT_INT_H
#define BERTH_STORE_IMPORT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/digest.h"
#include "store/image_build.h"
#include "store/import.h"

#define READ_CHUNK (256 * 1024)
#define PROGRESS_STEP (8 << 20)

/* An upload's regular file, by its path in the archive. */
struct staged_file {
    char *path;
    char digest[DIGEST_STR_LEN];
    int64_t size;
    struct staged_file *next;
};

/* An upload's symbolic or hard link (docker save reuses layers this way). */
struct archive_link {
    char *path;
    char *target; /* normalised, relative to the archive root */
    struct archive_link *next;
};

struct import {
    struct store *st;
    const struct import_request *req;
    struct image_build b; /* lease, staging, the resolved image */

    /* Upload only. */
    struct staged_file *files;
    struct archive_link *links;
    char *index_json;
    size_t index_len;
    char *docker_json;
    size_t docker_len;
    bool saw_layout_file;

    char **names; /* from the archive: ref.name or RepoTags */
    size_t n_names;
};

static inline void
emit(struct import *imp, const struct import_event *ev)
{
    if (imp->req->progress)
        imp->req->progress(imp->req->progress_ctx, ev);
}

static inline int
lease_blob(struct import *imp, const char *digest, struct err *err)
{
    return image_build_lease_blob(&imp->b, digest, err);
}

/* True when digest is in the content store or staged by this import. */
static inline bool
blob_present(struct import *imp, const char *digest, int64_t *size)
{
    return image_build_blob_present(&imp->b, digest, size);
}

/* Where to read a present blob from; caller frees. */
static inline char *
blob_location(struct import *imp, const char *digest)
{
    return image_build_blob_location(&imp->b, digest);
}

/* ---- import_layout.c: an OCI layout directory on the host ---------------- */

/* Reads and checks the layout's oci-layout file and its index.json (into
 * imp->index_json). */
int import_layout_read_index(struct import *imp, struct err *err);

/* Opens a blob of the layout directory without following a symlink.
 * Returns the fd (caller closes) or -errno with err set. */
int import_layout_blob_open(struct import *imp, const char *digest, struct err *err);

/* Copies a blob of the layout directory into staging, verifying it. */
int import_layout_blob_stage(struct import *imp, const char *digest, int64_t size, int64_t max,
                             struct err *err);

/* ---- import_upload.c: the tar stream of an upload ------------------------ */

/* Reads the whole upload, staging its files and keeping its small
 * documents (index.json, manifest.json). */
int import_read_upload(struct import *imp, struct err *err);

/* The staged file for an archive path, following links (bounded), or NULL. */
struct staged_file *import_find_staged(struct import *imp, const char *path);

/* ---- import_resolve.c: which image, its manifest, config and names ------- */

/* Resolves index.json to the manifest for the wanted platform. */
int import_resolve_oci(struct import *imp, const char *index_json, size_t index_len,
                       struct err *err);

/* Picks the docker save image to import and turns it into an OCI manifest. */
int import_resolve_docker(struct import *imp, struct err *err);

/* Reads and checks the manifest and config named by imp->b.manifest_digest. */
int import_load_manifest_and_config(struct import *imp, struct err *err);

/* The names the image is stored under, canonical; caller frees with strv_free. */
size_t import_stored_names(const struct import *imp, char ***out);

/* ---- import_unpack.c: the layers into snapshots -------------------------- */

/* Unpacks every layer not yet in a snapshot, checking each blob. */
int import_unpack_layers(struct import *imp, struct err *err);

#endif
