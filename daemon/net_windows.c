/*
 * The network service on Windows until HCN networks are wired into
 * containers (issue 15: runtime/hcs/hcn_api_win.c makes the network,
 * endpoints and namespaces, but nothing calls it from a create yet).
 * Every container is loopback-only, as with --network none on Linux:
 * attaches succeed as disabled, with no namespace, address or files;
 * ports are refused; health reports the network as disabled, naming why.
 *
 * Loop thread. As daemon/net.h promises, callbacks run later on the loop
 * (a zero timer), never inside the call.
 */
#include "daemon/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A container's (loopback-only) attachment, valid until its detach. */
struct attached {
    struct attached *next;
    struct net_attachment a;
    char handle[129];
    bool pending; /* its attach's callbacks have not run yet */
};

struct net {
    uv_loop_t *loop;
    unsigned in_flight; /* timers not yet closed */
    bool shutting_down;
    struct attached *attached;
};

struct net_probe {
    int unused;
};

/* One deferred callback: an attach's, a detach's, a setup's or a reconciliation's. */
struct deferred {
    uv_timer_t timer;
    struct net *n;
    struct attached *a; /* an attach's */
    net_attach_cb attach_cb;
    net_attach_cb ready_cb;
    net_done_cb done_cb;
    net_reconcile_cb reconcile_cb;
    void *arg;
};

#define WHY "networks on Windows are not wired into containers yet (HCN, issue 15)"

int
net_new(uv_loop_t *loop, struct job_queue *jobs, const struct net_opts *o, struct net **out,
        struct err *err)
{
    (void)jobs;
    if (o->cni_config_dir)
        return err_set(err, EINVAL, "--cni-config: CNI is Linux only; %s", WHY);
    struct net *n = calloc(1, sizeof(*n));
    if (!n)
        return err_set(err, ENOMEM, "network: out of memory");
    n->loop = loop;
    *out = n;
    return 0;
}

void
net_free(struct net *n)
{
    if (!n)
        return;
    while (n->attached) {
        struct attached *next = n->attached->next;
        free(n->attached);
        n->attached = next;
    }
    free(n);
}

void
net_set_api(struct net *n, const char *host, unsigned port)
{
    (void)n;
    (void)host;
    (void)port;
}

static void
closed_cb(uv_handle_t *h)
{
    struct deferred *d = h->data;
    d->n->in_flight--;
    free(d);
}

static void
fire_cb(uv_timer_t *t)
{
    struct deferred *d = t->data;
    if (d->a)
        d->a->pending = false;
    if (d->ready_cb)
        d->ready_cb(d->arg, &d->a->a, NULL);
    if (d->attach_cb)
        d->attach_cb(d->arg, &d->a->a, NULL);
    if (d->done_cb)
        d->done_cb(d->arg, NULL);
    if (d->reconcile_cb) {
        struct net_reconcile_stats st = {0};
        d->reconcile_cb(d->arg, &st, NULL);
    }
    uv_close((uv_handle_t *)&d->timer, closed_cb);
}

static struct deferred *
defer(struct net *n, void *arg, struct err *err)
{
    struct deferred *d = calloc(1, sizeof(*d));
    if (!d) {
        err_set(err, ENOMEM, "network: out of memory");
        return NULL;
    }
    d->n = n;
    d->arg = arg;
    d->timer.data = d;
    uv_timer_init(n->loop, &d->timer);
    return d;
}

static int
start(struct deferred *d)
{
    d->n->in_flight++;
    uv_timer_start(&d->timer, fire_cb, 0, 0);
    return 0;
}

int
net_setup(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    struct deferred *d = defer(n, arg, err);
    if (!d)
        return -ENOMEM;
    d->done_cb = cb;
    return start(d);
}

int
net_reconcile(struct net *n, const char *const *live, size_t nlive, net_reconcile_cb cb, void *arg,
              struct err *err)
{
    (void)live;
    (void)nlive;
    struct deferred *d = defer(n, arg, err);
    if (!d)
        return -ENOMEM;
    d->reconcile_cb = cb;
    return start(d);
}

int
net_attach(struct net *n, const struct net_attach_req *req, net_attach_cb cb, void *arg,
           struct err *err)
{
    if (!req->handle || strlen(req->handle) >= sizeof(((struct attached *)0)->handle))
        return err_set(err, EINVAL, "network: a bad handle");
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network of container %s: shutting down", req->handle);
    if (req->nports)
        return err_set(err, ENOTSUP, "ports of container %s: %s", req->handle, WHY);
    if (net_attachment_find(n, req->handle))
        return err_set(err, EEXIST, "network of container %s: exists already", req->handle);
    struct attached *a = calloc(1, sizeof(*a));
    struct deferred *d = a ? defer(n, arg, err) : NULL;
    if (!d) {
        free(a);
        return err_set(err, ENOMEM, "network: out of memory");
    }
    snprintf(a->handle, sizeof(a->handle), "%s", req->handle);
    a->a = (struct net_attachment){
        .handle = a->handle, .disabled = true, .ip = "", .gateway = "", .mac = ""};
    a->pending = true;
    a->next = n->attached;
    n->attached = a;
    d->a = a;
    d->attach_cb = cb;
    d->ready_cb = req->ready;
    return start(d);
}

int
net_detach(struct net *n, const char *handle, net_done_cb cb, void *arg, struct err *err)
{
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network of container %s: shutting down", handle);
    for (struct attached *a = n->attached; a; a = a->next)
        if (a->pending && strcmp(a->handle, handle) == 0)
            return err_set(err, EBUSY, "network of container %s: its attach is running", handle);
    struct deferred *d = defer(n, arg, err);
    if (!d)
        return -ENOMEM;
    for (struct attached **p = &n->attached; *p; p = &(*p)->next)
        if (strcmp((*p)->handle, handle) == 0) {
            struct attached *gone = *p;
            *p = gone->next;
            free(gone);
            break;
        }
    d->done_cb = cb;
    return start(d);
}

const struct net_attachment *
net_attachment_find(struct net *n, const char *handle)
{
    for (struct attached *a = n ? n->attached : NULL; a; a = a->next)
        if (strcmp(a->handle, handle) == 0)
            return &a->a;
    return NULL;
}

void
net_shutdown(struct net *n)
{
    if (n)
        n->shutting_down = true;
}

bool
net_idle(const struct net *n)
{
    return !n || n->in_flight == 0;
}

const struct err *
net_setup_error(const struct net *n)
{
    (void)n;
    return NULL;
}

int
net_teardown(struct net *n, net_done_cb cb, void *arg, struct err *err)
{
    return net_setup(n, cb, arg, err);
}

struct net_probe *
net_probe_new(const struct net *n)
{
    (void)n;
    return calloc(1, sizeof(struct net_probe));
}

void
net_probe_free(struct net_probe *p)
{
    free(p);
}

void
net_probe_run(struct net_probe *p, struct net_health *out)
{
    (void)p;
    memset(out, 0, sizeof(*out));
    out->disabled = true;
    snprintf(out->reason, sizeof(out->reason), "%s", WHY);
}
