/*
 * GET /networks and GET /networks/{id}: the networks the Docker API's
 * container create takes, as the engine's built-in ones: "bridge" (the
 * default: berth's network, its CNI bridge with the pools and gateways the
 * network service uses, berth's --network-pool or those of an operator's
 * --cni-config) and "none" (only a loopback interface). Loop thread.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "daemon/daemon.h"
#include "daemon/net.h"
#include "store/digest.h"

struct dk_network {
    const char *name, *driver;
};

static const struct dk_network networks[] = {{"bridge", "bridge"}, {"none", "null"}};
#define NNETWORKS (sizeof(networks) / sizeof(networks[0]))

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

/* The bridge's IPAM Config entries: its pools and gateways, as the network service uses them. */
static json_object *
bridge_ipam_config(const struct net_ipam *ipam)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < ipam->npools; i++) {
        json_object *c = json_object_new_object();
        json_object_object_add(c, "Subnet", json_object_new_string(ipam->pools[i].subnet));
        json_object_object_add(c, "Gateway", json_object_new_string(ipam->pools[i].gateway));
        json_object_array_add(a, c);
    }
    return a;
}

static json_object *
network_json(const struct daemon *d, const struct dk_network *n)
{
    struct net_ipam addrs = {0};
    if (d->net)
        net_ipam_get(d->net, &addrs);
    char id[65];
    network_id(n->name, id);
    bool bridge = strcmp(n->name, "bridge") == 0;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Name", json_object_new_string(n->name));
    json_object_object_add(o, "Id", json_object_new_string(id));
    json_object_object_add(o, "Created", docker_time_ms(0));
    json_object_object_add(o, "Scope", json_object_new_string("local"));
    json_object_object_add(o, "Driver", json_object_new_string(n->driver));
    json_object_object_add(o, "EnableIPv6", json_object_new_boolean(false));
    json_object *ipam = json_object_new_object();
    json_object_object_add(ipam, "Driver", json_object_new_string("default"));
    json_object_object_add(ipam, "Options", NULL);
    json_object_object_add(ipam, "Config",
                           bridge ? bridge_ipam_config(&addrs) : json_object_new_array());
    json_object_object_add(o, "IPAM", ipam);
    static const char *const off[] = {"Internal", "Attachable", "Ingress", "ConfigOnly", NULL};
    for (size_t i = 0; off[i]; i++)
        json_object_object_add(o, off[i], json_object_new_boolean(false));
    json_object *from = json_object_new_object();
    json_object_object_add(from, "Network", json_object_new_string(""));
    json_object_object_add(o, "ConfigFrom", from);
    json_object_object_add(o, "Containers", json_object_new_object());
    json_object *opts = json_object_new_object();
    if (bridge && addrs.name[0])
        json_object_object_add(opts, "com.docker.network.bridge.name",
                               json_object_new_string(addrs.name));
    json_object_object_add(o, "Options", opts);
    json_object_object_add(o, "Labels", json_object_new_object());
    return o;
}

/* Whether ref is a prefix of n's id. */
static bool
id_prefix(const struct dk_network *n, const char *ref)
{
    char id[65];
    network_id(n->name, id);
    return *ref && strncmp(id, ref, strlen(ref)) == 0;
}

/* Whether ref names n: its name, or a prefix of its id. */
static bool
names(const struct dk_network *n, const char *ref)
{
    return strcmp(ref, n->name) == 0 || id_prefix(n, ref);
}

enum match { MATCH_SUBSTR, MATCH_ID, MATCH_EQ };

/* Whether n passes the filter key: any of its values matches (none: all pass). */
static bool
passes(json_object *filters, const char *key, enum match how, const struct dk_network *n,
       const char *value)
{
    json_object *v = docker_filter_values(filters, key);
    if (!v)
        return true;
    for (size_t i = 0; i < json_object_array_length(v); i++) {
        const char *want = json_object_get_string(json_object_array_get_idx(v, i));
        bool ok = how == MATCH_SUBSTR ? strstr(value, want) != NULL
                  : how == MATCH_ID   ? id_prefix(n, want)
                                      : strcmp(value, want) == 0;
        if (ok)
            return true;
    }
    return false;
}

void
docker_networks_list(struct api_req *req)
{
    static const char *const known[] = {"name", "id", "driver", "type", "label", "scope", NULL};
    json_object *filters = docker_filters(req, known);
    if (!filters)
        return;
    const struct daemon *d = api_daemon(req->api);
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < NNETWORKS; i++) {
        const struct dk_network *n = &networks[i];
        if (passes(filters, "name", MATCH_SUBSTR, n, n->name) &&
            passes(filters, "id", MATCH_ID, n, n->name) &&
            passes(filters, "driver", MATCH_EQ, n, n->driver) &&
            passes(filters, "type", MATCH_EQ, n, "builtin") &&
            passes(filters, "scope", MATCH_EQ, n, "local") &&
            !docker_filter_values(filters, "label"))
            json_object_array_add(arr, network_json(d, n));
    }
    json_object_put(filters);
    api_reply_json(req, 200, arr);
}

void
docker_network_inspect(struct api_req *req)
{
    const char *ref = api_req_param(req, "id");
    for (size_t i = 0; i < NNETWORKS; i++)
        if (names(&networks[i], ref)) {
            api_reply_json(req, 200, network_json(api_daemon(req->api), &networks[i]));
            return;
        }
    api_reply_fail(req, ENOENT, "network %s not found", ref);
}
