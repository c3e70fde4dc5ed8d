/*
 * The network service's own state, shared by its files: net.c (the
 * service, setup, health), net_attach.c (attach and detach),
 * net_record.c (records and the blocking steps of the jobs) and
 * net_reconcile.c (start-up). Not for other
 * modules. Loop thread, except the net_rec_* and net_step_* functions,
 * which the jobs run on pool threads on owned copies.
 */
#ifndef BERTH_DAEMON_NET_INTERNAL_H
#define BERTH_DAEMON_NET_INTERNAL_H

#include <json-c/json.h>

#include "daemon/net.h"
#include "daemon/net_host.h"
#include "daemon/net_setup.h"

#define NET_HANDLE_MAX 128

enum net_entry_state { NE_ATTACHING, NE_ATTACHED, NE_DETACHING };

/* One container's network; the public view points into it. */
struct net_entry {
    struct net_entry *next;
    struct net_attachment pub;
    enum net_entry_state state;
    char handle[NET_HANDLE_MAX + 1];
    char hostname[64];
    char *netns_path;
    char *record_path;
    char *files_dir; /* <state>/files/<handle>: hosts, hostname, resolv.conf */
    bool disabled;
    bool netns_gone; /* its namespace file is no longer bound (a reboot) */
    struct net_result res;
    struct net_port *ports;
    size_t nports;
    struct json_object *list;   /* the configuration list ADD ran with */
    struct json_object *result; /* the chain's result (or the partial one after a failure) */
    char *files[3];             /* hosts, hostname, resolv.conf */
    struct rt_mount mounts[3];
};

/* An attach in progress (also while it waits for the first setup). */
struct net_waiter {
    struct net_waiter *next;
    struct net *n;
    struct net_entry *e;
    net_attach_cb cb;
    void *arg;
    net_attach_cb ready;   /* told once the namespace and the files exist */
    struct net_step *step; /* the job's, while it runs */
    struct err err;        /* the failure reported after the undo */
};

struct detach_op;

/* An attach asked for while the reconciliation runs: a copy of its request. */
struct attach_deferred {
    struct attach_deferred *next;
    char handle[NET_HANDLE_MAX + 1];
    char *hostname;
    bool disabled;
    struct net_port *ports;
    size_t nports;
    net_attach_cb ready, cb;
    void *arg;
};

struct net {
    uv_loop_t *loop;
    struct job_queue *jobs;
    char *state_dir, *netns_dir, *attach_dir, *ipam_dir, *lease_dir, *files_root;
    char *plugin_dir;
    bool disabled;  /* --network none */
    bool generated; /* berth's list, not the operator's */
    char *name;     /* the network's name (the bridge's, for berth's list) */
    struct net_cidr pool;
    struct in_addr gw;
    char pool_s[NET_CIDR_STRLEN], gw_s[INET_ADDRSTRLEN];
    struct json_object *operator_list;
    char *operator_path;
    struct net_guard_info operator_info; /* its bridge, subnets and gateways */
    struct net_dns dns;
    struct nethost_rules rules;
    unsigned timeout_ms;

    struct net_setup setup;    /* state, error and callers (daemon/net_setup.h) */
    bool setup_bridge_created; /* the last setup had to make the bridge */
    bool setup_rules_missing;  /* ... and found the plugins' firewall chains gone */
    struct net_waiter *waiters, **waiters_tail;

    struct net_entry *entries;
    unsigned inflight; /* jobs, chains and setups not finished */
    bool shutting_down;
    /* A start-up reconciliation is running: detaches of handles it has
     * not registered yet wait for it (it may be releasing them), and so
     * do attaches (it may be releasing the same handle's old network, its
     * address and namespace path). */
    unsigned reconciling;
    struct detach_op *deferred;
    struct attach_deferred *deferred_attaches, **deferred_attaches_tail;
};

/* ---- entries (net.c) -------------------------------------------------------- */

struct net_entry *net_entry_find(struct net *n, const char *handle);
/* A new entry for handle, in state, on the list; NULL on out of memory. */
struct net_entry *net_entry_add(struct net *n, const char *handle, enum net_entry_state state);
void net_entry_remove(struct net *n, struct net_entry *e);
/* Points e->pub at e's fields (after they changed). */
void net_entry_publish(struct net_entry *e);
/* The configuration list for a container with (or without) ports. New reference. */
struct json_object *net_list_for(struct net *n, bool ports);

/* Runs the first (or a new) setup; cb (may be NULL) when it ends. */
int net_setup_start(struct net *n, net_done_cb cb, void *arg, struct err *err);

/* The reconciliation ended: the detaches and attaches that waited for it go on (net_attach.c). */
void net_detach_resume_deferred(struct net *n);
void net_attach_resume_deferred(struct net *n);

/* An attach that waited for the setup goes on (net_attach.c)... */
void net_attach_begin(struct net_waiter *w);
/* ...or ends with err (its entry goes). */
void net_attach_fail(struct net_waiter *w, const struct err *err);

/* ---- records (net_record.c) ------------------------------------------------- */

/* The record's JSON text for e in state ("attaching" or "attached"). Caller frees. */
char *net_rec_render(const struct net_entry *e, const char *state);

/* A record as read back. */
struct net_rec {
    char handle[NET_HANDLE_MAX + 1];
    char state[16];
    char *netns;
    char hostname[64];
    bool disabled;
    struct net_port *ports;
    size_t nports;
    struct json_object *list, *result;
};
void net_rec_close(struct net_rec *r);
/* Parses a record's text; err says what is wrong with it. Any thread. */
int net_rec_parse(const char *text, struct net_rec *out, struct err *err);
/* Moves r into a new entry's fields (r is left empty). */
void net_rec_to_entry(struct net_rec *r, struct net_entry *e);
/* Fills e->files and e->mounts from e->files_dir. Returns -ENOMEM. */
int net_entry_set_files(struct net_entry *e);

/*
 * The blocking steps, on owned copies (pool threads):
 *  prepare: the record (as attaching), the namespace, and the files (the
 *           hosts file without the address yet, for a container that gets
 *           one); plugins checked first;
 *  commit:  the hosts file rewritten in place (the runtime may have
 *           bind-mounted it already: a new file would not be seen) and the
 *           record (as attached);
 *  remove:  the namespace, the files and their directory, the record.
 * Each undoes its own half-done work when it fails. Records and files are
 * replaced atomically but not fsynced: what they describe (a namespace,
 * links, rules) does not outlive a reboot either, and host-local's leases,
 * which do, are released at start-up also without a record.
 */
struct net_step {
    char *record_path, *record_text;
    char *netns_dir, *netns_path;
    char *attach_dir;
    char *files_dir;
    char *file_paths[3];
    char *file_texts[3];
    char **plugins; /* paths that must be executable, NULL-terminated */
    struct err err;
    int rc;
};
void net_step_free(struct net_step *s);
void net_step_prepare(struct net_step *s);
void net_step_commit(struct net_step *s);
void net_step_remove(struct net_step *s);

/* ---- reconcile (net_reconcile.c) -------------------------------------------- */

/* Attaches and detaches count toward inflight; reconcile uses the same counter. */

#endif
