/*
 * The Windows network's own state, shared by its files: net_hcn_windows.c
 * (the service, setup, reconciliation), net_hcn_health_windows.c (health,
 * teardown), net_hcn_attach_windows.c (attach and detach) and net_hcn_record_windows.c (the records
 * and the blocking steps of the jobs). Not for other modules. Loop thread, except the hcn_rec_* and
 * hcn_step_* functions, which jobs run on pool threads on owned copies.
 */
#ifndef BERTH_DAEMON_NET_HCN_INT_H
#define BERTH_DAEMON_NET_HCN_INT_H

#include "daemon/net.h"
#include "daemon/net_setup.h"
#include "runtime/hcs/hcn_api.h"

#define HCN_HANDLE_MAX 128

/*
 * A container's record, <state>/hcn/<handle>: written (durably) as
 * "attaching" with the endpoint's and namespace's ids before either
 * exists, as "attached" once both do, removed once both are deleted. A
 * loopback-only container's says "attached" and disabled at once.
 */
struct hcn_rec {
    char handle[HCN_HANDLE_MAX + 1];
    bool attached; /* false: "attaching", what a crash left */
    bool disabled;
    struct hcn_attachment ids;
    char ip[16];
    unsigned prefix;
    char gateway[16];
    struct net_port ports[NET_PORTS_MAX];
    size_t nports;
};

/* The record's text. Caller frees; NULL on out of memory. Any thread. */
char *hcn_rec_render(const struct hcn_rec *r);
/* Parses a record's text; EINVAL naming what is wrong. Any thread. */
int hcn_rec_parse(const char *text, struct hcn_rec *out, struct err *err);

enum hcn_entry_state { HE_ATTACHING, HE_ATTACHED, HE_DETACHING };

/* One container's network; the public view points into it. */
struct hcn_entry {
    struct hcn_entry *next;
    enum hcn_entry_state state;
    struct hcn_rec rec;
    struct net_attachment pub;
};

struct hcn_waiter;
struct hcn_deferred_detach;

struct net {
    uv_loop_t *loop;
    struct job_queue *jobs;
    char *state_dir, *rec_dir;
    bool disabled;
    char name[NET_NAME_MAX + 1];
    struct net_cidr pool;
    struct in_addr gw;
    char pool_s[NET_CIDR_STRLEN], gw_s[INET_ADDRSTRLEN];
    char **dns; /* --dns, NULL-terminated; none: HNS's default */
    size_t ndns;
    unsigned api_port;

    /* Set by the first setup that loaded computenetwork.dll; jobs use it
     * (its calls are thread-safe) once it is set. */
    struct hcn_api *api;
    char network_id[HCS_GUID_SIZE];
    /* This root's tag in its endpoints' names (<rec_dir>/.owner), set by the first setup. */
    char owner[HCN_OWNER_LEN + 1];
    struct net_setup setup; /* state, error and callers (daemon/net_setup.h) */
    bool reconciling;
    struct hcn_waiter *waiters; /* attaches waiting for the setup */
    struct hcn_deferred_detach *deferred;

    struct hcn_entry *entries;
    unsigned inflight;
    bool shutting_down;
};

/* ---- entries (net_hcn_windows.c) -------------------------------------------- */

struct hcn_entry *hcn_entry_find(struct net *n, const char *handle);
/* A new entry from r, on the list; NULL on out of memory. */
struct hcn_entry *hcn_entry_add(struct net *n, const struct hcn_rec *r, enum hcn_entry_state st);
/* Replaces e's record (an attach's result) and what it publishes. */
void hcn_entry_set(struct hcn_entry *e, const struct hcn_rec *r);
void hcn_entry_remove(struct net *n, struct hcn_entry *e);
/* Runs a setup (the first, or again after one failed); attaches wait for it. */
int hcn_setup_start(struct net *n, struct err *err);

/* ---- attach and detach (net_hcn_attach_windows.c) --------------------------- */

/* The attaches waiting for the setup that ends, off the list: those that
 * come meanwhile (a callback may begin another setup) wait for the next. */
struct hcn_waiter *hcn_waiters_take(struct net *n);
/* The setup they waited for ended: they go on, or fail with its error
 * when it failed (judged by that setup's result, not by the state now). */
void hcn_waiters_resume(struct hcn_waiter *w, bool failed);
/* The reconciliation ended: the detaches that waited for it go on. */
void hcn_detaches_resume(struct net *n);

/* ---- blocking steps (net_hcn_record_windows.c), pool threads ---------------- */

/* <dir>/<handle>, written durably (the file and its directory). */
int hcn_rec_write(const char *dir, const struct hcn_rec *r, struct err *err);
/* Removes <dir>/<handle>, durably; one already gone is success. */
int hcn_rec_remove(const char *dir, const char *handle, struct err *err);

/*
 * The attach's work: the record as attaching, the endpoint (with r's
 * address, routes and ports on network_id) and namespace, the record as
 * attached. When a step fails, what it made is deleted and the record
 * removed; when that delete fails too, the record stays for the next
 * start. A disabled r is only recorded.
 */
int hcn_step_attach(struct hcn_api *api, const char *dir, const char *network_id, const char *owner,
                    const char *const *dns, size_t ndns, struct hcn_rec *r, struct err *err);
/* The detach's: the endpoint and namespace deleted, then the record. */
int hcn_step_detach(struct hcn_api *api, const char *dir, const struct hcn_rec *r, struct err *err);

/* This root's owner tag, <dir>/.owner, made (random, durably) when missing. */
int hcn_owner_load(const char *dir, char owner[HCN_OWNER_LEN + 1], struct err *err);

/*
 * Deletes the endpoints on network_id that this root's tag names
 * ("<handle>-ep-<owner>") but no record in dir does, with their
 * namespaces: what a daemon left in HNS without a record. Other roots'
 * and other owners' endpoints are left alone. *removed counts them.
 */
int hcn_step_sweep(struct hcn_api *api, const char *dir, const char *network_id, const char *owner,
                   unsigned *removed, struct err *err);

/* The records in dir, parsed (an unreadable one is logged and skipped). Caller frees *out. */
int hcn_rec_list(const char *dir, struct hcn_rec **out, size_t *n, struct err *err);

#endif
