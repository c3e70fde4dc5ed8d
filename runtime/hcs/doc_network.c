/*
 * HCN documents (doc_network.h): network, endpoint, namespace, namespace
 * modification and query. Pure json-c construction; any thread.
 */
#include "runtime/hcs/doc_network.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hcs/guid.h"

#define HCN_PROTOCOL_TCP 6
#define HCN_PROTOCOL_UDP 17

static json_object *
schema_version(void)
{
    json_object *v = json_object_new_object();
    json_object_object_add(v, "Major", json_object_new_int(HCN_SCHEMA_MAJOR));
    json_object_object_add(v, "Minor", json_object_new_int(HCN_SCHEMA_MINOR));
    return v;
}

static json_object *
doc_new(void)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "SchemaVersion", schema_version());
    return o;
}

static void
add_str(json_object *o, const char *key, const char *v)
{
    json_object_object_add(o, key, json_object_new_string(v));
}

int
hcn_ipv4_parse(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int part = 0; part < 4; part++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned n = 0;
        const char *start = s;
        while (*s >= '0' && *s <= '9' && s - start < 4)
            n = n * 10 + (unsigned)(*s++ - '0');
        if (n > 255 || (s - start > 1 && *start == '0') || s - start > 3)
            return -EINVAL;
        v = v << 8 | n;
        if (part < 3 && *s++ != '.')
            return -EINVAL;
    }
    if (*s)
        return -EINVAL;
    *out = v;
    return 0;
}

int
hcn_cidr_parse(const char *s, uint32_t *addr, unsigned *prefix)
{
    const char *slash = strchr(s, '/');
    char ip[16];
    if (!slash || (size_t)(slash - s) >= sizeof(ip))
        return -EINVAL;
    memcpy(ip, s, (size_t)(slash - s));
    ip[slash - s] = '\0';
    const char *p = slash + 1;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1]) || strlen(p) > 2)
        return -EINVAL;
    unsigned n = (unsigned)atoi(p);
    if (n > 32 || hcn_ipv4_parse(ip, addr) < 0)
        return -EINVAL;
    *prefix = n;
    return 0;
}

static bool
name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 15)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* {"ServerList": [...]}, each a valid address. */
static int
dns_add(json_object *o, const char *const *dns, size_t n, struct err *err)
{
    if (n == 0)
        return 0;
    json_object *list = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        uint32_t a;
        if (!dns[i] || hcn_ipv4_parse(dns[i], &a) < 0) {
            json_object_put(list);
            return err_set(err, EINVAL, "hcn document: dns server %.64s is not an IPv4 address",
                           dns[i] ? dns[i] : "(null)");
        }
        json_object_array_add(list, json_object_new_string(dns[i]));
    }
    json_object *d = json_object_new_object();
    json_object_object_add(d, "ServerList", list);
    json_object_object_add(o, "Dns", d);
    return 0;
}

static json_object *
default_route(const char *next_hop)
{
    json_object *r = json_object_new_object();
    add_str(r, "NextHop", next_hop);
    add_str(r, "DestinationPrefix", "0.0.0.0/0");
    json_object *routes = json_object_new_array();
    json_object_array_add(routes, r);
    return routes;
}

json_object *
hcn_doc_network(const struct hcn_network_doc *n, struct err *err)
{
    if (!name_valid(n->name)) {
        err_set(err, EINVAL, "hcn network: name %.64s is not 1-15 of [A-Za-z0-9_.-]",
                n->name ? n->name : "(null)");
        return NULL;
    }
    uint32_t net, gw;
    unsigned prefix;
    if (!n->pool || hcn_cidr_parse(n->pool, &net, &prefix) < 0 || prefix < 8 || prefix > 30) {
        err_set(err, EINVAL, "hcn network %s: pool %.64s is not an IPv4 CIDR of prefix 8-30",
                n->name, n->pool ? n->pool : "(null)");
        return NULL;
    }
    uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
    if (net & ~mask) {
        err_set(err, EINVAL, "hcn network %s: pool %s has host bits set", n->name, n->pool);
        return NULL;
    }
    if (!n->gateway || hcn_ipv4_parse(n->gateway, &gw) < 0 || (gw & mask) != net || gw == net ||
        gw == (net | ~mask)) {
        err_set(err, EINVAL, "hcn network %s: gateway %.64s is not a host address of the pool %s",
                n->name, n->gateway ? n->gateway : "(null)", n->pool);
        return NULL;
    }
    json_object *o = doc_new();
    add_str(o, "Name", n->name);
    add_str(o, "Type", "NAT");
    json_object *subnet = json_object_new_object();
    add_str(subnet, "IpAddressPrefix", n->pool);
    json_object_object_add(subnet, "Routes", default_route(n->gateway));
    json_object *subnets = json_object_new_array();
    json_object_array_add(subnets, subnet);
    json_object *ipam = json_object_new_object();
    add_str(ipam, "Type", "Static");
    json_object_object_add(ipam, "Subnets", subnets);
    json_object *ipams = json_object_new_array();
    json_object_array_add(ipams, ipam);
    json_object_object_add(o, "Ipams", ipams);
    if (dns_add(o, n->dns, n->ndns, err) < 0) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* The handle of a container as berth takes it: 1-128 of [A-Za-z0-9_.-]. */
static bool
handle_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static json_object *
port_policy(const struct hcn_port *p, struct err *err)
{
    int proto;
    if (p->protocol && strcmp(p->protocol, "tcp") == 0)
        proto = HCN_PROTOCOL_TCP;
    else if (p->protocol && strcmp(p->protocol, "udp") == 0)
        proto = HCN_PROTOCOL_UDP;
    else {
        err_set(err, EINVAL, "hcn endpoint: port protocol %.16s is not tcp or udp",
                p->protocol ? p->protocol : "(null)");
        return NULL;
    }
    uint32_t a;
    if (p->host_port == 0 || p->container_port == 0 ||
        (p->host_ip && hcn_ipv4_parse(p->host_ip, &a) < 0)) {
        err_set(err, EINVAL, "hcn endpoint: port %u to %u (host address %.64s) is not valid",
                p->host_port, p->container_port, p->host_ip ? p->host_ip : "any");
        return NULL;
    }
    json_object *s = json_object_new_object();
    json_object_object_add(s, "Protocol", json_object_new_int(proto));
    json_object_object_add(s, "InternalPort", json_object_new_int(p->container_port));
    json_object_object_add(s, "ExternalPort", json_object_new_int(p->host_port));
    if (p->host_ip)
        add_str(s, "VIP", p->host_ip);
    json_object *pol = json_object_new_object();
    add_str(pol, "Type", "PortMapping");
    json_object_object_add(pol, "Settings", s);
    return pol;
}

json_object *
hcn_doc_endpoint(const struct hcn_endpoint_doc *e, struct err *err)
{
    if (!handle_valid(e->container)) {
        err_set(err, EINVAL, "hcn endpoint: container handle %.64s is not valid",
                e->container ? e->container : "(null)");
        return NULL;
    }
    if (!e->network_id || !hcs_guid_valid(e->network_id)) {
        err_set(err, EINVAL, "hcn endpoint %s-ep: network id %.64s is not a GUID", e->container,
                e->network_id ? e->network_id : "(null)");
        return NULL;
    }
    uint32_t a;
    if (e->ip && (hcn_ipv4_parse(e->ip, &a) < 0 || e->prefix_len < 8 || e->prefix_len > 30)) {
        err_set(err, EINVAL, "hcn endpoint %s-ep: address %.64s/%u is not valid", e->container,
                e->ip, e->prefix_len);
        return NULL;
    }
    if (e->gateway && hcn_ipv4_parse(e->gateway, &a) < 0) {
        err_set(err, EINVAL, "hcn endpoint %s-ep: gateway %.64s is not an IPv4 address",
                e->container, e->gateway);
        return NULL;
    }
    for (size_t i = 0; i < e->nports; i++) {
        for (size_t j = 0; j < i; j++) {
            if (e->ports[i].host_port == e->ports[j].host_port && e->ports[i].protocol &&
                e->ports[j].protocol && strcmp(e->ports[i].protocol, e->ports[j].protocol) == 0) {
                err_set(err, EINVAL, "hcn endpoint %s-ep: host port %s/%u is forwarded twice",
                        e->container, e->ports[i].protocol, e->ports[i].host_port);
                return NULL;
            }
        }
    }
    if (e->owner && !hcn_owner_valid(e->owner)) {
        err_set(err, EINVAL, "hcn endpoint %s-ep: owner %.64s is not %d hex digits", e->container,
                e->owner, HCN_OWNER_LEN);
        return NULL;
    }
    json_object *o = doc_new();
    char name[160];
    snprintf(name, sizeof(name), "%s-ep%s%s", e->container, e->owner ? "-" : "",
             e->owner ? e->owner : "");
    add_str(o, "Name", name);
    add_str(o, "HostComputeNetwork", e->network_id);
    if (e->ip) {
        json_object *c = json_object_new_object();
        add_str(c, "IpAddress", e->ip);
        json_object_object_add(c, "PrefixLength", json_object_new_int((int)e->prefix_len));
        json_object *cs = json_object_new_array();
        json_object_array_add(cs, c);
        json_object_object_add(o, "IpConfigurations", cs);
    }
    if (e->gateway)
        json_object_object_add(o, "Routes", default_route(e->gateway));
    if (dns_add(o, e->dns, e->ndns, err) < 0) {
        json_object_put(o);
        return NULL;
    }
    if (e->nports) {
        json_object *pols = json_object_new_array();
        json_object_object_add(o, "Policies", pols);
        for (size_t i = 0; i < e->nports; i++) {
            json_object *p = port_policy(&e->ports[i], err);
            if (!p) {
                json_object_put(o);
                return NULL;
            }
            json_object_array_add(pols, p);
        }
    }
    return o;
}

json_object *
hcn_doc_namespace(void)
{
    json_object *o = doc_new();
    add_str(o, "Type", "Host");
    return o;
}

json_object *
hcn_doc_namespace_endpoint(const char *request, const char *endpoint_id, struct err *err)
{
    if (!request || (strcmp(request, "Add") != 0 && strcmp(request, "Remove") != 0)) {
        err_set(err, EINVAL, "hcn namespace: request %.16s is not Add or Remove",
                request ? request : "(null)");
        return NULL;
    }
    if (!endpoint_id || !hcs_guid_valid(endpoint_id)) {
        err_set(err, EINVAL, "hcn namespace: endpoint id %.64s is not a GUID",
                endpoint_id ? endpoint_id : "(null)");
        return NULL;
    }
    json_object *o = json_object_new_object();
    add_str(o, "ResourceType", "Endpoint");
    add_str(o, "RequestType", request);
    json_object *s = json_object_new_object();
    add_str(s, "EndpointId", endpoint_id);
    json_object_object_add(o, "Settings", s);
    return o;
}

/* An HcnEnumerate* query whose filter is {key: value}. */
static json_object *
query_one(const char *key, const char *value)
{
    json_object *o = doc_new();
    json_object_object_add(o, "Flags", json_object_new_int(0));
    /* HNS takes the filter as a string holding JSON. */
    json_object *f = json_object_new_object();
    add_str(f, key, value);
    add_str(
        o, "Filter",
        json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(f);
    return o;
}

bool
hcn_owner_valid(const char *s)
{
    if (!s || strlen(s) != HCN_OWNER_LEN)
        return false;
    for (size_t i = 0; i < HCN_OWNER_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

bool
hcn_endpoint_name_owned(const char *name, const char *owner)
{
    static const char mid[] = "-ep-";
    size_t n = name ? strlen(name) : 0, tail = sizeof(mid) - 1 + HCN_OWNER_LEN;
    if (!hcn_owner_valid(owner) || n <= tail || n - tail > 128 ||
        memcmp(name + n - tail, mid, sizeof(mid) - 1) != 0 ||
        strcmp(name + n - HCN_OWNER_LEN, owner) != 0)
        return false;
    char handle[129];
    memcpy(handle, name, n - tail);
    handle[n - tail] = '\0';
    return handle_valid(handle);
}

json_object *
hcn_doc_query_network_endpoints(const char *network_id, struct err *err)
{
    if (!network_id || !hcs_guid_valid(network_id)) {
        err_set(err, EINVAL, "hcn query: network id %.64s is not a GUID",
                network_id ? network_id : "(null)");
        return NULL;
    }
    /* As hcsshim's ListEndpointsOfNetwork: HNS filters endpoints by "VirtualNetwork". */
    return query_one("VirtualNetwork", network_id);
}

json_object *
hcn_doc_query_name(const char *name, struct err *err)
{
    if (!name_valid(name)) {
        err_set(err, EINVAL, "hcn query: network name %.64s is not 1-15 of [A-Za-z0-9_.-]",
                name ? name : "(null)");
        return NULL;
    }
    return query_one("Name", name);
}
