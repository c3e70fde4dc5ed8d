/*
 * The network service: one network namespace per container, made by
 * berth and bound under the network's state directory, joined to a
 * bridge by the standard CNI plugins (bridge with host-local IPAM,
 * portmap, firewall: Debian's containernetworking-plugins), or by the
 * operator's own configuration list (--cni-config); the container's
 * /etc/hosts, /etc/hostname and /etc/resolv.conf; forwarded host ports;
 * and the host's side that berth owns itself: the bridge, forwarding, the
 * pool's masquerade, and the firewall guard that keeps containers away
 * from host loopback and from the API's port.
 *
 * Loop thread. The blocking steps (namespaces, files, `ip`, `iptables`)
 * are jobs; CNI plugins are child processes (daemon/net_cni.h). Every
 * operation's callback runs later on the loop, never inside the call; a
 * call that fails at once returns a negative errno with err set, and its
 * callback is never called.
 *
 * On disk, under the state directory (<store root>/network):
 *
 *   netns/<handle>         the container's namespace (an nsfs bind mount)
 *   attach/<handle>.json   the record: written as "attaching" before the
 *                          namespace or any plugin runs, as "attached"
 *                          with the configuration list used and the CNI
 *                          result afterwards, so that a DEL after a
 *                          restart (or kill -9) undoes exactly what ADD did
 *   ipam/                  host-local's leases (generated configuration)
 *   files/<handle>/        the container's hosts, hostname and resolv.conf
 *                          (the sources of the read-only mounts the runtime
 *                          makes at /etc/hosts, /etc/hostname, /etc/resolv.conf)
 */
#ifndef BERTH_DAEMON_NET_H
#define BERTH_DAEMON_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/err.h"
#include "daemon/job.h"
#include "daemon/net_conf.h"
#include "runtime/driver.h"

struct net_opts {
    const char *state_dir;      /* absolute; made when missing */
    bool disabled;              /* --network none: every container gets only lo */
    const char *name;           /* --network-name: the bridge and network name */
    const char *pool;           /* --network-pool, an IPv4 CIDR */
    const char *gateway;        /* --network-gateway; NULL: the pool's first address */
    const char *const *dns;     /* --dns, NULL-terminated; NULL: the host's resolvers */
    const char *cni_config_dir; /* --cni-config: the operator's list instead of berth's */
    const char *plugin_dir;     /* NULL: NET_PLUGIN_DIR_DEFAULT */
    const char *resolv_conf;    /* NULL: /etc/resolv.conf */
    unsigned plugin_timeout_ms; /* 0: CNI_TIMEOUT_MS_DEFAULT */
};

/* A container's network, as the runtime and GET need it. Owned by the service. */
struct net_attachment {
    const char *handle;
    const char *netns_path; /* name it in the runtime spec */
    bool disabled;          /* loopback only */
    const char *ip;         /* "" when disabled */
    unsigned prefix;
    const char *gateway; /* "" when disabled */
    const char *mac;
    /* Windows: the HCN endpoint's GUID (a hyperv utility VM's adapter); "" elsewhere. */
    const char *endpoint_id;
    const struct net_port *ports; /* as forwarded: host 0 replaced by the port chosen */
    size_t nports;
    const struct rt_mount *mounts; /* /etc/hosts, /etc/hostname, /etc/resolv.conf */
    size_t nmounts;
};

typedef void (*net_done_cb)(void *arg, const struct err *err);
/* a is valid until the container is detached; NULL with err on failure. */
typedef void (*net_attach_cb)(void *arg, const struct net_attachment *a, const struct err *err);

struct net_attach_req {
    const char *handle;   /* the container's handle (CNI's container ID) */
    const char *hostname; /* NULL: the handle, cut to 63 characters */
    bool disabled;        /* loopback only (also for every container with --network none) */
    const struct net_port *ports;
    size_t nports;
    /*
     * When set, called (with the attach's arg and a NULL error) once the
     * namespace and the three files exist, before CNI ADD runs: the
     * runtime may start the container in that namespace while ADD
     * attaches it (a is valid until the attach's callback; its address
     * is not known yet, and the hosts file gets it in place later). The
     * attach's callback follows in every case; an attach that fails
     * before this point never calls it.
     */
    net_attach_cb ready;
};

struct net_reconcile_stats {
    unsigned kept;     /* live containers whose network was kept */
    unsigned released; /* records of containers that are gone, undone */
    unsigned orphans;  /* namespaces and leases without a record, removed */
    unsigned repaired; /* live containers whose host side was restored */
};
typedef void (*net_reconcile_cb)(void *arg, const struct net_reconcile_stats *st,
                                 const struct err *err);

struct net;

/*
 * Makes the service for o (copied). Reads the host's resolv.conf and the
 * operator's configuration list (blocking: call before the loop runs).
 * Fails for a bad option or a --cni-config that cannot be used, with err
 * naming it.
 */
int net_new(uv_loop_t *loop, struct job_queue *jobs, const struct net_opts *o, struct net **out,
            struct err *err);
/* Frees the service; nothing may be in flight (net_idle). NULL is a no-op. */
void net_free(struct net *n);

/*
 * Where the API listens, so that the guard refuses container traffic to
 * its port when containers could route to it (any address but loopback).
 * Call before net_setup or net_reconcile (the port may be the one the API
 * picked for --listen HOST:0).
 */
void net_set_api(struct net *n, const char *host, unsigned port);

/*
 * Makes the host side exist: the bridge with the gateway address, IPv4
 * forwarding, the pool's masquerade and the guard (idempotent). Attaches
 * wait for the first setup to finish, and fail with ERR_UNAVAILABLE and
 * its error when it failed. With --network none, nothing to make.
 */
int net_setup(struct net *n, net_done_cb cb, void *arg, struct err *err);

/*
 * Start-up reconciliation, given the handles of the containers that still
 * exist: runs net_setup, keeps the network of every live container
 * (registering it, so net_attachment_find works again), releases that of
 * every other record (CNI DEL with the list and result it was made with,
 * then the namespace and the record), and removes namespaces and leases
 * that no record claims (no address leaks after kill -9). A live
 * container whose host side went missing (the bridge deleted, the
 * firewall flushed) gets it back. The handles are copied.
 */
int net_reconcile(struct net *n, const char *const *live, size_t nlive, net_reconcile_cb cb,
                  void *arg, struct err *err);

/*
 * Gives a container its network: a namespace, CNI ADD (unless disabled),
 * the /etc files, the ports (a host port 0 is chosen here, free at the
 * time). Anything that fails after ADD is undone with DEL, and nothing
 * is left attached. Errors: EINVAL (a bad request), EEXIST (the handle
 * has a network), ERR_CONFLICT (a host port in use), ERR_UNAVAILABLE (a
 * plugin missing, the setup failed), ENOTSUP (ports with a list that
 * cannot forward them), EIO (a plugin failed: its own message),
 * ETIMEDOUT (a plugin did not answer), ECANCELED (shutting down). While
 * a reconciliation runs, a valid request waits for its end (which may be
 * releasing the same handle's old network) and its errors come through
 * cb.
 */
int net_attach(struct net *n, const struct net_attach_req *req, net_attach_cb cb, void *arg,
               struct err *err);

/*
 * Takes a container's network away: CNI DEL, the namespace, the files,
 * the record. Idempotent (a handle without a network is success); when
 * DEL fails the network stays, and the detach can be retried. EBUSY
 * while an attach or detach of the handle runs.
 */
int net_detach(struct net *n, const char *handle, net_done_cb cb, void *arg, struct err *err);

/* The network of an attached container, or NULL. */
const struct net_attachment *net_attachment_find(struct net *n, const char *handle);

/* The network's addresses, as GET /networks reports them. */
#define NET_IPAM_POOLS_MAX 8
struct net_ipam {
    /* Linux: the bridge (berth's, or the first bridge plugin's of the
     * operator's list; "" when it has none); Windows: the HCN network. */
    char name[NET_NAME_MAX + 1];
    size_t npools;
    struct net_ipam_pool {
        char subnet[NET_CIDR_STRLEN];
        char gateway[16]; /* dotted IPv4 */
    } pools[NET_IPAM_POOLS_MAX];
};

/*
 * The IPv4 pools containers get their addresses from, each with its
 * gateway, as the service uses them: --network-pool and --network-gateway
 * (the pool's first address without it) for berth's own list and for
 * HCN's network; the host-local subnets of an operator's --cni-config
 * list, with the gateway it names next to each (else the subnet's first
 * address, host-local's default), none when it names no subnet. Loop
 * thread; reads only what net_new stored.
 */
void net_ipam_get(const struct net *n, struct net_ipam *out);

/* Refuses new operations (ECANCELED); those in flight finish. */
void net_shutdown(struct net *n);
/* Nothing in flight: no job, no plugin, no setup. */
bool net_idle(const struct net *n);
/* The last setup's error, or NULL when it succeeded (or has not run). */
const struct err *net_setup_error(const struct net *n);

/*
 * Removes what net_setup made (the rules, and the bridge when no
 * container is attached): for tests, and for an operator moving a
 * network away.
 */
int net_teardown(struct net *n, net_done_cb cb, void *arg, struct err *err);

/* ---- health ----------------------------------------------------------------- */

struct net_health {
    bool usable;
    bool disabled; /* --network none: not usable, and not a fault */
    char reason[ERR_MSG_MAX];
};

/*
 * A probe for /v1/health's network field, with copies of what it checks:
 * the plugins found, the bridge up, IPv4 forwarding on, berth's rules in
 * place. Made on the loop; run on any thread (it blocks briefly: it reads
 * /proc and /sys and runs iptables).
 */
struct net_probe;
struct net_probe *net_probe_new(const struct net *n);
void net_probe_free(struct net_probe *p);
void net_probe_run(struct net_probe *p, struct net_health *out);

#endif
