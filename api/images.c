/*
 * /v1/images: import (a tar upload streamed into the import's pipe, or a
 * layout directory, a volume or a registry reference named in a JSON
 * body; with Accept: application/x-ndjson, progress lines as it goes),
 * list, get (with the image's config), delete and prune. Each handler parses the request,
 * calls one image service (daemon/svc_images.h) and renders what it
 * reports. Loop thread.
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
#include "api/upload.h"
#include "common/strbuf.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "daemon/svc_images.h"
#include "jsonutil/jsonutil.h"
#include "store/registry_auth.h"
#include "store/refname.h"

/* ---- rendering -------------------------------------------------------------- */

static json_object *
strv_json(char *const *v, size_t n)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; v && i < n; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

/* What the image runs and how, from its config. */
static json_object *
config_to_json(const struct oci_config *c)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "env", strv_json(c->env, c->n_env));
    json_object_object_add(o, "entrypoint", strv_json(c->entrypoint, c->n_entrypoint));
    json_object_object_add(o, "cmd", strv_json(c->cmd, c->n_cmd));
    json_object_object_add(o, "working_dir",
                           json_object_new_string(c->working_dir ? c->working_dir : ""));
    json_object_object_add(o, "user", json_object_new_string(c->user ? c->user : ""));
    json_object_object_add(o, "exposed_ports", strv_json(c->exposed_ports, c->n_exposed_ports));
    json_object *labels = json_object_new_object();
    for (size_t i = 0; i < c->n_labels; i++)
        json_object_object_add(labels, c->label_keys[i],
                               json_object_new_string(c->label_values[i]));
    json_object_object_add(o, "labels", labels);
    return o;
}

static json_object *
image_to_json(const struct meta_image *img, const struct oci_config *cfg)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "digest", json_object_new_string(img->digest));
    /* Names as Docker shows them ("busybox:latest"), and in full. */
    json_object *names = json_object_new_array();
    json_object *refs = json_object_new_array();
    for (size_t i = 0; i < img->n_names; i++) {
        char *familiar = image_ref_familiar(img->names[i]);
        json_object_array_add(names, json_object_new_string(familiar ? familiar : img->names[i]));
        json_object_array_add(refs, json_object_new_string(img->names[i]));
        free(familiar);
    }
    json_object_object_add(o, "names", names);
    json_object_object_add(o, "references", refs);
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
    json_object_object_add(o, "created_at", api_json_time_s(img->created_at));
    json_object_object_add(o, "last_used_at", api_json_time_s(img->last_used_at));
    json_object_object_add(o, "containers", json_object_new_int64(img->users));
    if (cfg)
        json_object_object_add(o, "config", config_to_json(cfg));
    return o;
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

static json_object *
freed_json(const struct gc_result *gc)
{
    return json_object_new_int64((int64_t)(gc->blob_bytes_freed + gc->snapshot_bytes_freed));
}

/* ---- import ----------------------------------------------------------------- */

/* One import request: the service's import, and the NDJSON stream when asked for. */
struct imp_reply {
    struct api_req *req;
    struct image_load *op;
    bool ndjson;
    struct api_stream *stream;
    /* Lines from before the stream could open (it opens once the body is
     * complete, and an upload's blobs are stored while it arrives): sent
     * first when it does. */
    struct strbuf early;
    bool answered;
};

/* What a stream (or the lines kept for it) may hold before lines are dropped. */
#define NDJSON_BACKLOG_BYTES (64 << 10)

/* One line to the stream, or kept for it while it is not open yet. */
static void
ndjson_line(struct imp_reply *r, json_object *o)
{
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    if (r->stream) {
        api_stream_write(r->stream, text, len);
        api_stream_write(r->stream, "\n", 1);
    } else {
        strbuf_put(&r->early, text, len);
        strbuf_put(&r->early, "\n", 1);
    }
    json_object_put(o);
}

/* A progress line is never worth holding the import for: past the
 * stream's buffer (a client that reads nothing), or past as much kept
 * for a stream not open yet, lines are dropped. A plain JSON reply keeps
 * none. */
static void
imp_progress(void *arg, const struct image_progress *ev)
{
    struct imp_reply *r = arg;
    if (!r->ndjson || r->answered)
        return;
    size_t backlog = r->stream ? api_stream_pending(r->stream) : r->early.len;
    if (backlog > NDJSON_BACKLOG_BYTES)
        return;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "step", json_object_new_string(ev->step));
    if (ev->status[0])
        json_object_object_add(o, "status", json_object_new_string(ev->status));
    if (ev->digest[0])
        json_object_object_add(o, "digest", json_object_new_string(ev->digest));
    if (ev->chain_id[0])
        json_object_object_add(o, "chain_id", json_object_new_string(ev->chain_id));
    if (ev->count) {
        json_object_object_add(o, "layer", json_object_new_int64(ev->index));
        json_object_object_add(o, "layers", json_object_new_int64(ev->count));
        json_object_object_add(o, "bytes", json_object_new_int64(ev->done));
    }
    json_object_object_add(o, "done", json_object_new_int64(ev->done));
    if (ev->total >= 0)
        json_object_object_add(o, "total", json_object_new_int64(ev->total));
    ndjson_line(r, o);
}

static void
imp_room(void *arg)
{
    struct imp_reply *r = arg;
    api_upload_room(r->req);
}

static void
imported_cb(void *arg, const struct err *err, const struct meta_image *img, bool created)
{
    struct imp_reply *r = arg;
    struct api_req *req = r->req;
    r->answered = true;
    if (r->stream) {
        json_object *o = json_object_new_object();
        if (!err) {
            json_object_object_add(o, "step", json_object_new_string("done"));
            json_object_object_add(o, "status", json_object_new_int(created ? 201 : 200));
            json_object_object_add(o, "image", image_to_json(img, NULL));
        } else {
            const char *code = NULL;
            unsigned status = api_err_status(err->code, &code);
            json_object_object_add(o, "step", json_object_new_string("error"));
            json_object_object_add(o, "status", json_object_new_int((int)status));
            json_object *e = json_object_new_object();
            json_object_object_add(e, "code", json_object_new_string(code));
            json_object_object_add(e, "message", json_object_new_string(err->msg));
            json_object_object_add(o, "error", e);
        }
        ndjson_line(r, o);
        api_stream_end(r->stream);
        return;
    }
    if (err)
        api_reply_err(req, err);
    else
        api_reply_json(req, created ? 201 : 200, image_to_json(img, NULL));
    /* An upload still arriving is read and dropped; MHD sends the answer
     * once the body ended. */
    api_req_resume(req);
}

static void
imp_reply_free(void *ctx)
{
    struct imp_reply *r = ctx;
    image_load_detach(r->op);
    api_stream_release(r->stream);
    strbuf_clear(&r->early);
    free(r);
}

static void
imp_on_shutdown(struct api_req *req)
{
    struct imp_reply *r = req->ctx;
    struct bpipe *p = r && r->op ? image_load_pipe(r->op) : NULL;
    if (p)
        bpipe_abort(p, ECANCELED);
}

/*
 * A pull's caller hung up (the API's peer sweep saw it) or the daemon is
 * stopping. At shutdown the pull service cancels the pull and answers;
 * for a hang-up the request stops waiting (the pull goes on for whoever
 * else waits, see daemon/svc_pull.h) and is closed.
 */
static void
pull_on_hangup(struct api_req *req)
{
    struct imp_reply *r = req->ctx;
    if (!r || r->answered || api_daemon(req->api)->shutting_down)
        return;
    r->answered = true;
    image_load_detach(r->op);
    r->op = NULL;
    if (r->stream)
        api_stream_fail(r->stream);
    else
        api_reply_fail(req, ECANCELED, "pull: the client hung up");
}

/* The NDJSON reply starts once the request body is complete. */
static void
imp_open_stream(struct api_req *req)
{
    struct imp_reply *r = req->ctx;
    if (r->answered && !r->ndjson)
        return;
    if (r->ndjson && !r->stream && !req->response) {
        r->stream = api_stream_start(req, 200, "application/x-ndjson");
        size_t len = 0;
        char *early = strbuf_steal(&r->early, &len);
        if (r->stream && len > 0)
            api_stream_write(r->stream, early, len);
        free(early);
        return;
    }
    if (!req->response)
        api_req_suspend(req);
}

/* Parses ?name= and ?platform= (or the body's "platform"), starts the
 * import of o; replies on error. */
static struct imp_reply *
imp_begin(struct api_req *req, struct image_source *o, const char *body_platform)
{
    struct err err = {0};
    struct oci_platform platform;
    const char *pq = api_req_query(req, "platform");
    if (pq && body_platform) {
        api_reply_fail(req, EINVAL,
                       "platform: give ?platform= or the field \"platform\", not both");
        return NULL;
    }
    const char *want = pq ? pq : body_platform;
    if (want && oci_platform_parse(want, &platform, &err) < 0) {
        api_reply_fail(req, EINVAL, "%s %s: %s", pq ? "platform" : "field \"platform\":", want,
                       err.msg);
        return NULL;
    }
    const char *accept = api_req_header(req, MHD_HTTP_HEADER_ACCEPT);
    struct imp_reply *r = calloc(1, sizeof(*r));
    if (!r) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return NULL;
    }
    r->req = req;
    r->ndjson = accept && strstr(accept, "application/x-ndjson") != NULL;
    o->name = api_req_query(req, "name");
    o->platform = want ? &platform : NULL;
    o->progress = r->ndjson ? imp_progress : NULL;
    o->room = imp_room;
    if (image_import(api_daemon(req->api), o, imported_cb, r, &r->op, &err) < 0) {
        free(r);
        api_reply_err(req, &err);
        return NULL;
    }
    req->ctx = r;
    req->ctx_free = imp_reply_free;
    req->on_shutdown = o->registry ? pull_on_hangup : imp_on_shutdown;
    /* A pull may run for minutes with nothing to send: the API watches the
     * socket so a caller that hangs up stops waiting (pull_on_hangup). */
    req->watch_hangup = o->registry != NULL;
    return r;
}

/* A tar upload: the import starts, and the body streams into it. */
static enum body_mode
imp_begin_upload(struct api_req *req)
{
    struct image_source o = {.upload = true};
    struct imp_reply *r = imp_begin(req, &o, NULL);
    if (!r)
        return BODY_NONE;
    api_upload_attach(req, image_load_pipe(r->op), imp_open_stream);
    return BODY_STREAM;
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
    /* No Content-Type, or the form type curl -d and --data-binary send
     * when none is given: the body's first byte says (sniff below). */
    if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0)
        return BODY_SNIFF;
    bool ok = false;
    for (const char *const *t = stream_types; *t; t++)
        if (strncasecmp(ct, *t, strlen(*t)) == 0)
            ok = true;
    if (!ok) {
        api_reply_fail(req, ERR_MEDIA_TYPE,
                       "Content-Type %s: send application/x-tar (optionally gzip or zstd "
                       "compressed) or application/json with a source",
                       ct);
        return BODY_NONE;
    }
    return imp_begin_upload(req);
}

enum body_mode
images_post_sniff(struct api_req *req, const char *data, size_t len)
{
    /* JSON is an object here, so its first byte past whitespace is '{';
     * no image tar begins so (a tar begins with a member's name, gzip
     * with 0x1f, zstd with 0x28). */
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    if (i < len && data[i] == '{')
        return BODY_JSON;
    return imp_begin_upload(req);
}

/* The body's "auth": {"username", "password"} or {"token"}. Messages
 * name fields, never what they hold. */
static int
pull_auth(json_object *body, struct registry_creds *c, struct err *err)
{
    json_object *auth = NULL;
    static const char *const fields[] = {"username", "password", "token", NULL};
    int has = jsonutil_get_object(body, "", "auth", false, &auth, err);
    if (has <= 0)
        return has;
    if (jsonutil_check_fields(auth, "auth", fields, err) < 0 ||
        jsonutil_get_string(auth, "auth", "username", false, &c->username, err) < 0 ||
        jsonutil_get_string(auth, "auth", "password", false, &c->password, err) < 0 ||
        jsonutil_get_string(auth, "auth", "token", false, &c->token, err) < 0)
        return -err->code;
    if (c->token && (c->username || c->password))
        return err_set(
            err, EINVAL,
            "field \"auth\": give \"username\" and \"password\", or \"token\", not both");
    if (!c->token && (!c->username || !*c->username || !c->password))
        return err_set(err, EINVAL,
                       "field \"auth\": give \"username\" and \"password\" together, or "
                       "\"token\"");
    if (c->token && !*c->token)
        return err_set(err, EINVAL, "field \"auth.token\": must not be empty");
    return 1;
}

void
api_body_image_clear(struct api_body_image *b)
{
    json_object_put(b->json);
    memset(b, 0, sizeof(*b));
}

int
api_body_image(const char *text, size_t len, struct api_body_image *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    json_object *source = NULL;
    int has_auth = 0;
    static const char *const top[] = {"source", "platform", "auth", NULL};
    static const char *const src_fields[] = {"layout", "volume", "path", "registry", NULL};
    struct image_source *o = &out->source;
    if (api_body_json(text, len, false, &out->json, err) < 0 ||
        jsonutil_check_fields(out->json, "", top, err) < 0 ||
        jsonutil_get_object(out->json, "", "source", true, &source, err) < 0 ||
        jsonutil_check_fields(source, "source", src_fields, err) < 0 ||
        jsonutil_get_string(source, "source", "layout", false, &o->layout_dir, err) < 0 ||
        jsonutil_get_string(source, "source", "volume", false, &o->volume, err) < 0 ||
        jsonutil_get_string(source, "source", "path", false, &o->volume_path, err) < 0 ||
        jsonutil_get_string(source, "source", "registry", false, &o->registry, err) < 0 ||
        jsonutil_get_string(out->json, "", "platform", false, &out->platform, err) < 0 ||
        (has_auth = pull_auth(out->json, &out->creds, err)) < 0) {
        api_body_image_clear(out);
        return -err->code;
    }
    const char *bad = NULL;
    if (o->volume_path && !o->volume)
        bad = "field \"source.path\": only with \"source.volume\"";
    else if (!!o->layout_dir + !!o->volume + !!o->registry != 1)
        bad = "field \"source\": give either \"layout\" (a directory on the host), \"volume\" "
              "(with an optional \"path\" inside it) or \"registry\" (a reference to pull)";
    else if (has_auth && !o->registry)
        bad = "field \"auth\": only with \"source.registry\"";
    if (bad) {
        api_body_image_clear(out);
        return err_set(err, EINVAL, "%s", bad);
    }
    o->creds = has_auth ? &out->creds : NULL;
    return 0;
}

static void
images_post_json(struct api_req *req)
{
    struct err err = {0};
    struct api_body_image b;
    if (api_body_image(req->body, req->body_len, &b, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    struct imp_reply *r = imp_begin(req, &b.source, b.platform);
    api_body_image_clear(&b);
    if (r)
        imp_open_stream(req);
}

void
images_post(struct api_req *req)
{
    if (req->body_mode == BODY_JSON)
        images_post_json(req);
    else if (req->body_mode == BODY_SNIFF)
        api_reply_fail(req, EINVAL,
                       "POST /v1/images: the body is empty: send a JSON object with a source "
                       "(Content-Type: application/json) or an image tar (application/x-tar)");
    /* BODY_STREAM: everything happens in images_post_begin and the upload. */
}

/* ---- list, get, delete, prune ----------------------------------------------- */

static void
listed_cb(void *arg, const struct err *err, struct meta_image *const *imgs, size_t n)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(arr, image_to_json(imgs[i], NULL));
    json_object *body = json_object_new_object();
    json_object_object_add(body, "images", arr);
    api_reply_json_resume(req, 200, body);
}

static void
got_cb(void *arg, const struct err *err, const struct meta_image *img, const struct oci_config *cfg)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    api_reply_json_resume(req, 200, image_to_json(img, cfg));
}

static void
deleted_cb(void *arg, const struct err *err, const struct image_delete_result *res)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *body = json_object_new_object();
    json_object_object_add(body, "digest", json_object_new_string(res->digest));
    json_object_object_add(body, "image_removed", json_object_new_boolean(res->image_removed));
    if (!res->image_removed) {
        char *familiar = image_ref_familiar(res->name_removed);
        json_object_object_add(body, "name_removed",
                               json_object_new_string(familiar ? familiar : res->name_removed));
        free(familiar);
    }
    json_object_object_add(body, "freed_bytes", freed_json(&res->gc));
    json_object_object_add(body, "gc", gc_to_json(&res->gc));
    api_reply_json_resume(req, 200, body);
}

static void
pruned_cb(void *arg, const struct err *err, char *const *removed, size_t n,
          const struct gc_result *gc)
{
    struct api_req *req = arg;
    if (api_req_call_failed(req, err))
        return;
    json_object *body = json_object_new_object();
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(arr, json_object_new_string(removed[i]));
    json_object_object_add(body, "removed", arr);
    json_object_object_add(body, "freed_bytes", freed_json(gc));
    json_object_object_add(body, "gc", gc_to_json(gc));
    api_reply_json_resume(req, 200, body);
}

void
images_list(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = image_list(api_daemon(req->api), listed_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
images_get(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = image_get(api_daemon(req->api), api_req_param(req, "ref"), got_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
images_delete(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc =
        image_delete(api_daemon(req->api), api_req_param(req, "ref"), deleted_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

int
api_body_prune(const char *text, size_t len, int64_t *unused, int64_t *keep, struct err *err)
{
    json_object *body = NULL;
    static const char *const fields[] = {"unused_for_s", "keep_bytes", NULL};
    int has_unused = 0, has_keep = 0;
    *unused = *keep = -1;
    int rc = 0;
    if (api_body_json(text, len, true, &body, err) < 0 ||
        jsonutil_check_fields(body, "", fields, err) < 0 ||
        (has_unused = jsonutil_get_int64(body, "", "unused_for_s", false, unused, err)) < 0 ||
        (has_keep = jsonutil_get_int64(body, "", "keep_bytes", false, keep, err)) < 0)
        rc = -EINVAL;
    json_object_put(body);
    if (rc == 0 && ((has_unused && *unused < 0) || (has_keep && *keep < 0)))
        rc = err_set(err, EINVAL, "field \"%s\": must not be negative",
                     has_unused && *unused < 0 ? "unused_for_s" : "keep_bytes");
    if (rc < 0)
        *unused = *keep = -1;
    return rc;
}

void
images_prune(struct api_req *req)
{
    struct err err = {0};
    int64_t unused = -1, keep = -1;
    struct svc_call *call = NULL;
    if (api_body_prune(req->body, req->body_len, &unused, &keep, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    int rc = image_prune(api_daemon(req->api), unused, keep, pruned_cb, req, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}
