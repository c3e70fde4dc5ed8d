/*
 * The HCN documents (computenetwork.dll, HNS schema 2.0) of berth's
 * Windows network: the NAT network that --network-name, --network-pool
 * and --network-gateway describe, as on Linux; an endpoint per container
 * on it, with the container's address, routes, DNS and port forwarding
 * (PortMapping policies, the endpoint's NAT); a host namespace per
 * container with its endpoint added; and the query that finds a network
 * by name. Field names and nesting are those of hcsshim's hcn package
 * (../shared/research/windows-hcs.md section 5); the golden files in
 * tests/unit/golden/hcs/hcn_*.json show each document whole.
 *
 * Pure builders, as doc_system.h's: the input is validated (EINVAL
 * naming the value) and a new json-c object returned. Any thread.
 */
#ifndef BERTH_RUNTIME_HCS_DOC_NETWORK_H
#define BERTH_RUNTIME_HCS_DOC_NETWORK_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define HCN_SCHEMA_MAJOR 2
#define HCN_SCHEMA_MINOR 0

/* The NAT network: name as on Linux (1-15 of [A-Za-z0-9_.-]), an IPv4 pool and its gateway. */
struct hcn_network_doc {
    const char *name;
    const char *pool;    /* "10.88.0.0/16": prefix 8-30, no host bits set */
    const char *gateway; /* inside the pool, neither its network nor its broadcast address */
    const char *const *dns;
    size_t ndns;
};

json_object *hcn_doc_network(const struct hcn_network_doc *n, struct err *err);

/* A forwarded port: host_port on the host (host_ip, NULL: every address) to the container's. */
struct hcn_port {
    const char *protocol; /* "tcp" or "udp" */
    uint16_t host_port;   /* 1-65535 */
    uint16_t container_port;
    const char *host_ip;
};

/* A store root's owner tag: 8 lowercase hex digits, random, kept in the root. */
#define HCN_OWNER_LEN 8

struct hcn_endpoint_doc {
    const char *container; /* the container's handle: the endpoint is "<handle>-ep-<owner>" */
    /* The root's tag (HCN_OWNER_LEN hex digits), so that a start-up can tell
     * its own endpoints from other roots' on a shared network; NULL: "<handle>-ep". */
    const char *owner;
    const char *network_id; /* the network's GUID */
    const char *ip;         /* the container's address; NULL: HNS picks one from the pool */
    unsigned prefix_len;    /* with ip: the pool's prefix */
    const char *gateway;    /* the default route's next hop; NULL: none */
    const char *const *dns;
    size_t ndns;
    const struct hcn_port *ports;
    size_t nports;
};

json_object *hcn_doc_endpoint(const struct hcn_endpoint_doc *e, struct err *err);

/* Is s an owner tag (HCN_OWNER_LEN lowercase hex digits)? */
bool hcn_owner_valid(const char *s);

/* Is name an endpoint of owner's, "<valid handle>-ep-<owner>"? */
bool hcn_endpoint_name_owned(const char *name, const char *owner);

/* The HcnEnumerateEndpoints query for the endpoints on network_id (a GUID). */
json_object *hcn_doc_query_network_endpoints(const char *network_id, struct err *err);

/* A host namespace (process isolation; hyperv adds it to the utility VM too). */
json_object *hcn_doc_namespace(void);

/* HcnModifyNamespace: add ("Add") or remove ("Remove") endpoint_id. */
json_object *hcn_doc_namespace_endpoint(const char *request, const char *endpoint_id,
                                        struct err *err);

/* The HcnEnumerateNetworks query for a network of this name (a valid network name). */
json_object *hcn_doc_query_name(const char *name, struct err *err);

/* Parses a dotted IPv4 address (no leading zeros, four parts): 0, or -EINVAL. */
int hcn_ipv4_parse(const char *s, uint32_t *out);
/* Parses "a.b.c.d/n" (n 0-32, no leading zeros): 0, or -EINVAL. Host bits are not checked. */
int hcn_cidr_parse(const char *s, uint32_t *addr, unsigned *prefix);

#endif
