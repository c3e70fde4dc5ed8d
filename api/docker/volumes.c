/*
 * The Docker API's volume routes: create, list (filters name, label,
 * dangling, driver), inspect, delete and prune, over the volume service:
 * these are berth's volumes, the same as /v1/volumes, with Docker's
 * labels as their properties. Loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "common/randid.h"
#include "daemon/daemon.h"
#include "daemon/svc_volumes.h"
#include "jsonutil/jsonutil.h"

#define ANON_LABEL "com.docker.volume.anonymous"

static json_object *
volume_json(const struct vol_info *v)
{
    const struct volume_rec *r = v->rec;
    json_object *o = json_object_new_object();
    char created[64];
    time_t t = (time_t)r->created_at;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_object_add(o, "CreatedAt", json_object_new_string(created));
    json_object_object_add(o, "Driver", json_object_new_string("local"));
    json_object *labels = json_object_new_object();
    for (size_t i = 0; i < r->n_props; i++)
        json_object_object_add(labels, r->props[i].key, json_object_new_string(r->props[i].value));
    json_object_object_add(o, "Labels", labels);
    json_object_object_add(o, "Mountpoint", json_object_new_string(v->path));
    json_object_object_add(o, "Name", json_object_new_string(r->handle));
    json_object_object_add(o, "Options", json_object_new_object());
    json_object_object_add(o, "Scope", json_object_new_string("local"));
    return o;
}

/* Replies err, as the engine words a missing volume. */
static void
reply_volume_err(struct api_req *req, const struct err *err, const char *name)
{
    if (err->code == ENOENT)
        api_reply_fail(req, ENOENT, "get %s: no such volume", name);
    else
        api_reply_err(req, err);
}

/* ---- create ------------------------------------------------------------------ */

struct create_ctx {
    struct api_req *req;
    char name[VOLUME_HANDLE_MAX + 1];
    struct volume_prop *props;
    size_t n_props;
};

static void
create_ctx_free(void *ctx)
{
    struct create_ctx *cc = ctx;
    for (size_t i = 0; i < cc->n_props; i++) {
        free(cc->props[i].key);
        free(cc->props[i].value);
    }
    free(cc->props);
    free(cc);
}

static void
existing_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    struct create_ctx *cc = arg;
    api_req_call_done(cc->req);
    if (err)
        reply_volume_err(cc->req, err, cc->name);
    else
        api_reply_json(cc->req, 201, volume_json(v));
    api_req_resume(cc->req);
}

static void
created_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    struct create_ctx *cc = arg;
    struct api_req *req = cc->req;
    api_req_call_done(req);
    struct err e = {0};
    if (err && err->code == EEXIST) {
        /* The engine's create of an existing local volume gives that volume. */
        struct svc_call *call = NULL;
        if (vol_get(api_daemon(req->api), cc->name, existing_cb, cc, &call, &e) == 0) {
            api_req_wait_call(req, call);
            return;
        }
        err = &e;
    }
    if (err)
        api_reply_err(req, err);
    else
        api_reply_json(req, 201, volume_json(v));
    api_req_resume(req);
}

void
docker_volumes_create(struct api_req *req)
{
    struct err err = {0};
    json_object *body = NULL, *labels = NULL, *opts = NULL;
    const char *name = NULL, *driver = NULL;
    if (api_req_body_json(req, true, &body, &err) < 0 ||
        jsonutil_get_string(body, "", "Name", false, &name, &err) < 0 ||
        jsonutil_get_string(body, "", "Driver", false, &driver, &err) < 0 ||
        jsonutil_get_object(body, "", "Labels", false, &labels, &err) < 0 ||
        jsonutil_get_object(body, "", "DriverOpts", false, &opts, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    if (driver && *driver && strcmp(driver, "local") != 0) {
        api_reply_fail(req, ENOENT, "plugin \"%.64s\" not found: only the local driver is here",
                       driver);
        json_object_put(body);
        return;
    }
    if (opts && json_object_object_length(opts) > 0) {
        api_reply_fail(req, EINVAL, "DriverOpts: volume options are not supported by this host");
        json_object_put(body);
        return;
    }
    /* name points into body: checked while body lives. */
    if (name && strlen(name) > VOLUME_HANDLE_MAX) {
        api_reply_fail(req, EINVAL, "volume name is over %d characters", VOLUME_HANDLE_MAX);
        json_object_put(body);
        return;
    }
    struct create_ctx *cc = calloc(1, sizeof(*cc));
    size_t n = labels ? (size_t)json_object_object_length(labels) : 0;
    if (!cc || (n && !(cc->props = calloc(n, sizeof(*cc->props))))) {
        free(cc);
        json_object_put(body);
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    cc->req = req;
    req->ctx = cc;
    req->ctx_free = create_ctx_free;
    if (name && *name)
        snprintf(cc->name, sizeof(cc->name), "%s", name);
    else if (randid_hex(cc->name, 32, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    if (labels) {
        json_object_object_foreach(labels, key, val)
        {
            cc->props[cc->n_props].key = strdup(key);
            cc->props[cc->n_props].value = strdup(json_object_get_string(val));
            cc->n_props++;
        }
    }
    json_object_put(body);
    struct volume_create_opts o = {.handle = cc->name, .props = cc->props, .n_props = cc->n_props};
    struct svc_call *call = NULL;
    int rc = vol_create(api_daemon(req->api), &o, created_cb, cc, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

/* ---- list, inspect ----------------------------------------------------------------- */

static bool
volume_labels_match(const struct volume_rec *r, json_object *want)
{
    char *keys[VOL_PROPS_MAX], *values[VOL_PROPS_MAX];
    size_t n = r->n_props < VOL_PROPS_MAX ? r->n_props : VOL_PROPS_MAX;
    for (size_t i = 0; i < n; i++) {
        keys[i] = r->props[i].key;
        values[i] = r->props[i].value;
    }
    return docker_labels_match(want, keys, values, n);
}

static bool
volume_match(const struct vol_info *v, json_object *filters)
{
    json_object *f;
    if ((f = docker_filter_values(filters, "name"))) {
        bool any = false;
        for (size_t i = 0; i < json_object_array_length(f) && !any; i++)
            any = strstr(v->rec->handle, json_object_get_string(json_object_array_get_idx(f, i)));
        if (!any)
            return false;
    }
    if ((f = docker_filter_values(filters, "label")) && !volume_labels_match(v->rec, f))
        return false;
    if ((f = docker_filter_values(filters, "dangling"))) {
        const char *d = json_object_get_string(json_object_array_get_idx(f, 0));
        bool want = strcmp(d, "true") == 0 || strcmp(d, "1") == 0;
        if ((v->rec->mounts == 0) != want)
            return false;
    }
    if ((f = docker_filter_values(filters, "driver")) &&
        strcmp(json_object_get_string(json_object_array_get_idx(f, 0)), "local") != 0)
        return false;
    return true;
}

struct list_ctx {
    struct api_req *req;
    json_object *filters;
    bool prune, prune_all;
    json_object *deleted;
    char **queue;
    size_t nqueue, next;
};

static void
list_ctx_free(void *ctx)
{
    struct list_ctx *l = ctx;
    json_object_put(l->filters);
    json_object_put(l->deleted);
    for (size_t i = 0; i < l->nqueue; i++)
        free(l->queue[i]);
    free(l->queue);
    free(l);
}

static void prune_next(struct list_ctx *l);

static void
listed_cb(void *arg, const struct err *err, const struct vol_info *vs, size_t n)
{
    struct list_ctx *l = arg;
    struct api_req *req = l->req;
    if (api_req_call_failed(req, err))
        return;
    if (l->prune) {
        l->queue = calloc(n ? n : 1, sizeof(char *));
        for (size_t i = 0; l->queue && i < n; i++) {
            bool anon = false;
            for (size_t k = 0; k < vs[i].rec->n_props; k++)
                anon |= strcmp(vs[i].rec->props[k].key, ANON_LABEL) == 0;
            if (vs[i].rec->mounts == 0 && vs[i].rec->children == 0 && (anon || l->prune_all) &&
                volume_match(&vs[i], l->filters) &&
                (l->queue[l->nqueue] = strdup(vs[i].rec->handle)))
                l->nqueue++;
        }
        prune_next(l);
        return;
    }
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        if (volume_match(&vs[i], l->filters))
            json_object_array_add(arr, volume_json(&vs[i]));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Volumes", arr);
    json_object_object_add(o, "Warnings", json_object_new_array());
    api_reply_json_resume(req, 200, o);
}

static void
list_start(struct api_req *req, bool prune)
{
    static const char *const known[] = {"name", "label", "dangling", "driver", "all", NULL};
    json_object *filters = docker_filters(req, known);
    if (!filters)
        return;
    struct list_ctx *l = calloc(1, sizeof(*l));
    if (!l || !(l->deleted = json_object_new_array())) {
        free(l);
        json_object_put(filters);
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    l->req = req;
    l->filters = filters;
    l->prune = prune;
    /* Since 1.42 a prune takes anonymous volumes only, unless all=true. */
    json_object *all = docker_filter_values(filters, "all");
    l->prune_all =
        req->front_version < 42 ||
        (all && (strcmp(json_object_get_string(json_object_array_get_idx(all, 0)), "true") == 0 ||
                 strcmp(json_object_get_string(json_object_array_get_idx(all, 0)), "1") == 0));
    req->ctx = l;
    req->ctx_free = list_ctx_free;
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = vol_list(api_daemon(req->api), NULL, 0, listed_cb, l, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

void
docker_volumes_list(struct api_req *req)
{
    list_start(req, false);
}

void
docker_volumes_prune(struct api_req *req)
{
    list_start(req, true);
}

static void
pruned_one_cb(void *arg, const struct err *err, char *const *deleted, size_t n)
{
    struct list_ctx *l = arg;
    api_req_call_done(l->req);
    for (size_t i = 0; !err && i < n; i++)
        json_object_array_add(l->deleted, json_object_new_string(deleted[i]));
    l->next++;
    prune_next(l);
}

static void
prune_next(struct list_ctx *l)
{
    struct api_req *req = l->req;
    while (l->next < l->nqueue) {
        struct err err = {0};
        struct svc_call *call = NULL;
        if (vol_delete(api_daemon(req->api), l->queue[l->next], false, pruned_one_cb, l, &call,
                       &err) == 0) {
            api_req_wait_call(req, call);
            return;
        }
        l->next++;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "VolumesDeleted", json_object_get(l->deleted));
    json_object_object_add(o, "SpaceReclaimed", json_object_new_int64(0));
    api_reply_json(req, 200, o);
    api_req_resume(req);
}

static void
got_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    if (err)
        reply_volume_err(req, err, api_req_param(req, "name"));
    else
        api_reply_json(req, 200, volume_json(v));
    api_req_resume(req);
}

void
docker_volume_inspect(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    const char *name = api_req_param(req, "name");
    if (vol_get(api_daemon(req->api), name, got_cb, req, &call, &err) < 0)
        reply_volume_err(req, &err, name);
    else
        api_req_wait_call(req, call);
}

/* ---- delete ----------------------------------------------------------------------- */

static void
deleted_cb(void *arg, const struct err *err, char *const *deleted, size_t n)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    const char *name = api_req_param(req, "name");
    if (err && err->code == ENOENT && docker_query_bool(req, "force", false))
        err = NULL; /* force: a volume that is not there is removed */
    if (err && err->code == ERR_CONFLICT)
        api_reply_fail(req, ERR_CONFLICT, "remove %s: volume is in use: %s", name, err->msg);
    else if (err)
        reply_volume_err(req, err, name);
    else
        api_reply_text(req, 204, "text/plain", "", 0);
    api_req_resume(req);
}

void
docker_volume_delete(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    const char *name = api_req_param(req, "name");
    /* The engine's force does not take a volume from its containers: neither does berth's. */
    if (vol_delete(api_daemon(req->api), name, false, deleted_cb, req, &call, &err) < 0)
        reply_volume_err(req, &err, name);
    else
        api_req_wait_call(req, call);
}
