/*
 * The network service on Windows (daemon/net.h) through HCN: the NAT
 * network that --network-name, --network-pool and --network-gateway
 * describe (as on Linux), found by name or created in computenetwork.dll,
 * loaded at run time (a network found by name is used only when it is
 * a NAT network of that pool and gateway: the setup fails naming both
 * otherwise, as Linux refuses a bridge with another address); an
 * endpoint in a host namespace of its own per container
 * (net_hcn_attach_windows.c), whose namespace is what the hcs driver
 * puts in the compute system's Networking.Namespace; records under
 * <root>/network/hcn (net_hcn_record_windows.c) reconciled at start-up;
 * and the health probe (net_hcn_health_windows.c, with the teardown).
 * This file: options, entries, setup and reconciliation.
 *
 * As on Linux when the CNI plugins are missing, a host without
 * computenetwork.dll (Wine, Windows without the Containers feature) fails
 * the setup: creates of containers with a network fail with 503 naming
 * it, loopback-only ones ("network": {"disabled": true}, --network none)
 * work, and health reports the network not usable with the same reason.
 *
 * Loop thread; every HCN call and every file is a job.
 */
#include "daemon/net_hcn_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "common/log.h"

/* ---- options ------------------------------------------------------------------ */

static int
opts_apply(struct net *n, const struct net_opts *o, struct err *err)
{
    if (o->cni_config_dir)
        return err_set(err, EINVAL,
                       "--cni-config %s: CNI is Linux only (Windows networks are HCN's: "
                       "--network-name, --network-pool, --network-gateway)",
                       o->cni_config_dir);
    const char *name = o->name ? o->name : NET_NAME_DEFAULT;
    if (!net_name_valid(name))
        return err_set(err, EINVAL, "network name %s: expected 1-15 of [A-Za-z0-9_.-]", name);
    snprintf(n->name, sizeof(n->name), "%s", name);
    if (net_cidr_parse(o->pool ? o->pool : NET_POOL_DEFAULT, &n->pool, err) < 0)
        return -err->code;
    if (n->pool.prefix < 8)
        return err_set(err, EINVAL, "network pool %s: HCN takes a prefix of 8 to 30", o->pool);
    if (o->gateway) {
        if (net_gateway_parse(&n->pool, o->gateway, &n->gw, err) < 0)
            return -err->code;
    } else {
        n->gw = net_cidr_first(&n->pool);
    }
    net_cidr_format(&n->pool, n->pool_s);
    inet_ntop(AF_INET, &n->gw, n->gw_s, sizeof(n->gw_s));
    for (size_t i = 0; o->dns && o->dns[i]; i++)
        n->ndns++;
    n->dns = calloc(n->ndns + 1, sizeof(char *));
    if (!n->dns)
        return err_set(err, ENOMEM, "network: out of memory");
    for (size_t i = 0; i < n->ndns; i++) {
        uint32_t a;
        if (hcn_ipv4_parse(o->dns[i], &a) < 0)
            return err_set(err, EINVAL, "--dns %s: HCN takes IPv4 servers only", o->dns[i]);
        if (!(n->dns[i] = strdup(o->dns[i])))
            return err_set(err, ENOMEM, "network: out of memory");
    }
    return 0;
}

int
net_new(uv_loop_t *loop, struct job_queue *jobs, const struct net_opts *o, struct net **out,
        struct err *err)
{
    if (!o->state_dir || !o->state_dir[0])
        return err_set(err, EINVAL, "network: no state directory");
    struct net *n = calloc(1, sizeof(*n));
    if (!n)
        return err_set(err, ENOMEM, "network: out of memory");
    n->loop = loop;
    n->jobs = jobs;
    n->disabled = o->disabled;
    net_setup_init(&n->setup, jobs, &n->inflight, &n->shutting_down);
    n->state_dir = strdup(o->state_dir);
    n->rec_dir = fs_path_join(o->state_dir, "hcn");
    int rc = n->state_dir && n->rec_dir ? opts_apply(n, o, err)
                                        : err_set(err, ENOMEM, "network: out of memory");
    if (rc < 0) {
        net_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

void
net_free(struct net *n)
{
    if (!n)
        return;
    while (n->entries)
        hcn_entry_remove(n, n->entries);
    for (size_t i = 0; n->dns && i < n->ndns; i++)
        free(n->dns[i]);
    free(n->dns);
    hcn_api_free(n->api);
    net_setup_close(&n->setup);
    free(n->state_dir);
    free(n->rec_dir);
    free(n);
}

void
net_set_api(struct net *n, const char *host, unsigned port)
{
    (void)host; /* HNS's NAT keeps containers off the host's loopback */
    n->api_port = port;
}

void
net_ipam_get(const struct net *n, struct net_ipam *out)
{
    /* What the setup made HNS's network with, or checked the one it found
     * against (hcn_network_check), and what endpoints get their addresses
     * and gateway from. */
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", n->name);
    snprintf(out->pools[0].subnet, sizeof(out->pools[0].subnet), "%s", n->pool_s);
    snprintf(out->pools[0].gateway, sizeof(out->pools[0].gateway), "%s", n->gw_s);
    out->npools = 1;
}

/* ---- entries -------------------------------------------------------------------- */

struct hcn_entry *
hcn_entry_find(struct net *n, const char *handle)
{
    for (struct hcn_entry *e = n->entries; e; e = e->next)
        if (strcmp(e->rec.handle, handle) == 0)
            return e;
    return NULL;
}

static void
entry_publish(struct hcn_entry *e)
{
    const struct hcn_rec *r = &e->rec;
    e->pub = (struct net_attachment){
        .handle = r->handle,
        .netns_path = r->disabled ? NULL : r->ids.namespace_id,
        .disabled = r->disabled,
        .ip = r->disabled ? "" : r->ip,
        .prefix = r->disabled ? 0 : r->prefix,
        .gateway = r->disabled ? "" : r->gateway,
        .mac = r->disabled ? "" : r->ids.mac,
        .endpoint_id = r->disabled ? "" : r->ids.endpoint_id,
        .ports = r->ports,
        .nports = r->disabled ? 0 : r->nports,
    };
}

struct hcn_entry *
hcn_entry_add(struct net *n, const struct hcn_rec *r, enum hcn_entry_state st)
{
    struct hcn_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->rec = *r;
    e->state = st;
    entry_publish(e);
    e->next = n->entries;
    n->entries = e;
    return e;
}

void
hcn_entry_set(struct hcn_entry *e, const struct hcn_rec *r)
{
    e->rec = *r;
    entry_publish(e);
}

void
hcn_entry_remove(struct net *n, struct hcn_entry *e)
{
    for (struct hcn_entry **pp = &n->entries; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    }
    free(e);
}

const struct net_attachment *
net_attachment_find(struct net *n, const char *handle)
{
    struct hcn_entry *e = n ? hcn_entry_find(n, handle) : NULL;
    return e && e->state != HE_ATTACHING ? &e->pub : NULL;
}

/* ---- setup and reconciliation ------------------------------------------------------ */

struct setup_job {
    struct net *n;
    bool disabled;
    struct hcn_api *api, *own; /* n's, or the one this job loaded */
    char name[NET_NAME_MAX + 1], pool[NET_CIDR_STRLEN], gw[INET_ADDRSTRLEN];
    char *const *dns;
    size_t ndns;
    char *rec_dir;
    char network_id[HCS_GUID_SIZE];
    char owner[HCN_OWNER_LEN + 1];
    bool created;
    int rc;
    struct err err;
    /* A reconciliation's: the live handles in, the records to keep out. */
    bool reconcile;
    char **live;
    size_t nlive;
    struct hcn_rec *keep;
    size_t nkeep;
    struct net_reconcile_stats st;
    net_reconcile_cb rcb;
    void *arg;
};

static bool
is_live(const struct setup_job *j, const char *handle)
{
    for (size_t i = 0; i < j->nlive; i++)
        if (strcmp(j->live[i], handle) == 0)
            return true;
    return false;
}

/* Keeps the records of live containers that are complete; deletes every other's network. */
static void
reconcile_records(struct setup_job *j)
{
    struct hcn_rec *recs = NULL;
    size_t nrecs = 0;
    struct err err = {0};
    if (hcn_rec_list(j->rec_dir, &recs, &nrecs, &err) < 0) {
        log_error("net: start-up reconciliation: %s", err.msg);
        return;
    }
    j->keep = calloc(nrecs ? nrecs : 1, sizeof(*j->keep));
    /* With --network none now, what an earlier start made is still HNS's to delete. */
    if (!j->api && j->disabled && hcn_api_open(NULL, &j->own, &err) == 0)
        j->api = j->own;
    for (size_t i = 0; j->keep && i < nrecs; i++) {
        struct hcn_rec *r = &recs[i];
        if (r->attached && is_live(j, r->handle)) {
            j->keep[j->nkeep++] = *r;
            j->st.kept++;
            continue;
        }
        memset(&err, 0, sizeof(err));
        if (!r->disabled && !j->api) {
            log_warn("net: the network of %s stays until computenetwork.dll can delete it",
                     r->handle);
        } else if (hcn_step_detach(j->api, j->rec_dir, r, &err) < 0) {
            log_warn("net: release the network of %s: %s", r->handle, err.msg);
        } else {
            log_info("net: released the %s network of %s (endpoint %s)",
                     r->attached ? "left-over" : "half-made", r->handle,
                     r->disabled ? "none" : r->ids.endpoint_id);
            j->st.released++;
        }
    }
    free(recs);
}

static void
setup_work(void *ctx)
{
    struct setup_job *j = ctx;
    j->rc = fs_mkdir_p(j->rec_dir, 0700, &j->err);
    if (j->rc == 0 && (j->rc = hcn_owner_load(j->rec_dir, j->owner, &j->err)) < 0)
        err_wrap(&j->err, "network %s", j->name);
    if (j->rc == 0 && !j->disabled) {
        if (!j->api && (j->rc = hcn_api_open(NULL, &j->own, &j->err)) == 0)
            j->api = j->own;
        const char *dns[16];
        size_t nd = 0;
        for (; nd < j->ndns && nd < 16; nd++)
            dns[nd] = j->dns[nd];
        struct hcn_network_doc doc = {
            .name = j->name, .pool = j->pool, .gateway = j->gw, .dns = dns, .ndns = nd};
        if (j->rc == 0)
            j->rc = hcn_network_ensure(j->api, &doc, j->network_id, &j->created, &j->err);
        if (j->rc < 0)
            err_wrap(&j->err, "network %s", j->name);
    }
    if (j->reconcile)
        reconcile_records(j);
    /* Then what HNS has of ours that no record names (a record lost, or a crash's leftovers). */
    struct err e = {0};
    if (j->reconcile && j->rc == 0 && !j->disabled &&
        hcn_step_sweep(j->api, j->rec_dir, j->network_id, j->owner, &j->st.orphans, &e) < 0)
        log_warn("net: start-up sweep of network %s: %s", j->name, e.msg);
}

static void
setup_job_free(void *ctx)
{
    struct setup_job *j = ctx;
    for (size_t i = 0; i < j->nlive; i++)
        free(j->live[i]);
    free(j->live);
    free(j->keep);
    free(j->rec_dir);
    hcn_api_free(j->own);
    free(j);
}

static void
setup_done(void *ctx, bool cancelled)
{
    struct setup_job *j = ctx;
    struct net *n = j->n;
    net_setup_end(&n->setup, cancelled, j->name, &j->rc, &j->err);
    if (!n->api && j->own && j->own == j->api) {
        n->api = j->own; /* the service's from now on */
        j->own = NULL;
    }
    if (j->rc == 0) {
        memcpy(n->owner, j->owner, sizeof(n->owner));
        if (!j->disabled) {
            memcpy(n->network_id, j->network_id, sizeof(n->network_id));
            log_info("net: hcn network %s (%s, gateway %s): %s %s", j->name, j->pool, j->gw,
                     j->created ? "created" : "found", j->network_id);
        }
    }
    if (j->reconcile) {
        for (size_t i = 0; i < j->nkeep; i++)
            if (!hcn_entry_find(n, j->keep[i].handle) &&
                !hcn_entry_add(n, &j->keep[i], HE_ATTACHED))
                log_error("net: the network of %s: out of memory", j->keep[i].handle);
        log_info("net: start-up: %u networks kept, %u released, %u endpoints without a record "
                 "deleted",
                 j->st.kept, j->st.released, j->st.orphans);
        n->reconciling = false;
    }
    /* This setup's callers first, as on Linux: a setup one of the calls
     * below begins is not this one, and its callers must wait for it. Its
     * waiters are those present now, and its result is theirs. */
    struct hcn_waiter *waiters = hcn_waiters_take(n);
    net_setup_notify(&n->setup, j->rc, &j->err);
    hcn_waiters_resume(waiters, j->rc < 0);
    if (j->reconcile)
        hcn_detaches_resume(n);
    if (j->rcb)
        j->rcb(j->arg, &j->st, j->rc < 0 ? &j->err : NULL);
    setup_job_free(j);
}

static struct setup_job *
setup_job_new(struct net *n)
{
    struct setup_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->rec_dir = strdup(n->rec_dir))) {
        free(j);
        return NULL;
    }
    j->n = n;
    j->disabled = n->disabled;
    j->api = n->api;
    snprintf(j->name, sizeof(j->name), "%s", n->name);
    snprintf(j->pool, sizeof(j->pool), "%s", n->pool_s);
    snprintf(j->gw, sizeof(j->gw), "%s", n->gw_s);
    j->dns = n->dns; /* fixed for the service's life */
    j->ndns = n->ndns;
    return j;
}

static const struct net_setup_job setup_ops = {
    .name = "net.setup", .work = setup_work, .done = setup_done, .free = setup_job_free};
static const struct net_setup_job reconcile_ops = {
    .name = "net.reconcile", .work = setup_work, .done = setup_done, .free = setup_job_free};

int
hcn_setup_start(struct net *n, struct err *err)
{
    if (n->setup.state == NET_SETUP_RUNNING)
        return 0;
    struct setup_job *j = setup_job_new(n);
    if (!j)
        return err_set(err, ENOMEM, "network setup: out of memory");
    return net_setup_begin(&n->setup, &setup_ops, j, NULL, NULL, err);
}

int
net_setup(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    int busy = net_setup_busy(&n->setup, n->name, err);
    if (busy < 0)
        return busy;
    struct setup_job *j = setup_job_new(n);
    if (!j)
        return err_set(err, ENOMEM, "network setup: out of memory");
    return net_setup_begin(&n->setup, &setup_ops, j, cb, arg, err);
}

int
net_reconcile(struct net *n, const char *const *live, size_t nlive, net_reconcile_cb cb, void *arg,
              struct err *err)
{
    int busy = net_setup_busy(&n->setup, n->name, err);
    if (busy < 0)
        return busy;
    struct setup_job *j = setup_job_new(n);
    if (!j || !(j->live = calloc(nlive ? nlive : 1, sizeof(char *)))) {
        if (j)
            setup_job_free(j);
        return err_set(err, ENOMEM, "network reconciliation: out of memory");
    }
    for (; j->nlive < nlive; j->nlive++) {
        if (!(j->live[j->nlive] = strdup(live[j->nlive]))) {
            setup_job_free(j);
            return err_set(err, ENOMEM, "network reconciliation: out of memory");
        }
    }
    j->reconcile = true;
    j->rcb = cb;
    j->arg = arg;
    int rc = net_setup_begin(&n->setup, &reconcile_ops, j, NULL, NULL, err);
    if (rc == 0)
        n->reconciling = true;
    return rc;
}

const struct err *
net_setup_error(const struct net *n)
{
    return net_setup_failure(&n->setup);
}

/* ---- lifecycle ---------------------------------------------------------------------- */

void
net_shutdown(struct net *n)
{
    if (n)
        n->shutting_down = true;
}

bool
net_idle(const struct net *n)
{
    return !n || n->inflight == 0;
}
