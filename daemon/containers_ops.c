/*
 * The blocking side of containers: the on-disk record (container.json,
 * an on-disk format in JSON as the store's and the runtime's are), the
 * create and delete steps (record, image use, overlay mount, runtime),
 * the reload at start-up, and user names looked up in a container's
 * /etc/passwd. Pool threads, or main before the loop runs.
 *
 * Order is what makes a crash harmless: the record is written (state
 * "creating") before any image use, mount or runtime state exists, and
 * rewritten as "deleting" before the undo starts; the mount record is
 * written by layers_mount before mount(2). At start-up a record in
 * either state is finished off with containers_delete_blocking, whose
 * every step is a no-op when already done.
 */
#include "daemon/containers.h"

#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/digest.h"
#include "daemon/daemon.h"
#include "store/layer.h"
#include "store/scratch.h"
#include "store/store.h"

#define RECORD_NAME "container.json"
#define RECORD_MAX (1 << 20)
/* limits.disk_bytes: what bounds the writable layer (store/scratch.h), beside it. */
#define SCRATCH_RECORD "scratch.disk"
#define SCRATCH_IMAGE "scratch.img"

/* ---- the record ------------------------------------------------------------- */

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
    json_object *env = json_object_new_array();
    for (size_t i = 0; p->env && p->env[i]; i++)
        json_object_array_add(env, json_object_new_string(p->env[i]));
    json_object_object_add(o, "env", env);
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
        json_object_array_add(mounts, m);
    }
    json_object_object_add(o, "mounts", mounts);
    json_object *props = json_object_new_object();
    for (size_t i = 0; i < p->nprops; i++)
        json_object_object_add(props, p->prop_keys[i], json_object_new_string(p->prop_values[i]));
    json_object_object_add(o, "properties", props);
    json_object_object_add(o, "grace_time_s", json_object_new_int64(p->grace_time_s));
    json_object_object_add(o, "created_at", json_object_new_int64(p->created_at));
    size_t len = 0;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    cleanup_free char *path = fs_path_join(dir, RECORD_NAME);
    int ret = path ? fs_write_file_atomic(path, text, len, 0600, err)
                   : err_set(err, ENOMEM, "container record: out of memory");
    json_object_put(o);
    return ret;
}

static char *
jstr(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return strdup(json_object_get_string(v));
}

static int64_t
jint(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return 0;
    return json_object_get_int64(v);
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
    json_object *o = json_tokener_parse(text);
    if (!o || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return err_set(err, EIO, "container record %s: not a JSON object", path);
    }
    struct ctr_params *p = calloc(1, sizeof(*p));
    cleanup_free char *handle = jstr(o, "handle");
    if (!p || !handle || !rt_handle_valid(handle)) {
        free(p);
        json_object_put(o);
        return err_set(err, EIO, "container record %s: no valid handle", path);
    }
    snprintf(p->handle, sizeof(p->handle), "%s", handle);
    *state = jstr(o, "state");
    p->image_ref = jstr(o, "image");
    p->image_digest = jstr(o, "image_digest");
    p->rootfs_dir = jstr(o, "rootfs_dir");
    p->working_dir = jstr(o, "working_dir");
    json_object *l, *a, *v;
    if (json_object_object_get_ex(o, "limits", &l)) {
        p->limits.memory_bytes = (uint64_t)jint(l, "memory_bytes");
        p->limits.cpu_shares = (uint64_t)jint(l, "cpu_shares");
        p->limits.cpu_quota_pct = (uint32_t)jint(l, "cpu_quota_pct");
        p->limits.pids = jint(l, "pids");
        p->limits.disk_bytes = (uint64_t)jint(l, "disk_bytes");
    }
    if (json_object_object_get_ex(o, "env", &a) && json_object_is_type(a, json_type_array)) {
        size_t n = json_object_array_length(a);
        p->env = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; p->env && i < n; i++)
            p->env[i] = strdup(json_object_get_string(json_object_array_get_idx(a, i)));
    }
    if (json_object_object_get_ex(o, "mounts", &a) && json_object_is_type(a, json_type_array)) {
        size_t n = json_object_array_length(a);
        p->mounts = calloc(n ? n : 1, sizeof(*p->mounts));
        p->mount_volumes = calloc(n ? n : 1, sizeof(char *));
        for (size_t i = 0; p->mounts && p->mount_volumes && i < n; i++) {
            json_object *m = json_object_array_get_idx(a, i);
            p->mounts[i].source = jstr(m, "source");
            p->mount_volumes[i] = jstr(m, "volume");
            p->mounts[i].target = jstr(m, "target");
            p->mounts[i].readonly =
                json_object_object_get_ex(m, "readonly", &v) && json_object_get_boolean(v);
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
    p->grace_time_s = jint(o, "grace_time_s");
    p->created_at = jint(o, "created_at");
    json_object_put(o);
    *out = p;
    return 0;
}

/* ---- create and delete ------------------------------------------------------ */

static int delete_steps(struct containers *reg, struct store *st, const struct ctr_params *p,
                        const char *dir, bool undo, struct err *err);

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
    if (ret == 0)
        ret = layers_mount(list, scratch, target, m, err);
    layer_list_free(list);
    for (size_t i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
    return ret;
}

int
containers_create_blocking(struct containers *reg, struct store *st, struct ctr_params *p,
                           const char *dir, struct err *err)
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
        ret = meta_image_get(st->meta, p->image_ref, &img, err);
        if (ret == -ENOENT)
            return err_set(err, ENOENT, "image %s: not found", p->image_ref);
        if (ret < 0)
            return ret;
        free(p->image_digest);
        p->image_digest = strdup(img->digest);
        if (!p->image_digest) {
            meta_image_free(img);
            return err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
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
        if (ret == 0)
            meta_image_touch(st->meta, img->digest, 0, &ignored);
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
    if (ret == 0)
        ret = mount_rootfs(st, p, dir, img, &m, err);
    uint64_t t_mount = uv_hrtime();
    if (ret == 0) {
        struct rt_container_spec spec = {
            .handle = p->handle,
            .dir = dir,
            .rootfs = mounted_layers_rootfs(m),
            .env = p->env,
            .cwd = p->working_dir,
            .limits = p->limits,
            .mounts = p->mounts,
            .nmounts = p->nmounts,
        };
        ret = reg->drv->container_create(reg->drv_ctx, &spec, err);
    }
    uint64_t t_rt = uv_hrtime();
    if (ret == 0)
        ret = record_write(p, dir, "running", err);
    log_debug("create %s: record and image %.1f ms, mount %.1f ms, runtime %.1f ms, record %.1f ms",
              p->handle, (t_meta - t_start) / 1e6, (t_mount - t_meta) / 1e6, (t_rt - t_mount) / 1e6,
              (uv_hrtime() - t_rt) / 1e6);
    mounted_layers_free(m);
    meta_image_free(img);
    if (ret < 0) {
        struct err uerr = {0};
        if (delete_steps(reg, st, p, dir, true, &uerr) < 0)
            log_warn("undo the failed create of %s: %s", p->handle, uerr.msg);
        return err_wrap(err, "create container %s", p->handle);
    }
    return 0;
}

/*
 * undo: the runtime's create failed (and cleaned up after itself), so a
 * runtime that cannot even be run does not stop the rest of the undo.
 */
static int
delete_steps(struct containers *reg, struct store *st, const struct ctr_params *p, const char *dir,
             bool undo, struct err *err)
{
    struct stat sb;
    bool have_dir = stat(dir, &sb) == 0;
    int ret = 0;
    if (have_dir)
        ret = record_write(p, dir, "deleting", err);
    if (ret == 0 && reg->drv) {
        ret = reg->drv->container_delete(reg->drv_ctx, p->handle, dir, err);
        if (ret == -ERR_UNAVAILABLE && undo)
            ret = 0;
    }
    if (ret == 0 && have_dir) {
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
        ret = fs_remove_tree(dir, err);
    return ret < 0 ? err_wrap(err, "delete container %s", p->handle) : 0;
}

int
containers_delete_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                           const char *dir, struct err *err)
{
    return delete_steps(reg, st, p, dir, false, err);
}

/* ---- users ------------------------------------------------------------------ */

static int
parse_u32(const char *s, size_t len, uint32_t *out)
{
    if (len == 0 || len > 10)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > UINT32_MAX - 1)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int
containers_resolve_user(const char *dir, const char *user, uint32_t *uid, uint32_t *gid,
                        struct err *err)
{
    const char *colon = strchr(user, ':');
    size_t ulen = colon ? (size_t)(colon - user) : strlen(user);
    if (parse_u32(user, ulen, uid) == 0) {
        *gid = 0;
        if (colon && parse_u32(colon + 1, strlen(colon + 1), gid) < 0)
            return err_set(err, EINVAL, "field \"user\": %s: expected uid[:gid] or a name", user);
        return 0;
    }
    if (colon)
        return err_set(err, EINVAL, "field \"user\": %s: expected uid[:gid] or a name", user);
    /* The image's /etc/passwd, resolved inside the rootfs so that its
     * symlinks never lead to the host's files. */
    cleanup_free char *root = fs_path_join(dir, "rootfs");
    cleanup_close int rfd = root ? open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (rfd < 0)
        return err_errno(err, errno, "user %s: open the container's rootfs", user);
    /* O_NONBLOCK: the container can replace its /etc/passwd with a FIFO,
     * which must not block this job; only a regular file is read. */
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    cleanup_close int fd = (int)syscall(SYS_openat2, rfd, "etc/passwd", &how, sizeof(how));
    if (fd < 0)
        return err_set(err, ERR_INVALID_CONTENT, "user %s: the image has no /etc/passwd", user);
    struct stat pst;
    if (fstat(fd, &pst) < 0 || !S_ISREG(pst.st_mode))
        return err_set(err, ERR_INVALID_CONTENT, "user %s: /etc/passwd is not a regular file",
                       user);
    cleanup_fclose FILE *f = fdopen(fd, "r");
    if (!f)
        return err_errno(err, errno, "user %s: read /etc/passwd", user);
    fd = -1;
    char line[1024];
    size_t lines = 0;
    while (fgets(line, sizeof(line), f) && lines++ < 100000) {
        char *save = NULL;
        char *name = strtok_r(line, ":", &save);
        strtok_r(NULL, ":", &save);
        char *u = strtok_r(NULL, ":", &save);
        char *g = strtok_r(NULL, ":", &save);
        if (!name || !u || !g || strcmp(name, user) != 0)
            continue;
        if (parse_u32(u, strlen(u), uid) == 0 && parse_u32(g, strlen(g), gid) == 0)
            return 0;
    }
    return err_set(err, ERR_INVALID_CONTENT, "user %s: not in the image's /etc/passwd", user);
}

/* ---- start-up --------------------------------------------------------------- */

static int64_t
mtime_ms(int dfd, const char *name)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    return (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
}

/* Brings back the processes of a reloaded container from its state directory. */
static void
load_procs(struct containers *reg, struct container *c)
{
    cleanup_free char *procs = NULL;
    if (asprintf(&procs, "%s/state/procs", c->dir) < 0)
        return;
    DIR *dp = opendir(procs);
    if (!dp)
        return;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (!rt_id_valid(de->d_name))
            continue;
        struct rt_proc_status st;
        struct err err = {0};
        if (reg->drv->proc_status(reg->drv_ctx, c->p->handle, c->dir, de->d_name, &st, &err) < 0)
            continue;
        int pfd = openat(dirfd(dp), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int64_t started = 0, finished = 0;
        bool has_stdin = false;
        if (pfd >= 0) {
            started = mtime_ms(pfd, "spec");
            finished = mtime_ms(pfd, "exit");
            has_stdin = faccessat(pfd, "stdin", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
            close(pfd);
        }
        if (!st.exited && c->state != CTR_RUNNING) {
            /* Its container is gone: the process went with it. */
            st.exited = true;
            struct ctr_proc *pr = container_proc_add(c, de->d_name, has_stdin, &st, started);
            if (pr) {
                pr->lost = true;
                pr->finished_at = 0;
                snprintf(pr->error, sizeof(pr->error),
                         "the container stopped; no exit status recorded");
            }
            continue;
        }
        struct ctr_proc *pr = container_proc_add(c, de->d_name, has_stdin, &st, started);
        if (pr && st.exited)
            pr->finished_at = finished;
    }
    closedir(dp);
}

/* Removes runtime containers that no record claims (runc's state dirs). */
static void
remove_orphans(struct containers *reg, const char *runc_root)
{
    DIR *dp = opendir(runc_root);
    if (!dp)
        return;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (!rt_handle_valid(de->d_name) || containers_find(reg, de->d_name))
            continue;
        cleanup_free char *dir = fs_path_join(reg->root, de->d_name);
        struct err err = {0};
        log_info("container %s: runtime state without a record; removing it", de->d_name);
        if (reg->drv->container_delete(reg->drv_ctx, de->d_name, dir, &err) < 0)
            log_warn("%s", err.msg);
    }
    closedir(dp);
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
                               .max_output_bytes = (uint64_t)d->cfg->max_output_bytes};
        if (reg->drv->open(&rc, &reg->drv_ctx, &reg->drv_err) < 0)
            reg->drv = NULL;
    }
    if (!reg->drv) {
        log_warn("containers: %s", reg->drv_err.msg);
        return 0;
    }
    if (!d->store)
        return 0; /* the API answers 503 anyway; the records wait for a usable store */
    int ret = fs_mkdir_p(reg->root, 0700, err);
    if (ret < 0)
        return ret;
    DIR *dp = opendir(reg->root);
    if (!dp)
        return err_errno(err, errno, "open %s", reg->root);
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        cleanup_free char *dir = fs_path_join(reg->root, de->d_name);
        struct ctr_params *p = NULL;
        cleanup_free char *state = NULL;
        struct err rerr = {0};
        if (record_read(dir, &p, &state, &rerr) < 0 || strcmp(p->handle, de->d_name) != 0) {
            /* No usable record: nothing to report, only to clean up. */
            log_warn("containers: %s: no usable record (%s); cleaning up", de->d_name, rerr.msg);
            struct ctr_params bare = {0};
            snprintf(bare.handle, sizeof(bare.handle), "%s", de->d_name);
            if (!rt_handle_valid(bare.handle))
                snprintf(bare.handle, sizeof(bare.handle), "invalid");
            if (containers_delete_blocking(reg, d->store, p ? p : &bare, dir, &rerr) < 0)
                log_warn("%s", rerr.msg);
            ctr_params_free(p);
            continue;
        }
        if (!state || strcmp(state, "running") != 0) {
            log_info("container %s: interrupted while %s; undoing it", p->handle,
                     state ? state : "?");
            if (containers_delete_blocking(reg, d->store, p, dir, &rerr) < 0)
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
        log_info("container %s: %s, %u processes running", p->handle, ctr_state_name(c->state),
                 container_procs_running(c));
    }
    closedir(dp);
    cleanup_free char *runc_root = fs_path_join(state_root, "runc");
    if (runc_root)
        remove_orphans(reg, runc_root);
    return 0;
}
