/*
 * The Windows network's health probe and teardown (daemon/net.h): the
 * probe asks computenetwork.dll, on the monitor's thread, whether the
 * NAT network is still there, and still the one the flags describe; the
 * teardown deletes it (a job) when no container is on it, as Linux
 * removes its bridge. The rest of the service is net_hcn_windows.c's.
 */
#include "daemon/net_hcn_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- teardown --------------------------------------------------------------------- */

struct teardown_job {
    struct net *n;
    struct hcn_api *api;
    char id[HCS_GUID_SIZE];
    int rc;
    struct err err;
    net_done_cb cb;
    void *arg;
};

static void
teardown_work(void *ctx)
{
    struct teardown_job *j = ctx;
    if (j->api && j->id[0])
        j->rc = hcn_network_delete(j->api, j->id, &j->err);
}

static void
teardown_done(void *ctx, bool cancelled)
{
    struct teardown_job *j = ctx;
    net_teardown_end(&j->n->setup, cancelled, &j->rc, &j->err);
    if (j->rc == 0 && j->api) {
        j->n->setup.state = NET_SETUP_NONE;
        j->n->network_id[0] = '\0';
    }
    j->cb(j->arg, j->rc < 0 ? &j->err : NULL);
    free(j);
}

int
net_teardown(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    int busy = net_setup_busy(&n->setup, n->name, err);
    if (busy < 0)
        return busy;
    struct teardown_job *j = calloc(1, sizeof(*j));
    if (!j)
        return err_set(err, ENOMEM, "network teardown: out of memory");
    j->n = n;
    /* The network goes only when no container is on it, as Linux's bridge. */
    j->api = n->entries ? NULL : n->api;
    memcpy(j->id, n->network_id, sizeof(j->id));
    j->cb = cb;
    j->arg = arg;
    int rc = job_submit(n->jobs, "net.teardown", teardown_work, teardown_done, j);
    if (rc < 0) {
        free(j);
        return err_set(err, -rc, "network teardown: cannot queue the job");
    }
    n->inflight++;
    return 0;
}

/* ---- health ------------------------------------------------------------------------- */

struct net_probe {
    bool disabled;
    char name[NET_NAME_MAX + 1];
    char pool[NET_CIDR_STRLEN], gw[INET_ADDRSTRLEN];
};

struct net_probe *
net_probe_new(const struct net *n)
{
    struct net_probe *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->disabled = n->disabled;
    snprintf(p->name, sizeof(p->name), "%s", n->name);
    snprintf(p->pool, sizeof(p->pool), "%s", n->pool_s);
    snprintf(p->gw, sizeof(p->gw), "%s", n->gw_s);
    return p;
}

void
net_probe_free(struct net_probe *p)
{
    free(p);
}

void
net_probe_run(struct net_probe *p, struct net_health *out)
{
    if (net_probe_disabled(p->disabled, out))
        return;
    /* computenetwork.dll stays loaded by the service: this finds it again. */
    struct hcn_api *api = NULL;
    struct err err = {0};
    char id[HCS_GUID_SIZE];
    bool found = false;
    /* A network of that name and other settings (made since, or the one
     * the setup refused) is no more usable than none. */
    struct hcn_network_doc want = {.name = p->name, .pool = p->pool, .gateway = p->gw};
    if (hcn_api_open(NULL, &api, &err) < 0 || hcn_network_find(api, p->name, id, &found, &err) < 0)
        snprintf(out->reason, sizeof(out->reason), "%s", err.msg);
    else if (!found)
        snprintf(out->reason, sizeof(out->reason),
                 "hcn network %s: missing (deleted since the setup?)", p->name);
    else if (hcn_network_check(api, id, &want, &err) < 0)
        snprintf(out->reason, sizeof(out->reason), "%s", err.msg);
    else
        out->usable = true;
    hcn_api_free(api);
}
