/*
 * The Docker API's pull, POST /images/create?fromImage=&tag=&platform=
 * (with X-Registry-Auth): the image service's registry import, as /v1's
 * registry source, rendered as the engine's JSON message stream. Like
 * the engine, berth answers a plain error ({"message"}, with its status)
 * when the pull fails before its manifest is resolved, and otherwise a
 * 200 whose lines say what each layer does and end with the digest and
 * the image's status, or with an error line ({"errorDetail", "error"}).
 * A client that hangs up only stops waiting (daemon/svc_pull.h: a pull
 * nobody waits for goes on for a grace period). Loop thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "api/stream.h"
#include "daemon/daemon.h"
#include "daemon/svc_images.h"
#include "store/refname.h"
#include "store/registry_auth.h"

/* Past this much unsent output, byte counts are dropped (state lines never are). */
#define PULL_STREAM_SLACK (64 << 10)

struct dk_pull {
    struct api_req *req;
    struct image_load *op;
    struct api_stream *stream; /* once the manifest is resolved */
    bool answered;
    char *familiar;  /* "busybox:1.36", "127.0.0.1:5000/app@sha256:..", for the last line */
    char *name;      /* the same without its tag or digest ("busybox") */
    char *remote;    /* the repository without its registry ("library/busybox") */
    char *tag_or_at; /* the tag, or the digest, that "Pulling from" names */
};

static void
pull_free(void *ctx)
{
    struct dk_pull *p = ctx;
    image_load_detach(p->op);
    api_stream_release(p->stream);
    free(p->familiar);
    free(p->name);
    free(p->remote);
    free(p->tag_or_at);
    free(p);
}

/* ---- the message stream --------------------------------------------------------- */

static void
pull_line(struct dk_pull *p, json_object *o)
{
    size_t len = 0;
    /* As the engine writes it: "/" unescaped. */
    const char *text = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    api_stream_write(p->stream, text, len);
    api_stream_write(p->stream, "\r\n", 2);
    json_object_put(o);
}

static void
pull_status(struct dk_pull *p, const char *status, const char *id)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string(status));
    if (id)
        json_object_object_add(o, "id", json_object_new_string(id));
    pull_line(p, o);
}

/* The 200 and its first line, once. False when the stream could not start. */
static bool
pull_open(struct dk_pull *p)
{
    if (p->stream)
        return true;
    p->stream = api_stream_start(p->req, 200, "application/json");
    if (!p->stream) {
        /* A 500 is queued: nothing more is said. */
        p->answered = true;
        api_req_resume(p->req);
        return false;
    }
    char line[600];
    snprintf(line, sizeof(line), "Pulling from %s", p->remote);
    pull_status(p, line, p->tag_or_at);
    return true;
}

/* A layer's state as the engine words it; NULL for what it does not show. */
static const char *
layer_status(const char *status)
{
    static const char *const map[][2] = {
        {"waiting", "Pulling fs layer"},     {"downloading", "Downloading"},
        {"downloaded", "Download complete"}, {"unpacking", "Extracting"},
        {"unpacked", "Pull complete"},       {"cached", "Already exists"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(status, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

static void
pull_progress(void *arg, const struct image_progress *ev)
{
    struct dk_pull *p = arg;
    if (p->answered)
        return;
    if (strcmp(ev->step, "manifest") == 0) {
        pull_open(p);
        return;
    }
    const char *status = strcmp(ev->step, "layer") == 0 ? layer_status(ev->status) : NULL;
    if (!status || !pull_open(p))
        return;
    bool bytes = strcmp(ev->status, "downloading") == 0;
    if (bytes && api_stream_pending(p->stream) > PULL_STREAM_SLACK)
        return;
    /* The engine's short layer id: 12 hex digits of the digest. */
    const char *hex = strchr(ev->digest, ':');
    char id[13];
    snprintf(id, sizeof(id), "%s", hex ? hex + 1 : ev->digest);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string(status));
    json_object *detail = json_object_new_object();
    if (bytes) {
        json_object_object_add(detail, "current", json_object_new_int64(ev->done));
        if (ev->total >= 0)
            json_object_object_add(detail, "total", json_object_new_int64(ev->total));
    }
    json_object_object_add(o, "progressDetail", detail);
    json_object_object_add(o, "id", json_object_new_string(id));
    pull_line(p, o);
}

static void
pulled_cb(void *arg, const struct err *err, const struct meta_image *img, bool created)
{
    struct dk_pull *p = arg;
    struct api_req *req = p->req;
    if (p->answered)
        return;
    if (err && !p->stream) {
        p->answered = true;
        /* Nothing was said yet: the engine's plain error, with its status.
         * A registry's refusal is the engine's 404 and words: a 401 would
         * have the docker CLI ask for a login on its stdin (and berth has
         * no POST /auth to take one). */
        if (err->code == ERR_UNAUTHORIZED)
            api_reply_fail(req, ENOENT,
                           "pull access denied for %s, repository does not exist or may require "
                           "'docker login': %s",
                           p->name, err->msg);
        else
            api_reply_err(req, err);
        api_req_resume(req);
        return;
    }
    if (!pull_open(p))
        return;
    p->answered = true;
    char line[700];
    if (err) {
        json_object *o = json_object_new_object();
        json_object *detail = json_object_new_object();
        json_object_object_add(detail, "message", json_object_new_string(err->msg));
        json_object_object_add(o, "errorDetail", detail);
        json_object_object_add(o, "error", json_object_new_string(err->msg));
        pull_line(p, o);
    } else {
        snprintf(line, sizeof(line), "Digest: %s", img->digest);
        pull_status(p, line, NULL);
        snprintf(line, sizeof(line), "Status: %s for %s",
                 created ? "Downloaded newer image" : "Image is up to date", p->familiar);
        pull_status(p, line, NULL);
    }
    api_stream_end(p->stream);
}

/*
 * The client hung up (the API's peer sweep saw it while nothing was sent
 * yet) or the daemon is stopping. At shutdown the pull service cancels
 * the pull and answers; for a hang-up the request stops waiting and is
 * closed, as /v1's pull does.
 */
static void
pull_on_hangup(struct api_req *req)
{
    struct dk_pull *p = req->ctx;
    if (!p || p->answered || api_daemon(req->api)->shutting_down)
        return;
    p->answered = true;
    image_load_detach(p->op);
    p->op = NULL;
    if (p->stream)
        api_stream_fail(p->stream);
    else
        api_reply_fail(req, ECANCELED, "pull: the client hung up");
}

/* ---- parsing ---------------------------------------------------------------- */

/* fromImage with tag (a tag, or a digest "sha256:..."), as one reference. */
static int
pull_reference(const char *from, const char *tag, char **out, struct err *err)
{
    if (!from || !*from)
        return err_set(err, EINVAL, "fromImage: required");
    int n;
    if (tag && *tag)
        n = asprintf(out, "%s%s%s", from, strchr(tag, ':') ? "@" : ":", tag);
    else
        n = asprintf(out, "%s", from);
    if (n < 0) {
        *out = NULL;
        return err_set(err, ENOMEM, "out of memory");
    }
    return 0;
}

/* The parts the stream names, from the canonical reference ("domain/path[:tag][@digest]"). */
static int
pull_names(struct dk_pull *p, const char *ref, struct err *err)
{
    char *canonical = NULL;
    if (image_ref_normalize(ref, &canonical, err) < 0)
        return err_wrap(err, "fromImage %.200s", ref);
    const char *slash = strchr(canonical, '/');
    const char *at = strchr(canonical, '@');
    const char *end = at ? at : canonical + strlen(canonical);
    const char *colon = NULL;
    for (const char *c = slash; c && c < end; c++)
        if (*c == ':')
            colon = c;
    const char *rend = colon ? colon : end;
    p->familiar = image_ref_familiar(canonical);
    if (p->familiar && (p->name = strdup(p->familiar))) {
        char *cut = strchr(p->name, '@');
        if (cut)
            *cut = '\0';
        char *last = strrchr(p->name, '/');
        if ((cut = strrchr(last ? last : p->name, ':')))
            *cut = '\0';
    }
    p->remote = slash ? strndup(slash + 1, (size_t)(rend - slash - 1)) : strdup(canonical);
    /* A name without a tag was given :latest by the normaliser. */
    const char *id = at ? at + 1 : colon ? colon + 1 : "latest";
    p->tag_or_at = strndup(id, at || !colon ? strlen(id) : (size_t)(end - colon - 1));
    free(canonical);
    if (!p->familiar || !p->name || !p->remote || !p->tag_or_at)
        return err_set(err, ENOMEM, "out of memory");
    return 0;
}

/* base64url (the docker CLI's and docker-py's alphabet) or standard base64, padded or not. */
static char *
auth_decode(const char *s, size_t *len)
{
    char *std = strdup(s);
    if (!std)
        return NULL;
    for (char *c = std; *c; c++)
        *c = *c == '-' ? '+' : *c == '_' ? '/' : *c;
    char *out = registry_base64_decode(std, len);
    free(std);
    return out;
}

/* A member of the header's JSON that is a non-empty string, else NULL. */
static const char *
auth_str(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    const char *s = json_object_get_string(v);
    return *s ? s : NULL;
}

/* What X-Registry-Auth gave: creds borrow from o and secret. */
struct pull_auth {
    json_object *o;
    char *secret; /* "auth" decoded, split at its ':' */
    size_t secret_len;
    struct registry_creds creds;
};

static void
pull_auth_clear(struct pull_auth *a)
{
    if (a->secret) {
        explicit_bzero(a->secret, a->secret_len);
        free(a->secret);
    }
    json_object_put(a->o);
    *a = (struct pull_auth){0};
}

/*
 * X-Registry-Auth: the base64 of a JSON object (the engine's AuthConfig:
 * username and password, auth as base64 "user:password", identitytoken,
 * registrytoken; email and serveraddress are ignored). An empty object
 * (what the docker CLI sends when it has no credentials) means none:
 * --registry-auth's. 1 with credentials, 0 without, or -EINVAL naming
 * the header, never what it holds.
 */
static int
pull_auth_parse(const char *hdr, struct pull_auth *a, struct err *err)
{
    if (!hdr || !*hdr)
        return 0;
    size_t len = 0;
    char *text = auth_decode(hdr, &len);
    if (!text)
        return err_set(err, EINVAL, "invalid X-Registry-Auth header: not base64");
    a->o = json_tokener_parse(text);
    explicit_bzero(text, len);
    free(text);
    if (!a->o || !json_object_is_type(a->o, json_type_object))
        return err_set(err, EINVAL, "invalid X-Registry-Auth header: not a JSON object");
    struct registry_creds *c = &a->creds;
    if ((c->identity_token = auth_str(a->o, "identitytoken")))
        return 1;
    if ((c->token = auth_str(a->o, "registrytoken")))
        return 1;
    c->username = auth_str(a->o, "username");
    c->password = auth_str(a->o, "password");
    const char *basic = auth_str(a->o, "auth");
    if (!c->username && basic) {
        a->secret = registry_base64_decode(basic, &a->secret_len);
        char *colon = a->secret ? strchr(a->secret, ':') : NULL;
        if (!colon || colon == a->secret)
            return err_set(err, EINVAL,
                           "invalid X-Registry-Auth header: \"auth\" is not the base64 of "
                           "user:password");
        *colon = '\0';
        c->username = a->secret;
        c->password = colon + 1;
    }
    if (!c->username && !c->password)
        return 0;
    if (!c->username)
        return err_set(err, EINVAL,
                       "invalid X-Registry-Auth header: a password without a username");
    if (!c->password)
        c->password = "";
    return 1;
}

void
docker_images_create(struct api_req *req)
{
    struct err err = {0};
    if (api_req_query(req, "fromSrc")) {
        api_reply_fail(req, EINVAL, "importing a root filesystem (fromSrc) is not supported");
        return;
    }
    const char *pq = api_req_query(req, "platform");
    struct oci_platform platform;
    if (pq && *pq && oci_platform_parse(pq, &platform, &err) < 0) {
        api_reply_fail(req, EINVAL, "platform %.100s: %s", pq, err.msg);
        return;
    }
    char *ref = NULL;
    struct dk_pull *p = NULL;
    struct pull_auth auth = {0};
    int has_auth = 0;
    if (pull_reference(api_req_query(req, "fromImage"), api_req_query(req, "tag"), &ref, &err) <
            0 ||
        !(p = calloc(1, sizeof(*p))) || pull_names(p, ref, &err) < 0 ||
        (has_auth = pull_auth_parse(api_req_header(req, "X-Registry-Auth"), &auth, &err)) < 0) {
        if (!err.code)
            err_set(&err, ENOMEM, "out of memory");
        goto out;
    }
    p->req = req;
    struct image_source o = {.registry = ref,
                             .creds = has_auth ? &auth.creds : NULL,
                             .platform = pq && *pq ? &platform : NULL,
                             .progress = pull_progress};
    if (image_import(api_daemon(req->api), &o, pulled_cb, p, &p->op, &err) < 0)
        goto out;
    req->ctx = p;
    req->ctx_free = pull_free;
    req->on_shutdown = pull_on_hangup;
    /* Nothing may be sent for a long time (a slow manifest, a token
     * exchange): the API watches the socket for a client that leaves. */
    req->watch_hangup = true;
    api_req_suspend(req);
    p = NULL;
out:
    if (p)
        pull_free(p);
    pull_auth_clear(&auth);
    free(ref);
    if (err.code)
        api_reply_err(req, &err);
}
