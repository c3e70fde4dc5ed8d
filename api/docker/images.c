/*
 * The Docker API's image routes: load (a docker save or OCI archive
 * streamed into the same import as POST /v1/images), list, inspect (the
 * image config the image service reads), tag and delete; create (a pull)
 * is pull.c's. An image's Id is its config digest, as the engine's is.
 * Loop thread.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "api/upload.h"
#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "daemon/svc_image_tag.h"
#include "daemon/svc_images.h"
#include "store/refname.h"

/* ---- names ------------------------------------------------------------------ */

/* The familiar name (caller frees) when it carries a tag; NULL for a digest reference. */
static char *
repo_tag(const char *canonical)
{
    if (strchr(canonical, '@'))
        return NULL;
    return image_ref_familiar(canonical);
}

/* "repo@sha256:..." for a name: its repository (familiar), at digest (caller frees). */
static char *
repo_digest(const char *canonical, const char *digest)
{
    char *fam = image_ref_familiar(canonical);
    if (!fam)
        return NULL;
    char *at = strchr(fam, '@');
    if (at)
        return fam; /* already a digest reference */
    /* The tag goes: the last ':' after the last '/'. */
    char *slash = strrchr(fam, '/');
    char *colon = strrchr(slash ? slash : fam, ':');
    if (colon)
        *colon = '\0';
    char *out = NULL;
    if (asprintf(&out, "%s@%s", fam, digest) < 0)
        out = NULL;
    free(fam);
    return out;
}

static json_object *
repo_tags_json(const struct meta_image *img)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < img->n_names; i++) {
        char *t = repo_tag(img->names[i]);
        if (t)
            json_object_array_add(a, json_object_new_string(t));
        free(t);
    }
    return a;
}

static json_object *
repo_digests_json(const struct meta_image *img)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < img->n_names; i++) {
        char *d = repo_digest(img->names[i], img->digest);
        bool dup = false;
        for (size_t k = 0; d && k < json_object_array_length(a); k++)
            dup |= strcmp(json_object_get_string(json_object_array_get_idx(a, k)), d) == 0;
        if (d && !dup)
            json_object_array_add(a, json_object_new_string(d));
        free(d);
    }
    return a;
}

static int64_t
image_size(const struct meta_image *img)
{
    return img->unpacked_bytes ? img->unpacked_bytes : img->size_bytes;
}

/* ---- load ------------------------------------------------------------------- */

struct load_reply {
    struct api_req *req;
    struct image_load *op;
};

static void
load_room(void *arg)
{
    struct load_reply *r = arg;
    api_upload_room(r->req);
}

static void
load_message(json_object *arr, const char *prefix, const char *what)
{
    char line[600];
    snprintf(line, sizeof(line), "%s%s\n", prefix, what);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "stream", json_object_new_string(line));
    json_object_array_add(arr, o);
}

/* The engine's message stream: one JSON object after the other. */
static void
reply_messages(struct api_req *req, json_object *arr)
{
    size_t total = 0;
    char *buf = NULL;
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        size_t len = 0;
        const char *t = json_object_to_json_string_length(json_object_array_get_idx(arr, i),
                                                          JSON_C_TO_STRING_PLAIN, &len);
        char *n = realloc(buf, total + len + 2);
        if (!n)
            break;
        buf = n;
        memcpy(buf + total, t, len);
        total += len;
        buf[total++] = '\r';
        buf[total++] = '\n';
    }
    api_reply_text(req, 200, "application/json", buf ? buf : "", total);
    free(buf);
    json_object_put(arr);
}

static void
loaded_cb(void *arg, const struct err *err, const struct meta_image *img, bool created)
{
    struct load_reply *r = arg;
    struct api_req *req = r->req;
    if (err) {
        api_reply_err(req, err);
        api_req_resume(req);
        return;
    }
    json_object *arr = json_object_new_array();
    size_t tagged = 0;
    for (size_t i = 0; i < img->n_names; i++) {
        char *t = repo_tag(img->names[i]);
        if (t) {
            load_message(arr, "Loaded image: ", t);
            tagged++;
        }
        free(t);
    }
    if (!tagged)
        load_message(arr, "Loaded image ID: ", img->config_digest);
    reply_messages(req, arr);
    api_req_resume(req);
}

static void
load_free(void *ctx)
{
    struct load_reply *r = ctx;
    image_load_detach(r->op);
    free(r);
}

static void
load_on_shutdown(struct api_req *req)
{
    struct load_reply *r = req->ctx;
    struct bpipe *p = r && r->op ? image_load_pipe(r->op) : NULL;
    if (p)
        bpipe_abort(p, ECANCELED);
}

enum body_mode
docker_images_load_begin(struct api_req *req)
{
    struct load_reply *r = calloc(1, sizeof(*r));
    if (!r) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return BODY_NONE;
    }
    r->req = req;
    struct err err = {0};
    struct image_source o = {.upload = true, .room = load_room};
    if (image_import(api_daemon(req->api), &o, loaded_cb, r, &r->op, &err) < 0) {
        free(r);
        api_reply_err(req, &err);
        return BODY_NONE;
    }
    req->ctx = r;
    req->ctx_free = load_free;
    req->on_shutdown = load_on_shutdown;
    api_upload_attach(req, image_load_pipe(r->op), NULL);
    return BODY_STREAM;
}

void
docker_images_load(struct api_req *req)
{
    /* Everything happens in docker_images_load_begin and the upload. */
}

/* ---- list ------------------------------------------------------------------- */

static bool
reference_match(const struct meta_image *img, json_object *refs)
{
    for (size_t k = 0; refs && k < json_object_array_length(refs); k++) {
        const char *want = json_object_get_string(json_object_array_get_idx(refs, k));
        for (size_t i = 0; i < img->n_names; i++) {
            char *fam = repo_tag(img->names[i]);
            if (!fam)
                continue;
            char *repo = strdup(fam);
            char *slash = repo ? strrchr(repo, '/') : NULL;
            char *colon = repo ? strrchr(slash ? slash : repo, ':') : NULL;
            if (colon)
                *colon = '\0';
            bool m = fnmatch(want, fam, 0) == 0 || (repo && fnmatch(want, repo, 0) == 0);
            free(repo);
            free(fam);
            if (m)
                return true;
        }
    }
    return false;
}

static json_object *
image_summary(const struct meta_image *img, int version)
{
    json_object *o = json_object_new_object();
    char id[DIGEST_STR_LEN + 8];
    snprintf(id, sizeof(id), "%s", img->config_digest);
    json_object_object_add(o, "Id", json_object_new_string(id));
    json_object_object_add(o, "ParentId", json_object_new_string(""));
    json_object_object_add(o, "RepoTags", repo_tags_json(img));
    json_object_object_add(o, "RepoDigests", repo_digests_json(img));
    json_object_object_add(o, "Created", json_object_new_int64(img->created_at));
    json_object_object_add(o, "Size", json_object_new_int64(image_size(img)));
    json_object_object_add(o, "SharedSize", json_object_new_int64(-1));
    if (version < 44)
        json_object_object_add(o, "VirtualSize", json_object_new_int64(image_size(img)));
    json_object_object_add(o, "Labels", NULL);
    json_object_object_add(o, "Containers", json_object_new_int64(img->users));
    return o;
}

struct list_ctx {
    struct api_req *req;
    json_object *filters;
};

static void
list_free(void *ctx)
{
    struct list_ctx *l = ctx;
    json_object_put(l->filters);
    free(l);
}

static void
listed_cb(void *arg, const struct err *err, struct meta_image *const *imgs, size_t n)
{
    struct list_ctx *l = arg;
    struct api_req *req = l->req;
    if (api_req_call_failed(req, err))
        return;
    json_object *refs = docker_filter_values(l->filters, "reference");
    json_object *dangling = docker_filter_values(l->filters, "dangling");
    bool want_dangling =
        dangling &&
        strcmp(json_object_get_string(json_object_array_get_idx(dangling, 0)), "true") == 0;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        if (refs && !reference_match(imgs[i], refs))
            continue;
        if (dangling && (imgs[i]->n_names == 0) != want_dangling)
            continue;
        json_object_array_add(arr, image_summary(imgs[i], req->front_version));
    }
    api_reply_json_resume(req, 200, arr);
}

void
docker_images_list(struct api_req *req)
{
    static const char *const known[] = {"reference", "dangling", "label", "before", "since", NULL};
    json_object *filters = docker_filters(req, known);
    if (!filters)
        return;
    struct list_ctx *l = calloc(1, sizeof(*l));
    if (!l) {
        json_object_put(filters);
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    l->req = req;
    l->filters = filters;
    req->ctx = l;
    req->ctx_free = list_free;
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = image_list(api_daemon(req->api), listed_cb, l, &call, &err);
    api_req_wait_or_fail(req, rc, call, &err);
}

/* ---- inspect ------------------------------------------------------------------ */

static json_object *
image_config_json(const struct oci_config *c)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Hostname", json_object_new_string(""));
    json_object_object_add(o, "Domainname", json_object_new_string(""));
    json_object_object_add(o, "User", json_object_new_string(c && c->user ? c->user : ""));
    static const char *const off[] = {
        "AttachStdin", "AttachStdout", "AttachStderr", "Tty", "OpenStdin", "StdinOnce", NULL};
    for (size_t i = 0; off[i]; i++)
        json_object_object_add(o, off[i], json_object_new_boolean(false));
    json_object *ports = NULL;
    if (c && c->n_exposed_ports) {
        ports = json_object_new_object();
        for (size_t i = 0; i < c->n_exposed_ports; i++)
            json_object_object_add(ports, c->exposed_ports[i], json_object_new_object());
    }
    json_object_object_add(o, "ExposedPorts", ports);
    json_object *env = json_object_new_array();
    for (size_t i = 0; c && i < c->n_env; i++)
        json_object_array_add(env, json_object_new_string(c->env[i]));
    json_object_object_add(o, "Env", env);
    json_object *cmd = NULL, *ep = NULL;
    if (c && c->n_cmd) {
        cmd = json_object_new_array();
        for (size_t i = 0; i < c->n_cmd; i++)
            json_object_array_add(cmd, json_object_new_string(c->cmd[i]));
    }
    if (c && c->n_entrypoint) {
        ep = json_object_new_array();
        for (size_t i = 0; i < c->n_entrypoint; i++)
            json_object_array_add(ep, json_object_new_string(c->entrypoint[i]));
    }
    json_object_object_add(o, "Cmd", cmd);
    json_object_object_add(o, "Image", json_object_new_string(""));
    json_object_object_add(o, "Volumes", NULL);
    json_object_object_add(o, "WorkingDir",
                           json_object_new_string(c && c->working_dir ? c->working_dir : ""));
    json_object_object_add(o, "Entrypoint", ep);
    json_object_object_add(o, "OnBuild", NULL);
    json_object *labels = NULL;
    if (c && c->n_labels) {
        labels = json_object_new_object();
        for (size_t i = 0; i < c->n_labels; i++)
            json_object_object_add(labels, c->label_keys[i],
                                   json_object_new_string(c->label_values[i]));
    }
    json_object_object_add(o, "Labels", labels);
    return o;
}

static json_object *
image_inspect_json(const struct meta_image *img, const struct oci_config *cfg, int version)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Id", json_object_new_string(img->config_digest));
    json_object_object_add(o, "RepoTags", repo_tags_json(img));
    json_object_object_add(o, "RepoDigests", repo_digests_json(img));
    json_object_object_add(o, "Parent", json_object_new_string(""));
    json_object_object_add(o, "Comment", json_object_new_string(""));
    json_object_object_add(o, "Created", docker_time_ms(img->created_at * 1000));
    json_object_object_add(o, "DockerVersion", json_object_new_string(""));
    json_object_object_add(o, "Author", json_object_new_string(""));
    json_object_object_add(o, "Config", image_config_json(cfg));
    json_object_object_add(o, "Architecture", json_object_new_string(img->platform.architecture));
    if (img->platform.variant && *img->platform.variant)
        json_object_object_add(o, "Variant", json_object_new_string(img->platform.variant));
    json_object_object_add(o, "Os", json_object_new_string(img->platform.os));
    if (img->platform.os_version && *img->platform.os_version)
        json_object_object_add(o, "OsVersion", json_object_new_string(img->platform.os_version));
    json_object_object_add(o, "Size", json_object_new_int64(image_size(img)));
    if (version < 44)
        json_object_object_add(o, "VirtualSize", json_object_new_int64(image_size(img)));
    json_object *gd = json_object_new_object();
    json_object_object_add(gd, "Name", json_object_new_string("overlay2"));
    json_object_object_add(gd, "Data", NULL);
    json_object_object_add(o, "GraphDriver", gd);
    json_object *rootfs = json_object_new_object();
    json_object_object_add(rootfs, "Type", json_object_new_string("layers"));
    json_object *layers = json_object_new_array();
    for (size_t i = 0; i < img->n_layers; i++)
        json_object_array_add(layers, json_object_new_string(img->layers[i].diff_id));
    json_object_object_add(rootfs, "Layers", layers);
    json_object_object_add(o, "RootFS", rootfs);
    json_object *meta = json_object_new_object();
    json_object_object_add(meta, "LastTagTime", docker_time_ms(0));
    json_object_object_add(o, "Metadata", meta);
    return o;
}

/* Replies err, as the engine words a missing image. */
static void
reply_image_err(struct api_req *req, const struct err *err)
{
    if (err->code == ENOENT)
        api_reply_fail(req, ENOENT, "No such image: %s", api_req_param(req, "name"));
    else
        api_reply_err(req, err);
}

static void
inspected_cb(void *arg, const struct err *err, const struct meta_image *img,
             const struct oci_config *cfg)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    if (err)
        reply_image_err(req, err);
    else
        api_reply_json(req, 200, image_inspect_json(img, cfg, req->front_version));
    api_req_resume(req);
}

void
docker_image_inspect(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc =
        image_get(api_daemon(req->api), api_req_param(req, "name"), inspected_cb, req, &call, &err);
    if (rc < 0)
        reply_image_err(req, &err);
    else
        api_req_wait_call(req, call);
}

/* ---- tag, delete ---------------------------------------------------------------- */

static void
tagged_cb(void *arg, const struct err *err, const char *digest, const char *name)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    if (err)
        reply_image_err(req, err);
    else
        api_reply_text(req, 201, "application/json", "", 0);
    api_req_resume(req);
}

void
docker_image_tag(struct api_req *req)
{
    const char *repo = api_req_query(req, "repo");
    const char *tag = api_req_query(req, "tag");
    if (!repo || !*repo) {
        api_reply_fail(req, EINVAL, "repository name must have at least one component");
        return;
    }
    char name[600];
    snprintf(name, sizeof(name), "%s:%s", repo, tag && *tag ? tag : "latest");
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = image_tag(api_daemon(req->api), api_req_param(req, "name"), name, tagged_cb, req,
                       &call, &err);
    if (rc < 0)
        reply_image_err(req, &err);
    else
        api_req_wait_call(req, call);
}

static void
deleted_cb(void *arg, const struct err *err, const struct image_delete_result *res)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    if (err) {
        reply_image_err(req, err);
        api_req_resume(req);
        return;
    }
    json_object *arr = json_object_new_array();
    if (res->name_removed && strncmp(res->name_removed, "sha256:", 7) != 0) {
        char *fam = image_ref_familiar(res->name_removed);
        json_object *u = json_object_new_object();
        json_object_object_add(u, "Untagged",
                               json_object_new_string(fam ? fam : res->name_removed));
        json_object_array_add(arr, u);
        free(fam);
    }
    if (res->image_removed) {
        json_object *dd = json_object_new_object();
        json_object_object_add(dd, "Deleted", json_object_new_string(res->digest));
        json_object_array_add(arr, dd);
    }
    api_reply_json_resume(req, 200, arr);
}

void
docker_image_delete(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    int rc = image_delete(api_daemon(req->api), api_req_param(req, "name"), deleted_cb, req, &call,
                          &err);
    if (rc < 0)
        reply_image_err(req, &err);
    else
        api_req_wait_call(req, call);
}
