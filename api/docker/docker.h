/*
 * The Docker Engine API subset (docker-api.yaml): a second front end over
 * the daemon's services, served by its own HTTP server (--docker-listen),
 * so its routes never mix with /v1. Its handlers parse the engine's
 * request shapes, call the same services as /v1 and render the engine's
 * answers; nothing of containers, processes, images or volumes is done
 * here that the services do not do for /v1 too. One group of routes per
 * file: system.c, images.c, pull.c, containers.c (create, inspect, list),
 * ctr_ops.c (start, stop, kill, restart, wait, delete, stats), archive.c
 * (docker cp), volumes.c,
 * events.c and networks.c. Loop thread.
 */
#ifndef BERTH_API_DOCKER_DOCKER_H
#define BERTH_API_DOCKER_DOCKER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/front.h"
#include "common/err.h"

struct api_req;
struct container;
struct daemon;

/* The API version berth speaks, and the oldest it accepts. */
#define DOCKER_API_VERSION "1.44"
#define DOCKER_API_MINOR 44
#define DOCKER_API_MIN_MINOR 24

extern const struct api_front docker_front;
extern const struct route docker_routes[];
extern const size_t docker_routes_count;

/* front.c: the front end's parts (api/front.h) */
unsigned docker_err_status(int code, const char **code_str);
json_object *docker_front_err_body(unsigned status, const char *code, const char *msg);
void docker_front_decorate(struct MHD_Response *resp);
void docker_front_route_failed(struct api_req *req, enum route_result rr, const char *allow);
void docker_front_rewrite(struct api_req *req);
/* "1.44" (len bytes) as 44; 0 for "1", -1 when it is not a 1.x version. */
int docker_version_minor(const char *v, size_t len);
/* A query boolean as the engine reads it: "", 0, no, false, none (any case) are false. */
bool docker_query_bool(const struct api_req *req, const char *name, bool dflt);
/* A whole-number query argument: 1 present, 0 absent, -EINVAL naming it. */
int docker_query_int(const struct api_req *req, const char *name, int64_t min, int64_t max,
                     int64_t *out, struct err *err);
/*
 * The filters query argument ({"label": ["a=b"], "status": ["exited"]},
 * or the older {"label": {"a=b": true}}) as an object of arrays of
 * strings (the caller's reference; an empty object when absent); NULL
 * after replying 400.
 */
json_object *docker_filters(struct api_req *req, const char *const *known);
/* The values filters has for key (NULL when none). */
json_object *docker_filter_values(json_object *filters, const char *key);
/* Whether labels (keys and values, n of them) match every "key" or "key=value" of want. */
bool docker_labels_match(json_object *want, char *const *keys, char *const *values, size_t n);
/* RFC 3339 with nanoseconds, as the engine writes times; "0001-01-01T00:00:00Z" for 0. */
json_object *docker_time_ms(int64_t unix_ms);
/* JSON string array of v (NULL-terminated), or null when v is NULL and null_if_empty. */
json_object *docker_strv(char *const *v, bool null_if_null);

/*
 * A program that could not start (the message of process_start's
 * ERR_INVALID_CONTENT, "spawn ID: exec PROG: REASON") in the engine's words, which the docker
 * CLI reads its exit code from: exec: "PROG": executable file not found
 * in $PATH (a name without '/'), exec: "PROG": stat PROG: no such file or
 * directory, exec: "PROG": permission denied; anything else as berth has
 * it, its errno text in lowercase as Go's errors have them.
 */
void docker_start_failure(const char *msg, char *out, size_t n);
/* The whole of start's answer (and State.Error) for such a failure, as the
 * engine words it: "failed to create task for container: ...". */
void docker_start_message(const char *msg, char *out, size_t n);

/* containers.c: lookups shared by the container routes. */
/* Containers the Docker API shows: those created with a main process. */
bool docker_ctr_visible(const struct container *c);
/* The container the {id} parameter names (id, unique prefix, name with or
 * without '/'), or NULL after replying 404 "No such container: x" / 400. */
struct container *docker_ctr_param(struct api_req *req);
/* Docker's state name for c: created, running, exited, removing, dead. */
const char *docker_ctr_status(const struct container *c);
/* Container JSON as GET /containers/json lists it. */
json_object *docker_ctr_summary(const struct container *c);

/* system.c */
void docker_ping(struct api_req *req);
void docker_version(struct api_req *req);
void docker_info(struct api_req *req);

/* images.c */
enum body_mode docker_images_load_begin(struct api_req *req);
void docker_images_load(struct api_req *req);
void docker_images_list(struct api_req *req);
void docker_image_inspect(struct api_req *req);
void docker_image_tag(struct api_req *req);
void docker_image_delete(struct api_req *req);
/* pull.c */
void docker_images_create(struct api_req *req);

/* containers.c */
void docker_containers_create(struct api_req *req);
void docker_containers_list(struct api_req *req);
void docker_container_inspect(struct api_req *req);

/* ctr_ops.c */
void docker_container_start(struct api_req *req);
void docker_container_stop(struct api_req *req);
void docker_container_restart(struct api_req *req);
void docker_container_kill(struct api_req *req);
void docker_container_wait(struct api_req *req);
void docker_container_delete(struct api_req *req);
void docker_container_stats(struct api_req *req);

/* logs.c and attach.c */
void docker_container_logs(struct api_req *req);
void docker_container_attach(struct api_req *req);
/* Hijacks req for the output (and stdin) of container handle's main
 * process (proc_id NULL) or of its process proc_id. 0, or an error with
 * nothing replied. */
int docker_attach_hijack(struct api_req *req, const char *handle, const char *proc_id, bool in,
                         bool out, bool errs, struct err *err);
/* Hijacks req as an attach does and sends only msg (and CRLF) in a stdout
 * frame, then ends the stream: the engine's exec start whose program
 * could not start. 0, or an error with nothing answered. */
int docker_hijack_message(struct api_req *req, const char *msg, struct err *err);

/* exec.c */
void docker_exec_create(struct api_req *req);
void docker_exec_start(struct api_req *req);
void docker_exec_inspect(struct api_req *req);

/* archive.c: docker cp (HEAD is routed to the GET handler) */
void docker_container_archive_get(struct api_req *req);
enum body_mode docker_container_archive_put_begin(struct api_req *req);
void docker_container_archive_put(struct api_req *req);

/* volumes.c */
void docker_volumes_create(struct api_req *req);
void docker_volumes_list(struct api_req *req);
void docker_volume_inspect(struct api_req *req);
void docker_volume_delete(struct api_req *req);
void docker_volumes_prune(struct api_req *req);

/* events.c and networks.c */
void docker_events(struct api_req *req);
void docker_networks_list(struct api_req *req);
void docker_network_inspect(struct api_req *req);

/* unserved.c: the engine's routes berth does not serve, answered 501 naming the command. */
void docker_unserved(struct api_req *req);

#endif
