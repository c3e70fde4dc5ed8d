/*
 * Attach and detach on Windows (daemon/net.h through HCN): the address
 * and the host ports chosen on the loop, then one job that records the
 * container's network, makes its endpoint and namespace and records them
 * as attached (net_hcn_record_windows.c); a detach's job deletes both and
 * the record. An attach waits for the setup (the network found or made)
 * and for the start-up reconciliation, a detach of a handle the
 * reconciliation has not registered yet waits for it too. Loop thread.
 */
#include "daemon/net_hcn_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/net_ports.h"

/* An attach: waiting for the setup, or its job running. */
struct hcn_waiter {
    struct hcn_waiter *next;
    struct net *n;
    struct hcn_entry *e;
    net_attach_cb cb, ready;
    void *arg;
    /* The job's copies. */
    struct hcn_api *api;
    char *rec_dir;
    char network_id[HCS_GUID_SIZE];
    char owner[HCN_OWNER_LEN + 1];
    char *const *dns;
    size_t ndns;
    struct hcn_rec rec;
    int rc;
    struct err err;
};

/* A detach asked for while the reconciliation runs, for a handle it has not registered. */
struct hcn_deferred_detach {
    struct hcn_deferred_detach *next;
    char handle[HCN_HANDLE_MAX + 1];
    net_done_cb cb;
    void *arg;
};

/* ---- address and ports -------------------------------------------------------------- */

static bool
port_taken(void *ctx, uint16_t port, enum net_proto proto)
{
    struct net *n = ctx;
    for (struct hcn_entry *e = n->entries; e; e = e->next)
        for (size_t i = 0; i < e->rec.nports; i++)
            if (e->rec.ports[i].host == port && e->rec.ports[i].proto == proto)
                return true;
    return port == n->api_port && proto == NET_PROTO_TCP;
}

static bool
ip_taken(struct net *n, const char *ip)
{
    for (struct hcn_entry *e = n->entries; e; e = e->next)
        if (!e->rec.disabled && strcmp(e->rec.ip, ip) == 0)
            return true;
    return false;
}

/* The pool's lowest host address that is neither the gateway nor a container's. */
static int
ip_choose(struct net *n, struct hcn_rec *r, struct err *err)
{
    uint32_t net = ntohl(n->pool.net.s_addr), gw = ntohl(n->gw.s_addr);
    uint32_t last = net | (0xffffffffu >> n->pool.prefix);
    for (uint32_t a = net + 1; a < last; a++) {
        if (a == gw)
            continue;
        struct in_addr in = {.s_addr = htonl(a)};
        inet_ntop(AF_INET, &in, r->ip, sizeof(r->ip));
        if (!ip_taken(n, r->ip)) {
            r->prefix = n->pool.prefix;
            snprintf(r->gateway, sizeof(r->gateway), "%s", n->gw_s);
            return 0;
        }
    }
    r->ip[0] = '\0';
    return err_set(err, ERR_UNAVAILABLE, "network %s: no address left in the pool %s", n->name,
                   n->pool_s);
}

/* ---- attach ------------------------------------------------------------------------- */

static void
waiter_free(struct hcn_waiter *w)
{
    free(w->rec_dir);
    free(w);
}

static void
attach_fail(struct hcn_waiter *w, const struct err *err)
{
    struct net *n = w->n;
    hcn_entry_remove(n, w->e);
    n->inflight--;
    w->cb(w->arg, NULL, err);
    waiter_free(w);
}

static void
attach_work(void *ctx)
{
    struct hcn_waiter *w = ctx;
    w->rc = hcn_step_attach(w->api, w->rec_dir, w->network_id, w->owner,
                            (const char *const *)w->dns, w->ndns, &w->rec, &w->err);
}

static void
attach_done(void *ctx, bool cancelled)
{
    struct hcn_waiter *w = ctx;
    struct net *n = w->n;
    if (cancelled || w->rc < 0) {
        struct err err = {0};
        if (cancelled)
            err_set(&err, ECANCELED, "network of %s: cancelled (shutting down)", w->rec.handle);
        else {
            err_copy(&err, &w->err);
            /* Not every HNS step names the container (a namespace's is its GUID). */
            if (!strstr(err.msg, w->rec.handle))
                err_wrap(&err, "network of %s", w->rec.handle);
        }
        attach_fail(w, &err);
        return;
    }
    struct hcn_entry *e = w->e;
    hcn_entry_set(e, &w->rec);
    e->state = HE_ATTACHED;
    n->inflight--;
    if (!e->rec.disabled)
        log_info("net: %s attached: %s/%u, endpoint %s, namespace %s", e->rec.handle, e->rec.ip,
                 e->rec.prefix, e->rec.ids.endpoint_id, e->rec.ids.namespace_id);
    if (w->ready)
        w->ready(w->arg, &e->pub, NULL);
    w->cb(w->arg, &e->pub, NULL);
    waiter_free(w);
}

static void
attach_begin(struct hcn_waiter *w)
{
    struct net *n = w->n;
    w->api = n->api;
    memcpy(w->network_id, n->network_id, sizeof(w->network_id));
    memcpy(w->owner, n->owner, sizeof(w->owner));
    w->dns = n->dns;
    w->ndns = n->ndns;
    struct err err = {0};
    int rc = job_submit_prompt(n->jobs, "net.attach", attach_work, attach_done, w);
    if (rc < 0) {
        err_set(&err, -rc, "network of %s: %s", w->rec.handle,
                rc == -ECANCELED ? "shutting down" : "cannot queue the job");
        attach_fail(w, &err);
    }
}

struct hcn_waiter *
hcn_waiters_take(struct net *n)
{
    struct hcn_waiter *w = n->waiters;
    n->waiters = NULL;
    return w;
}

void
hcn_waiters_resume(struct hcn_waiter *w, bool failed)
{
    while (w) {
        struct hcn_waiter *next = w->next;
        if (!w->rec.disabled && failed) {
            struct err e;
            net_setup_waiter_err(&w->n->setup, &e);
            attach_fail(w, &e);
        } else {
            attach_begin(w);
        }
        w = next;
    }
}

int
net_attach(struct net *n, const struct net_attach_req *req, net_attach_cb cb, void *arg,
           struct err *err)
{
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network: shutting down");
    if (net_req_check(req->handle, req->hostname, req->ports, req->nports, err) < 0)
        return -err->code;
    if (hcn_entry_find(n, req->handle))
        return err_set(err, EEXIST, "network of %s: exists already", req->handle);
    struct hcn_waiter *w = calloc(1, sizeof(*w));
    if (!w || !(w->rec_dir = strdup(n->rec_dir))) {
        free(w);
        return err_set(err, ENOMEM, "network of %s: out of memory", req->handle);
    }
    struct hcn_rec *r = &w->rec;
    snprintf(r->handle, sizeof(r->handle), "%s", req->handle);
    r->disabled = req->disabled || n->disabled;
    int rc = 0;
    if (!r->disabled && (rc = ip_choose(n, r, err)) == 0)
        rc = net_ports_choose(req->ports, req->nports, port_taken, n, r->ports, &r->nports, err);
    struct hcn_entry *e = rc == 0 ? hcn_entry_add(n, r, HE_ATTACHING) : NULL;
    if (!e) {
        if (rc == 0)
            rc = err_set(err, ENOMEM, "network of %s: out of memory", req->handle);
        waiter_free(w);
        return rc;
    }
    w->n = n;
    w->e = e;
    w->cb = cb;
    w->ready = req->ready;
    w->arg = arg;
    n->inflight++;
    if (!n->reconciling && (r->disabled || n->setup.state == NET_SETUP_DONE)) {
        attach_begin(w);
        return 0;
    }
    /* The setup has not run, or failed last time (the operator may have
     * installed what it missed since), or the reconciliation runs: wait. */
    if (!n->reconciling && n->setup.state != NET_SETUP_RUNNING &&
        (rc = hcn_setup_start(n, err)) < 0) {
        n->inflight--;
        hcn_entry_remove(n, e);
        waiter_free(w);
        return rc;
    }
    w->next = n->waiters;
    n->waiters = w;
    return 0;
}

/* ---- detach ------------------------------------------------------------------------- */

struct detach_job {
    struct net *n;
    struct hcn_entry *e; /* NULL: nothing to detach */
    struct hcn_api *api;
    char *rec_dir;
    struct hcn_rec rec;
    int rc;
    struct err err;
    net_done_cb cb;
    void *arg;
};

static void
detach_work(void *ctx)
{
    struct detach_job *j = ctx;
    if (j->e)
        j->rc = hcn_step_detach(j->api, j->rec_dir, &j->rec, &j->err);
}

static void
detach_done(void *ctx, bool cancelled)
{
    struct detach_job *j = ctx;
    struct net *n = j->n;
    n->inflight--;
    if (cancelled && j->e)
        j->rc = err_set(&j->err, ECANCELED, "network of %s: detach cancelled (shutting down)",
                        j->rec.handle);
    if (j->e && j->rc < 0) {
        j->e->state = HE_ATTACHED; /* it stays, and the detach can be retried */
        err_wrap(&j->err, "detach the network of %s", j->rec.handle);
    } else if (j->e) {
        hcn_entry_remove(n, j->e);
    }
    j->cb(j->arg, j->rc < 0 ? &j->err : NULL);
    free(j->rec_dir);
    free(j);
}

int
net_detach(struct net *n, const char *handle, net_done_cb cb, void *arg, struct err *err)
{
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network of %s: shutting down", handle);
    struct hcn_entry *e = hcn_entry_find(n, handle);
    if (e && e->state != HE_ATTACHED)
        return err_set(err, EBUSY, "network of %s: an attach or detach is running", handle);
    if (!e && n->reconciling) {
        struct hcn_deferred_detach *d = calloc(1, sizeof(*d));
        if (!d)
            return err_set(err, ENOMEM, "network of %s: out of memory", handle);
        snprintf(d->handle, sizeof(d->handle), "%s", handle);
        d->cb = cb;
        d->arg = arg;
        d->next = n->deferred;
        n->deferred = d;
        n->inflight++;
        return 0;
    }
    struct detach_job *j = calloc(1, sizeof(*j));
    if (!j || !(j->rec_dir = strdup(n->rec_dir))) {
        free(j);
        return err_set(err, ENOMEM, "network of %s: out of memory", handle);
    }
    j->n = n;
    j->e = e;
    j->api = n->api;
    if (e)
        j->rec = e->rec;
    j->cb = cb;
    j->arg = arg;
    /* Also a handle without a network gets its callback later, from a job. */
    int rc = job_submit_prompt(n->jobs, "net.detach", detach_work, detach_done, j);
    if (rc < 0) {
        free(j->rec_dir);
        free(j);
        return err_set(err, -rc, "network of %s: %s", handle,
                       rc == -ECANCELED ? "shutting down" : "cannot queue the job");
    }
    if (e)
        e->state = HE_DETACHING;
    n->inflight++;
    return 0;
}

void
hcn_detaches_resume(struct net *n)
{
    struct hcn_deferred_detach *d = n->deferred;
    n->deferred = NULL;
    while (d) {
        struct hcn_deferred_detach *next = d->next;
        n->inflight--;
        struct err err = {0};
        if (net_detach(n, d->handle, d->cb, d->arg, &err) < 0)
            d->cb(d->arg, &err);
        free(d);
        d = next;
    }
}
