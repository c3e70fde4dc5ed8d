/*
 * /v1/containers: create (validated here, made by a pool job), list with
 * property filters, get (usage read from the cgroup by a job) and delete
 * (TERM to every process, KILL after the grace time, then the undo job).
 * Loop thread, except the *_work functions.
 */
#include "api/containers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <time.h>

#include "api/api.h"
#include "api/handlers.h"
#include "jsonutil/jsonutil.h"
#include "api/request.h"
#include "common/log.h"
#include "daemon/daemon.h"
#include "store/store.h"

#define GRACE_DEFAULT_S 10
#define GRACE_MAX_S 3600

/* ---- shared helpers --------------------------------------------------------- */

struct containers *
api_containers(struct api_req *req)
{
    struct daemon *d = api_daemon(req->api);
    if (!d->containers || !d->store) {
        api_reply_error(req, 503, "unavailable", "containers are not available: %s",
                        d->store ? "start-up failed" : d->store_error);
        return NULL;
    }
    if (!d->containers->drv) {
        api_reply_error(req, 503, "unavailable", "%s", d->containers->drv_err.msg);
        return NULL;
    }
    return d->containers;
}

struct container *
api_container_lookup(struct api_req *req)
{
    struct containers *reg = api_containers(req);
    if (!reg)
        return NULL;
    const char *handle = api_req_param(req, "handle");
    struct container *c = handle ? containers_find(reg, handle) : NULL;
    if (!c)
        api_reply_error(req, 404, "not_found", "container %s: not found", handle ? handle : "");
    return c;
}

struct ctr_proc *
api_proc_lookup(struct api_req *req, struct container *c)
{
    const char *id = api_req_param(req, "id");
    struct ctr_proc *pr = id ? container_proc_find(c, id) : NULL;
    if (!pr)
        api_reply_error(req, 404, "not_found", "process %s in container %s: not found",
                        id ? id : "", c->p->handle);
    return pr;
}

json_object *
api_json_time_ms(int64_t ms)
{
    char buf[40], out[48];
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, sizeof(out), "%s.%03dZ", buf, (int)(ms % 1000));
    return json_object_new_string(out);
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
    json_object_object_add(o, "stdin", json_object_new_boolean(pr->has_stdin));
    json_object_object_add(o, "started_at", api_json_time_ms(pr->started_at));
    if (pr->exited && pr->finished_at)
        json_object_object_add(o, "finished_at", api_json_time_ms(pr->finished_at));
    return o;
}

static json_object *
container_to_json(const struct container *c, const struct rt_stats *usage)
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
    json_object_object_add(o, "isolation", json_object_new_string("process"));
    json_object *l = json_object_new_object();
    json_object_object_add(l, "memory_bytes",
                           json_object_new_int64((int64_t)p->limits.memory_bytes));
    json_object_object_add(l, "cpu_shares", json_object_new_int64((int64_t)p->limits.cpu_shares));
    json_object_object_add(l, "cpu_quota_pct", json_object_new_int64(p->limits.cpu_quota_pct));
    json_object_object_add(l, "pids", json_object_new_int64(p->limits.pids));
    json_object_object_add(o, "limits", l);
    json_object *env = json_object_new_array();
    for (size_t i = 0; p->env && p->env[i]; i++)
        json_object_array_add(env, json_object_new_string(p->env[i]));
    json_object_object_add(o, "env", env);
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
    json_object *procs = json_object_new_array();
    for (const struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        json_object_array_add(procs, api_proc_to_json(pr));
    json_object_object_add(o, "processes", procs);
    return o;
}

/* ---- create ----------------------------------------------------------------- */

/* Decodes "raw:///percent-encoded/dir" into an absolute host path; NULL if malformed. */
static char *
raw_rootfs_decode(const char *uri)
{
    const char *prefix = "raw://";
    if (strncmp(uri, prefix, strlen(prefix)) != 0)
        return NULL;
    const char *s = uri + strlen(prefix);
    if (s[0] != '/')
        return NULL;
    char *out = malloc(strlen(s) + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    for (; *s; s++) {
        if (*s == '%') {
            int hi, lo;
            char h[3] = {s[1], s[1] ? s[2] : 0, 0};
            if (!s[1] || !s[2] || sscanf(h, "%1x%1x", &hi, &lo) != 2 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[n++] = (char)(hi * 16 + lo);
            s += 2;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return out;
}

static bool
abs_path_ok(const char *p)
{
    if (!p || p[0] != '/' || strlen(p) > 4096)
        return false;
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
            return false;
    return true;
}

static int
parse_limits(json_object *o, struct rt_limits *l, struct err *err)
{
    static const char *const fields[] = {"memory_bytes", "cpu_shares", "cpu_quota_pct", "pids",
                                         NULL};
    int64_t v;
    int r;
    if (jsonutil_check_fields(o, "limits", fields, err) < 0)
        return -EINVAL;
    if ((r = jsonutil_get_int64(o, "limits", "memory_bytes", false, &v, err)) < 0)
        return r;
    if (r && v != 0 && v < 4 * 1024 * 1024)
        return err_set(err, EINVAL,
                       "field \"limits.memory_bytes\": %lld is under the minimum of "
                       "4194304 (4 MiB)",
                       (long long)v);
    if (r)
        l->memory_bytes = (uint64_t)v;
    if ((r = jsonutil_get_int64(o, "limits", "cpu_shares", false, &v, err)) < 0)
        return r;
    if (r && v != 0 && (v < 2 || v > 262144))
        return err_set(err, EINVAL, "field \"limits.cpu_shares\": %lld is out of range 2..262144",
                       (long long)v);
    if (r)
        l->cpu_shares = (uint64_t)v;
    if ((r = jsonutil_get_int64(o, "limits", "cpu_quota_pct", false, &v, err)) < 0)
        return r;
    if (r && (v < 0 || v > 100000))
        return err_set(err, EINVAL,
                       "field \"limits.cpu_quota_pct\": %lld is out of range 0..100000",
                       (long long)v);
    if (r)
        l->cpu_quota_pct = (uint32_t)v;
    if ((r = jsonutil_get_int64(o, "limits", "pids", false, &v, err)) < 0)
        return r;
    if (r && v < 0)
        return err_set(err, EINVAL, "field \"limits.pids\": %lld is negative", (long long)v);
    if (r)
        l->pids = v;
    return 0;
}

/* A NULL-terminated copy of an array of "K=V" strings; where names the field. */
int
api_parse_env(json_object *arr, const char *where, char ***out, struct err *err)
{
    size_t n = json_object_array_length(arr);
    if (n > 4096)
        return err_set(err, EINVAL, "field \"%s\": more than 4096 entries", where);
    char **env = calloc(n + 1, sizeof(char *));
    if (!env)
        return err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        if (!s || !strchr(s, '=') || s[0] == '=' || strlen(s) > 65536) {
            for (size_t k = 0; k < i; k++)
                free(env[k]);
            free(env);
            return err_set(err, EINVAL, "field \"%s[%zu]\": expected a \"NAME=value\" string",
                           where, i);
        }
        env[i] = strdup(s);
    }
    *out = env;
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
        char where[32];
        snprintf(where, sizeof(where), "mounts[%zu]", i);
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
        if (vol && host)
            return err_set(err, EINVAL, "field \"%s\": give host_path or volume, not both", where);
        if (vol && !volume_handle_valid(vol))
            return err_set(err, EINVAL, "field \"%s.volume\": %.140s is not a volume handle", where,
                           vol);
        if (!host && !vol)
            return err_set(err, EINVAL, "field \"%s\": host_path or volume is required", where);
        if (host && (!abs_path_ok(host) || strchr(host, ',')))
            return err_set(err, EINVAL, "field \"%s.host_path\": %s is not an absolute path", where,
                           host);
        if (!abs_path_ok(target) || strcmp(target, "/") == 0)
            return err_set(err, EINVAL, "field \"%s.target\": %s is not an absolute path below /",
                           where, target);
        p->mounts[i].source = host ? strdup(host) : NULL;
        p->mount_volumes[i] = vol ? strdup(vol) : NULL;
        p->mounts[i].target = strdup(target);
        p->mounts[i].readonly = ro;
        p->nmounts = i + 1;
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
    }
    return 0;
}

static void
random_hex(char *out, size_t nbytes)
{
    unsigned char buf[32];
    if (nbytes > sizeof(buf))
        nbytes = sizeof(buf);
    if (getrandom(buf, nbytes, 0) != (ssize_t)nbytes) {
        uint64_t t = uv_hrtime();
        memcpy(buf, &t, nbytes < 8 ? nbytes : 8);
    }
    for (size_t i = 0; i < nbytes; i++)
        sprintf(out + 2 * i, "%02x", buf[i]);
}

void
api_random_id(char *out, const char *prefix)
{
    char hex[33];
    random_hex(hex, 8);
    sprintf(out, "%s%s", prefix, hex);
}

/* Parses and checks a create request into *out (caller frees); replies on error. */
static struct ctr_params *
parse_create(struct api_req *req, struct containers *reg)
{
    static const char *const fields[] = {"handle",       "image",       "rootfs", "limits",
                                         "env",          "working_dir", "mounts", "properties",
                                         "grace_time_s", "isolation",   NULL};
    struct err err = {0};
    json_object *body = NULL, *limits = NULL, *env = NULL, *mounts = NULL, *props = NULL;
    const char *handle = NULL, *image = NULL, *rootfs = NULL, *wd = NULL, *isolation = NULL;
    int64_t grace = GRACE_DEFAULT_S;
    struct ctr_params *p = calloc(1, sizeof(*p));
    if (!p) {
        api_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    int rc = 0;
    if (api_req_body_json(req, false, &body, &err) < 0 ||
        jsonutil_check_fields(body, "", fields, &err) < 0 ||
        jsonutil_get_string(body, "", "handle", false, &handle, &err) < 0 ||
        jsonutil_get_string(body, "", "image", false, &image, &err) < 0 ||
        jsonutil_get_string(body, "", "rootfs", false, &rootfs, &err) < 0 ||
        jsonutil_get_object(body, "", "limits", false, &limits, &err) < 0 ||
        jsonutil_get_array(body, "", "env", false, &env, &err) < 0 ||
        jsonutil_get_string(body, "", "working_dir", false, &wd, &err) < 0 ||
        jsonutil_get_array(body, "", "mounts", false, &mounts, &err) < 0 ||
        jsonutil_get_object(body, "", "properties", false, &props, &err) < 0 ||
        jsonutil_get_int64(body, "", "grace_time_s", false, &grace, &err) < 0 ||
        jsonutil_get_string(body, "", "isolation", false, &isolation, &err) < 0)
        rc = -1;
    if (rc == 0 && handle && !rt_handle_valid(handle))
        rc = err_set(&err, EINVAL,
                     "field \"handle\": %.140s is not 1 to 128 characters of [A-Za-z0-9_.-] "
                     "not starting with a dot",
                     handle);
    if (rc == 0 && !image == !rootfs)
        rc = err_set(&err, EINVAL, "give exactly one of the fields \"image\" and \"rootfs\"");
    if (rc == 0 && image && (!*image || strlen(image) > 512))
        rc = err_set(&err, EINVAL, "field \"image\": expected a digest, a prefix or a name");
    if (rc == 0 && rootfs) {
        p->rootfs_dir = raw_rootfs_decode(rootfs);
        if (!p->rootfs_dir || !abs_path_ok(p->rootfs_dir) || strpbrk(p->rootfs_dir, ":,\n"))
            rc = err_set(&err, EINVAL,
                         "field \"rootfs\": %.200s is not raw:///percent-encoded/absolute/dir "
                         "(without ':' or ',')",
                         rootfs);
    }
    if (rc == 0 && limits)
        rc = parse_limits(limits, &p->limits, &err);
    if (rc == 0 && env)
        rc = api_parse_env(env, "env", &p->env, &err);
    if (rc == 0 && wd && !abs_path_ok(wd))
        rc = err_set(&err, EINVAL, "field \"working_dir\": %.200s is not an absolute path", wd);
    if (rc == 0 && mounts)
        rc = parse_mounts(mounts, p, &err);
    if (rc == 0 && props)
        rc = parse_properties(props, p, &err);
    if (rc == 0 && (grace < 0 || grace > GRACE_MAX_S))
        rc = err_set(&err, EINVAL, "field \"grace_time_s\": %lld is out of range 0..%d",
                     (long long)grace, GRACE_MAX_S);
    if (rc == 0 && isolation) {
        bool offered = false;
        char list[128] = "";
        for (const char *const *m = reg->drv->isolation; m && *m; m++) {
            offered |= strcmp(*m, isolation) == 0;
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", list[0] ? ", " : "",
                     *m);
        }
        if (!offered)
            rc = err_set(&err, ERR_INVALID_CONTENT,
                         "field \"isolation\": %.64s is not offered by runtime %s on this host "
                         "(offered: %s)",
                         isolation, reg->drv->name, list);
    }
    if (rc == 0) {
        if (handle)
            snprintf(p->handle, sizeof(p->handle), "%s", handle);
        else
            api_random_id(p->handle, "c-");
        p->image_ref = image ? strdup(image) : NULL;
        p->working_dir = wd ? strdup(wd) : NULL;
        p->grace_time_s = grace;
        p->created_at = (int64_t)time(NULL);
    }
    json_object_put(body);
    if (rc < 0) {
        api_reply_err(req, &err);
        ctr_params_free(p);
        return NULL;
    }
    return p;
}

struct create_job {
    struct api_req *req; /* weak */
    struct container *c; /* a reference */
    struct containers *reg;
    struct store *st;
    struct ctr_params *p; /* the job's copy */
    char *dir;
    int rc;
    struct err err;
    int init_pidfd; /* watched once the create is done */
};

static void
create_work(void *ctx)
{
    struct create_job *j = ctx;
    j->rc = containers_create_blocking(j->reg, j->st, j->p, j->dir, &j->err);
    if (j->rc == 0)
        j->init_pidfd = container_init_pidfd(j->reg, j->p->handle);
}

static void
create_done(void *ctx, bool cancelled)
{
    struct create_job *j = ctx;
    struct container *c = j->c;
    if (cancelled && j->rc == 0)
        j->rc = err_set(&j->err, ECANCELED, "create container %s: the daemon is shutting down",
                        c->p->handle);
    if (j->rc == 0) {
        c->state = CTR_RUNNING;
        container_watch_init(c, j->init_pidfd);
        j->init_pidfd = -1;
        /* The job resolved the image's digest. */
        free(c->p->image_digest);
        c->p->image_digest = j->p->image_digest ? strdup(j->p->image_digest) : NULL;
        log_info("container %s: created", c->p->handle);
    } else {
        log_info("%s", j->err.msg);
        containers_remove(c);
    }
    if (j->req) {
        j->req->weak_ref = NULL;
        if (j->rc == 0)
            api_reply_json(j->req, 201, container_to_json(c, NULL));
        else
            api_reply_err(j->req, &j->err);
        api_req_resume(j->req);
    }
    if (j->init_pidfd >= 0)
        close(j->init_pidfd);
    container_unref(c);
    ctr_params_free(j->p);
    free(j->dir);
    free(j);
}

void
containers_post(struct api_req *req)
{
    struct containers *reg = api_containers(req);
    if (!reg)
        return;
    struct ctr_params *p = parse_create(req, reg);
    if (!p)
        return;
    struct create_job *j = calloc(1, sizeof(*j));
    struct ctr_params *copy = ctr_params_dup(p);
    if (!j || !copy) {
        free(j);
        ctr_params_free(copy);
        ctr_params_free(p);
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    j->init_pidfd = -1; /* a cancelled job never sets it */
    struct err err = {0};
    struct container *c = NULL;
    if (containers_add(reg, p, &c, &err) < 0) {
        free(j);
        ctr_params_free(copy);
        ctr_params_free(p);
        api_reply_err(req, &err);
        return;
    }
    container_ref(c);
    j->c = c;
    j->reg = reg;
    j->st = api_daemon(req->api)->store;
    j->p = copy;
    j->dir = strdup(c->dir);
    api_req_weak_ref(req, &j->req);
    int rc = j->dir ? job_submit(api_daemon(req->api)->jobs, "container.create", create_work,
                                 create_done, j)
                    : -ENOMEM;
    if (rc < 0) {
        req->weak_ref = NULL;
        containers_remove(c);
        container_unref(c);
        ctr_params_free(copy);
        free(j->dir);
        free(j);
        api_reply_error(req, 503, "unavailable", "cannot start the job: %s", strerror(-rc));
        return;
    }
    api_req_suspend(req);
}

/* ---- list and get ----------------------------------------------------------- */

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
    struct containers *reg = api_containers(req);
    if (!reg)
        return;
    json_object *arr = json_object_new_array();
    for (struct container *c = reg->list; c; c = c->next) {
        if (c->state == CTR_CREATING)
            continue;
        struct filter_ctx f = {.c = c, .match = true};
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, filter_cb, &f);
        if (f.match)
            json_object_array_add(arr, container_to_json(c, NULL));
    }
    json_object *body = json_object_new_object();
    json_object_object_add(body, "containers", arr);
    api_reply_json(req, 200, body);
}

struct stats_job {
    struct api_req *req; /* weak */
    struct container *c; /* a reference */
    const struct rt_driver *drv;
    void *drv_ctx;
    char handle[CTR_HANDLE_MAX + 1];
    struct rt_stats stats;
    int rc;
    struct err err;
};

static void
stats_work(void *ctx)
{
    struct stats_job *j = ctx;
    j->rc = j->drv->stats(j->drv_ctx, j->handle, &j->stats, &j->err);
}

static void
stats_done(void *ctx, bool cancelled)
{
    struct stats_job *j = ctx;
    struct container *c = j->c;
    bool ok = !cancelled && j->rc == 0;
    /* The runtime says the init is gone: report it honestly. */
    if (!cancelled && (j->rc == -ERR_CONFLICT || j->rc == -ENOENT) && c->state == CTR_RUNNING)
        container_mark_stopped(c);
    if (j->req) {
        j->req->weak_ref = NULL;
        if (!c->registered)
            api_reply_error(j->req, 404, "not_found", "container %s: not found", j->handle);
        else
            api_reply_json(j->req, 200, container_to_json(c, ok ? &j->stats : NULL));
        api_req_resume(j->req);
    }
    container_unref(c);
    free(j);
}

void
containers_get(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    if (!c)
        return;
    if (c->state != CTR_RUNNING) {
        api_reply_json(req, 200, container_to_json(c, NULL));
        return;
    }
    struct stats_job *j = calloc(1, sizeof(*j));
    if (!j) {
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    j->c = c;
    j->drv = c->reg->drv;
    j->drv_ctx = c->reg->drv_ctx;
    snprintf(j->handle, sizeof(j->handle), "%s", c->p->handle);
    container_ref(c);
    if (api_req_run_job(req, &j->req, "container.stats", stats_work, stats_done, j) < 0) {
        container_unref(c);
        free(j);
    }
}

/* ---- delete ----------------------------------------------------------------- */

/*
 * A delete in progress: TERM to every running process (a job), then the
 * loop waits, without a pool thread, for their exits or the grace time,
 * then the undo job (the runtime's delete KILLs whatever is left).
 */
struct delete_op {
    struct api_req *req; /* weak */
    struct container *c; /* a reference */
    struct containers *reg;
    struct store *st;
    struct ctr_params *p; /* the job's copy */
    char *dir;
    char **ids; /* processes to TERM */
    size_t nids;
    bool finishing;
    int rc;
    struct err err;
};

static void
delete_op_free(struct delete_op *op)
{
    if (op->c->delete_ctx == op)
        op->c->delete_ctx = NULL;
    if (op->req) {
        op->req->weak_ref = NULL;
        op->req->on_shutdown = NULL;
    }
    container_unref(op->c);
    ctr_params_free(op->p);
    for (size_t i = 0; i < op->nids; i++)
        free(op->ids[i]);
    free(op->ids);
    free(op->dir);
    free(op);
}

static void
delete_work(void *ctx)
{
    struct delete_op *op = ctx;
    op->rc = containers_delete_blocking(op->reg, op->st, op->p, op->dir, &op->err);
}

static void
delete_done(void *ctx, bool cancelled)
{
    struct delete_op *op = ctx;
    struct container *c = op->c;
    if (cancelled && op->rc == 0)
        op->rc = err_set(&op->err, ECANCELED, "delete container %s: the daemon is shutting down",
                         c->p->handle);
    if (op->rc == 0) {
        log_info("container %s: deleted", c->p->handle);
        containers_remove(c);
    } else {
        /* Left in "deleting": a retry runs every step again. */
        log_warn("%s", op->err.msg);
    }
    if (op->req) {
        if (op->rc == 0)
            api_reply_text(op->req, 204, "application/json", "", 0);
        else
            api_reply_err(op->req, &op->err);
        api_req_resume(op->req);
    }
    delete_op_free(op);
}

static void
delete_finish(struct delete_op *op)
{
    if (op->finishing)
        return;
    op->finishing = true;
    struct container *c = op->c;
    if (c->grace_timer)
        uv_timer_stop(c->grace_timer);
    int rc = job_submit(op->reg->d->jobs, "container.delete", delete_work, delete_done, op);
    if (rc < 0) {
        if (op->req) {
            api_reply_error(op->req, 503, "unavailable", "cannot start the job: %s", strerror(-rc));
            api_req_resume(op->req);
        }
        delete_op_free(op);
    }
}

static void
grace_cb(uv_timer_t *t)
{
    struct container *c = t->data;
    if (c->delete_ctx)
        delete_finish(c->delete_ctx);
}

/* containers_on_exit: a delete waiting for its processes goes on when the last one exited. */
static void
on_exit_hook(struct container *c, struct ctr_proc *pr)
{
    struct delete_op *op = c->delete_ctx;
    if (op && c->state == CTR_DELETING && c->deleting_term_sent && container_procs_running(c) == 0)
        delete_finish(op);
}

static void
term_work(void *ctx)
{
    struct delete_op *op = ctx;
    for (size_t i = 0; i < op->nids; i++) {
        struct err ignored = {0};
        op->reg->drv->proc_signal(op->reg->drv_ctx, op->p->handle, op->dir, op->ids[i], SIGTERM,
                                  &ignored);
    }
}

static void
term_done(void *ctx, bool cancelled)
{
    struct delete_op *op = ctx;
    struct container *c = op->c;
    if (cancelled || !c->registered) {
        if (op->req) {
            api_reply_error(op->req, 503, "unavailable", "the daemon is shutting down");
            api_req_resume(op->req);
        }
        delete_op_free(op);
        return;
    }
    c->deleting_term_sent = true;
    if (container_procs_running(c) == 0 || c->p->grace_time_s == 0) {
        delete_finish(op);
        return;
    }
    if (!c->grace_timer) {
        c->grace_timer = malloc(sizeof(*c->grace_timer));
        if (!c->grace_timer) {
            delete_finish(op);
            return;
        }
        uv_timer_init(op->reg->d->loop, c->grace_timer);
        c->grace_timer->data = c;
    }
    uv_timer_start(c->grace_timer, grace_cb, (uint64_t)c->p->grace_time_s * 1000, 0);
}

static void
delete_on_shutdown(struct api_req *req)
{
    struct container *c =
        api_daemon(req->api)->containers
            ? containers_find(api_daemon(req->api)->containers, api_req_param(req, "handle"))
            : NULL;
    struct delete_op *op = c ? c->delete_ctx : NULL;
    if (!op || op->finishing || !c->deleting_term_sent)
        return;
    /* Waiting out the grace time: give up, the container stays "deleting". */
    if (c->grace_timer)
        uv_timer_stop(c->grace_timer);
    api_reply_error(req, 503, "unavailable", "the daemon is shutting down");
    api_req_resume(req);
    delete_op_free(op);
}

void
containers_delete(struct api_req *req)
{
    struct container *c = api_container_lookup(req);
    if (!c)
        return;
    containers_on_exit = on_exit_hook;
    if (c->state == CTR_CREATING || c->delete_ctx || c->spawning) {
        api_reply_error(req, 409, "conflict", "container %s: %s", c->p->handle,
                        c->state == CTR_CREATING ? "being created"
                        : c->delete_ctx          ? "being deleted"
                                                 : "a process is being started");
        return;
    }
    struct delete_op *op = calloc(1, sizeof(*op));
    if (!op || !(op->p = ctr_params_dup(c->p)) || !(op->dir = strdup(c->dir))) {
        if (op)
            ctr_params_free(op->p);
        free(op);
        api_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    op->c = c;
    container_ref(c);
    op->reg = c->reg;
    op->st = api_daemon(req->api)->store;
    bool was_running = c->state == CTR_RUNNING;
    c->state = CTR_DELETING;
    c->delete_ctx = op;
    c->deleting_term_sent = false;
    api_req_weak_ref(req, &op->req);
    req->on_shutdown = delete_on_shutdown;
    api_req_suspend(req);
    unsigned running = was_running ? container_procs_running(c) : 0;
    if (running == 0) {
        delete_finish(op);
        return;
    }
    op->ids = calloc(running, sizeof(char *));
    for (struct ctr_proc *pr = c->procs; op->ids && pr; pr = pr->next)
        if (!pr->exited && op->nids < running)
            op->ids[op->nids++] = strdup(pr->id);
    int rc = job_submit(op->reg->d->jobs, "container.term", term_work, term_done, op);
    if (rc < 0)
        delete_finish(op);
}
