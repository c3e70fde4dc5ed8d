/*
 * The Windows network's records and the blocking steps of its jobs
 * (net_hcn_int.h): a container's record, <root>/network/hcn/<handle>, is
 * written durably before its endpoint and namespace are made, so that a
 * daemon killed at any point leaves something the next start can delete
 * (net_hcn_windows.c's reconciliation); the HCN calls themselves are
 * runtime/hcs/hcn_api.h's. Pool threads, on owned copies; every function
 * here blocks on disk or on HNS.
 */
#include "daemon/net_hcn_int.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"

#define REC_MAX (64 * 1024)

/* ---- the record's text ---------------------------------------------------------- */

static void
add_str(json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}

char *
hcn_rec_render(const struct hcn_rec *r)
{
    json_object *o = json_object_new_object();
    add_str(o, "handle", r->handle);
    add_str(o, "state", r->attached ? "attached" : "attaching");
    json_object_object_add(o, "disabled", json_object_new_boolean(r->disabled));
    if (!r->disabled) {
        add_str(o, "endpoint", r->ids.endpoint_id);
        add_str(o, "namespace", r->ids.namespace_id);
        if (r->ids.mac[0])
            add_str(o, "mac", r->ids.mac);
        add_str(o, "ip", r->ip);
        json_object_object_add(o, "prefix", json_object_new_int((int)r->prefix));
        add_str(o, "gateway", r->gateway);
        json_object *ports = json_object_new_array();
        for (size_t i = 0; i < r->nports; i++) {
            json_object *p = json_object_new_object();
            json_object_object_add(p, "host", json_object_new_int(r->ports[i].host));
            json_object_object_add(p, "container", json_object_new_int(r->ports[i].container));
            add_str(p, "protocol", net_proto_name(r->ports[i].proto));
            json_object_array_add(ports, p);
        }
        json_object_object_add(o, "ports", ports);
    }
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
    char *text = s ? strdup(s) : NULL;
    json_object_put(o);
    return text;
}

/* The string field k of o into out (size bytes), or false. */
static bool
get_str(json_object *o, const char *k, char *out, size_t size)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string) ||
        (size_t)json_object_get_string_len(v) >= size)
        return false;
    memcpy(out, json_object_get_string(v), (size_t)json_object_get_string_len(v) + 1);
    return true;
}

/* The integer field k of o in [lo, hi], or false. */
static bool
get_int(json_object *o, const char *k, int lo, int hi, int *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
        return false;
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        return false;
    *out = (int)x;
    return true;
}

static int
parse_ports(json_object *o, struct hcn_rec *r, struct err *err)
{
    json_object *ports;
    if (!json_object_object_get_ex(o, "ports", &ports) ||
        !json_object_is_type(ports, json_type_array) ||
        json_object_array_length(ports) > NET_PORTS_MAX)
        return err_set(err, EINVAL, "ports: not a list of at most %d", NET_PORTS_MAX);
    for (size_t i = 0; i < json_object_array_length(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        int host, ctr;
        char proto[8];
        if (!get_int(p, "host", 1, 65535, &host) || !get_int(p, "container", 1, 65535, &ctr) ||
            !get_str(p, "protocol", proto, sizeof(proto)) ||
            (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0))
            return err_set(err, EINVAL, "ports[%zu]: not a host, container and protocol", i);
        r->ports[r->nports++] =
            (struct net_port){.host = (uint16_t)host,
                              .container = (uint16_t)ctr,
                              .proto = strcmp(proto, "udp") == 0 ? NET_PROTO_UDP : NET_PROTO_TCP};
    }
    return 0;
}

int
hcn_rec_parse(const char *text, struct hcn_rec *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    json_object *o = json_tokener_parse(text);
    char state[16];
    json_object *dis;
    int prefix = 0, rc = 0;
    if (!o || !json_object_is_type(o, json_type_object))
        rc = err_set(err, EINVAL, "not a JSON object");
    else if (!get_str(o, "handle", out->handle, sizeof(out->handle)) ||
             !rt_handle_valid(out->handle))
        rc = err_set(err, EINVAL, "handle: missing or invalid");
    else if (!get_str(o, "state", state, sizeof(state)) ||
             (strcmp(state, "attached") != 0 && strcmp(state, "attaching") != 0))
        rc = err_set(err, EINVAL, "state: not attached or attaching");
    else if (!json_object_object_get_ex(o, "disabled", &dis) ||
             !json_object_is_type(dis, json_type_boolean))
        rc = err_set(err, EINVAL, "disabled: not a boolean");
    if (rc == 0) {
        out->attached = strcmp(state, "attached") == 0;
        out->disabled = json_object_get_boolean(dis);
    }
    if (rc == 0 && !out->disabled) {
        if (!get_str(o, "endpoint", out->ids.endpoint_id, sizeof(out->ids.endpoint_id)) ||
            !hcs_guid_valid(out->ids.endpoint_id) ||
            !get_str(o, "namespace", out->ids.namespace_id, sizeof(out->ids.namespace_id)) ||
            !hcs_guid_valid(out->ids.namespace_id))
            rc = err_set(err, EINVAL, "endpoint or namespace: not a GUID");
        else if (json_object_object_get_ex(o, "mac", NULL) &&
                 (!get_str(o, "mac", out->ids.mac, sizeof(out->ids.mac)) ||
                  strlen(out->ids.mac) != HCN_MAC_SIZE - 1))
            rc = err_set(err, EINVAL, "mac: not six hex pairs");
        else if (!get_str(o, "ip", out->ip, sizeof(out->ip)) ||
                 !get_int(o, "prefix", 8, 30, &prefix) ||
                 !get_str(o, "gateway", out->gateway, sizeof(out->gateway)))
            rc = err_set(err, EINVAL, "ip, prefix or gateway: missing");
        else
            rc = parse_ports(o, out, err);
        out->prefix = (unsigned)prefix;
    }
    json_object_put(o);
    return rc;
}

/* ---- files ---------------------------------------------------------------------- */

int
hcn_rec_write(const char *dir, const struct hcn_rec *r, struct err *err)
{
    int rc = fs_mkdir_p(dir, 0700, err);
    if (rc < 0)
        return rc;
    cleanup_free char *path = fs_path_join(dir, r->handle);
    cleanup_free char *text = hcn_rec_render(r);
    if (!path || !text)
        return err_set(err, ENOMEM, "network record of %s: out of memory", r->handle);
    return fs_write_file_atomic(path, text, strlen(text), 0600, err);
}

int
hcn_rec_remove(const char *dir, const char *handle, struct err *err)
{
    cleanup_free char *path = fs_path_join(dir, handle);
    if (!path)
        return err_set(err, ENOMEM, "network record of %s: out of memory", handle);
    int rc = osfs_unlink(path);
    if (rc < 0 && rc != -ENOENT)
        return err_errno(err, -rc, "remove the network record %s", path);
    return fs_fsync_dir(dir, err);
}

int
hcn_rec_list(const char *dir, struct hcn_rec **out, size_t *n, struct err *err)
{
    *out = NULL;
    *n = 0;
    struct osfs_dir *d = NULL;
    int rc = osfs_dir_open(dir, &d);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return err_errno(err, -rc, "network records %s", dir);
    size_t cap = 0;
    const char *name;
    while ((name = osfs_dir_next(d, &rc)) != NULL) {
        if (name[0] == '.')
            continue; /* a temporary of fs_write_file_atomic */
        cleanup_free char *path = fs_path_join(dir, name);
        char *text = NULL;
        size_t len = 0;
        struct err e = {0};
        struct hcn_rec r;
        if (!path || fs_read_file(path, REC_MAX, &text, &len, &e) < 0 ||
            hcn_rec_parse(text, &r, &e) < 0 || strcmp(r.handle, name) != 0) {
            log_warn("net: network record %s: %s; left alone", path ? path : name,
                     e.msg[0] ? e.msg : "not its handle's");
            free(text);
            continue;
        }
        free(text);
        if (*n == cap) {
            struct hcn_rec *nv = realloc(*out, (cap ? cap * 2 : 8) * sizeof(*nv));
            if (!nv) {
                osfs_dir_close(d);
                return err_set(err, ENOMEM, "network records: out of memory");
            }
            *out = nv;
            cap = cap ? cap * 2 : 8;
        }
        (*out)[(*n)++] = r;
    }
    osfs_dir_close(d);
    if (rc < 0)
        return err_errno(err, -rc, "network records %s", dir);
    return 0;
}

/* ---- the owner tag and the sweep ------------------------------------------------------ */

int
hcn_owner_load(const char *dir, char owner[HCN_OWNER_LEN + 1], struct err *err)
{
    cleanup_free char *path = fs_path_join(dir, ".owner");
    if (!path)
        return err_set(err, ENOMEM, "network owner tag: out of memory");
    char *text = NULL;
    size_t len = 0;
    struct err e = {0};
    int rc = fs_read_file(path, 64, &text, &len, &e);
    if (rc == 0) {
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
            text[--len] = '\0';
        bool ok = hcn_owner_valid(text);
        if (ok)
            memcpy(owner, text, HCN_OWNER_LEN + 1);
        free(text);
        if (!ok)
            return err_set(err, EINVAL, "network owner tag %s: not %d hex digits", path,
                           HCN_OWNER_LEN);
        return 0;
    }
    if (rc != -ENOENT)
        return err_errno(err, -rc, "network owner tag %s", path);
    struct hcs_guid g;
    if ((rc = hcs_guid_random(&g, err)) < 0)
        return rc;
    char guid[HCS_GUID_SIZE], line[HCN_OWNER_LEN + 2];
    hcs_guid_format(&g, guid);
    snprintf(line, sizeof(line), "%.*s\n", HCN_OWNER_LEN, guid);
    if ((rc = fs_write_file_atomic(path, line, strlen(line), 0600, err)) < 0)
        return rc;
    memcpy(owner, line, HCN_OWNER_LEN);
    owner[HCN_OWNER_LEN] = '\0';
    return 0;
}

static bool
recorded(const struct hcn_rec *recs, size_t n, const char *endpoint_id)
{
    for (size_t i = 0; i < n; i++)
        if (!recs[i].disabled && strcmp(recs[i].ids.endpoint_id, endpoint_id) == 0)
            return true;
    return false;
}

int
hcn_step_sweep(struct hcn_api *api, const char *dir, const char *network_id, const char *owner,
               unsigned *removed, struct err *err)
{
    struct hcn_endpoint_info *eps = NULL;
    size_t neps = 0;
    int rc = hcn_network_endpoints(api, network_id, &eps, &neps, err);
    if (rc < 0)
        return rc;
    struct hcn_rec *recs = NULL;
    size_t nrecs = 0;
    /* The records as they are now (after the reconciliation's releases). */
    if ((rc = hcn_rec_list(dir, &recs, &nrecs, err)) < 0) {
        free(eps);
        return rc;
    }
    for (size_t i = 0; i < neps; i++) {
        const struct hcn_endpoint_info *ep = &eps[i];
        if (!hcn_endpoint_name_owned(ep->name, owner) || recorded(recs, nrecs, ep->id))
            continue;
        struct err e = {0};
        if (hcn_endpoint_release(api, ep, &e) < 0) {
            log_warn("net: the endpoint %s (%s) no record names: %s; left for the next start",
                     ep->name, ep->id, e.msg);
            continue;
        }
        log_info("net: deleted the endpoint %s (%s)%s%s, which no record names", ep->name, ep->id,
                 ep->namespace_id[0] ? " and its namespace " : "", ep->namespace_id);
        (*removed)++;
    }
    free(recs);
    free(eps);
    return 0;
}

/* ---- the jobs' steps --------------------------------------------------------------- */

/* api, or a computenetwork.dll of the step's own in *own (freed by the caller). */
static struct hcn_api *
api_get(struct hcn_api *api, struct hcn_api **own, struct err *err)
{
    *own = NULL;
    if (api)
        return api;
    return hcn_api_open(NULL, own, err) == 0 ? *own : NULL;
}

int
hcn_step_attach(struct hcn_api *api, const char *dir, const char *network_id, const char *owner,
                const char *const *dns, size_t ndns, struct hcn_rec *r, struct err *err)
{
    r->attached = r->disabled;
    /* The ids first: the record names what may exist before it does. */
    struct hcs_guid g;
    int rc = 0;
    if (!r->disabled && !r->ids.endpoint_id[0]) {
        if ((rc = hcs_guid_random(&g, err)) < 0)
            return rc;
        hcs_guid_format(&g, r->ids.endpoint_id);
        if ((rc = hcs_guid_random(&g, err)) < 0)
            return rc;
        hcs_guid_format(&g, r->ids.namespace_id);
    }
    if ((rc = hcn_rec_write(dir, r, err)) < 0 || r->disabled)
        return rc;
    struct hcn_api *own = NULL;
    struct hcn_api *a = api_get(api, &own, err);
    if (!a) {
        struct err e = {0};
        hcn_rec_remove(dir, r->handle, &e);
        return -err->code;
    }
    struct hcn_port ports[NET_PORTS_MAX];
    for (size_t i = 0; i < r->nports; i++)
        ports[i] = (struct hcn_port){.protocol = net_proto_name(r->ports[i].proto),
                                     .host_port = r->ports[i].host,
                                     .container_port = r->ports[i].container};
    struct hcn_endpoint_doc ep = {.container = r->handle,
                                  .owner = owner && owner[0] ? owner : NULL,
                                  .network_id = network_id,
                                  .ip = r->ip,
                                  .prefix_len = r->prefix,
                                  .gateway = r->gateway,
                                  .dns = dns,
                                  .ndns = ndns,
                                  .ports = ports,
                                  .nports = r->nports};
    rc = hcn_container_attach(a, &ep, &r->ids, err);
    if (rc == 0) {
        r->attached = true;
        rc = hcn_rec_write(dir, r, err);
    }
    if (rc < 0) {
        /* Nothing of a failed attach stays: HNS's objects, then the record. */
        struct err e = {0};
        if (hcn_container_detach(a, &r->ids, &e) < 0 || hcn_rec_remove(dir, r->handle, &e) < 0)
            log_warn("net: the failed attach of %s: %s; the next start deletes what is left",
                     r->handle, e.msg);
    }
    hcn_api_free(own);
    return rc;
}

int
hcn_step_detach(struct hcn_api *api, const char *dir, const struct hcn_rec *r, struct err *err)
{
    if (!r->disabled) {
        struct hcn_api *own = NULL;
        struct hcn_api *a = api_get(api, &own, err);
        int rc = a ? hcn_container_detach(a, &r->ids, err) : -err->code;
        hcn_api_free(own);
        if (rc < 0)
            return rc;
    }
    return hcn_rec_remove(dir, r->handle, err);
}
