/*
 * The container archive service (daemon/svc_archive.h): the container is
 * checked on the loop, then a short stat job or one of the volume
 * service's tar streams is pointed at <container dir>/rootfs, where its
 * root filesystem is mounted. Loop thread, except stat_work, which calls
 * store/ only.
 */
#include "daemon/svc_archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "daemon/containers.h"
#include "daemon/daemon.h"
#include "daemon/job.h"
#include "daemon/svc_containers.h"

/* The container named handle, with a mounted rootfs: *rootfs its host path (caller frees). */
static int
archive_target(struct daemon *d, const char *handle, struct container **out, char **rootfs,
               struct err *err)
{
    struct container *c = NULL;
    int ret = container_lookup(d, handle, &c, err);
    if (ret < 0)
        return ret;
    if (c->state == CTR_CREATING || c->state == CTR_DELETING)
        return err_set(err, ERR_CONFLICT, "container %s: %s, its files cannot be reached", handle,
                       ctr_state_name(c->state));
    if (!(*rootfs = fs_path_join(c->dir, "rootfs")))
        return err_set(err, ENOMEM, "container %s: out of memory", handle);
    *out = c;
    return 0;
}

static void
archive_release(void *arg)
{
    container_unref(arg);
}

/* ---- stat ------------------------------------------------------------------- */

struct stat_job {
    struct svc_call call;
    ctr_archive_stat_cb cb;
    void *arg;
    struct container *c; /* a reference */
    char *rootfs, *path;
    struct rootfs_stat st;
    int rc;
    struct err err;
};

static void
stat_work(void *ctx)
{
    struct stat_job *j = ctx;
    j->rc = rootfs_path_stat(j->rootfs, j->path, &j->st, &j->err);
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
    free(j->rootfs);
    free(j->path);
    free(j);
}

int
container_archive_stat(struct daemon *d, const char *handle, const char *path,
                       ctr_archive_stat_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct container *c = NULL;
    char *rootfs = NULL;
    int ret = archive_target(d, handle, &c, &rootfs, err);
    if (ret < 0)
        return ret;
    struct stat_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->path = strdup(path))) {
        free(j);
        free(rootfs);
        return err_set(err, ENOMEM, "container %s: out of memory", handle);
    }
    j->cb = cb;
    j->arg = arg;
    j->rootfs = rootfs;
    j->c = c;
    container_ref(c);
    if ((ret = job_submit(d->jobs, "container.archive_stat", stat_work, stat_done, j)) < 0) {
        container_unref(c);
        free(j->rootfs);
        free(j->path);
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
    char *rootfs = NULL;
    int ret = archive_target(d, handle, &c, &rootfs, err);
    if (ret < 0)
        return ret;
    container_ref(c);
    struct volume_stream_where w = {.rootfs = rootfs, .release = archive_release, .release_arg = c};
    ret = volume_stream_out_at(d, &w, path, VOLUME_COMPRESS_NONE, notify, arg, out, err);
    if (ret < 0)
        container_unref(c);
    free(rootfs);
    return ret;
}

int
container_archive_put(struct daemon *d, const char *handle, const char *path, bool no_dir_nondir,
                      void (*room)(void *arg), volume_stream_in_cb done, void *arg,
                      struct volume_stream_in **out, struct err *err)
{
    struct container *c = NULL;
    char *rootfs = NULL;
    int ret = archive_target(d, handle, &c, &rootfs, err);
    if (ret < 0)
        return ret;
    if (c->p->readonly_rootfs) {
        free(rootfs);
        return err_set(err, EROFS, "container rootfs is marked read-only");
    }
    container_ref(c);
    struct volume_stream_where w = {.rootfs = rootfs,
                                    .no_dir_nondir = no_dir_nondir,
                                    .release = archive_release,
                                    .release_arg = c};
    ret = volume_stream_in_at(d, &w, path, NULL, room, done, arg, out, err);
    if (ret < 0)
        container_unref(c);
    free(rootfs);
    return ret;
}
