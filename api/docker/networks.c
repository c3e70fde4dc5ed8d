/*
 * GET /networks and GET /networks/{id}: the networks the Docker API's
 * container create takes, as the engine's built-in ones: "bridge" (the
 * default: berth's network, its CNI bridge --network-name on the
 * --network-pool) and "none" (only a loopback interface). Loop thread.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/net_conf.h"
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

/* The bridge's IPAM Config entry: its pool and gateway, as configured. */
static json_object *
bridge_ipam_config(const struct config *cfg)
{
    json_object *a = json_object_new_array();
    struct net_cidr pool;
    struct err ignored = {0};
    const char *pool_s = cfg->network_pool ? cfg->network_pool : NET_POOL_DEFAULT;
    if (net_cidr_parse(pool_s, &pool, &ignored) < 0)
        return a;
    char subnet[NET_CIDR_STRLEN], gw[INET_ADDRSTRLEN];
    net_cidr_format(&pool, subnet);
    struct in_addr g = net_cidr_first(&pool);
    if (cfg->network_gateway)
        snprintf(gw, sizeof(gw), "%s", cfg->network_gateway);
    else if (!inet_ntop(AF_INET, &g, gw, sizeof(gw)))
        gw[0] = '\0';
    json_object *c = json_object_new_object();
    json_object_object_add(c, "Subnet", json_object_new_string(subnet));
    json_object_object_add(c, "Gateway", json_object_new_string(gw));
    json_object_array_add(a, c);
    return a;
}

static json_object *
network_json(const struct config *cfg, const struct dk_network *n)
{
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
                           bridge ? bridge_ipam_config(cfg) : json_object_new_array());
    json_object_object_add(o, "IPAM", ipam);
    static const char *const off[] = {"Internal", "Attachable", "Ingress", "ConfigOnly", NULL};
    for (size_t i = 0; off[i]; i++)
        json_object_object_add(o, off[i], json_object_new_boolean(false));
    json_object *from = json_object_new_object();
    json_object_object_add(from, "Network", json_object_new_string(""));
    json_object_object_add(o, "ConfigFrom", from);
    json_object_object_add(o, "Containers", json_object_new_object());
    json_object *opts = json_object_new_object();
    if (bridge)
        json_object_object_add(
            opts, "com.docker.network.bridge.name",
            json_object_new_string(cfg->network_name ? cfg->network_name : NET_NAME_DEFAULT));
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
    const struct config *cfg = api_daemon(req->api)->cfg;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < NNETWORKS; i++) {
        const struct dk_network *n = &networks[i];
        if (passes(filters, "name", MATCH_SUBSTR, n, n->name) &&
            passes(filters, "id", MATCH_ID, n, n->name) &&
            passes(filters, "driver", MATCH_EQ, n, n->driver) &&
            passes(filters, "type", MATCH_EQ, n, "builtin") &&
            passes(filters, "scope", MATCH_EQ, n, "local") &&
            !docker_filter_values(filters, "label"))
            json_object_array_add(arr, network_json(cfg, n));
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
            api_reply_json(req, 200, network_json(api_daemon(req->api)->cfg, &networks[i]));
            return;
        }
    api_reply_fail(req, ENOENT, "network %s not found", ref);
}
