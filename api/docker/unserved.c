/*
 * The engine's routes that berth does not serve but the docker CLI
 * commonly calls: each is answered 501 naming the command and the route,
 * instead of the engine's bare "page not found" for a path it has never
 * heard of (which reads as a typo in the user's command). Loop thread.
 */
#include "api/docker/docker.h"

#include <string.h>

#include "api/request.h"

static const struct {
    const char *method;
    const char *pattern;
    const char *command;
} unserved[] = {
    {"GET", "/containers/{id}/top", "docker top"},
    {"POST", "/containers/{id}/rename", "docker rename"},
    {"POST", "/containers/{id}/pause", "docker pause"},
    {"POST", "/containers/{id}/unpause", "docker unpause"},
    {"POST", "/containers/{id}/update", "docker update"},
    {"GET", "/containers/{id}/changes", "docker diff"},
    {"GET", "/containers/{id}/export", "docker export"},
    {"POST", "/containers/prune", "docker container prune"},
    {"POST", "/commit", "docker commit"},
    {"GET", "/images/get", "docker save"},
    {"GET", "/images/search", "docker search"},
    {"POST", "/images/prune", "docker image prune"},
    {"GET", "/images/{name}/history", "docker history"},
    {"POST", "/images/{name}/push", "docker push"},
    {"POST", "/networks/create", "docker network create"},
    {"DELETE", "/networks/{id}", "docker network rm"},
    {"POST", "/networks/{id}/connect", "docker network connect"},
    {"POST", "/networks/{id}/disconnect", "docker network disconnect"},
    {"POST", "/networks/prune", "docker network prune"},
    {"GET", "/system/df", "docker system df"},
    {"POST", "/auth", "docker login"},
};

void
docker_unserved(struct api_req *req)
{
    const struct route *r = req->match.route;
    for (size_t i = 0; r && i < sizeof(unserved) / sizeof(unserved[0]); i++) {
        if (strcmp(unserved[i].method, r->method) == 0 &&
            strcmp(unserved[i].pattern, r->pattern) == 0) {
            api_reply_fail(req, ENOSYS, "berth does not implement %s (%s %s)", unserved[i].command,
                           r->method, r->pattern);
            return;
        }
    }
    api_reply_fail(req, ENOSYS, "berth does not implement %s %s", req->method, req->path);
}
