/*
 * A front end: one routing table served by an HTTP server of its own,
 * with its own error shape, statuses and headers, over the same request
 * machinery (api/access.c and api/request.c: limits, bodies, suspension,
 * the request log) and the same daemon services. Two exist: the /v1 API
 * (api_front_v1, in routes.c) and the Docker Engine API subset (docker_front, api/docker/).
 * Their routes never mix: each server routes only its own table.
 * Definitions are static tables; loop thread.
 */
#ifndef BERTH_API_FRONT_H
#define BERTH_API_FRONT_H

#include <json-c/json.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "api/router.h"

struct api_req;

struct api_front {
    const char *name; /* "v1", "docker": for the log */
    const struct route *routes;
    size_t nroutes;
    /* The one request served on connections past --max-connections (GET
     * of this path), or NULL when the front end keeps no reserve. */
    const char *reserve_path;
    /* Before routing: may rewrite req->path (the Docker API's /v1.NN/
     * prefix) or reply (then routing is skipped). NULL: none. */
    void (*rewrite)(struct api_req *req);
    /* The answer when routing failed (no route, a method the path does
     * not take, a bad parameter); allow lists the methods it takes. */
    void (*route_failed)(struct api_req *req, enum route_result rr, const char *allow);
    /* Headers every response of this front end carries. NULL: none. */
    void (*decorate)(struct MHD_Response *resp);
    /* The status for an error code (common/err.h), and a code string for
     * the log and the body. */
    unsigned (*err_status)(int code, const char **code_str);
    /* Refuse a query parameter the route does not list (route.query),
     * with 400 naming it: /v1 does; the Docker API's clients send
     * parameters berth ignores. */
    bool strict_query;
    /* An error body (the reference is the caller's). */
    json_object *(*err_body)(unsigned status, const char *code, const char *msg);
};

/* The /v1 API (api/routes.c), and its answers when routing failed (access.c). */
extern const struct api_front api_front_v1;
void api_v1_route_failed(struct api_req *req, enum route_result rr, const char *allow);

#endif
