/*
 * The blocking side of containers: the on-disk record (container.json,
 * an on-disk format in JSON as the store's and the runtime's are), the
 * create and delete steps (record, image use, overlay mount, runtime),
 * the reload at start-up, and user names looked up in a container's
 * /etc/passwd. Pool threads, or main before the loop runs.
 *
 * Order is what makes a crash harmless: the record is written (state
 * "creating") before any image use, mount or runtime state exists, and
 * rewritten as "deleting" before the undo starts; the mount is journaled
 * (store/mount_journal.h) by layers_mount before mount(2). At start-up a
 * record in either state is finished off with containers_delete_blocking,
 * whose every step is a no-op when already done, and then the journal is
 * replayed: a mount whose container is gone (its directory removed, its
 * record unreadable) is undone there.
 */
#include "daemon/containers.h"

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
/* limits.disk_bytes: what bounds the writable layer (store/scratch.h), beside it. */
#define SCRATCH_RECORD "scratch.disk"
/* A container directory on its way out (container_dir_remove). */
#define REMOVING_PREFIX ".removing-"
#define SCRATCH_IMAGE "scratch.img"

/* ---- the record ------------------------------------------------------------- */

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

static int
record_write(const struct ctr_params *p, const char *dir, const char *state, struct err *err)
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
    int ret = path ? fs_write_file_atomic(path, text, len, 0600, err)
                   : err_set(err, ENOMEM, "container record: out of memory");
    json_object_put(o);
    return ret;
}

/* Reads a record; *state gets its state string (caller frees). */
static int
record_read(const char *dir, struct ctr_params **out, char **state, struct err *err)
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

/* ---- create and delete ------------------------------------------------------ */

/* env over base, by name: a name in env replaces the base's entry. */
static char **
env_layer(char *const *base, char *const *env)
{
    char **out = calloc(1, sizeof(char *));
    size_t n = 0;
    for (size_t i = 0; out && base && base[i]; i++)
        if (strv_env_find(env, base[i]) < 0 && strv_push(&out, &n, base[i]) < 0) {
            strv_free(out);
            out = NULL;
        }
    for (size_t i = 0; out && env && env[i]; i++)
        if (strv_push(&out, &n, env[i]) < 0) {
            strv_free(out);
            out = NULL;
        }
    return out;
}

/*
 * The image config's run defaults, as Docker applies them: the
 * container's env over the image's Env, WorkingDir when the request
 * gave no working_dir, and Entrypoint, Cmd and User kept for its
 * processes.
 */
static int
apply_image_config(struct store *st, const struct meta_image *img, struct ctr_params *p,
                   struct err *err)
{
    cleanup_free char *buf = NULL;
    size_t len = 0;
    int ret = blob_read_small(st->blobs, img->config_digest, OCI_DOC_MAX, &buf, &len, err);
    if (ret < 0)
        return ret;
    struct oci_config *cfg = NULL;
    if ((ret = oci_config_parse(buf, len, img->config_digest, &cfg, err)) < 0)
        return ret;
    bool oom = false, oom2 = false, oom3 = false;
    char **env = env_layer(cfg->env, p->env);
    strv_free(p->image_entrypoint);
    strv_free(p->image_cmd);
    free(p->image_user);
    p->image_entrypoint = strv_dup(cfg->entrypoint, &oom);
    p->image_cmd = strv_dup(cfg->cmd, &oom2);
    p->image_user = cfg->user ? strdup(cfg->user) : NULL;
    if (!p->working_dir && cfg->working_dir && cfg->working_dir[0] == '/' &&
        !(p->working_dir = strdup(cfg->working_dir)))
        oom3 = true;
    oom3 |= cfg->user && !p->image_user;
    oci_config_free(cfg);
    if (!env || oom || oom2 || oom3) {
        strv_free(env);
        return err_set(err, ENOMEM, "image config: out of memory");
    }
    strv_free(p->env);
    p->env = env;
    return 0;
}

static int delete_steps(struct containers *reg, struct store *st, const struct ctr_params *p,
                        const char *dir, bool undo, char **trash, struct err *err);

static int
mount_rootfs(struct store *st, const struct ctr_params *p, const char *dir,
             const struct meta_image *img, struct mounted_layers **m, struct err *err)
{
    size_t n = img ? img->n_layers : 1;
    if (n == 0)
        return err_set(err, ERR_INVALID_CONTENT, "image %s: has no layers", p->image_digest);
    char **dirs = calloc(n, sizeof(char *));
    if (!dirs)
        return err_set(err, ENOMEM, "mount rootfs: out of memory");
    int ret = 0;
    for (size_t i = 0; i < n && ret == 0; i++) {
        dirs[i] = img ? snapshot_path(st->snaps, img->layers[i].chain_id) : strdup(p->rootfs_dir);
        if (!dirs[i])
            ret = err_set(err, ENOMEM, "mount rootfs: out of memory");
    }
    struct layer_list *list = NULL;
    cleanup_free char *scratch = fs_path_join(dir, "scratch");
    cleanup_free char *target = fs_path_join(dir, "rootfs");
    cleanup_free char *srec = fs_path_join(dir, SCRATCH_RECORD);
    cleanup_free char *simg = fs_path_join(dir, SCRATCH_IMAGE);
    if (ret == 0 && (!scratch || !target || !srec || !simg))
        ret = err_set(err, ENOMEM, "mount rootfs: out of memory");
    if (ret == 0)
        ret = layer_list_parse_linux((const char *const *)dirs, n, &list, err);
    /* The writable layer, bounded by limits.disk_bytes when there is one. */
    enum scratch_kind kind = SCRATCH_PLAIN;
    if (ret == 0)
        ret = scratch_make(scratch, p->limits.disk_bytes, srec, simg, &kind, err);
    if (ret == 0 && kind != SCRATCH_PLAIN)
        log_info("container %s: writable layer of %llu bytes (%s)", p->handle,
                 (unsigned long long)p->limits.disk_bytes,
                 kind == SCRATCH_QUOTA ? "project quota" : "loop-mounted ext4 image");
    char entry[MJ_NAME_MAX + 1], owner[MJ_WORD_MAX + 1];
    snprintf(entry, sizeof(entry), "container.%s.rootfs", p->handle);
    snprintf(owner, sizeof(owner), MJ_OWNER_CONTAINER "%s", p->handle);
    struct layer_mount_rec rec = {.journal = st ? st->mounts : NULL, .name = entry, .owner = owner};
    if (ret == 0)
        ret = layers_mount(list, scratch, target, &rec, m, err);
    layer_list_free(list);
    for (size_t i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
    return ret;
}

int
containers_prepare_blocking(struct containers *reg, struct store *st, struct ctr_params *p,
                            const char *dir, char **rootfs, struct err *err)
{
    if (!reg->drv) {
        err_copy(err, &reg->drv_err);
        return -err->code;
    }
    struct meta_image *img = NULL;
    struct mounted_layers *m = NULL;
    struct err ignored = {0};
    int ret = 0;
    uint64_t t_start = uv_hrtime();
    if (p->image_ref) {
        if (!st)
            return err_set(err, ERR_UNAVAILABLE, "create container %s: the store is not available",
                           p->handle);
        ret = image_ref_lookup(st->meta, p->image_ref, &img, err);
        if (ret < 0)
            return ret;
        free(p->image_digest);
        free(p->image_config);
        p->image_digest = strdup(img->digest);
        p->image_config = strdup(img->config_digest);
        if (!p->image_digest || !p->image_config) {
            meta_image_free(img);
            return err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
        }
        if ((ret = apply_image_config(st, img, p, err)) < 0) {
            meta_image_free(img);
            return err_wrap(err, "create container %s", p->handle);
        }
    }
    /* A main process needs a command, from the request or the image. */
    if (p->main) {
        struct process_spec spec;
        container_main_spec(p->main, &spec);
        char **argv = process_command(p, &spec, err);
        strv_free(argv);
        if (!argv) {
            meta_image_free(img);
            return err_set(err, EINVAL, "create container %s: no command specified", p->handle);
        }
    }
    /* A directory left by an earlier container of this handle that its
     * delete could not remove goes first. */
    fs_remove_tree(dir, &ignored);
    ret = fs_mkdir_p(dir, 0700, err);
    if (ret == 0)
        ret = record_write(p, dir, "creating", err);
    if (ret == 0 && img) {
        ret = meta_image_use_add(st->meta, img->digest, p->handle, err);
        if (ret == -ENOENT)
            err_set(err, ENOENT, "image %s: not found (deleted meanwhile)", p->image_ref);
    }
    for (size_t i = 0; ret == 0 && p->mount_volumes && i < p->nmounts; i++) {
        if (!p->mount_volumes[i])
            continue;
        char *path = NULL;
        ret = volume_mount_add(st->volumes, p->mount_volumes[i], p->handle, p->mounts[i].readonly,
                               &path, err);
        if (ret == 0) {
            free((char *)p->mounts[i].source);
            p->mounts[i].source = path;
        }
    }
    uint64_t t_meta = uv_hrtime();
    if (ret == 0 && p->rootfs_dir && reg->drv->rootfs_normalise) {
        /* The driver takes a raw rootfs as it is (hcs: its layer folder). */
        if (!(*rootfs = strdup(p->rootfs_dir)))
            ret = err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
    } else if (ret == 0) {
        ret = mount_rootfs(st, p, dir, img, &m, err);
    }
    /* No rootfs path (Windows layers: the driver is given the layers
     * instead) is the runtime's to judge, not a failure here. */
    const char *mounted = ret == 0 && m ? mounted_layers_rootfs(m) : NULL;
    if (mounted && !(*rootfs = strdup(mounted)))
        ret = err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
    log_debug("create %s: record and image %.1f ms, mount %.1f ms", p->handle,
              (t_meta - t_start) / 1e6, (uv_hrtime() - t_meta) / 1e6);
    mounted_layers_free(m);
    meta_image_free(img);
    if (ret < 0) {
        struct err uerr = {0};
        if (delete_steps(reg, st, p, dir, true, NULL, &uerr) < 0)
            log_warn("undo the failed create of %s: %s", p->handle, uerr.msg);
        return err_wrap(err, "create container %s", p->handle);
    }
    return 0;
}

size_t
ctr_mounts_merge(const struct rt_mount *own, size_t nown, const struct rt_mount *net, size_t nnet,
                 struct rt_mount *out)
{
    size_t n = 0;
    for (size_t i = 0; i < nown; i++)
        out[n++] = own[i];
    for (size_t j = 0; j < nnet; j++) {
        bool replaced = false;
        for (size_t i = 0; i < nown && !replaced; i++)
            replaced =
                strcmp(own[i].target, net[j].target) == 0 || strcmp(own[i].target, "/etc") == 0;
        if (!replaced)
            out[n++] = net[j];
    }
    return n;
}

int
containers_start_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                          const char *dir, const char *rootfs, const struct ctr_net_spec *net,
                          struct err *err)
{
    uint64_t t_start = uv_hrtime();
    size_t nnet = net ? net->nmounts : 0;
    cleanup_free struct rt_mount *mounts = calloc(p->nmounts + nnet + 1, sizeof(*mounts));
    int ret = mounts ? 0 : err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
    if (ret == 0) {
        size_t nmounts =
            ctr_mounts_merge(p->mounts, p->nmounts, net ? net->mounts : NULL, nnet, mounts);
        struct rt_container_spec spec = {
            .handle = p->handle,
            .dir = dir,
            .rootfs = rootfs,
            .env = p->env,
            .cwd = p->working_dir,
            .limits = p->limits,
            .mounts = mounts,
            .nmounts = nmounts,
            .netns_path = net ? net->netns_path : NULL,
            .readonly_rootfs = p->readonly_rootfs,
            .hostname = p->hostname,
            .isolation = p->isolation[0] ? p->isolation : NULL,
        };
        ret = reg->drv->container_create(reg->drv_ctx, &spec, err);
    }
    uint64_t t_rt = uv_hrtime();
    if (ret == 0)
        ret = record_write(p, dir, "running", err);
    log_debug("create %s: runtime %.1f ms, record %.1f ms", p->handle, (t_rt - t_start) / 1e6,
              (uv_hrtime() - t_rt) / 1e6);
    if (ret < 0) {
        struct err uerr = {0};
        if (delete_steps(reg, st, p, dir, true, NULL, &uerr) < 0)
            log_warn("undo the failed create of %s: %s", p->handle, uerr.msg);
        return err_wrap(err, "create container %s", p->handle);
    }
    return 0;
}

int
containers_undo_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                         const char *dir, struct err *err)
{
    return delete_steps(reg, st, p, dir, true, NULL, err);
}

/*
 * Removes a container's directory by first renaming it out of the way
 * (to ".removing-<name>.<n>" beside it, n unique in this daemon's life):
 * a status read racing the delete then finds no process directory,
 * instead of finding one half-removed and settling it as never started
 * (which wrote its exit record back into the tree being removed:
 * "Directory not empty"). With trash set, the renamed tree is not
 * removed but handed back (*trash, caller frees), for a job that removes
 * it after the delete was answered: once renamed, the tree is no
 * container's any more, and a new container of the same name makes a
 * directory of its own. A crash between the rename and the removal
 * leaves the renamed tree for the next start-up.
 */
static int
container_dir_remove(const char *dir, char **trash_out, struct err *err)
{
    static atomic_uint serial;
    const char *slash = strrchr(dir, '/');
    if (!slash || !slash[1])
        return fs_remove_tree(dir, err);
    cleanup_free char *trash = NULL;
    if (asprintf(&trash, "%.*s/" REMOVING_PREFIX "%s.%u", (int)(slash - dir), dir, slash + 1,
                 atomic_fetch_add(&serial, 1)) < 0)
        return err_set(err, ENOMEM, "out of memory");
    int r = osfs_rename(dir, trash);
    if (r < 0)
        return r == -ENOENT ? 0 : fs_remove_tree(dir, err);
    if (trash_out) {
        *trash_out = steal_ptr(&trash);
        return 0;
    }
    return fs_remove_tree(trash, err);
}

/*
 * undo: the runtime's create failed (and cleaned up after itself), so a
 * runtime that cannot even be run does not stop the rest of the undo.
 */
static int
delete_steps(struct containers *reg, struct store *st, const struct ctr_params *p, const char *dir,
             bool undo, char **trash, struct err *err)
{
    struct os_stat sb;
    bool have_dir = osfs_stat(dir, &sb) == 0;
    int ret = 0;
    if (have_dir)
        ret = record_write(p, dir, "deleting", err);
    if (ret == 0 && reg->drv) {
        ret = reg->drv->container_delete(reg->drv_ctx, p->handle, dir, err);
        if (ret == -ERR_UNAVAILABLE && undo)
            ret = 0;
    }
    if (ret == 0 && st) {
        char owner[MJ_WORD_MAX + 1];
        snprintf(owner, sizeof(owner), MJ_OWNER_CONTAINER "%s", p->handle);
        ret = layers_unmount_owner(st->mounts, owner, err);
    }
    if (ret == 0 && have_dir) {
        /* A container made by berth before the mount journal. */
        cleanup_free char *rec = fs_path_join(dir, "scratch/" LAYERS_RECORD_NAME);
        struct mounted_layers *m = NULL;
        int lr = mounted_layers_load(rec, &m, err);
        if (lr == 0) {
            ret = mounted_layers_unmount(m, err);
            mounted_layers_free(m);
        } else if (lr != -ENOENT) {
            ret = lr;
        }
    }
    if (ret == 0 && have_dir) {
        /* After the overlay, whose upper it holds. */
        cleanup_free char *srec = fs_path_join(dir, SCRATCH_RECORD);
        ret = srec ? scratch_release(srec, err) : err_set(err, ENOMEM, "out of memory");
    }
    for (size_t i = 0; ret == 0 && st && p->mount_volumes && i < p->nmounts; i++) {
        if (!p->mount_volumes[i])
            continue;
        struct err verr = {0};
        int vr = volume_mount_remove(st->volumes, p->mount_volumes[i], p->handle, &verr);
        if (vr < 0 && vr != -ENOENT) {
            err_copy(err, &verr);
            ret = vr;
        }
    }
    if (ret == 0 && p->image_digest && st) {
        struct err uerr = {0};
        int ur = meta_image_use_remove(st->meta, p->image_digest, p->handle, &uerr);
        if (ur < 0 && ur != -ENOENT) {
            err_copy(err, &uerr);
            ret = ur;
        }
    }
    if (ret == 0 && have_dir)
        ret = container_dir_remove(dir, trash, err);
    return ret < 0 ? err_wrap(err, "delete container %s", p->handle) : 0;
}

int
containers_delete_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                           const char *dir, char **trash, struct err *err)
{
    if (trash)
        *trash = NULL;
    return delete_steps(reg, st, p, dir, false, trash, err);
}

int
containers_trash_remove_blocking(const char *trash, struct err *err)
{
    return fs_remove_tree(trash, err);
}

/* ---- start-up --------------------------------------------------------------- */

struct proc_found {
    char *id;
    struct rt_proc_status st;
    struct rt_proc_times t;
};

static int
by_start(const void *a, const void *b)
{
    const struct proc_found *x = a, *y = b;
    if (x->t.started_ms != y->t.started_ms)
        return x->t.started_ms < y->t.started_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Brings back the processes of a reloaded container from the driver's
 * records, oldest first. */
static void
load_procs(struct containers *reg, struct container *c)
{
    const struct rt_driver *drv = reg->drv;
    char **ids = NULL;
    struct err err = {0};
    if (drv->proc_list(reg->drv_ctx, c->p->handle, c->dir, &ids, &err) < 0) {
        log_warn("container %s: %s", c->p->handle, err.msg);
        return;
    }
    size_t n = strv_len(ids), k = 0;
    struct proc_found *found = calloc(n ? n : 1, sizeof(*found));
    for (size_t i = 0; found && i < n; i++) {
        struct proc_found *f = &found[k];
        if (drv->proc_status(reg->drv_ctx, c->p->handle, c->dir, ids[i], &f->st, &err) < 0)
            continue;
        if (drv->proc_times(reg->drv_ctx, c->p->handle, c->dir, ids[i], &f->t, &err) < 0)
            memset(&f->t, 0, sizeof(f->t));
        f->id = ids[i];
        k++;
    }
    if (found)
        qsort(found, k, sizeof(*found), by_start);
    for (size_t i = 0; found && i < k; i++) {
        struct proc_found *f = &found[i];
        bool lost = !f->st.exited && c->state != CTR_RUNNING;
        if (lost)
            f->st.exited = true; /* its container is gone: the process went with it */
        struct ctr_proc *pr = container_proc_add(c, f->id, f->t.has_stdin, &f->st, f->t.started_ms);
        if (pr && lost) {
            pr->lost = true;
            pr->finished_at = 0;
            snprintf(pr->error, sizeof(pr->error),
                     "the container stopped; no exit status recorded");
        } else if (pr && f->st.exited) {
            pr->finished_at = f->t.finished_ms;
        }
    }
    free(found);
    strv_free(ids);
}

/* Removes runtime containers that no record claims. */
static void
remove_orphans(struct containers *reg)
{
    char **handles = NULL;
    struct err err = {0};
    if (reg->drv->container_list(reg->drv_ctx, &handles, &err) < 0) {
        log_warn("containers: %s", err.msg);
        return;
    }
    for (size_t i = 0; handles[i]; i++) {
        if (containers_find(reg, handles[i]))
            continue;
        cleanup_free char *dir = fs_path_join(reg->root, handles[i]);
        log_info("container %s: runtime state without a record; removing it", handles[i]);
        if (reg->drv->container_delete(reg->drv_ctx, handles[i], dir, &err) < 0)
            log_warn("%s", err.msg);
    }
    strv_free(handles);
}

/* A journaled mount stays while its container is loaded (it outlived the daemon). */
static bool
mount_keep(void *arg, const struct mj_entry *e)
{
    struct containers *reg = arg;
    const char *handle = mj_owner_container(e->owner);
    return handle && containers_find(reg, handle);
}

static int
mount_undo(void *arg, const struct mj_entry *e, struct err *err)
{
    (void)arg;
    return layers_undo_entry(e, err);
}

/* Undoes the mounts that a crash left and no loaded container uses. */
static void
replay_mounts(struct containers *reg, struct store *st)
{
    struct mj_replay_stats rs = {0};
    struct err err = {0};
    if (mjournal_replay(st->mounts, mount_keep, mount_undo, reg, &rs, &err) < 0) {
        log_error("containers: %s", err.msg);
        return;
    }
    if (rs.undone || rs.failed || rs.damaged)
        log_info("containers: mount journal: %u kept, %u undone, %u failed, %u damaged", rs.kept,
                 rs.undone, rs.failed, rs.damaged);
}

int
containers_open(struct daemon *d, struct containers **out, struct err *err)
{
    struct containers *reg = calloc(1, sizeof(*reg));
    if (!reg || !(reg->root = fs_path_join(d->cfg->root, "containers"))) {
        free(reg);
        return err_set(err, ENOMEM, "containers: out of memory");
    }
    reg->d = d;
    *out = reg;
    cleanup_free char *state_root = fs_path_join(d->cfg->root, "runtime");
    reg->drv = rt_driver_lookup(d->cfg->runtime, &reg->drv_err);
    if (reg->drv) {
        /* One cgroup parent per store root, so two daemons on one host
         * (CI runs several) never share a container's cgroup by handle. */
        char digest[DIGEST_STR_LEN];
        char cgroup_parent[32] = "berth";
        if (digest_of(d->cfg->root, strlen(d->cfg->root), digest) == 0)
            snprintf(cgroup_parent, sizeof(cgroup_parent), "berth-%.12s", digest_hex(digest));
        struct rt_config rc = {.state_root = state_root,
                               .oci_runtime = d->cfg->oci_runtime,
                               .cgroup_parent = cgroup_parent,
                               .max_output_bytes = (uint64_t)d->cfg->max_output_bytes,
                               .isolation = d->cfg->isolation,
                               .hyperv_cpus = d->cfg->hyperv_cpus,
                               .hyperv_memory_mb = d->cfg->hyperv_memory_mb};
        if (reg->drv->open(&rc, &reg->drv_ctx, &reg->drv_err) < 0)
            reg->drv = NULL;
    }
    if (!reg->drv) {
        log_warn("containers: %s", reg->drv_err.msg);
        return 0;
    }
    int ret = ctr_stops_open(reg, err);
    if (ret < 0)
        return ret;
    if (!d->store)
        return 0; /* the API answers 503 anyway; the records wait for a usable store */
    ret = fs_mkdir_p(reg->root, 0700, err);
    if (ret < 0)
        return ret;
    struct osfs_dir *dp = NULL;
    if ((ret = osfs_dir_open(reg->root, &dp)) < 0)
        return err_errno(err, -ret, "open %s", reg->root);
    const char *name;
    while ((name = osfs_dir_next(dp, NULL)) != NULL) {
        if (strncmp(name, REMOVING_PREFIX, strlen(REMOVING_PREFIX)) == 0) {
            /* A delete's last step, cut short by a crash. */
            cleanup_free char *trash = fs_path_join(reg->root, name);
            struct err terr = {0};
            if (trash && fs_remove_tree(trash, &terr) < 0)
                log_warn("containers: %s", terr.msg);
            continue;
        }
        if (name[0] == '.')
            continue;
        cleanup_free char *dir = fs_path_join(reg->root, name);
        struct ctr_params *p = NULL;
        cleanup_free char *state = NULL;
        struct err rerr = {0};
        if (record_read(dir, &p, &state, &rerr) < 0 || strcmp(p->handle, name) != 0) {
            /* No usable record: nothing to report, only to clean up. */
            log_warn("containers: %s: no usable record (%s); cleaning up", name, rerr.msg);
            struct ctr_params bare = {0};
            snprintf(bare.handle, sizeof(bare.handle), "%s", name);
            if (!rt_handle_valid(bare.handle))
                snprintf(bare.handle, sizeof(bare.handle), "invalid");
            if (containers_delete_blocking(reg, d->store, p ? p : &bare, dir, NULL, &rerr) < 0)
                log_warn("%s", rerr.msg);
            ctr_params_free(p);
            continue;
        }
        if (!state || strcmp(state, "running") != 0) {
            log_info("container %s: interrupted while %s; undoing it", p->handle,
                     state ? state : "?");
            if (containers_delete_blocking(reg, d->store, p, dir, NULL, &rerr) < 0)
                log_warn("%s", rerr.msg);
            ctr_params_free(p);
            continue;
        }
        struct container *c = NULL;
        if (containers_add(reg, p, &c, &rerr) < 0) {
            ctr_params_free(p);
            continue;
        }
        struct rt_container_state cs = {0};
        if (reg->drv->container_state(reg->drv_ctx, p->handle, &cs, &rerr) == 0 &&
            cs.status == RT_CONTAINER_RUNNING) {
            c->state = CTR_RUNNING;
            container_watch_init(c, container_init_pidfd(reg, p->handle));
        } else {
            c->state = CTR_STOPPED;
        }
        load_procs(reg, c);
        ctr_main_reload(c);
        log_info("container %s: %s, %u processes running", p->handle, ctr_state_name(c->state),
                 container_procs_running(c));
    }
    osfs_dir_close(dp);
    remove_orphans(reg);
    replay_mounts(reg, d->store);
    return 0;
}
