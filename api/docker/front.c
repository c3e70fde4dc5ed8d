/*
 * The Docker API's front end (api/front.h): the /v1.NN/ version prefix,
 * the headers every response carries, Docker's error shape and statuses
 * (the second error table: berth's error codes to the engine's statuses),
 * and the answers for what is not routed. Loop thread.
 */
#include "api/docker/docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/request.h"

/*
 * berth's error codes (common/err.h) as the engine's statuses. The engine
 * has fewer kinds: a content that is unusable, a limit, a media type are
 * all its "invalid parameter" (400); what berth waited on and did not get
 * is its 500, as is anything internal.
 */
static const struct {
    int code;
    unsigned status;
    const char *str;
} docker_err_map[] = {
    {EINVAL, 400, "invalid_parameter"},
    {ERR_INVALID_CONTENT, 400, "invalid_parameter"},
    {ENAMETOOLONG, 400, "invalid_parameter"},
    {EFBIG, 400, "invalid_parameter"},
    {ERR_MEDIA_TYPE, 400, "invalid_parameter"},
    {ENOTSUP, 400, "invalid_parameter"},
    {ERR_UNAUTHORIZED, 401, "unauthorized"},
    {EROFS, 403, "forbidden"},
    {ENOENT, 404, "not_found"},
    {EEXIST, 409, "conflict"},
    {ERR_CONFLICT, 409, "conflict"},
    {EBUSY, 409, "conflict"},
    {EALREADY, 304, "not_modified"},
    {ERR_UNAVAILABLE, 503, "unavailable"},
    {ECANCELED, 503, "unavailable"},
    {ENOSYS, 501, "not_implemented"},
};

unsigned
docker_err_status(int code, const char **code_str)
{
    for (size_t i = 0; i < sizeof(docker_err_map) / sizeof(docker_err_map[0]); i++) {
        if (docker_err_map[i].code == code) {
            if (code_str)
                *code_str = docker_err_map[i].str;
            return docker_err_map[i].status;
        }
    }
    if (code_str)
        *code_str = "system";
    return 500;
}

json_object *
docker_front_err_body(unsigned status, const char *code, const char *msg)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "message", json_object_new_string(msg));
    return o;
}

void
docker_front_decorate(struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "Api-Version", DOCKER_API_VERSION);
    MHD_add_response_header(resp, "Ostype", "linux");
    MHD_add_response_header(resp, "Server", "berth/" BERTH_VERSION);
    MHD_add_response_header(resp, "Docker-Experimental", "false");
}

/* The engine answers anything it does not route, a wrong method included, so. */
void
docker_front_route_failed(struct api_req *req, enum route_result rr, const char *allow)
{
    if (rr == ROUTE_BAD_PATH)
        api_reply_fail(req, EINVAL, "path %s: a parameter is empty, too long or badly encoded",
                       req->path);
    else
        api_reply_fail(req, ENOENT, "page not found");
}

/* "1.44" to 44; -1 when it is not "1." and digits (the engine's own
 * comparison is per dot-separated number, and every version it knows is 1.x). */
int
docker_version_minor(const char *v, size_t len)
{
    if (len < 3 || v[0] != '1' || v[1] != '.')
        return len == 1 && v[0] >= '0' && v[0] <= '9' ? 0 : -1;
    int minor = 0;
    for (size_t i = 2; i < len; i++) {
        if (v[i] < '0' || v[i] > '9' || minor > 10000)
            return -1;
        minor = minor * 10 + (v[i] - '0');
    }
    return minor;
}

/*
 * "/v1.NN/rest" is "/rest" at version 1.NN, as the engine routes it: a
 * version outside 1.24..1.44 is refused as the engine refuses it (a too
 * old one in plain text, which the oldest clients print as it is).
 */
void
docker_front_rewrite(struct api_req *req)
{
    req->front_version = DOCKER_API_MINOR;
    const char *p = req->path;
    if (p[0] != '/' || p[1] != 'v')
        return;
    size_t n = strspn(p + 2, "0123456789.");
    if (n == 0 || p[2 + n] != '/')
        return;
    char v[32];
    snprintf(v, sizeof(v), "%.*s", (int)(n < 31 ? n : 31), p + 2);
    int minor = docker_version_minor(p + 2, n);
    if (minor >= 0 && minor < DOCKER_API_MIN_MINOR) {
        char msg[256];
        int len = snprintf(msg, sizeof(msg),
                           "client version %s is too old. Minimum supported API version is "
                           "1.%d, please upgrade your client to a newer version\n",
                           v, DOCKER_API_MIN_MINOR);
        snprintf(req->err_code, sizeof(req->err_code), "invalid_parameter");
        api_reply_text(req, 400, "text/plain; charset=utf-8", msg, (size_t)len);
        return;
    }
    if (minor < 0 || minor > DOCKER_API_MINOR) {
        api_reply_fail(req, EINVAL,
                       "client version %s is too new. Maximum supported API version is %s", v,
                       DOCKER_API_VERSION);
        return;
    }
    req->front_version = minor;
    memmove(req->path, p + 2 + n, strlen(p + 2 + n) + 1);
}
