/*
 * What api/containers.c and api/processes.c share: the JSON of
 * containers and processes. Loop thread.
 */
#ifndef BERTH_API_CONTAINERS_H
#define BERTH_API_CONTAINERS_H

#include <json-c/json.h>
#include <stdint.h>

#include "daemon/containers.h"

struct ctr_usage;

/* "2026-11-30T02:31:41.123Z" for unix milliseconds. */
json_object *api_json_time_ms(int64_t ms);
/* "2026-11-30T02:31:41Z" for unix seconds. */
json_object *api_json_time_s(int64_t s);

json_object *api_proc_to_json(const struct ctr_proc *pr);
struct net_attachment;
/* {"ip", "prefix", "gateway", "ports": [{"host", "container", "protocol"}]}, or
 * {"disabled": true, "ports": []} for a loopback-only container. */
json_object *api_network_to_json(const struct net_attachment *a);
/* usage NULL leaves it out. */
json_object *api_container_to_json(const struct container *c, const struct ctr_usage *usage);

/* A NULL-terminated vector of the strings of arr; EINVAL naming field. */
int api_parse_strv(json_object *arr, const char *field, char ***out, struct err *err);

#endif
