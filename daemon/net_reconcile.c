/*
 * Start-up reconciliation of the network with the containers that still
 * exist. Loop thread; the scans and removals are jobs, the DELs plugin
 * runs.
 *
 *   setup (bridge, forwarding, rules)
 *   -> scan (job): the records, whether each namespace is still bound,
 *      the namespace files, host-local's leases
 *   -> per record: a live container's network is kept (and registered),
 *      any other is released (DEL with its own list and result, then its
 *      namespace, files and record); per lease that no record claims, a
 *      DEL for its container ID; per live container whose host side went
 *      missing, its veth back on the bridge and the firewall and portmap
 *      plugins run again (their ADD is idempotent)
 *   -> cleanup (job): namespace files and leases nothing claims
 *
 * Attaches may run meanwhile (they wait for the setup only): anything of
 * a handle that has an entry on the loop is theirs, and left alone.
 */
#include "daemon/net_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "daemon/net_cni.h"

#define RECORD_MAX (1 << 20)

struct scanned {
    char *path;
    bool ok; /* parsed */
    struct net_rec rec;
    bool netns_mounted;
};

struct reconcile {
    struct net *n;
    char **live;
    size_t nlive;
    net_reconcile_cb cb;
    void *arg;
    struct net_reconcile_stats st;
    struct err err;
    bool failed;
    unsigned pending; /* releases, orphan DELs and repairs in flight */
    bool scanning;    /* scan_done is still handing out work */

    /* scan inputs and results (the job's) */
    char *attach_dir, *netns_dir, *lease_dir, *files_root;
    struct scanned *recs;
    size_t nrecs;
    char **netns_names, **files_names;
    size_t nnetns, nfiles;
    struct nethost_lease *leases;
    size_t nleases;

    /* cleanup (the last job's): paths to unmount and remove, files to
     * unlink, directories of /etc files to remove */
    char **netns_remove, **files_remove, **dirs_remove;
    size_t nnetns_remove, nfiles_remove, ndirs_remove;
    /* repair: veths to put back on the bridge */
    char **veths;
    size_t nveths;
    char *bridge;
};

static void
fail(struct reconcile *r, const struct err *err)
{
    log_warn("net: reconcile: %s", err->msg);
    if (!r->failed)
        err_copy(&r->err, err);
    r->failed = true;
}

/* A job of the reconciliation was cancelled before it ran. */
static void
fail_cancelled(struct reconcile *r)
{
    struct err e = {0};
    err_set(&e, ECANCELED, "cancelled (shutting down)");
    fail(r, &e);
}

static int
strv_add(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof(char *));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    if (!(nv[*n] = strdup(s)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

static void
strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void
reconcile_free(struct reconcile *r)
{
    strv_free(r->live, r->nlive);
    free(r->attach_dir);
    free(r->netns_dir);
    free(r->lease_dir);
    free(r->files_root);
    for (size_t i = 0; i < r->nrecs; i++) {
        free(r->recs[i].path);
        net_rec_close(&r->recs[i].rec);
    }
    free(r->recs);
    strv_free(r->netns_names, r->nnetns);
    strv_free(r->files_names, r->nfiles);
    free(r->leases);
    strv_free(r->netns_remove, r->nnetns_remove);
    strv_free(r->files_remove, r->nfiles_remove);
    strv_free(r->dirs_remove, r->ndirs_remove);
    strv_free(r->veths, r->nveths);
    free(r->bridge);
    free(r);
}

/* The reconciliation is over: what waited for it goes on, then its caller is told. */
static void
reconcile_end(struct reconcile *r)
{
    struct net *n = r->n;
    n->inflight--;
    n->reconciling--;
    net_detach_resume_deferred(n);
    net_attach_resume_deferred(n);
    r->cb(r->arg, &r->st, r->failed ? &r->err : NULL);
    reconcile_free(r);
}

static bool
is_live(const struct reconcile *r, const char *handle)
{
    for (size_t i = 0; i < r->nlive; i++)
        if (strcmp(r->live[i], handle) == 0)
            return true;
    return false;
}

/* ---- the end ---------------------------------------------------------------- */

static void
cleanup_work(void *ctx)
{
    struct reconcile *r = ctx;
    for (size_t i = 0; i < r->nnetns_remove; i++) {
        struct err e = {0};
        if (nethost_netns_remove(r->netns_remove[i], &e) < 0)
            log_warn("net: reconcile: %s", e.msg);
    }
    for (size_t i = 0; i < r->nfiles_remove; i++)
        if (unlink(r->files_remove[i]) < 0 && errno != ENOENT)
            log_warn("net: reconcile: remove %s: %s", r->files_remove[i], strerror(errno));
    for (size_t i = 0; i < r->ndirs_remove; i++) {
        struct err e = {0};
        if (fs_remove_tree(r->dirs_remove[i], &e) < 0)
            log_warn("net: reconcile: %s", e.msg);
    }
    for (size_t i = 0; i < r->nveths; i++) {
        char master[NET_NAME_MAX + 1];
        bool exists, up;
        nethost_link_state(r->veths[i], &exists, &up, NULL);
        nethost_link_master(r->veths[i], master);
        if (!exists || strcmp(master, r->bridge) == 0)
            continue;
        struct err e = {0};
        if (nethost_link_set_master(r->veths[i], r->bridge, &e) < 0)
            log_warn("net: reconcile: %s", e.msg);
        else
            r->st.repaired++;
    }
}

static void
cleanup_done(void *ctx, bool cancelled)
{
    struct reconcile *r = ctx;
    if (cancelled)
        fail_cancelled(r);
    log_info("net: reconciled: %u kept, %u released, %u orphans removed, %u repaired", r->st.kept,
             r->st.released, r->st.orphans, r->st.repaired);
    reconcile_end(r);
}

static void
maybe_finish(struct reconcile *r)
{
    if (r->pending || r->scanning)
        return;
    if (job_submit(r->n->jobs, "net.reconcile", cleanup_work, cleanup_done, r) < 0)
        cleanup_done(r, true);
}

/* ---- releasing a record ----------------------------------------------------- */

struct release {
    struct reconcile *r;
    struct net_entry *e;
    bool del_failed;
    struct net_step *step;
};

static void
release_remove_done(void *ctx, bool cancelled)
{
    struct release *rel = ctx;
    struct reconcile *r = rel->r;
    if (!cancelled && rel->step->rc < 0)
        fail(r, &rel->step->err);
    else if (!cancelled && !rel->del_failed)
        r->st.released++;
    net_step_free(rel->step);
    net_entry_remove(r->n, rel->e);
    free(rel);
    r->pending--;
    maybe_finish(r);
}

static void
release_remove_work(void *ctx)
{
    struct release *rel = ctx;
    net_step_remove(rel->step);
}

static void
release_del_done(void *arg, struct json_object *result, const struct err *err)
{
    struct release *rel = arg;
    struct reconcile *r = rel->r;
    struct net_entry *e = rel->e;
    json_object_put(result);
    if (err) {
        /* The record stays for the next start-up to try again. */
        fail(r, err);
        rel->del_failed = true;
    }
    struct net_step *s = calloc(1, sizeof(*s));
    bool oom = !s;
    if (s) {
        s->netns_path = strdup(e->netns_path);
        s->record_path = rel->del_failed ? NULL : strdup(e->record_path);
        s->files_dir = strdup(e->files_dir);
        for (size_t i = 0; i < 3; i++)
            s->file_paths[i] = e->files[i] ? strdup(e->files[i]) : NULL;
        oom = !s->netns_path || !s->files_dir || (!rel->del_failed && !s->record_path);
    }
    rel->step = s;
    if (oom || job_submit(r->n->jobs, "net.reconcile", release_remove_work, release_remove_done,
                          rel) < 0) {
        net_step_free(s);
        net_entry_remove(r->n, e);
        free(rel);
        r->pending--;
        maybe_finish(r);
    }
}

static void
release_start(struct reconcile *r, struct scanned *sc)
{
    struct net *n = r->n;
    struct net_entry *e = net_entry_add(n, sc->rec.handle, NE_DETACHING);
    struct release *rel = e ? calloc(1, sizeof(*rel)) : NULL;
    if (!rel) {
        if (e)
            net_entry_remove(n, e);
        struct err err = {0};
        err_set(&err, ENOMEM, "release %s: out of memory", sc->rec.handle);
        fail(r, &err);
        return;
    }
    net_rec_to_entry(&sc->rec, e);
    rel->r = r;
    rel->e = e;
    r->pending++;
    if (e->disabled || !e->list) {
        release_del_done(rel, NULL, NULL);
        return;
    }
    log_info("net: releasing the network of %s (its container is gone)", e->handle);
    struct cni_chain_req req = {
        .cmd = CNI_DEL,
        .list = e->list,
        .plugin_dir = n->plugin_dir,
        .container_id = e->handle,
        .netns = sc->netns_mounted ? e->netns_path : "",
        .ifname = NET_IFNAME,
        .prev = e->result,
        .ports = e->ports,
        .nports = e->nports,
        .timeout_ms = n->timeout_ms,
    };
    if (cni_chain_run(n->loop, &req, release_del_done, rel) < 0) {
        struct err err = {0};
        err_set(&err, ENOMEM, "release %s: out of memory", e->handle);
        release_del_done(rel, NULL, &err);
    }
}

/* ---- leases nobody claims ----------------------------------------------------- */

struct orphan_del {
    struct reconcile *r;
    char *lease_path;
};

static void
orphan_del_done(void *arg, struct json_object *result, const struct err *err)
{
    struct orphan_del *od = arg;
    struct reconcile *r = od->r;
    json_object_put(result);
    if (err)
        log_warn("net: reconcile: %s (the lease file goes anyway)", err->msg);
    /* DEL released the lease when it could; the file goes in any case. */
    if (strv_add(&r->files_remove, &r->nfiles_remove, od->lease_path) < 0)
        log_warn("net: reconcile: out of memory");
    r->st.orphans++;
    free(od->lease_path);
    free(od);
    r->pending--;
    maybe_finish(r);
}

static void
orphan_lease(struct reconcile *r, const struct nethost_lease *l, struct json_object *list)
{
    struct net *n = r->n;
    struct orphan_del *od = calloc(1, sizeof(*od));
    if (!od || asprintf(&od->lease_path, "%s/%s", r->lease_dir, l->ip) < 0) {
        free(od);
        return;
    }
    od->r = r;
    r->pending++;
    log_info("net: releasing the address %s of %s (no record claims it)", l->ip, l->id);
    struct cni_chain_req req = {
        .cmd = CNI_DEL,
        .list = list,
        .plugin_dir = n->plugin_dir,
        .container_id = l->id,
        .netns = "",
        .ifname = NET_IFNAME,
        .timeout_ms = n->timeout_ms,
    };
    if (cni_chain_run(n->loop, &req, orphan_del_done, od) < 0)
        orphan_del_done(od, NULL, NULL);
}

/* ---- repairing a live container --------------------------------------------- */

struct repair {
    struct reconcile *r;
    char handle[NET_HANDLE_MAX + 1];
};

static void
repair_done(void *arg, struct json_object *result, const struct err *err)
{
    struct repair *rp = arg;
    struct reconcile *r = rp->r;
    json_object_put(result);
    if (err)
        fail(r, err);
    else
        r->st.repaired++;
    free(rp);
    r->pending--;
    maybe_finish(r);
}

static void
repair_rules(struct reconcile *r, struct net_entry *e)
{
    struct net *n = r->n;
    /* portmap's ADD is idempotent; the bridge's would make a second veth. */
    static const char *const idempotent[] = {"portmap", NULL};
    struct repair *rp = calloc(1, sizeof(*rp));
    if (!rp)
        return;
    rp->r = r;
    snprintf(rp->handle, sizeof(rp->handle), "%s", e->handle);
    r->pending++;
    log_info("net: restoring the firewall and port rules of %s", e->handle);
    struct cni_chain_req req = {
        .cmd = CNI_ADD,
        .list = e->list,
        .plugin_dir = n->plugin_dir,
        .container_id = e->handle,
        .netns = e->netns_path,
        .ifname = NET_IFNAME,
        .prev = e->result,
        .ports = e->ports,
        .nports = e->nports,
        .only = idempotent,
        .timeout_ms = n->timeout_ms,
    };
    if (cni_chain_run(n->loop, &req, repair_done, rp) < 0) {
        free(rp);
        r->pending--;
    }
}

/* ---- the scan --------------------------------------------------------------- */

static void
scan_work(void *ctx)
{
    struct reconcile *r = ctx;
    DIR *d = opendir(r->attach_dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        /* A record's write a kill cut short (fs_write_file_atomic's
         * temporary): no attach or detach writes one while this runs. */
        if (de->d_name[0] != '.' && strstr(de->d_name, ".json.tmp.")) {
            if (unlinkat(dirfd(d), de->d_name, 0) == 0)
                r->st.orphans++;
            continue;
        }
        if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        struct scanned *nv = realloc(r->recs, (r->nrecs + 1) * sizeof(*nv));
        if (!nv)
            break;
        r->recs = nv;
        struct scanned *sc = &r->recs[r->nrecs++];
        memset(sc, 0, sizeof(*sc));
        sc->path = fs_path_join(r->attach_dir, de->d_name);
        cleanup_free char *text = NULL;
        size_t tlen = 0;
        struct err e = {0};
        if (!sc->path || fs_read_file(sc->path, RECORD_MAX, &text, &tlen, &e) < 0 ||
            net_rec_parse(text, &sc->rec, &e) < 0) {
            log_warn("net: reconcile: %s: %s", sc->path ? sc->path : de->d_name, e.msg);
            continue;
        }
        /* The file's name must be the record's handle. */
        if (strncmp(de->d_name, sc->rec.handle, len - 5) != 0 ||
            strlen(sc->rec.handle) != len - 5) {
            net_rec_close(&sc->rec);
            continue;
        }
        sc->ok = true;
        sc->netns_mounted = nethost_netns_mounted(sc->rec.netns);
    }
    if (d)
        closedir(d);
    d = opendir(r->netns_dir);
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (strv_add(&r->netns_names, &r->nnetns, de->d_name) < 0)
            break;
    }
    if (d)
        closedir(d);
    d = opendir(r->files_root);
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (strv_add(&r->files_names, &r->nfiles, de->d_name) < 0)
            break;
    }
    if (d)
        closedir(d);
    if (r->lease_dir) {
        struct err e = {0};
        if (nethost_leases_list(r->lease_dir, &r->leases, &r->nleases, &e) < 0)
            log_warn("net: reconcile: %s", e.msg);
    }
}

/* Is handle claimed: by a record just read, or by an entry of this run? */
static bool
claimed(const struct reconcile *r, const char *handle)
{
    if (net_entry_find(r->n, handle))
        return true;
    for (size_t i = 0; i < r->nrecs; i++)
        if (r->recs[i].ok && strcmp(r->recs[i].rec.handle, handle) == 0)
            return true;
    return false;
}

static void
keep(struct reconcile *r, struct scanned *sc)
{
    struct net *n = r->n;
    struct net_entry *e = net_entry_add(n, sc->rec.handle, NE_ATTACHED);
    if (!e) {
        struct err err = {0};
        err_set(&err, ENOMEM, "keep %s: out of memory", sc->rec.handle);
        fail(r, &err);
        return;
    }
    net_rec_to_entry(&sc->rec, e);
    e->netns_gone = !sc->netns_mounted;
    if (!e->disabled && e->result &&
        net_result_parse(e->result, n->generated ? n->name : NULL, &e->res, NULL) < 0)
        log_warn("net: reconcile: the record of %s has no address", e->handle);
    net_entry_publish(e);
    r->st.kept++;
    if (e->disabled || !e->list || e->netns_gone || !n->generated)
        return;
    if (n->setup_bridge_created && e->res.host_ifname[0] &&
        strv_add(&r->veths, &r->nveths, e->res.host_ifname) < 0)
        log_warn("net: reconcile: out of memory");
    if (n->setup_rules_missing && e->nports)
        repair_rules(r, e);
}

static void
scan_done(void *ctx, bool cancelled)
{
    struct reconcile *r = ctx;
    struct net *n = r->n;
    if (cancelled) {
        fail_cancelled(r);
        reconcile_end(r);
        return;
    }
    if (n->setup_bridge_created)
        r->bridge = strdup(n->name);
    r->scanning = true;
    /* Namespace files and leases first: what they are checked against
     * (records, entries) is complete now, before releases change it. */
    for (size_t i = 0; i < r->nnetns; i++) {
        if (claimed(r, r->netns_names[i]))
            continue;
        cleanup_free char *path = fs_path_join(r->netns_dir, r->netns_names[i]);
        if (path && strv_add(&r->netns_remove, &r->nnetns_remove, path) == 0)
            r->st.orphans++;
    }
    for (size_t i = 0; i < r->nfiles; i++) {
        if (claimed(r, r->files_names[i]))
            continue;
        cleanup_free char *path = fs_path_join(r->files_root, r->files_names[i]);
        if (path && strv_add(&r->dirs_remove, &r->ndirs_remove, path) < 0)
            log_warn("net: reconcile: out of memory");
    }
    struct json_object *list = n->generated ? net_list_for(n, false) : NULL;
    for (size_t i = 0; list && i < r->nleases; i++)
        if (!claimed(r, r->leases[i].id))
            orphan_lease(r, &r->leases[i], list);
    json_object_put(list);
    for (size_t i = 0; i < r->nrecs; i++) {
        struct scanned *sc = &r->recs[i];
        if (!sc->ok) {
            if (sc->path && strv_add(&r->files_remove, &r->nfiles_remove, sc->path) < 0)
                log_warn("net: reconcile: out of memory");
            continue;
        }
        if (net_entry_find(n, sc->rec.handle))
            continue; /* attached (or being attached) in this run */
        if (is_live(r, sc->rec.handle) && strcmp(sc->rec.state, "attached") == 0)
            keep(r, sc);
        else
            release_start(r, sc);
    }
    r->scanning = false;
    maybe_finish(r);
}

static void
reconcile_setup_done(void *arg, const struct err *err)
{
    struct reconcile *r = arg;
    if (err)
        fail(r, err); /* releases need no bridge: go on */
    if (job_submit(r->n->jobs, "net.reconcile", scan_work, scan_done, r) < 0)
        scan_done(r, true);
}

int
net_reconcile(struct net *n, const char *const *live, size_t nlive, net_reconcile_cb cb, void *arg,
              struct err *err)
{
    if (n->shutting_down)
        return err_set(err, ECANCELED, "network: shutting down");
    struct reconcile *r = calloc(1, sizeof(*r));
    if (!r)
        return err_set(err, ENOMEM, "network reconcile: out of memory");
    r->n = n;
    r->cb = cb;
    r->arg = arg;
    bool oom = false;
    for (size_t i = 0; i < nlive && !oom; i++)
        oom = strv_add(&r->live, &r->nlive, live[i]) < 0;
    r->attach_dir = strdup(n->attach_dir);
    r->netns_dir = strdup(n->netns_dir);
    r->lease_dir = n->lease_dir ? strdup(n->lease_dir) : NULL;
    r->files_root = strdup(n->files_root);
    if (oom || !r->attach_dir || !r->netns_dir || !r->files_root ||
        (n->lease_dir && !r->lease_dir)) {
        reconcile_free(r);
        return err_set(err, ENOMEM, "network reconcile: out of memory");
    }
    int rc = net_setup_start(n, reconcile_setup_done, r, err);
    if (rc < 0) {
        reconcile_free(r);
        return rc;
    }
    n->inflight++;
    n->reconciling++;
    return 0;
}
