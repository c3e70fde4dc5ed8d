/*
 * The container service (daemon/svc_containers.h): the checks a create
 * must pass, the create and usage jobs, and the delete state machine
 * (TERM to every running process by a job, then a wait on the loop,
 * without a pool thread, for their exits or the grace time, then the undo
 * job, whose runtime delete KILLs whatever is left). Loop thread, except
 * the *_work functions.
 */
#include "daemon/svc_containers.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/path.h"
#include "common/randid.h"
#include "common/strv.h"
#include "daemon/ctr_create.h"
#include "daemon/ctr_events.h"
#include "daemon/daemon.h"
#include "daemon/net.h"
#include "daemon/svc_main.h"
#include "store/scratch.h"
#include "store/store.h"

int
containers_registry(struct daemon *d, struct containers **out, struct err *err)
{
    if (!d->containers || !d->store)
        return err_set(err, ERR_UNAVAILABLE, "containers are not available: %s",
                       d->store ? "start-up failed" : d->store_error);
    if (!d->containers->drv)
        return err_set(err, ERR_UNAVAILABLE, "%s", d->containers->drv_err.msg);
    *out = d->containers;
    return 0;
}

int
container_lookup(struct daemon *d, const char *handle, struct container **out, struct err *err)
{
    struct containers *reg = NULL;
    int ret = containers_registry(d, &reg, err);
    if (ret < 0)
        return ret;
    struct container *c = handle ? containers_find(reg, handle) : NULL;
    if (!c)
        return err_set(err, ENOENT, "container %s: not found", handle ? handle : "");
    *out = c;
    return 0;
}

int
container_resolve(struct daemon *d, const char *ref, bool (*visible)(const struct container *),
                  struct container **out, struct err *err)
{
    struct containers *reg = NULL;
    int ret = containers_registry(d, &reg, err);
    if (ret < 0)
        return ret;
    if (!ref || !*ref)
        return err_set(err, EINVAL, "container reference: empty");
    struct container *c = containers_find(reg, ref);
    if (!c)
        c = containers_find_name(reg, ref);
    if (c && container_listed(c) && (!visible || visible(c))) {
        *out = c;
        return 0;
    }
    struct container *found = NULL;
    size_t len = strlen(ref);
    for (c = reg->list; c; c = c->next) {
        if (!container_listed(c) || (visible && !visible(c)) || strncmp(c->p->handle, ref, len))
            continue;
        if (found)
            return err_set(err, EINVAL, "multiple IDs found with provided prefix: %s", ref);
        found = c;
    }
    if (!found)
        return err_set(err, ENOENT, "container %s: not found", ref);
    *out = found;
    return 0;
}

int
container_env_check(char *const *env, const char *field, struct err *err)
{
    size_t n = strv_len(env);
    if (n > 4096)
        return err_set(err, EINVAL, "field \"%s\": more than 4096 entries", field);
    for (size_t i = 0; i < n; i++)
        if (!strchr(env[i], '=') || env[i][0] == '=' || strlen(env[i]) > 65536)
            return err_set(err, EINVAL, "field \"%s[%zu]\": expected a \"NAME=value\" string",
                           field, i);
    return 0;
}

bool
container_listed(const struct container *c)
{
    return c->state != CTR_CREATING;
}

/* ---- the checks of a create ------------------------------------------------ */

static bool
abs_path_ok(const char *p)
{
    if (!p || p[0] != '/' || strlen(p) > 4096)
        return false;
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
            return false;
    return true;
}

static int
check_limits(const struct rt_limits *l, struct err *err)
{
    if (l->memory_bytes != 0 && l->memory_bytes < 4 * 1024 * 1024)
        return err_set(err, EINVAL,
                       "field \"limits.memory_bytes\": %llu is under the minimum of "
                       "4194304 (4 MiB)",
                       (unsigned long long)l->memory_bytes);
    if (l->cpu_shares != 0 && (l->cpu_shares < 2 || l->cpu_shares > 262144))
        return err_set(err, EINVAL, "field \"limits.cpu_shares\": %llu is out of range 2..262144",
                       (unsigned long long)l->cpu_shares);
    if (l->cpu_quota_pct > 100000)
        return err_set(err, EINVAL, "field \"limits.cpu_quota_pct\": %u is out of range 0..100000",
                       l->cpu_quota_pct);
    if (l->pids < 0)
        return err_set(err, EINVAL, "field \"limits.pids\": %lld is negative", (long long)l->pids);
    if (l->disk_bytes != 0 && l->disk_bytes < SCRATCH_MIN_BYTES)
        return err_set(err, EINVAL,
                       "field \"limits.disk_bytes\": %llu is under the minimum of %llu (16 MiB)",
                       (unsigned long long)l->disk_bytes, (unsigned long long)SCRATCH_MIN_BYTES);
    return 0;
}

static int
check_mounts(struct ctr_params *p, struct err *err)
{
    for (size_t i = 0; i < p->nmounts; i++) {
        const char *host = p->mounts[i].source;
        const char *vol = p->mount_volumes ? p->mount_volumes[i] : NULL;
        const char *target = p->mounts[i].target;
        if (p->mounts[i].tmpfs && (host || vol))
            return err_set(err, EINVAL, "field \"mounts[%zu]\": a tmpfs has no source", i);
        if (vol && host)
            return err_set(err, EINVAL, "field \"mounts[%zu]\": give host_path or volume, not both",
                           i);
        if (!host && !vol && !p->mounts[i].tmpfs)
            return err_set(err, EINVAL, "field \"mounts[%zu]\": host_path or volume is required",
                           i);
        if (vol && !volume_handle_valid(vol))
            return err_set(err, EINVAL,
                           "field \"mounts[%zu].volume\": %.140s is not a volume handle", i, vol);
        if (host && (!abs_path_ok(host) || strchr(host, ',')))
            return err_set(err, EINVAL,
                           "field \"mounts[%zu].host_path\": %s is not an absolute path", i, host);
        /* Compared and mounted in normal form, so "//.berth" meets the
         * reserved check as "/.berth". */
        char *norm = abs_path_ok(target) ? path_normalise(target, true) : NULL;
        if (!norm || strcmp(norm, "/") == 0) {
            free(norm);
            return err_set(err, EINVAL,
                           "field \"mounts[%zu].target\": %s is not an absolute path below /", i,
                           target ? target : "");
        }
        free((char *)p->mounts[i].target);
        p->mounts[i].target = norm;
    }
    return 0;
}

static int
check_isolation(const struct containers *reg, const char *isolation, struct err *err)
{
    if (!isolation)
        return 0;
    char list[128] = "";
    for (const char *const *m = reg->drv->isolation; m && *m; m++) {
        if (strcmp(*m, isolation) == 0)
            return 0;
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", list[0] ? ", " : "", *m);
    }
    return err_set(err, ERR_INVALID_CONTENT,
                   "field \"isolation\": %.64s is not offered by runtime %s on this host "
                   "(offered: %s)",
                   isolation, reg->drv->name, list);
}

/* The network asked for: a forwarded port needs the network, and a port to forward. */
static int
check_network(const struct daemon *d, const struct ctr_params *p, struct err *err)
{
    if (p->nports > CTR_PORTS_MAX)
        return err_set(err, EINVAL, "field \"network.ports\": more than %d entries", CTR_PORTS_MAX);
    if (p->nports && p->net_disabled)
        return err_set(err, EINVAL,
                       "field \"network.ports\": a container with \"disabled\": true has no "
                       "network to forward ports to");
    for (size_t i = 0; i < p->nports; i++) {
        const struct ctr_port *pt = &p->ports[i];
        if (pt->container == 0)
            return err_set(err, EINVAL,
                           "field \"network.ports[%zu].container\": 0 is out of range 1..65535", i);
        for (size_t j = 0; j < i && pt->host; j++)
            if (p->ports[j].host == pt->host && p->ports[j].udp == pt->udp)
                return err_set(err, EINVAL,
                               "field \"network.ports[%zu].host\": %u/%s is given twice", i,
                               pt->host, pt->udp ? "udp" : "tcp");
    }
    if (p->nports && d->cfg->network_disabled)
        return err_set(err, ENOTSUP,
                       "field \"network.ports\": networking is off on this daemon (--network "
                       "none): no port can be forwarded");
    return 0;
}

static int
check_create(const struct containers *reg, struct ctr_params *p, const char *isolation,
             struct err *err)
{
    if (p->handle[0] && !rt_handle_valid(p->handle))
        return err_set(err, EINVAL,
                       "field \"handle\": %.140s is not 1 to 128 characters of [A-Za-z0-9_.-] "
                       "not starting with a dot",
                       p->handle);
    if (!p->image_ref == !p->rootfs_dir)
        return err_set(err, EINVAL, "give exactly one of the fields \"image\" and \"rootfs\"");
    if (p->image_ref && (!*p->image_ref || strlen(p->image_ref) > 512))
        return err_set(err, EINVAL, "field \"image\": expected a digest, a prefix or a name");
    if (p->rootfs_dir && reg->drv && reg->drv->rootfs_normalise) {
        /* The driver's own platform path (hcs: a Windows one), taken as it is. */
        size_t n = strlen(p->rootfs_dir) + 8;
        char *norm = malloc(n);
        if (!norm)
            return err_set(err, ENOMEM, "out of memory");
        if (reg->drv->rootfs_normalise(p->rootfs_dir, norm, n, err) < 0) {
            free(norm);
            return err_wrap(err, "field \"rootfs\"");
        }
        free(p->rootfs_dir);
        p->rootfs_dir = norm;
    } else if (p->rootfs_dir && (!abs_path_ok(p->rootfs_dir) || strpbrk(p->rootfs_dir, ":,\n")))
        return err_set(err, EINVAL,
                       "field \"rootfs\": %.200s is not raw:///percent-encoded/absolute/dir "
                       "(without ':' or ',')",
                       p->rootfs_dir);
    if (p->working_dir && !abs_path_ok(p->working_dir))
        return err_set(err, EINVAL, "field \"working_dir\": %.200s is not an absolute path",
                       p->working_dir);
    if (p->hostname &&
        (!*p->hostname || strlen(p->hostname) > 63 ||
         strspn(p->hostname, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
             strlen(p->hostname)))
        return err_set(err, EINVAL, "hostname %.80s: expected 1 to 63 of [A-Za-z0-9.-]",
                       p->hostname);
    if (p->name && (!*p->name || strlen(p->name) > CTR_HANDLE_MAX))
        return err_set(err, EINVAL, "name %.140s: expected 1 to 128 characters", p->name);
    if (p->grace_time_s < 0 || p->grace_time_s > CTR_GRACE_MAX_S)
        return err_set(err, EINVAL, "field \"grace_time_s\": %lld is out of range 0..%d",
                       (long long)p->grace_time_s, CTR_GRACE_MAX_S);
    int ret = check_limits(&p->limits, err);
    if (ret == 0)
        ret = container_env_check(p->env, "env", err);
    if (ret == 0)
        ret = check_mounts(p, err);
    if (ret == 0)
        ret = check_isolation(reg, isolation, err);
    return ret;
}

size_t
containers_isolations(struct daemon *d, struct ctr_isolation *out, size_t max)
{
    struct containers *reg = NULL;
    struct err err = {0};
    if (containers_registry(d, &reg, &err) < 0 || !reg->drv->isolation_usable)
        return 0;
    size_t n = 0;
    for (const char *const *m = reg->drv->isolation; m && *m && n < max; m++, n++) {
        struct err why = {0};
        out[n].mode = *m;
        out[n].usable = reg->drv->isolation_usable(reg->drv_ctx, *m, &why) == 0;
        snprintf(out[n].reason, sizeof(out[n].reason), "%s", out[n].usable ? "" : why.msg);
    }
    return n;
}

/* ---- create ---------------------------------------------------------------- */

int
container_create(struct daemon *d, struct ctr_params *p, const char *isolation,
                 container_create_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct containers *reg = NULL;
    int ret = containers_registry(d, &reg, err);
    if (ret == 0)
        ret = check_create(reg, p, isolation, err);
    if (ret == 0)
        ret = check_network(d, p, err);
    if (ret < 0) {
        ctr_params_free(p);
        return ret;
    }
    if (!p->handle[0])
        randid_new(p->handle, sizeof(p->handle), "c-");
    if (!p->created_at)
        p->created_at = clock_unix_s();
    snprintf(p->isolation, sizeof(p->isolation), "%s",
             isolation           ? isolation
             : d->cfg->isolation ? d->cfg->isolation
                                 : "process");
    struct ctr_params *copy = ctr_params_dup(p);
    if (!copy) {
        ctr_params_free(p);
        return err_set(err, ENOMEM, "create container: out of memory");
    }
    struct container *c = NULL;
    if ((ret = containers_add(reg, p, &c, err)) < 0) {
        ctr_params_free(copy);
        ctr_params_free(p);
        return ret;
    }
    if ((ret = ctr_create_start(d, c, copy, cb, arg, call, err)) < 0)
        containers_remove(c);
    return ret;
}

const struct net_attachment *
container_network(const struct container *c)
{
    struct net *n = c->reg->d->net;
    return n ? net_attachment_find(n, c->p->handle) : NULL;
}

/* ---- usage ------------------------------------------------------------------ */

struct stats_job {
    struct svc_call call;
    container_stats_cb cb;
    void *arg;
    struct ctr_target t;
    struct rt_stats stats;
    int rc;
    struct err err;
};

static void
stats_work(void *ctx)
{
    struct stats_job *j = ctx;
    j->rc = j->t.drv->stats(j->t.drv_ctx, j->t.handle, &j->stats, &j->err);
}

static void
stats_done(void *ctx, bool cancelled)
{
    struct stats_job *j = ctx;
    struct container *c = j->t.c;
    bool ok = !cancelled && j->rc == 0;
    /* The runtime says the init is gone: report it honestly. */
    if (!cancelled && (j->rc == -ERR_CONFLICT || j->rc == -ENOENT) && c->state == CTR_RUNNING)
        container_mark_stopped(c);
    struct ctr_usage u = {.memory_bytes = j->stats.memory_bytes, .cpu_ns = j->stats.cpu_ns};
    struct err gone = {0};
    if (!c->registered)
        err_set(&gone, ENOENT, "container %s: not found", j->t.handle);
    if (!j->call.detached)
        j->cb(j->arg, c->registered ? NULL : &gone, c, ok ? &u : NULL);
    ctr_target_clear(&j->t);
    free(j);
}

int
container_stats(struct daemon *d, const char *handle, container_stats_cb cb, void *arg,
                struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (c->state != CTR_RUNNING)
        return err_set(err, ERR_CONFLICT, "container %s: %s, not running", handle,
                       ctr_state_name(c->state));
    struct stats_job *j = calloc(1, sizeof(*j));
    if (!j || ctr_target_init(&j->t, c, NULL) < 0) {
        free(j);
        return err_set(err, ENOMEM, "container %s: out of memory", handle);
    }
    j->cb = cb;
    j->arg = arg;
    if ((ret = job_submit(d->jobs, "container.stats", stats_work, stats_done, j)) < 0) {
        ctr_target_clear(&j->t);
        free(j);
        return err_set(err, ECANCELED, "container %s: cannot start the job: %s", handle,
                       strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}

/* ---- delete ----------------------------------------------------------------- */

struct ctr_delete {
    struct svc_call call;
    container_delete_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct containers *reg;
    struct store *st;
    struct ctr_params *p; /* the job's copy */
    char *dir;
    char **ids; /* processes to TERM */
    size_t nids;
    int64_t grace_s; /* how long the processes get after the TERM */
    bool term_sent;  /* the TERM job is done: waiting for exits or the grace time */
    bool finishing;  /* the undo job is submitted */
    uv_timer_t *grace_timer;
    int rc;
    struct err err;
    char *trash; /* the renamed directory, removed after the answer (delete_trash) */
    /* The undo job and the network's detach run side by side. */
    bool job_running, net_running;
    int net_rc;
    struct err net_err;
};

static void
handle_free_cb(uv_handle_t *h)
{
    free(h);
}

static void
delete_free(struct ctr_delete *op)
{
    if (op->c->deleting == op)
        op->c->deleting = NULL;
    if (op->grace_timer) {
        uv_timer_stop(op->grace_timer);
        uv_close((uv_handle_t *)op->grace_timer, handle_free_cb);
    }
    container_unref(op->c);
    ctr_params_free(op->p);
    for (size_t i = 0; i < op->nids; i++)
        free(op->ids[i]);
    free(op->ids);
    free(op->dir);
    free(op->trash);
    free(op);
}

/* Ends the delete for its caller (err NULL on success) and frees it. */
static void
delete_end(struct ctr_delete *op, const struct err *err)
{
    if (!op->call.detached)
        op->cb(op->arg, err);
    delete_free(op);
}

static void
delete_work(void *ctx)
{
    struct ctr_delete *op = ctx;
    op->rc = containers_delete_blocking(op->reg, op->st, op->p, op->dir, &op->trash, &op->err);
}

/* ---- the renamed directory, removed after the delete was answered ---------- */

struct trash_job {
    char *path;
    int rc;
    struct err err;
};

static void
trash_work(void *ctx)
{
    struct trash_job *t = ctx;
    t->rc = containers_trash_remove_blocking(t->path, &t->err);
}

static void
trash_done(void *ctx, bool cancelled)
{
    struct trash_job *t = ctx;
    if (!cancelled && t->rc < 0)
        log_warn("remove %s: %s (the next start-up tries again)", t->path, t->err.msg);
    free(t->path);
    free(t);
}

/*
 * The tree a delete renamed out of the way (its files, its scratch
 * layer's upper and work directories) is no container's any more: its
 * removal need not add to the delete's time, nor to a docker run --rm's,
 * which waits for the removal. What cannot be queued now (shutting down)
 * is left for the next start-up, which removes every renamed tree.
 */
static void
delete_trash(struct ctr_delete *op)
{
    struct trash_job *t = op->trash ? calloc(1, sizeof(*t)) : NULL;
    if (!t)
        return;
    t->path = steal_ptr(&op->trash);
    if (job_submit(op->reg->d->jobs, "container.trash", trash_work, trash_done, t) < 0) {
        free(t->path);
        free(t);
    }
}

/* The delete's last step, once the undo job and the detach both ended:
 * the container goes, or stays "deleting" with the first error. */
static void
delete_settle(struct ctr_delete *op)
{
    if (op->job_running || op->net_running)
        return;
    struct container *c = op->c;
    c->removing = false;
    delete_trash(op);
    if (op->rc == 0 && op->net_rc < 0) {
        op->rc = op->net_rc;
        err_copy(&op->err, &op->net_err);
        err_wrap(&op->err, "delete container %s", op->p->handle);
    }
    if (op->rc == 0) {
        log_info("container %s: deleted", c->p->handle);
        ctr_events_emit(c, CTR_CHANGE_DESTROY, c->main_proc ? container_main_exit_code(c) : -1, 0);
        containers_remove(c);
    }
    /* else: left in "deleting"; a retry runs every step again. */
    if (op->rc < 0 && op->call.detached)
        log_warn("%s", op->err.msg);
    delete_end(op, op->rc < 0 ? &op->err : NULL);
}

static void
delete_net_done(void *arg, const struct err *err)
{
    struct ctr_delete *op = arg;
    op->net_running = false;
    if (err) {
        op->net_rc = -err->code;
        err_copy(&op->net_err, err);
    }
    delete_settle(op);
}

/*
 * The network's detach (CNI DEL, the namespace, the files), beside the
 * undo job: its processes had their TERM and their grace time, and the
 * runtime's delete kills whatever is left, so nothing needs the network
 * any more, and DEL's time (a Go plugin's start-up, the veth's removal)
 * need not add to the runtime's. The address is free at once; the old
 * namespace, whose veth DEL removed, holds no conflict with a container
 * that gets it next.
 */
static void
delete_start_net(struct ctr_delete *op)
{
    struct net *n = op->reg->d->net;
    if (!n)
        return;
    op->net_running = true;
    int rc = net_detach(n, op->p->handle, delete_net_done, op, &op->net_err);
    if (rc < 0) {
        op->net_running = false;
        op->net_rc = rc;
    }
}

static void
delete_done(void *ctx, bool cancelled)
{
    struct ctr_delete *op = ctx;
    struct container *c = op->c;
    op->job_running = false;
    if (cancelled && op->rc == 0)
        op->rc = err_set(&op->err, ECANCELED, "delete container %s: the daemon is shutting down",
                         c->p->handle);
    delete_settle(op);
}

static void
delete_finish(struct ctr_delete *op)
{
    if (op->finishing)
        return;
    op->finishing = true;
    if (op->grace_timer)
        uv_timer_stop(op->grace_timer);
    op->c->removing = true;
    int rc = job_submit_prompt(op->reg->d->jobs, "container.delete", delete_work, delete_done, op);
    if (rc < 0) {
        op->c->removing = false;
        struct err err;
        err_set(&err, ECANCELED, "delete container %s: cannot start the job: %s", op->p->handle,
                strerror(-rc));
        delete_end(op, &err);
        return;
    }
    op->job_running = true;
    delete_start_net(op);
}

static void
grace_cb(uv_timer_t *t)
{
    delete_finish(t->data);
}

void
ctr_delete_proc_exited(struct container *c)
{
    struct ctr_delete *op = c->deleting;
    if (op && op->term_sent && container_procs_running(c) == 0)
        delete_finish(op);
}

void
ctr_delete_abandon(struct container *c)
{
    if (c->deleting)
        delete_free(c->deleting);
}

void
containers_shutdown(struct containers *reg)
{
    if (!reg)
        return;
    for (struct container *c = reg->list; c; c = c->next) {
        struct ctr_delete *op = c->deleting;
        if (!op || op->finishing || !op->term_sent)
            continue;
        struct err err;
        err_set(&err, ECANCELED, "delete container %s: the daemon is shutting down", c->p->handle);
        delete_end(op, &err);
    }
}

static void
term_work(void *ctx)
{
    struct ctr_delete *op = ctx;
    for (size_t i = 0; i < op->nids; i++) {
        struct err ignored = {0};
        op->reg->drv->proc_signal(op->reg->drv_ctx, op->p->handle, op->dir, op->ids[i], SIGTERM,
                                  &ignored);
    }
}

static void
term_done(void *ctx, bool cancelled)
{
    struct ctr_delete *op = ctx;
    struct container *c = op->c;
    if (cancelled || !c->registered) {
        struct err err;
        err_set(&err, ECANCELED, "delete container %s: the daemon is shutting down", c->p->handle);
        delete_end(op, &err);
        return;
    }
    op->term_sent = true;
    if (container_procs_running(c) == 0 || op->grace_s == 0) {
        delete_finish(op);
        return;
    }
    op->grace_timer = malloc(sizeof(*op->grace_timer));
    if (!op->grace_timer) {
        delete_finish(op);
        return;
    }
    uv_timer_init(op->reg->d->loop, op->grace_timer);
    op->grace_timer->data = op;
    uv_timer_start(op->grace_timer, grace_cb, (uint64_t)op->grace_s * 1000, 0);
}

int
container_delete(struct daemon *d, const char *handle, container_delete_cb cb, void *arg,
                 struct svc_call **call, struct err *err)
{
    return container_delete_grace(d, handle, -1, cb, arg, call, err);
}

int
container_delete_grace(struct daemon *d, const char *handle, int64_t grace_s,
                       container_delete_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (c->state == CTR_CREATING || c->deleting || c->spawning)
        return err_set(err, ERR_CONFLICT, "container %s: %s", c->p->handle,
                       c->state == CTR_CREATING ? "being created"
                       : c->deleting            ? "being deleted"
                                                : "a process is being started");
    struct ctr_delete *op = calloc(1, sizeof(*op));
    if (!op || !(op->p = ctr_params_dup(c->p)) || !(op->dir = strdup(c->dir))) {
        if (op)
            ctr_params_free(op->p);
        free(op);
        return err_set(err, ENOMEM, "delete container %s: out of memory", handle);
    }
    op->c = c;
    op->cb = cb;
    op->arg = arg;
    container_ref(c);
    op->reg = c->reg;
    op->st = d->store;
    op->grace_s = grace_s >= 0 ? grace_s : c->p->grace_time_s;
    /* No grace: the runtime's delete KILLs them all, without a TERM first. */
    unsigned running = c->state == CTR_RUNNING && op->grace_s ? container_procs_running(c) : 0;
    op->ids = running ? calloc(running, sizeof(char *)) : NULL;
    for (struct ctr_proc *pr = c->procs; op->ids && pr; pr = pr->next)
        if (!pr->exited && op->nids < running && (op->ids[op->nids] = strdup(pr->id)))
            op->nids++;
    /* Either first job, and the callback runs later also when nothing
     * runs: the undo is a job too. */
    op->term_sent = op->nids == 0;
    op->finishing = op->nids == 0;
    c->removing = op->nids == 0;
    ret = op->nids ? job_submit_prompt(d->jobs, "container.term", term_work, term_done, op)
                   : job_submit_prompt(d->jobs, "container.delete", delete_work, delete_done, op);
    if (ret < 0) {
        c->removing = false;
        delete_free(op);
        return err_set(err, ECANCELED, "delete container %s: cannot start the job: %s", handle,
                       strerror(-ret));
    }
    c->state = CTR_DELETING;
    c->deleting = op;
    if (op->finishing) {
        op->job_running = true;
        delete_start_net(op);
    }
    svc_call_give(&op->call, call);
    return 0;
}
