/*
 * The network's pure parts: IPv4 pools and addresses, the CNI network
 * configuration lists berth generates or loads (the operator's
 * --cni-config), the per-plugin configuration a CNI plugin reads on its
 * stdin, the results and errors plugins print, and the /etc/hosts,
 * /etc/hostname and /etc/resolv.conf a container gets. No I/O except
 * net_conflist_load_dir and net_dns_load (which block on disk: call them
 * from a job or before the loop runs); any thread.
 *
 * CNI's wire format is JSON, so this file (like the store's and the
 * runtime's on-disk formats) uses json-c; its objects never leave the
 * network module.
 */
#ifndef BERTH_DAEMON_NET_CONF_H
#define BERTH_DAEMON_NET_CONF_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/sock.h"

#define NET_PLUGIN_DIR_DEFAULT "/usr/lib/cni"
#define NET_NAME_DEFAULT "berth0"
#define NET_POOL_DEFAULT "10.88.0.0/16"

/* A Linux interface name has at most 15 characters (IFNAMSIZ - 1). */
#define NET_NAME_MAX 15
/* "255.255.255.255/32" and a NUL. */
#define NET_CIDR_STRLEN 19
/* The CNI version of the configuration berth generates (plugins 1.x speak it). */
#define NET_CNI_VERSION "1.0.0"
/* The interface name of a container's end of the network. */
#define NET_IFNAME "eth0"
/* At most this many ports forwarded per container. */
#define NET_PORTS_MAX 32

struct net_cidr {
    struct in_addr net; /* network address, host bits zero (network byte order) */
    unsigned prefix;    /* 1..30 */
};

/* Parses "a.b.c.d/len" (IPv4, len 1..30, host bits zero); err names the value. */
int net_cidr_parse(const char *s, struct net_cidr *out, struct err *err);
void net_cidr_format(const struct net_cidr *c, char buf[NET_CIDR_STRLEN]);
bool net_cidr_contains(const struct net_cidr *c, struct in_addr a);
/* The pool's first address (the default gateway). */
struct in_addr net_cidr_first(const struct net_cidr *c);

/*
 * Parses gw as the gateway of pool: an IPv4 address inside it that is
 * neither its network nor its broadcast address.
 */
int net_gateway_parse(const struct net_cidr *pool, const char *gw, struct in_addr *out,
                      struct err *err);

/* A bridge and network name: 1-15 of [A-Za-z0-9_.-], starting with a letter or digit. */
bool net_name_valid(const char *name);
/* An IPv4 or IPv6 literal (a DNS server). */
bool net_ip_valid(const char *s);
/* 127.0.0.0/8, ::1, or "localhost". */
bool net_host_is_loopback(const char *host);

enum net_proto { NET_PROTO_TCP, NET_PROTO_UDP };
const char *net_proto_name(enum net_proto p);

/* A forwarded port: host 0 asks berth to pick a free one. */
struct net_port {
    uint16_t host;
    uint16_t container;
    enum net_proto proto;
};

/* ---- DNS and the container's /etc files -------------------------------------- */

struct net_dns {
    char **servers; /* NULL-terminated */
    char *search;   /* the host's "search" line's value, or NULL */
    char *options;  /* the host's "options" line's value, or NULL */
};

void net_dns_close(struct net_dns *d);

/*
 * Parses resolv.conf text: nameservers (loopback ones skipped: a container
 * cannot reach the host's 127.0.0.53), search and options. Fills out
 * (closed by the caller with net_dns_close).
 */
int net_dns_parse(const char *text, struct net_dns *out, struct err *err);

/*
 * The container's DNS: servers (NULL-terminated, from --dns) if given,
 * else the nameservers of the resolv.conf at path; search and options
 * always from that file (a missing file gives none). Blocks.
 */
int net_dns_load(const char *path, const char *const *servers, struct net_dns *out,
                 struct err *err);

/* The hostname a container gets: its handle, cut to 63 characters. */
void net_hostname_of(const char *handle, char out[64]);

/*
 * /etc/hosts: the localhost lines and hostname on ip, or on 127.0.1.1
 * for a container without a network (ip NULL). Caller frees.
 */
char *net_hosts_render(const char *hostname, const char *ip);
/*
 * /etc/resolv.conf: dns's servers, search and options; without a network
 * (disabled) no nameserver at all, so lookups fail at once instead of
 * timing out. Caller frees.
 */
char *net_resolv_render(const struct net_dns *dns, bool disabled);

/* ---- configuration lists ---------------------------------------------------- */

struct net_gen {
    const char *name;     /* network and bridge name */
    const char *pool;     /* CIDR */
    const char *gateway;  /* address in pool */
    const char *ipam_dir; /* host-local's dataDir */
    bool portmap;         /* include the portmap plugin */
};

/*
 * The list berth generates: bridge (with host-local IPAM on g->pool, the
 * gateway on the bridge, a default route), and portmap when asked. New
 * object (caller puts it).
 */
struct json_object *net_conflist_generate(const struct net_gen *g);

/*
 * Checks a configuration list: "cniVersion" and "name" strings, and a
 * non-empty "plugins" array of objects whose "type" is a plain file name.
 * err says which field is wrong.
 */
int net_conflist_check(struct json_object *list, const char *source, struct err *err);

/*
 * Loads the operator's list from dir: the first *.conflist, *.conf or
 * *.json file in name order (a .conf holds one plugin, which becomes a list
 * of one). Returns a new object (caller puts it), with *path_out the file
 * it came from (caller frees), or NULL with err set. Blocks.
 */
struct json_object *net_conflist_load_dir(const char *dir, char **path_out, struct err *err);

/* The list's plugin types, NULL-terminated (caller frees the array only). */
const char **net_conflist_types(struct json_object *list);

/* Does some plugin of the list take port mappings (capabilities.portMappings)? */
bool net_conflist_has_portmap(struct json_object *list);

/*
 * What the API guard needs from a list: the name of the bridge of its
 * first bridge plugin (the plugin's default "cni0" when it names none),
 * or "" without one, and the IPv4 subnets of its host-local IPAM, each
 * with its gateway (what host-local gives the bridge: the "gateway" next
 * to the subnet when it is one of the subnet's hosts, else the subnet's
 * first address).
 */
struct net_guard_info {
    char bridge[NET_NAME_MAX + 1];
    struct net_cidr subnets[8];
    struct in_addr gateways[8];
    size_t nsubnets;
};
void net_conflist_guard_info(struct json_object *list, struct net_guard_info *out);

/*
 * The configuration plugin i of list reads on its stdin: the plugin's own
 * object with the list's "name" and "cniVersion", prev (the result before
 * it, or NULL) as "prevResult", and ports as runtimeConfig.portMappings
 * when the plugin has that capability. New object (caller puts it).
 */
struct json_object *net_plugin_conf(struct json_object *list, size_t i, struct json_object *prev,
                                    const struct net_port *ports, size_t nports);

/* ---- results and errors ----------------------------------------------------- */

/* What berth keeps of a CNI result: the container's IPv4 address and links. */
struct net_result {
    char ip[INET_ADDRSTRLEN];
    unsigned prefix;
    char gateway[INET_ADDRSTRLEN]; /* "" when the result names none */
    char mac[18];
    char ifname[NET_NAME_MAX + 1];      /* the container's interface */
    char host_ifname[NET_NAME_MAX + 1]; /* its host end (a veth), or "" */
};

/*
 * Reads a plugin's result: the first IPv4 address on an interface in the
 * container's sandbox (or on no named interface). bridge, when not NULL,
 * is skipped when looking for the host end. ERR_INVALID_CONTENT when the
 * result has no IPv4 address.
 */
int net_result_parse(struct json_object *result, const char *bridge, struct net_result *out,
                     struct err *err);

/*
 * The error of a plugin that failed: its own {"code", "msg", "details"}
 * from stdout when it printed one, else the tail of its stderr, else its
 * exit status. Fills err with EIO: "cni plugin TYPE CMD: msg (code N)".
 */
void net_plugin_error(const char *type, const char *cmd, const char *out, const char *errout,
                      int exit_status, int term_signal, struct err *err);

#endif
