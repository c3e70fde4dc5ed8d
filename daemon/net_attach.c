/*
 * Attach and detach: ports chosen on the loop, then the jobs (record,
 * namespace, files: net_record.c's steps) and the plugin chains
 * (net_cni.c) one after the other. Loop thread.
 *
 * An attach goes: ports chosen and the entry made (loop) -> record,
 * namespace and files (job) -> the caller told it may start the runtime
 * -> CNI ADD (children) -> the hosts file and the record (job). When
 * anything after the namespace fails, DEL runs with whatever ADD left,
 * then the namespace and the files go (job), and the caller gets the
 * first error. A detach goes: DEL -> namespace, files, record (job).
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
#include "daemon/net_ports.h"

/* ---- ports ------------------------------------------------------------------ */

/* Is the host port forwarded already (the entry being made included), or the API's? */
static bool
port_taken(void *ctx, uint16_t port, enum net_proto proto)
{
    struct net *n = ctx;
    for (struct net_entry *e = n->entries; e; e = e->next) {
        for (size_t i = 0; i < e->nports; i++) {
            if (e->ports[i].host == port && e->ports[i].proto == proto)
                return true;
        }
    }
    return port == n->rules.api_port && proto == NET_PROTO_TCP;
}

/* Fills e->ports from the request, choosing host ports for 0. */
static int
ports_choose(struct net *n, struct net_entry *e, const struct net_port *req, size_t nreq,
             struct err *err)
{
    if (nreq == 0)
        return 0;
    e->ports = calloc(nreq, sizeof(*e->ports));
    if (!e->ports)
        return err_set(err, ENOMEM, "ports: out of memory");
    return net_ports_choose(req, nreq, port_taken, n, e->ports, &e->nports, err);
}

/* ---- attach ----------------------------------------------------------------- */

static int
validate_req(const struct net_attach_req *req, struct err *err)
{
    return net_req_check(req->handle, req->hostname, req->ports, req->nports, err);
}

static void
waiter_free(struct net_waiter *w)
{
    net_step_free(w->step);
    free(w);
}

/* Ends an attach that failed: the entry goes (its ports with it). */
void
net_attach_fail(struct net_waiter *w, const struct err *err)
{
    struct net *n = w->n;
    if (w->e)
        net_entry_remove(n, w->e);
    n->inflight--;
    w->cb(w->arg, NULL, err);
    waiter_free(w);
}

static struct net_step *
step_new(struct net *n, struct net_entry *e, const char *state)
{
    struct net_step *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->record_path = strdup(e->record_path);
    s->record_text = state ? net_rec_render(e, state) : NULL;
    s->netns_dir = strdup(n->netns_dir);
    s->netns_path = strdup(e->netns_path);
    s->attach_dir = strdup(n->attach_dir);
    s->files_dir = strdup(e->files_dir);
    for (size_t i = 0; i < 3; i++)
        s->file_paths[i] = e->files[i] ? strdup(e->files[i]) : NULL;
    if (!s->record_path || (state && !s->record_text) || !s->netns_dir || !s->netns_path ||
        !s->attach_dir || !s->files_dir) {
        net_step_free(s);
        return NULL;
    }
    return s;
}

/*
 * The /etc files' contents for e: all three before ADD (the hosts file
 * without an address yet), only the hosts file with its address after.
 */
static int
step_set_texts(struct net *n, struct net_step *s, const struct net_entry *e, bool after_add)
{
    s->file_texts[0] = net_hosts_render(e->hostname, after_add ? e->res.ip : NULL);
    if (after_add)
        return s->file_texts[0] ? 0 : -ENOMEM;
    if (asprintf(&s->file_texts[1], "%s\n", e->hostname) < 0)
        s->file_texts[1] = NULL;
    s->file_texts[2] = net_resolv_render(&n->dns, e->disabled);
    return s->file_texts[0] && s->file_texts[1] && s->file_texts[2] ? 0 : -ENOMEM;
}

static void chain_add_done(void *arg, struct json_object *result, const struct err *err);
static void attach_undo(struct net_waiter *w);

static void
prepare_done(void *ctx, bool cancelled)
{
    struct net_waiter *w = ctx;
    struct net *n = w->n;
    struct net_entry *e = w->e;
    struct net_step *s = w->step;
    w->step = NULL;
    if (cancelled || s->rc < 0) {
        struct err err = {0};
        if (cancelled)
            err_set(&err, ECANCELED, "network for %s: cancelled (shutting down)", e->handle);
        else
            err_copy(&err, &s->err);
        net_step_free(s);
        net_attach_fail(w, &err);
        return;
    }
    net_step_free(s);
    net_entry_publish(e);
    if (w->ready)
        w->ready(w->arg, &e->pub, NULL);
    if (e->disabled) {
        e->state = NE_ATTACHED;
        n->inflight--;
        w->cb(w->arg, &e->pub, NULL);
        waiter_free(w);
        return;
    }
    struct cni_chain_req req = {
        .cmd = CNI_ADD,
        .list = e->list,
        .plugin_dir = n->plugin_dir,
        .container_id = e->handle,
        .netns = e->netns_path,
        .ifname = NET_IFNAME,
        .ports = e->ports,
        .nports = e->nports,
        .timeout_ms = n->timeout_ms,
    };
    if (cni_chain_run(n->loop, &req, chain_add_done, w) < 0) {
        err_set(&w->err, ENOMEM, "network for %s: out of memory", e->handle);
        attach_undo(w);
    }
}

static void
prepare_work(void *ctx)
{
    struct net_waiter *w = ctx;
    net_step_prepare(w->step);
}

/* After the first setup: the record, the namespace, then the plugins. */
void
net_attach_begin(struct net_waiter *w)
{
    struct net *n = w->n;
    struct net_entry *e = w->e;
    /* A loopback-only container is attached once the prepare step is done
     * (no ADD follows to rewrite the record): its record says so at once,
     * or a restart would release the network of a container that lives. */
    struct net_step *s = step_new(n, e, e->disabled ? "attached" : "attaching");
    if (s && step_set_texts(n, s, e, false) < 0) {
        net_step_free(s);
        s = NULL;
    }
    if (s && !e->disabled) {
        const char **types = net_conflist_types(e->list);
        size_t k = 0;
        while (types && types[k])
            k++;
        s->plugins = calloc(k + 1, sizeof(char *));
        for (size_t i = 0; s->plugins && i < k; i++)
            if (asprintf(&s->plugins[i], "%s/%s", n->plugin_dir, types[i]) < 0)
                s->plugins[i] = NULL;
        if (!types || !s->plugins) {
            net_step_free(s);
            s = NULL;
        }
        free(types);
    }
    struct err err = {0};
    if (!s) {
        err_set(&err, ENOMEM, "network for %s: out of memory", e->handle);
        net_attach_fail(w, &err);
        return;
    }
    w->step = s;
    /* Prompt: the create's runtime job waits for the namespace. */
    int rc = job_submit_prompt(n->jobs, "net.attach", prepare_work, prepare_done, w);
    if (rc < 0) {
        err_set(&err, -rc, "network for %s: %s", e->handle,
                rc == -ECANCELED ? "shutting down" : "cannot queue the job");
        net_attach_fail(w, &err);
    }
}

static int
attach_defer(struct net *n, const struct net_attach_req *req, net_attach_cb cb, void *arg,
             struct err *err)
{
    struct attach_deferred *d = calloc(1, sizeof(*d));
    bool oom = !d || (req->hostname && !(d->hostname = strdup(req->hostname))) ||
               (req->nports && !(d->ports = calloc(req->nports, sizeof(*d->ports))));
    if (oom) {
        if (d)
            free(d->hostname);
        free(d);
        return err_set(err, ENOMEM, "network of %s: out of memory", req->handle);
    }
    snprintf(d->handle, sizeof(d->handle), "%s", req->handle);
    d->disabled = req->disabled;
    if (req->nports)
        memcpy(d->ports, req->ports, req->nports * sizeof(*d->ports));
    d->nports = req->nports;
    d->ready = req->ready;
    d->cb = cb;
    d->arg = arg;
    *n->deferred_attaches_tail = d;
    n->deferred_attaches_tail = &d->next;
    n->inflight++;
    return 0;
}

void
net_attach_resume_deferred(struct net *n)
{
    struct attach_deferred *list = n->deferred_attaches;
    n->deferred_attaches = NULL;
    n->deferred_attaches_tail = &n->deferred_attaches;
    while (list) {
        struct attach_deferred *d = list;
        list = d->next;
        n->inflight--;
        struct net_attach_req req = {.handle = d->handle,
                                     .hostname = d->hostname,
                                     .disabled = d->disabled,
                                     .ports = d->ports,
                                     .nports = d->nports,
                                     .ready = d->ready};
        struct err err = {0};
        if (net_attach(n, &req, d->cb, d->arg, &err) < 0)
            d->cb(d->arg, NULL, &err);
        free(d->hostname);
        free(d->ports);
        free(d);
    }
}

int
net_attach(struct net *n, const struct net_attach_req *req, net_attach_cb cb, void *arg,
           struct err *err)
{
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network: shutting down");
    if (validate_req(req, err) < 0)
        return -err->code;
    bool disabled = req->disabled || n->disabled;
    if (!disabled && req->nports && !n->generated && !net_conflist_has_portmap(n->operator_list))
        return err_set(err, ENOTSUP, "ports: no plugin of the network %s (%s) takes port mappings",
                       n->name, n->operator_path);
    /* The reconciliation may be releasing this handle's old network (its
     * address, its namespace's path): the attach waits for it. */
    if (n->reconciling)
        return attach_defer(n, req, cb, arg, err);
    if (net_entry_find(n, req->handle))
        return err_set(err, EEXIST, "network of %s: exists already", req->handle);
    struct net_waiter *w = calloc(1, sizeof(*w));
    struct net_entry *e = w ? net_entry_add(n, req->handle, NE_ATTACHING) : NULL;
    if (!e) {
        free(w);
        return err_set(err, ENOMEM, "network of %s: out of memory", req->handle);
    }
    w->n = n;
    w->e = e;
    w->cb = cb;
    w->ready = req->ready;
    w->arg = arg;
    e->disabled = disabled;
    if (req->hostname)
        snprintf(e->hostname, sizeof(e->hostname), "%s", req->hostname);
    int rc = 0;
    if (!disabled)
        rc = ports_choose(n, e, req->ports, req->nports, err);
    if (rc == 0 && !disabled && !(e->list = net_list_for(n, e->nports > 0)))
        rc = err_set(err, ENOMEM, "network of %s: out of memory", req->handle);
    if (rc < 0) {
        net_entry_remove(n, e);
        free(w);
        return rc;
    }
    n->inflight++;
    if (disabled || n->setup.state == NET_SETUP_DONE) {
        net_attach_begin(w);
        return 0;
    }
    /* The setup has not finished, or not started, or failed last time (the
     * operator may have fixed what it tripped on): wait for one. */
    if (n->setup.state != NET_SETUP_RUNNING && (rc = net_setup_start(n, NULL, NULL, err)) < 0) {
        n->inflight--;
        net_entry_remove(n, e);
        free(w);
        return rc;
    }
    *n->waiters_tail = w;
    n->waiters_tail = &w->next;
    return 0;
}

/* ---- the undo after ADD ----------------------------------------------------- */

static void
undo_remove_done(void *ctx, bool cancelled)
{
    struct net_waiter *w = ctx;
    struct net_step *s = w->step;
    w->step = NULL;
    if (!cancelled && s->rc < 0)
        log_warn("net: undo network of %s: %s", w->e->handle, s->err.msg);
    net_step_free(s);
    net_attach_fail(w, &w->err);
}

static void
undo_remove_work(void *ctx)
{
    struct net_waiter *w = ctx;
    net_step_remove(w->step);
}

static void
undo_del_done(void *arg, struct json_object *result, const struct err *err)
{
    struct net_waiter *w = arg;
    struct net *n = w->n;
    json_object_put(result);
    struct net_step *s = step_new(n, w->e, NULL);
    if (s && err) {
        /* Keep the record: the next start-up runs DEL again. */
        log_warn("net: undo network of %s: %s", w->e->handle, err->msg);
        free(s->record_path);
        s->record_path = NULL;
    }
    w->step = s;
    if (!s || job_submit(n->jobs, "net.undo", undo_remove_work, undo_remove_done, w) < 0) {
        /* The record says "attaching": the next start-up undoes the rest. */
        net_step_free(s);
        w->step = NULL;
        net_attach_fail(w, &w->err);
    }
}

/* DEL with whatever ADD left (w->e->result), then the namespace and files. */
static void
attach_undo(struct net_waiter *w)
{
    struct net *n = w->n;
    struct net_entry *e = w->e;
    struct cni_chain_req req = {
        .cmd = CNI_DEL,
        .list = e->list,
        .plugin_dir = n->plugin_dir,
        .container_id = e->handle,
        .netns = e->netns_path,
        .ifname = NET_IFNAME,
        .prev = e->result,
        .ports = e->ports,
        .nports = e->nports,
        .timeout_ms = n->timeout_ms,
    };
    if (cni_chain_run(n->loop, &req, undo_del_done, w) < 0)
        net_attach_fail(w, &w->err);
}

static void
commit_done(void *ctx, bool cancelled)
{
    struct net_waiter *w = ctx;
    struct net *n = w->n;
    struct net_entry *e = w->e;
    struct net_step *s = w->step;
    w->step = NULL;
    if (cancelled || s->rc < 0) {
        if (cancelled)
            err_set(&w->err, ECANCELED, "network for %s: cancelled (shutting down)", e->handle);
        else
            err_copy(&w->err, &s->err);
        net_step_free(s);
        attach_undo(w);
        return;
    }
    net_step_free(s);
    e->state = NE_ATTACHED;
    net_entry_publish(e);
    n->inflight--;
    w->cb(w->arg, &e->pub, NULL);
    waiter_free(w);
}

static void
commit_work(void *ctx)
{
    struct net_waiter *w = ctx;
    net_step_commit(w->step);
}

static void
chain_add_done(void *arg, struct json_object *result, const struct err *err)
{
    struct net_waiter *w = arg;
    struct net *n = w->n;
    struct net_entry *e = w->e;
    json_object_put(e->result);
    e->result = result;
    if (err) {
        err_copy(&w->err, err);
        err_wrap(&w->err, "network for %s", e->handle);
        attach_undo(w);
        return;
    }
    if (net_result_parse(result, n->generated ? n->name : NULL, &e->res, &w->err) < 0) {
        err_wrap(&w->err, "network for %s", e->handle);
        attach_undo(w);
        return;
    }
    struct net_step *s = step_new(n, e, "attached");
    if (!s || step_set_texts(n, s, e, true) < 0) {
        net_step_free(s);
        err_set(&w->err, ENOMEM, "network for %s: out of memory", e->handle);
        attach_undo(w);
        return;
    }
    w->step = s;
    int rc = job_submit_prompt(n->jobs, "net.attach", commit_work, commit_done, w);
    if (rc < 0) {
        w->step = NULL;
        net_step_free(s);
        err_set(&w->err, -rc, "network for %s: %s", e->handle,
                rc == -ECANCELED ? "shutting down" : "cannot queue the job");
        attach_undo(w);
    }
}

/* ---- detach ----------------------------------------------------------------- */

struct detach_op {
    struct detach_op *next_deferred; /* while it waits for the reconciliation */
    struct net *n;
    struct net_entry *e; /* NULL while the record is looked up */
    char handle[NET_HANDLE_MAX + 1];
    net_done_cb cb;
    void *arg;
    struct net_step *step;
    char *lookup_path; /* the record to read */
    char *lookup_text;
    char *netns_path; /* the namespace it would have */
    bool netns_gone;
    struct err err;
    /* uv_hrtime when it was asked for and when its DEL ended (debug log). */
    uint64_t t_start, t_del;
};

static void
detach_end(struct detach_op *op, const struct err *err)
{
    struct net *n = op->n;
    n->inflight--;
    uint64_t now = uv_hrtime();
    log_debug("net: detach %s: DEL done at %.1f ms, done at %.1f ms%s", op->handle,
              op->t_del ? (double)(op->t_del - op->t_start) / 1e6 : -1,
              (double)(now - op->t_start) / 1e6, err ? " (failed)" : "");
    op->cb(op->arg, err);
    net_step_free(op->step);
    free(op->lookup_path);
    free(op->lookup_text);
    free(op->netns_path);
    free(op);
}

static void
detach_remove_done(void *ctx, bool cancelled)
{
    struct detach_op *op = ctx;
    struct net_step *s = op->step;
    struct err err = {0};
    if (cancelled)
        err_set(&err, ECANCELED, "network of %s: detach cancelled (shutting down)", op->handle);
    else if (s->rc < 0)
        err_copy(&err, &s->err);
    if (err.code) {
        /* DEL ran already; a retry runs it again, which does no harm. */
        if (op->e)
            op->e->state = NE_ATTACHED;
        detach_end(op, &err);
        return;
    }
    if (op->e)
        net_entry_remove(op->n, op->e);
    detach_end(op, NULL);
}

static void
detach_remove_work(void *ctx)
{
    struct detach_op *op = ctx;
    net_step_remove(op->step);
}

static void
detach_remove(struct detach_op *op)
{
    struct net *n = op->n;
    struct err err = {0};
    if (op->e)
        op->step = step_new(n, op->e, NULL);
    /* Prompt: the delete is answered once the namespace is gone. */
    int rc = op->step ? job_submit_prompt(n->jobs, "net.detach", detach_remove_work,
                                          detach_remove_done, op)
                      : -ENOMEM;
    if (rc < 0) {
        if (op->e)
            op->e->state = NE_ATTACHED;
        err_set(&err, -rc, "network of %s: %s", op->handle,
                rc == -ECANCELED ? "shutting down" : "out of memory");
        detach_end(op, &err);
    }
}

static void
detach_del_done(void *arg, struct json_object *result, const struct err *err)
{
    struct detach_op *op = arg;
    op->t_del = uv_hrtime();
    json_object_put(result);
    if (err) {
        struct err e = {0};
        err_copy(&e, err);
        err_wrap(&e, "network of %s", op->handle);
        op->e->state = NE_ATTACHED;
        detach_end(op, &e);
        return;
    }
    detach_remove(op);
}

static void
detach_del(struct detach_op *op)
{
    struct net *n = op->n;
    struct net_entry *e = op->e;
    if (e->disabled || !e->list) {
        detach_remove(op);
        return;
    }
    struct cni_chain_req req = {
        .cmd = CNI_DEL,
        .list = e->list,
        .plugin_dir = n->plugin_dir,
        .container_id = e->handle,
        /* A namespace gone with a reboot: the plugins release what is
         * on the host and skip the rest. */
        .netns = e->netns_gone ? "" : e->netns_path,
        .ifname = NET_IFNAME,
        .prev = e->result,
        .ports = e->ports,
        .nports = e->nports,
        .timeout_ms = n->timeout_ms,
    };
    if (cni_chain_run(n->loop, &req, detach_del_done, op) < 0) {
        struct err err = {0};
        err_set(&err, ENOMEM, "network of %s: out of memory", op->handle);
        e->state = NE_ATTACHED;
        detach_end(op, &err);
    }
}

static void
lookup_work(void *ctx)
{
    struct detach_op *op = ctx;
    size_t len = 0;
    struct err ignored = {0};
    if (fs_read_file(op->lookup_path, 1 << 20, &op->lookup_text, &len, &ignored) < 0)
        op->lookup_text = NULL;
    op->netns_gone = !nethost_netns_mounted(op->netns_path);
}

static void
lookup_done(void *ctx, bool cancelled)
{
    struct detach_op *op = ctx;
    struct net *n = op->n;
    struct err err = {0};
    if (cancelled) {
        err_set(&err, ECANCELED, "network of %s: detach cancelled (shutting down)", op->handle);
        detach_end(op, &err);
        return;
    }
    if (net_entry_find(n, op->handle)) {
        err_set(&err, EBUSY, "network of %s: an attach started meanwhile", op->handle);
        detach_end(op, &err);
        return;
    }
    struct net_rec rec;
    struct net_entry *e = NULL;
    if (op->lookup_text && net_rec_parse(op->lookup_text, &rec, &err) == 0) {
        e = net_entry_add(n, op->handle, NE_DETACHING);
        if (e)
            net_rec_to_entry(&rec, e);
        net_rec_close(&rec);
    }
    if (!e) {
        /* No record (or one that cannot be read): only a namespace file a
         * crash may have left. */
        if (op->lookup_text)
            log_warn("net: %s: %s; removed", op->lookup_path, err.msg);
        op->step = calloc(1, sizeof(*op->step));
        if (op->step && asprintf(&op->step->netns_path, "%s/%s", n->netns_dir, op->handle) < 0)
            op->step->netns_path = NULL;
        if (op->step && op->lookup_text)
            op->step->record_path = strdup(op->lookup_path);
        detach_remove(op);
        return;
    }
    e->netns_gone = op->netns_gone;
    op->e = e;
    detach_del(op);
}

/* Goes on with a detach: the entry's DEL, or the record looked up first. */
static void
detach_start(struct detach_op *op)
{
    struct net *n = op->n;
    struct net_entry *e = net_entry_find(n, op->handle);
    struct err err = {0};
    if (e && e->state != NE_ATTACHED) {
        err_set(&err, EBUSY, "network of %s: an attach or detach is running", op->handle);
        detach_end(op, &err);
        return;
    }
    if (e) {
        op->e = e;
        e->state = NE_DETACHING;
        detach_del(op);
        return;
    }
    int rc = job_submit(n->jobs, "net.detach", lookup_work, lookup_done, op);
    if (rc < 0) {
        err_set(&err, -rc, "network of %s: %s", op->handle,
                rc == -ECANCELED ? "shutting down" : "cannot queue the job");
        detach_end(op, &err);
    }
}

void
net_detach_resume_deferred(struct net *n)
{
    /* Oldest first, as they were asked for. */
    struct detach_op *list = NULL;
    while (n->deferred) {
        struct detach_op *op = n->deferred;
        n->deferred = op->next_deferred;
        op->next_deferred = list;
        list = op;
    }
    while (list) {
        struct detach_op *op = list;
        list = op->next_deferred;
        op->next_deferred = NULL;
        detach_start(op);
    }
}

int
net_detach(struct net *n, const char *handle, net_done_cb cb, void *arg, struct err *err)
{
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network: shutting down");
    if (!handle || !rt_handle_valid(handle))
        return err_set(err, EINVAL, "network: container handle %s is invalid",
                       handle ? handle : "(null)");
    struct net_entry *e = net_entry_find(n, handle);
    if (e && e->state != NE_ATTACHED && !n->reconciling)
        return err_set(err, EBUSY, "network of %s: an attach or detach is running", handle);
    struct detach_op *op = calloc(1, sizeof(*op));
    if (!op)
        return err_set(err, ENOMEM, "network of %s: out of memory", handle);
    op->n = n;
    op->cb = cb;
    op->arg = arg;
    op->t_start = uv_hrtime();
    snprintf(op->handle, sizeof(op->handle), "%s", handle);
    if (asprintf(&op->lookup_path, "%s/%s.json", n->attach_dir, handle) < 0) {
        op->lookup_path = NULL;
        free(op);
        return err_set(err, ENOMEM, "network of %s: out of memory", handle);
    }
    if (asprintf(&op->netns_path, "%s/%s", n->netns_dir, handle) < 0) {
        op->netns_path = NULL;
        free(op->lookup_path);
        free(op);
        return err_set(err, ENOMEM, "network of %s: out of memory", handle);
    }
    n->inflight++;
    if (n->reconciling && (!e || e->state != NE_ATTACHED)) {
        /* The reconciliation may be releasing it, or about to keep it. */
        op->next_deferred = n->deferred;
        n->deferred = op;
        return 0;
    }
    if (e) {
        op->e = e;
        e->state = NE_DETACHING;
        detach_del(op);
        return 0;
    }
    if (job_submit(n->jobs, "net.detach", lookup_work, lookup_done, op) < 0) {
        n->inflight--;
        free(op->lookup_path);
        free(op->netns_path);
        free(op);
        return err_set(err, ENOMEM, "network of %s: cannot queue the job", handle);
    }
    return 0;
}
