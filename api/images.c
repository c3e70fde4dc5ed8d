/*
 * /v1/images: import (an upload streamed through a bounded pipe into a
 * pool job, or a layout directory on the host), list, get, delete and
 * prune. Handlers validate on the loop and hand the work to jobs; an
 * import can report progress as NDJSON lines. Loop thread, except the
 * *_work functions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/handlers.h"
#include "jsonutil/jsonutil.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/log.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "store/gc.h"
#include "store/import.h"
#include "store/store.h"
#include "store/volume.h"

#define UPLOAD_PIPE_BYTES (1 << 20)
#define PROGRESS_PIPE_BYTES (64 << 10)

/* ---- the image record as JSON --------------------------------------------- */

static json_object *
json_time(int64_t t)
{
    char buf[32];
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_object_new_string(buf);
}

json_object *
image_to_json(const struct meta_image *img)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "digest", json_object_new_string(img->digest));
    json_object *names = json_object_new_array();
    for (size_t i = 0; i < img->n_names; i++)
        json_object_array_add(names, json_object_new_string(img->names[i]));
    json_object_object_add(o, "names", names);
    json_object *p = json_object_new_object();
    json_object_object_add(p, "os", json_object_new_string(img->platform.os));
    json_object_object_add(p, "architecture", json_object_new_string(img->platform.architecture));
    if (img->platform.variant && *img->platform.variant)
        json_object_object_add(p, "variant", json_object_new_string(img->platform.variant));
    if (img->platform.os_version && *img->platform.os_version)
        json_object_object_add(p, "os_version", json_object_new_string(img->platform.os_version));
    json_object_object_add(o, "platform", p);
    json_object_object_add(o, "config_digest", json_object_new_string(img->config_digest));
    json_object *layers = json_object_new_array();
    for (size_t i = 0; i < img->n_layers; i++) {
        json_object *l = json_object_new_object();
        json_object_object_add(l, "digest", json_object_new_string(img->layers[i].digest));
        json_object_object_add(l, "diff_id", json_object_new_string(img->layers[i].diff_id));
        json_object_object_add(l, "size", json_object_new_int64(img->layers[i].size));
        json_object_object_add(l, "chain_id", json_object_new_string(img->layers[i].chain_id));
        json_object_array_add(layers, l);
    }
    json_object_object_add(o, "layers", layers);
    json_object_object_add(o, "size_bytes", json_object_new_int64(img->size_bytes));
    json_object_object_add(o, "unpacked_bytes", json_object_new_int64(img->unpacked_bytes));
    json_object_object_add(o, "created_at", json_time(img->created_at));
    json_object_object_add(o, "last_used_at", json_time(img->last_used_at));
    json_object_object_add(o, "containers", json_object_new_int64(img->users));
    return o;
}

/* Answers 503 when the store could not be opened; true if it did. */
static bool
store_unavailable(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    if (d->store)
        return false;
    api_reply_error(req, 503, "unavailable", "the store is not available: %s", d->store_error);
    return true;
}

/* ---- import --------------------------------------------------------------- */

struct import_job {
    struct api_req *req; /* weak */
    struct daemon *d;
    /* inputs (owned) */
    char *layout_dir;
    char *volume;      /* source.volume: a layout inside a volume */
    char *volume_path; /* source.path inside it */
    char *name;
    bool has_platform;
    struct oci_platform platform;
    struct bpipe *upload;   /* loop -> job, uploads only */
    struct bpipe *progress; /* job -> loop, NDJSON only */
    bool ndjson;
    /* loop-side state */
    struct api_stream *stream;
    bool upload_done; /* the whole body arrived */
    bool job_done;
    bool started; /* submitted (it may wait for a long-job slot) */
    /* results */
    struct meta_image *image;
    bool created;
    struct err err;
    int rc;
};

static void import_job_free(struct import_job *job);
static void import_start(struct import_job *job);

static ssize_t
upload_read(void *ctx, void *buf, size_t len)
{
    return bpipe_read(ctx, buf, len);
}

static void
progress_event(void *ctx, const struct import_event *ev)
{
    struct import_job *job = ctx;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "step", json_object_new_string(ev->step));
    if (ev->status)
        json_object_object_add(o, "status", json_object_new_string(ev->status));
    if (ev->digest)
        json_object_object_add(o, "digest", json_object_new_string(ev->digest));
    if (ev->chain_id)
        json_object_object_add(o, "chain_id", json_object_new_string(ev->chain_id));
    if (ev->count) {
        json_object_object_add(o, "layer", json_object_new_int64(ev->index));
        json_object_object_add(o, "layers", json_object_new_int64(ev->count));
    }
    json_object_object_add(o, "done", json_object_new_int64(ev->done));
    if (ev->total >= 0)
        json_object_object_add(o, "total", json_object_new_int64(ev->total));
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    /* A progress line is never worth blocking the import for: past the
     * pipe's room (a client that reads nothing), lines are dropped. */
    if (bpipe_buffered(job->progress) + len + 1 < PROGRESS_PIPE_BYTES) {
        bpipe_write(job->progress, text, len);
        bpipe_write(job->progress, "\n", 1);
    }
    json_object_put(o);
}

static void
import_work(void *ctx)
{
    struct import_job *job = ctx;
    /* A layout inside a volume is opened without following symlinks, and
     * imported through that directory fd, so nothing outside the volume
     * is read. */
    int volume_fd = -1;
    char fd_path[64];
    const char *layout_dir = job->layout_dir;
    if (job->volume) {
        job->rc = volume_open_dir(job->d->store->volumes, job->volume, job->volume_path, &volume_fd,
                                  &job->err);
        if (job->rc < 0) {
            err_wrap(&job->err, "source volume %s path %s", job->volume, job->volume_path);
            if (job->progress)
                bpipe_close_job(job->progress);
            return;
        }
        snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", volume_fd);
        layout_dir = fd_path;
    }
    struct import_request r = {
        .layout_dir = layout_dir,
        .read = job->upload ? upload_read : NULL,
        .read_ctx = job->upload,
        .name = job->name,
        .platform = job->has_platform ? &job->platform : NULL,
        .progress = job->progress ? progress_event : NULL,
        .progress_ctx = job,
    };
    job->rc = image_import(job->d->store, &r, &job->image, &job->created, &job->err);
    if (volume_fd >= 0) {
        close(volume_fd);
        if (job->rc < 0 && job->err.code != ERR_INVALID_CONTENT)
            err_wrap(&job->err, "source volume %s path %s", job->volume, job->volume_path);
    }
    if (job->upload) {
        /* Stop the uploader: whatever still comes is not needed. */
        if (job->rc < 0)
            bpipe_abort(job->upload, ECANCELED);
    }
    int64_t max = job->d->cfg->store_max_bytes;
    if (job->rc == 0 && job->created && max >= 0) {
        /* --store-max-bytes: prune least recently used unused images, but
         * never the one just imported. */
        int64_t keep = max;
        if (job->image->size_bytes + job->image->unpacked_bytes > keep)
            keep = job->image->size_bytes + job->image->unpacked_bytes;
        char **removed = NULL;
        size_t n_removed = 0;
        struct err perr = {0};
        struct store *st = job->d->store;
        if (meta_prune_images(st->meta, -1, keep, (int64_t)time(NULL), &removed, &n_removed,
                              &perr) == 0 &&
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
    if (job->progress)
        bpipe_close_job(job->progress);
}

/* Moves buffered progress lines to the response stream. */
static void
drain_progress(struct import_job *job)
{
    if (!job->progress || !job->stream)
        return;
    char buf[16384];
    bool eof = false;
    size_t n;
    while ((n = bpipe_read_nb(job->progress, buf, sizeof(buf), &eof)) > 0)
        api_stream_write(job->stream, buf, n);
}

static void
finish_ndjson(struct import_job *job)
{
    drain_progress(job);
    json_object *o = json_object_new_object();
    if (job->rc == 0) {
        json_object_object_add(o, "step", json_object_new_string("done"));
        json_object_object_add(o, "status", json_object_new_int(job->created ? 201 : 200));
        json_object_object_add(o, "image", image_to_json(job->image));
    } else {
        const char *code = NULL;
        unsigned status = api_err_status(job->err.code, &code);
        json_object_object_add(o, "step", json_object_new_string("error"));
        json_object_object_add(o, "status", json_object_new_int((int)status));
        json_object *e = json_object_new_object();
        json_object_object_add(e, "code", json_object_new_string(code));
        json_object_object_add(e, "message", json_object_new_string(job->err.msg));
        json_object_object_add(o, "error", e);
    }
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    api_stream_write(job->stream, text, len);
    api_stream_write(job->stream, "\n", 1);
    json_object_put(o);
    api_stream_end(job->stream);
}

/* Starts the NDJSON response once the request body is complete. */
static void
maybe_start_stream(struct import_job *job)
{
    if (!job->ndjson || job->stream || !job->req || !job->upload_done)
        return;
    if (job->req->response)
        return;
    job->stream = api_stream_start(job->req, 200, "application/x-ndjson");
    drain_progress(job);
}

static void
reply_result(struct import_job *job)
{
    struct api_req *req = job->req;
    if (job->ndjson && job->stream) {
        finish_ndjson(job);
        return;
    }
    if (!req)
        return;
    if (job->rc == 0)
        api_reply_json(req, job->created ? 201 : 200, image_to_json(job->image));
    else
        api_reply_err(req, &job->err);
    /* An upload still arriving is read and dropped; the reply goes when it
     * ends (MHD answers only after the body). */
    if (job->upload_done || !job->upload)
        api_req_resume(req);
    else if (req->suspended)
        api_req_resume(req);
}

static void
progress_notify(void *ctx)
{
    drain_progress(ctx);
}

static void
upload_room(void *ctx)
{
    struct import_job *job = ctx;
    /* The job took data (or stopped): let the uploader go on. */
    if (job->req && job->req->suspended && !job->req->response && !job->upload_done)
        api_req_resume(job->req);
}

static void
import_done(void *ctx, bool cancelled)
{
    struct import_job *job = ctx;
    job->job_done = true;
    if (cancelled && job->rc == 0 && !job->image) {
        job->rc = -ECANCELED;
        err_set(&job->err, ECANCELED, "import: the daemon is shutting down");
    }
    if (job->rc < 0)
        log_info("import failed: %s", job->err.msg);
    if (job->req)
        reply_result(job);
    if (!job->req || job->upload_done || !job->upload)
        import_job_free(job);
    /* else: freed when the upload ends (import_upload_end) or the
     * request goes away (import_req_free). */
}

/* Imports run at a client's pace: they are long jobs, capped so short
 * jobs always find a pool thread (daemon/job.h). */
static void
import_start(struct import_job *job)
{
    struct daemon *d = job->d;
    job->started = true;
    int rc = job_submit_long(d->jobs, "image.import", import_work, import_done, job);
    if (rc < 0) {
        job->rc = rc;
        err_set(&job->err, -rc == ECANCELED ? ECANCELED : -rc, "import: cannot start: %s",
                strerror(-rc));
        job->job_done = true;
        if (job->upload)
            bpipe_abort(job->upload, ECANCELED);
        if (job->req)
            reply_result(job);
    }
}

static void
import_job_free(struct import_job *job)
{
    if (!job)
        return;
    if (job->req) {
        job->req->weak_ref = NULL;
        job->req->ctx = NULL;
        job->req->ctx_free = NULL;
    }
    /* The job is over (or never ran), so both sides release here. */
    if (job->upload) {
        bpipe_release_job(job->upload);
        bpipe_release_loop(job->upload);
    }
    if (job->progress) {
        bpipe_release_job(job->progress);
        bpipe_release_loop(job->progress);
    }
    api_stream_release(job->stream);
    meta_image_free(job->image);
    free(job->layout_dir);
    free(job->volume);
    free(job->volume_path);
    free(job->name);
    free(job);
}

/* The request went away (completed or the client disconnected). */
static void
import_req_free(void *ctx)
{
    struct import_job *job = ctx;
    job->req = NULL;
    if (job->upload)
        bpipe_abort(job->upload, ECANCELED);
    if (!job->started) {
        import_job_free(job);
        return;
    }
    if (job->job_done)
        import_job_free(job);
    /* else: import_done frees it. */
}

static void
import_on_shutdown(struct api_req *req)
{
    struct import_job *job = req->ctx;
    if (job && job->upload)
        bpipe_abort(job->upload, ECANCELED);
}

/* Upload pieces, from the access handler. */
static size_t
import_upload_data(struct api_req *req, const char *data, size_t len)
{
    struct import_job *job = req->ctx;
    if (!job)
        return len;
    if (len == 0) {
        /* The body is complete. */
        job->upload_done = true;
        bpipe_close_write(job->upload);
        if (job->job_done) {
            /* Answered already (import_done); nothing else needs the job. */
            import_job_free(job);
            return 0;
        }
        if (job->ndjson)
            maybe_start_stream(job);
        else
            api_req_suspend(req);
        return 0;
    }
    if (job->job_done || bpipe_aborted(job->upload))
        return len; /* answered already: read and drop the rest */
    size_t took = bpipe_write_nb(job->upload, data, len);
    if (took < len)
        api_req_suspend(req); /* resumed by upload_room */
    return took;
}

static bool
accepts_ndjson(struct api_req *req)
{
    const char *accept = api_req_header(req, MHD_HTTP_HEADER_ACCEPT);
    return accept && strstr(accept, "application/x-ndjson") != NULL;
}

/* Parses ?name= and ?platform=; replies 400 and returns false on error. */
static bool
parse_import_query(struct api_req *req, struct import_job *job)
{
    const char *name = api_req_query(req, "name");
    if (name) {
        if (!image_name_valid(name)) {
            api_reply_error(req, 400, "bad_request",
                            "name %s: expected 1-255 characters of [A-Za-z0-9._/:@-] starting "
                            "with a letter or digit, not a digest",
                            name);
            return false;
        }
        job->name = strdup(name);
    }
    const char *platform = api_req_query(req, "platform");
    if (platform) {
        struct err err = {0};
        if (oci_platform_parse(platform, &job->platform, &err) < 0) {
            api_reply_error(req, 400, "bad_request", "platform %s: %s", platform, err.msg);
            return false;
        }
        job->has_platform = true;
    }
    return true;
}

static struct import_job *
import_job_new(struct api_req *req)
{
    struct import_job *job = calloc(1, sizeof(*job));
    if (!job) {
        api_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    job->d = api_daemon(req->api);
    job->ndjson = accepts_ndjson(req);
    if (!parse_import_query(req, job)) {
        free(job->name);
        free(job);
        return NULL;
    }
    if (job->ndjson) {
        job->progress = bpipe_new(job->d->loop, PROGRESS_PIPE_BYTES, progress_notify, job);
        if (!job->progress) {
            free(job->name);
            free(job);
            api_reply_error(req, 500, "internal", "out of memory");
            return NULL;
        }
    }
    api_req_weak_ref(req, &job->req);
    req->ctx = job;
    req->ctx_free = import_req_free;
    req->on_shutdown = import_on_shutdown;
    return job;
}

enum body_mode
images_post_begin(struct api_req *req)
{
    const char *ct = api_req_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && strncasecmp(ct, "application/json", 16) == 0)
        return BODY_JSON;
    static const char *const stream_types[] = {"application/x-tar",
                                               "application/tar",
                                               "application/gzip",
                                               "application/x-gzip",
                                               "application/zstd",
                                               "application/octet-stream",
                                               NULL};
    bool ok = ct == NULL;
    for (const char *const *t = stream_types; ct && *t; t++)
        if (strncasecmp(ct, *t, strlen(*t)) == 0)
            ok = true;
    if (!ok) {
        api_reply_error(req, 415, "unsupported_media_type",
                        "Content-Type %s: send application/x-tar (optionally gzip or zstd "
                        "compressed) or application/json with a source",
                        ct);
        return BODY_NONE;
    }
    if (store_unavailable(req))
        return BODY_NONE;
    struct import_job *job = import_job_new(req);
    if (!job)
        return BODY_NONE;
    job->upload = bpipe_new(job->d->loop, UPLOAD_PIPE_BYTES, upload_room, job);
    if (!job->upload) {
        api_reply_error(req, 500, "internal", "out of memory");
        return BODY_NONE;
    }
    req->stream_data = import_upload_data;
    import_start(job);
    return BODY_STREAM;
}

static void
images_post_json(struct api_req *req)
{
    struct err err = {0};
    json_object *body = NULL;
    json_object *source = NULL;
    const char *layout = NULL, *volume = NULL, *path = NULL;
    static const char *const top[] = {"source", NULL};
    static const char *const src_fields[] = {"layout", "volume", "path", NULL};
    if (api_req_body_json(req, false, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", top, &err) < 0 ||
        jsonutil_get_object(body, "", "source", true, &source, &err) < 0 ||
        jsonutil_check_fields(source, "source", src_fields, &err) < 0 ||
        jsonutil_get_string(source, "source", "layout", false, &layout, &err) < 0 ||
        jsonutil_get_string(source, "source", "volume", false, &volume, &err) < 0 ||
        jsonutil_get_string(source, "source", "path", false, &path, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    if (!layout == !volume) {
        api_reply_error(req, 400, "bad_request",
                        "field \"source\": give either \"layout\" (a directory on the host) "
                        "or \"volume\" (with an optional \"path\" inside it)");
        json_object_put(body);
        return;
    }
    if (layout && path) {
        api_reply_error(req, 400, "bad_request",
                        "field \"source.path\": only with \"source.volume\"");
        json_object_put(body);
        return;
    }
    if (layout && layout[0] != '/') {
        api_reply_error(req, 400, "bad_request",
                        "field \"source.layout\": %s is not an absolute path", layout);
        json_object_put(body);
        return;
    }
    if (store_unavailable(req)) {
        json_object_put(body);
        return;
    }
    struct import_job *job = import_job_new(req);
    if (!job) {
        json_object_put(body);
        return;
    }
    if (layout) {
        job->layout_dir = strdup(layout);
    } else {
        job->volume = strdup(volume);
        job->volume_path = strdup(path ? path : "/");
    }
    json_object_put(body);
    job->upload_done = true;
    if (job->ndjson)
        maybe_start_stream(job);
    else
        api_req_suspend(req);
    import_start(job);
}

void
images_post(struct api_req *req)
{
    if (req->body_mode == BODY_JSON)
        images_post_json(req);
    /* BODY_STREAM: everything happens in images_post_begin and the
     * stream callbacks. */
}

/* ---- list, get, delete, prune --------------------------------------------- */

enum images_op { OP_LIST, OP_GET, OP_DELETE, OP_PRUNE };

struct images_job {
    struct api_req *req; /* weak */
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
    char digest[DIGEST_STR_LEN];
    bool image_removed;
    char **removed;
    size_t n_removed;
    struct gc_result gc;
};

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
        j->rc = meta_image_get(m, j->ref, &j->image, &j->err);
        break;
    case OP_DELETE:
        j->rc = meta_image_delete(m, j->ref, j->digest, &j->image_removed, &j->err);
        if (j->rc == 0 && j->image_removed) {
            struct err gerr = {0};
            if (gc_run(j->st->blobs, m, j->st->root, &j->gc, &gerr) < 0)
                log_warn("garbage collection after deleting %s: %s", j->digest, gerr.msg);
        }
        break;
    case OP_PRUNE:
        j->rc = meta_prune_images(m, j->unused_for_s, j->keep_bytes, (int64_t)time(NULL),
                                  &j->removed, &j->n_removed, &j->err);
        if (j->rc == 0)
            j->rc = gc_run(j->st->blobs, m, j->st->root, &j->gc, &j->err);
        break;
    }
}

static json_object *
gc_to_json(const struct gc_result *gc)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "blobs_removed", json_object_new_int64((int64_t)gc->blobs_removed));
    json_object_object_add(o, "snapshots_removed",
                           json_object_new_int64((int64_t)gc->snapshots_removed));
    json_object_object_add(o, "snapshots_busy", json_object_new_int64((int64_t)gc->snapshots_busy));
    return o;
}

static void
images_done(void *ctx, bool cancelled)
{
    struct images_job *j = ctx;
    struct api_req *req = j->req;
    if (req) {
        req->weak_ref = NULL;
        if (cancelled) {
            api_reply_error(req, 503, "unavailable", "the daemon is shutting down");
        } else if (j->rc < 0) {
            api_reply_err(req, &j->err);
        } else {
            json_object *body = json_object_new_object();
            switch (j->op) {
            case OP_LIST: {
                json_object *arr = json_object_new_array();
                for (size_t i = 0; i < j->n; i++)
                    json_object_array_add(arr, image_to_json(j->list[i]));
                json_object_object_add(body, "images", arr);
                break;
            }
            case OP_GET:
                json_object_put(body);
                body = image_to_json(j->image);
                break;
            case OP_DELETE:
                json_object_object_add(body, "digest", json_object_new_string(j->digest));
                json_object_object_add(body, "image_removed",
                                       json_object_new_boolean(j->image_removed));
                if (!j->image_removed)
                    json_object_object_add(body, "name_removed", json_object_new_string(j->ref));
                json_object_object_add(
                    body, "freed_bytes",
                    json_object_new_int64(
                        (int64_t)(j->gc.blob_bytes_freed + j->gc.snapshot_bytes_freed)));
                json_object_object_add(body, "gc", gc_to_json(&j->gc));
                break;
            case OP_PRUNE: {
                json_object *arr = json_object_new_array();
                for (size_t i = 0; i < j->n_removed; i++)
                    json_object_array_add(arr, json_object_new_string(j->removed[i]));
                json_object_object_add(body, "removed", arr);
                json_object_object_add(
                    body, "freed_bytes",
                    json_object_new_int64(
                        (int64_t)(j->gc.blob_bytes_freed + j->gc.snapshot_bytes_freed)));
                json_object_object_add(body, "gc", gc_to_json(&j->gc));
                break;
            }
            }
            api_reply_json(req, 200, body);
        }
        api_req_resume(req);
    }
    meta_image_list_free(j->list, j->n);
    meta_image_free(j->image);
    for (size_t i = 0; i < j->n_removed; i++)
        free(j->removed[i]);
    free(j->removed);
    free(j->ref);
    free(j);
}

static void
images_submit(struct api_req *req, struct images_job *j)
{
    j->st = api_daemon(req->api)->store;
    if (api_req_run_job(req, &j->req, "images", images_work, images_done, j) < 0) {
        free(j->ref);
        free(j);
    }
}

static struct images_job *
images_job_new(struct api_req *req, enum images_op op)
{
    if (store_unavailable(req))
        return NULL;
    struct images_job *j = calloc(1, sizeof(*j));
    if (!j) {
        api_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    j->op = op;
    const char *ref = api_req_param(req, "ref");
    if (ref && !(j->ref = strdup(ref))) {
        free(j);
        api_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    return j;
}

void
images_list(struct api_req *req)
{
    struct images_job *j = images_job_new(req, OP_LIST);
    if (j)
        images_submit(req, j);
}

void
images_get(struct api_req *req)
{
    struct images_job *j = images_job_new(req, OP_GET);
    if (j)
        images_submit(req, j);
}

void
images_delete(struct api_req *req)
{
    struct images_job *j = images_job_new(req, OP_DELETE);
    if (j)
        images_submit(req, j);
}

void
images_prune(struct api_req *req)
{
    struct err err = {0};
    json_object *body = NULL;
    static const char *const fields[] = {"unused_for_s", "keep_bytes", NULL};
    int64_t unused = -1, keep = -1;
    int has_unused = 0, has_keep = 0;
    if (api_req_body_json(req, true, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0 ||
        (has_unused = jsonutil_get_int64(body, "", "unused_for_s", false, &unused, &err)) < 0 ||
        (has_keep = jsonutil_get_int64(body, "", "keep_bytes", false, &keep, &err)) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    json_object_put(body);
    if ((has_unused && unused < 0) || (has_keep && keep < 0)) {
        api_reply_error(req, 400, "bad_request", "field \"%s\": must not be negative",
                        has_unused && unused < 0 ? "unused_for_s" : "keep_bytes");
        return;
    }
    struct images_job *j = images_job_new(req, OP_PRUNE);
    if (!j)
        return;
    j->unused_for_s = unused;
    j->keep_bytes = keep;
    images_submit(req, j);
}
