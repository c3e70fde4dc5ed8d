/*
 * POST /containers/create: the engine's Config and HostConfig as a
 * container service create with a main process (daemon/svc_main.h), the
 * body kept as the container's front-end record for inspect. The steps,
 * each a service call: the named and anonymous volumes the mounts need
 * (made when missing, as the engine makes them), the image (404 "No such
 * image", which makes clients pull), then the create. Loop thread.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "common/randid.h"
#include "common/strv.h"
#include "daemon/daemon.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_images.h"
#include "daemon/svc_processes.h"
#include "daemon/svc_volumes.h"
#include "jsonutil/jsonutil.h"

/* The largest body kept with a container (its record holds it). */
#define FRONT_META_MAX (256 * 1024)
#define MOUNTS_MAX 256

/* The label the engine gives the volumes it makes for a container's own use. */
#define ANON_LABEL "com.docker.volume.anonymous"

struct create_ctx {
    struct api_req *req;
    struct ctr_params *p; /* until the create takes it */
    char *image;
    char **make_volumes; /* volumes to make first: named ones that may exist, then anonymous */
    bool *anonymous;
    size_t n_make, next;
    json_object *warnings;
};

static void
create_ctx_free(void *ctx)
{
    struct create_ctx *cc = ctx;
    ctr_params_free(cc->p);
    free(cc->image);
    for (size_t i = 0; i < cc->n_make; i++)
        free(cc->make_volumes[i]);
    free(cc->make_volumes);
    free(cc->anonymous);
    json_object_put(cc->warnings);
    free(cc);
}

/* ---- parsing ---------------------------------------------------------------- */

/* A strslice: an array of strings, or one string; *has: present and not null. */
static int
get_strslice(json_object *o, const char *key, char ***out, bool *has, struct err *err)
{
    json_object *v = NULL;
    *has = jsonutil_lookup(o, key, &v);
    if (!*has)
        return 0;
    if (json_object_is_type(v, json_type_string)) {
        char **s = calloc(2, sizeof(char *));
        if (!s || !(s[0] = strdup(json_object_get_string(v)))) {
            free(s);
            return err_set(err, ENOMEM, "out of memory");
        }
        *out = s;
        return 0;
    }
    if (!json_object_is_type(v, json_type_array))
        return err_set(err, EINVAL, "%s: expected a list of strings, got %s", key,
                       jsonutil_type_article(v));
    return jsonutil_strv(v, key, 65536, out, err);
}

static bool
name_valid(const char *n)
{
    if (!isalnum((unsigned char)n[0]) || strlen(n) < 2 || strlen(n) > CTR_HANDLE_MAX)
        return false;
    for (const char *s = n; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
            return false;
    return true;
}

static int
add_mount(struct ctr_params *p, const char *source, const char *volume, const char *target, bool ro,
          bool tmpfs, struct err *err)
{
    if (p->nmounts >= MOUNTS_MAX)
        return err_set(err, EINVAL, "more than %d mounts", MOUNTS_MAX);
    if (!target || target[0] != '/')
        return err_set(err, EINVAL, "invalid mount config: mount path must be absolute: %.200s",
                       target ? target : "");
    for (size_t i = 0; i < p->nmounts; i++)
        if (strcmp(p->mounts[i].target, target) == 0)
            return err_set(err, EINVAL, "Duplicate mount point: %.200s", target);
    size_t n = p->nmounts;
    struct rt_mount *m = realloc(p->mounts, (n + 1) * sizeof(*m));
    if (m)
        p->mounts = m;
    char **v = m ? realloc(p->mount_volumes, (n + 1) * sizeof(char *)) : NULL;
    if (v)
        p->mount_volumes = v;
    if (!m || !v)
        return err_set(err, ENOMEM, "out of memory");
    memset(&p->mounts[n], 0, sizeof(p->mounts[n]));
    p->mounts[n].source = source ? strdup(source) : NULL;
    p->mounts[n].target = strdup(target);
    p->mounts[n].readonly = ro;
    p->mounts[n].tmpfs = tmpfs;
    p->mount_volumes[n] = volume ? strdup(volume) : NULL;
    p->nmounts = n + 1;
    if ((source && !p->mounts[n].source) || !p->mounts[n].target ||
        (volume && !p->mount_volumes[n]))
        return err_set(err, ENOMEM, "out of memory");
    return 0;
}

/* Remembers a volume to make before the create (named: it may exist already). */
static int
want_volume(struct create_ctx *cc, const char *name, bool anonymous, struct err *err)
{
    for (size_t i = 0; i < cc->n_make; i++)
        if (strcmp(cc->make_volumes[i], name) == 0)
            return 0;
    char **v = realloc(cc->make_volumes, (cc->n_make + 1) * sizeof(char *));
    if (v)
        cc->make_volumes = v;
    bool *a = v ? realloc(cc->anonymous, (cc->n_make + 1) * sizeof(bool)) : NULL;
    if (a)
        cc->anonymous = a;
    if (!v || !a || !(v[cc->n_make] = strdup(name)))
        return err_set(err, ENOMEM, "out of memory");
    a[cc->n_make++] = anonymous;
    return 0;
}

static int
anonymous_volume(struct create_ctx *cc, const char *target, bool ro, struct err *err)
{
    char name[65];
    if (randid_hex(name, 32, err) < 0)
        return -err->code;
    int ret = want_volume(cc, name, true, err);
    return ret < 0 ? ret : add_mount(cc->p, NULL, name, target, ro, false, err);
}

/* "name:/target[:opts]", "/host:/target[:opts]". */
static int
parse_bind(struct create_ctx *cc, const char *spec, struct err *err)
{
    char buf[4200];
    if (strlen(spec) >= sizeof(buf))
        return err_set(err, EINVAL, "invalid volume specification: too long");
    snprintf(buf, sizeof(buf), "%s", spec);
    char *src = buf, *dst = strchr(buf, ':');
    if (!dst)
        return anonymous_volume(cc, src, false, err);
    *dst++ = '\0';
    char *opts = strchr(dst, ':');
    if (opts)
        *opts++ = '\0';
    bool ro = false;
    for (char *o = opts ? strtok(opts, ",") : NULL; o; o = strtok(NULL, ",")) {
        if (strcmp(o, "ro") == 0)
            ro = true;
        else if (strcmp(o, "rw") == 0)
            ro = false;
        else if (strcmp(o, "z") && strcmp(o, "Z") && strcmp(o, "nocopy") && strcmp(o, "private") &&
                 strcmp(o, "rprivate") && strcmp(o, "shared") && strcmp(o, "rshared") &&
                 strcmp(o, "slave") && strcmp(o, "rslave") && strcmp(o, "consistent") &&
                 strcmp(o, "cached") && strcmp(o, "delegated"))
            return err_set(err, EINVAL, "invalid mode: %.40s", o);
    }
    if (!*src)
        return err_set(err, EINVAL, "invalid volume specification: '%.200s'", spec);
    if (src[0] == '/')
        return add_mount(cc->p, src, NULL, dst, ro, false, err);
    int ret = want_volume(cc, src, false, err);
    return ret < 0 ? ret : add_mount(cc->p, NULL, src, dst, ro, false, err);
}

static int
parse_mounts(struct create_ctx *cc, json_object *arr, struct err *err)
{
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *m = json_object_array_get_idx(arr, i);
        char where[JSONUTIL_FIELD_MAX];
        jsonutil_field_index(where, "HostConfig.Mounts", i);
        const char *type = NULL, *src = NULL, *target = NULL;
        bool ro = false;
        if (!json_object_is_type(m, json_type_object))
            return err_set(err, EINVAL, "%s: expected an object", where);
        if (jsonutil_get_string(m, where, "Type", true, &type, err) < 0 ||
            jsonutil_get_string(m, where, "Source", false, &src, err) < 0 ||
            jsonutil_get_string(m, where, "Target", true, &target, err) < 0 ||
            jsonutil_get_bool(m, where, "ReadOnly", false, &ro, err) < 0)
            return -EINVAL;
        int ret;
        if (strcmp(type, "bind") == 0) {
            if (!src || src[0] != '/')
                return err_set(err, EINVAL,
                               "invalid mount config for type \"bind\": invalid "
                               "mount path: '%.200s' mount path must be absolute",
                               src ? src : "");
            ret = add_mount(cc->p, src, NULL, target, ro, false, err);
        } else if (strcmp(type, "volume") == 0) {
            if (!src || !*src)
                ret = anonymous_volume(cc, target, ro, err);
            else if ((ret = want_volume(cc, src, false, err)) == 0)
                ret = add_mount(cc->p, NULL, src, target, ro, false, err);
        } else if (strcmp(type, "tmpfs") == 0) {
            if (src && *src)
                return err_set(err, EINVAL,
                               "invalid mount config for type \"tmpfs\": field Source must not be "
                               "specified");
            ret = add_mount(cc->p, NULL, NULL, target, ro, true, err);
        } else {
            return err_set(err, EINVAL, "mount type %.40s is not supported (volume, bind, tmpfs)",
                           type);
        }
        if (ret < 0)
            return ret;
    }
    return 0;
}

static int
parse_limits(json_object *hc, struct ctr_params *p, struct err *err)
{
    int64_t mem = 0, nano = 0, shares = 0, quota = 0, period = 0, pids = 0;
    if (jsonutil_get_int64(hc, "HostConfig", "Memory", false, &mem, err) < 0 ||
        jsonutil_get_int64(hc, "HostConfig", "NanoCpus", false, &nano, err) < 0 ||
        jsonutil_get_int64(hc, "HostConfig", "CpuShares", false, &shares, err) < 0 ||
        jsonutil_get_int64(hc, "HostConfig", "CpuQuota", false, &quota, err) < 0 ||
        jsonutil_get_int64(hc, "HostConfig", "CpuPeriod", false, &period, err) < 0 ||
        jsonutil_get_int64(hc, "HostConfig", "PidsLimit", false, &pids, err) < 0)
        return -EINVAL;
    if (mem < 0)
        return err_set(err, EINVAL, "invalid Memory value %lld", (long long)mem);
    if (mem > 0 && mem < 6 * 1024 * 1024)
        return err_set(err, EINVAL, "Minimum memory limit allowed is 6MB");
    if (nano && (quota || period))
        return err_set(err, EINVAL,
                       "Conflicting options: Nano CPUs and CPU Period cannot both "
                       "be set");
    if (nano < 0 || shares < 0 || quota < -1 || period < 0)
        return err_set(err, EINVAL, "invalid CPU value (negative)");
    if (period && (period < 1000 || period > 1000000))
        return err_set(err, EINVAL,
                       "CPU cfs period can not be less than 1ms (i.e. 1000) or "
                       "larger than 1 second (i.e. 1000000)");
    p->limits.memory_bytes = (uint64_t)mem;
    p->limits.cpu_shares = (uint64_t)shares;
    /* One CPU is 1e9 NanoCpus, or a quota of a whole period: 100 here. */
    int64_t pct = nano ? (nano + 9999999) / 10000000
                  : quota > 0
                      ? (quota * 100 + (period ? period : 100000) - 1) / (period ? period : 100000)
                      : 0;
    if (pct > 100000)
        return err_set(err, EINVAL, "CPU limit: %lld%% of a CPU is over 100000%%", (long long)pct);
    p->limits.cpu_quota_pct = (uint32_t)pct;
    p->limits.pids = pids > 0 ? pids : 0; /* 0 and -1 are no limit */
    return 0;
}

static int
parse_signal(const char *s, int *out, struct err *err)
{
    char *end = NULL;
    long n = strtol(s, &end, 10);
    int sig = (end != s && !*end) ? (int)n : process_signal_number(s);
    if (sig < 1 || sig > 64)
        return err_set(err, EINVAL, "invalid signal: %.40s", s);
    *out = sig;
    return 0;
}

/* HostConfig fields berth cannot honour: refused, rather than ignored. */
static int
check_host_config(struct create_ctx *cc, json_object *hc, struct err *err)
{
    const char *net = NULL;
    bool privileged = false;
    json_object *ports = NULL, *restart = NULL;
    if (jsonutil_get_string(hc, "HostConfig", "NetworkMode", false, &net, err) < 0 ||
        jsonutil_get_bool(hc, "HostConfig", "Privileged", false, &privileged, err) < 0 ||
        jsonutil_get_object(hc, "HostConfig", "PortBindings", false, &ports, err) < 0 ||
        jsonutil_get_object(hc, "HostConfig", "RestartPolicy", false, &restart, err) < 0)
        return -EINVAL;
    if (net && *net && strcmp(net, "default") && strcmp(net, "bridge") && strcmp(net, "none"))
        return err_set(err, EINVAL,
                       "network mode %.64s is not supported by this host (default, bridge or none)",
                       net);
    /* "none" is /v1's "network": {"disabled": true}: only a loopback interface.
     * The default and "bridge" are berth's network, its CNI bridge. */
    cc->p->net_disabled = net && strcmp(net, "none") == 0;
    if (privileged)
        return err_set(err, EINVAL, "privileged containers are not supported by this host");
    if (ports && json_object_object_length(ports) > 0)
        return err_set(err, EINVAL,
                       "port bindings are not supported by this host yet (its containers have a "
                       "network of their own, without ports published)");
    const char *rp = NULL;
    if (restart &&
        jsonutil_get_string(restart, "HostConfig.RestartPolicy", "Name", false, &rp, err) < 0)
        return -EINVAL;
    if (rp && *rp && strcmp(rp, "no") != 0)
        json_object_array_add(cc->warnings,
                              json_object_new_string("restart policies are not supported by this "
                                                     "host: the container is not restarted"));
    return 0;
}

static int
parse_create(struct create_ctx *cc, json_object *body, struct err *err)
{
    struct ctr_params *p = cc->p;
    struct ctr_main *m = p->main;
    const char *image = NULL, *user = NULL, *wd = NULL, *stop_sig = NULL, *hostname = NULL;
    json_object *env = NULL, *labels = NULL, *hc = NULL, *volumes = NULL, *binds = NULL,
                *mounts = NULL;
    int64_t stop_timeout = -1;
    bool tty = false, auto_remove = false, ro_root = false;
    if (jsonutil_get_string(body, "", "Image", false, &image, err) < 0 ||
        jsonutil_get_string(body, "", "User", false, &user, err) < 0 ||
        jsonutil_get_string(body, "", "WorkingDir", false, &wd, err) < 0 ||
        jsonutil_get_string(body, "", "StopSignal", false, &stop_sig, err) < 0 ||
        jsonutil_get_string(body, "", "Hostname", false, &hostname, err) < 0 ||
        jsonutil_get_int64(body, "", "StopTimeout", false, &stop_timeout, err) < 0 ||
        jsonutil_get_bool(body, "", "Tty", false, &tty, err) < 0 ||
        jsonutil_get_bool(body, "", "OpenStdin", false, &m->open_stdin, err) < 0 ||
        jsonutil_get_bool(body, "", "StdinOnce", false, &m->stdin_once, err) < 0 ||
        jsonutil_get_array(body, "", "Env", false, &env, err) < 0 ||
        jsonutil_get_object(body, "", "Labels", false, &labels, err) < 0 ||
        jsonutil_get_object(body, "", "Volumes", false, &volumes, err) < 0 ||
        jsonutil_get_object(body, "", "HostConfig", false, &hc, err) < 0)
        return -EINVAL;
    if (!image || !*image)
        return err_set(err, EINVAL, "config error: image is required");
    if (tty)
        return err_set(err, EINVAL,
                       "Tty: a terminal for the container is not supported by this "
                       "host yet; run it without -t");
    int ret = get_strslice(body, "Cmd", &m->cmd, &m->has_cmd, err);
    if (ret == 0)
        ret = get_strslice(body, "Entrypoint", &m->entrypoint, &m->has_entrypoint, err);
    if (ret < 0)
        return ret;
    /* An empty Cmd is no Cmd: the image's is used (the engine's merge). */
    m->has_cmd = strv_len(m->cmd) > 0;
    m->tty = tty;
    if (env && (ret = jsonutil_strv(env, "Env", 4096, &p->env, err)) < 0)
        return ret;
    if (stop_sig && *stop_sig && parse_signal(stop_sig, &m->stop_signal, err) < 0)
        return -EINVAL;
    if (stop_timeout >= 0)
        p->grace_time_s = stop_timeout;
    if (!(cc->image = strdup(image)) || !(p->image_ref = strdup(image)) ||
        (user && *user && !(p->user = strdup(user))) ||
        (wd && *wd && !(p->working_dir = strdup(wd))))
        return err_set(err, ENOMEM, "out of memory");
    if (wd && *wd && wd[0] != '/')
        return err_set(err, EINVAL,
                       "the working directory '%.200s' is invalid, it needs to be an "
                       "absolute path",
                       wd);
    if (hostname && *hostname && !(p->hostname = strdup(hostname)))
        return err_set(err, ENOMEM, "out of memory");
    if (labels) {
        size_t n = (size_t)json_object_object_length(labels);
        p->prop_keys = calloc(n ? n : 1, sizeof(char *));
        p->prop_values = calloc(n ? n : 1, sizeof(char *));
        if (!p->prop_keys || !p->prop_values)
            return err_set(err, ENOMEM, "out of memory");
        json_object_object_foreach(labels, key, val)
        {
            if (!json_object_is_type(val, json_type_string))
                return err_set(err, EINVAL, "Labels.%.64s: expected a string", key);
            p->prop_keys[p->nprops] = strdup(key);
            p->prop_values[p->nprops] = strdup(json_object_get_string(val));
            if (!p->prop_keys[p->nprops] || !p->prop_values[p->nprops++])
                return err_set(err, ENOMEM, "out of memory");
        }
    }
    if (hc) {
        if ((ret = check_host_config(cc, hc, err)) < 0 || (ret = parse_limits(hc, p, err)) < 0)
            return ret;
        if (jsonutil_get_bool(hc, "HostConfig", "AutoRemove", false, &auto_remove, err) < 0 ||
            jsonutil_get_bool(hc, "HostConfig", "ReadonlyRootfs", false, &ro_root, err) < 0 ||
            jsonutil_get_array(hc, "HostConfig", "Binds", false, &binds, err) < 0 ||
            jsonutil_get_array(hc, "HostConfig", "Mounts", false, &mounts, err) < 0)
            return -EINVAL;
        m->auto_remove = auto_remove;
        p->readonly_rootfs = ro_root;
        for (size_t i = 0; binds && i < json_object_array_length(binds); i++) {
            json_object *b = json_object_array_get_idx(binds, i);
            if (!json_object_is_type(b, json_type_string))
                return err_set(err, EINVAL, "HostConfig.Binds[%zu]: expected a string", i);
            if ((ret = parse_bind(cc, json_object_get_string(b), err)) < 0)
                return ret;
        }
        if (mounts && (ret = parse_mounts(cc, mounts, err)) < 0)
            return ret;
    }
    /* Config.Volumes: anonymous volumes, unless a mount already serves the path. */
    if (!volumes)
        return 0;
    json_object_object_foreach(volumes, vpath, vval)
    {
        (void)vval;
        bool taken = false;
        for (size_t i = 0; i < p->nmounts; i++)
            taken |= strcmp(p->mounts[i].target, vpath) == 0;
        if (!taken && (ret = anonymous_volume(cc, vpath, false, err)) < 0)
            return ret;
    }
    return 0;
}

/* ---- the steps ------------------------------------------------------------------ */

static void make_next_volume(struct create_ctx *cc);

static void
created_cb(void *arg, const struct err *err, struct container *c)
{
    struct create_ctx *cc = arg;
    struct api_req *req = cc->req;
    if (api_req_call_failed(req, err))
        return;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Id", json_object_new_string(c->p->handle));
    json_object_object_add(o, "Warnings", json_object_get(cc->warnings));
    api_reply_json_resume(req, 201, o);
}

static void
do_create(struct create_ctx *cc)
{
    struct api_req *req = cc->req;
    struct err err = {0};
    struct svc_call *call = NULL;
    struct ctr_params *p = cc->p;
    cc->p = NULL; /* taken, also on error */
    if (container_create(api_daemon(req->api), p, NULL, created_cb, cc, &call, &err) < 0) {
        if (err.code == EEXIST && strstr(err.msg, "container name"))
            api_reply_fail(req, EEXIST,
                           "Conflict. The container name \"/%s\" is already in use. You have to "
                           "remove (or rename) that container to be able to reuse that name.",
                           api_req_query(req, "name") ? api_req_query(req, "name") : "");
        else
            api_reply_err(req, &err);
        api_req_resume(req);
        return;
    }
    api_req_wait_call(req, call);
}

static void
image_checked_cb(void *arg, const struct err *err, const struct meta_image *img,
                 const struct oci_config *cfg)
{
    struct create_ctx *cc = arg;
    struct api_req *req = cc->req;
    api_req_call_done(req);
    if (err) {
        if (err->code == ENOENT)
            api_reply_fail(req, ENOENT, "No such image: %s", cc->image);
        else
            api_reply_err(req, err);
        api_req_resume(req);
        return;
    }
    do_create(cc);
}

static void
check_image(struct create_ctx *cc)
{
    struct err err = {0};
    struct svc_call *call = NULL;
    struct api_req *req = cc->req;
    if (image_get(api_daemon(req->api), cc->image, image_checked_cb, cc, &call, &err) < 0) {
        if (err.code == ENOENT)
            api_reply_fail(req, ENOENT, "No such image: %s", cc->image);
        else
            api_reply_err(req, &err);
        api_req_resume(req);
        return;
    }
    api_req_wait_call(req, call);
}

static void
volume_made_cb(void *arg, const struct err *err, const struct vol_info *v)
{
    struct create_ctx *cc = arg;
    api_req_call_done(cc->req);
    /* A named volume that exists is what the mount wants. */
    if (err && !(err->code == EEXIST && !cc->anonymous[cc->next])) {
        api_reply_err(cc->req, err);
        api_req_resume(cc->req);
        return;
    }
    cc->next++;
    make_next_volume(cc);
}

static void
make_next_volume(struct create_ctx *cc)
{
    struct api_req *req = cc->req;
    if (cc->next == cc->n_make) {
        check_image(cc);
        return;
    }
    struct volume_prop anon = {.key = ANON_LABEL, .value = ""};
    struct volume_create_opts o = {.handle = cc->make_volumes[cc->next]};
    if (cc->anonymous[cc->next]) {
        o.props = &anon;
        o.n_props = 1;
    }
    struct err err = {0};
    struct svc_call *call = NULL;
    if (vol_create(api_daemon(req->api), &o, volume_made_cb, cc, &call, &err) < 0) {
        api_reply_err(req, &err);
        api_req_resume(req);
        return;
    }
    api_req_wait_call(req, call);
}

void
docker_containers_create(struct api_req *req)
{
    struct err err = {0};
    const char *name = api_req_query(req, "name");
    if (name && name[0] == '/')
        name++;
    if (name && *name && !name_valid(name)) {
        api_reply_fail(req, EINVAL,
                       "Invalid container name (%.140s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are "
                       "allowed",
                       name);
        return;
    }
    if (req->body_len > FRONT_META_MAX) {
        api_reply_fail(req, EINVAL,
                       "the container's configuration is %zu bytes, over the %d "
                       "kept with a container",
                       req->body_len, FRONT_META_MAX);
        return;
    }
    struct create_ctx *cc = calloc(1, sizeof(*cc));
    json_object *body = NULL;
    if (!cc || !(cc->p = calloc(1, sizeof(*cc->p))) ||
        !(cc->p->main = calloc(1, sizeof(*cc->p->main))) ||
        !(cc->warnings = json_object_new_array())) {
        if (cc)
            create_ctx_free(cc);
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    cc->req = req;
    req->ctx = cc;
    req->ctx_free = create_ctx_free;
    struct ctr_params *p = cc->p;
    p->grace_time_s = CTR_GRACE_DEFAULT_S;
    char id[65];
    if (randid_hex(id, 32, &err) < 0 || api_req_body_json(req, false, &body, &err) < 0 ||
        parse_create(cc, body, &err) < 0) {
        json_object_put(body);
        api_reply_err(req, &err);
        return;
    }
    snprintf(p->handle, sizeof(p->handle), "%s", id);
    /* The engine's default host name: the short id. */
    if (!p->hostname && !(p->hostname = strndup(id, 12))) {
        json_object_put(body);
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    char genname[32];
    snprintf(genname, sizeof(genname), "berth_%.12s", id);
    p->name = strdup(name && *name ? name : genname);
    size_t len = 0;
    const char *text = json_object_to_json_string_length(body, JSON_C_TO_STRING_PLAIN, &len);
    p->front_meta = strndup(text, len);
    json_object_put(body);
    if (!p->name || !p->front_meta) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return;
    }
    struct containers *reg = NULL;
    struct container *other = NULL;
    if (containers_registry(api_daemon(req->api), &reg, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    if ((other = containers_find_name(reg, p->name)) != NULL) {
        api_reply_fail(req, EEXIST,
                       "Conflict. The container name \"/%s\" is already in use by container "
                       "\"%s\". You have to remove (or rename) that container to be able to reuse "
                       "that name.",
                       p->name, other->p->handle);
        return;
    }
    /* Each step waits on its service call (suspending the request). */
    make_next_volume(cc);
}
