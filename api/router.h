/*
 * The routing table: {method, pattern, handler} entries whose patterns
 * are literal segments and {name} parameters ("/v1/images/{ref}").
 * Matching gives the route and the decoded parameter values, or tells
 * whether the path is known under other methods (405 with Allow) or not
 * at all (404). Pure functions; any thread.
 */
#ifndef BERTH_API_ROUTER_H
#define BERTH_API_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#define ROUTE_MAX_PARAMS 4
#define ROUTE_PARAM_MAX 256

struct api_req;

/* How a route takes its request body. */
enum body_mode {
    BODY_NONE,   /* a body is refused with 400... or ignored when empty */
    BODY_JSON,   /* buffered, at most API_JSON_BODY_MAX bytes (413 past it) */
    BODY_STREAM, /* handed to the route's stream callbacks piece by piece */
    /* Undecided until the first piece: the route's sniff callback looks
     * at it and answers BODY_JSON or BODY_STREAM (POST /v1/images without
     * a Content-Type that says, as curl -d and --data-binary send). */
    BODY_SNIFF,
};

/* A handler either replies (api_reply_*) or suspends the request and
 * replies later from a job's completion. */
typedef void (*route_handler_fn)(struct api_req *req);

/*
 * For routes whose body depends on the request (POST /v1/images takes a
 * JSON source or a tar stream): called once the headers are in, returns
 * the body mode for this request and may reply early with an error.
 */
typedef enum body_mode (*route_begin_fn)(struct api_req *req);
/* For BODY_SNIFF: the body's first piece (len > 0); returns the mode and
 * may reply early with an error (the rest of the body is then dropped). */
typedef enum body_mode (*route_sniff_fn)(struct api_req *req, const char *data, size_t len);

struct route {
    const char *method;
    const char *pattern;
    route_handler_fn handler;
    enum body_mode body;
    route_begin_fn begin; /* optional */
    /* The pattern's last parameter takes the rest of the path, slashes
     * included, up to the literal segments after it (none, or "/json" in
     * "/images/{name}/json"): image names such as docker.io/library/busybox:1. */
    bool rest;
    /* The query parameters it takes (api/query.h), NULL-terminated, or
     * NULL: none. Checked only where the front end asks (/v1). */
    const char *const *query;
    route_sniff_fn sniff; /* with a begin that may answer BODY_SNIFF */
};

struct route_match {
    const struct route *route;
    /* The pattern the path matched, also when the method did not (405),
     * so a refused request is counted under its route. */
    const char *pattern;
    unsigned nparams;
    char params[ROUTE_MAX_PARAMS][ROUTE_PARAM_MAX];
    const char *param_names[ROUTE_MAX_PARAMS]; /* point into the pattern copy below */
    char names_buf[ROUTE_MAX_PARAMS][64];
};

enum route_result {
    ROUTE_FOUND,
    ROUTE_NOT_FOUND,
    ROUTE_METHOD_NOT_ALLOWED,
    ROUTE_BAD_PATH, /* a parameter that is empty, too long or badly encoded */
};

/*
 * Matches method and path (no query string) against n routes. On
 * ROUTE_METHOD_NOT_ALLOWED, allow receives the comma-separated methods the
 * path does accept. Literal segments win over parameters when both match.
 */
enum route_result router_match(const struct route *routes, size_t n, const char *method,
                               const char *path, struct route_match *m, char *allow,
                               size_t allow_len);

/* Returns the value of parameter name from a match, or NULL. */
const char *route_param(const struct route_match *m, const char *name);

#endif
