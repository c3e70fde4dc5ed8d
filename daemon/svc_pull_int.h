/*
 * What the pieces of the pull service share: the table, its pulls and
 * their waiters (svc_pull_table.c), the state machine that drives each
 * pull's jobs (svc_pull.c) and the progress they send back
 * (svc_pull_progress.c). Loop thread, except where a field says a job
 * writes it.
 */
#ifndef BERTH_DAEMON_SVC_PULL_INT_H
#define BERTH_DAEMON_SVC_PULL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/err.h"
#include "daemon/svc_pull.h"
#include "store/pull.h"
#include "store/registry.h"

#define PROGRESS_PIPE_BYTES (64 << 10)

struct image_pulls {
    struct daemon *d;
    struct registry_client *rc;
    unsigned parallel;
    unsigned grace_ms;
    bool shutting_down;
    struct pull_op *ops; /* every pull not DONE, newest first */
    /* Callers that joined a running pull get what they missed on the next
     * loop iteration, never inside the call (daemon/svc.h). */
    uv_timer_t replay_timer;
    bool replay_timer_live;
};

enum pull_stage { STAGE_RESOLVING, STAGE_FOLLOWING, STAGE_LAYERS, STAGE_FINISHING, STAGE_DONE };

struct pull_waiter {
    struct pull_op *op; /* NULL once answered */
    struct pull_waiter *next;
    image_loaded_cb done;
    void (*progress)(void *arg, const struct image_progress *ev);
    void *arg;
    bool replay; /* joined late: owed what it missed, and nothing before that */
};

struct pull_op {
    struct image_pulls *ps;
    struct pull_op *next;
    char *key; /* reference, platform and credentials: who may share it */
    /* What to pull (owned). reference is canonical, and the image's name. */
    char *reference, *registry, *repository, *tag, *digest;
    bool has_platform;
    struct oci_platform platform;
    bool has_creds;
    char *username, *password, *token, *identity_token; /* wiped when freed */

    enum pull_stage stage;
    struct pull_op *following; /* STAGE_FOLLOWING */
    int cancel;                /* atomic; the plan polls it */
    bool cancelled;            /* the loop's record of setting it */
    bool no_wait;              /* false: an upload holds the manifest, waiting is safe */
    bool finished_early;       /* the plan job also committed and freed */
    struct pull_waiter *waiters;
    uv_timer_t grace;

    struct pull_plan *plan;
    size_t n_layers, next_layer;
    unsigned running;       /* layer jobs submitted, not done */
    bool stop_layers;       /* a layer failed: submit no more */
    struct err local_err;   /* a failure of ours (a job that never ran) */
    const void *busy_owner; /* EALREADY: the holder's owner tag */
    int rc;                 /* plan job, then finishing job */
    struct err err;
    struct meta_image *image;
    bool created;

    struct bpipe *progress; /* every job -> loop */
    struct image_progress pending;
    size_t pending_len;
    struct image_progress resolved; /* replayed to callers that join late */
    struct image_progress *layer_last;
    size_t n_layer_last;
    uint64_t bytes_line_ms;
};

/* ---- svc_pull.c: the state machine --------------------------------------------- */

/* (Re)starts the plan job. */
void pull_op_start(struct pull_op *op);
/* Answers every waiter, unlinks op and closes it (pull_op_closed_cb frees it). */
void pull_op_end(struct pull_op *op);

/* ---- svc_pull_table.c: the table ------------------------------------------------ */

/* The close callback of op's grace timer: frees op. */
void pull_op_closed_cb(uv_handle_t *h);

/* ---- svc_pull_progress.c: progress ---------------------------------------------- */

/* import_progress_fn of the plan, on a job's thread: into op's pipe. */
void pull_progress_event(void *ctx, const struct import_event *ev);
/* The pipe's callback on the loop: the records the jobs wrote, to the waiters. */
void pull_progress_notify(void *ctx);
/* What a caller that joins a running pull has missed: each layer's latest state. */
void pull_progress_replay(struct pull_op *op, struct pull_waiter *w);
/* The table's replay timer: late joiners get what they missed. */
void pull_replay_cb(uv_timer_t *t);

#endif
