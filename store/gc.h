/*
 * Garbage collection of the store: mark from roots (images, leases,
 * snapshots with users), sweep blob files, blob rows and snapshots that
 * nothing reaches. Blocking; called from a pool job (or at start-up).
 *
 * The protocol writers follow so GC never takes what they are about to
 * use: take a lease on a blob digest or snapshot chain ID
 * (meta_lease_add_blob/_snapshot) before checking that it exists or
 * writing it, and release the lease only after meta_image_put committed.
 */
#ifndef BERTH_STORE_GC_H
#define BERTH_STORE_GC_H

#include <stdint.h>

#include "common/err.h"
#include "store/blob.h"
#include "store/meta.h"

struct gc_result {
    uint64_t blobs_removed;        /* blob files removed from content/ */
    uint64_t blob_bytes_freed;     /* their sizes */
    uint64_t snapshots_removed;    /* snapshot rows and/or directories removed */
    uint64_t snapshot_bytes_freed; /* recorded sizes of the removed snapshots */
    uint64_t snapshots_busy;       /* unreferenced but mounted: kept, logged */
    uint64_t cims_removed;         /* Windows: CIMs of <root>/cims removed with their files */
    uint64_t cims_busy;            /* Windows: CIM files kept because in use */
    uint64_t errors;               /* other removals that failed: kept, logged */
};

/*
 * Runs one mark and sweep over the content store bs, the database m and
 * the snapshot directories <root>/snapshots/<chain hex>, and on Windows
 * the CIMs of <root>/cims (store/cim_chain.h). Entries whose
 * names are not 64 hex digits (temporaries of a writer) are never
 * touched, but for the tmp-rm- trees earlier removals set aside
 * (store/snapshot.h), tried again. A snapshot that is itself a mount
 * point (EBUSY) keeps its row and is counted in snapshots_busy. Elsewhere
 * than Windows a snapshot is set aside before its tree goes: one whose
 * tree then will not go completely loses its name and row all the same
 * (counted in snapshots_removed and in errors, not in the bytes freed).
 * Other per-entry failures keep the snapshot whole with its row and are
 * logged and counted in errors, and the run goes on. Fills *res; returns
 * 0 or a negative errno for a failure of the database or of listing.
 */
int gc_run(struct blob_store *bs, struct meta *m, const char *root, struct gc_result *res,
           struct err *err);

#endif
