/*
 * /v1/volumes: create (with copy-on-write children), list with property
 * filters, get, patch, delete, and tar streams in (PUT .../files, the
 * body fed into the service's upload pipe) and out (GET .../files, the
 * service's tar moved into a streamed response as fast as the client
 * reads it). Each handler parses the request, calls one volume service
 * (daemon/svc_volumes.h) and renders what it reports. Loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/bodies.h"
#include "api/containers.h"
#include "api/handlers.h"
#include "api/request.h"
#include "api/stream.h"
#include "api/tar_download.h"
#include "api/upload.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "daemon/svc_volumes.h"
#include "jsonutil/jsonutil.h"

static json_object *
volume_to_json(const struct vol_info *v)
{
    const struct volume_rec *r = v->rec;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "handle", json_object_new_string(r->handle));
    json_object_object_add(o, "path", json_object_new_string(v->path));
    if (r->parent)
        json_object_object_add(o, "parent", json_object_new_string(r->parent));
    json_object *props = json_object_new_object();
    for (size_t i = 0; i < r->n_props; i++)
        json_object_object_add(props, r->props[i].key, json_object_new_string(r->props[i].value));
    json_object_object_add(o, "properties", props);
    json_object_object_add(o, "size_bytes", json_object_new_int64(v->size_bytes));
    json_object_object_add(o, "created_at", api_json_time_s(r->created_at));
    if (r->expires_at) {
        json_object_object_add(o, "expires_at", api_json_time_s(r->expires_at));
        json_object_object_add(o, "ttl_s", json_object_new_int64(r->ttl_s));
    }
    json_object_object_add(o, "privileged", json_object_new_boolean(r->privileged));
    json_object_object_add(o, "containers", json_object_new_int64(r->mounts));
    json_object_object_add(o, "children", json_object_new_int64(r->children));
    return o;
}

/* ---- create, list, get, patch, delete --------------------------------------- */

static void
one_cb(struct api_req *req, unsigned status, const struct err *err, const struct vol_info *v)
{
    if (!api_req_call_failed(req, err))
        api_reply_json_resume(req, status, volume_to_json(v));
}

static void
created_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    one_cb(arg, 201, err, v);
}

static void
got_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    one_cb(arg, 200, err, v);
}

static void
listed_cb(void *arg, const struct err *err, const struct vol_info *vs, size_t n)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(arr, volume_to_json(&vs[i]));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "volumes", arr);
    api_reply_json_resume(req, 200, body);
}

static void
deleted_cb(void *arg, const struct err *err, char *const *deleted, size_t n)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(arr, json_object_new_string(deleted[i]));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "deleted", arr);
    api_reply_json_resume(req, 200, body);
}

/* A properties object into b (borrowing its strings); null values only when allow_null. */
static int
parse_props(json_object *o, bool allow_null, struct api_body_volume *b, struct err *err)
{
    if (!o)
        return 0;
    size_t n = (size_t)json_object_object_length(o);
    if (n > VOL_PROPS_MAX)
        return err_set(err, EINVAL, "field \"properties\": %zu properties, over the limit of %d", n,
                       VOL_PROPS_MAX);
    json_object_object_foreach(o, key, val)
    {
        bool is_null = val == NULL || json_object_is_type(val, json_type_null);
        if (!(is_null && allow_null) && !json_object_is_type(val, json_type_string))
            return err_set(err, EINVAL, "field \"properties.%s\": expected a string%s, got %s", key,
                           allow_null ? " or null" : "", jsonutil_type_article(val));
        b->props[b->nprops].key = key;
        b->props[b->nprops].value = is_null ? NULL : (char *)json_object_get_string(val);
        b->nprops++;
    }
    return 0;
}

void
api_body_volume_clear(struct api_body_volume *b)
{
    json_object_put(b->json);
    b->json = NULL;
}

int
api_body_volume(const char *text, size_t len, bool patch, struct api_body_volume *out,
                struct err *err)
{
    static const char *const create_fields[] = {"handle", "parent",     "properties",
                                                "ttl_s",  "privileged", NULL};
    static const char *const patch_fields[] = {"properties", "ttl_s", NULL};
    json_object *props = NULL;
    struct volume_create_opts *o = &out->opts;
    int has_ttl = 0;
    memset(out, 0, sizeof(*out));
    int rc = 0;
    if (api_body_json(text, len, !patch, &out->json, err) < 0 ||
        jsonutil_check_fields(out->json, "", patch ? patch_fields : create_fields, err) < 0 ||
        (!patch &&
         (jsonutil_get_string(out->json, "", "handle", false, &o->handle, err) < 0 ||
          jsonutil_get_string(out->json, "", "parent", false, &o->parent, err) < 0 ||
          jsonutil_get_bool(out->json, "", "privileged", false, &o->privileged, err) < 0)) ||
        jsonutil_get_object(out->json, "", "properties", false, &props, err) < 0 ||
        (has_ttl = jsonutil_get_int64(out->json, "", "ttl_s", false, &o->ttl_s, err)) < 0 ||
        parse_props(props, patch, out, err) < 0)
        rc = -EINVAL;
    if (rc == 0 && patch && has_ttl && o->ttl_s < 0)
        rc = err_set(err, EINVAL, "field \"ttl_s\": must not be negative");
    if (rc < 0) {
        api_body_volume_clear(out);
        return rc;
    }
    if (patch && !has_ttl)
        o->ttl_s = -1;
    o->props = out->props;
    o->n_props = out->nprops;
    return 0;
}

void
volumes_create(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    struct api_body_volume *b = malloc(sizeof(*b));
    int rc = b ? api_body_volume(req->body, req->body_len, false, b, &err)
               : err_set(&err, ENOMEM, "out of memory");
    if (rc == 0) {
        rc = vol_create(api_daemon(req->api), &b->opts, created_cb, req, &call, &err);
        api_body_volume_clear(b);
    }
    free(b);
    api_req_wait_or_fail(req, rc, call, &err);
}

/* The property.KEY=VALUE filters of a list. */
struct props {
    struct volume_prop v[VOL_PROPS_MAX + 1];
    size_t n;
};

static enum MHD_Result
filter_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct props *p = cls;
    if (strncmp(key, "property.", 9) != 0 || !key[9])
        return MHD_YES;
    if (p->n > VOL_PROPS_MAX)
        return MHD_NO;
    p->v[p->n].key = (char *)key + 9;
    p->v[p->n].value = (char *)(value ? value : "");
    p->n++;
    return MHD_YES;
}

void
volumes_list(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    struct props *p = calloc(1, sizeof(*p));
    if (!p) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, filter_cb, p);
    int rc = vol_list(api_daemon(req->api), p->v, p->n, listed_cb, req, &call, &err);
    free(p);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
volumes_get(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = vol_get(api_daemon(req->api), api_req_param(req, "handle"), got_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
volumes_patch(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    struct api_body_volume *b = malloc(sizeof(*b));
    int rc = b ? api_body_volume(req->body, req->body_len, true, b, &err)
               : err_set(&err, ENOMEM, "out of memory");
    if (rc == 0) {
        rc = vol_patch(api_daemon(req->api), api_req_param(req, "handle"), b->props, b->nprops,
                       b->opts.ttl_s, got_cb, req, &call, &err);
        api_body_volume_clear(b);
    }
    free(b);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
volumes_delete(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    const char *force = api_req_query(req, "force");
    int rc = 0;
    if (force && strcmp(force, "0") != 0 && strcmp(force, "1") != 0 && strcmp(force, "true") != 0 &&
        strcmp(force, "false") != 0)
        rc = err_set(&err, EINVAL, "force=%s: expected 1 or 0", force);
    if (rc == 0)
        rc = vol_delete(api_daemon(req->api), api_req_param(req, "handle"),
                        force && (strcmp(force, "1") == 0 || strcmp(force, "true") == 0),
                        deleted_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

/* ?path= as the service takes it ("/" and below); EINVAL when bad. Caller frees. */
static int
files_path(struct api_req *req, char **out, struct err *err)
{
    const char *p = api_req_query(req, "path");
    char *rel = NULL;
    if (volume_path_clean(p ? p : "/", &rel, err) < 0)
        return err_wrap(err, "query \"path\"");
    int n = asprintf(out, "/%s", rel);
    free(rel);
    return n < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
}

/* ---- tar in ----------------------------------------------------------------- */

struct up_reply {
    struct api_req *req;
    struct volume_stream_in *op;
    char *handle, *path;
};

static void
up_room(void *arg)
{
    struct up_reply *u = arg;
    api_upload_room(u->req);
}

static void
up_done(void *arg, const struct err *err, const struct volume_tar_in_result *res)
{
    struct up_reply *u = arg;
    if (err) {
        api_reply_err_resume(u->req, err);
        return;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "handle", json_object_new_string(u->handle));
    json_object_object_add(o, "path", json_object_new_string(u->path));
    json_object_object_add(o, "entries", json_object_new_int64((int64_t)res->entries));
    json_object_object_add(o, "tar_bytes", json_object_new_int64((int64_t)res->bytes));
    api_reply_json_resume(u->req, 200, o);
}

static void
up_reply_free(void *ctx)
{
    struct up_reply *u = ctx;
    volume_stream_in_detach(u->op);
    free(u->handle);
    free(u->path);
    free(u);
}

static void
up_on_shutdown(struct api_req *req)
{
    struct up_reply *u = req->ctx;
    if (u && u->op)
        bpipe_abort(volume_stream_in_pipe(u->op), ECANCELED);
}

enum body_mode
volumes_files_put_begin(struct api_req *req)
{
    struct err err = {0};
    const char *ce = api_req_header(req, MHD_HTTP_HEADER_CONTENT_ENCODING);
    const char *enc = NULL;
    if (ce && (strcasecmp(ce, "gzip") == 0 || strcasecmp(ce, "x-gzip") == 0))
        enc = "gzip";
    else if (ce && strcasecmp(ce, "zstd") == 0)
        enc = "zstd";
    else if (ce && strcasecmp(ce, "identity") != 0) {
        api_reply_fail(req, ERR_MEDIA_TYPE, "Content-Encoding %s: send gzip, zstd or none", ce);
        return BODY_NONE;
    }
    struct up_reply *u = calloc(1, sizeof(*u));
    if (!u) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return BODY_NONE;
    }
    u->req = req;
    const char *handle = api_req_param(req, "handle");
    int rc = files_path(req, &u->path, &err);
    if (rc == 0 && !(u->handle = strdup(handle)))
        rc = err_set(&err, ENOMEM, "out of memory");
    if (rc == 0)
        rc = volume_stream_in(api_daemon(req->api), handle, u->path, enc, up_room, up_done, u,
                              &u->op, &err);
    if (rc < 0) {
        up_reply_free(u);
        api_reply_err(req, &err);
        return BODY_NONE;
    }
    req->ctx = u;
    req->ctx_free = up_reply_free;
    req->on_shutdown = up_on_shutdown;
    api_upload_attach(req, volume_stream_in_pipe(u->op), NULL);
    return BODY_STREAM;
}

void
volumes_files_put(struct api_req *req)
{
    /* Everything happens in volumes_files_put_begin and the upload. */
}

/* ---- tar out ---------------------------------------------------------------- */

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
    struct err err = {0};
    char *path = NULL;
    enum volume_compression comp =
        pick_compression(api_req_header(req, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    struct api_tar_dl *d = api_tar_dl_new(req, comp, NULL);
    struct volume_stream_out *op = NULL;
    int rc = d ? files_path(req, &path, &err) : err_set(&err, ENOMEM, "out of memory");
    if (rc == 0)
        rc = volume_stream_out(api_daemon(req->api), api_req_param(req, "handle"), path, comp,
                               api_tar_dl_notify, d, &op, &err);
    free(path);
    if (rc < 0) {
        api_tar_dl_free(d);
        api_reply_err(req, &err);
        return;
    }
    api_tar_dl_wait(d, op);
}
