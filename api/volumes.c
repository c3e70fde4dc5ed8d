/*
 * /v1/volumes: create (with copy-on-write children), list, get, patch,
 * delete, and tar streams in (PUT .../files, an upload through a bounded
 * pipe into a pool job, as api/images.c does) and out (GET .../files, a
 * pool job writing the tar into a bounded pipe that the loop moves into a
 * streamed response as fast as the client reads it). Loop thread, except
 * the *_work functions, which run on the pool and call store/ only.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api.h"
#include "api/handlers.h"
#include "jsonutil/jsonutil.h"
#include "api/request.h"
#include "api/stream.h"
#include "common/log.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "daemon/volume_ttl.h"
#include "store/store.h"
#include "store/volume.h"

#define UPLOAD_PIPE_BYTES (1 << 20)
#define DOWNLOAD_PIPE_BYTES (1 << 20)
/* The response buffer is topped up from the pipe while below this. */
#define DOWNLOAD_STREAM_LOW (256 << 10)
#define MAX_PROPS 256

static bool
store_unavailable(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    if (d->store)
        return false;
    api_reply_error(req, 503, "unavailable", "the store is not available: %s", d->store_error);
    return true;
}

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

static json_object *
volume_to_json(struct daemon *d, const struct volume_rec *v, int64_t size)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "handle", json_object_new_string(v->handle));
    char *path = volume_data_path(d->store->volumes, v->handle);
    json_object_object_add(o, "path", json_object_new_string(path ? path : ""));
    free(path);
    if (v->parent)
        json_object_object_add(o, "parent", json_object_new_string(v->parent));
    json_object *props = json_object_new_object();
    for (size_t i = 0; i < v->n_props; i++)
        json_object_object_add(props, v->props[i].key, json_object_new_string(v->props[i].value));
    json_object_object_add(o, "properties", props);
    json_object_object_add(o, "size_bytes", json_object_new_int64(size));
    json_object_object_add(o, "created_at", json_time(v->created_at));
    if (v->expires_at) {
        json_object_object_add(o, "expires_at", json_time(v->expires_at));
        json_object_object_add(o, "ttl_s", json_object_new_int64(v->ttl_s));
    }
    json_object_object_add(o, "privileged", json_object_new_boolean(v->privileged));
    json_object_object_add(o, "containers", json_object_new_int64(v->mounts));
    json_object_object_add(o, "children", json_object_new_int64(v->children));
    return o;
}

/* ---- create, list, get, patch, delete ------------------------------------- */

enum vol_op { VOL_CREATE, VOL_LIST, VOL_GET, VOL_PATCH, VOL_DELETE };

struct vol_job {
    struct api_req *req; /* weak */
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
    struct volume_rec *rec;
    int64_t size;
    struct volume_rec **list;
    int64_t *sizes;
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
    volume_rec_free(j->rec);
    volume_rec_list_free(j->list, j->n);
    free(j->sizes);
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

static void
vol_work(void *ctx)
{
    struct vol_job *j = ctx;
    struct store *st = j->d->store;
    struct volume_store *vs = st->volumes;
    struct err serr = {0};
    switch (j->op) {
    case VOL_CREATE: {
        struct volume_create_opts o = {.handle = j->handle,
                                       .parent = j->parent,
                                       .props = j->props,
                                       .n_props = j->n_props,
                                       .ttl_s = j->ttl_s,
                                       .privileged = j->privileged};
        j->rc = volume_create(vs, &o, &j->rec, &j->err);
        if (j->rc == 0 && volume_size(vs, j->rec->handle, &j->size, &serr) < 0)
            j->size = 0;
        break;
    }
    case VOL_GET:
    case VOL_PATCH:
        if (j->op == VOL_PATCH)
            j->rc = vmeta_patch(st->meta, j->handle, j->props, j->n_props, j->ttl_s,
                                (int64_t)time(NULL), &j->err);
        if (j->rc == 0)
            j->rc = vmeta_get(st->meta, j->handle, &j->rec, &j->err);
        if (j->rc == 0 && volume_size(vs, j->handle, &j->size, &serr) < 0)
            j->size = 0;
        break;
    case VOL_LIST: {
        struct volume_rec **all = NULL;
        size_t n = 0;
        j->rc = vmeta_list(st->meta, &all, &n, &j->err);
        if (j->rc < 0)
            break;
        j->list = calloc(n ? n : 1, sizeof(*j->list));
        j->sizes = calloc(n ? n : 1, sizeof(*j->sizes));
        for (size_t i = 0; i < n; i++) {
            if (!j->list || !j->sizes || !props_match(all[i], j->props, j->n_props)) {
                volume_rec_free(all[i]);
                continue;
            }
            if (volume_size(vs, all[i]->handle, &j->sizes[j->n], &serr) < 0)
                j->sizes[j->n] = 0;
            j->list[j->n++] = all[i];
        }
        free(all);
        if (!j->list || !j->sizes)
            j->rc = err_set(&j->err, ENOMEM, "list volumes: out of memory");
        break;
    }
    case VOL_DELETE:
        j->rc = volume_delete(vs, j->handle, j->force, &j->deleted, &j->n_deleted, &j->err);
        break;
    }
}

static void
vol_done(void *ctx, bool cancelled)
{
    struct vol_job *j = ctx;
    struct api_req *req = j->req;
    if (j->rc == 0 && j->rec && j->rec->expires_at)
        volume_ttl_hint(j->d, j->rec->expires_at);
    if (req) {
        req->weak_ref = NULL;
        if (cancelled) {
            api_reply_error(req, 503, "unavailable", "the daemon is shutting down");
        } else if (j->rc < 0) {
            api_reply_err(req, &j->err);
        } else if (j->op == VOL_LIST) {
            json_object *arr = json_object_new_array();
            for (size_t i = 0; i < j->n; i++)
                json_object_array_add(arr, volume_to_json(j->d, j->list[i], j->sizes[i]));
            json_object *body = json_object_new_object();
            json_object_object_add(body, "volumes", arr);
            api_reply_json(req, 200, body);
        } else if (j->op == VOL_DELETE) {
            json_object *arr = json_object_new_array();
            for (size_t i = 0; i < j->n_deleted; i++)
                json_object_array_add(arr, json_object_new_string(j->deleted[i]));
            json_object *body = json_object_new_object();
            json_object_object_add(body, "deleted", arr);
            api_reply_json(req, 200, body);
        } else {
            api_reply_json(req, j->op == VOL_CREATE ? 201 : 200,
                           volume_to_json(j->d, j->rec, j->size));
        }
        api_req_resume(req);
    }
    vol_job_free(j);
}

static struct vol_job *
vol_job_new(struct api_req *req, enum vol_op op)
{
    if (store_unavailable(req))
        return NULL;
    struct vol_job *j = calloc(1, sizeof(*j));
    if (!j) {
        api_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    j->d = api_daemon(req->api);
    j->op = op;
    j->ttl_s = -1;
    const char *h = api_req_param(req, "handle");
    if (h && !(j->handle = strdup(h))) {
        free(j);
        api_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    return j;
}

static void
vol_submit(struct api_req *req, struct vol_job *j)
{
    if (api_req_run_job(req, &j->req, "volumes", vol_work, vol_done, j) < 0)
        vol_job_free(j);
}

/* Parses a properties object; null values only when allow_null. */
static int
parse_props(json_object *o, bool allow_null, struct vol_job *j, struct err *err)
{
    if (!o)
        return 0;
    size_t n = (size_t)json_object_object_length(o);
    if (n > MAX_PROPS)
        return err_set(err, EINVAL, "field \"properties\": %zu properties, over the limit of %d", n,
                       MAX_PROPS);
    j->props = calloc(n ? n : 1, sizeof(*j->props));
    if (!j->props)
        return err_set(err, ENOMEM, "out of memory");
    json_object_object_foreach(o, key, val)
    {
        bool is_null = val == NULL || json_object_is_type(val, json_type_null);
        if (!(is_null && allow_null) && !json_object_is_type(val, json_type_string))
            return err_set(err, EINVAL, "field \"properties.%s\": expected a string%s, got %s", key,
                           allow_null ? " or null" : "", jsonutil_type_article(val));
        if (!*key || strlen(key) > VOLUME_PROP_MAX ||
            (!is_null && strlen(json_object_get_string(val)) > VOLUME_PROP_MAX))
            return err_set(err, EINVAL,
                           "field \"properties.%s\": keys must be 1-%d bytes, values at most %d",
                           key, VOLUME_PROP_MAX, VOLUME_PROP_MAX);
        struct volume_prop *p = &j->props[j->n_props++];
        p->key = strdup(key);
        p->value = is_null ? NULL : strdup(json_object_get_string(val));
    }
    return 0;
}

void
volumes_create(struct api_req *req)
{
    struct err err = {0};
    json_object *body = NULL, *props = NULL;
    const char *handle = NULL, *parent = NULL;
    int64_t ttl = 0;
    bool priv = false;
    static const char *const fields[] = {"handle", "parent",     "properties",
                                         "ttl_s",  "privileged", NULL};
    if (api_req_body_json(req, true, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0 ||
        jsonutil_get_string(body, "", "handle", false, &handle, &err) < 0 ||
        jsonutil_get_string(body, "", "parent", false, &parent, &err) < 0 ||
        jsonutil_get_object(body, "", "properties", false, &props, &err) < 0 ||
        jsonutil_get_int64(body, "", "ttl_s", false, &ttl, &err) < 0 ||
        jsonutil_get_bool(body, "", "privileged", false, &priv, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    if (handle && !volume_handle_valid(handle)) {
        api_reply_error(req, 400, "bad_request",
                        "field \"handle\": %s: expected 1-128 characters of [A-Za-z0-9_.-], not "
                        "starting with a dot",
                        handle);
    } else if (parent && !volume_handle_valid(parent)) {
        api_reply_error(req, 400, "bad_request", "field \"parent\": %s is not a volume handle",
                        parent);
    } else if (ttl < 0) {
        api_reply_error(req, 400, "bad_request", "field \"ttl_s\": must not be negative");
    } else {
        struct vol_job *j = vol_job_new(req, VOL_CREATE);
        if (j) {
            j->handle = handle ? strdup(handle) : NULL;
            j->parent = parent ? strdup(parent) : NULL;
            j->ttl_s = ttl;
            j->privileged = priv;
            if (parse_props(props, false, j, &err) < 0) {
                api_reply_err(req, &err);
                vol_job_free(j);
            } else {
                vol_submit(req, j);
            }
        }
    }
    json_object_put(body);
}

struct filter_ctx {
    struct vol_job *j;
    bool bad;
};

static enum MHD_Result
filter_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct filter_ctx *c = cls;
    if (strncmp(key, "property.", 9) != 0 || !key[9])
        return MHD_YES;
    if (c->j->n_props >= MAX_PROPS) {
        c->bad = true;
        return MHD_NO;
    }
    struct volume_prop *np = realloc(c->j->props, (c->j->n_props + 1) * sizeof(*np));
    if (!np) {
        c->bad = true;
        return MHD_NO;
    }
    c->j->props = np;
    np[c->j->n_props].key = strdup(key + 9);
    np[c->j->n_props].value = strdup(value ? value : "");
    c->j->n_props++;
    return MHD_YES;
}

void
volumes_list(struct api_req *req)
{
    struct vol_job *j = vol_job_new(req, VOL_LIST);
    if (!j)
        return;
    struct filter_ctx c = {j, false};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, filter_cb, &c);
    if (c.bad) {
        vol_job_free(j);
        api_reply_error(req, 400, "bad_request", "too many property filters (at most %d)",
                        MAX_PROPS);
        return;
    }
    vol_submit(req, j);
}

static bool
check_handle(struct api_req *req)
{
    const char *h = api_req_param(req, "handle");
    if (volume_handle_valid(h))
        return true;
    api_reply_error(req, 400, "bad_request",
                    "handle %s: expected 1-128 characters of [A-Za-z0-9_.-], not starting with "
                    "a dot",
                    h ? h : "");
    return false;
}

void
volumes_get(struct api_req *req)
{
    if (!check_handle(req))
        return;
    struct vol_job *j = vol_job_new(req, VOL_GET);
    if (j)
        vol_submit(req, j);
}

void
volumes_patch(struct api_req *req)
{
    if (!check_handle(req))
        return;
    struct err err = {0};
    json_object *body = NULL, *props = NULL;
    int64_t ttl = -1;
    int has_ttl = 0;
    static const char *const fields[] = {"properties", "ttl_s", NULL};
    if (api_req_body_json(req, false, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0 ||
        jsonutil_get_object(body, "", "properties", false, &props, &err) < 0 ||
        (has_ttl = jsonutil_get_int64(body, "", "ttl_s", false, &ttl, &err)) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    if (has_ttl && ttl < 0) {
        json_object_put(body);
        api_reply_error(req, 400, "bad_request", "field \"ttl_s\": must not be negative");
        return;
    }
    struct vol_job *j = vol_job_new(req, VOL_PATCH);
    if (j) {
        j->ttl_s = has_ttl ? ttl : -1;
        if (parse_props(props, true, j, &err) < 0) {
            api_reply_err(req, &err);
            vol_job_free(j);
        } else {
            vol_submit(req, j);
        }
    }
    json_object_put(body);
}

void
volumes_delete(struct api_req *req)
{
    if (!check_handle(req))
        return;
    const char *force = api_req_query(req, "force");
    if (force && strcmp(force, "0") != 0 && strcmp(force, "1") != 0 && strcmp(force, "true") != 0 &&
        strcmp(force, "false") != 0) {
        api_reply_error(req, 400, "bad_request", "force=%s: expected 1 or 0", force);
        return;
    }
    struct vol_job *j = vol_job_new(req, VOL_DELETE);
    if (!j)
        return;
    j->force = force && (strcmp(force, "1") == 0 || strcmp(force, "true") == 0);
    vol_submit(req, j);
}

/* ---- tar in --------------------------------------------------------------- */

struct up_job {
    struct api_req *req; /* weak */
    struct daemon *d;
    char *handle, *path, *encoding;
    struct bpipe *upload;
    bool upload_done, job_done;
    int rc;
    struct err err;
    struct volume_tar_in_result res;
};

static void
up_job_free(struct up_job *j)
{
    if (j->req) {
        j->req->weak_ref = NULL;
        j->req->ctx = NULL;
        j->req->ctx_free = NULL;
    }
    /* The job is over (or never ran), so both sides release here. */
    if (j->upload) {
        bpipe_release_job(j->upload);
        bpipe_release_loop(j->upload);
    }
    free(j->handle);
    free(j->path);
    free(j->encoding);
    free(j);
}

static ssize_t
up_read(void *ctx, void *buf, size_t len)
{
    return bpipe_read(ctx, buf, len);
}

static void
up_work(void *ctx)
{
    struct up_job *j = ctx;
    struct volume_tar_in in = {.read = up_read, .ctx = j->upload, .encoding = j->encoding};
    j->rc = volume_tar_import(j->d->store->volumes, j->handle, j->path, &in, &j->res, &j->err);
    if (j->rc < 0)
        bpipe_abort(j->upload, ECANCELED); /* the rest of the body is dropped */
}

static void
up_reply(struct up_job *j)
{
    struct api_req *req = j->req;
    if (!req)
        return;
    if (j->rc == 0) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "handle", json_object_new_string(j->handle));
        json_object_object_add(o, "path", json_object_new_string(j->path));
        json_object_object_add(o, "entries", json_object_new_int64((int64_t)j->res.entries));
        json_object_object_add(o, "tar_bytes", json_object_new_int64((int64_t)j->res.bytes));
        api_reply_json(req, 200, o);
    } else {
        api_reply_err(req, &j->err);
    }
    api_req_resume(req);
}

static void
up_done(void *ctx, bool cancelled)
{
    struct up_job *j = ctx;
    j->job_done = true;
    if (cancelled && j->rc == 0) {
        j->rc = -ECANCELED;
        err_set(&j->err, ECANCELED, "upload: the daemon is shutting down");
        bpipe_abort(j->upload, ECANCELED);
    }
    if (j->rc < 0)
        log_info("volume %s: upload failed: %s", j->handle, j->err.msg);
    up_reply(j);
    if (!j->req || j->upload_done)
        up_job_free(j);
    /* else: freed when the body ends or the request goes away. */
}

static void
up_req_free(void *ctx)
{
    struct up_job *j = ctx;
    j->req = NULL;
    bpipe_abort(j->upload, ECANCELED);
    if (j->job_done)
        up_job_free(j);
}

static void
up_on_shutdown(struct api_req *req)
{
    struct up_job *j = req->ctx;
    if (j)
        bpipe_abort(j->upload, ECANCELED);
}

static void
up_room(void *ctx)
{
    struct up_job *j = ctx;
    if (j->req && j->req->suspended && !j->req->response && !j->upload_done)
        api_req_resume(j->req);
}

static size_t
up_data(struct api_req *req, const char *data, size_t len)
{
    struct up_job *j = req->ctx;
    if (!j)
        return len;
    if (len == 0) {
        j->upload_done = true;
        bpipe_close_write(j->upload);
        if (j->job_done) {
            up_job_free(j);
            return 0;
        }
        api_req_suspend(req);
        return 0;
    }
    if (j->job_done || bpipe_aborted(j->upload))
        return len;
    size_t took = bpipe_write_nb(j->upload, data, len);
    if (took < len)
        api_req_suspend(req); /* resumed by up_room */
    return took;
}

/* Checks ?path=; replies 400 and returns NULL when bad. Caller frees. */
static char *
files_path(struct api_req *req)
{
    const char *p = api_req_query(req, "path");
    struct err err = {0};
    char *rel = NULL;
    if (volume_path_clean(p ? p : "/", &rel, &err) < 0) {
        api_reply_error(req, 400, "bad_request", "query \"path\": %s", err.msg);
        return NULL;
    }
    char *abs = NULL;
    if (asprintf(&abs, "/%s", rel) < 0)
        abs = NULL;
    free(rel);
    if (!abs)
        api_reply_error(req, 500, "internal", "out of memory");
    return abs;
}

enum body_mode
volumes_files_put_begin(struct api_req *req)
{
    if (!check_handle(req) || store_unavailable(req))
        return BODY_NONE;
    const char *ce = api_req_header(req, MHD_HTTP_HEADER_CONTENT_ENCODING);
    const char *enc = NULL;
    if (ce && (strcasecmp(ce, "gzip") == 0 || strcasecmp(ce, "x-gzip") == 0))
        enc = "gzip";
    else if (ce && strcasecmp(ce, "zstd") == 0)
        enc = "zstd";
    else if (ce && strcasecmp(ce, "identity") != 0) {
        api_reply_error(req, 415, "unsupported_media_type",
                        "Content-Encoding %s: send gzip, zstd or none", ce);
        return BODY_NONE;
    }
    char *path = files_path(req);
    if (!path)
        return BODY_NONE;
    struct up_job *j = calloc(1, sizeof(*j));
    if (j) {
        j->d = api_daemon(req->api);
        j->path = path;
        j->handle = strdup(api_req_param(req, "handle"));
        j->encoding = enc ? strdup(enc) : NULL;
        j->upload = bpipe_new(j->d->loop, UPLOAD_PIPE_BYTES, up_room, j);
    }
    if (!j || !j->handle || !j->upload) {
        if (j)
            up_job_free(j);
        else
            free(path);
        api_reply_error(req, 500, "internal", "out of memory");
        return BODY_NONE;
    }
    api_req_weak_ref(req, &j->req);
    req->ctx = j;
    req->ctx_free = up_req_free;
    req->on_shutdown = up_on_shutdown;
    req->stream_data = up_data;
    int rc = job_submit_long(j->d->jobs, "volume.tar_in", up_work, up_done, j);
    if (rc < 0) {
        req->ctx = NULL;
        req->ctx_free = NULL;
        req->stream_data = NULL;
        up_job_free(j);
        api_reply_error(req, 503, "unavailable", "cannot start the upload: %s", strerror(-rc));
        return BODY_NONE;
    }
    return BODY_STREAM;
}

void
volumes_files_put(struct api_req *req)
{
    /* Everything happens in volumes_files_put_begin and the stream callbacks. */
}

/* ---- tar out -------------------------------------------------------------- */

struct dl_job {
    struct api_req *req; /* weak */
    struct daemon *d;
    char *handle, *path;
    enum volume_compression comp;
    struct bpipe *pipe;
    struct api_stream *stream;
    atomic_bool ready; /* the job found the path and is writing */
    bool job_done;
    int rc;
    struct err err;
};

static void
dl_job_free(struct dl_job *j)
{
    if (j->req) {
        j->req->weak_ref = NULL;
        j->req->ctx = NULL;
        j->req->ctx_free = NULL;
    }
    /* The job is over (or never ran), so both sides release here. */
    bpipe_release_job(j->pipe);
    bpipe_release_loop(j->pipe);
    api_stream_release(j->stream);
    free(j->handle);
    free(j->path);
    free(j);
}

static int
dl_write(void *ctx, const void *buf, size_t len)
{
    struct dl_job *j = ctx;
    return bpipe_write(j->pipe, buf, len);
}

static void
dl_ready(void *ctx)
{
    struct dl_job *j = ctx;
    atomic_store(&j->ready, true);
}

static void
dl_work(void *ctx)
{
    struct dl_job *j = ctx;
    struct volume_tar_out out = {
        .write = dl_write, .ready = dl_ready, .ctx = j, .compression = j->comp};
    j->rc = volume_tar_export(j->d->store->volumes, j->handle, j->path, &out, &j->err);
    bpipe_close_job(j->pipe);
}

/* Moves tar bytes from the pipe to the response while the client keeps up. */
static void
dl_pump(struct dl_job *j)
{
    if (!j->stream)
        return;
    char buf[64 * 1024];
    bool eof = false;
    while (api_stream_pending(j->stream) < DOWNLOAD_STREAM_LOW) {
        size_t n = bpipe_read_nb(j->pipe, buf, sizeof(buf), &eof);
        if (n == 0)
            break;
        if (!api_stream_write(j->stream, buf, n))
            break;
    }
    if (j->job_done && (eof || j->rc < 0) && bpipe_buffered(j->pipe) == 0) {
        if (j->rc < 0)
            api_stream_fail(j->stream);
        else
            api_stream_end(j->stream);
    }
}

static void
dl_drained(void *ctx)
{
    dl_pump(ctx);
}

static void
dl_notify(void *ctx)
{
    struct dl_job *j = ctx;
    if (!j->stream && j->req && atomic_load(&j->ready) && !j->req->response) {
        j->stream = api_stream_start(j->req, 200, "application/x-tar");
        if (!j->stream) {
            bpipe_abort(j->pipe, ECANCELED);
            return;
        }
        if (j->req->response && j->comp != VOLUME_COMPRESS_NONE)
            MHD_add_response_header(j->req->response, MHD_HTTP_HEADER_CONTENT_ENCODING,
                                    j->comp == VOLUME_COMPRESS_GZIP ? "gzip" : "zstd");
        api_stream_on_drained(j->stream, dl_drained, j);
    }
    dl_pump(j);
}

static void
dl_done(void *ctx, bool cancelled)
{
    struct dl_job *j = ctx;
    j->job_done = true;
    if (cancelled && j->rc == 0) {
        j->rc = -ECANCELED;
        err_set(&j->err, ECANCELED, "download: the daemon is shutting down");
    }
    if (j->stream) {
        dl_pump(j);
    } else if (j->req) {
        if (j->rc < 0)
            api_reply_err(j->req, &j->err);
        else
            dl_notify(j); /* ready, but no notify ran yet */
        api_req_resume(j->req);
    }
    if (!j->req)
        dl_job_free(j);
    /* else: freed when the request goes away (dl_req_free). */
}

static void
dl_req_free(void *ctx)
{
    struct dl_job *j = ctx;
    j->req = NULL;
    bpipe_abort(j->pipe, ECANCELED); /* stops the job's writes */
    if (j->job_done)
        dl_job_free(j);
}

static void
dl_on_shutdown(struct api_req *req)
{
    struct dl_job *j = req->ctx;
    if (j)
        bpipe_abort(j->pipe, ECANCELED);
}

/* zstd if the client takes it, else gzip, else none (q=0 excludes). */
static enum volume_compression
pick_compression(const char *ae)
{
    bool gz = false, zs = false;
    if (!ae)
        return VOLUME_COMPRESS_NONE;
    char *copy = strdup(ae), *save = NULL;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        size_t n = strcspn(t, " ;");
        const char *q = strstr(t, "q=");
        bool off = q && strtod(q + 2, NULL) <= 0.0;
        if (n == 4 && strncasecmp(t, "zstd", 4) == 0)
            zs = !off;
        else if (n == 4 && strncasecmp(t, "gzip", 4) == 0)
            gz = !off;
    }
    free(copy);
    return zs ? VOLUME_COMPRESS_ZSTD : gz ? VOLUME_COMPRESS_GZIP : VOLUME_COMPRESS_NONE;
}

void
volumes_files_get(struct api_req *req)
{
    if (!check_handle(req) || store_unavailable(req))
        return;
    char *path = files_path(req);
    if (!path)
        return;
    struct dl_job *j = calloc(1, sizeof(*j));
    if (j) {
        j->d = api_daemon(req->api);
        j->path = path;
        j->handle = strdup(api_req_param(req, "handle"));
        j->comp = pick_compression(api_req_header(req, MHD_HTTP_HEADER_ACCEPT_ENCODING));
        j->pipe = bpipe_new(j->d->loop, DOWNLOAD_PIPE_BYTES, dl_notify, j);
    }
    if (!j || !j->handle || !j->pipe) {
        if (j && j->pipe) {
            bpipe_release_job(j->pipe);
            bpipe_release_loop(j->pipe);
        }
        if (j)
            free(j->handle);
        free(j);
        free(path);
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    int rc = job_submit_long(j->d->jobs, "volume.tar_out", dl_work, dl_done, j);
    if (rc < 0) {
        dl_job_free(j);
        api_reply_error(req, 503, "unavailable", "cannot start the download: %s", strerror(-rc));
        return;
    }
    /* The job holds the pipe's other side. */
    api_req_weak_ref(req, &j->req);
    req->ctx = j;
    req->ctx_free = dl_req_free;
    req->on_shutdown = dl_on_shutdown;
    api_req_suspend(req);
}
