/*
 * Pulling an image from a registry into the store, as a plan in three
 * steps so that the caller (the daemon's pull service) can run each
 * layer as its own pool job with the parallelism it chooses:
 *
 *   pull_plan_new     the manifest (one GET; an index: the platform's
 *                     manifest, one more), the config, the platform check;
 *                     an image already stored ends the plan here
 *   pull_plan_layer   one call per layer, from any thread, in any order,
 *                     several at once: download, verify and unpack
 *   pull_plan_commit  the image record, once every layer call returned
 *
 * Each layer blob is checked against its digest and size while it streams
 * into the store, never held whole in memory. A layer whose lower layers
 * are already unpacked when its call starts goes through the import's
 * one pass (download -> staged blob + unpacker); one that comes ahead of
 * its lower layers is only downloaded (verified) and is unpacked from the
 * staged blob by whichever call completes the layers below it. So with a
 * parallelism of one every layer is one pass, and with more, downloads
 * overlap while unpacks stay in order. A blob already in the store is not
 * downloaded, a layer whose snapshot exists is not unpacked again.
 *
 * Nothing of a failed pull becomes visible: blobs wait in staging, the
 * image record is written last, and snapshots the plan built are
 * collected when it is freed without a commit. A plan holds a lease, so
 * garbage collection never takes what it is writing, and the single
 * flight of the store (store_inflight_begin) by manifest digest from
 * pull_plan_new until pull_plan_free, shared with uploads and layouts.
 *
 * Progress: req->progress gets struct import_event records (see import.h),
 * never two at once for one plan, though from several threads:
 *   step "manifest" status "resolved"     digest: the manifest picked
 *   step "layer"    status "downloading"  done/total: compressed bytes (a
 *                                         few a second, and at the end)
 *                   status "downloaded"   staged, to be unpacked when the
 *                                         layers below it are
 *                   status "unpacking"    from the staged blob
 *                   status "unpacked"     the snapshot is there
 *                   status "cached"       snapshot and blob were stored
 *   step "image"    status "created"/"present"
 *
 * Blocking; pool threads. Nothing here knows of libuv.
 */
#ifndef BERTH_STORE_PULL_H
#define BERTH_STORE_PULL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "store/import.h"
#include "store/meta.h"
#include "store/platform.h"
#include "store/registry.h"
#include "store/store.h"

/*
 * What to pull, as a parsed reference gives it (the caller normalises:
 * "busybox" is registry "docker.io", repository "library/busybox", tag
 * "latest"). Strings are borrowed for the call of pull_plan_new only.
 */
struct pull_request {
    const char *registry;                /* "docker.io", "127.0.0.1:5000" */
    const char *repository;              /* "library/busybox" */
    const char *tag;                     /* "1.36"; NULL when digest is given */
    const char *digest;                  /* "sha256:<hex>", or NULL; wins over tag */
    const char *name;                    /* the stored image's name, or NULL for none */
    const struct oci_platform *platform; /* NULL: this host's */
    const struct registry_creds *creds;  /* NULL: the client's auth file */
    import_progress_fn progress;         /* may be NULL */
    void *progress_ctx;
    /* Polled while waiting on the network: non-zero cancels (ECANCELED).
     * Read from every thread of the pull. May be NULL. */
    const int *cancel;
    /* The single flight without waiting (store_inflight_try_begin): with
     * no_wait, when another import of the same manifest is in flight,
     * pull_plan_new fails at once with EALREADY and sets *busy_owner (if
     * non-NULL) to that import's owner tag; owner is this plan's tag. A
     * caller that runs the layers as jobs of a pool of its own uses it so
     * that no pool thread waits for jobs queued behind it. */
    bool no_wait;
    const void *owner;
    const void **busy_owner;
};

struct pull_plan;

/*
 * Resolves the image: manifest (and index), config, platform check, chain
 * IDs, leases. Refuses, before any layer is fetched, a Docker schema 1
 * manifest and a foreign (non-distributable) layer the store does not
 * already have (ENOTSUP, a 422), an image for another platform
 * (ERR_INVALID_CONTENT). When the image is already stored, the plan is
 * complete at once (pull_plan_stored) after one manifest request (none
 * when pulling by the digest of a stored manifest). *out: pull_plan_free.
 * Blocks; may wait for another import of the same image to finish
 * (unless req->no_wait: then EALREADY).
 */
int pull_plan_new(struct store *st, struct registry_client *rc, const struct pull_request *req,
                  struct pull_plan **out, struct err *err);

/* True when the image was stored already: no layer calls are needed. */
bool pull_plan_stored(const struct pull_plan *p);

/* The manifest digest of the image being pulled. */
const char *pull_plan_digest(const struct pull_plan *p);

/* How many pull_plan_layer calls the plan takes (0 when stored). */
size_t pull_plan_layer_count(const struct pull_plan *p);

/* The total compressed size of the layers to download (not stored yet). */
int64_t pull_plan_download_bytes(const struct pull_plan *p);

/* Layer i's blob digest (owned by p), and its compressed size in *size
 * when non-NULL; i < pull_plan_layer_count. */
const char *pull_plan_layer_digest(const struct pull_plan *p, size_t i, int64_t *size);

/*
 * Fetches and unpacks layer i (see above). Thread-safe: call it once per
 * layer, from any thread, concurrently. After one call failed the others
 * stop early with ECANCELED, and the first error is what
 * pull_plan_commit returns. Blocks.
 */
int pull_plan_layer(struct pull_plan *p, size_t i, struct err *err);

/*
 * Records the image (or, when stored, adds the name) once every layer
 * call returned. *out: meta_image_free; *created: whether it is new.
 * Returns the first layer error when there was one.
 */
int pull_plan_commit(struct pull_plan *p, struct meta_image **out, bool *created, struct err *err);

/* Makes the layer calls in flight stop (ECANCELED). Any thread. */
void pull_plan_cancel(struct pull_plan *p);

/* Ends the plan: drops its lease, staging and single flight, and
 * collects the snapshots of an uncommitted plan. NULL is a no-op. Blocks. */
void pull_plan_free(struct pull_plan *p);

/*
 * The whole pull on the calling thread plus parallel - 1 threads of its
 * own for the layers (parallel 0 means 1): what a caller without a job
 * pool does, and the reference for how the daemon drives a plan.
 */
int image_pull(struct store *st, struct registry_client *rc, const struct pull_request *req,
               unsigned parallel, struct meta_image **out, bool *created, struct err *err);

#endif
