/*
 * The network service: options, entries, the host setup and teardown,
 * the health probe (attach and detach are net_attach.c's, start-up
 * net_reconcile.c's). Loop thread; the blocking steps are jobs
 * (net_host.c), except the probe, which runs where the caller runs it.
 */
#include "daemon/net_internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "daemon/net_cni.h"

/* ---- options ---------------------------------------------------------------- */

static int
set_paths(struct net *n, const char *state_dir)
{
    n->state_dir = strdup(state_dir);
    n->netns_dir = fs_path_join(state_dir, "netns");
    n->attach_dir = fs_path_join(state_dir, "attach");
    n->ipam_dir = fs_path_join(state_dir, "ipam");
    n->files_root = fs_path_join(state_dir, "files");
    if (!n->state_dir || !n->netns_dir || !n->attach_dir || !n->ipam_dir || !n->files_root)
        return -ENOMEM;
    return 0;
}

int
net_new(uv_loop_t *loop, struct job_queue *jobs, const struct net_opts *o, struct net **out,
        struct err *err)
{
    if (!o->state_dir || o->state_dir[0] != '/')
        return err_set(err, EINVAL, "network state directory %s: not an absolute path",
                       o->state_dir ? o->state_dir : "(null)");
    struct net *n = calloc(1, sizeof(*n));
    if (!n)
        return err_set(err, ENOMEM, "network: out of memory");
    n->loop = loop;
    n->jobs = jobs;
    n->disabled = o->disabled;
    n->timeout_ms = o->plugin_timeout_ms;
    n->waiters_tail = &n->waiters;
    n->deferred_attaches_tail = &n->deferred_attaches;
    net_setup_init(&n->setup, jobs, &n->inflight, &n->shutting_down);
    int ret = set_paths(n, o->state_dir);
    n->plugin_dir = strdup(o->plugin_dir ? o->plugin_dir : NET_PLUGIN_DIR_DEFAULT);
    if (ret < 0 || !n->plugin_dir) {
        net_free(n);
        return err_set(err, ENOMEM, "network: out of memory");
    }
    if (o->cni_config_dir) {
        n->operator_list = net_conflist_load_dir(o->cni_config_dir, &n->operator_path, err);
        if (!n->operator_list) {
            net_free(n);
            return -err->code;
        }
        struct json_object *name = NULL;
        json_object_object_get_ex(n->operator_list, "name", &name);
        n->name = strdup(json_object_get_string(name));
        struct net_guard_info g;
        net_conflist_guard_info(n->operator_list, &g);
        n->operator_info = g;
        nethost_rules_init(&n->rules, n->name ? n->name : "");
        snprintf(n->rules.bridge, sizeof(n->rules.bridge), "%s", g.bridge);
        n->rules.npools = g.nsubnets;
        memcpy(n->rules.pools, g.subnets, g.nsubnets * sizeof(g.subnets[0]));
    } else {
        const char *name = o->name ? o->name : NET_NAME_DEFAULT;
        if (!net_name_valid(name)) {
            net_free(n);
            return err_set(err, EINVAL, "network name %s: expected 1-15 of [A-Za-z0-9_.-]", name);
        }
        n->generated = true;
        n->name = strdup(name);
        if (net_cidr_parse(o->pool ? o->pool : NET_POOL_DEFAULT, &n->pool, err) < 0) {
            net_free(n);
            return -err->code;
        }
        if (o->gateway) {
            if (net_gateway_parse(&n->pool, o->gateway, &n->gw, err) < 0) {
                net_free(n);
                return -err->code;
            }
        } else {
            n->gw = net_cidr_first(&n->pool);
        }
        net_cidr_format(&n->pool, n->pool_s);
        inet_ntop(AF_INET, &n->gw, n->gw_s, sizeof(n->gw_s));
        nethost_rules_init(&n->rules, name);
        snprintf(n->rules.bridge, sizeof(n->rules.bridge), "%s", name);
        n->rules.pools[0] = n->pool;
        n->rules.npools = 1;
        n->rules.nat = true;
        n->rules.forward = true;
        if (n->name)
            n->lease_dir = fs_path_join(n->ipam_dir, n->name);
    }
    if (!n->name || (n->generated && !n->lease_dir)) {
        net_free(n);
        return err_set(err, ENOMEM, "network: out of memory");
    }
    if (net_dns_load(o->resolv_conf ? o->resolv_conf : "/etc/resolv.conf", o->dns, &n->dns, err) <
        0) {
        net_free(n);
        return -err->code;
    }
    if (!n->disabled && !n->dns.servers[0])
        log_warn("net: no DNS server for containers (the host's resolv.conf has only loopback "
                 "ones); give one with --dns");
    *out = n;
    return 0;
}

static void
entry_free(struct net_entry *e)
{
    free(e->netns_path);
    free(e->record_path);
    free(e->files_dir);
    free(e->ports);
    json_object_put(e->list);
    json_object_put(e->result);
    for (size_t i = 0; i < 3; i++)
        free(e->files[i]);
    free(e);
}

void
net_free(struct net *n)
{
    if (!n)
        return;
    while (n->entries) {
        struct net_entry *e = n->entries;
        n->entries = e->next;
        entry_free(e);
    }
    while (n->deferred_attaches) {
        struct attach_deferred *d = n->deferred_attaches;
        n->deferred_attaches = d->next;
        free(d->hostname);
        free(d->ports);
        free(d);
    }
    net_setup_close(&n->setup);
    free(n->state_dir);
    free(n->netns_dir);
    free(n->attach_dir);
    free(n->ipam_dir);
    free(n->lease_dir);
    free(n->files_root);
    free(n->plugin_dir);
    free(n->name);
    json_object_put(n->operator_list);
    free(n->operator_path);
    net_dns_close(&n->dns);
    free(n);
}

void
net_set_api(struct net *n, const char *host, unsigned port)
{
    bool loopback = net_host_is_loopback(host);
    n->rules.api_port = port;
    n->rules.guard_v4 = !loopback;
    /* An IPv6 wildcard takes IPv4 too; a container reaches the host's
     * link-local address on the bridge. */
    n->rules.guard_v6 = !loopback && host && strchr(host, ':') != NULL;
}

struct json_object *
net_list_for(struct net *n, bool ports)
{
    if (!n->generated)
        return json_object_get(n->operator_list);
    struct net_gen g = {.name = n->name,
                        .pool = n->pool_s,
                        .gateway = n->gw_s,
                        .ipam_dir = n->ipam_dir,
                        .portmap = ports};
    return net_conflist_generate(&g);
}

void
net_ipam_get(const struct net *n, struct net_ipam *out)
{
    memset(out, 0, sizeof(*out));
    if (n->generated) {
        snprintf(out->name, sizeof(out->name), "%s", n->name);
        snprintf(out->pools[0].subnet, sizeof(out->pools[0].subnet), "%s", n->pool_s);
        snprintf(out->pools[0].gateway, sizeof(out->pools[0].gateway), "%s", n->gw_s);
        out->npools = 1;
        return;
    }
    const struct net_guard_info *g = &n->operator_info;
    snprintf(out->name, sizeof(out->name), "%s", g->bridge);
    for (size_t i = 0; i < g->nsubnets && i < NET_IPAM_POOLS_MAX; i++) {
        struct net_ipam_pool *p = &out->pools[out->npools++];
        net_cidr_format(&g->subnets[i], p->subnet);
        if (!inet_ntop(AF_INET, &g->gateways[i], p->gateway, sizeof(p->gateway)))
            p->gateway[0] = '\0';
    }
}

/* ---- entries ---------------------------------------------------------------- */

struct net_entry *
net_entry_find(struct net *n, const char *handle)
{
    for (struct net_entry *e = n->entries; e; e = e->next)
        if (strcmp(e->handle, handle) == 0)
            return e;
    return NULL;
}

struct net_entry *
net_entry_add(struct net *n, const char *handle, enum net_entry_state state)
{
    struct net_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    snprintf(e->handle, sizeof(e->handle), "%s", handle);
    net_hostname_of(handle, e->hostname);
    e->state = state;
    cleanup_free char *rec_name = NULL;
    if (asprintf(&rec_name, "%s.json", handle) < 0)
        rec_name = NULL;
    e->netns_path = fs_path_join(n->netns_dir, handle);
    e->record_path = rec_name ? fs_path_join(n->attach_dir, rec_name) : NULL;
    e->files_dir = fs_path_join(n->files_root, handle);
    if (!e->netns_path || !e->record_path || !e->files_dir || net_entry_set_files(e) < 0) {
        entry_free(e);
        return NULL;
    }
    e->next = n->entries;
    n->entries = e;
    net_entry_publish(e);
    return e;
}

void
net_entry_remove(struct net *n, struct net_entry *e)
{
    for (struct net_entry **pp = &n->entries; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    }
    entry_free(e);
}

void
net_entry_publish(struct net_entry *e)
{
    e->pub = (struct net_attachment){
        .handle = e->handle,
        .netns_path = e->netns_path,
        .disabled = e->disabled,
        .ip = e->res.ip,
        .prefix = e->res.prefix,
        .gateway = e->res.gateway,
        .mac = e->res.mac,
        .endpoint_id = "",
        .ports = e->ports,
        .nports = e->nports,
        .mounts = e->mounts,
        .nmounts = 3,
    };
}

const struct net_attachment *
net_attachment_find(struct net *n, const char *handle)
{
    struct net_entry *e = net_entry_find(n, handle);
    return e && e->state == NE_ATTACHED ? &e->pub : NULL;
}

/* ---- setup ------------------------------------------------------------------ */

struct setup_job {
    struct net *n; /* only for the done callback */
    bool disabled, generated, teardown, no_entries;
    char *state_dir, *name;
    struct net_cidr pool;
    struct in_addr gw;
    struct nethost_rules rules;
    bool bridge_created, rules_missing;
    struct err err;
    int rc;
    net_done_cb cb; /* teardown only */
    void *arg;
};

static void
setup_work(void *ctx)
{
    struct setup_job *j = ctx;
    j->rc = fs_mkdir_p(j->state_dir, 0700, &j->err);
    if (j->rc < 0 || j->disabled)
        return;
    if (j->generated) {
        /* berth's own jump from FORWARD is there from the first setup on:
         * gone, the host's rules were flushed (portmap's with them). */
        j->rules_missing = !nethost_forward_present(&j->rules);
        j->rc = nethost_bridge_ensure(j->name, &j->pool, j->gw, &j->bridge_created, &j->err);
        if (j->rc == 0 && !nethost_ip_forward())
            j->rc = nethost_ip_forward_enable(&j->err);
    }
    if (j->rc == 0)
        j->rc = nethost_rules_apply(&j->rules, &j->err);
    if (j->rc < 0)
        err_wrap(&j->err, "network %s", j->name);
}

static void
setup_job_free(void *ctx)
{
    struct setup_job *j = ctx;
    free(j->state_dir);
    free(j->name);
    free(j);
}

static void
setup_done(void *ctx, bool cancelled)
{
    struct setup_job *j = ctx;
    struct net *n = j->n;
    net_setup_end(&n->setup, cancelled, j->name, &j->rc, &j->err);
    if (j->rc == 0) {
        n->setup_bridge_created = j->bridge_created;
        n->setup_rules_missing = j->rules_missing;
    }
    /* The waiters of this setup: those that come meanwhile wait for another. */
    struct net_waiter *w = n->waiters;
    n->waiters = NULL;
    n->waiters_tail = &n->waiters;
    net_setup_notify(&n->setup, j->rc, &j->err);
    /* Judged by this setup's end: a callback may have begun another. */
    bool failed = j->rc < 0;
    while (w) {
        struct net_waiter *next = w->next;
        if (failed) {
            struct err e;
            net_setup_waiter_err(&n->setup, &e);
            net_attach_fail(w, &e);
        } else {
            net_attach_begin(w);
        }
        w = next;
    }
    setup_job_free(j);
}

static struct setup_job *
setup_job_new(struct net *n)
{
    struct setup_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->n = n;
    j->disabled = n->disabled;
    j->generated = n->generated;
    j->state_dir = strdup(n->state_dir);
    j->name = strdup(n->name);
    j->pool = n->pool;
    j->gw = n->gw;
    j->rules = n->rules;
    j->no_entries = n->entries == NULL;
    if (!j->state_dir || !j->name) {
        setup_job_free(j);
        return NULL;
    }
    return j;
}

static const struct net_setup_job setup_ops = {
    .name = "net.setup", .work = setup_work, .done = setup_done, .free = setup_job_free};

int
net_setup_start(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    /* A running setup needs no job: cb waits for its end. */
    struct setup_job *j =
        n->shutting_down || n->setup.state == NET_SETUP_RUNNING ? NULL : setup_job_new(n);
    return net_setup_begin(&n->setup, &setup_ops, j, cb, arg, err);
}

int
net_setup(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    return net_setup_start(n, cb, arg, err);
}

const struct err *
net_setup_error(const struct net *n)
{
    return net_setup_failure(&n->setup);
}

static void
teardown_work(void *ctx)
{
    struct setup_job *j = ctx;
    if (j->disabled)
        return;
    j->rc = nethost_rules_remove(&j->rules, &j->err);
    if (j->rc == 0 && j->generated && j->no_entries)
        j->rc = nethost_link_delete(j->name, &j->err);
}

static void
teardown_done(void *ctx, bool cancelled)
{
    struct setup_job *j = ctx;
    net_teardown_end(&j->n->setup, cancelled, &j->rc, &j->err);
    if (j->rc == 0)
        j->n->setup.state = NET_SETUP_NONE;
    j->cb(j->arg, j->rc < 0 ? &j->err : NULL);
    setup_job_free(j);
}

int
net_teardown(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    int busy = net_setup_busy(&n->setup, n->name, err);
    if (busy < 0)
        return busy;
    struct setup_job *j = setup_job_new(n);
    if (!j)
        return err_set(err, ENOMEM, "network teardown: out of memory");
    j->cb = cb;
    j->arg = arg;
    int rc = job_submit(n->jobs, "net.teardown", teardown_work, teardown_done, j);
    if (rc < 0) {
        setup_job_free(j);
        return err_set(err, -rc, "network teardown: cannot queue the job");
    }
    n->inflight++;
    return 0;
}

/* ---- lifecycle -------------------------------------------------------------- */

void
net_shutdown(struct net *n)
{
    n->shutting_down = true;
}

bool
net_idle(const struct net *n)
{
    return n->inflight == 0;
}

/* ---- health ----------------------------------------------------------------- */

struct net_probe {
    bool disabled, generated;
    char *plugin_dir;
    char **plugins; /* types, NULL-terminated */
    struct nethost_rules rules;
    char bridge[NET_NAME_MAX + 1];
};

void
net_probe_free(struct net_probe *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->plugins && p->plugins[i]; i++)
        free(p->plugins[i]);
    free(p->plugins);
    free(p->plugin_dir);
    free(p);
}

static int
probe_add_type(struct net_probe *p, size_t *n, const char *t)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(p->plugins[i], t) == 0)
            return 0;
    char **nv = realloc(p->plugins, (*n + 2) * sizeof(char *));
    if (!nv)
        return -ENOMEM;
    p->plugins = nv;
    if (!(nv[*n] = strdup(t)))
        return -ENOMEM;
    nv[++*n] = NULL;
    return 0;
}

struct net_probe *
net_probe_new(const struct net *n)
{
    struct net_probe *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->disabled = n->disabled;
    p->generated = n->generated;
    p->plugin_dir = strdup(n->plugin_dir);
    p->rules = n->rules;
    snprintf(p->bridge, sizeof(p->bridge), "%s", n->generated ? n->name : "");
    size_t k = 0;
    int rc = p->plugin_dir ? 0 : -ENOMEM;
    struct json_object *list =
        n->generated ? net_list_for((struct net *)n, true) : json_object_get(n->operator_list);
    struct json_object *plugins = NULL;
    json_object_object_get_ex(list, "plugins", &plugins);
    for (size_t i = 0; rc == 0 && plugins && i < json_object_array_length(plugins); i++) {
        struct json_object *pl = json_object_array_get_idx(plugins, i), *t, *ipam, *it;
        if (json_object_object_get_ex(pl, "type", &t))
            rc = probe_add_type(p, &k, json_object_get_string(t));
        if (rc == 0 && json_object_object_get_ex(pl, "ipam", &ipam) &&
            json_object_object_get_ex(ipam, "type", &it) && json_object_get_string(it)[0])
            rc = probe_add_type(p, &k, json_object_get_string(it));
    }
    json_object_put(list);
    if (rc < 0) {
        net_probe_free(p);
        return NULL;
    }
    return p;
}

void
net_probe_run(struct net_probe *p, struct net_health *out)
{
    if (net_probe_disabled(p->disabled, out))
        return;
    for (size_t i = 0; p->plugins && p->plugins[i]; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", p->plugin_dir, p->plugins[i]);
        if (access(path, X_OK) < 0) {
            snprintf(out->reason, sizeof(out->reason),
                     "cni plugin %s: not found in %s (install containernetworking-plugins)",
                     p->plugins[i], p->plugin_dir);
            return;
        }
    }
    char *ipt = nethost_find_tool("iptables");
    if (!ipt) {
        snprintf(out->reason, sizeof(out->reason), "iptables: not found (install iptables)");
        return;
    }
    free(ipt);
    if (p->generated) {
        bool exists, up, is_bridge;
        nethost_link_state(p->bridge, &exists, &up, &is_bridge);
        if (!exists || !is_bridge || !up) {
            snprintf(out->reason, sizeof(out->reason), "bridge %s: %s", p->bridge,
                     !exists      ? "missing"
                     : !is_bridge ? "not a bridge"
                                  : "down");
            return;
        }
        if (!nethost_ip_forward()) {
            snprintf(out->reason, sizeof(out->reason), "IPv4 forwarding is off");
            return;
        }
    }
    struct err err = {0};
    if (nethost_rules_check(&p->rules, &err) < 0) {
        snprintf(out->reason, sizeof(out->reason), "%s", err.msg);
        return;
    }
    out->usable = true;
}
