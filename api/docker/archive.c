/*
 * The engine's archive routes, docker cp both ways: HEAD (the stat of a
 * path, in X-Docker-Container-Path-Stat), GET (that header and a tar of
 * the path) and PUT (a tar extracted under a directory) on
 * /containers/{id}/archive?path=. Parsing and rendering only: the
 * container archive service (daemon/svc_archive.h) resolves the path
 * inside the container's root filesystem and does the tar work on the
 * pool. Loop thread.
 */
#include "api/docker/docker.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "api/api.h"
#include "api/request.h"
#include "api/tar_download.h"
#include "api/upload.h"
#include "daemon/bpipe.h"
#include "daemon/containers.h"
#include "daemon/svc_archive.h"

#define STAT_HEADER "X-Docker-Container-Path-Stat"

/* Go's os.FileMode bits, as the engine sends a path's mode. */
#define GO_MODE_DIR (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
#define GO_MODE_DEVICE (1u << 26)
#define GO_MODE_NAMED_PIPE (1u << 25)
#define GO_MODE_SOCKET (1u << 24)
#define GO_MODE_SETUID (1u << 23)
#define GO_MODE_SETGID (1u << 22)
#define GO_MODE_CHAR_DEVICE (1u << 21)
#define GO_MODE_STICKY (1u << 20)

static uint32_t
go_file_mode(uint32_t m)
{
    uint32_t g = m & 0777;
    if (m & S_ISUID)
        g |= GO_MODE_SETUID;
    if (m & S_ISGID)
        g |= GO_MODE_SETGID;
    if (m & S_ISVTX)
        g |= GO_MODE_STICKY;
    switch (m & S_IFMT) {
    case S_IFDIR:
        g |= GO_MODE_DIR;
        break;
    case S_IFLNK:
        g |= GO_MODE_SYMLINK;
        break;
    case S_IFIFO:
        g |= GO_MODE_NAMED_PIPE;
        break;
    case S_IFSOCK:
        g |= GO_MODE_SOCKET;
        break;
    case S_IFBLK:
        g |= GO_MODE_DEVICE;
        break;
    case S_IFCHR:
        g |= GO_MODE_DEVICE | GO_MODE_CHAR_DEVICE;
        break;
    }
    return g;
}

/* The header's value: base64 of {"name","size","mode","mtime","linkTarget"}. Caller frees. */
static char *
stat_header(const struct rootfs_stat *st)
{
    char mtime[64];
    time_t s = (time_t)st->mtime_s;
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(mtime, sizeof(mtime), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(mtime + n, sizeof(mtime) - n, ".%09lldZ", (long long)st->mtime_ns);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(st->name));
    json_object_object_add(o, "size", json_object_new_int64(st->size));
    json_object_object_add(o, "mode", json_object_new_int64(go_file_mode(st->mode)));
    json_object_object_add(o, "mtime", json_object_new_string(mtime));
    json_object_object_add(o, "linkTarget", json_object_new_string(st->link_target));
    const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    size_t len = strlen(text);
    char *b64 = malloc(4 * ((len + 2) / 3) + 1);
    if (b64)
        EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)text, (int)len);
    json_object_put(o);
    return b64;
}

/* ?path=, which the engine requires. */
static const char *
archive_path(struct api_req *req)
{
    const char *path = api_req_query(req, "path");
    if (!path || !*path) {
        api_reply_fail(req, EINVAL, "bad parameter: path cannot be empty");
        return NULL;
    }
    return path;
}

/* Replies err, a missing path as the engine words it; then resumes. */
static void
archive_failed(struct api_req *req, const struct err *err)
{
    if (err->code == ENOENT && strncmp(err->msg, "path ", 5) == 0) {
        struct err e = {0};
        err_set(&e, ENOENT, "Could not find the file %s in container %s",
                api_req_query(req, "path"), api_req_param(req, "id"));
        api_reply_err_resume(req, &e);
        return;
    }
    api_reply_err_resume(req, err);
}

/* ---- HEAD and GET ----------------------------------------------------------- */

static void
stat_cb(void *arg, const struct err *err, const struct rootfs_stat *st)
{
    struct api_req *req = arg;
    api_req_call_done(req);
    if (err) {
        archive_failed(req, err);
        return;
    }
    char *h = stat_header(st);
    api_reply_text(req, 200, "application/json", "", 0);
    if (req->response && h)
        MHD_add_response_header(req->response, STAT_HEADER, h);
    free(h);
    api_req_resume(req);
}

static void
get_started(struct api_req *req, struct volume_stream_out *op)
{
    const struct rootfs_stat *st = volume_stream_out_stat(op);
    char *h = st ? stat_header(st) : NULL;
    if (h)
        MHD_add_response_header(req->response, STAT_HEADER, h);
    free(h);
}

void
docker_container_archive_get(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    const char *path = c ? archive_path(req) : NULL;
    if (!path)
        return;
    struct daemon *d = api_daemon(req->api);
    struct err err = {0};
    if (strcmp(req->method, "HEAD") == 0) {
        struct svc_call *call = NULL;
        int rc = container_archive_stat(d, c->p->handle, path, stat_cb, req, &call, &err);
        api_req_wait_or_fail(req, rc, call, &err);
        return;
    }
    static const struct api_tar_dl_hooks hooks = {.started = get_started, .failed = archive_failed};
    struct api_tar_dl *dl = api_tar_dl_new(req, VOLUME_COMPRESS_NONE, &hooks);
    struct volume_stream_out *op = NULL;
    int rc = dl ? container_archive_get(d, c->p->handle, path, api_tar_dl_notify, dl, &op, &err)
                : err_set(&err, ENOMEM, "out of memory");
    if (rc < 0) {
        api_tar_dl_free(dl);
        api_reply_err(req, &err);
        return;
    }
    api_tar_dl_wait(dl, op);
}

/* ---- PUT -------------------------------------------------------------------- */

struct put_reply {
    struct api_req *req;
    struct volume_stream_in *op;
};

static void
put_room(void *arg)
{
    struct put_reply *u = arg;
    api_upload_room(u->req);
}

static void
put_done(void *arg, const struct err *err, const struct volume_tar_in_result *res)
{
    struct put_reply *u = arg;
    (void)res;
    if (err) {
        archive_failed(u->req, err);
        return;
    }
    api_reply_text(u->req, 200, "text/plain", "", 0);
    api_req_resume(u->req);
}

static void
put_reply_free(void *ctx)
{
    struct put_reply *u = ctx;
    volume_stream_in_detach(u->op);
    free(u);
}

static void
put_on_shutdown(struct api_req *req)
{
    struct put_reply *u = req->ctx;
    if (u && u->op)
        bpipe_abort(volume_stream_in_pipe(u->op), ECANCELED);
}

enum body_mode
docker_container_archive_put_begin(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    const char *path = c ? archive_path(req) : NULL;
    if (!path)
        return BODY_NONE;
    bool no_dir_nondir = docker_query_bool(req, "noOverwriteDirNonDir", false);
    bool copy_uid_gid = docker_query_bool(req, "copyUIDGID", false);
    struct put_reply *u = calloc(1, sizeof(*u));
    struct err err = {0};
    int rc = u ? 0 : err_set(&err, ENOMEM, "out of memory");
    if (rc == 0) {
        u->req = req;
        rc = container_archive_put(api_daemon(req->api), c->p->handle, path, no_dir_nondir,
                                   copy_uid_gid, put_room, put_done, u, &u->op, &err);
    }
    if (rc < 0) {
        free(u);
        api_reply_err(req, &err);
        return BODY_NONE;
    }
    req->ctx = u;
    req->ctx_free = put_reply_free;
    req->on_shutdown = put_on_shutdown;
    api_upload_attach(req, volume_stream_in_pipe(u->op), NULL);
    return BODY_STREAM;
}

void
docker_container_archive_put(struct api_req *req)
{
    /* Everything happens in docker_container_archive_put_begin and the upload. */
    (void)req;
}
