/*
 * Building one image in the store from its manifest, config and layer
 * blobs: the part of an import that is the same whatever the bytes come
 * from (an upload, a layout directory on the host, a registry).
 *
 * A build holds a lease (so garbage collection keeps what it writes) and
 * a staging directory (so none of its blobs is visible before the image
 * is). It checks the manifest and config against each other and the
 * platform against this host, computes the layers' chain IDs, unpacks a
 * layer in the one pass that also checks its digest, size and diff_id
 * (optionally teeing the bytes into a staged blob), and commits: blobs
 * into the content store, then the image record in one transaction.
 * A build that ends without a commit collects the snapshots it built.
 *
 * Blocking: called from pool threads. One build may be used from several
 * threads at once for different layers (image_build_layer_unpack); the
 * other calls are made by one thread at a time.
 */
#ifndef BERTH_STORE_IMAGE_BUILD_H
#define BERTH_STORE_IMAGE_BUILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/meta.h"
#include "store/oci.h"
#include "store/snapshot.h"
#include "store/store.h"

struct image_build {
    struct store *st;
    char lease[META_LEASE_ID_LEN];
    bool leased;
    char *staging; /* this build's staging directory */

    /* The image, once resolved by the caller. */
    char manifest_digest[DIGEST_STR_LEN];
    int64_t manifest_size;
    struct oci_manifest *manifest; /* owned */
    struct oci_config *config;     /* owned */
    char **chain_ids;              /* one per layer (image_build_chain_ids) */
    int64_t *unpacked;             /* bytes each layer's snapshot holds */
    unsigned snapshots_built;      /* committed by this build (atomic) */
};

/* Takes a lease and a staging directory. On failure b needs image_build_end. */
int image_build_begin(struct image_build *b, struct store *st, struct err *err);

/*
 * Removes the staging directory, drops the lease and frees what b owns.
 * When failed and the build committed snapshots, runs garbage collection
 * so they do not outlive the failure (one in use by another build is
 * leased by it and stays). Blocks on disk.
 */
void image_build_end(struct image_build *b, bool failed);

/* Leases a blob digest for the build (before checking or writing it). */
int image_build_lease_blob(struct image_build *b, const char *digest, struct err *err);

/* True when digest is in the content store or staged by this build; its
 * size in *size (may be NULL). */
bool image_build_blob_present(struct image_build *b, const char *digest, int64_t *size);

/* Where to read a present blob: the staged copy, else the stored one.
 * Caller frees; NULL on OOM. */
char *image_build_blob_location(struct image_build *b, const char *digest);

/*
 * With b->manifest and b->config parsed: checks that they agree, that the
 * image is the platform asked for (asked NULL: any) and that this host
 * can run it (the one platform check). ERR_INVALID_CONTENT naming the
 * image otherwise.
 */
int image_build_check(struct image_build *b, const struct oci_platform *asked, struct err *err);

/* Fills b->chain_ids and allocates b->unpacked, one entry per layer. */
int image_build_chain_ids(struct image_build *b, struct err *err);

/*
 * The snapshot paths of the layers below layer i, top-most first and
 * NULL-terminated, as layer_unpack takes them (they must be committed).
 * Caller frees with image_build_lowers_free. NULL on OOM.
 */
char **image_build_lowers(struct image_build *b, size_t i);
void image_build_lowers_free(char **lowers);

/* The bytes of a layer blob, and where else they go. */
struct image_build_source {
    ssize_t (*read)(void *ctx, void *buf, size_t len); /* >0, 0 at the end, -errno */
    void *ctx;
    /* NULL, or a writer of the blob (made by the caller) that gets every
     * byte read: finished (so verified) on success, aborted on failure. */
    struct blob_writer *tee;
};

/*
 * Unpacks layer i into claim's directory in one pass over src, checking
 * the blob's digest and size against the manifest and its diff_id against
 * the config, and sets b->unpacked[i]. ERR_INVALID_CONTENT naming the
 * layer on a mismatch or a bad tar; the errno of the source when reading
 * failed. The caller commits or aborts the claim. Blocks.
 */
int image_build_layer_unpack(struct image_build *b, size_t i, const char *const *lowers,
                             struct snapshot_claim *claim, const struct image_build_source *src,
                             struct err *err);

/*
 * Moves every blob of the image from staging into the content store, then
 * records the image with its layers, blobs and references, named name
 * and, when name is NULL, each valid name of names[] (the first one
 * decides). *out is the stored record (meta_image_free), *created whether
 * it is new.
 */
int image_build_commit(struct image_build *b, const char *name, char *const *names, size_t n_names,
                       struct meta_image **out, bool *created, struct err *err);

/*
 * Looks digest up among the stored images and, when it is there, holds
 * it for image_build_answer_stored: its manifest, config and layer blobs
 * and every layer's snapshot leased, then looked up again. A prune skips
 * a leased image, but a delete of its last name does not; without the
 * snapshot leases a GC after such a delete took the snapshots while the
 * answer recorded the image again from the copy read here, naming
 * snapshots that were gone. If the image went before the leases, the
 * second look-up misses it and the caller builds it as a new one.
 * 1 with *out (meta_image_free) when held, 0 when not stored, or a
 * negative errno (a lease that failed).
 */
int image_build_hold_stored(struct image_build *b, const char *digest, struct meta_image **out,
                            struct err *err);

/* An image already stored and held (image_build_hold_stored): adds name
 * (NULL: none) and answers with its record. Takes stored (frees it). */
int image_build_answer_stored(struct image_build *b, struct meta_image *stored, const char *name,
                              struct meta_image **out, struct err *err);

#endif
