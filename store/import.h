/*
 * Importing an image: from a tar stream holding an OCI image layout or a
 * `docker save` archive (optionally gzip or zstd compressed), or from an
 * OCI layout directory on the host. Every blob is checked against its
 * digest and size, the platform is checked before any layer is unpacked,
 * each layer is unpacked once into the snapshot of its chain ID, and
 * nothing of a failed import becomes visible: its blobs wait in a staging
 * directory and are moved into the content store only when the whole
 * image was good, and the image record is written last, in one
 * transaction. An import holds a lease so garbage collection never takes
 * what it is writing, nor a prune the image it stored, until it returns:
 * its caller's hook for a new image (import_request.on_created) runs
 * under that lease too.
 *
 * Blocking: runs on a pool thread. The progress callback is called on
 * that thread.
 */
#ifndef BERTH_STORE_IMPORT_H
#define BERTH_STORE_IMPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/meta.h"
#include "store/platform.h"
#include "store/store.h"

/* One step of an import, for progress reports. Strings are borrowed for
 * the duration of the callback. */
struct import_event {
    const char *step;     /* "blob", "layer", "image" */
    const char *status;   /* blob: "stored", "present"; layer: "unpacking", "unpacked", "cached" */
    const char *digest;   /* the blob or layer digest */
    const char *chain_id; /* layers only */
    int64_t done;         /* bytes done (layer: of the compressed blob) */
    int64_t total;        /* bytes in all, -1 when unknown */
    unsigned index;       /* layers: 1-based position */
    unsigned count;       /* layers: how many */
};

typedef void (*import_progress_fn)(void *ctx, const struct import_event *ev);

/* Reads the next bytes of an upload: >0 bytes, 0 at the end, <0 -errno. */
typedef ssize_t (*import_read_fn)(void *ctx, void *buf, size_t len);

/* Told that the import stored img as a new image; img is borrowed for the
 * call. */
typedef void (*import_created_fn)(void *ctx, const struct meta_image *img);

struct import_request {
    const char *layout_dir; /* an OCI layout directory on the host, or NULL */
    /* How errors name the layout, in the client's terms (a volume's is
     * "source.volume V path P", not the fd path it is read through);
     * NULL: "source.layout <layout_dir>". */
    const char *layout_shown;
    import_read_fn read; /* or a tar stream */
    void *read_ctx;
    const char *name;                    /* names the image; NULL: the one in the archive */
    const struct oci_platform *platform; /* NULL: this host's */
    import_progress_fn progress;         /* may be NULL */
    void *progress_ctx;
    /* May be NULL. Called on the import's thread once the image is
     * committed as new (never when it was already stored), while the
     * import still holds its lease: no prune takes img, and no garbage
     * collection its blobs and snapshots, until the call returns (the
     * daemon runs its --store-max-bytes policy here). */
    import_created_fn on_created;
    void *on_created_ctx;
};

/*
 * Imports one image. On success *out is the stored image record (caller
 * frees with meta_image_free) and *created says whether it is new (false:
 * it was already stored, and only the name was added). Bad content fails
 * with ERR_INVALID_CONTENT and a message naming the blob and the problem.
 */
int store_image_import(struct store *st, const struct import_request *req, struct meta_image **out,
                       bool *created, struct err *err);

#endif
