/*
 * The metadata database: images, their layers and names, blobs and the
 * references between them, snapshots, image and snapshot users, and
 * leases, in SQLite at <root>/meta.db. One connection behind a mutex;
 * every public function is one transaction, so a crash leaves nothing
 * half-written. Blocking and thread-safe: called from pool jobs.
 *
 * Time stamps are unix seconds. Digests and chain IDs are full
 * "sha256:<hex>" strings, validated on the way in.
 */
#ifndef BERTH_STORE_META_H
#define BERTH_STORE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/digest.h"

struct meta;
struct sqlite3;

/* One layer of an image, in order from the base. */
struct meta_layer {
    char digest[DIGEST_STR_LEN];   /* the (compressed) layer blob */
    char diff_id[DIGEST_STR_LEN];  /* digest of the uncompressed tar */
    char chain_id[DIGEST_STR_LEN]; /* OCI chain ID: the snapshot's key */
    int64_t size;                  /* bytes of the layer blob */
    int64_t unpacked_size;         /* bytes of the snapshot (0 if unknown) */
};

struct meta_platform {
    char *os;
    char *architecture;
    char *variant;    /* "" when none */
    char *os_version; /* "" when none */
};

/* A blob recorded at import: media_type may be NULL. */
struct meta_blob {
    char digest[DIGEST_STR_LEN];
    int64_t size;
    const char *media_type;
};

/* parent references child: index -> manifest -> config and layers. */
struct meta_blob_ref {
    char parent[DIGEST_STR_LEN];
    char child[DIGEST_STR_LEN];
};

/*
 * An image record: everything the API shows about an image. Returned by
 * meta_image_get/list (owned by the caller, freed with meta_image_free);
 * built by the importer for meta_image_put (owned by the importer, who
 * may use stack memory and then must not call meta_image_free; blobs and
 * refs are put-only inputs and are empty in returned records).
 */
struct meta_image {
    char digest[DIGEST_STR_LEN]; /* manifest digest: the image's identity */
    char config_digest[DIGEST_STR_LEN];
    char **names; /* sorted; output only */
    size_t n_names;
    struct meta_platform platform;
    struct meta_layer *layers;
    size_t n_layers;
    int64_t size_bytes;     /* sum of the compressed blobs */
    int64_t unpacked_bytes; /* sum of the layers' snapshots */
    int64_t created_at;     /* put: 0 means now */
    int64_t last_used_at;   /* put: 0 means now */
    int64_t users;          /* output only: containers using the image */

    const struct meta_blob *blobs; /* put only: every blob of the import */
    size_t n_blobs;
    const struct meta_blob_ref *refs; /* put only: parents must be in blobs */
    size_t n_refs;
};

/*
 * Opens (creating or migrating) <root>/meta.db. *out is owned by the
 * caller and closed with meta_close.
 */
int meta_open(const char *root, struct meta **out, struct err *err);
/* Closes the database; NULL is a no-op. */
void meta_close(struct meta *m);

/* Frees an image returned by meta_image_get or meta_image_list; NULL is a no-op. */
void meta_image_free(struct meta_image *img);
/* Frees the array returned by meta_image_list and every image in it. */
void meta_image_list_free(struct meta_image **imgs, size_t n);

/*
 * Records an import in one transaction: the image, its layers, their
 * snapshots (parent = the previous layer's chain ID), the blobs and refs,
 * and name (NULL for none; a name held by another image moves here).
 * Layer chain IDs are checked against the diff IDs (EINVAL). If the
 * image exists already only the name is added and last_used_at bumped;
 * *created (may be NULL) says which happened.
 */
int meta_image_put(struct meta *m, const struct meta_image *img, const char *name, bool *created,
                   struct err *err);

/*
 * Looks an image up by ref: a full digest, a name, or a hex prefix of at
 * least 12 digits with or without "sha256:" (tried in that order). ENOENT
 * when nothing matches, ERR_CONFLICT when a prefix matches several. *out
 * is owned by the caller (meta_image_free).
 */
int meta_image_get(struct meta *m, const char *ref, struct meta_image **out, struct err *err);

/*
 * All images, most recently created first. *out is an array of *n images
 * owned by the caller (meta_image_list_free); NULL when there are none.
 */
int meta_image_list(struct meta *m, struct meta_image ***out, size_t *n, struct err *err);
/* How many images are stored. */
int meta_image_count(struct meta *m, int64_t *n, struct err *err);

/*
 * Gives the image ref resolves to the name (canonical form; a name held
 * by another image moves here). digest_out (may be NULL) gets its digest.
 */
int meta_image_tag(struct meta *m, const char *ref, const char *name,
                   char digest_out[DIGEST_STR_LEN], struct err *err);

/* Sets last_used_at of the image ref resolves to (now when at is 0). */
int meta_image_touch(struct meta *m, const char *ref, int64_t at, struct err *err);

/*
 * Deletes by ref. A name whose image has other names removes only that
 * name; anything else removes the image with all its names and layers
 * (ERR_CONFLICT while it has users). Blobs and snapshots stay until
 * gc_run. digest_out (may be NULL) gets the image's digest;
 * *image_removed (may be NULL) whether the image record went.
 */
int meta_image_delete(struct meta *m, const char *ref, char digest_out[DIGEST_STR_LEN],
                      bool *image_removed, struct err *err);

/*
 * Removes images with no users, least recently used first (then oldest).
 * An image whose manifest digest is leased is not a candidate: an import
 * or pull in flight stores it or answers with it (it committed the record
 * and reads it back, or found it stored and adds a name), and a prune in
 * between would make that import answer "not found". The daemon's
 * --store-max-bytes policy runs before the import's or pull's lease goes,
 * so the image just stored is never its candidate either.
 * unused_for_s >= 0 restricts the candidates to those unused for longer
 * than that; keep_bytes >= 0 stops as soon as the total size of all
 * images (size_bytes + unpacked_bytes, those in use or leased included)
 * is at most keep_bytes. With both -1 every image without users goes.
 * now is the current time (0: now).
 * *removed gets the removed digests (array and strings owned by the
 * caller: free each and the array; NULL when none), *n_removed their
 * number. One transaction. Run gc_run afterwards to free the space.
 */
int meta_prune_images(struct meta *m, int64_t unused_for_s, int64_t keep_bytes, int64_t now,
                      char ***removed, size_t *n_removed, struct err *err);

/*
 * Users of an image (containers). add: ENOENT if the image is unknown,
 * adding the same user twice is a no-op; the image's last_used_at becomes
 * now in the same transaction (one commit, one fsync, where a separate
 * meta_image_touch was a second). remove: ENOENT if not a user.
 */
int meta_image_use_add(struct meta *m, const char *image_digest, const char *user_id,
                       struct err *err);
int meta_image_use_remove(struct meta *m, const char *image_digest, const char *user_id,
                          struct err *err);
int meta_image_use_count(struct meta *m, const char *image_digest, int64_t *count, struct err *err);

/*
 * Drops every image use whose user keep() does not claim, in one
 * transaction; *dropped (may be NULL) gets how many users went. For the
 * start-up: a container's record that a power loss took (it is written
 * unsynced until the container runs) must not leave its image in use
 * for ever.
 */
int meta_image_users_retain(struct meta *m, bool (*keep)(void *arg, const char *user_id), void *arg,
                            unsigned *dropped, struct err *err);

/* Whether a snapshot row exists for chain_id. */
int meta_snapshot_exists(struct meta *m, const char *chain_id, bool *exists, struct err *err);

/* The recorded unpacked size of a snapshot; *exists false (size 0) when
 * there is no row for it. */
int meta_snapshot_size(struct meta *m, const char *chain_id, int64_t *size, bool *exists,
                       struct err *err);

/*
 * Records a snapshot (parent NULL for a base layer). An existing row is
 * kept as it is.
 */
int meta_snapshot_put(struct meta *m, const char *chain_id, const char *parent, int64_t size_bytes,
                      struct err *err);

/* Users of a snapshot (e.g. a container's layers): GC roots. */
int meta_snapshot_use_add(struct meta *m, const char *chain_id, const char *user_id,
                          struct err *err);
int meta_snapshot_use_remove(struct meta *m, const char *chain_id, const char *user_id,
                             struct err *err);

/*
 * Leases: what an import in progress holds so GC keeps it. Take the lease
 * on a digest or chain ID before writing it or checking it exists. A
 * lease may name blobs and snapshots that have no row yet.
 */
#define META_LEASE_ID_LEN 33 /* 32 hex digits + NUL */

int meta_lease_new(struct meta *m, char id_out[META_LEASE_ID_LEN], struct err *err);
int meta_lease_add_blob(struct meta *m, const char *lease_id, const char *digest, struct err *err);
int meta_lease_add_snapshot(struct meta *m, const char *lease_id, const char *chain_id,
                            struct err *err);
/* Removes a lease and what it holds. ENOENT if unknown. */
int meta_lease_remove(struct meta *m, const char *lease_id, struct err *err);
/* Removes every lease: at start-up, since no import survives a restart. */
int meta_lease_clear_all(struct meta *m, struct err *err);

/*
 * For gc.c only: runs fn with the database mutex held inside one
 * BEGIN IMMEDIATE transaction, committed if fn returns 0 and rolled back
 * otherwise. No other meta_* call on m may be made from fn.
 */
typedef int (*meta_locked_fn)(struct sqlite3 *db, void *ctx, struct err *err);

int meta_run_locked(struct meta *m, meta_locked_fn fn, void *ctx, struct err *err);

#endif
