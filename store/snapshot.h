/*
 * Snapshots: unpacked layers, one directory per chain ID, shared by every
 * image and container that uses them.
 *
 *   <root>/snapshots/<chain hex>/fs     the unpacked layer (an overlay lower)
 *   <root>/snapshots/<chain hex>/meta   "chain sha256:<hex>\n"
 *   <root>/snapshots/tmp-<unique>/      a snapshot being built or removed
 *
 * A snapshot is built under tmp-* and renamed to its final name only when
 * complete and synced, so a final name always holds a whole snapshot, also
 * after a crash; snapshot_store_clean removes what a crash left in tmp-*.
 *
 * Single flight: of several threads that want the same chain ID, one
 * builds it and the others wait for it (snapshot_acquire).
 *
 * Unpack slots: at most max_unpacks threads at a time are between the
 * blocking part of snapshot_acquire and snapshot_commit/abort (building,
 * or waiting for another thread's build). A thread that finds the
 * snapshot ready takes no slot and never waits. Sized by the caller to
 * the pool size minus one (or less), this keeps pool threads free for
 * short jobs however many unpacks are queued.
 *
 * Synchronous and thread-safe: called from pool threads; the functions
 * that may block say so.
 */
#ifndef BERTH_STORE_SNAPSHOT_H
#define BERTH_STORE_SNAPSHOT_H

#include <stdbool.h>

#include "common/err.h"

struct snapshot_store;
struct snapshot_claim;

/*
 * Removes every <root>/snapshots/tmp-* (half-built or half-removed
 * snapshots of an earlier run). Call at start-up, before any
 * snapshot_acquire. Blocks on disk.
 */
int snapshot_store_clean(const char *root, struct err *err);

/*
 * Opens the snapshot store under root (creating <root>/snapshots) with
 * max_unpacks unpack slots (at least 1). *out is freed with
 * snapshot_store_free, after every claim is committed or aborted.
 */
int snapshot_store_open(const char *root, unsigned max_unpacks, struct snapshot_store **out,
                        struct err *err);

/* Frees the store; NULL is a no-op. */
void snapshot_store_free(struct snapshot_store *s);

enum snapshot_acquire_result {
    SNAPSHOT_EXISTS = 0,  /* ready: use snapshot_path */
    SNAPSHOT_CLAIMED = 1, /* this caller builds it: *claim is set */
};

/*
 * Returns SNAPSHOT_EXISTS if the snapshot of chain_id ("sha256:<hex>") is
 * ready. Otherwise takes an unpack slot (blocking while none is free) and,
 * if another thread is building the same chain ID, waits for it: its
 * commit makes this return SNAPSHOT_EXISTS, its abort hands the build to
 * this caller. Returns SNAPSHOT_CLAIMED with *claim set when this caller
 * is to build it: unpack into snapshot_claim_dir, then snapshot_commit or
 * snapshot_abort (exactly one of them; the claim holds the slot until
 * then). Negative errno on failure (EINVAL for a bad chain ID).
 * Blocks.
 */
int snapshot_acquire(struct snapshot_store *s, const char *chain_id, struct snapshot_claim **claim,
                     struct err *err);

/* The empty directory to unpack into (owned by the claim). */
const char *snapshot_claim_dir(const struct snapshot_claim *c);

/*
 * Makes the claimed snapshot durable and renames it into place, wakes the
 * waiters, releases the slot and frees the claim (also on failure, after
 * which the build is aborted). Blocks on disk (syncfs).
 */
int snapshot_commit(struct snapshot_claim *c, struct err *err);

/*
 * Removes what was built, hands the chain ID to a waiter if there is one,
 * releases the slot and frees the claim. NULL is a no-op. Blocks on disk.
 */
void snapshot_abort(struct snapshot_claim *c);

/* True when the snapshot of chain_id is ready. */
bool snapshot_exists(struct snapshot_store *s, const char *chain_id);

/*
 * The unpacked layer directory of chain_id, <root>/snapshots/<hex>/fs,
 * whether or not it exists yet. Caller frees. NULL for an invalid chain ID
 * or on OOM.
 */
char *snapshot_path(const struct snapshot_store *s, const char *chain_id);

/*
 * Removes the snapshot of chain_id (a missing one is success): renamed to
 * tmp-* first, so a crash never leaves a half-removed snapshot at its
 * name. ERR_CONFLICT while it is being built. The caller makes sure no
 * image or container still uses it (garbage collection). Blocks on disk.
 */
int snapshot_remove(struct snapshot_store *s, const char *chain_id, struct err *err);

/* The names snapshot_dir_set_aside gives. */
#define SNAPSHOT_ASIDE_PREFIX "tmp-rm-"

/*
 * Renames <dir>/<hex> (dir: <root>/snapshots) to a tmp-rm- name in dir
 * that no look-up finds and snapshot_store_clean removes at the next
 * start, and syncs dir; *aside is that path (caller frees and removes
 * it), NULL when there was nothing at <hex>. For whoever removes a
 * snapshot without the store's claims: garbage collection, which takes
 * only chains nothing leases, and a build leases its chain before it
 * claims it (store/gc.h). Blocks on disk.
 */
int snapshot_dir_set_aside(const char *dir, const char *hex, char **aside, struct err *err);

#endif
