/*
 * The Docker API's view of containers: which ones it shows (those made
 * with a main process), how {id} names one (id, unique prefix, or name),
 * their state in the engine's words, and GET /containers/{id}/json and
 * GET /containers/json, rendered from the container service's records and
 * the create body kept with each container. Loop thread.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/docker/docker.h"
#include "api/request.h"
#include "common/clock.h"
#include "daemon/containers.h"
#include "daemon/daemon.h"
#include "daemon/net.h"
#include "daemon/svc_containers.h"
#include "daemon/svc_main.h"
#include "daemon/svc_processes.h"
#include "jsonutil/jsonutil.h"

bool
docker_ctr_visible(const struct container *c)
{
    return c->p->main != NULL;
}

struct container *
docker_ctr_param(struct api_req *req)
{
    const char *ref = api_req_param(req, "id");
    struct container *c = NULL;
    struct err err = {0};
    if (ref && ref[0] == '/')
        ref++;
    int ret = container_resolve(api_daemon(req->api), ref, docker_ctr_visible, &c, &err);
    if (ret == -ENOENT)
        api_reply_fail(req, ENOENT, "No such container: %s", api_req_param(req, "id"));
    else if (ret < 0)
        api_reply_err(req, &err);
    return ret < 0 ? NULL : c;
}

/* Docker's states, one name each (docker_ctr_status). */
enum dk_state { DK_CREATED, DK_RUNNING, DK_EXITED, DK_REMOVING, DK_DEAD };
static const char *const dk_state_names[] = {"created", "running", "exited", "removing", "dead"};

static enum dk_state
dk_state_of(const struct container *c)
{
    switch (c->state) {
    case CTR_CREATING:
        return DK_CREATED;
    case CTR_DELETING:
        return DK_REMOVING;
    case CTR_STOPPED:
        return c->main_proc ? DK_EXITED : DK_DEAD;
    case CTR_RUNNING:
        break;
    }
    if (container_main_running(c))
        return DK_RUNNING;
    return c->main_proc ? DK_EXITED : DK_CREATED;
}

const char *
docker_ctr_status(const struct container *c)
{
    return dk_state_names[dk_state_of(c)];
}

/* ---- rendering ---------------------------------------------------------------- */

/* The create body kept with c (a new reference; an empty object when none). */
static json_object *
front_meta(const struct container *c)
{
    json_object *o = NULL;
    struct err err = {0};
    if (!c->p->front_meta ||
        jsonutil_parse_object(c->p->front_meta, strlen(c->p->front_meta), false, &o, &err) < 0)
        return json_object_new_object();
    return o;
}

/* A member of o (a new reference), or null. */
static json_object *
member(json_object *o, const char *key)
{
    json_object *v = NULL;
    return jsonutil_lookup(o, key, &v) ? json_object_get(v) : NULL;
}

static json_object *
labels_json(const struct ctr_params *p)
{
    json_object *o = json_object_new_object();
    for (size_t i = 0; i < p->nprops; i++)
        json_object_object_add(o, p->prop_keys[i], json_object_new_string(p->prop_values[i]));
    return o;
}

static const struct ctr_proc *
main_run(const struct container *c)
{
    return c->main_proc;
}

static json_object *
state_json(const struct container *c)
{
    const struct ctr_proc *pr = main_run(c);
    bool running = container_main_running(c);
    const char *status = docker_ctr_status(c);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Status", json_object_new_string(status));
    json_object_object_add(o, "Running", json_object_new_boolean(running));
    json_object_object_add(o, "Paused", json_object_new_boolean(false));
    json_object_object_add(o, "Restarting", json_object_new_boolean(false));
    json_object_object_add(o, "OOMKilled", json_object_new_boolean(pr && pr->oom_killed));
    json_object_object_add(o, "Dead", json_object_new_boolean(strcmp(status, "dead") == 0));
    json_object_object_add(o, "Pid", json_object_new_int(running && pr ? pr->pid : 0));
    json_object_object_add(o, "ExitCode", json_object_new_int(container_main_exit_code(c)));
    char why[ERR_MSG_MAX + 128] = "";
    if (c->main_start_failed) /* its latest start failed: why, as the start's answer said */
        docker_start_message(c->main_start_error, why, sizeof(why));
    else if (pr && pr->lost)
        snprintf(why, sizeof(why), "%s", pr->error);
    json_object_object_add(o, "Error", json_object_new_string(why));
    json_object_object_add(o, "StartedAt", docker_time_ms(pr ? pr->started_at : 0));
    json_object_object_add(o, "FinishedAt", docker_time_ms(pr && pr->exited ? pr->finished_at : 0));
    return o;
}

/* Entrypoint and Cmd as the engine shows them: merged with the image's. */
static void
command_json(const struct container *c, json_object **ep, json_object **cmd, json_object **path,
             json_object **args)
{
    struct process_spec spec;
    container_main_spec(c->p->main, &spec);
    char *const *e = NULL, *const *a = NULL;
    process_command_parts(c->p, &spec, &e, &a);
    *ep = e && e[0] ? docker_strv(e, false) : NULL;
    *cmd = a && a[0] ? docker_strv(a, false) : NULL;
    if (!path)
        return;
    struct err err = {0};
    char **argv = process_command(c->p, &spec, &err);
    *path = json_object_new_string(argv && argv[0] ? argv[0] : "");
    *args = docker_strv(argv && argv[0] ? argv + 1 : NULL, false);
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

static json_object *
config_json(const struct container *c, json_object *meta)
{
    const struct ctr_params *p = c->p;
    const struct ctr_main *m = p->main;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Hostname", json_object_new_string(p->hostname ? p->hostname : ""));
    json_object_object_add(o, "Domainname", json_object_new_string(""));
    json_object_object_add(o, "User",
                           json_object_new_string(p->user         ? p->user
                                                  : p->image_user ? p->image_user
                                                                  : ""));
    static const char *const attach[] = {"AttachStdin", "AttachStdout", "AttachStderr", NULL};
    for (size_t i = 0; attach[i]; i++) {
        json_object *v = member(meta, attach[i]);
        json_object_object_add(o, attach[i], v ? v : json_object_new_boolean(false));
    }
    json_object_object_add(o, "ExposedPorts", member(meta, "ExposedPorts"));
    json_object_object_add(o, "Tty", json_object_new_boolean(m->tty));
    json_object_object_add(o, "OpenStdin", json_object_new_boolean(m->open_stdin));
    json_object_object_add(o, "StdinOnce", json_object_new_boolean(m->stdin_once));
    json_object_object_add(o, "Env", docker_strv(p->env, false));
    json_object *ep = NULL, *cmd = NULL;
    command_json(c, &ep, &cmd, NULL, NULL);
    json_object_object_add(o, "Cmd", cmd);
    json_object *image = member(meta, "Image");
    json_object_object_add(
        o, "Image", image ? image : json_object_new_string(p->image_ref ? p->image_ref : ""));
    json_object_object_add(o, "Volumes", member(meta, "Volumes"));
    json_object_object_add(o, "WorkingDir",
                           json_object_new_string(p->working_dir ? p->working_dir : ""));
    json_object_object_add(o, "Entrypoint", ep);
    json_object_object_add(o, "OnBuild", NULL);
    json_object_object_add(o, "Labels", labels_json(p));
    json_object *sig = member(meta, "StopSignal");
    if (sig)
        json_object_object_add(o, "StopSignal", sig);
    json_object_object_add(o, "StopTimeout", json_object_new_int64(p->grace_time_s));
    return o;
}

/* The network the container is on, as the engine names it: "none" when it
 * has only loopback (its NetworkMode none, or a daemon with --network none),
 * else "bridge" (berth's network). */
static const char *
network_mode(const struct container *c)
{
    const struct daemon *d = c->reg->d;
    return c->p->net_disabled || d->cfg->network_disabled ? "none" : "bridge";
}

static json_object *
host_config_json(const struct container *c, json_object *meta)
{
    json_object *hc = member(meta, "HostConfig");
    if (!hc || !json_object_is_type(hc, json_type_object)) {
        json_object_put(hc);
        hc = json_object_new_object();
    }
    /* What clients read: how the output is kept (docker-py shows output
     * only for json-file or journald), the network, the limits in force. */
    json_object *log = json_object_new_object();
    json_object_object_add(log, "Type", json_object_new_string("json-file"));
    json_object_object_add(log, "Config", json_object_new_object());
    json_object_object_add(hc, "LogConfig", log);
    json_object *net = NULL;
    if (!jsonutil_lookup(hc, "NetworkMode", &net) || !*json_object_get_string(net))
        json_object_object_add(hc, "NetworkMode", json_object_new_string(network_mode(c)));
    const struct rt_limits *l = &c->p->limits;
    json_object_object_add(hc, "Memory", json_object_new_int64((int64_t)l->memory_bytes));
    json_object_object_add(hc, "PidsLimit", l->pids ? json_object_new_int64(l->pids) : NULL);
    json_object_object_add(hc, "CpuShares", json_object_new_int64((int64_t)l->cpu_shares));
    json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(c->p->readonly_rootfs));
    json_object_object_add(hc, "AutoRemove", json_object_new_boolean(c->p->main->auto_remove));
    return hc;
}

static json_object *
mounts_json(const struct container *c)
{
    const struct ctr_params *p = c->p;
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < p->nmounts; i++) {
        const struct rt_mount *m = &p->mounts[i];
        const char *vol = p->mount_volumes ? p->mount_volumes[i] : NULL;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "Type",
                               json_object_new_string(m->tmpfs ? "tmpfs"
                                                      : vol    ? "volume"
                                                               : "bind"));
        if (vol) {
            json_object_object_add(o, "Name", json_object_new_string(vol));
            json_object_object_add(o, "Driver", json_object_new_string("local"));
        }
        json_object_object_add(o, "Source", json_object_new_string(m->source ? m->source : ""));
        json_object_object_add(o, "Destination", json_object_new_string(m->target));
        json_object_object_add(o, "Mode", json_object_new_string(m->readonly ? "ro" : ""));
        json_object_object_add(o, "RW", json_object_new_boolean(!m->readonly));
        json_object_object_add(o, "Propagation",
                               json_object_new_string(vol || m->tmpfs ? "" : "rprivate"));
        json_object_array_add(a, o);
    }
    return a;
}

static json_object *
network_settings_json(const struct container *c)
{
    const struct net_attachment *a = container_network(c);
    if (a && a->disabled)
        a = NULL;
    const char *mode = network_mode(c);
    const char *ip = a ? a->ip : "", *gw = a ? a->gateway : "";
    const char *mac = a && a->mac ? a->mac : "";
    int prefix = a ? (int)a->prefix : 0;
    json_object *o = json_object_new_object();
    static const char *const empty[] = {"Bridge",
                                        "SandboxID",
                                        "SandboxKey",
                                        "EndpointID",
                                        "GlobalIPv6Address",
                                        "IPv6Gateway",
                                        "LinkLocalIPv6Address",
                                        NULL};
    for (size_t i = 0; empty[i]; i++)
        json_object_object_add(o, empty[i], json_object_new_string(""));
    json_object_object_add(o, "Gateway", json_object_new_string(gw));
    json_object_object_add(o, "IPAddress", json_object_new_string(ip));
    json_object_object_add(o, "MacAddress", json_object_new_string(mac));
    json_object_object_add(o, "HairpinMode", json_object_new_boolean(false));
    json_object_object_add(o, "LinkLocalIPv6PrefixLen", json_object_new_int(0));
    json_object_object_add(o, "GlobalIPv6PrefixLen", json_object_new_int(0));
    json_object_object_add(o, "IPPrefixLen", json_object_new_int(prefix));
    json_object_object_add(o, "Ports", json_object_new_object());
    json_object_object_add(o, "SecondaryIPAddresses", NULL);
    json_object_object_add(o, "SecondaryIPv6Addresses", NULL);
    json_object *nets = json_object_new_object();
    json_object *n = json_object_new_object();
    json_object_object_add(n, "NetworkID", json_object_new_string(mode));
    json_object_object_add(n, "EndpointID", json_object_new_string(""));
    json_object_object_add(n, "Gateway", json_object_new_string(gw));
    json_object_object_add(n, "IPAddress", json_object_new_string(ip));
    json_object_object_add(n, "IPPrefixLen", json_object_new_int(prefix));
    json_object_object_add(n, "MacAddress", json_object_new_string(mac));
    json_object_object_add(nets, mode, n);
    json_object_object_add(o, "Networks", nets);
    return o;
}

static json_object *
image_id_json(const struct container *c)
{
    const char *id = c->p->image_config ? c->p->image_config : c->p->image_digest;
    return json_object_new_string(id ? id : "");
}

static json_object *
inspect_json(const struct container *c)
{
    const struct ctr_params *p = c->p;
    json_object *meta = front_meta(c);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Id", json_object_new_string(p->handle));
    json_object_object_add(o, "Created", docker_time_ms(p->created_at * 1000));
    json_object *ep = NULL, *cmd = NULL, *path = NULL, *args = NULL;
    command_json(c, &ep, &cmd, &path, &args);
    json_object_put(ep);
    json_object_put(cmd);
    json_object_object_add(o, "Path", path);
    json_object_object_add(o, "Args", args);
    json_object_object_add(o, "State", state_json(c));
    json_object_object_add(o, "Image", image_id_json(c));
    static const char *const empty[] = {
        "ResolvConfPath", "HostnamePath", "HostsPath",       "LogPath",
        "MountLabel",     "ProcessLabel", "AppArmorProfile", NULL};
    for (size_t i = 0; empty[i]; i++)
        json_object_object_add(o, empty[i], json_object_new_string(""));
    char name[CTR_HANDLE_MAX + 2];
    snprintf(name, sizeof(name), "/%s", p->name ? p->name : p->handle);
    json_object_object_add(o, "Name", json_object_new_string(name));
    json_object_object_add(o, "RestartCount", json_object_new_int(0));
    json_object_object_add(o, "Driver", json_object_new_string("overlay2"));
    json_object_object_add(o, "Platform", json_object_new_string("linux"));
    json_object_object_add(o, "ExecIDs", NULL);
    json_object_object_add(o, "HostConfig", host_config_json(c, meta));
    json_object *gd = json_object_new_object();
    json_object_object_add(gd, "Name", json_object_new_string("overlay2"));
    json_object_object_add(gd, "Data", NULL);
    json_object_object_add(o, "GraphDriver", gd);
    json_object_object_add(o, "Mounts", mounts_json(c));
    json_object_object_add(o, "Config", config_json(c, meta));
    json_object_object_add(o, "NetworkSettings", network_settings_json(c));
    json_object_put(meta);
    return o;
}

void
docker_container_inspect(struct api_req *req)
{
    struct container *c = docker_ctr_param(req);
    if (c)
        api_reply_json(req, 200, inspect_json(c));
}

/* ---- list ------------------------------------------------------------------------ */

/* The engine's human durations (go-units HumanDuration). */
static void
human_duration(int64_t s, char *out, size_t len)
{
    int64_t h = s / 3600;
    if (s < 1)
        snprintf(out, len, "Less than a second");
    else if (s == 1)
        snprintf(out, len, "1 second");
    else if (s < 60)
        snprintf(out, len, "%lld seconds", (long long)s);
    else if (s / 60 == 1)
        snprintf(out, len, "About a minute");
    else if (s < 46 * 60)
        snprintf(out, len, "%lld minutes", (long long)(s / 60));
    else if (s < 90 * 60)
        snprintf(out, len, "About an hour");
    else if (h < 48)
        snprintf(out, len, "%lld hours", (long long)h);
    else if (h < 24 * 7 * 2)
        snprintf(out, len, "%lld days", (long long)(h / 24));
    else if (h < 24 * 30 * 2)
        snprintf(out, len, "%lld weeks", (long long)(h / 24 / 7));
    else if (h < 24 * 365 * 2)
        snprintf(out, len, "%lld months", (long long)(h / 24 / 30));
    else
        snprintf(out, len, "%lld years", (long long)(h / 24 / 365));
}

static json_object *
status_text(const struct container *c)
{
    const struct ctr_proc *pr = main_run(c);
    /* By state, not by name: gcc -O3 threads the names through the
     * compares and warns of ones it has proved unequal (-Wstring-compare). */
    enum dk_state st = dk_state_of(c);
    char buf[128], d[64];
    int64_t now = clock_unix_ms();
    if (st == DK_RUNNING && pr) {
        human_duration((now - pr->started_at) / 1000, d, sizeof(d));
        snprintf(buf, sizeof(buf), "Up %s", d);
    } else if (st == DK_EXITED && pr) {
        human_duration(pr->finished_at ? (now - pr->finished_at) / 1000 : 0, d, sizeof(d));
        snprintf(buf, sizeof(buf), "Exited (%d) %s ago", container_main_exit_code(c), d);
    } else if (st == DK_REMOVING) {
        snprintf(buf, sizeof(buf), "Removal In Progress");
    } else {
        snprintf(buf, sizeof(buf), "%s", st == DK_DEAD ? "Dead" : "Created");
    }
    return json_object_new_string(buf);
}

json_object *
docker_ctr_summary(const struct container *c)
{
    const struct ctr_params *p = c->p;
    json_object *meta = front_meta(c);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Id", json_object_new_string(p->handle));
    json_object *names = json_object_new_array();
    char name[CTR_HANDLE_MAX + 2];
    snprintf(name, sizeof(name), "/%s", p->name ? p->name : p->handle);
    json_object_array_add(names, json_object_new_string(name));
    json_object_object_add(o, "Names", names);
    json_object *image = member(meta, "Image");
    json_object_object_add(
        o, "Image", image ? image : json_object_new_string(p->image_ref ? p->image_ref : ""));
    json_object_object_add(o, "ImageID", image_id_json(c));
    struct process_spec spec;
    container_main_spec(p->main, &spec);
    struct err err = {0};
    char **argv = process_command(p, &spec, &err);
    size_t len = 0;
    for (size_t i = 0; argv && argv[i]; i++)
        len += strlen(argv[i]) + 1;
    char *command = calloc(1, len + 1);
    for (size_t i = 0; command && argv && argv[i]; i++) {
        if (i)
            strcat(command, " ");
        strcat(command, argv[i]);
    }
    json_object_object_add(o, "Command", json_object_new_string(command ? command : ""));
    free(command);
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
    json_object_object_add(o, "Created", json_object_new_int64(p->created_at));
    json_object_object_add(o, "Ports", json_object_new_array());
    json_object_object_add(o, "Labels", labels_json(p));
    json_object_object_add(o, "State", json_object_new_string(docker_ctr_status(c)));
    json_object_object_add(o, "Status", status_text(c));
    json_object *hc = json_object_new_object();
    json_object_object_add(hc, "NetworkMode", json_object_new_string(network_mode(c)));
    json_object_object_add(o, "HostConfig", hc);
    json_object *ns = json_object_new_object();
    json_object_object_add(ns, "Networks", json_object_new_object());
    json_object_object_add(o, "NetworkSettings", ns);
    json_object_object_add(o, "Mounts", mounts_json(c));
    json_object_put(meta);
    return o;
}

/* Whether any of the patterns (the engine reads them as regular expressions) matches s. */
static bool
any_regex(json_object *pats, const char *s)
{
    for (size_t i = 0; i < json_object_array_length(pats); i++) {
        regex_t re;
        const char *pat = json_object_get_string(json_object_array_get_idx(pats, i));
        if (regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) != 0)
            continue;
        bool m = regexec(&re, s, 0, NULL, 0) == 0;
        regfree(&re);
        if (m)
            return true;
    }
    return false;
}

static bool
any_equal(json_object *vals, const char *s, bool prefix)
{
    for (size_t i = 0; i < json_object_array_length(vals); i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(vals, i));
        if (prefix ? strncmp(s, v, strlen(v)) == 0 : strcmp(s, v) == 0)
            return true;
    }
    return false;
}

static bool
list_match(const struct container *c, json_object *filters, bool all)
{
    const char *status = docker_ctr_status(c);
    json_object *v;
    if ((v = docker_filter_values(filters, "status")) && !any_equal(v, status, false))
        return false;
    if (!v && !all && strcmp(status, "running") != 0)
        return false;
    if ((v = docker_filter_values(filters, "id")) && !any_equal(v, c->p->handle, true))
        return false;
    if ((v = docker_filter_values(filters, "name"))) {
        char name[CTR_HANDLE_MAX + 2];
        snprintf(name, sizeof(name), "/%s", c->p->name ? c->p->name : c->p->handle);
        if (!any_regex(v, name))
            return false;
    }
    if ((v = docker_filter_values(filters, "label")) &&
        !docker_labels_match(v, c->p->prop_keys, c->p->prop_values, c->p->nprops))
        return false;
    if ((v = docker_filter_values(filters, "exited"))) {
        char code[16];
        snprintf(code, sizeof(code), "%d", container_main_exit_code(c));
        if (strcmp(status, "exited") != 0 || !any_equal(v, code, false))
            return false;
    }
    return true;
}

void
docker_containers_list(struct api_req *req)
{
    static const char *const known[] = {"status", "id", "name", "label", "exited", NULL};
    struct containers *reg = NULL;
    struct err err = {0};
    if (containers_registry(api_daemon(req->api), &reg, &err) < 0) {
        api_reply_err(req, &err);
        return;
    }
    json_object *filters = docker_filters(req, known);
    if (!filters)
        return;
    /* A status the engine does not know is its 400, not an empty list. */
    static const char *const states[] = {"created", "restarting", "running", "removing",
                                         "paused",  "exited",     "dead",    NULL};
    json_object *sv = docker_filter_values(filters, "status");
    for (size_t i = 0; sv && i < json_object_array_length(sv); i++) {
        const char *want = json_object_get_string(json_object_array_get_idx(sv, i));
        bool known_state = false;
        for (const char *const *st = states; *st; st++)
            known_state |= strcmp(*st, want) == 0;
        if (!known_state) {
            api_reply_fail(req, EINVAL, "invalid filter 'status=%s'", want);
            json_object_put(filters);
            return;
        }
    }
    bool all = docker_query_bool(req, "all", false);
    int64_t limit = -1;
    if (docker_query_int(req, "limit", -1, INT32_MAX, &limit, &err) < 0) {
        json_object_put(filters);
        api_reply_err(req, &err);
        return;
    }
    /* Newest first, as the engine lists them. */
    size_t n = 0;
    for (struct container *c = reg->list; c; c = c->next)
        n++;
    struct container **v = calloc(n ? n : 1, sizeof(*v));
    size_t k = 0;
    for (struct container *c = reg->list; v && c; c = c->next)
        if (container_listed(c) && docker_ctr_visible(c) && list_match(c, filters, all))
            v[k++] = c;
    json_object *arr = json_object_new_array();
    for (size_t i = 1; v && i < k; i++) {
        for (size_t j = i; j > 0 && v[j - 1]->p->created_at < v[j]->p->created_at; j--) {
            struct container *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    for (size_t i = 0; v && i < k && (limit <= 0 || (int64_t)i < limit); i++)
        json_object_array_add(arr, docker_ctr_summary(v[i]));
    free(v);
    json_object_put(filters);
    api_reply_json(req, 200, arr);
}
