/*
 * A container's on-disk record, container.json in its directory: an
 * on-disk format in JSON, as the store's and the runtime's are. Written
 * atomically before each step of create and delete (containers_ops.c)
 * and read back at start-up (containers_open.c). Beside it,
 * main-start-failure.json: the main process's latest start when its
 * program could not run (written and removed by the start's job,
 * daemon/svc_processes.c). Pool threads, or main before the loop runs;
 * blocks on disk.
 */
#include "daemon/containers_int.h"

#include <json-c/json.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "common/strv.h"
#include "jsonutil/jsonutil.h"
#include "store/digest.h"
#include "daemon/ctr_stops.h"
#include "daemon/daemon.h"
#include "daemon/svc_main.h"
#include "store/layer.h"
#include "store/oci.h"
#include "store/refname.h"
#include "store/scratch.h"
#include "store/store.h"

#define RECORD_NAME "container.json"
#define RECORD_MAX (1 << 20)
#define START_FAILURE_NAME "main-start-failure.json"
/* A message of ERR_MSG_MAX bytes, each escaped as \u00XX at worst, and the rest. */
#define START_FAILURE_MAX (6 * ERR_MSG_MAX + 256)

static json_object *
strv_to_json(char *const *v)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; v && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

/* A string array member as a vector, or NULL when absent or malformed. */
static char **
strv_of(json_object *o, const char *key)
{
    json_object *a = NULL;
    char **v = NULL;
    struct err ignored;
    if (jsonutil_get_array(o, "", key, false, &a, &ignored) == 1)
        jsonutil_strv(a, key, 65536, &v, &ignored);
    return v;
}

/* What a front end gave beside the /v1 fields: name, user, main process, its own record. */
static void
record_write_main(json_object *o, const struct ctr_params *p)
{
    if (p->name)
        json_object_object_add(o, "name", json_object_new_string(p->name));
    if (p->user)
        json_object_object_add(o, "user", json_object_new_string(p->user));
    if (p->hostname)
        json_object_object_add(o, "hostname", json_object_new_string(p->hostname));
    if (p->image_config)
        json_object_object_add(o, "image_config", json_object_new_string(p->image_config));
    if (p->readonly_rootfs)
        json_object_object_add(o, "readonly_rootfs", json_object_new_boolean(true));
    if (p->front_meta)
        json_object_object_add(o, "front_meta", json_object_new_string(p->front_meta));
    const struct ctr_main *m = p->main;
    if (!m)
        return;
    json_object *j = json_object_new_object();
    if (m->has_entrypoint)
        json_object_object_add(j, "entrypoint", strv_to_json(m->entrypoint));
    if (m->has_cmd)
        json_object_object_add(j, "cmd", strv_to_json(m->cmd));
    json_object_object_add(j, "stdin", json_object_new_boolean(m->open_stdin));
    json_object_object_add(j, "stdin_once", json_object_new_boolean(m->stdin_once));
    json_object_object_add(j, "tty", json_object_new_boolean(m->tty));
    json_object_object_add(j, "stop_signal", json_object_new_int(m->stop_signal));
    json_object_object_add(j, "auto_remove", json_object_new_boolean(m->auto_remove));
    json_object_object_add(o, "main", j);
}

static bool
bool_of(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* The counterpart of record_write_main; false when out of memory. */
static bool
record_read_main(json_object *o, struct ctr_params *p)
{
    p->name = jsonutil_strdup(o, "name");
    p->user = jsonutil_strdup(o, "user");
    p->hostname = jsonutil_strdup(o, "hostname");
    p->image_config = jsonutil_strdup(o, "image_config");
    p->front_meta = jsonutil_strdup(o, "front_meta");
    p->readonly_rootfs = bool_of(o, "readonly_rootfs");
    json_object *j = NULL, *v = NULL;
    if (!json_object_object_get_ex(o, "main", &j) || !json_object_is_type(j, json_type_object))
        return true;
    struct ctr_main *m = calloc(1, sizeof(*m));
    if (!m)
        return false;
    m->has_entrypoint = json_object_object_get_ex(j, "entrypoint", &v);
    m->entrypoint = strv_of(j, "entrypoint");
    m->has_cmd = json_object_object_get_ex(j, "cmd", &v);
    m->cmd = strv_of(j, "cmd");
    m->open_stdin = bool_of(j, "stdin");
    m->stdin_once = bool_of(j, "stdin_once");
    m->tty = bool_of(j, "tty");
    m->stop_signal = (int)jsonutil_int64_or0(j, "stop_signal");
    m->auto_remove = bool_of(j, "auto_remove");
    p->main = m;
    return true;
}

int
ctr_record_write(const struct ctr_params *p, const char *dir, const char *state, bool durable,
                 struct err *err)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "handle", json_object_new_string(p->handle));
    json_object_object_add(o, "state", json_object_new_string(state));
    if (p->image_ref)
        json_object_object_add(o, "image", json_object_new_string(p->image_ref));
    if (p->image_digest)
        json_object_object_add(o, "image_digest", json_object_new_string(p->image_digest));
    if (p->rootfs_dir)
        json_object_object_add(o, "rootfs_dir", json_object_new_string(p->rootfs_dir));
    json_object *l = json_object_new_object();
    json_object_object_add(l, "memory_bytes",
                           json_object_new_int64((int64_t)p->limits.memory_bytes));
    json_object_object_add(l, "cpu_shares", json_object_new_int64((int64_t)p->limits.cpu_shares));
    json_object_object_add(l, "cpu_quota_pct", json_object_new_int64(p->limits.cpu_quota_pct));
    json_object_object_add(l, "pids", json_object_new_int64(p->limits.pids));
    json_object_object_add(l, "disk_bytes", json_object_new_int64((int64_t)p->limits.disk_bytes));
    json_object_object_add(o, "limits", l);
    json_object_object_add(o, "env", strv_to_json(p->env));
    if (p->working_dir)
        json_object_object_add(o, "working_dir", json_object_new_string(p->working_dir));
    json_object *mounts = json_object_new_array();
    for (size_t i = 0; i < p->nmounts; i++) {
        json_object *m = json_object_new_object();
        if (p->mounts[i].source)
            json_object_object_add(m, "source", json_object_new_string(p->mounts[i].source));
        if (p->mount_volumes && p->mount_volumes[i])
            json_object_object_add(m, "volume", json_object_new_string(p->mount_volumes[i]));
        json_object_object_add(m, "target", json_object_new_string(p->mounts[i].target));
        json_object_object_add(m, "readonly", json_object_new_boolean(p->mounts[i].readonly));
        if (p->mounts[i].tmpfs)
            json_object_object_add(m, "tmpfs", json_object_new_boolean(true));
        json_object_array_add(mounts, m);
    }
    json_object_object_add(o, "mounts", mounts);
    json_object *props = json_object_new_object();
    for (size_t i = 0; i < p->nprops; i++)
        json_object_object_add(props, p->prop_keys[i], json_object_new_string(p->prop_values[i]));
    json_object_object_add(o, "properties", props);
    json_object_object_add(o, "grace_time_s", json_object_new_int64(p->grace_time_s));
    if (p->isolation[0])
        json_object_object_add(o, "isolation", json_object_new_string(p->isolation));
    json_object_object_add(o, "created_at", json_object_new_int64(p->created_at));
    if (p->image_entrypoint)
        json_object_object_add(o, "image_entrypoint", strv_to_json(p->image_entrypoint));
    if (p->image_cmd)
        json_object_object_add(o, "image_cmd", strv_to_json(p->image_cmd));
    if (p->image_user)
        json_object_object_add(o, "image_user", json_object_new_string(p->image_user));
    record_write_main(o, p);
    json_object *net = json_object_new_object();
    json_object_object_add(net, "disabled", json_object_new_boolean(p->net_disabled));
    json_object *ports = json_object_new_array();
    for (size_t i = 0; i < p->nports; i++) {
        json_object *pt = json_object_new_object();
        json_object_object_add(pt, "host", json_object_new_int(p->ports[i].host));
        json_object_object_add(pt, "container", json_object_new_int(p->ports[i].container));
        json_object_object_add(pt, "protocol",
                               json_object_new_string(p->ports[i].udp ? "udp" : "tcp"));
        json_object_array_add(ports, pt);
    }
    json_object_object_add(net, "ports", ports);
    json_object_object_add(o, "network", net);
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    cleanup_free char *path = fs_path_join(dir, RECORD_NAME);
    int ret = !path     ? err_set(err, ENOMEM, "container record: out of memory")
              : durable ? fs_write_file_atomic(path, text, len, 0600, err)
                        : fs_write_file_volatile(path, text, len, 0600, err);
    json_object_put(o);
    return ret;
}

/* Reads a record; *state gets its state string (caller frees). */
int
ctr_record_read(const char *dir, struct ctr_params **out, char **state, struct err *err)
{
    cleanup_free char *path = fs_path_join(dir, RECORD_NAME);
    cleanup_free char *text = NULL;
    size_t len = 0;
    int ret = fs_read_file(path, RECORD_MAX, &text, &len, err);
    if (ret < 0)
        return ret;
    json_object *o = NULL;
    if (jsonutil_parse_object(text, len, false, &o, err) < 0)
        return err_set(err, EIO, "container record %s: %s", path, err->msg);
    struct ctr_params *p = calloc(1, sizeof(*p));
    cleanup_free char *handle = jsonutil_strdup(o, "handle");
    if (!p || !handle || !rt_handle_valid(handle)) {
        free(p);
        json_object_put(o);
        return err_set(err, EIO, "container record %s: no valid handle", path);
    }
    snprintf(p->handle, sizeof(p->handle), "%s", handle);
    *state = jsonutil_strdup(o, "state");
    p->image_ref = jsonutil_strdup(o, "image");
    p->image_digest = jsonutil_strdup(o, "image_digest");
    p->rootfs_dir = jsonutil_strdup(o, "rootfs_dir");
    p->working_dir = jsonutil_strdup(o, "working_dir");
    json_object *l, *a, *v;
    if (json_object_object_get_ex(o, "limits", &l)) {
        p->limits.memory_bytes = (uint64_t)jsonutil_int64_or0(l, "memory_bytes");
        p->limits.cpu_shares = (uint64_t)jsonutil_int64_or0(l, "cpu_shares");
        p->limits.cpu_quota_pct = (uint32_t)jsonutil_int64_or0(l, "cpu_quota_pct");
        p->limits.pids = jsonutil_int64_or0(l, "pids");
        p->limits.disk_bytes = (uint64_t)jsonutil_int64_or0(l, "disk_bytes");
    }
    p->env = strv_of(o, "env");
    p->image_entrypoint = strv_of(o, "image_entrypoint");
    p->image_cmd = strv_of(o, "image_cmd");
    p->image_user = jsonutil_strdup(o, "image_user");
    if (json_object_object_get_ex(o, "mounts", &a) && json_object_is_type(a, json_type_array)) {
        size_t n = json_object_array_length(a);
        p->mounts = calloc(n ? n : 1, sizeof(*p->mounts));
        p->mount_volumes = calloc(n ? n : 1, sizeof(char *));
        for (size_t i = 0; p->mounts && p->mount_volumes && i < n; i++) {
            json_object *m = json_object_array_get_idx(a, i);
            p->mounts[i].source = jsonutil_strdup(m, "source");
            p->mount_volumes[i] = jsonutil_strdup(m, "volume");
            p->mounts[i].target = jsonutil_strdup(m, "target");
            p->mounts[i].readonly =
                json_object_object_get_ex(m, "readonly", &v) && json_object_get_boolean(v);
            p->mounts[i].tmpfs = bool_of(m, "tmpfs");
            p->nmounts = i + 1;
        }
    }
    if (json_object_object_get_ex(o, "properties", &a) &&
        json_object_is_type(a, json_type_object)) {
        size_t n = (size_t)json_object_object_length(a);
        p->prop_keys = calloc(n ? n : 1, sizeof(char *));
        p->prop_values = calloc(n ? n : 1, sizeof(char *));
        json_object_object_foreach(a, key, val)
        {
            if (!p->prop_keys || !p->prop_values)
                break;
            p->prop_keys[p->nprops] = strdup(key);
            p->prop_values[p->nprops] = strdup(json_object_get_string(val));
            p->nprops++;
        }
    }
    p->grace_time_s = jsonutil_int64_or0(o, "grace_time_s");
    cleanup_free char *isolation = jsonutil_strdup(o, "isolation");
    if (isolation && (strcmp(isolation, "process") == 0 || strcmp(isolation, "hyperv") == 0))
        snprintf(p->isolation, sizeof(p->isolation), "%s", isolation);
    p->created_at = jsonutil_int64_or0(o, "created_at");
    record_read_main(o, p);
    json_object *net = NULL;
    if (json_object_object_get_ex(o, "network", &net) &&
        json_object_is_type(net, json_type_object)) {
        p->net_disabled =
            json_object_object_get_ex(net, "disabled", &v) && json_object_get_boolean(v);
        if (json_object_object_get_ex(net, "ports", &a) &&
            json_object_is_type(a, json_type_array)) {
            size_t n = json_object_array_length(a);
            if (n > CTR_PORTS_MAX)
                n = CTR_PORTS_MAX;
            p->ports = n ? calloc(n, sizeof(*p->ports)) : NULL;
            for (size_t i = 0; p->ports && i < n; i++) {
                json_object *pt = json_object_array_get_idx(a, i);
                cleanup_free char *proto = jsonutil_strdup(pt, "protocol");
                p->ports[i].host = (uint16_t)jsonutil_int64_or0(pt, "host");
                p->ports[i].container = (uint16_t)jsonutil_int64_or0(pt, "container");
                p->ports[i].udp = proto && strcmp(proto, "udp") == 0;
                p->nports = i + 1;
            }
        }
    }
    json_object_put(o);
    *out = p;
    return 0;
}

/* ---- the main process's failed start ------------------------------------------ */

int
ctr_start_failure_write(const char *dir, const struct ctr_start_failure *f, struct err *err)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "exit_code", json_object_new_int(f->exit_code));
    json_object_object_add(o, "error", json_object_new_string(f->error));
    json_object_object_add(o, "at_ms", json_object_new_int64(f->at_ms));
    if (f->run)
        json_object_object_add(o, "run", json_object_new_int64(f->run));
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    cleanup_free char *path = fs_path_join(dir, START_FAILURE_NAME);
    int ret = path ? fs_write_file_atomic(path, text, len, 0600, err)
                   : err_set(err, ENOMEM, "start failure record: out of memory");
    json_object_put(o);
    return ret;
}

int
ctr_start_failure_clear(const char *dir, struct err *err)
{
    cleanup_free char *path = fs_path_join(dir, START_FAILURE_NAME);
    if (!path)
        return err_set(err, ENOMEM, "start failure record: out of memory");
    int ret = osfs_unlink(path);
    if (ret < 0 && ret != -ENOENT)
        return err_errno(err, -ret, "remove %s", path);
    return 0;
}

/* The members of a start failure record, each required and in range but
 * run, which a record written before it was kept may lack (0 then). */
static int
start_failure_parse(json_object *o, struct ctr_start_failure *out, struct err *err)
{
    static const char *const fields[] = {"exit_code", "error", "at_ms", "run", NULL};
    int64_t code = 0, at = 0, run = 0;
    const char *msg = NULL;
    int ret = jsonutil_check_fields(o, "", fields, err);
    if (ret >= 0)
        ret = jsonutil_get_int64(o, "", "exit_code", true, &code, err);
    if (ret >= 0)
        ret = jsonutil_get_string(o, "", "error", true, &msg, err);
    if (ret >= 0)
        ret = jsonutil_get_int64(o, "", "at_ms", true, &at, err);
    if (ret >= 0)
        ret = jsonutil_get_int64(o, "", "run", false, &run, err);
    if (ret < 0)
        return ret;
    if (code < 126 || code > 128)
        return err_set(err, EINVAL, "field \"exit_code\": %lld is not 126, 127 or 128",
                       (long long)code);
    if (!msg[0] || strlen(msg) >= sizeof(out->error))
        return err_set(err, EINVAL, "field \"error\": expected 1 to %zu characters",
                       sizeof(out->error) - 1);
    if (at <= 0)
        return err_set(err, EINVAL, "field \"at_ms\": %lld is not a time", (long long)at);
    /* Present, it is a number berthd wrote (a null is no number either). */
    if (json_object_object_get_ex(o, "run", NULL) && (run < 1 || run > CTR_MAIN_RUNS_MAX))
        return err_set(err, EINVAL, "field \"run\": expected 1 to %d", CTR_MAIN_RUNS_MAX);
    out->run = (unsigned)run;
    out->exit_code = (int)code;
    snprintf(out->error, sizeof(out->error), "%s", msg);
    out->at_ms = at;
    return 0;
}

int
ctr_start_failure_read(const char *dir, struct ctr_start_failure *out, struct err *err)
{
    /* Never through a symlink, never a FIFO or a device put there. */
    cleanup_close int dfd = rootdir_open(dir);
    if (dfd < 0)
        return err_errno(err, -dfd, "open %s", dir);
    cleanup_free char *text = NULL;
    size_t len = 0;
    int ret = fs_read_file_at(dfd, START_FAILURE_NAME, START_FAILURE_MAX, &text, &len, err);
    if (ret == -ENOENT)
        return ret;
    json_object *o = NULL;
    if (ret == 0)
        ret = jsonutil_parse_object(text, len, false, &o, err);
    if (ret == 0)
        ret = start_failure_parse(o, out, err);
    json_object_put(o);
    return ret < 0 ? err_wrap(err, "start failure record in %s", dir) : 0;
}
