/*
 * The network's host side, done by berth itself rather than by a CNI
 * plugin: network namespaces (an nsfs file bind-mounted under the
 * network's state directory), the bridge and its gateway address, IPv4
 * forwarding, the firewall rules berth owns (the pool's masquerade, the
 * guard that keeps containers away from host loopback and from the API
 * port), and host-local's lease files. Every function here blocks (it
 * runs `ip`, `iptables`, or changes the kernel's state): call them from a
 * pool job, the monitor thread, or before the loop runs.
 */
#ifndef BERTH_DAEMON_NET_HOST_H
#define BERTH_DAEMON_NET_HOST_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "daemon/net_conf.h"

/* iptables chain names have at most 28 characters. */
#define NETHOST_CHAIN_MAX 28

/*
 * Runs argv (argv[0] a tool searched in the usual sbin and bin
 * directories), with input on its stdin when not NULL, and waits for it.
 * Returns its exit status (0 and up), or a negative errno with err set
 * when it could not be run. *errout (when not NULL) gets the tail of its
 * stderr (caller frees).
 */
int nethost_exec(const char *const *argv, const char *input, char **errout, struct err *err);
/* As nethost_exec, with a non-zero exit status turned into an EIO error naming the command. */
int nethost_run(const char *const *argv, const char *input, struct err *err);
/* The absolute path of tool in the usual sbin and bin directories, or NULL. Caller frees. */
char *nethost_find_tool(const char *tool);

/*
 * Creates a network namespace whose only interface is lo, up, and binds
 * it at path (a new file). The calling thread enters the new namespace
 * for the time it takes and goes back (the process aborts if it cannot:
 * a pool thread must never stay in a container's namespace).
 */
int nethost_netns_create(const char *path, struct err *err);
/* Unmounts and removes path; a missing path is success. */
int nethost_netns_remove(const char *path, struct err *err);
/* Is path a bound network namespace (an nsfs file)? */
bool nethost_netns_mounted(const char *path);

/* The firewall rules berth owns for one network. */
struct nethost_rules {
    char in_chain[NETHOST_CHAIN_MAX + 1];  /* filter: the guard, jumped to first from INPUT */
    char fwd_chain[NETHOST_CHAIN_MAX + 1]; /* filter: the pool forwarded, jumped to first from
                                            * FORWARD */
    char nat_chain[NETHOST_CHAIN_MAX + 1]; /* nat: the pool's masquerade */
    char bridge[NET_NAME_MAX + 1];         /* "" when the network has none */
    struct net_cidr pools[8];              /* container source subnets */
    size_t npools;
    bool nat;          /* masquerade pools[0] to everything outside it */
    bool forward;      /* accept pools[0]'s traffic in FORWARD (in place of the CNI
                        * firewall plugin's rules per container) */
    unsigned api_port; /* with guard_v4/guard_v6: refuse container traffic to it */
    bool guard_v4, guard_v6;
};

/* Fills the chain names for network name (hashed when it is not a short plain name). */
void nethost_rules_init(struct nethost_rules *r, const char *name);
/* Installs or replaces the rules (each chain atomically); idempotent. */
int nethost_rules_apply(const struct nethost_rules *r, struct err *err);
/* Removes them (jumps, then chains); what is missing already is fine. */
int nethost_rules_remove(const struct nethost_rules *r, struct err *err);
/* Are the jumps into them all there? err says which is missing. */
int nethost_rules_check(const struct nethost_rules *r, struct err *err);
/* Does the chain exist in table (iptables, IPv4)? */
bool nethost_chain_exists(const char *table, const char *chain);
/* Is the jump from FORWARD to r's forward chain there (a flush of the host's rules
 * removes it)? */
bool nethost_forward_present(const struct nethost_rules *r);

/*
 * Makes the bridge name exist, up, with gw/pool->prefix as its address
 * (*created tells whether it had to be made). A bridge that exists with
 * another IPv4 address is an error that names it.
 */
int nethost_bridge_ensure(const char *name, const struct net_cidr *pool, struct in_addr gw,
                          bool *created, struct err *err);
/* Deletes the link name; a missing one is success. */
int nethost_link_delete(const char *name, struct err *err);
/* Does link name exist, is it administratively up, is it a bridge? From /sys. */
void nethost_link_state(const char *name, bool *exists, bool *up, bool *is_bridge);
/* The bridge link's master, or "" (from /sys). */
void nethost_link_master(const char *name, char out[NET_NAME_MAX + 1]);
/* Attaches link to bridge (hairpin on, as the bridge plugin sets it). */
int nethost_link_set_master(const char *link, const char *bridge, struct err *err);

/* Is IPv4 forwarding on? */
bool nethost_ip_forward(void);
int nethost_ip_forward_enable(struct err *err);

/* A host-local lease: a file named by the address, holding the container's ID. */
struct nethost_lease {
    char ip[INET_ADDRSTRLEN];
    char id[256];
};
/* Lists the leases in dir (host-local's dataDir/<network>); a missing dir has none. */
int nethost_leases_list(const char *dir, struct nethost_lease **out, size_t *n, struct err *err);

#endif
