/*
 * /v1/containers: create, list with property filters, get (with usage
 * while running) and delete. Each handler parses the request into plain C,
 * calls one container service (daemon/svc_containers.h) and renders what
 * it reports. Loop thread.
 */
#include "api/containers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/bodies.h"
#include "api/handlers.h"
#include "api/request.h"
#include "common/clock.h"
#include "common/pctdecode.h"
#include "common/strv.h"
#include "daemon/daemon.h"
#include "daemon/net.h"
#include "daemon/svc_containers.h"
#include "jsonutil/jsonutil.h"

/* ---- rendering -------------------------------------------------------------- */

json_object *
api_json_time_ms(int64_t ms)
{
    char buf[CLOCK_RFC3339_MAX];
    return json_object_new_string(clock_rfc3339(ms, true, buf));
}

json_object *
api_json_time_s(int64_t s)
{
    char buf[CLOCK_RFC3339_MAX];
    return json_object_new_string(clock_rfc3339(s * 1000, false, buf));
}

json_object *
api_proc_to_json(const struct ctr_proc *pr)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(pr->id));
    json_object_object_add(o, "state", json_object_new_string(pr->exited ? "exited" : "running"));
    if (pr->pid)
        json_object_object_add(o, "pid", json_object_new_int(pr->pid));
    if (pr->exited && !pr->lost) {
        json_object_object_add(o, "exit_code", json_object_new_int(pr->exit_code));
        if (pr->signal)
            json_object_object_add(o, "signal", json_object_new_int(pr->signal));
    }
    if (pr->error[0])
        json_object_object_add(o, "error", json_object_new_string(pr->error));
    json_object_object_add(o, "output_truncated", json_object_new_boolean(pr->output_truncated));
    json_object_object_add(o, "oom_killed", json_object_new_boolean(pr->oom_killed));
    json_object_object_add(o, "stdin", json_object_new_boolean(pr->has_stdin));
    json_object_object_add(o, "started_at", api_json_time_ms(pr->started_at));
    if (pr->exited && pr->finished_at)
        json_object_object_add(o, "finished_at", api_json_time_ms(pr->finished_at));
    return o;
}

static json_object *
strv_json(char *const *v)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; v && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

json_object *
api_network_to_json(const struct net_attachment *a)
{
    json_object *o = json_object_new_object();
    if (a->disabled) {
        json_object_object_add(o, "disabled", json_object_new_boolean(true));
        json_object_object_add(o, "ports", json_object_new_array());
        return o;
    }
    json_object_object_add(o, "ip", json_object_new_string(a->ip));
    json_object_object_add(o, "prefix", json_object_new_int((int)a->prefix));
    json_object_object_add(o, "gateway", json_object_new_string(a->gateway));
    json_object *ports = json_object_new_array();
    for (size_t i = 0; i < a->nports; i++) {
        json_object *p = json_object_new_object();
        json_object_object_add(p, "host", json_object_new_int(a->ports[i].host));
        json_object_object_add(p, "container", json_object_new_int(a->ports[i].container));
        json_object_object_add(p, "protocol",
                               json_object_new_string(net_proto_name(a->ports[i].proto)));
        json_object_array_add(ports, p);
    }
    json_object_object_add(o, "ports", ports);
    return o;
}

json_object *
api_container_to_json(const struct container *c, const struct ctr_usage *usage)
{
    const struct ctr_params *p = c->p;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "handle", json_object_new_string(p->handle));
    json_object_object_add(o, "state", json_object_new_string(ctr_state_name(c->state)));
    if (p->image_ref)
        json_object_object_add(o, "image", json_object_new_string(p->image_ref));
    if (p->image_digest)
        json_object_object_add(o, "image_digest", json_object_new_string(p->image_digest));
    if (p->rootfs_dir)
        json_object_object_add(o, "rootfs_dir", json_object_new_string(p->rootfs_dir));
    json_object_object_add(o, "isolation",
                           json_object_new_string(p->isolation[0] ? p->isolation : "process"));
    json_object *l = json_object_new_object();
    json_object_object_add(l, "memory_bytes",
                           json_object_new_int64((int64_t)p->limits.memory_bytes));
    json_object_object_add(l, "cpu_shares", json_object_new_int64((int64_t)p->limits.cpu_shares));
    json_object_object_add(l, "cpu_quota_pct", json_object_new_int64(p->limits.cpu_quota_pct));
    json_object_object_add(l, "pids", json_object_new_int64(p->limits.pids));
    json_object_object_add(l, "disk_bytes", json_object_new_int64((int64_t)p->limits.disk_bytes));
    json_object_object_add(o, "limits", l);
    json_object_object_add(o, "env", strv_json(p->env));
    json_object_object_add(o, "working_dir",
                           json_object_new_string(p->working_dir ? p->working_dir : "/"));
    json_object *mounts = json_object_new_array();
    for (size_t i = 0; i < p->nmounts; i++) {
        json_object *m = json_object_new_object();
        if (p->mount_volumes && p->mount_volumes[i])
            json_object_object_add(m, "volume", json_object_new_string(p->mount_volumes[i]));
        else
            json_object_object_add(m, "host_path", json_object_new_string(p->mounts[i].source));
        json_object_object_add(m, "target", json_object_new_string(p->mounts[i].target));
        json_object_object_add(m, "readonly", json_object_new_boolean(p->mounts[i].readonly));
        json_object_array_add(mounts, m);
    }
    json_object_object_add(o, "mounts", mounts);
    json_object *props = json_object_new_object();
    for (size_t i = 0; i < p->nprops; i++)
        json_object_object_add(props, p->prop_keys[i], json_object_new_string(p->prop_values[i]));
    json_object_object_add(o, "properties", props);
    json_object_object_add(o, "grace_time_s", json_object_new_int64(p->grace_time_s));
    json_object_object_add(o, "created_at", api_json_time_ms(p->created_at * 1000));
    if (usage) {
        json_object *u = json_object_new_object();
        json_object_object_add(u, "memory_bytes",
                               json_object_new_int64((int64_t)usage->memory_bytes));
        json_object_object_add(u, "cpu_ns", json_object_new_int64((int64_t)usage->cpu_ns));
        json_object_object_add(o, "usage", u);
    }
    const struct net_attachment *net = container_network(c);
    if (net)
        json_object_object_add(o, "network", api_network_to_json(net));
    json_object *procs = json_object_new_array();
    for (const struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        json_object_array_add(procs, api_proc_to_json(pr));
    json_object_object_add(o, "processes", procs);
    return o;
}

/* ---- parsing ---------------------------------------------------------------- */

int
api_parse_strv(json_object *arr, const char *field, char ***out, struct err *err)
{
    return jsonutil_strv(arr, field, 65536, out, err);
}

static int
parse_limits(json_object *o, struct ctr_params *p, struct err *err)
{
    static const char *const fields[] = {"memory_bytes", "cpu_shares", "cpu_quota_pct",
                                         "pids",         "disk_bytes", NULL};
    int64_t mem = 0, shares = 0, quota = 0, pids = 0, disk = 0;
    if (jsonutil_check_fields(o, "limits", fields, err) < 0 ||
        jsonutil_get_int64(o, "limits", "memory_bytes", false, &mem, err) < 0 ||
        jsonutil_get_int64(o, "limits", "cpu_shares", false, &shares, err) < 0 ||
        jsonutil_get_int64(o, "limits", "cpu_quota_pct", false, &quota, err) < 0 ||
        jsonutil_get_int64(o, "limits", "pids", false, &pids, err) < 0 ||
        jsonutil_get_int64(o, "limits", "disk_bytes", false, &disk, err) < 0)
        return -EINVAL;
    /* Ranges are the service's to check; what does not fit its types is refused here. */
    if (mem < 0)
        return err_set(
            err, EINVAL,
            "field \"limits.memory_bytes\": %lld is under the minimum of 4194304 (4 MiB)",
            (long long)mem);
    if (shares < 0)
        return err_set(err, EINVAL, "field \"limits.cpu_shares\": %lld is out of range 2..262144",
                       (long long)shares);
    if (quota < 0 || quota > 100000)
        return err_set(err, EINVAL,
                       "field \"limits.cpu_quota_pct\": %lld is out of range 0..100000",
                       (long long)quota);
    p->limits.memory_bytes = (uint64_t)mem;
    p->limits.cpu_shares = (uint64_t)shares;
    p->limits.cpu_quota_pct = (uint32_t)quota;
    p->limits.pids = pids;
    p->limits.disk_bytes = disk < 0 ? 1 : (uint64_t)disk; /* a negative one fails the minimum */
    return 0;
}

static int
parse_mounts(json_object *arr, struct ctr_params *p, struct err *err)
{
    static const char *const fields[] = {"host_path", "volume", "target", "readonly", NULL};
    size_t n = json_object_array_length(arr);
    if (n > 256)
        return err_set(err, EINVAL, "field \"mounts\": more than 256 entries");
    p->mounts = calloc(n ? n : 1, sizeof(*p->mounts));
    p->mount_volumes = calloc(n ? n : 1, sizeof(char *));
    if (!p->mounts || !p->mount_volumes)
        return err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char where[JSONUTIL_FIELD_MAX];
        jsonutil_field_index(where, "mounts", i);
        json_object *m = json_object_array_get_idx(arr, i);
        const char *host = NULL, *vol = NULL, *target = NULL;
        bool ro = false;
        if (!json_object_is_type(m, json_type_object))
            return err_set(err, EINVAL, "field \"%s\": expected an object", where);
        if (jsonutil_check_fields(m, where, fields, err) < 0 ||
            jsonutil_get_string(m, where, "host_path", false, &host, err) < 0 ||
            jsonutil_get_string(m, where, "volume", false, &vol, err) < 0 ||
            jsonutil_get_string(m, where, "target", true, &target, err) < 0 ||
            jsonutil_get_bool(m, where, "readonly", false, &ro, err) < 0)
            return -EINVAL;
        p->mounts[i].source = host ? strdup(host) : NULL;
        p->mount_volumes[i] = vol ? strdup(vol) : NULL;
        p->mounts[i].target = strdup(target);
        p->mounts[i].readonly = ro;
        p->nmounts = i + 1;
        if ((host && !p->mounts[i].source) || (vol && !p->mount_volumes[i]) || !p->mounts[i].target)
            return err_set(err, ENOMEM, "out of memory");
    }
    return 0;
}

static int
parse_properties(json_object *o, struct ctr_params *p, struct err *err)
{
    size_t n = (size_t)json_object_object_length(o);
    if (n > 1024)
        return err_set(err, EINVAL, "field \"properties\": more than 1024 entries");
    p->prop_keys = calloc(n ? n : 1, sizeof(char *));
    p->prop_values = calloc(n ? n : 1, sizeof(char *));
    if (!p->prop_keys || !p->prop_values)
        return err_set(err, ENOMEM, "out of memory");
    json_object_object_foreach(o, key, val)
    {
        if (!json_object_is_type(val, json_type_string))
            return err_set(err, EINVAL, "field \"properties.%s\": expected a string, got %s", key,
                           jsonutil_type_article(val));
        if (!*key || strlen(key) > 256)
            return err_set(err, EINVAL, "field \"properties\": keys are 1 to 256 characters");
        p->prop_keys[p->nprops] = strdup(key);
        p->prop_values[p->nprops] = strdup(json_object_get_string(val));
        p->nprops++;
        if (!p->prop_keys[p->nprops - 1] || !p->prop_values[p->nprops - 1])
            return err_set(err, ENOMEM, "out of memory");
    }
    return 0;
}

/* {"disabled": bool, "ports": [{"host", "container", "protocol"}]}; ranges are checked here. */
static int
parse_network(json_object *o, struct ctr_params *p, struct err *err)
{
    static const char *const fields[] = {"disabled", "ports", NULL};
    static const char *const port_fields[] = {"host", "container", "protocol", NULL};
    json_object *ports = NULL;
    if (jsonutil_check_fields(o, "network", fields, err) < 0 ||
        jsonutil_get_bool(o, "network", "disabled", false, &p->net_disabled, err) < 0 ||
        jsonutil_get_array(o, "network", "ports", false, &ports, err) < 0)
        return -EINVAL;
    size_t n = ports ? json_object_array_length(ports) : 0;
    if (n > CTR_PORTS_MAX)
        return err_set(err, EINVAL, "field \"network.ports\": more than %d entries", CTR_PORTS_MAX);
    p->ports = n ? calloc(n, sizeof(*p->ports)) : NULL;
    if (n && !p->ports)
        return err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char where[JSONUTIL_FIELD_MAX];
        jsonutil_field_index(where, "network.ports", i);
        json_object *pt = json_object_array_get_idx(ports, i);
        int64_t host = 0, ctr = 0;
        const char *proto = NULL;
        if (!json_object_is_type(pt, json_type_object))
            return err_set(err, EINVAL, "field \"%s\": expected an object", where);
        if (jsonutil_check_fields(pt, where, port_fields, err) < 0 ||
            jsonutil_get_int64(pt, where, "host", false, &host, err) < 0 ||
            jsonutil_get_int64(pt, where, "container", true, &ctr, err) < 0 ||
            jsonutil_get_string(pt, where, "protocol", false, &proto, err) < 0)
            return -EINVAL;
        if (host < 0 || host > 65535)
            return err_set(err, EINVAL,
                           "field \"%s.host\": %lld is out of range 0..65535 (0: pick a free one)",
                           where, (long long)host);
        if (ctr < 1 || ctr > 65535)
            return err_set(err, EINVAL, "field \"%s.container\": %lld is out of range 1..65535",
                           where, (long long)ctr);
        if (proto && strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0)
            return err_set(err, EINVAL, "field \"%s.protocol\": %.32s is not tcp or udp", where,
                           proto);
        p->ports[i] = (struct ctr_port){.host = (uint16_t)host,
                                        .container = (uint16_t)ctr,
                                        .udp = proto && strcmp(proto, "udp") == 0};
        p->nports = i + 1;
    }
    return 0;
}

/* "raw:///percent-encoded/dir" to the host directory; NULL if malformed. */
static char *
raw_rootfs_decode(const char *uri)
{
    const char *prefix = "raw://";
    if (strncmp(uri, prefix, strlen(prefix)) != 0 || uri[strlen(prefix)] != '/')
        return NULL;
    return pct_decode_dup(uri + strlen(prefix));
}

int
api_body_container_create(const char *text, size_t len, struct ctr_params **out,
                          char **isolation_out, struct err *err)
{
    static const char *const fields[] = {"handle",       "image",       "rootfs",  "limits",
                                         "env",          "working_dir", "mounts",  "properties",
                                         "grace_time_s", "isolation",   "network", NULL};
    json_object *body = NULL, *limits = NULL, *env = NULL, *mounts = NULL, *props = NULL,
                *network = NULL;
    const char *handle = NULL, *image = NULL, *rootfs = NULL, *wd = NULL, *isolation = NULL;
    int64_t grace = CTR_GRACE_DEFAULT_S;
    *isolation_out = NULL;
    struct ctr_params *p = calloc(1, sizeof(*p));
    if (!p)
        return err_set(err, ENOMEM, "out of memory");
    int rc = 0;
    if (api_body_json(text, len, false, &body, err) < 0 ||
        jsonutil_check_fields(body, "", fields, err) < 0 ||
        jsonutil_get_string(body, "", "handle", false, &handle, err) < 0 ||
        jsonutil_get_string(body, "", "image", false, &image, err) < 0 ||
        jsonutil_get_string(body, "", "rootfs", false, &rootfs, err) < 0 ||
        jsonutil_get_object(body, "", "limits", false, &limits, err) < 0 ||
        jsonutil_get_array(body, "", "env", false, &env, err) < 0 ||
        jsonutil_get_string(body, "", "working_dir", false, &wd, err) < 0 ||
        jsonutil_get_array(body, "", "mounts", false, &mounts, err) < 0 ||
        jsonutil_get_object(body, "", "properties", false, &props, err) < 0 ||
        jsonutil_get_int64(body, "", "grace_time_s", false, &grace, err) < 0 ||
        jsonutil_get_string(body, "", "isolation", false, &isolation, err) < 0 ||
        jsonutil_get_object(body, "", "network", false, &network, err) < 0)
        rc = -EINVAL;
    if (rc == 0 && handle && (strlen(handle) > CTR_HANDLE_MAX || !*handle))
        rc = err_set(err, EINVAL,
                     "field \"handle\": %.140s is not 1 to 128 characters of [A-Za-z0-9_.-] "
                     "not starting with a dot",
                     handle);
    if (rc == 0 && rootfs && !(p->rootfs_dir = raw_rootfs_decode(rootfs)))
        rc = err_set(err, EINVAL,
                     "field \"rootfs\": %.200s is not raw:///percent-encoded/absolute/dir "
                     "(without ':' or ',')",
                     rootfs);
    if (rc == 0 && limits)
        rc = parse_limits(limits, p, err);
    if (rc == 0 && env)
        rc = api_parse_strv(env, "env", &p->env, err);
    if (rc == 0 && mounts)
        rc = parse_mounts(mounts, p, err);
    if (rc == 0 && props)
        rc = parse_properties(props, p, err);
    if (rc == 0 && network)
        rc = parse_network(network, p, err);
    if (rc == 0) {
        snprintf(p->handle, sizeof(p->handle), "%s", handle ? handle : "");
        p->image_ref = image ? strdup(image) : NULL;
        p->working_dir = wd ? strdup(wd) : NULL;
        p->grace_time_s = grace;
        *isolation_out = isolation ? strdup(isolation) : NULL;
        if ((image && !p->image_ref) || (wd && !p->working_dir) || (isolation && !*isolation_out))
            rc = err_set(err, ENOMEM, "out of memory");
    }
    json_object_put(body);
    if (rc < 0) {
        ctr_params_free(p);
        free(*isolation_out);
        *isolation_out = NULL;
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- handlers --------------------------------------------------------------- */

static void
created_cb(void *arg, const struct err *err, struct container *c)
{
    struct api_req *req = arg;
    if (!api_req_call_failed(req, err))
        api_reply_json_resume(req, 201, api_container_to_json(c, NULL));
}

void
containers_post(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    struct err err = {0};
    struct ctr_params *p = NULL;
    char *isolation = NULL;
    struct svc_call *call = NULL;
    struct containers *reg = NULL;
    if (containers_registry(d, &reg, &err) < 0 ||
        api_body_container_create(req->body, req->body_len, &p, &isolation, &err) < 0 ||
        container_create(d, p, isolation, created_cb, req, &call, &err) < 0) {
        free(isolation);
        api_reply_err(req, &err);
        return;
    }
    free(isolation);
    api_req_wait_call(req, call);
}

struct filter_ctx {
    const struct container *c;
    bool match;
};

static enum MHD_Result
filter_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct filter_ctx *f = cls;
    if (strncmp(key, "property.", 9) != 0)
        return MHD_YES;
    const char *k = key + 9;
    const struct ctr_params *p = f->c->p;
    for (size_t i = 0; i < p->nprops; i++)
        if (strcmp(p->prop_keys[i], k) == 0 && strcmp(p->prop_values[i], value ? value : "") == 0)
            return MHD_YES;
    f->match = false;
    return MHD_NO;
}

void
containers_list(struct api_req *req)
{
    struct containers *reg = NULL;
    struct err err = {0};
    if (containers_registry(api_daemon(req->api), &reg, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    json_object *arr = json_object_new_array();
    for (struct container *c = reg->list; c; c = c->next) {
        if (!container_listed(c))
            continue;
        struct filter_ctx f = {.c = c, .match = true};
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, filter_cb, &f);
        if (f.match)
            json_object_array_add(arr, api_container_to_json(c, NULL));
    }
    json_object *body = json_object_new_object();
    json_object_object_add(body, "containers", arr);
    api_reply_json(req, 200, body);
}

static void
stats_cb(void *arg, const struct err *err, struct container *c, const struct ctr_usage *usage)
{
    struct api_req *req = arg;
    if (!api_req_call_failed(req, err))
        api_reply_json_resume(req, 200, api_container_to_json(c, usage));
}

void
containers_get(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    const char *handle = api_req_param(req, "handle");
    struct container *c = NULL;
    struct err err = {0};
    struct svc_call *call = NULL;
    if (container_lookup(d, handle, &c, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    /* Usage only while it runs: the rest is known without a job. */
    if (c->state != CTR_RUNNING) {
        api_reply_json(req, 200, api_container_to_json(c, NULL));
        return;
    }
    if (container_stats(d, handle, stats_cb, req, &call, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    api_req_wait_call(req, call);
}

void
containers_delete(struct api_req *req)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    if (container_delete(api_daemon(req->api), api_req_param(req, "handle"), api_reply_204_cb, req,
                         &call, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    api_req_wait_call(req, call);
}
