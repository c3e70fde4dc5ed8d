/*
 * GET /networks and GET /networks/{id}: the one network the Docker API's
 * containers are on. Until container create joins berth's bridge (the
 * network service's second part), that is "none": each container has a
 * network namespace of its own with only a loopback interface. Loop
 * thread.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "store/digest.h"

/* The network's id: as the engine's, 64 hex digits (here of its name). */
static void
network_id(const char *name, char out[65])
{
    char d[DIGEST_STR_LEN];
    if (digest_of(name, strlen(name), d) == 0)
        snprintf(out, 65, "%s", digest_hex(d));
    else
        snprintf(out, 65, "%s", name);
}

static json_object *
network_json(const char *name)
{
    char id[65];
    network_id(name, id);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Name", json_object_new_string(name));
    json_object_object_add(o, "Id", json_object_new_string(id));
    json_object_object_add(o, "Created", docker_time_ms(0));
    json_object_object_add(o, "Scope", json_object_new_string("local"));
    json_object_object_add(o, "Driver", json_object_new_string("null"));
    json_object_object_add(o, "EnableIPv6", json_object_new_boolean(false));
    json_object *ipam = json_object_new_object();
    json_object_object_add(ipam, "Driver", json_object_new_string("default"));
    json_object_object_add(ipam, "Options", NULL);
    json_object_object_add(ipam, "Config", json_object_new_array());
    json_object_object_add(o, "IPAM", ipam);
    static const char *const off[] = {"Internal", "Attachable", "Ingress", "ConfigOnly", NULL};
    for (size_t i = 0; off[i]; i++)
        json_object_object_add(o, off[i], json_object_new_boolean(false));
    json_object *from = json_object_new_object();
    json_object_object_add(from, "Network", json_object_new_string(""));
    json_object_object_add(o, "ConfigFrom", from);
    json_object_object_add(o, "Containers", json_object_new_object());
    json_object_object_add(o, "Options", json_object_new_object());
    json_object_object_add(o, "Labels", json_object_new_object());
    return o;
}

static bool
is_ours(const char *ref)
{
    char id[65];
    network_id("none", id);
    return strcmp(ref, "none") == 0 || (strlen(ref) >= 1 && strncmp(id, ref, strlen(ref)) == 0);
}

void
docker_networks_list(struct api_req *req)
{
    static const char *const known[] = {"name", "id", "driver", "type", "label", "scope", NULL};
    json_object *filters = docker_filters(req, known);
    if (!filters)
        return;
    json_object *arr = json_object_new_array();
    json_object *v = docker_filter_values(filters, "name");
    bool ok = true;
    for (size_t i = 0; v && i < json_object_array_length(v); i++)
        ok = ok && strstr("none", json_object_get_string(json_object_array_get_idx(v, i)));
    if ((v = docker_filter_values(filters, "id")))
        ok = ok && is_ours(json_object_get_string(json_object_array_get_idx(v, 0)));
    if ((v = docker_filter_values(filters, "driver")))
        ok = ok && strcmp(json_object_get_string(json_object_array_get_idx(v, 0)), "null") == 0;
    if ((v = docker_filter_values(filters, "label")))
        ok = false;
    if (ok)
        json_object_array_add(arr, network_json("none"));
    json_object_put(filters);
    api_reply_json(req, 200, arr);
}

void
docker_network_inspect(struct api_req *req)
{
    const char *ref = api_req_param(req, "id");
    if (!is_ours(ref)) {
        api_reply_fail(req, ENOENT, "network %s not found", ref);
        return;
    }
    api_reply_json(req, 200, network_json("none"));
}
