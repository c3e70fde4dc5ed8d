/*
 * The image service (daemon/svc_images.h): imports as long jobs fed by a
 * bounded upload pipe, with progress events carried back to the loop as
 * fixed-size records through a second pipe; registry pulls handed to
 * daemon/svc_pull.c; the other operations as short jobs on the store;
 * the --store-max-bytes policy once an import stored a new image (from the
 * import's hook, under its lease); garbage collection after
 * a delete, a prune, and once at start-up. Loop thread, except the *_work
 * functions and the hook an import calls, which call store/ only.
 */
#include "daemon/svc_images.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "daemon/svc_pull.h"
#include "store/gc.h"
#include "store/import.h"
#include "store/refname.h"
#include "store/store.h"
#include "store/volume.h"

#define UPLOAD_PIPE_BYTES (1 << 20)
#define PROGRESS_PIPE_BYTES (64 << 10)

static int
store_of(struct daemon *d, struct err *err)
{
    if (d->store)
        return 0;
    return err_set(err, ERR_UNAVAILABLE, "the store is not available: %s", d->store_error);
}

/* ---- import ----------------------------------------------------------------- */

struct image_load {
    struct daemon *d;
    struct pull_waiter *pull; /* a registry source: the pull's caller, and nothing below */
    image_loaded_cb done;
    void (*progress_cb)(void *arg, const struct image_progress *ev);
    void (*room)(void *arg);
    void *arg;
    bool detached, job_done;
    /* inputs (owned) */
    char *layout_dir, *volume, *volume_path, *name;
    bool has_platform;
    struct oci_platform platform;
    struct bpipe *upload;          /* loop -> job, uploads only */
    struct bpipe *progress;        /* job -> loop, progress records */
    struct image_progress pending; /* a record read in part */
    size_t pending_len;
    /* results */
    struct meta_image *image;
    bool created;
    int rc;
    struct err err;
};

static void
import_free(struct image_load *op)
{
    /* The job is over (or never ran), so both sides release here. */
    if (op->upload) {
        bpipe_release_job(op->upload);
        bpipe_release_loop(op->upload);
    }
    if (op->progress) {
        bpipe_release_job(op->progress);
        bpipe_release_loop(op->progress);
    }
    meta_image_free(op->image);
    free(op->layout_dir);
    free(op->volume);
    free(op->volume_path);
    free(op->name);
    free(op);
}

static ssize_t
upload_read(void *ctx, void *buf, size_t len)
{
    return bpipe_read(ctx, buf, len);
}

void
image_progress_set(struct image_progress *rec, const struct import_event *ev)
{
    *rec = (struct image_progress){
        .done = ev->done, .total = ev->total, .index = ev->index, .count = ev->count};
    snprintf(rec->step, sizeof(rec->step), "%s", ev->step ? ev->step : "");
    snprintf(rec->status, sizeof(rec->status), "%s", ev->status ? ev->status : "");
    snprintf(rec->digest, sizeof(rec->digest), "%s", ev->digest ? ev->digest : "");
    snprintf(rec->chain_id, sizeof(rec->chain_id), "%s", ev->chain_id ? ev->chain_id : "");
}

/* On the job's thread: a copy of the event, dropped when the loop lags. */
static void
progress_event(void *ctx, const struct import_event *ev)
{
    struct image_load *op = ctx;
    struct image_progress rec;
    image_progress_set(&rec, ev);
    if (bpipe_buffered(op->progress) + sizeof(rec) < PROGRESS_PIPE_BYTES)
        bpipe_write(op->progress, &rec, sizeof(rec));
}

/*
 * --store-max-bytes: prunes least recently used unused images until all
 * images together are at most the limit (or at most img, when img alone is
 * larger), then collects their blobs and snapshots. Never img: the caller
 * still holds the lease of the import or pull that stored it (the import
 * calls this from its on_created hook, the pull before pull_plan_free), and
 * meta_prune_images passes over an image whose manifest is leased, whatever
 * the order of last uses. Images in use stay, even when they alone are past
 * the limit. Pool thread; blocks.
 */
void
images_size_policy(struct daemon *d, const struct meta_image *img, bool created)
{
    int64_t max = d->cfg->store_max_bytes;
    if (!created || max < 0)
        return;
    int64_t keep = max;
    if (img->size_bytes + img->unpacked_bytes > keep)
        keep = img->size_bytes + img->unpacked_bytes;
    char **removed = NULL;
    size_t n_removed = 0;
    struct err perr = {0};
    struct store *st = d->store;
    if (meta_prune_images(st->meta, -1, keep, clock_unix_s(), &removed, &n_removed, &perr) == 0 &&
        n_removed > 0) {
        struct gc_result gr = {0};
        gc_run(st->blobs, st->meta, st->root, &gr, &perr);
        log_info("store over --store-max-bytes: pruned %zu images, freed %llu bytes", n_removed,
                 (unsigned long long)(gr.blob_bytes_freed + gr.snapshot_bytes_freed));
    }
    for (size_t i = 0; i < n_removed; i++)
        free(removed[i]);
    free(removed);
}

/* store_image_import's hook for a new image: its lease still holds it. */
static void
import_created(void *ctx, const struct meta_image *img)
{
    struct image_load *op = ctx;
    images_size_policy(op->d, img, true);
}

static void
import_work(void *ctx)
{
    struct image_load *op = ctx;
    /* A layout inside a volume is opened without following symlinks, and
     * imported through that directory fd, so nothing outside the volume
     * is read. */
    int volume_fd = -1;
    char fd_path[64];
    char shown[512];
    const char *layout_dir = op->layout_dir;
    if (op->volume) {
        op->rc = volume_open_dir(op->d->store->volumes, op->volume, op->volume_path, &volume_fd,
                                 &op->err);
        if (op->rc < 0) {
            err_wrap(&op->err, "source.volume %s path %s", op->volume, op->volume_path);
            if (op->progress)
                bpipe_close_job(op->progress);
            return;
        }
        snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", volume_fd);
        layout_dir = fd_path;
        /* Errors name the volume and the path the client gave, not the
         * fd path the import reads it through. */
        snprintf(shown, sizeof(shown), "source.volume %s path %s", op->volume,
                 op->volume_path ? op->volume_path : "/");
    }
    struct import_request r = {
        .layout_dir = layout_dir,
        .layout_shown = op->volume ? shown : NULL,
        .read = op->upload ? upload_read : NULL,
        .read_ctx = op->upload,
        .name = op->name,
        .platform = op->has_platform ? &op->platform : NULL,
        .progress = op->progress ? progress_event : NULL,
        .progress_ctx = op,
        .on_created = import_created,
        .on_created_ctx = op,
    };
    op->rc = store_image_import(op->d->store, &r, &op->image, &op->created, &op->err);
    if (volume_fd >= 0) {
        close(volume_fd);
        if (op->rc < 0 && op->err.code != ERR_INVALID_CONTENT && !strstr(op->err.msg, shown))
            err_wrap(&op->err, "source.volume %s path %s", op->volume, op->volume_path);
    }
    /* Stop the uploader: whatever still comes is not needed. */
    if (op->upload && op->rc < 0)
        bpipe_abort(op->upload, ECANCELED);
    if (op->progress)
        bpipe_close_job(op->progress);
}

void
image_progress_drain(struct bpipe *p, struct image_progress *pending, size_t *pending_len,
                     void (*fn)(void *ctx, const struct image_progress *rec), void *ctx)
{
    bool eof = false;
    for (;;) {
        char *dst = (char *)pending + *pending_len;
        size_t n = bpipe_read_nb(p, dst, sizeof(*pending) - *pending_len, &eof);
        if (n == 0)
            break;
        *pending_len += n;
        if (*pending_len < sizeof(*pending))
            continue;
        *pending_len = 0;
        fn(ctx, pending);
    }
}

static void
progress_deliver(void *ctx, const struct image_progress *rec)
{
    struct image_load *op = ctx;
    if (!op->detached && op->progress_cb)
        op->progress_cb(op->arg, rec);
}

/* Moves whole progress records from the pipe to the caller. */
static void
progress_notify(void *ctx)
{
    struct image_load *op = ctx;
    image_progress_drain(op->progress, &op->pending, &op->pending_len, progress_deliver, op);
}

static void
upload_room(void *ctx)
{
    struct image_load *op = ctx;
    if (!op->detached && op->room)
        op->room(op->arg);
}

static void
import_done(void *ctx, bool cancelled)
{
    struct image_load *op = ctx;
    op->job_done = true;
    if (cancelled && op->rc == 0 && !op->image)
        op->rc = err_set(&op->err, ECANCELED, "import: the daemon is shutting down");
    /* A failure is the caller's to report (one line per error); only a
     * caller gone away leaves it to us. */
    if (op->rc < 0 && op->detached) {
        log_info("import failed: %s", op->err.msg);
    } else if (op->rc == 0) {
        log_info("image %s: imported%s (%s)", op->image->digest, op->created ? "" : ", was stored",
                 op->image->n_names ? op->image->names[0] : "no name");
    }
    if (op->progress)
        progress_notify(op);
    if (op->upload && op->rc < 0)
        bpipe_abort(op->upload, ECANCELED);
    if (!op->detached)
        op->done(op->arg, op->rc < 0 ? &op->err : NULL, op->image, op->created);
    if (op->detached)
        import_free(op);
    /* else: freed when the caller detaches (it may still write an upload). */
}

/* A registry source: the image_load is only the pull's caller (svc_pull.c). */
static int
image_pull_start(struct daemon *d, const struct image_source *o, image_loaded_cb done, void *arg,
                 struct image_load **out, struct err *err)
{
    struct image_load *op = calloc(1, sizeof(*op));
    if (!op)
        return err_set(err, ENOMEM, "pull: out of memory");
    op->d = d;
    int ret = pull_join(d, o, done, arg, &op->pull, err);
    if (ret < 0) {
        free(op);
        return ret;
    }
    *out = op;
    return 0;
}

int
image_import(struct daemon *d, const struct image_source *o, image_loaded_cb done, void *arg,
             struct image_load **out, struct err *err)
{
    int ret = store_of(d, err);
    if (ret < 0)
        return ret;
    if (!!o->layout_dir + !!o->volume + !!o->upload + !!o->registry != 1)
        return err_set(err, EINVAL,
                       "field \"source\": give either \"layout\" (a directory on the host), "
                       "\"volume\" (with an optional \"path\" inside it) or \"registry\" (a "
                       "reference to pull)");
    if (o->registry)
        return image_pull_start(d, o, done, arg, out, err);
    if (o->layout_dir && o->layout_dir[0] != '/')
        return err_set(err, EINVAL, "field \"source.layout\": %s is not an absolute path",
                       o->layout_dir);
    if (o->volume && !volume_handle_valid(o->volume))
        return err_set(err, EINVAL, "field \"source.volume\": %.140s is not a volume handle",
                       o->volume);
    /* Checked here; the import resolves it against the layout's names. */
    char *name = NULL;
    if (o->name && (ret = image_ref_normalize(o->name, &name, err)) < 0)
        return ret;
    free(name);
    name = o->name ? strdup(o->name) : NULL;
    struct image_load *op = calloc(1, sizeof(*op));
    if (!op) {
        free(name);
        return err_set(err, ENOMEM, "import: out of memory");
    }
    op->d = d;
    op->done = done;
    op->progress_cb = o->progress;
    op->room = o->room;
    op->arg = arg;
    op->name = name;
    if (o->platform) {
        op->platform = *o->platform;
        op->has_platform = true;
    }
    bool oom = (o->layout_dir && !(op->layout_dir = strdup(o->layout_dir))) ||
               (o->volume && !(op->volume = strdup(o->volume))) ||
               (o->volume && !(op->volume_path = strdup(o->volume_path ? o->volume_path : "/")));
    if (!oom && o->upload)
        oom = !(op->upload = bpipe_new(d->loop, UPLOAD_PIPE_BYTES, upload_room, op));
    if (!oom && o->progress)
        oom = !(op->progress = bpipe_new(d->loop, PROGRESS_PIPE_BYTES, progress_notify, op));
    if (oom) {
        import_free(op);
        return err_set(err, ENOMEM, "import: out of memory");
    }
    /* Imports run at a client's pace: long jobs, capped so short jobs
     * always find a pool thread. */
    if ((ret = job_submit_long(d->jobs, "image.import", import_work, import_done, op)) < 0) {
        import_free(op);
        return err_set(err, -ret == ENOMEM ? ENOMEM : ECANCELED, "import: cannot start: %s",
                       strerror(-ret));
    }
    *out = op;
    return 0;
}

struct bpipe *
image_load_pipe(struct image_load *op)
{
    return op->upload;
}

void
image_load_detach(struct image_load *op)
{
    if (!op || op->detached)
        return;
    if (op->pull) {
        pull_waiter_detach(op->pull);
        free(op);
        return;
    }
    op->detached = true;
    if (op->upload)
        bpipe_abort(op->upload, ECANCELED);
    if (op->job_done)
        import_free(op);
    /* else: import_done frees it. */
}

/* ---- list, get, delete, prune ----------------------------------------------- */

enum images_op { OP_LIST, OP_GET, OP_DELETE, OP_PRUNE, OP_GC };

struct images_job {
    struct svc_call call;
    union {
        image_list_cb list;
        image_get_cb get;
        image_delete_cb del;
        image_prune_cb prune;
    } cb;
    void *arg;
    struct store *st;
    enum images_op op;
    char *ref;
    int64_t unused_for_s, keep_bytes;
    /* results */
    int rc;
    struct err err;
    struct meta_image **list;
    size_t n;
    struct meta_image *image;
    struct oci_config *config;
    struct image_delete_result del;
    char **removed;
    size_t n_removed;
    struct gc_result gc;
};

/* The image's config, for GET: what it runs and how (NULL when unreadable). */
static struct oci_config *
read_config(struct store *st, const struct meta_image *img)
{
    char *buf = NULL;
    size_t len = 0;
    struct err err = {0};
    struct oci_config *cfg = NULL;
    if (blob_read_small(st->blobs, img->config_digest, OCI_DOC_MAX, &buf, &len, &err) < 0 ||
        oci_config_parse(buf, len, img->config_digest, &cfg, &err) < 0)
        log_warn("image %s: its config: %s", img->digest, err.msg);
    free(buf);
    return cfg;
}

static void
images_work(void *ctx)
{
    struct images_job *j = ctx;
    struct meta *m = j->st->meta;
    switch (j->op) {
    case OP_LIST:
        j->rc = meta_image_list(m, &j->list, &j->n, &j->err);
        break;
    case OP_GET:
        j->rc = image_ref_lookup(m, j->ref, &j->image, &j->err);
        if (j->rc == 0)
            j->config = read_config(j->st, j->image);
        break;
    case OP_DELETE: {
        char *name = NULL;
        j->rc = image_ref_resolve(m, j->ref, &name, &j->err);
        if (j->rc == 0)
            j->rc = meta_image_delete(m, name, j->del.digest, &j->del.image_removed, &j->err);
        free(j->ref);
        j->ref = name;
        j->del.name_removed = j->ref;
        if (j->rc == 0 && j->del.image_removed) {
            struct err gerr = {0};
            if (gc_run(j->st->blobs, m, j->st->root, &j->del.gc, &gerr) < 0)
                log_warn("garbage collection after deleting %s: %s", j->del.digest, gerr.msg);
        }
        break;
    }
    case OP_PRUNE:
        j->rc = meta_prune_images(m, j->unused_for_s, j->keep_bytes, clock_unix_s(), &j->removed,
                                  &j->n_removed, &j->err);
        if (j->rc == 0)
            j->rc = gc_run(j->st->blobs, m, j->st->root, &j->gc, &j->err);
        break;
    case OP_GC:
        j->rc = gc_run(j->st->blobs, m, j->st->root, &j->gc, &j->err);
        break;
    }
}

static void
images_done(void *ctx, bool cancelled)
{
    struct images_job *j = ctx;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "images: the daemon is shutting down");
    const struct err *err = j->rc < 0 ? &j->err : NULL;
    if (!j->call.detached) {
        switch (j->op) {
        case OP_LIST:
            j->cb.list(j->arg, err, j->list, j->n);
            break;
        case OP_GET:
            j->cb.get(j->arg, err, j->image, j->config);
            break;
        case OP_DELETE:
            j->cb.del(j->arg, err, &j->del);
            break;
        case OP_PRUNE:
            j->cb.prune(j->arg, err, j->removed, j->n_removed, &j->gc);
            break;
        case OP_GC:
            break;
        }
    }
    if (j->op == OP_GC) {
        if (err)
            log_warn("garbage collection at start-up: %s", err->msg);
        else if (j->gc.blobs_removed || j->gc.snapshots_removed)
            log_info("garbage collection at start-up: removed %llu blobs and %llu snapshots, "
                     "freed %llu bytes",
                     (unsigned long long)j->gc.blobs_removed,
                     (unsigned long long)j->gc.snapshots_removed,
                     (unsigned long long)(j->gc.blob_bytes_freed + j->gc.snapshot_bytes_freed));
    }
    meta_image_list_free(j->list, j->n);
    meta_image_free(j->image);
    oci_config_free(j->config);
    for (size_t i = 0; i < j->n_removed; i++)
        free(j->removed[i]);
    free(j->removed);
    free(j->ref);
    free(j);
}

static struct images_job *
images_job_new(struct daemon *d, enum images_op op, const char *ref, void *arg, struct err *err)
{
    if (store_of(d, err) < 0)
        return NULL;
    struct images_job *j = calloc(1, sizeof(*j));
    if (!j || (ref && !(j->ref = strdup(ref)))) {
        free(j);
        err_set(err, ENOMEM, "images: out of memory");
        return NULL;
    }
    j->op = op;
    j->arg = arg;
    j->st = d->store;
    return j;
}

static int
images_job_start(struct daemon *d, struct images_job *j, struct svc_call **call, struct err *err)
{
    int ret =
        job_submit(d->jobs, j->op == OP_GC ? "image.gc" : "images", images_work, images_done, j);
    if (ret < 0) {
        free(j->ref);
        free(j);
        return err_set(err, ECANCELED, "images: cannot start the job: %s", strerror(-ret));
    }
    if (call)
        svc_call_give(&j->call, call);
    else
        j->call.detached = true;
    return 0;
}

int
image_list(struct daemon *d, image_list_cb cb, void *arg, struct svc_call **call, struct err *err)
{
    struct images_job *j = images_job_new(d, OP_LIST, NULL, arg, err);
    if (!j)
        return -err->code;
    j->cb.list = cb;
    return images_job_start(d, j, call, err);
}

int
image_get(struct daemon *d, const char *ref, image_get_cb cb, void *arg, struct svc_call **call,
          struct err *err)
{
    struct images_job *j = images_job_new(d, OP_GET, ref, arg, err);
    if (!j)
        return -err->code;
    j->cb.get = cb;
    return images_job_start(d, j, call, err);
}

int
image_delete(struct daemon *d, const char *ref, image_delete_cb cb, void *arg,
             struct svc_call **call, struct err *err)
{
    struct images_job *j = images_job_new(d, OP_DELETE, ref, arg, err);
    if (!j)
        return -err->code;
    j->cb.del = cb;
    return images_job_start(d, j, call, err);
}

int
image_prune(struct daemon *d, int64_t unused_for_s, int64_t keep_bytes, image_prune_cb cb,
            void *arg, struct svc_call **call, struct err *err)
{
    if (unused_for_s < -1 || keep_bytes < -1)
        return err_set(err, EINVAL, "field \"%s\": must not be negative",
                       unused_for_s < -1 ? "unused_for_s" : "keep_bytes");
    struct images_job *j = images_job_new(d, OP_PRUNE, NULL, arg, err);
    if (!j)
        return -err->code;
    j->cb.prune = cb;
    j->unused_for_s = unused_for_s;
    j->keep_bytes = keep_bytes;
    return images_job_start(d, j, call, err);
}

int
images_gc_start(struct daemon *d)
{
    struct err err = {0};
    if (!d->store)
        return 0;
    struct images_job *j = images_job_new(d, OP_GC, NULL, NULL, &err);
    int ret = j ? images_job_start(d, j, NULL, &err) : -err.code;
    if (ret < 0)
        log_warn("garbage collection at start-up: %s", err.msg);
    return ret;
}
