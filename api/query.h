/*
 * The query parameters a /v1 route takes, checked before its handler
 * runs: an unknown parameter (a typo such as ?folow=1) or a flag with a
 * value other than 0, 1, true or false is a 400 naming it, instead of
 * being ignored. Pure; loop thread (it reads the MHD connection).
 */
#ifndef BERTH_API_QUERY_H
#define BERTH_API_QUERY_H

#include <stdbool.h>

#include "common/err.h"

struct api_req;
struct route;

/*
 * A route's query list (struct route.query), NULL-terminated: "name" takes
 * any value, "name:flag" takes 0, 1, true or false (or no value), and
 * "prefix.*" takes every name that begins with "prefix." and has more.
 */

/* Checks req's query against route->query (NULL: the route takes none).
 * 0, or -EINVAL with err naming the parameter. */
int api_query_check(const struct api_req *req, const struct route *route, struct err *err);

/* Whether the query list entry spec takes the parameter name. */
bool api_query_entry_takes(const char *spec, const char *name);

#endif
