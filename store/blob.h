/*
 * The content store: immutable blobs named by digest under
 * <root>/content/sha256/<hex>, written through a temporary file under
 * <root>/tmp/ while they are hashed, checked, made durable and renamed
 * into place. Blocking and thread-safe: called from pool jobs (and at
 * start-up). Paths are only ever built from digest_valid() digests.
 *
 * Protocol with GC (see gc.h): an import takes a lease on a digest
 * (meta_lease_add_blob) before it checks blob_exists or writes the blob,
 * so a concurrent gc_run either finishes first or sees the lease.
 */
#ifndef BERTH_STORE_BLOB_H
#define BERTH_STORE_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/digest.h"

struct blob_store;
struct blob_writer;

/*
 * Opens (creating as needed) the content store under root. Caller owns
 * the result and frees it with blob_store_free. NULL on error.
 */
struct blob_store *blob_store_open(const char *root, struct err *err);
/* Frees bs; NULL is a no-op. Writers must be finished or aborted first. */
void blob_store_free(struct blob_store *bs);

/*
 * Removes everything under <root>/tmp/: temporaries and staging dirs
 * left by a crash. Call at start-up, before any writer exists.
 */
int blob_store_clean_tmp(struct blob_store *bs, struct err *err);

/*
 * Creates a fresh, empty staging directory under <root>/tmp/ for an
 * import whose blobs must not be visible until it commits. Stores the
 * path in *out (caller frees; remove it with fs_remove_tree when done).
 * Being under tmp/, it is on the same filesystem as content/ (so
 * blob_commit_staged is a rename) and a crash leaves nothing behind.
 */
int blob_staging_dir_new(struct blob_store *bs, char **out, struct err *err);

/*
 * Starts writing a blob. staging_dir NULL: the blob lands in content/ on
 * finish; otherwise in staging_dir/<hex> (same filesystem as root).
 * expected_digest (NULL: unknown) must be a valid digest, else EINVAL.
 * expected_size and max_size: -1 for unknown/none. Caller owns the writer
 * and ends it with blob_writer_finish or blob_writer_abort. NULL on error.
 */
struct blob_writer *blob_writer_new(struct blob_store *bs, const char *staging_dir,
                                    const char *expected_digest, int64_t expected_size,
                                    int64_t max_size, struct err *err);

/*
 * Hashes and writes len bytes. Fails with ERR_INVALID_CONTENT before
 * writing anything once the total would exceed expected_size or
 * max_size. After an error the writer must be aborted.
 */
int blob_writer_write(struct blob_writer *w, const void *buf, size_t len, struct err *err);

/*
 * Checks the digest and size against what was expected (ERR_INVALID_CONTENT
 * on mismatch), fsyncs and renames the blob into its destination (an
 * existing blob there wins and the temporary is dropped), then fsyncs the
 * directory. out_digest and out_size may be NULL. Frees w in every case.
 */
int blob_writer_finish(struct blob_writer *w, char out_digest[DIGEST_STR_LEN], int64_t *out_size,
                       struct err *err);

/* Bytes written so far. */
int64_t blob_writer_size(const struct blob_writer *w);

/* Removes the temporary and frees w; NULL is a no-op. */
void blob_writer_abort(struct blob_writer *w);

/*
 * Moves staging_dir/<hex> into content/ (if the blob is already there the
 * staged copy is dropped) and fsyncs content/. ENOENT if neither the
 * staged nor the stored blob exists.
 */
int blob_commit_staged(struct blob_store *bs, const char *staging_dir, const char *digest,
                       struct err *err);

/* True when digest is valid and its blob is in content/. */
bool blob_exists(struct blob_store *bs, const char *digest);

/* content/sha256/<hex> for a valid digest (caller frees); NULL if invalid or OOM. */
char *blob_path(struct blob_store *bs, const char *digest);

/* Size of a stored blob. ENOENT if missing, EINVAL for an invalid digest. */
int blob_stat(struct blob_store *bs, const char *digest, int64_t *size, struct err *err);

/*
 * Reads a whole stored blob of at most max bytes into a new NUL-terminated
 * buffer (*out, caller frees; *len may be NULL). A larger blob is refused
 * with ERR_INVALID_CONTENT without being read.
 */
int blob_read_small(struct blob_store *bs, const char *digest, size_t max, char **out, size_t *len,
                    struct err *err);

/* Removes a stored blob. ENOENT if missing. */
int blob_remove(struct blob_store *bs, const char *digest, struct err *err);

/*
 * Called for every stored blob with its digest and size; a non-zero
 * return stops the walk and becomes blob_list's return value. Files in
 * content/sha256/ whose names are not 64 lowercase hex are skipped.
 */
typedef int (*blob_list_cb)(const char *digest, int64_t size, void *ctx);

int blob_list(struct blob_store *bs, blob_list_cb cb, void *ctx, struct err *err);

#endif
