/*
 * A container's create, in three parts overlapped where their order
 * allows:
 *
 *   prepare job: record, image use, volumes, overlay mount  ---.
 *   network: namespace and /etc files (job) --- ready ---------+--> runtime job: the
 *            ... CNI ADD, the hosts file gets the address       |    runtime's container
 *                                                  attached ----+--> done
 *
 * The prepare job and the network's attach start together; the runtime's
 * job starts once the rootfs is mounted and the namespace and its files
 * exist, while ADD may still run (runc joins the namespace, the bridge
 * plugin moves a veth into it: neither waits for the other); the create is
 * done when the runtime's job and the attach both are. A failure anywhere
 * waits for what still runs, then undoes what succeeded (the undo job for
 * the container's half, a detach for the network's; a part that failed
 * undid itself) and reports the first error, so a failed create leaves
 * nothing. When the daemon shuts down meanwhile and a job cannot be
 * queued any more, the record on disk ("creating") and the network's own
 * record get the rest undone at the next start.
 *
 * Loop thread, except the *_work functions, which touch only the op's
 * copies.
 */
#include "daemon/ctr_create.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/ctr_events.h"
#include "daemon/ctr_stops.h"
#include "daemon/daemon.h"
#include "daemon/net.h"

enum part { PART_NONE, PART_RUNNING, PART_DONE, PART_FAILED };

enum net_part {
    NETP_NONE,      /* no network service: the runtime makes a namespace with lo */
    NETP_ATTACHING, /* the namespace and files are being made */
    NETP_READY,     /* they exist; ADD runs */
    NETP_ATTACHED,
    NETP_FAILED, /* the attach failed and undid itself */
    NETP_DETACHING,
    NETP_GONE, /* detached after a failure elsewhere (or left to the next start) */
};

struct ctr_create {
    struct svc_call call;
    container_create_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct containers *reg;
    struct store *st;
    struct net *net;
    struct ctr_params *p; /* the jobs' copy */
    char *dir;
    char *rootfs; /* from the prepare job */
    enum part prep, rt, undo;
    enum net_part netp;
    /* The attachment as the runtime needs it, copied at ready. */
    char *netns_path;
    /* Windows: the HCN endpoint, for a hyperv utility VM's adapter ("" elsewhere). */
    char ep_id[40], ep_mac[18], ep_ip[16], ep_gw[16];
    unsigned ep_prefix;
    char *mount_src[3];
    struct rt_mount net_mounts[3];
    size_t n_net_mounts;
    /* The job running now (one at a time: prepare, runtime, undo). */
    int job_rc;
    struct err job_err;
    int init_pidfd;
    /* The first failure. */
    bool failed;
    struct err err;
    /* When each part ended (uv_hrtime), for the debug log. */
    uint64_t t_start, t_prep, t_ready, t_rt, t_net;
};

static void advance(struct ctr_create *op);

static void
fail(struct ctr_create *op, const struct err *err)
{
    if (!op->failed)
        err_copy(&op->err, err);
    op->failed = true;
}

static void
op_free(struct ctr_create *op)
{
    if (op->init_pidfd >= 0)
        close(op->init_pidfd);
    container_unref(op->c);
    ctr_params_free(op->p);
    free(op->dir);
    free(op->rootfs);
    free(op->netns_path);
    for (size_t i = 0; i < 3; i++)
        free(op->mount_src[i]);
    free(op);
}

static double
since(const struct ctr_create *op, uint64_t t)
{
    return t ? (double)(t - op->t_start) / 1e6 : -1;
}

static void
finish(struct ctr_create *op)
{
    struct container *c = op->c;
    log_debug("create %s: prepared at %.1f ms, namespace ready at %.1f, runtime done at %.1f, "
              "attached at %.1f, done at %.1f",
              op->p ? op->p->handle : c->p->handle, since(op, op->t_prep), since(op, op->t_ready),
              since(op, op->t_rt), since(op, op->t_net), since(op, uv_hrtime()));
    if (!op->failed) {
        c->state = CTR_RUNNING;
        container_watch_init(c, op->init_pidfd);
        op->init_pidfd = -1;
        /* The jobs resolved the image: its digest and its run defaults. */
        ctr_params_free(c->p);
        c->p = op->p;
        op->p = NULL;
        log_info("container %s: created", c->p->handle);
        ctr_events_emit(c, CTR_CHANGE_CREATE, -1, 0);
        if (c->stopped_while_creating)
            ctr_stops_mark(c);
    } else {
        if (op->call.detached) /* else the caller reports it */
            log_info("%s", op->err.msg);
        containers_remove(c);
    }
    if (!op->call.detached)
        op->cb(op->arg, op->failed ? &op->err : NULL, c);
    op_free(op);
}

/* ---- the jobs ---------------------------------------------------------------- */

static void
prepare_work(void *ctx)
{
    struct ctr_create *op = ctx;
    op->job_rc =
        containers_prepare_blocking(op->reg, op->st, op->p, op->dir, &op->rootfs, &op->job_err);
}

static void
prepare_done(void *ctx, bool cancelled)
{
    struct ctr_create *op = ctx;
    op->t_prep = uv_hrtime();
    if (cancelled) {
        /* It never ran: nothing to undo. */
        op->prep = PART_FAILED;
        struct err e = {0};
        err_set(&e, ECANCELED, "create container %s: the daemon is shutting down", op->p->handle);
        fail(op, &e);
    } else if (op->job_rc < 0) {
        op->prep = PART_FAILED;
        fail(op, &op->job_err);
    } else {
        op->prep = PART_DONE;
    }
    advance(op);
}

static void
start_work(void *ctx)
{
    struct ctr_create *op = ctx;
    struct rt_net_adapter ad = {.endpoint_id = op->ep_id,
                                .mac = op->ep_mac,
                                .ip = op->ep_ip,
                                .prefix = op->ep_prefix,
                                .gateway = op->ep_gw};
    struct ctr_net_spec net = {.netns_path = op->netns_path,
                               .adapter = op->ep_id[0] ? &ad : NULL,
                               .mounts = op->net_mounts,
                               .nmounts = op->n_net_mounts};
    op->job_rc = containers_start_blocking(op->reg, op->st, op->p, op->dir, op->rootfs,
                                           op->netp == NETP_NONE ? NULL : &net, &op->job_err);
    if (op->job_rc == 0)
        op->init_pidfd = container_init_pidfd(op->reg, op->p->handle);
}

static void
start_done(void *ctx, bool cancelled)
{
    struct ctr_create *op = ctx;
    op->t_rt = uv_hrtime();
    if (cancelled) {
        /* It never ran: the prepared half is still there to undo. */
        op->rt = PART_NONE;
        struct err e = {0};
        err_set(&e, ECANCELED, "create container %s: the daemon is shutting down", op->p->handle);
        fail(op, &e);
    } else if (op->job_rc < 0) {
        op->rt = PART_FAILED; /* it undid both halves */
        fail(op, &op->job_err);
    } else {
        op->rt = PART_DONE;
    }
    advance(op);
}

static void
undo_work(void *ctx)
{
    struct ctr_create *op = ctx;
    op->job_rc = containers_undo_blocking(op->reg, op->st, op->p, op->dir, &op->job_err);
}

static void
undo_done(void *ctx, bool cancelled)
{
    struct ctr_create *op = ctx;
    op->undo = !cancelled && op->job_rc == 0 ? PART_DONE : PART_FAILED;
    if (cancelled)
        log_warn("create container %s: the undo did not run (shutting down); the next start "
                 "finishes it",
                 op->p->handle);
    else if (op->job_rc < 0)
        log_warn("undo the failed create of %s: %s", op->p->handle, op->job_err.msg);
    advance(op);
}

/* ---- the network ------------------------------------------------------------- */

static void
net_ready_cb(void *arg, const struct net_attachment *a, const struct err *err)
{
    struct ctr_create *op = arg;
    (void)err;
    op->t_ready = uv_hrtime();
    /* No namespace (Windows, until HCN): the runtime makes the container's own. */
    bool oom = a->netns_path && !(op->netns_path = strdup(a->netns_path));
    if (a->endpoint_id && a->endpoint_id[0] && a->mac && a->mac[0]) {
        snprintf(op->ep_id, sizeof(op->ep_id), "%s", a->endpoint_id);
        snprintf(op->ep_mac, sizeof(op->ep_mac), "%s", a->mac);
        snprintf(op->ep_ip, sizeof(op->ep_ip), "%s", a->ip ? a->ip : "");
        snprintf(op->ep_gw, sizeof(op->ep_gw), "%s", a->gateway ? a->gateway : "");
        op->ep_prefix = a->prefix;
    }
    for (size_t i = 0; i < a->nmounts && i < 3; i++) {
        op->mount_src[i] = strdup(a->mounts[i].source);
        oom = oom || !op->mount_src[i];
        /* Targets are the network's constants; sources the op's copies. */
        op->net_mounts[i] = (struct rt_mount){
            .source = op->mount_src[i], .target = a->mounts[i].target, .readonly = true};
        op->n_net_mounts = i + 1;
    }
    op->netp = NETP_READY;
    if (oom) {
        struct err e = {0};
        err_set(&e, ENOMEM, "create container %s: out of memory", op->p->handle);
        fail(op, &e);
    }
    advance(op);
}

static void
net_attached_cb(void *arg, const struct net_attachment *a, const struct err *err)
{
    struct ctr_create *op = arg;
    (void)a;
    op->t_net = uv_hrtime();
    if (err) {
        op->netp = NETP_FAILED;
        struct err e = {0};
        err_copy(&e, err);
        err_wrap(&e, "create container %s", op->p->handle);
        fail(op, &e);
    } else {
        op->netp = NETP_ATTACHED;
    }
    advance(op);
}

static void
net_detach_cb(void *arg, const struct err *err)
{
    struct ctr_create *op = arg;
    if (err)
        log_warn("create container %s: its network stays until the next start: %s", op->p->handle,
                 err->msg);
    op->netp = NETP_GONE;
    advance(op);
}

/* ---- the state machine -------------------------------------------------------- */

static bool
submit(struct ctr_create *op, enum part *part, const char *name, job_work_fn work, job_done_fn done)
{
    *part = PART_RUNNING;
    int rc = job_submit_prompt(op->reg->d->jobs, name, work, done, op);
    if (rc == 0)
        return true;
    *part = PART_NONE;
    struct err e = {0};
    err_set(&e, -rc == ENOMEM ? ENOMEM : ECANCELED, "create container %s: cannot start the job: %s",
            op->p->handle, strerror(-rc));
    fail(op, &e);
    return false;
}

static void
advance(struct ctr_create *op)
{
    if (!op->failed) {
        bool net_ok = op->netp == NETP_NONE || op->netp == NETP_READY || op->netp == NETP_ATTACHED;
        if (op->prep == PART_DONE && op->rt == PART_NONE && net_ok &&
            !submit(op, &op->rt, "container.start", start_work, start_done)) {
            advance(op);
            return;
        }
        if (op->rt == PART_DONE && (op->netp == NETP_NONE || op->netp == NETP_ATTACHED))
            finish(op);
        return;
    }
    /* Failed: wait for what still runs, then undo what succeeded. */
    if (op->prep == PART_RUNNING || op->rt == PART_RUNNING || op->undo == PART_RUNNING ||
        op->netp == NETP_ATTACHING || op->netp == NETP_READY || op->netp == NETP_DETACHING)
        return;
    /* The container's half: prepared, and not undone by a runtime job that failed. */
    if (op->prep == PART_DONE && op->rt != PART_FAILED && op->undo == PART_NONE) {
        if (submit(op, &op->undo, "container.undo", undo_work, undo_done))
            return;
        op->undo = PART_FAILED;
        log_warn("create container %s: the undo cannot run (shutting down); the next start "
                 "finishes it",
                 op->p->handle);
    }
    if (op->netp == NETP_ATTACHED) {
        struct err e = {0};
        op->netp = NETP_DETACHING;
        if (net_detach(op->net, op->p->handle, net_detach_cb, op, &e) == 0)
            return;
        log_warn("create container %s: its network stays until the next start: %s", op->p->handle,
                 e.msg);
        op->netp = NETP_GONE;
    }
    finish(op);
}

int
ctr_create_start(struct daemon *d, struct container *c, struct ctr_params *copy,
                 container_create_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct ctr_create *op = calloc(1, sizeof(*op));
    if (!op || !(op->dir = strdup(c->dir))) {
        free(op);
        ctr_params_free(copy);
        return err_set(err, ENOMEM, "create container %s: out of memory", c->p->handle);
    }
    op->init_pidfd = -1;
    op->t_start = uv_hrtime();
    op->c = c;
    container_ref(c);
    op->reg = c->reg;
    op->st = d->store;
    op->net = d->net;
    op->p = copy;
    op->cb = cb;
    op->arg = arg;
    if (op->net) {
        struct net_port ports[CTR_PORTS_MAX];
        for (size_t i = 0; i < copy->nports && i < CTR_PORTS_MAX; i++)
            ports[i] =
                (struct net_port){.host = copy->ports[i].host,
                                  .container = copy->ports[i].container,
                                  .proto = copy->ports[i].udp ? NET_PROTO_UDP : NET_PROTO_TCP};
        struct net_attach_req req = {.handle = copy->handle,
                                     .hostname = copy->hostname,
                                     .disabled = copy->net_disabled,
                                     .ports = ports,
                                     .nports = copy->nports,
                                     .ready = net_ready_cb};
        int rc = net_attach(op->net, &req, net_attached_cb, op, err);
        if (rc < 0) {
            err_wrap(err, "create container %s", copy->handle);
            op_free(op);
            return rc;
        }
        op->netp = NETP_ATTACHING;
    }
    if (!submit(op, &op->prep, "container.create", prepare_work, prepare_done)) {
        if (op->netp == NETP_NONE) {
            /* Nothing started: fail at once, as the caller expects. */
            err_copy(err, &op->err);
            op_free(op);
            return -err->code;
        }
        /* The attach runs: it is undone when it ends, and the callback
         * reports the failure. */
        op->prep = PART_FAILED;
    }
    svc_call_give(&op->call, call);
    return 0;
}
