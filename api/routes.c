/*
 * The routing table: every route the API serves. tests/api checks that
 * this table and openapi.yaml list the same routes.
 */
#include "api/api.h"
#include "api/handlers.h"

const struct route api_routes[] = {
    {"GET", "/v1/health", health_get, BODY_NONE, NULL},
    {"GET", "/v1/metrics", metrics_get, BODY_NONE, NULL},
    {"GET", "/v1/images", images_list, BODY_NONE, NULL},
    {"POST", "/v1/images", images_post, BODY_JSON, images_post_begin},
    {"POST", "/v1/images/prune", images_prune, BODY_JSON, NULL},
    {"GET", "/v1/images/{ref}", images_get, BODY_NONE, NULL},
    {"DELETE", "/v1/images/{ref}", images_delete, BODY_NONE, NULL},
#ifdef BERTH_BENCH_ROUTES
    {"POST", "/v1/debug/hash", bench_hash_post, BODY_JSON, NULL},
#endif
};

const size_t api_routes_count = sizeof(api_routes) / sizeof(api_routes[0]);
