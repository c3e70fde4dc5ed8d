/*
 * The store as one object: the content blobs, the metadata database, the
 * snapshots, what this host can run, and the table of imports in flight.
 * Opening it also cleans up after a crash: temporaries, half-unpacked
 * snapshots and the leases of imports that died with the daemon.
 * Blocking: open and close at start-up and shutdown, or from pool jobs;
 * everything else is thread-safe.
 */
#ifndef BERTH_STORE_STORE_H
#define BERTH_STORE_STORE_H

#include <pthread.h>
#include <stdbool.h>

#include "common/err.h"
#include "store/blob.h"
#include "store/digest.h"
#include "store/meta.h"
#include "store/mount_journal.h"
#include "store/platform.h"
#include "store/snapshot.h"
#include "store/volume.h"

struct store_opts {
    unsigned max_unpacks;    /* layers unpacked at once; 0 means 1 */
    bool allow_device_nodes; /* create device nodes found in layers */
};

struct store_inflight;

struct store {
    char *root;
    struct blob_store *blobs;
    struct meta *meta;
    struct snapshot_store *snaps;
    struct volume_store *volumes; /* store/volume.h */
    struct mjournal *mounts;      /* <root>/mounts: store/mount_journal.h */
    struct host_caps host;
    bool allow_device_nodes;
    pthread_mutex_t inflight_mu;
    pthread_cond_t inflight_cond;
    struct store_inflight *inflight; /* manifest digests being imported */
};

/* Opens (creating) the store at root and cleans up after a crash. */
int store_open(const char *root, const struct store_opts *opts, struct store **out,
               struct err *err);
void store_close(struct store *st);

/*
 * Single flight by manifest digest: returns once no other import of
 * digest is in flight, and marks this one in flight until
 * store_inflight_end. Blocks while another thread imports the same image.
 */
void store_inflight_begin(struct store *st, const char *digest);
void store_inflight_end(struct store *st, const char *digest);

/*
 * As store_inflight_begin without waiting, for callers that must not
 * park a thread (the daemon's pulls): 0 when digest is now in flight for
 * owner (a tag of the caller's, may be NULL), or -EALREADY while another
 * holds it, with *holder (when non-NULL) set to that one's owner tag
 * (NULL for store_inflight_begin's). Never blocks on another import.
 */
int store_inflight_try_begin(struct store *st, const char *digest, const void *owner,
                             const void **holder);

/* True when name can name an image: 1-255 characters of [A-Za-z0-9._/:@-],
 * starting with a letter or digit, and not a digest or something that
 * would read as a digest prefix (12 or more hex digits alone). */
bool image_name_valid(const char *name);

#endif
