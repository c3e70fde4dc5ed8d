/*
 * The Docker API's routing table (docker-api.yaml lists the same routes;
 * tests/unit/test_docker_api_yaml.c keeps the two in step). Every route
 * is also served under /v1.NN/ (api/docker/front.c strips the prefix).
 */
#include "api/docker/docker.h"
#include "api/request.h"

const struct route docker_routes[] = {
    {"GET", "/_ping", docker_ping, BODY_NONE, NULL},
    {"GET", "/version", docker_version, BODY_NONE, NULL},
    {"GET", "/info", docker_info, BODY_NONE, NULL},
    {"GET", "/events", docker_events, BODY_NONE, NULL},
    {"POST", "/images/load", docker_images_load, BODY_STREAM, docker_images_load_begin},
    {"POST", "/images/create", docker_images_create, BODY_NONE, NULL},
    {"GET", "/images/json", docker_images_list, BODY_NONE, NULL},
    {"GET", "/images/{name}/json", docker_image_inspect, BODY_NONE, NULL, .rest = true},
    {"POST", "/images/{name}/tag", docker_image_tag, BODY_NONE, NULL, .rest = true},
    {"DELETE", "/images/{name}", docker_image_delete, BODY_NONE, NULL, .rest = true},
    {"POST", "/containers/create", docker_containers_create, BODY_JSON, NULL},
    {"GET", "/containers/json", docker_containers_list, BODY_NONE, NULL},
    {"GET", "/containers/{id}/json", docker_container_inspect, BODY_NONE, NULL},
    {"POST", "/containers/{id}/start", docker_container_start, BODY_NONE, NULL},
    {"POST", "/containers/{id}/stop", docker_container_stop, BODY_NONE, NULL},
    {"POST", "/containers/{id}/restart", docker_container_restart, BODY_NONE, NULL},
    {"POST", "/containers/{id}/kill", docker_container_kill, BODY_NONE, NULL},
    {"POST", "/containers/{id}/wait", docker_container_wait, BODY_NONE, NULL},
    {"GET", "/containers/{id}/stats", docker_container_stats, BODY_NONE, NULL},
    {"GET", "/containers/{id}/logs", docker_container_logs, BODY_NONE, NULL},
    {"POST", "/containers/{id}/attach", docker_container_attach, BODY_NONE, NULL},
    {"POST", "/containers/{id}/exec", docker_exec_create, BODY_JSON, NULL},
    {"POST", "/exec/{id}/start", docker_exec_start, BODY_JSON, NULL},
    {"GET", "/exec/{id}/json", docker_exec_inspect, BODY_NONE, NULL},
    {"GET", "/containers/{id}/archive", docker_container_archive_get, BODY_NONE, NULL},
    {"PUT", "/containers/{id}/archive", docker_container_archive_put, BODY_STREAM,
     docker_container_archive_put_begin},
    {"DELETE", "/containers/{id}", docker_container_delete, BODY_NONE, NULL},
    {"POST", "/volumes/create", docker_volumes_create, BODY_JSON, NULL},
    {"POST", "/volumes/prune", docker_volumes_prune, BODY_NONE, NULL},
    {"GET", "/volumes", docker_volumes_list, BODY_NONE, NULL},
    {"GET", "/volumes/{name}", docker_volume_inspect, BODY_NONE, NULL},
    {"DELETE", "/volumes/{name}", docker_volume_delete, BODY_NONE, NULL},
    {"GET", "/networks", docker_networks_list, BODY_NONE, NULL},
    {"GET", "/networks/{id}", docker_network_inspect, BODY_NONE, NULL},
    /* The engine's routes berth answers 501 naming the command (unserved.c);
     * those whose requests carry a JSON body take it first. */
    {"GET", "/containers/{id}/top", docker_unserved, BODY_NONE, NULL},
    {"POST", "/containers/{id}/rename", docker_unserved, BODY_NONE, NULL},
    {"POST", "/containers/{id}/pause", docker_unserved, BODY_NONE, NULL},
    {"POST", "/containers/{id}/unpause", docker_unserved, BODY_NONE, NULL},
    {"POST", "/containers/{id}/update", docker_unserved, BODY_JSON, NULL},
    {"GET", "/containers/{id}/changes", docker_unserved, BODY_NONE, NULL},
    {"GET", "/containers/{id}/export", docker_unserved, BODY_NONE, NULL},
    {"POST", "/containers/prune", docker_unserved, BODY_NONE, NULL},
    {"POST", "/commit", docker_unserved, BODY_JSON, NULL},
    {"GET", "/images/get", docker_unserved, BODY_NONE, NULL},
    {"GET", "/images/search", docker_unserved, BODY_NONE, NULL},
    {"POST", "/images/prune", docker_unserved, BODY_NONE, NULL},
    {"GET", "/images/{name}/history", docker_unserved, BODY_NONE, NULL, .rest = true},
    {"POST", "/images/{name}/push", docker_unserved, BODY_NONE, NULL, .rest = true},
    {"POST", "/networks/create", docker_unserved, BODY_JSON, NULL},
    {"DELETE", "/networks/{id}", docker_unserved, BODY_NONE, NULL},
    {"POST", "/networks/{id}/connect", docker_unserved, BODY_JSON, NULL},
    {"POST", "/networks/{id}/disconnect", docker_unserved, BODY_JSON, NULL},
    {"POST", "/networks/prune", docker_unserved, BODY_NONE, NULL},
    {"GET", "/system/df", docker_unserved, BODY_NONE, NULL},
    {"POST", "/auth", docker_unserved, BODY_JSON, NULL},
};

const size_t docker_routes_count = sizeof(docker_routes) / sizeof(docker_routes[0]);

const struct api_front docker_front = {
    .name = "docker",
    .routes = docker_routes,
    .nroutes = sizeof(docker_routes) / sizeof(docker_routes[0]),
    .reserve_path = NULL,
    .rewrite = docker_front_rewrite,
    .route_failed = docker_front_route_failed,
    .decorate = docker_front_decorate,
    .err_status = docker_err_status,
    .err_body = docker_front_err_body,
};
