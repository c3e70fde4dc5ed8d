/*
 * What api/containers.c and api/processes.c share: looking a container
 * up for a request (replying 404/503 when it cannot be had) and the JSON
 * of containers and processes. Loop thread.
 */
#ifndef BERTH_API_CONTAINERS_H
#define BERTH_API_CONTAINERS_H

#include <json-c/json.h>

#include "daemon/containers.h"

struct api_req;

/*
 * The registry, or NULL after replying 503 (no store, or no usable
 * runtime driver, with the reason).
 */
struct containers *api_containers(struct api_req *req);

/* The container named by the {handle} parameter, or NULL after replying 404/503. */
struct container *api_container_lookup(struct api_req *req);

/* A process of c named by the {id} parameter, or NULL after replying 404. */
struct ctr_proc *api_proc_lookup(struct api_req *req, struct container *c);

/* "2026-11-30T02:31:41.123Z" for unix milliseconds. */
json_object *api_json_time_ms(int64_t ms);

json_object *api_proc_to_json(const struct ctr_proc *pr);

#endif
