/*
 * The container archive service (daemon/svc_archive.h): the container is
 * checked on the loop and the path placed (a lexical match against its
 * mounts' targets), then a short stat job or one of the volume service's
 * tar streams is pointed at <container dir>/rootfs, where its root
 * filesystem is mounted, or at the mount's source. Loop thread, except
 * stat_work, which calls store/ only.
 */
#include "daemon/svc_archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/rootdir.h"
#include "daemon/containers.h"
#include "daemon/daemon.h"
#include "daemon/job.h"
#include "daemon/svc_containers.h"
#include "store/cp_pending.h"
#include "store/store.h"
#include "store/volume.h"

/* Where a container path is on the host: the root and the path in it. */
struct archive_where {
    char *root, *path;
    char *volume;  /* the mount's volume, whose writers an upload joins (NULL: none) */
    char *top;     /* the root's name, for a mount point itself */
    bool in_mount; /* root is a mount's source, not the rootfs */
    bool readonly;
};

static void
where_clear(struct archive_where *w)
{
    free(w->root);
    free(w->path);
    free(w->top);
    free(w->volume);
}

/*
 * The container named handle, with a mounted rootfs, and where path is:
 * inside the volume or host directory mounted there (the innermost
 * mount whose target is path or a parent of it: the container sees that
 * mount's content, never the rootfs below it), else in the rootfs. A
 * tmpfs has nothing on the host to reach: ENOTSUP.
 */
static int
archive_target(struct daemon *d, const char *handle, const char *path, struct container **out,
               struct archive_where *w, struct err *err)
{
    memset(w, 0, sizeof(*w));
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (c->state == CTR_CREATING || c->state == CTR_DELETING)
        return err_set(err, ERR_CONFLICT, "container %s: %s, its files cannot be reached", handle,
                       ctr_state_name(c->state));
    const struct ctr_params *p = c->p;
    const struct rt_mount *best = NULL;
    const char *best_volume = NULL;
    for (size_t i = 0; i < p->nmounts; i++) {
        char *rest = NULL, *top = NULL;
        int in = rootfs_path_in_mount(path, p->mounts[i].target, &rest, &top);
        if (in < 0) {
            where_clear(w);
            return err_set(err, ENOMEM, "container %s: out of memory", handle);
        }
        if (in && (!best || strlen(p->mounts[i].target) > strlen(best->target))) {
            best = &p->mounts[i];
            best_volume = p->mount_volumes ? p->mount_volumes[i] : NULL;
            where_clear(w);
            w->path = rest;
            w->top = top;
        } else {
            free(rest);
            free(top);
        }
    }
    if (best && (best->tmpfs || !best->source)) {
        where_clear(w);
        return err_set(err, ENOTSUP, "path %s: in a tmpfs mount (%s), not reachable from the host",
                       path, best->target);
    }
    if (best) {
        w->root = strdup(best->source);
        w->in_mount = true;
        w->readonly = best->readonly;
        if (best_volume && !(w->volume = strdup(best_volume))) {
            where_clear(w);
            return err_set(err, ENOMEM, "container %s: out of memory", handle);
        }
    } else {
        w->root = fs_path_join(c->dir, "rootfs");
        w->path = strdup(path);
        w->readonly = p->readonly_rootfs;
    }
    if (!w->root || !w->path) {
        where_clear(w);
        return err_set(err, ENOMEM, "container %s: out of memory", handle);
    }
    *out = c;
    return 0;
}

static void
archive_release(void *arg)
{
    container_unref(arg);
}

/* An upload's hold on its container, and what its job may read. */
struct put_ctx {
    struct daemon *d;
    struct container *c; /* a reference */
    char *volume;        /* the volume written into, held while the job runs (NULL: none) */
    char *dir;           /* copies for the job: the container's directory, */
    char *user;          /* and the user copyUIDGID chowns to (NULL: none) */
    char *notes;         /* <dir>/cp-pending: the uploads' notes (store/cp_pending.h) */
    bool rootfs;         /* the upload goes to <dir>/rootfs, which must be mounted */
};

static void
put_release(void *arg)
{
    struct put_ctx *x = arg;
    container_unref(x->c);
    free(x->dir);
    free(x->user);
    free(x->volume);
    free(x->notes);
    free(x);
}

/* On the upload's pool thread, after the extraction: lets go of the volume. */
static void
put_finish(void *arg)
{
    struct put_ctx *x = arg;
    if (x->volume)
        volume_write_end(x->d->store->volumes, x->volume);
}

/* On the upload's pool thread: the user as the container's /etc/passwd says. */
static int
put_prepare(void *arg, struct rootfs_tar_in_opts *o, struct err *err)
{
    struct put_ctx *x = arg;
    if (x->rootfs) {
        /* Unmounted (the host rebooted under a stopped container), the
         * mount point is a plain directory of ours: nothing goes there. */
        cleanup_close int dfd = rootdir_open(x->dir);
        struct os_stat ds, rs;
        int r = dfd >= 0 ? rootdir_stat(dfd, "", &ds) : dfd;
        if (r == 0)
            r = rootdir_stat(dfd, "rootfs", &rs);
        if (r < 0)
            return err_errno(err, -r, "the container's root filesystem");
        if (rs.st_dev == ds.st_dev)
            return err_set(err, ERR_CONFLICT, "the container's root filesystem is not mounted");
    }
    /* What a dead daemon's uploads left in this container first: their
     * merges undone and their staging removed, before another comes. */
    if (cp_pending_recover(x->notes, err) < 0)
        return err_wrap(err, "an earlier upload cut short");
    o->notes = x->notes;
    o->root_is_rootfs = x->rootfs;
    if (x->user) {
        char *home = NULL;
        int ret = containers_resolve_user(x->dir, x->user, &o->uid, &o->gid, &home, err);
        free(home);
        if (ret < 0)
            return err_wrap(err, "copyUIDGID");
        o->chown = true;
    }
    if (x->volume) {
        /* Last, so that a failure above holds nothing: a writer of the
         * volume, as a /v1 upload is, so that no child is made of it and
         * it is not deleted until put_finish. */
        char *fs = NULL;
        bool privileged = false;
        if (volume_write_begin(x->d->store->volumes, x->volume, &fs, &privileged, err) < 0)
            return err_wrap(err, "the volume mounted at the path");
        free(fs);
    }
    return 0;
}

/* ---- stat ------------------------------------------------------------------- */

struct stat_job {
    struct svc_call call;
    ctr_archive_stat_cb cb;
    void *arg;
    struct container *c; /* a reference */
    struct archive_where w;
    struct rootfs_stat st;
    int rc;
    struct err err;
};

static void
stat_work(void *ctx)
{
    struct stat_job *j = ctx;
    j->rc = rootfs_path_stat(j->w.root, j->w.path, j->w.top, &j->st, &j->err);
}

static void
stat_done(void *ctx, bool cancelled)
{
    struct stat_job *j = ctx;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "stat: the daemon is shutting down");
    if (!j->call.detached)
        j->cb(j->arg, j->rc < 0 ? &j->err : NULL, j->rc < 0 ? NULL : &j->st);
    container_unref(j->c);
    where_clear(&j->w);
    free(j);
}

int
container_archive_stat(struct daemon *d, const char *handle, const char *path,
                       ctr_archive_stat_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    struct archive_where w;
    int ret = archive_target(d, handle, path, &c, &w, err);
    if (ret < 0)
        return ret;
    struct stat_job *j = calloc(1, sizeof(*j));
    if (!j) {
        where_clear(&w);
        return err_set(err, ENOMEM, "container %s: out of memory", handle);
    }
    j->cb = cb;
    j->arg = arg;
    j->w = w;
    j->c = c;
    container_ref(c);
    if ((ret = job_submit(d->jobs, "container.archive_stat", stat_work, stat_done, j)) < 0) {
        container_unref(c);
        where_clear(&j->w);
        free(j);
        return err_set(err, ECANCELED, "container %s: cannot start the job: %s", handle,
                       strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}

/* ---- streams ---------------------------------------------------------------- */

int
container_archive_get(struct daemon *d, const char *handle, const char *path,
                      void (*notify)(void *arg), void *arg, struct volume_stream_out **out,
                      struct err *err)
{
    struct container *c = NULL;
    struct archive_where aw;
    int ret = archive_target(d, handle, path, &c, &aw, err);
    if (ret < 0)
        return ret;
    container_ref(c);
    struct volume_stream_where w = {
        .rootfs = aw.root, .top = aw.top, .release = archive_release, .release_arg = c};
    ret = volume_stream_out_at(d, &w, aw.path, VOLUME_COMPRESS_NONE, notify, arg, out, err);
    if (ret < 0)
        container_unref(c);
    where_clear(&aw);
    return ret;
}

int
container_archive_put(struct daemon *d, const char *handle, const char *path, bool no_dir_nondir,
                      bool copy_uid_gid, void (*room)(void *arg), volume_stream_in_cb done,
                      void *arg, struct volume_stream_in **out, struct err *err)
{
    struct container *c = NULL;
    struct archive_where aw;
    int ret = archive_target(d, handle, path, &c, &aw, err);
    if (ret < 0)
        return ret;
    if (aw.readonly) {
        /* The engine's words for either. */
        ret = err_set(err, EROFS, "%s is marked read-only",
                      aw.in_mount ? "mounted volume" : "container rootfs");
        where_clear(&aw);
        return ret;
    }
    /* The engine's rule: with copyUIDGID, the container's User (its own
     * or its image's) owns what comes in; without a User, the tar's
     * owners stay. */
    const char *user = c->p->user && *c->p->user ? c->p->user : c->p->image_user;
    struct put_ctx *x = calloc(1, sizeof(*x));
    if (x) {
        x->dir = strdup(c->dir);
        x->notes = fs_path_join(c->dir, CP_PENDING_DIR);
        x->user = copy_uid_gid && user && *user ? strdup(user) : NULL;
        x->volume = aw.volume ? strdup(aw.volume) : NULL;
    }
    if (!x || !x->dir || !x->notes || (copy_uid_gid && user && *user && !x->user) ||
        (aw.volume && !x->volume)) {
        if (x)
            free(x->dir), free(x->notes), free(x->user), free(x->volume), free(x);
        where_clear(&aw);
        return err_set(err, ENOMEM, "container %s: out of memory", handle);
    }
    x->d = d;
    x->c = c;
    x->rootfs = !aw.in_mount;
    container_ref(c);
    struct volume_stream_where w = {.rootfs = aw.root,
                                    .no_dir_nondir = no_dir_nondir,
                                    .prepare = put_prepare,
                                    .finish = put_finish,
                                    .release = put_release,
                                    .release_arg = x};
    ret = volume_stream_in_at(d, &w, aw.path, NULL, room, done, arg, out, err);
    if (ret < 0)
        put_release(x);
    where_clear(&aw);
    return ret;
}
