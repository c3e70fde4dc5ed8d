/*
 * The container registry on the loop: containers and their processes in
 * memory, reference counts for the jobs and requests that hold them, and
 * the watches that notice a process's exit and new output. The blocking
 * side (records, mounts, the runtime) is containers_record.c,
 * containers_ops.c and containers_open.c. Loop thread, except the *_work
 * functions.
 */
#include "daemon/containers.h"

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <string.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/os.h"
#include "common/strv.h"
#include "daemon/daemon.h"
#include "daemon/job.h"
#include "daemon/ctr_events.h"
#include "daemon/ctr_stops.h"
#include "daemon/svc_exec.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_main.h"

const char *
ctr_state_name(enum ctr_state s)
{
    switch (s) {
    case CTR_CREATING:
        return "creating";
    case CTR_RUNNING:
        return "running";
    case CTR_STOPPED:
        return "stopped";
    case CTR_DELETING:
        return "deleting";
    }
    return "unknown";
}

/* ---- parameters ------------------------------------------------------------- */

void
ctr_params_free(struct ctr_params *p)
{
    if (!p)
        return;
    free(p->image_ref);
    free(p->image_digest);
    free(p->image_config);
    free(p->rootfs_dir);
    strv_free(p->env);
    free(p->working_dir);
    strv_free(p->image_entrypoint);
    strv_free(p->image_cmd);
    free(p->image_user);
    free(p->name);
    free(p->user);
    free(p->hostname);
    free(p->front_meta);
    ctr_main_free(p->main);
    for (size_t i = 0; i < p->nmounts; i++) {
        free((char *)p->mounts[i].source);
        free((char *)p->mounts[i].target);
        if (p->mount_volumes)
            free(p->mount_volumes[i]);
    }
    free(p->mounts);
    free(p->mount_volumes);
    for (size_t i = 0; i < p->nprops; i++) {
        free(p->prop_keys[i]);
        free(p->prop_values[i]);
    }
    free(p->prop_keys);
    free(p->prop_values);
    free(p->ports);
    free(p);
}

static char *
dup_or_null(const char *s, bool *fail)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *fail = true;
    return d;
}

void
ctr_main_free(struct ctr_main *m)
{
    if (!m)
        return;
    strv_free(m->entrypoint);
    strv_free(m->cmd);
    free(m);
}

struct ctr_main *
ctr_main_dup(const struct ctr_main *m)
{
    struct ctr_main *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    *q = *m;
    bool oom[2] = {false, false};
    q->entrypoint = strv_dup(m->entrypoint, &oom[0]);
    q->cmd = strv_dup(m->cmd, &oom[1]);
    if (oom[0] || oom[1]) {
        ctr_main_free(q);
        return NULL;
    }
    return q;
}

struct ctr_params *
ctr_params_dup(const struct ctr_params *p)
{
    struct ctr_params *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    bool fail = false;
    memcpy(q->handle, p->handle, sizeof(q->handle));
    q->limits = p->limits;
    q->grace_time_s = p->grace_time_s;
    memcpy(q->isolation, p->isolation, sizeof(q->isolation));
    q->created_at = p->created_at;
    q->net_disabled = p->net_disabled;
    if (p->nports) {
        q->ports = calloc(p->nports, sizeof(*q->ports));
        fail |= !q->ports;
        if (q->ports) {
            memcpy(q->ports, p->ports, p->nports * sizeof(*q->ports));
            q->nports = p->nports;
        }
    }
    q->image_ref = dup_or_null(p->image_ref, &fail);
    q->image_digest = dup_or_null(p->image_digest, &fail);
    q->image_config = dup_or_null(p->image_config, &fail);
    q->rootfs_dir = dup_or_null(p->rootfs_dir, &fail);
    q->working_dir = dup_or_null(p->working_dir, &fail);
    q->image_user = dup_or_null(p->image_user, &fail);
    q->name = dup_or_null(p->name, &fail);
    q->user = dup_or_null(p->user, &fail);
    q->hostname = dup_or_null(p->hostname, &fail);
    q->front_meta = dup_or_null(p->front_meta, &fail);
    q->readonly_rootfs = p->readonly_rootfs;
    if (p->main && !(q->main = ctr_main_dup(p->main)))
        fail = true;
    bool oom[3];
    q->env = strv_dup(p->env, &oom[0]);
    q->image_entrypoint = strv_dup(p->image_entrypoint, &oom[1]);
    q->image_cmd = strv_dup(p->image_cmd, &oom[2]);
    fail |= oom[0] || oom[1] || oom[2];
    if (p->nmounts) {
        q->mounts = calloc(p->nmounts, sizeof(*q->mounts));
        q->mount_volumes = calloc(p->nmounts, sizeof(char *));
        fail |= !q->mounts || !q->mount_volumes;
        for (size_t i = 0; q->mounts && q->mount_volumes && i < p->nmounts; i++) {
            q->mounts[i].source = dup_or_null(p->mounts[i].source, &fail);
            q->mounts[i].target = dup_or_null(p->mounts[i].target, &fail);
            q->mounts[i].readonly = p->mounts[i].readonly;
            q->mounts[i].tmpfs = p->mounts[i].tmpfs;
            if (p->mount_volumes)
                q->mount_volumes[i] = dup_or_null(p->mount_volumes[i], &fail);
            q->nmounts = i + 1;
        }
    }
    if (p->nprops) {
        q->prop_keys = calloc(p->nprops, sizeof(char *));
        q->prop_values = calloc(p->nprops, sizeof(char *));
        fail |= !q->prop_keys || !q->prop_values;
        for (size_t i = 0; !fail && i < p->nprops; i++) {
            q->prop_keys[i] = dup_or_null(p->prop_keys[i], &fail);
            q->prop_values[i] = dup_or_null(p->prop_values[i], &fail);
            q->nprops = i + 1;
        }
    }
    if (fail) {
        ctr_params_free(q);
        return NULL;
    }
    return q;
}

/* ---- the registry ----------------------------------------------------------- */

struct container *
containers_find(struct containers *reg, const char *handle)
{
    for (struct container *c = reg->list; c; c = c->next)
        if (strcmp(c->p->handle, handle) == 0)
            return c;
    return NULL;
}

struct container *
containers_find_name(struct containers *reg, const char *name)
{
    for (struct container *c = reg->list; c; c = c->next)
        if (c->p->name && strcmp(c->p->name, name) == 0)
            return c;
    return NULL;
}

int
containers_add(struct containers *reg, struct ctr_params *p, struct container **out,
               struct err *err)
{
    if (containers_find(reg, p->handle))
        return err_set(err, EEXIST, "container %s: the handle is taken", p->handle);
    struct container *other = p->name ? containers_find_name(reg, p->name) : NULL;
    if (other)
        return err_set(err, EEXIST, "container name %s: taken by container %s", p->name,
                       other->p->handle);
    struct container *c = calloc(1, sizeof(*c));
    if (!c || !(c->dir = fs_path_join(reg->root, p->handle))) {
        free(c);
        return err_set(err, ENOMEM, "container %s: out of memory", p->handle);
    }
    c->reg = reg;
    c->p = p;
    c->refs = 1;
    c->registered = true;
    c->state = CTR_CREATING;
    c->next = reg->list;
    reg->list = c;
    reg->count++;
    *out = c;
    return 0;
}

void
container_ref(struct container *c)
{
    c->refs++;
}

static void
handle_free_cb(uv_handle_t *h)
{
    free(h);
}

static void
proc_stop_watch(struct ctr_proc *pr)
{
    if (pr->watch) {
        uv_fs_event_stop(pr->watch);
        uv_close((uv_handle_t *)pr->watch, handle_free_cb);
        pr->watch = NULL;
    }
}

static void
notify(struct ctr_proc *pr, enum ctr_event ev)
{
    struct ctr_listener *next;
    for (struct ctr_listener *l = pr->listeners; l; l = next) {
        next = l->next;
        l->fn(l, ev);
    }
}

static void
container_free(struct container *c)
{
    struct ctr_proc *next;
    for (struct ctr_proc *pr = c->procs; pr; pr = next) {
        next = pr->next;
        proc_stop_watch(pr);
        free(pr);
    }
    ctr_params_free(c->p);
    free(c->dir);
    free(c);
}

void
container_unref(struct container *c)
{
    if (--c->refs == 0)
        container_free(c);
}

void
containers_remove(struct container *c)
{
    if (!c->registered)
        return;
    struct containers *reg = c->reg;
    for (struct container **pp = &reg->list; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    reg->count--;
    c->registered = false;
    container_unwatch_init(c);
    for (struct ctr_proc *pr = c->procs; pr; pr = pr->next) {
        proc_stop_watch(pr);
        notify(pr, CTR_EV_GONE);
    }
    container_unref(c);
}

/* ---- processes -------------------------------------------------------------- */

struct ctr_proc *
container_proc_find(struct container *c, const char *id)
{
    for (struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        if (strcmp(pr->id, id) == 0)
            return pr;
    return NULL;
}

unsigned
container_procs_running(const struct container *c)
{
    unsigned n = 0;
    for (const struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        if (!pr->exited)
            n++;
    return n;
}

void
ctr_listen(struct ctr_proc *pr, struct ctr_listener *l)
{
    l->prev = NULL;
    l->next = pr->listeners;
    if (pr->listeners)
        pr->listeners->prev = l;
    pr->listeners = l;
}

void
ctr_unlisten(struct ctr_proc *pr, struct ctr_listener *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else if (pr->listeners == l)
        pr->listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

static void
proc_set_exited(struct ctr_proc *pr, const struct rt_proc_status *st, int64_t at)
{
    pr->exited = true;
    pr->exit_code = st->exit_code;
    pr->signal = st->signal;
    snprintf(pr->error, sizeof(pr->error), "%s", st->error);
    pr->output_truncated = st->output_truncated;
    pr->oom_killed = st->oom_killed;
    pr->finished_at = at;
    proc_stop_watch(pr);
}

int
ctr_target_init(struct ctr_target *t, struct container *c, const char *id)
{
    memset(t, 0, sizeof(*t));
    if (!(t->dir = strdup(c->dir)))
        return -ENOMEM;
    t->c = c;
    container_ref(c);
    t->drv = c->reg->drv;
    t->drv_ctx = c->reg->drv_ctx;
    snprintf(t->handle, sizeof(t->handle), "%s", c->p->handle);
    snprintf(t->id, sizeof(t->id), "%s", id ? id : "");
    return 0;
}

void
ctr_target_clear(struct ctr_target *t)
{
    if (t->c)
        container_unref(t->c);
    free(t->dir);
    memset(t, 0, sizeof(*t));
}

struct check_job {
    struct ctr_target t;
    struct rt_proc_status st;
    int64_t finished_ms; /* from the driver's records once exited, 0 when unknown */
    int rc;
    struct err err;
};

static void
check_work(void *ctx)
{
    struct check_job *j = ctx;
    struct ctr_target *t = &j->t;
    j->rc = t->drv->proc_status(t->drv_ctx, t->handle, t->dir, t->id, &j->st, &j->err);
    /* The end as its records keep it, so that it reads the same after a restart. */
    struct rt_proc_times times;
    struct err ignored;
    if (j->rc == 0 && j->st.exited &&
        t->drv->proc_times(t->drv_ctx, t->handle, t->dir, t->id, &times, &ignored) == 0)
        j->finished_ms = times.finished_ms;
}

static void
check_done(void *ctx, bool cancelled)
{
    struct check_job *j = ctx;
    struct ctr_proc *pr = container_proc_find(j->t.c, j->t.id);
    if (pr) {
        pr->checking = false;
        if (!cancelled && j->rc == 0 && j->st.started && !pr->pid)
            pr->pid = j->st.pid;
        if (!cancelled && j->rc == 0 && j->st.output_truncated)
            pr->output_truncated = true;
        if (!cancelled && j->rc == 0 && j->st.exited && !pr->exited) {
            proc_set_exited(pr, &j->st, j->finished_ms ? j->finished_ms : clock_unix_ms());
            /* The container's own events first ("die" before a stop's "stop"). */
            if (pr == j->t.c->main_proc)
                ctr_main_exited(j->t.c);
            notify(pr, CTR_EV_EXIT);
            /* A delete waiting for its processes goes on after the last. */
            ctr_delete_proc_exited(j->t.c);
        } else if (pr->recheck && !pr->exited && !cancelled) {
            container_proc_check(pr);
        }
    }
    ctr_target_clear(&j->t);
    free(j);
}

void
container_proc_check(struct ctr_proc *pr)
{
    struct container *c = pr->c;
    if (pr->exited || !c->reg->drv || c->removing)
        return;
    if (pr->checking) {
        pr->recheck = true;
        return;
    }
    struct check_job *j = calloc(1, sizeof(*j));
    if (!j || ctr_target_init(&j->t, c, pr->id) < 0) {
        free(j);
        return;
    }
    pr->checking = true;
    pr->recheck = false;
    if (job_submit_prompt(c->reg->d->jobs, "process.status", check_work, check_done, j) < 0) {
        pr->checking = false;
        ctr_target_clear(&j->t);
        free(j);
    }
}

static void
watch_cb(uv_fs_event_t *h, const char *filename, int events, int status)
{
    struct ctr_proc *pr = h->data;
    if (status < 0 || !filename) {
        container_proc_check(pr);
        return;
    }
    switch (pr->c->reg->drv->proc_change(filename)) {
    case RT_PROC_CHANGE_STDOUT:
        notify(pr, CTR_EV_STDOUT);
        break;
    case RT_PROC_CHANGE_STDERR:
        notify(pr, CTR_EV_STDERR);
        break;
    case RT_PROC_CHANGE_CHUNKS:
        notify(pr, CTR_EV_CHUNKS);
        break;
    case RT_PROC_CHANGE_STATUS:
        container_proc_check(pr);
        break;
    case RT_PROC_CHANGE_NONE:
        break;
    }
}

struct ctr_proc *
container_proc_add(struct container *c, const char *id, bool has_stdin,
                   const struct rt_proc_status *st, int64_t started_at)
{
    struct ctr_proc *pr = calloc(1, sizeof(*pr));
    if (!pr)
        return NULL;
    pr->c = c;
    snprintf(pr->id, sizeof(pr->id), "%s", id);
    pr->has_stdin = has_stdin;
    pr->pid = st->pid;
    pr->started_at = started_at;
    struct ctr_proc **tail = &c->procs;
    while (*tail)
        tail = &(*tail)->next;
    *tail = pr;
    if (st->exited) {
        pr->exited = true;
        pr->finished_at = clock_unix_ms();
        pr->exit_code = st->exit_code;
        pr->signal = st->signal;
        snprintf(pr->error, sizeof(pr->error), "%s", st->error);
        pr->output_truncated = st->output_truncated;
        pr->oom_killed = st->oom_killed;
        return pr;
    }
    const struct rt_driver *drv = c->reg->drv;
    char *path = drv->proc_watch_dir(c->reg->drv_ctx, c->p->handle, c->dir, id);
    pr->watch = path ? malloc(sizeof(*pr->watch)) : NULL;
    if (pr->watch) {
        uv_fs_event_init(c->reg->d->loop, pr->watch);
        pr->watch->data = pr;
        int rc = uv_fs_event_start(pr->watch, watch_cb, path, 0);
        if (rc < 0) {
            log_warn("watch process %s in %s: %s", id, c->p->handle, uv_strerror(rc));
            uv_close((uv_handle_t *)pr->watch, handle_free_cb);
            pr->watch = NULL;
        }
    }
    free(path);
    /* It may have exited before the watch was in place. */
    container_proc_check(pr);
    return pr;
}

void
container_proc_remove(struct container *c, struct ctr_proc *pr)
{
    for (struct ctr_proc **pp = &c->procs; *pp; pp = &(*pp)->next) {
        if (*pp == pr) {
            *pp = pr->next;
            break;
        }
    }
    proc_stop_watch(pr);
    notify(pr, CTR_EV_GONE);
    if (c->main_proc == pr)
        c->main_proc = NULL;
    free(pr);
}

void
container_mark_stopped(struct container *c)
{
    c->state = CTR_STOPPED;
    struct ctr_proc *main_lost = c->main_proc && !c->main_proc->exited ? c->main_proc : NULL;
    for (struct ctr_proc *pr = c->procs; pr; pr = pr->next) {
        if (pr->exited)
            continue;
        /* The init is gone and wrote nothing: say so rather than guess a code. */
        pr->exited = true;
        pr->lost = true;
        pr->finished_at = clock_unix_ms();
        snprintf(pr->error, sizeof(pr->error), "the container stopped; no exit status recorded");
        proc_stop_watch(pr);
        if (pr != main_lost)
            notify(pr, CTR_EV_EXIT);
    }
    /* The container's own events first, as after an exit (check_done). */
    if (main_lost) {
        ctr_main_exited(c);
        notify(main_lost, CTR_EV_EXIT);
    }
}

int
container_init_pidfd(struct containers *reg, const char *handle)
{
    if (!reg->drv)
        return -1;
    struct rt_container_state cs = {0};
    struct err err = {0};
    if (reg->drv->container_state(reg->drv_ctx, handle, &cs, &err) < 0 ||
        cs.status != RT_CONTAINER_RUNNING || cs.init_pid <= 1)
        return -1;
    int fd = os_pidfd_open((long)cs.init_pid);
    if (fd < 0) {
        log_debug("container %s: pidfd_open %d: %s", handle, (int)cs.init_pid, strerror(-fd));
        return -1;
    }
    return fd;
}

static void
init_watch_closed_cb(uv_handle_t *h)
{
    int fd = (int)(intptr_t)h->data;
    if (fd >= 0)
        close(fd);
    free(h);
}

static void
init_exited_cb(uv_poll_t *w, int status, int events)
{
    struct container *c = w->data;
    container_unwatch_init(c);
    if (c->state != CTR_RUNNING)
        return; /* a delete in progress killed it */
    log_warn("container %s: its init exited; the container is stopped", c->p->handle);
    container_mark_stopped(c);
}

void
container_watch_init(struct container *c, int pidfd)
{
    if (pidfd < 0)
        return;
    container_unwatch_init(c);
    uv_poll_t *w = calloc(1, sizeof(*w));
    if (!w || uv_poll_init(c->reg->d->loop, w, pidfd) < 0) {
        free(w);
        close(pidfd);
        return;
    }
    w->data = c;
    c->init_watch = w;
    /* The fd is recovered at close from the handle itself. */
    if (uv_poll_start(w, UV_READABLE, init_exited_cb) < 0)
        container_unwatch_init(c);
}

void
container_unwatch_init(struct container *c)
{
    uv_poll_t *w = c->init_watch;
    if (!w)
        return;
    c->init_watch = NULL;
    uv_os_fd_t fd = (uv_os_fd_t)-1;
    uv_fileno((uv_handle_t *)w, &fd);
    uv_poll_stop(w);
    w->data = (void *)(intptr_t)fd;
    uv_close((uv_handle_t *)w, init_watch_closed_cb);
}

void
containers_close(struct containers *reg)
{
    if (!reg)
        return;
    while (reg->list) {
        struct container *c = reg->list;
        reg->list = c->next;
        c->registered = false;
        container_unwatch_init(c);
        for (struct ctr_proc *pr = c->procs; pr; pr = pr->next) {
            proc_stop_watch(pr);
            notify(pr, CTR_EV_GONE);
        }
        ctr_delete_abandon(c);
        ctr_stop_abandon(c);
        container_unref(c);
    }
    ctr_events_free(reg);
    ctr_stops_close(reg);
}

void
containers_free(struct containers *reg)
{
    if (!reg)
        return;
    ctr_execs_free(reg);
    if (reg->drv && reg->drv->close)
        reg->drv->close(reg->drv_ctx);
    ctr_stops_free(reg); /* after the driver: its callbacks are over */
    free(reg->root);
    free(reg);
}
