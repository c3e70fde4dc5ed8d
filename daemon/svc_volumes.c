/*
 * The volume service (daemon/svc_volumes.h): record operations as short
 * jobs on the store, tar streams as long jobs fed or drained through
 * bounded pipes. Loop thread, except the *_work functions, which call
 * store/ only.
 */
#include "daemon/svc_volumes.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "daemon/volume_ttl.h"
#include "store/rootfs_tar.h"
#include "store/store.h"

#define UPLOAD_PIPE_BYTES (1 << 20)
#define DOWNLOAD_PIPE_BYTES (1 << 20)
#define OUT_STAGE_BYTES (64 << 10)

static int
store_of(struct daemon *d, struct err *err)
{
    if (d->store)
        return 0;
    return err_set(err, ERR_UNAVAILABLE, "the store is not available: %s", d->store_error);
}

static int
check_handle(const char *field, const char *h, struct err *err)
{
    if (volume_handle_valid(h))
        return 0;
    return err_set(err, EINVAL,
                   "%s %s: expected 1-128 characters of [A-Za-z0-9_.-], not starting with a dot",
                   field, h ? h : "");
}

static int
check_props(const struct volume_prop *props, size_t n, bool allow_null, struct err *err)
{
    if (n > VOL_PROPS_MAX)
        return err_set(err, EINVAL, "field \"properties\": %zu properties, over the limit of %d", n,
                       VOL_PROPS_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!props[i].value && !allow_null)
            return err_set(err, EINVAL, "field \"properties.%s\": expected a string", props[i].key);
        if (!*props[i].key || strlen(props[i].key) > VOLUME_PROP_MAX ||
            (props[i].value && strlen(props[i].value) > VOLUME_PROP_MAX))
            return err_set(err, EINVAL,
                           "field \"properties.%s\": keys must be 1-%d bytes, values at most %d",
                           props[i].key, VOLUME_PROP_MAX, VOLUME_PROP_MAX);
    }
    return 0;
}

/* ---- records ---------------------------------------------------------------- */

enum vol_op { VOL_CREATE, VOL_LIST, VOL_GET, VOL_PATCH, VOL_DELETE };

struct vol_job {
    struct svc_call call;
    union {
        vol_cb one;
        vol_list_cb list;
        vol_delete_cb del;
    } cb;
    void *arg;
    struct daemon *d;
    enum vol_op op;
    char *handle, *parent;
    struct volume_prop *props; /* create: set; patch: set or remove; list: filters */
    size_t n_props;
    int64_t ttl_s; /* patch: -1 leaves it */
    bool privileged, force;
    /* results */
    int rc;
    struct err err;
    struct vol_info *infos; /* one for create/get/patch, n for list */
    struct volume_rec **recs;
    char **paths;
    size_t n;
    char **deleted;
    size_t n_deleted;
};

static void
vol_job_free(struct vol_job *j)
{
    free(j->handle);
    free(j->parent);
    for (size_t i = 0; i < j->n_props; i++) {
        free(j->props[i].key);
        free(j->props[i].value);
    }
    free(j->props);
    volume_rec_list_free(j->recs, j->n);
    for (size_t i = 0; j->paths && i < j->n; i++)
        free(j->paths[i]);
    free(j->paths);
    free(j->infos);
    for (size_t i = 0; i < j->n_deleted; i++)
        free(j->deleted[i]);
    free(j->deleted);
    free(j);
}

static bool
props_match(const struct volume_rec *v, const struct volume_prop *want, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        bool ok = false;
        for (size_t i = 0; i < v->n_props && !ok; i++)
            ok = strcmp(v->props[i].key, want[k].key) == 0 &&
                 strcmp(v->props[i].value, want[k].value) == 0;
        if (!ok)
            return false;
    }
    return true;
}

/* Adds rec to the results with its path and size (the job's thread). */
static void
keep_rec(struct vol_job *j, struct volume_rec *rec)
{
    struct volume_store *vs = j->d->store->volumes;
    size_t i = j->n;
    struct err serr = {0};
    j->recs[i] = rec;
    j->paths[i] = volume_data_path(vs, rec->handle);
    j->infos[i].rec = rec;
    j->infos[i].path = j->paths[i] ? j->paths[i] : "";
    if (volume_size(vs, rec->handle, &j->infos[i].size_bytes, &serr) < 0)
        j->infos[i].size_bytes = 0;
    j->n++;
}

static bool
results_alloc(struct vol_job *j, size_t n)
{
    j->recs = calloc(n ? n : 1, sizeof(*j->recs));
    j->paths = calloc(n ? n : 1, sizeof(*j->paths));
    j->infos = calloc(n ? n : 1, sizeof(*j->infos));
    return j->recs && j->paths && j->infos;
}

static void
vol_work(void *ctx)
{
    struct vol_job *j = ctx;
    struct store *st = j->d->store;
    struct volume_rec *rec = NULL;
    switch (j->op) {
    case VOL_CREATE: {
        struct volume_create_opts o = {.handle = j->handle,
                                       .parent = j->parent,
                                       .props = j->props,
                                       .n_props = j->n_props,
                                       .ttl_s = j->ttl_s,
                                       .privileged = j->privileged};
        j->rc = volume_create(st->volumes, &o, &rec, &j->err);
        break;
    }
    case VOL_GET:
    case VOL_PATCH:
        if (j->op == VOL_PATCH)
            j->rc = vmeta_patch(st->meta, j->handle, j->props, j->n_props, j->ttl_s, clock_unix_s(),
                                &j->err);
        if (j->rc == 0)
            j->rc = vmeta_get(st->meta, j->handle, &rec, &j->err);
        break;
    case VOL_LIST: {
        struct volume_rec **all = NULL;
        size_t n = 0;
        j->rc = vmeta_list(st->meta, &all, &n, &j->err);
        if (j->rc < 0)
            break;
        bool ok = results_alloc(j, n);
        for (size_t i = 0; i < n; i++) {
            if (ok && props_match(all[i], j->props, j->n_props))
                keep_rec(j, all[i]);
            else
                volume_rec_free(all[i]);
        }
        free(all);
        if (!ok)
            j->rc = err_set(&j->err, ENOMEM, "list volumes: out of memory");
        return;
    }
    case VOL_DELETE:
        j->rc =
            volume_delete(st->volumes, j->handle, j->force, &j->deleted, &j->n_deleted, &j->err);
        return;
    }
    if (j->rc == 0 && !results_alloc(j, 1))
        j->rc = err_set(&j->err, ENOMEM, "volume: out of memory");
    if (j->rc == 0)
        keep_rec(j, rec);
    else
        volume_rec_free(rec);
}

static void
vol_done(void *ctx, bool cancelled)
{
    struct vol_job *j = ctx;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "volumes: the daemon is shutting down");
    if (j->rc == 0 && j->op != VOL_LIST && j->n == 1 && j->recs[0]->expires_at)
        volume_ttl_hint(j->d, j->recs[0]->expires_at);
    const struct err *err = j->rc < 0 ? &j->err : NULL;
    if (!j->call.detached) {
        if (j->op == VOL_LIST)
            j->cb.list(j->arg, err, j->infos, j->n);
        else if (j->op == VOL_DELETE)
            j->cb.del(j->arg, err, j->deleted, j->n_deleted);
        else
            j->cb.one(j->arg, err, err ? NULL : &j->infos[0]);
    }
    vol_job_free(j);
}

/* A job for op, with copies of handle and props. */
static struct vol_job *
vol_job_new(struct daemon *d, enum vol_op op, const char *handle, const struct volume_prop *props,
            size_t n_props, void *arg, struct err *err)
{
    if (store_of(d, err) < 0)
        return NULL;
    struct vol_job *j = calloc(1, sizeof(*j));
    bool oom = !j;
    if (j) {
        j->d = d;
        j->op = op;
        j->arg = arg;
        j->ttl_s = -1;
        oom = (handle && !(j->handle = strdup(handle))) ||
              (n_props && !(j->props = calloc(n_props, sizeof(*j->props))));
        for (size_t i = 0; !oom && i < n_props; i++) {
            j->props[i].key = strdup(props[i].key);
            j->props[i].value = props[i].value ? strdup(props[i].value) : NULL;
            j->n_props = i + 1;
            oom = !j->props[i].key || (props[i].value && !j->props[i].value);
        }
    }
    if (oom) {
        if (j)
            vol_job_free(j);
        err_set(err, ENOMEM, "volumes: out of memory");
        return NULL;
    }
    return j;
}

static int
vol_submit(struct vol_job *j, struct svc_call **call, struct err *err)
{
    int ret = job_submit(j->d->jobs, "volumes", vol_work, vol_done, j);
    if (ret < 0) {
        vol_job_free(j);
        return err_set(err, ECANCELED, "volumes: cannot start the job: %s", strerror(-ret));
    }
    svc_call_give(&j->call, call);
    return 0;
}

int
vol_create(struct daemon *d, const struct volume_create_opts *o, vol_cb cb, void *arg,
           struct svc_call **call, struct err *err)
{
    int ret = 0;
    if (o->handle && (ret = check_handle("field \"handle\":", o->handle, err)) < 0)
        return ret;
    if (o->parent && !volume_handle_valid(o->parent))
        return err_set(err, EINVAL, "field \"parent\": %s is not a volume handle", o->parent);
    if (o->ttl_s < 0)
        return err_set(err, EINVAL, "field \"ttl_s\": must not be negative");
    if ((ret = check_props(o->props, o->n_props, false, err)) < 0)
        return ret;
    struct vol_job *j = vol_job_new(d, VOL_CREATE, o->handle, o->props, o->n_props, arg, err);
    if (!j)
        return -err->code;
    j->cb.one = cb;
    j->ttl_s = o->ttl_s;
    j->privileged = o->privileged;
    if (o->parent && !(j->parent = strdup(o->parent))) {
        vol_job_free(j);
        return err_set(err, ENOMEM, "volumes: out of memory");
    }
    return vol_submit(j, call, err);
}

int
vol_get(struct daemon *d, const char *handle, vol_cb cb, void *arg, struct svc_call **call,
        struct err *err)
{
    int ret = check_handle("handle", handle, err);
    struct vol_job *j = ret < 0 ? NULL : vol_job_new(d, VOL_GET, handle, NULL, 0, arg, err);
    if (!j)
        return -err->code;
    j->cb.one = cb;
    return vol_submit(j, call, err);
}

int
vol_patch(struct daemon *d, const char *handle, const struct volume_prop *props, size_t n,
          int64_t ttl_s, vol_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    int ret = check_handle("handle", handle, err);
    if (ret == 0 && ttl_s < -1)
        ret = err_set(err, EINVAL, "field \"ttl_s\": must not be negative");
    if (ret == 0)
        ret = check_props(props, n, true, err);
    struct vol_job *j = ret < 0 ? NULL : vol_job_new(d, VOL_PATCH, handle, props, n, arg, err);
    if (!j)
        return -err->code;
    j->cb.one = cb;
    j->ttl_s = ttl_s;
    return vol_submit(j, call, err);
}

int
vol_list(struct daemon *d, const struct volume_prop *filters, size_t n, vol_list_cb cb, void *arg,
         struct svc_call **call, struct err *err)
{
    if (n > VOL_PROPS_MAX)
        return err_set(err, EINVAL, "too many property filters (at most %d)", VOL_PROPS_MAX);
    struct vol_job *j = vol_job_new(d, VOL_LIST, NULL, filters, n, arg, err);
    if (!j)
        return -err->code;
    j->cb.list = cb;
    return vol_submit(j, call, err);
}

int
vol_delete(struct daemon *d, const char *handle, bool force, vol_delete_cb cb, void *arg,
           struct svc_call **call, struct err *err)
{
    int ret = check_handle("handle", handle, err);
    struct vol_job *j = ret < 0 ? NULL : vol_job_new(d, VOL_DELETE, handle, NULL, 0, arg, err);
    if (!j)
        return -err->code;
    j->cb.del = cb;
    j->force = force;
    return vol_submit(j, call, err);
}

/* ---- tar in ------------------------------------------------------------------ */

struct volume_stream_in {
    struct daemon *d;
    volume_stream_in_cb done;
    void (*room)(void *arg);
    void *arg;
    bool detached, job_done;
    char *handle, *path, *encoding;
    char *rootfs; /* instead of handle: a container's (store/rootfs_tar.h) */
    bool no_dir_nondir;
    int (*prepare)(void *arg, struct rootfs_tar_in_opts *o, struct err *err);
    void (*finish)(void *arg);
    void (*release)(void *arg);
    void *release_arg;
    struct bpipe *upload;
    int rc;
    struct err err;
    struct volume_tar_in_result res;
};

static void
in_free(struct volume_stream_in *op)
{
    /* The job is over (or never ran), so both sides release here. */
    bpipe_release_job(op->upload);
    bpipe_release_loop(op->upload);
    if (op->release)
        op->release(op->release_arg);
    free(op->handle);
    free(op->path);
    free(op->encoding);
    free(op->rootfs);
    free(op);
}

static ssize_t
in_read(void *ctx, void *buf, size_t len)
{
    return bpipe_read(ctx, buf, len);
}

static void
in_work(void *ctx)
{
    struct volume_stream_in *op = ctx;
    struct volume_tar_in in = {.read = in_read, .ctx = op->upload, .encoding = op->encoding};
    struct rootfs_tar_in_opts o = {.no_dir_nondir = op->no_dir_nondir};
    op->rc = op->prepare ? op->prepare(op->release_arg, &o, &op->err) : 0;
    if (op->rc == 0 && op->rootfs) {
        op->rc = rootfs_tar_import(op->rootfs, op->path, &in, &o, &op->res, &op->err);
        if (op->finish)
            op->finish(op->release_arg);
    } else if (op->rc == 0)
        op->rc =
            volume_tar_import(op->d->store->volumes, op->handle, op->path, &in, &op->res, &op->err);
    if (op->rc < 0)
        bpipe_abort(op->upload, ECANCELED); /* the rest of the body is dropped */
}

static void
in_done(void *ctx, bool cancelled)
{
    struct volume_stream_in *op = ctx;
    op->job_done = true;
    if (cancelled && op->rc == 0) {
        op->rc = err_set(&op->err, ECANCELED, "upload: the daemon is shutting down");
        bpipe_abort(op->upload, ECANCELED);
    }
    if (op->rc < 0 && op->detached) /* else the caller reports it */
        log_info("%s %s: upload failed: %s", op->rootfs ? "container rootfs" : "volume",
                 op->rootfs ? op->rootfs : op->handle, op->err.msg);
    if (!op->detached)
        op->done(op->arg, op->rc < 0 ? &op->err : NULL, &op->res);
    else
        in_free(op);
}

static void
in_room(void *ctx)
{
    struct volume_stream_in *op = ctx;
    if (!op->detached && op->room)
        op->room(op->arg);
}

int
volume_stream_in(struct daemon *d, const char *handle, const char *path, const char *encoding,
                 void (*room)(void *arg), volume_stream_in_cb done, void *arg,
                 struct volume_stream_in **out, struct err *err)
{
    struct volume_stream_where w = {.handle = handle};
    return volume_stream_in_at(d, &w, path, encoding, room, done, arg, out, err);
}

/* Checks where w points; a volume's handle is valid (its volume may still be missing). */
static int
where_check(struct daemon *d, const struct volume_stream_where *w, struct err *err)
{
    if (w->rootfs)
        return 0;
    int ret = store_of(d, err);
    return ret < 0 ? ret : check_handle("handle", w->handle, err);
}

int
volume_stream_in_at(struct daemon *d, const struct volume_stream_where *w, const char *path,
                    const char *encoding, void (*room)(void *arg), volume_stream_in_cb done,
                    void *arg, struct volume_stream_in **out, struct err *err)
{
    int ret = where_check(d, w, err);
    if (ret < 0)
        return ret;
    struct volume_stream_in *op = calloc(1, sizeof(*op));
    if (!op)
        return err_set(err, ENOMEM, "upload: out of memory");
    op->d = d;
    op->done = done;
    op->room = room;
    op->arg = arg;
    op->handle = w->handle ? strdup(w->handle) : NULL;
    op->rootfs = w->rootfs ? strdup(w->rootfs) : NULL;
    op->no_dir_nondir = w->no_dir_nondir;
    op->path = strdup(path);
    op->encoding = encoding ? strdup(encoding) : NULL;
    op->upload = bpipe_new(d->loop, UPLOAD_PIPE_BYTES, in_room, op);
    if ((!op->handle && !op->rootfs) || !op->path || (encoding && !op->encoding) || !op->upload) {
        if (op->upload)
            in_free(op);
        else
            free(op->handle), free(op->rootfs), free(op->path), free(op->encoding), free(op);
        return err_set(err, ENOMEM, "upload: out of memory");
    }
    op->prepare = w->prepare;
    op->finish = w->finish;
    op->release = w->release;
    op->release_arg = w->release_arg;
    if ((ret = job_submit_long(d->jobs, "volume.tar_in", in_work, in_done, op)) < 0) {
        op->release = NULL; /* the call failed: the caller keeps what release frees */
        in_free(op);
        return err_set(err, ECANCELED, "cannot start the upload: %s", strerror(-ret));
    }
    *out = op;
    return 0;
}

struct bpipe *
volume_stream_in_pipe(struct volume_stream_in *op)
{
    return op->upload;
}

void
volume_stream_in_detach(struct volume_stream_in *op)
{
    if (!op || op->detached)
        return;
    op->detached = true;
    bpipe_abort(op->upload, ECANCELED);
    if (op->job_done)
        in_free(op);
}

/* ---- tar out ---------------------------------------------------------------- */

struct volume_stream_out {
    struct daemon *d;
    void (*notify)(void *arg);
    void *arg;
    bool detached;
    char *handle, *path;
    char *rootfs;            /* instead of handle: a container's (store/rootfs_tar.h) */
    char *top;               /* the name of rootfs's root, or NULL */
    struct rootfs_stat stat; /* the job's, read by the loop once ready */
    void (*release)(void *arg);
    void *release_arg;
    enum volume_compression comp;
    struct bpipe *pipe;
    void *res_buf; /* the job's region of pipe from bpipe_reserve, or NULL */
    size_t res_len;
    char *stage; /* the job's small writes, not yet in pipe */
    size_t staged;
    atomic_bool ready; /* the job found the path and is writing */
    bool job_done;
    int rc;
    struct err err;
};

static void
out_free(struct volume_stream_out *op)
{
    /* The job is over (or never ran), so both sides release here. */
    bpipe_release_job(op->pipe);
    bpipe_release_loop(op->pipe);
    if (op->release)
        op->release(op->release_arg);
    free(op->handle);
    free(op->path);
    free(op->rootfs);
    free(op->top);
    free(op);
}

static int
out_flush(struct volume_stream_out *op)
{
    size_t n = op->staged;
    op->staged = 0;
    return n ? bpipe_write(op->pipe, op->stage, n) : 0;
}

static int
out_write(void *ctx, const void *buf, size_t len)
{
    struct volume_stream_out *op = ctx;
    /* File data the writer read into the region out_reserve gave is in
     * the pipe already: only make it readable. */
    if (op->res_buf && buf == op->res_buf && len <= op->res_len) {
        bpipe_commit(op->pipe, len);
        op->res_buf = (char *)op->res_buf + len;
        op->res_len -= len;
        return 0;
    }
    op->res_buf = NULL;
    /* Headers, padding and small files: gathered into one write, so that
     * the loop is woken for, and sends, a few large pieces. */
    if (op->stage && len < OUT_STAGE_BYTES) {
        int r = op->staged + len > OUT_STAGE_BYTES ? out_flush(op) : 0;
        if (r < 0)
            return r;
        memcpy(op->stage + op->staged, buf, len);
        op->staged += len;
        return 0;
    }
    int r = out_flush(op);
    return r < 0 ? r : bpipe_write(op->pipe, buf, len);
}

static int
out_reserve(void *ctx, size_t max, void **buf, size_t *len)
{
    struct volume_stream_out *op = ctx;
    int r = out_flush(op); /* what was written before goes first */
    if (r == 0)
        r = bpipe_reserve(op->pipe, max, buf, len);
    op->res_buf = r == 0 ? *buf : NULL;
    op->res_len = r == 0 ? *len : 0;
    return r;
}

static void
out_ready(void *ctx)
{
    struct volume_stream_out *op = ctx;
    atomic_store(&op->ready, true);
}

static void
out_work(void *ctx)
{
    struct volume_stream_out *op = ctx;
    struct volume_tar_out out = {.write = out_write,
                                 .ready = out_ready,
                                 .reserve = out_reserve,
                                 .ctx = op,
                                 .compression = op->comp};
    op->stage = malloc(OUT_STAGE_BYTES); /* NULL: every write goes to the pipe */
    if (op->rootfs)
        op->rc = rootfs_tar_export(op->rootfs, op->path, op->top, &op->stat, &out, &op->err);
    else
        op->rc = volume_tar_export(op->d->store->volumes, op->handle, op->path, &out, &op->err);
    int r = out_flush(op);
    if (op->rc == 0 && r < 0)
        op->rc = err_errno(&op->err, -r, "download: write the end of the tar");
    free(op->stage);
    op->stage = NULL;
    bpipe_close_job(op->pipe);
}

static void
out_notify(void *ctx)
{
    struct volume_stream_out *op = ctx;
    if (!op->detached)
        op->notify(op->arg);
}

static void
out_done(void *ctx, bool cancelled)
{
    struct volume_stream_out *op = ctx;
    op->job_done = true;
    if (cancelled && op->rc == 0)
        op->rc = err_set(&op->err, ECANCELED, "download: the daemon is shutting down");
    if (op->detached)
        out_free(op);
    else
        op->notify(op->arg);
}

int
volume_stream_out(struct daemon *d, const char *handle, const char *path,
                  enum volume_compression comp, void (*notify)(void *arg), void *arg,
                  struct volume_stream_out **out, struct err *err)
{
    struct volume_stream_where w = {.handle = handle};
    return volume_stream_out_at(d, &w, path, comp, notify, arg, out, err);
}

int
volume_stream_out_at(struct daemon *d, const struct volume_stream_where *w, const char *path,
                     enum volume_compression comp, void (*notify)(void *arg), void *arg,
                     struct volume_stream_out **out, struct err *err)
{
    int ret = where_check(d, w, err);
    if (ret < 0)
        return ret;
    struct volume_stream_out *op = calloc(1, sizeof(*op));
    if (!op)
        return err_set(err, ENOMEM, "download: out of memory");
    op->d = d;
    op->notify = notify;
    op->arg = arg;
    op->comp = comp;
    op->handle = w->handle ? strdup(w->handle) : NULL;
    op->rootfs = w->rootfs ? strdup(w->rootfs) : NULL;
    op->top = w->top ? strdup(w->top) : NULL;
    op->path = strdup(path);
    op->pipe = bpipe_new(d->loop, DOWNLOAD_PIPE_BYTES, out_notify, op);
    if ((!op->handle && !op->rootfs) || (w->top && !op->top) || !op->path || !op->pipe) {
        if (op->pipe)
            out_free(op);
        else
            free(op->handle), free(op->rootfs), free(op->top), free(op->path), free(op);
        return err_set(err, ENOMEM, "download: out of memory");
    }
    op->release = w->release;
    op->release_arg = w->release_arg;
    if ((ret = job_submit_long(d->jobs, "volume.tar_out", out_work, out_done, op)) < 0) {
        op->release = NULL; /* the call failed: the caller keeps what release frees */
        out_free(op);
        return err_set(err, ECANCELED, "cannot start the download: %s", strerror(-ret));
    }
    *out = op;
    return 0;
}

bool
volume_stream_out_ready(const struct volume_stream_out *op)
{
    return atomic_load(&((struct volume_stream_out *)op)->ready);
}

const struct rootfs_stat *
volume_stream_out_stat(const struct volume_stream_out *op)
{
    /* Written by the job before it set ready (and never again). */
    return op->rootfs && volume_stream_out_ready(op) ? &op->stat : NULL;
}

size_t
volume_stream_out_read(struct volume_stream_out *op, void *buf, size_t len, bool *eof)
{
    return bpipe_read_nb(op->pipe, buf, len, eof);
}

size_t
volume_stream_out_buffered(struct volume_stream_out *op)
{
    return bpipe_buffered(op->pipe);
}

bool
volume_stream_out_result(const struct volume_stream_out *op, const struct err **err)
{
    *err = op->job_done && op->rc < 0 ? &op->err : NULL;
    return op->job_done;
}

void
volume_stream_out_cancel(struct volume_stream_out *op)
{
    bpipe_abort(op->pipe, ECANCELED);
}

void
volume_stream_out_detach(struct volume_stream_out *op)
{
    if (!op || op->detached)
        return;
    op->detached = true;
    bpipe_abort(op->pipe, ECANCELED); /* stops the job's writes */
    if (op->job_done)
        out_free(op);
}
