/*
 * The routing table: every route the API serves. tests/api checks that
 * this table and openapi.yaml list the same routes.
 */
#include "api/api.h"
#include "api/front.h"
#include "api/handlers.h"
#include "api/request.h"

/* The query parameters of each route, as openapi.yaml documents them
 * (tests/unit/test_openapi.c keeps the two in step). */
static const char *const q_import[] = {"name", "platform", NULL};
static const char *const q_props[] = {"property.*", NULL};
static const char *const q_wait[] = {"timeout", NULL};
static const char *const q_bytes[] = {"offset", "follow:flag", NULL};
static const char *const q_output[] = {"stdout:flag", "stderr:flag",     "since",       "until",
                                       "tail",        "timestamps:flag", "follow:flag", NULL};
static const char *const q_stdin[] = {"close:flag", NULL};
static const char *const q_force[] = {"force:flag", NULL};
static const char *const q_path[] = {"path", NULL};
#ifdef BERTH_BENCH_ROUTES
static const char *const q_echo[] = {"send", "write_max", "close_after", NULL};
#endif

const struct route api_routes[] = {
    {"GET", "/v1/health", health_get, BODY_NONE, NULL},
    {"GET", "/v1/metrics", metrics_get, BODY_NONE, NULL},
    {"GET", "/v1/images", images_list, BODY_NONE, NULL},
    {"POST", "/v1/images", images_post, BODY_JSON, images_post_begin, .query = q_import,
     .sniff = images_post_sniff},
    {"POST", "/v1/images/prune", images_prune, BODY_JSON, NULL},
    {"GET", "/v1/images/{ref}", images_get, BODY_NONE, NULL, .rest = true},
    {"DELETE", "/v1/images/{ref}", images_delete, BODY_NONE, NULL, .rest = true},
    {"GET", "/v1/containers", containers_list, BODY_NONE, NULL, .query = q_props},
    {"POST", "/v1/containers", containers_post, BODY_JSON, NULL},
    {"GET", "/v1/containers/{handle}", containers_get, BODY_NONE, NULL},
    {"DELETE", "/v1/containers/{handle}", containers_delete, BODY_NONE, NULL},
    {"GET", "/v1/containers/{handle}/processes", processes_list, BODY_NONE, NULL},
    {"POST", "/v1/containers/{handle}/processes", processes_post, BODY_JSON, NULL},
    {"GET", "/v1/containers/{handle}/processes/{id}", processes_get, BODY_NONE, NULL},
    {"DELETE", "/v1/containers/{handle}/processes/{id}", processes_delete, BODY_NONE, NULL},
    {"GET", "/v1/containers/{handle}/processes/{id}/wait", processes_wait, BODY_NONE, NULL,
     .query = q_wait},
    {"GET", "/v1/containers/{handle}/processes/{id}/stdout", processes_stdout, BODY_NONE, NULL,
     .query = q_bytes},
    {"GET", "/v1/containers/{handle}/processes/{id}/stderr", processes_stderr, BODY_NONE, NULL,
     .query = q_bytes},
    {"GET", "/v1/containers/{handle}/processes/{id}/output", processes_output, BODY_NONE, NULL,
     .query = q_output},
    {"PUT", "/v1/containers/{handle}/processes/{id}/stdin", processes_stdin, BODY_STREAM,
     processes_stdin_begin, .query = q_stdin},
    {"POST", "/v1/containers/{handle}/processes/{id}/signal", processes_signal, BODY_JSON, NULL},
    {"GET", "/v1/volumes", volumes_list, BODY_NONE, NULL, .query = q_props},
    {"POST", "/v1/volumes", volumes_create, BODY_JSON, NULL},
    {"GET", "/v1/volumes/{handle}", volumes_get, BODY_NONE, NULL},
    {"PATCH", "/v1/volumes/{handle}", volumes_patch, BODY_JSON, NULL},
    {"DELETE", "/v1/volumes/{handle}", volumes_delete, BODY_NONE, NULL, .query = q_force},
    {"GET", "/v1/volumes/{handle}/files", volumes_files_get, BODY_NONE, NULL, .query = q_path},
    {"PUT", "/v1/volumes/{handle}/files", volumes_files_put, BODY_STREAM, volumes_files_put_begin,
     .query = q_path},
#ifdef BERTH_BENCH_ROUTES
    {"POST", "/v1/debug/hash", bench_hash_post, BODY_JSON, NULL},
    {"POST", "/v1/debug/echo-upgrade", bench_echo_upgrade_post, BODY_JSON, NULL, .query = q_echo},
#endif
};

const size_t api_routes_count = sizeof(api_routes) / sizeof(api_routes[0]);

const struct api_front api_front_v1 = {
    .name = "v1",
    .routes = api_routes,
    .nroutes = sizeof(api_routes) / sizeof(api_routes[0]),
    .reserve_path = "/v1/health",
    .route_failed = api_v1_route_failed,
    .strict_query = true,
    .err_status = api_err_status,
    .err_body = api_v1_error_body,
};
