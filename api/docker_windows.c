/*
 * The Docker API on Windows: not built yet (api/docker/ and the unix
 * socket listener are Linux only; see cmake/windows.cmake). No socket is
 * the default there; --docker-listen tcp://... serves a front end that
 * answers every request 501 with that reason, and unix:// is refused at
 * start. Loop thread.
 */
#include "api/front.h"
#include "api/listen_unix.h"
#include "api/docker/docker.h"
#include "api/request.h"

#include <string.h>

#define WHY "the Docker API is not built into berthd.exe yet (Linux only for now)"

int
listen_unix_open(const char *path, const char *group, struct listen_unix *out, struct err *err)
{
    (void)group;
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    return err_set(err, ENOTSUP, "unix://%s: %s", path, WHY);
}

void
listen_unix_remove(const struct listen_unix *l)
{
    (void)l;
}

static void
refuse(struct api_req *req)
{
    api_reply_fail(req, ENOTSUP, "%s", WHY);
}

static unsigned
status_of(int code, const char **code_str)
{
    (void)code;
    *code_str = "not_implemented";
    return 501;
}

static json_object *
body_of(unsigned status, const char *code, const char *msg)
{
    (void)status;
    (void)code;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "message", json_object_new_string(msg));
    return o;
}

const struct api_front docker_front = {
    .name = "docker",
    .rewrite = refuse,
    .route_failed = api_v1_route_failed,
    .err_status = status_of,
    .err_body = body_of,
};
