/*
 * Containers at start-up: the records below the root are read back
 * (containers_record.c), those left "creating" or "deleting" by a crash
 * are finished off with containers_delete_blocking, the driver's
 * processes are brought back, image uses and runtime containers no
 * record claims are removed, the archive uploads a crash cut short are
 * undone (store/cp_pending.h), and the mount journal is replayed. Main, before the loop runs;
 * blocks on disk and on the runtime.
 */
#include "daemon/containers_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/strv.h"
#include "store/cp_pending.h"
#include "store/digest.h"
#include "daemon/ctr_stops.h"
#include "daemon/daemon.h"
#include "daemon/svc_main.h"
#include "store/layer.h"
#include "store/oci.h"
#include "store/refname.h"
#include "store/scratch.h"
#include "store/store.h"

/* ---- start-up --------------------------------------------------------------- */

struct proc_found {
    char *id;
    struct rt_proc_status st;
    struct rt_proc_times t;
};

static int
by_start(const void *a, const void *b)
{
    const struct proc_found *x = a, *y = b;
    if (x->t.started_ms != y->t.started_ms)
        return x->t.started_ms < y->t.started_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Brings back the processes of a reloaded container from the driver's
 * records, oldest first. */
static void
load_procs(struct containers *reg, struct container *c)
{
    const struct rt_driver *drv = reg->drv;
    char **ids = NULL;
    struct err err = {0};
    if (drv->proc_list(reg->drv_ctx, c->p->handle, c->dir, &ids, &err) < 0) {
        log_warn("container %s: %s", c->p->handle, err.msg);
        return;
    }
    size_t n = strv_len(ids), k = 0;
    struct proc_found *found = calloc(n ? n : 1, sizeof(*found));
    for (size_t i = 0; found && i < n; i++) {
        struct proc_found *f = &found[k];
        if (drv->proc_status(reg->drv_ctx, c->p->handle, c->dir, ids[i], &f->st, &err) < 0)
            continue;
        if (drv->proc_times(reg->drv_ctx, c->p->handle, c->dir, ids[i], &f->t, &err) < 0)
            memset(&f->t, 0, sizeof(f->t));
        f->id = ids[i];
        k++;
    }
    if (found)
        qsort(found, k, sizeof(*found), by_start);
    for (size_t i = 0; found && i < k; i++) {
        struct proc_found *f = &found[i];
        bool lost = !f->st.exited && c->state != CTR_RUNNING;
        if (lost)
            f->st.exited = true; /* its container is gone: the process went with it */
        struct ctr_proc *pr = container_proc_add(c, f->id, f->t.has_stdin, &f->st, f->t.started_ms);
        if (pr && lost) {
            pr->lost = true;
            pr->finished_at = 0;
            snprintf(pr->error, sizeof(pr->error),
                     "the container stopped; no exit status recorded");
        } else if (pr && f->st.exited) {
            pr->finished_at = f->t.finished_ms;
        }
    }
    free(found);
    strv_free(ids);
}

/* The main process's latest start when its program could not run, as
 * its record beside container.json keeps it. A record this daemon did not
 * write as it is (too large, malformed) is only reported. */
static void
reload_start_failure(struct container *c)
{
    struct ctr_start_failure f;
    struct err err = {0};
    int ret = c->p->main ? ctr_start_failure_read(c->dir, &f, &err) : -ENOENT;
    if (ret == 0)
        ctr_main_reload_start_failure(c, &f);
    else if (ret != -ENOENT)
        log_warn("container %s: %s; ignored", c->p->handle, err.msg);
}

/* Undoes the archive uploads (docker cp) a crash cut short in the
 * container handle at dir: their merges rolled back, their staging
 * directories removed. One whose root filesystem is not mounted waits
 * for the next upload into it. Also run before an interrupted container
 * is deleted: an upload into a mount's source (a volume) leaves its
 * staging there, and the note that finds it goes with dir. */
static void
recover_uploads(const char *handle, const char *dir)
{
    cleanup_free char *notes = fs_path_join(dir, CP_PENDING_DIR);
    struct err err = {0};
    if (notes && cp_pending_recover(notes, &err) < 0)
        log_warn("container %s: %s", handle, err.msg);
}

/* Removes runtime containers that no record claims. */
static void
remove_orphans(struct containers *reg)
{
    char **handles = NULL;
    struct err err = {0};
    if (reg->drv->container_list(reg->drv_ctx, &handles, &err) < 0) {
        log_warn("containers: %s", err.msg);
        return;
    }
    for (size_t i = 0; handles[i]; i++) {
        if (containers_find(reg, handles[i]))
            continue;
        cleanup_free char *dir = fs_path_join(reg->root, handles[i]);
        log_info("container %s: runtime state without a record; removing it", handles[i]);
        if (reg->drv->container_delete(reg->drv_ctx, handles[i], dir, &err) < 0)
            log_warn("%s", err.msg);
    }
    strv_free(handles);
}

/* An image use stays while its container is loaded. */
static bool
image_user_keep(void *arg, const char *user_id)
{
    return containers_find(arg, user_id) != NULL;
}

/* Drops image uses no loaded container makes: a create's "creating"
 * record is not synced (containers_ops.c), so after a power loss the
 * image use its create committed may have no record left to undo it. */
static void
retain_image_users(struct containers *reg, struct store *st)
{
    unsigned dropped = 0;
    struct err err = {0};
    if (meta_image_users_retain(st->meta, image_user_keep, reg, &dropped, &err) < 0)
        log_warn("containers: image users: %s", err.msg);
    else if (dropped)
        log_info("containers: %u image user%s without a container dropped", dropped,
                 dropped == 1 ? "" : "s");
}

/* A journaled mount stays while its container is loaded (it outlived the daemon). */
static bool
mount_keep(void *arg, const struct mj_entry *e)
{
    struct containers *reg = arg;
    const char *handle = mj_owner_container(e->owner);
    return handle && containers_find(reg, handle);
}

static int
mount_undo(void *arg, const struct mj_entry *e, struct err *err)
{
    (void)arg;
    return layers_undo_entry(e, err);
}

/* Undoes the mounts that a crash left and no loaded container uses. */
static void
replay_mounts(struct containers *reg, struct store *st)
{
    struct mj_replay_stats rs = {0};
    struct err err = {0};
    if (mjournal_replay(st->mounts, mount_keep, mount_undo, reg, &rs, &err) < 0) {
        log_error("containers: %s", err.msg);
        return;
    }
    if (rs.undone || rs.failed || rs.damaged)
        log_info("containers: mount journal: %u kept, %u undone, %u failed, %u damaged", rs.kept,
                 rs.undone, rs.failed, rs.damaged);
}

int
containers_open(struct daemon *d, struct containers **out, struct err *err)
{
    struct containers *reg = calloc(1, sizeof(*reg));
    if (!reg || !(reg->root = fs_path_join(d->cfg->root, "containers"))) {
        free(reg);
        return err_set(err, ENOMEM, "containers: out of memory");
    }
    reg->d = d;
    *out = reg;
    cleanup_free char *state_root = fs_path_join(d->cfg->root, "runtime");
    reg->drv = rt_driver_lookup(d->cfg->runtime, &reg->drv_err);
    if (reg->drv) {
        /* One cgroup parent per store root, so two daemons on one host
         * (CI runs several) never share a container's cgroup by handle. */
        char digest[DIGEST_STR_LEN];
        char cgroup_parent[32] = "berth";
        if (digest_of(d->cfg->root, strlen(d->cfg->root), digest) == 0)
            snprintf(cgroup_parent, sizeof(cgroup_parent), "berth-%.12s", digest_hex(digest));
        struct rt_config rc = {.state_root = state_root,
                               .oci_runtime = d->cfg->oci_runtime,
                               .cgroup_parent = cgroup_parent,
                               .max_output_bytes = (uint64_t)d->cfg->max_output_bytes,
                               .isolation = d->cfg->isolation,
                               .hyperv_cpus = d->cfg->hyperv_cpus,
                               .hyperv_memory_mb = d->cfg->hyperv_memory_mb};
        if (reg->drv->open(&rc, &reg->drv_ctx, &reg->drv_err) < 0)
            reg->drv = NULL;
    }
    if (!reg->drv) {
        log_warn("containers: %s", reg->drv_err.msg);
        return 0;
    }
    int ret = ctr_stops_open(reg, err);
    if (ret < 0)
        return ret;
    if (!d->store)
        return 0; /* the API answers 503 anyway; the records wait for a usable store */
    ret = fs_mkdir_p(reg->root, 0700, err);
    if (ret < 0)
        return ret;
    struct osfs_dir *dp = NULL;
    if ((ret = osfs_dir_open(reg->root, &dp)) < 0)
        return err_errno(err, -ret, "open %s", reg->root);
    const char *name;
    while ((name = osfs_dir_next(dp, NULL)) != NULL) {
        if (strncmp(name, REMOVING_PREFIX, strlen(REMOVING_PREFIX)) == 0) {
            /* A delete's last step, cut short by a crash. */
            cleanup_free char *trash = fs_path_join(reg->root, name);
            struct err terr = {0};
            if (trash && fs_remove_tree(trash, &terr) < 0)
                log_warn("containers: %s", terr.msg);
            continue;
        }
        if (name[0] == '.')
            continue;
        cleanup_free char *dir = fs_path_join(reg->root, name);
        struct ctr_params *p = NULL;
        cleanup_free char *state = NULL;
        struct err rerr = {0};
        if (ctr_record_read(dir, &p, &state, &rerr) < 0 || strcmp(p->handle, name) != 0) {
            /* No usable record: nothing to report, only to clean up. */
            log_warn("containers: %s: no usable record (%s); cleaning up", name, rerr.msg);
            recover_uploads(name, dir);
            struct ctr_params bare = {0};
            snprintf(bare.handle, sizeof(bare.handle), "%s", name);
            if (!rt_handle_valid(bare.handle))
                snprintf(bare.handle, sizeof(bare.handle), "invalid");
            if (containers_delete_blocking(reg, d->store, p ? p : &bare, dir, NULL, &rerr) < 0)
                log_warn("%s", rerr.msg);
            ctr_params_free(p);
            continue;
        }
        if (!state || strcmp(state, "running") != 0) {
            log_info("container %s: interrupted while %s; undoing it", p->handle,
                     state ? state : "?");
            recover_uploads(p->handle, dir);
            if (containers_delete_blocking(reg, d->store, p, dir, NULL, &rerr) < 0)
                log_warn("%s", rerr.msg);
            ctr_params_free(p);
            continue;
        }
        struct container *c = NULL;
        if (containers_add(reg, p, &c, &rerr) < 0) {
            ctr_params_free(p);
            continue;
        }
        struct rt_container_state cs = {0};
        if (reg->drv->container_state(reg->drv_ctx, p->handle, &cs, &rerr) == 0 &&
            cs.status == RT_CONTAINER_RUNNING) {
            c->state = CTR_RUNNING;
            container_watch_init(c, container_init_pidfd(reg, p->handle));
        } else {
            c->state = CTR_STOPPED;
        }
        load_procs(reg, c);
        ctr_main_reload(c);
        reload_start_failure(c);
        recover_uploads(c->p->handle, c->dir);
        log_info("container %s: %s, %u processes running", p->handle, ctr_state_name(c->state),
                 container_procs_running(c));
    }
    osfs_dir_close(dp);
    retain_image_users(reg, d->store);
    remove_orphans(reg);
    replay_mounts(reg, d->store);
    return 0;
}
