/*
 * What the pieces of a registry pull share: the plan and its layers'
 * states (pull.c describes them), the progress events, and the blob
 * downloads. store/pull.c, pull_resolve.c, pull_fetch.c and
 * pull_layers.c only. Pool threads; blocking.
 */
#ifndef BERTH_STORE_PULL_INT_H
#define BERTH_STORE_PULL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "store/image_build.h"
#include "store/pull.h"

enum layer_state { L_PENDING, L_FETCHING, L_STAGED, L_WAIT_DUP, L_UNPACKING, L_DONE };

struct plan_layer {
    enum layer_state state;
    bool called;
    bool has_blob; /* staged or stored */
    long dup_of;   /* an earlier layer with the same blob, or -1 */
};

struct pull_plan {
    struct store *st;
    struct registry_repo *repo;
    struct image_build b;
    bool begun, inflight, stored, committed;
    struct meta_image *stored_img;
    char *name;
    char what[600]; /* "registry/repo:tag", for messages */
    import_progress_fn progress;
    void *progress_ctx;
    const int *cancel;
    bool no_wait;
    const void *owner;
    const void **busy_owner;
    int stop; /* atomic: a layer failed or pull_plan_cancel */
    pthread_mutex_t mu;
    pthread_mutex_t progress_mu;
    struct plan_layer *layers;
    size_t n;
    bool failed; /* under mu */
    struct err first_err;
};

/* A registry blob read for a stage or an unpack, with progress, keeping
 * the registry's error (the unpacker only passes the code on). */
struct net_source {
    struct pull_plan *p;
    size_t layer; /* (size_t)-1: not a layer (the config) */
    struct registry_blob *blob;
    struct err err;
    bool failed;
    int64_t last_ms;
};

/* The plan's cancel flag: a failed layer, pull_plan_cancel or the caller's. */
int pull_plan_cancelled(void *ctx);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t pull_now_ms(void);
/* Sends ev to the plan's progress callback, one event at a time. */
void pull_emit(struct pull_plan *p, const struct import_event *ev);
/* A layer's progress event. */
void pull_emit_layer(struct pull_plan *p, size_t i, const char *status, int64_t done);
/* The image_build_source reader over a net_source (pull_fetch.c). */
ssize_t pull_net_read_cb(void *ctx, void *buf, size_t len);
/* Downloads blob desc into staging, verified by the blob writer. */
int pull_download(struct pull_plan *p, const struct oci_descriptor *desc, size_t layer, int64_t max,
                  struct err *err);

#endif
