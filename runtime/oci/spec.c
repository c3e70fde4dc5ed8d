/*
 * OCI runtime config.json for a berth container. The shape follows
 * `runc spec` (the standard /proc, /dev, /sys mounts, a deny-all device
 * rule before runc's default devices) with our init as process.args, and
 * namespaces, capabilities, masked and read-only paths and seccomp from
 * defaults.c. The init's state directory is no mount: the driver hands it
 * to the init as an open fd (see driver.c). Any thread; no I/O except
 * rt_oci_spec_write.
 *
 * The network namespace is the one the spec names (made and set up by the
 * daemon's network service before the runtime runs), or a new one.
 */
#include "runtime/oci/spec.h"

#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/path.h"
#include "runtime/oci/defaults.h"

static struct json_object *
str_array(const char *const *list)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; list && list[i]; i++)
        json_object_array_add(a, json_object_new_string(list[i]));
    return a;
}

static void
add_mount(struct json_object *mounts, const char *dest, const char *type, const char *source,
          const char *const *options)
{
    struct json_object *m = json_object_new_object();
    json_object_object_add(m, "destination", json_object_new_string(dest));
    json_object_object_add(m, "type", json_object_new_string(type));
    json_object_object_add(m, "source", json_object_new_string(source));
    json_object_object_add(m, "options", str_array(options));
    json_object_array_add(mounts, m);
}

/* Absolute, and no ".." component that could climb out of the rootfs. */
static bool
path_ok(const char *p)
{
    if (!p || p[0] != '/')
        return false;
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2) {
        bool start = s == p || s[-1] == '/';
        bool end = s[2] == '\0' || s[2] == '/';
        if (start && end)
            return false;
    }
    return true;
}

const char *
rt_oci_target_reserved(const char *t)
{
    if (strcmp(t, RT_OCI_INIT_TARGET) == 0 || path_is_within(t, RT_OCI_STATE_TARGET))
        return "reserved for berth";
    /* The runtime mounts its own filesystems there and writes into /dev. */
    if (strcmp(t, "/proc") == 0 || strcmp(t, "/dev") == 0 || strcmp(t, "/sys") == 0)
        return "reserved for the runtime's own mount";
    /* Below them nothing can be made (sysfs is read-only, runc refuses
     * /proc), so the create would fail in the runtime (500); /dev is a
     * tmpfs of the runtime's, where a target can be made. */
    if (path_is_within(t, "/proc") || path_is_within(t, "/sys") || path_is_within(t, "/dev/pts") ||
        path_is_within(t, "/dev/mqueue"))
        return "inside a filesystem the runtime mounts";
    return NULL;
}

/*
 * No mount target inside another's. The runtime mounts them in order and
 * resolves a later target in what the earlier mount shows: a volume, whose
 * content its containers write. A symlink left there (nest -> /) put the
 * inner mount on the container's root, where runc's /dev set-up then
 * followed the inner volume's own symlinks on the host. Stacking on the
 * same target stays allowed: it resolves nothing inside the first mount.
 */
static int
mounts_check_nesting(const struct rt_container_spec *spec, struct err *err)
{
    char **t = calloc(spec->nmounts ? spec->nmounts : 1, sizeof(*t));
    int ret = t ? 0 : err_set(err, ENOMEM, "mount targets: out of memory");
    for (size_t i = 0; ret == 0 && i < spec->nmounts; i++)
        if (!(t[i] = path_normalise(spec->mounts[i].target, true)))
            ret = err_set(err, ENOMEM, "mount targets: out of memory");
    for (size_t i = 0; ret == 0 && i < spec->nmounts; i++)
        for (size_t j = 0; ret == 0 && j < spec->nmounts; j++)
            if (strcmp(t[i], t[j]) != 0 && path_is_within(t[i], t[j]))
                ret = err_set(err, EINVAL,
                              "mount target %s: inside the mount at %s; a mount inside another "
                              "is not supported (the runtime would resolve it in that mount's "
                              "content, which containers can change)",
                              t[i], t[j]);
    for (size_t i = 0; t && i < spec->nmounts; i++)
        free(t[i]);
    free(t);
    return ret;
}

int
rt_oci_spec_validate(const struct rt_container_spec *spec, struct err *err)
{
    if (!rt_handle_valid(spec->handle))
        return err_set(err, EINVAL, "container handle %s: invalid (1-128 of [A-Za-z0-9_.-])",
                       spec->handle ? spec->handle : "(null)");
    if (!path_ok(spec->rootfs))
        return err_set(err, EINVAL, "rootfs %s: not an absolute path",
                       spec->rootfs ? spec->rootfs : "(null)");
    if (spec->hostname && (strlen(spec->hostname) == 0 || strlen(spec->hostname) > 63))
        return err_set(err, EINVAL, "hostname %s: must be 1 to 63 characters", spec->hostname);
    if (spec->netns_path && !path_ok(spec->netns_path))
        return err_set(err, EINVAL, "network namespace %s: not an absolute path", spec->netns_path);
    if (spec->cwd && !path_ok(spec->cwd))
        return err_set(err, EINVAL, "working directory %s: not an absolute path", spec->cwd);
    const struct rt_limits *l = &spec->limits;
    if (l->memory_bytes && l->memory_bytes < 4 * 1024 * 1024)
        return err_set(err, EINVAL, "memory limit %llu: under the minimum of 4 MiB",
                       (unsigned long long)l->memory_bytes);
    if (l->memory_bytes > (uint64_t)INT64_MAX)
        return err_set(err, EINVAL, "memory limit %llu: too large",
                       (unsigned long long)l->memory_bytes);
    if (l->cpu_shares && (l->cpu_shares < 2 || l->cpu_shares > 262144))
        return err_set(err, EINVAL, "cpu shares %llu: out of range 2..262144",
                       (unsigned long long)l->cpu_shares);
    if (l->cpu_quota_pct > 100000)
        return err_set(err, EINVAL, "cpu quota %u%%: too large", l->cpu_quota_pct);
    if (l->pids < 0)
        return err_set(err, EINVAL, "pids limit %lld: negative", (long long)l->pids);
    for (size_t i = 0; i < spec->nmounts; i++) {
        const struct rt_mount *m = &spec->mounts[i];
        if (!path_ok(m->source))
            return err_set(err, EINVAL, "mount source %s: not an absolute path",
                           m->source ? m->source : "(null)");
        if (!path_ok(m->target) || strlen(m->target) >= 4096)
            return err_set(err, EINVAL, "mount target %s: not an absolute path below /",
                           m->target ? m->target : "(null)");
        /* Compared in normal form: //.berth, /./.berth/ and /.berth are one path. */
        cleanup_free char *t = path_normalise(m->target, true);
        if (!t)
            return err_set(err, ENOMEM, "mount target %s: out of memory", m->target);
        if (strcmp(t, "/") == 0)
            return err_set(err, EINVAL, "mount target %s: not an absolute path below /", m->target);
        const char *why = rt_oci_target_reserved(t);
        if (why)
            return err_set(err, EINVAL, "mount target %s: %s", t, why);
    }
    return mounts_check_nesting(spec, err);
}

static struct json_object *
build_process(const struct rt_container_spec *spec)
{
    struct json_object *p = json_object_new_object();
    json_object_object_add(p, "terminal", json_object_new_boolean(0));
    struct json_object *user = json_object_new_object();
    json_object_object_add(user, "uid", json_object_new_int(0));
    json_object_object_add(user, "gid", json_object_new_int(0));
    json_object_object_add(p, "user", user);
    const char *args[] = {RT_OCI_INIT_TARGET, "--state-fd", RT_OCI_STATE_FD_STR, NULL};
    json_object_object_add(p, "args", str_array(args));
    const char *default_env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    json_object_object_add(p, "env",
                           str_array(spec->env ? (const char *const *)spec->env : default_env));
    json_object_object_add(p, "cwd", json_object_new_string(spec->cwd ? spec->cwd : "/"));
    /* Inheritable and ambient stay empty, as in Docker since CVE-2022-24769. */
    struct json_object *caps = json_object_new_object();
    json_object_object_add(caps, "bounding", str_array(rt_oci_default_caps));
    json_object_object_add(caps, "effective", str_array(rt_oci_default_caps));
    json_object_object_add(caps, "permitted", str_array(rt_oci_default_caps));
    json_object_object_add(p, "capabilities", caps);
    json_object_object_add(p, "noNewPrivileges", json_object_new_boolean(1));
    return p;
}

static struct json_object *
build_mounts(const struct rt_container_spec *spec, const char *init_path)
{
    struct json_object *m = json_object_new_array();
    add_mount(m, "/proc", "proc", "proc", (const char *[]){"nosuid", "noexec", "nodev", NULL});
    add_mount(m, "/dev", "tmpfs", "tmpfs",
              (const char *[]){"nosuid", "strictatime", "mode=755", "size=65536k", NULL});
    add_mount(m, "/dev/pts", "devpts", "devpts",
              (const char *[]){"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
                               "gid=5", NULL});
    add_mount(m, "/dev/shm", "tmpfs", "shm",
              (const char *[]){"nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL});
    add_mount(m, "/dev/mqueue", "mqueue", "mqueue",
              (const char *[]){"nosuid", "noexec", "nodev", NULL});
    add_mount(m, "/sys", "sysfs", "sysfs",
              (const char *[]){"nosuid", "noexec", "nodev", "ro", NULL});
    add_mount(m, "/sys/fs/cgroup", "cgroup", "cgroup",
              (const char *[]){"nosuid", "noexec", "nodev", "relatime", "ro", NULL});
    add_mount(m, RT_OCI_INIT_TARGET, "bind", init_path,
              (const char *[]){"bind", "ro", "nosuid", "nodev", NULL});
    for (size_t i = 0; i < spec->nmounts; i++) {
        const struct rt_mount *um = &spec->mounts[i];
        cleanup_free char *target = path_normalise(um->target, true);
        /* nodev: a device node a container makes in a volume must not
         * work when the daemon or another container reads the volume. */
        add_mount(m, target ? target : um->target, "bind", um->source,
                  um->readonly ? (const char *[]){"rbind", "rprivate", "nodev", "ro", NULL}
                               : (const char *[]){"rbind", "rprivate", "nodev", NULL});
    }
    return m;
}

static struct json_object *
build_resources(const struct rt_limits *l)
{
    struct json_object *r = json_object_new_object();
    struct json_object *devices = json_object_new_array();
    struct json_object *deny = json_object_new_object();
    json_object_object_add(deny, "allow", json_object_new_boolean(0));
    json_object_object_add(deny, "access", json_object_new_string("rwm"));
    json_object_array_add(devices, deny);
    json_object_object_add(r, "devices", devices);
    if (l->memory_bytes) {
        /* Swap is not limited: this host has none, and v1 needs memsw accounting for it. */
        struct json_object *mem = json_object_new_object();
        json_object_object_add(mem, "limit", json_object_new_int64((int64_t)l->memory_bytes));
        json_object_object_add(r, "memory", mem);
    }
    if (l->cpu_shares || l->cpu_quota_pct) {
        struct json_object *cpu = json_object_new_object();
        if (l->cpu_shares)
            json_object_object_add(cpu, "shares", json_object_new_uint64(l->cpu_shares));
        if (l->cpu_quota_pct) {
            json_object_object_add(
                cpu, "quota",
                json_object_new_int64((int64_t)l->cpu_quota_pct * (RT_OCI_CPU_PERIOD / 100)));
            json_object_object_add(cpu, "period", json_object_new_uint64(RT_OCI_CPU_PERIOD));
        }
        json_object_object_add(r, "cpu", cpu);
    }
    if (l->pids) {
        struct json_object *pids = json_object_new_object();
        json_object_object_add(pids, "limit", json_object_new_int64(l->pids));
        json_object_object_add(r, "pids", pids);
    }
    return r;
}

static struct json_object *
build_linux(const struct rt_container_spec *spec, const char *cgroups_path)
{
    struct json_object *lx = json_object_new_object();
    json_object_object_add(lx, "resources", build_resources(&spec->limits));
    if (cgroups_path)
        json_object_object_add(lx, "cgroupsPath", json_object_new_string(cgroups_path));
    struct json_object *ns = json_object_new_array();
    /*
     * Always a network namespace of its own: on the host's network a
     * container could reach berthd's API on 127.0.0.1, which has no
     * authentication, and have it start a privileged container with the
     * host's / mounted. Either the one the network service made (with the
     * container's interface in it), or a new one with only lo.
     */
    const char *types[] = {"pid", "ipc", "uts", "mount", "network", NULL};
    for (size_t i = 0; types[i]; i++) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "type", json_object_new_string(types[i]));
        if (strcmp(types[i], "network") == 0 && spec->netns_path)
            json_object_object_add(o, "path", json_object_new_string(spec->netns_path));
        json_object_array_add(ns, o);
    }
    json_object_object_add(lx, "namespaces", ns);
    json_object_object_add(lx, "maskedPaths", str_array(rt_oci_default_masked_paths));
    json_object_object_add(lx, "readonlyPaths", str_array(rt_oci_default_readonly_paths));
    json_object_object_add(lx, "seccomp", rt_oci_default_seccomp());
    return lx;
}

struct json_object *
rt_oci_spec_build(const struct rt_container_spec *spec, const char *init_path,
                  const char *cgroups_path, struct err *err)
{
    if (rt_oci_spec_validate(spec, err) < 0)
        return NULL;
    if (!path_ok(init_path)) {
        err_set(err, EINVAL, "init %s: not an absolute path", init_path ? init_path : "(null)");
        return NULL;
    }
    struct json_object *root = json_object_new_object();
    if (!root) {
        err_set(err, ENOMEM, "build runtime spec: out of memory");
        return NULL;
    }
    json_object_object_add(root, "ociVersion", json_object_new_string("1.0.2"));
    json_object_object_add(root, "process", build_process(spec));
    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "path", json_object_new_string(spec->rootfs));
    json_object_object_add(r, "readonly", json_object_new_boolean(0));
    json_object_object_add(root, "root", r);
    char host[64];
    snprintf(host, sizeof(host), "%s", spec->hostname ? spec->hostname : spec->handle);
    json_object_object_add(root, "hostname", json_object_new_string(host));
    json_object_object_add(root, "mounts", build_mounts(spec, init_path));
    json_object_object_add(root, "linux", build_linux(spec, cgroups_path));
    return root;
}

int
rt_oci_spec_write(const char *bundle_dir, const struct rt_container_spec *spec,
                  const char *init_path, const char *cgroups_path, struct err *err)
{
    struct json_object *cfg = rt_oci_spec_build(spec, init_path, cgroups_path, err);
    if (!cfg)
        return -(err ? err->code : EINVAL);
    size_t len = 0;
    const char *text = json_object_to_json_string_length(cfg, JSON_C_TO_STRING_PLAIN, &len);
    cleanup_free char *path = fs_path_join(bundle_dir, "config.json");
    int ret;
    if (!text || !path)
        ret = err_set(err, ENOMEM, "write runtime spec: out of memory");
    else
        ret = fs_write_file_atomic(path, text, len, 0600, err);
    json_object_put(cfg);
    return ret;
}
