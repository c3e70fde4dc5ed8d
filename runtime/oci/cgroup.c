/*
 * Container usage from cgroup files. The container's cgroup is found the
 * way the kernel reports it: /proc/<pid>/cgroup gives the path per
 * hierarchy, /proc/self/mountinfo where that hierarchy is mounted (and
 * which part of it, for a namespaced or bind-mounted cgroupfs). This
 * works for whatever cgroupsPath the runtime turned into a directory.
 * And the removal of the daemon's cgroup parent with the empty cgroups
 * below it. Pool threads, or start-up and shutdown while the loop does
 * not run (blocking reads).
 */
#include "runtime/oci/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"

/* Is word an element of the comma-separated list? */
static bool
in_list(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, word, n) == 0)
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

/* The cgroup path of pid in the hierarchy that has controller (NULL: v2). */
static int
proc_cgroup_path(pid_t pid, const char *controller, char **out, struct err *err)
{
    char file[64];
    snprintf(file, sizeof(file), "/proc/%d/cgroup", (int)pid);
    cleanup_fclose FILE *f = fopen(file, "re");
    if (!f)
        return err_errno(err, errno, "open %s", file);
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        bool match = controller ? in_list(ctrls, controller)
                                : (strncmp(line, "0", 1) == 0 && *ctrls == '\0');
        if (match) {
            *out = strdup(c2 + 1);
            if (!*out)
                return err_set(err, ENOMEM, "read %s: out of memory", file);
            return 0;
        }
    }
    return err_set(err, ENOENT, "%s: no %s hierarchy", file, controller ? controller : "v2");
}

/* Mount point and mounted root of the hierarchy (v1 with controller, or v2). */
static int
mount_of(const char *controller, char **mnt, char **root, struct err *err)
{
    cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return err_errno(err, errno, "open /proc/self/mountinfo");
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = '\0';
        char fstype[64], source[256], opts[1024] = "";
        if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, opts) < 2)
            continue;
        bool match = controller ? strcmp(fstype, "cgroup") == 0 && in_list(opts, controller)
                                : strcmp(fstype, "cgroup2") == 0;
        if (!match)
            continue;
        char r[2048], m[2048];
        if (sscanf(line, "%*s %*s %*s %2047s %2047s", r, m) != 2)
            continue;
        *mnt = strdup(m);
        *root = strdup(r);
        if (!*mnt || !*root) {
            free(*mnt);
            free(*root);
            return err_set(err, ENOMEM, "read mountinfo: out of memory");
        }
        return 0;
    }
    return err_set(err, ENOENT, "cgroup %s: not mounted", controller ? controller : "v2");
}

int
rt_cgroup_dir(pid_t pid, const char *controller, char **out, struct err *err)
{
    cleanup_free char *path = NULL;
    int ret = proc_cgroup_path(pid, controller, &path, err);
    if (ret < 0)
        return ret;
    cleanup_free char *mnt = NULL;
    cleanup_free char *root = NULL;
    ret = mount_of(controller, &mnt, &root, err);
    if (ret < 0)
        return ret;
    const char *rel = path;
    size_t rl = strlen(root);
    if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0 &&
        (path[rl] == '/' || path[rl] == '\0'))
        rel = path + rl;
    *out = fs_path_join(mnt, rel);
    if (!*out)
        return err_set(err, ENOMEM, "cgroup path: out of memory");
    return 0;
}

/*
 * Removes dir and every cgroup below it that holds no process, deepest
 * first (a cgroup's directory goes with rmdir alone: its files are the
 * kernel's). One that still has a process, or a child that has one,
 * stays: EBUSY. 0, or the first other failure.
 */
static int
remove_empty_tree(const char *dir, int depth, struct err *err)
{
    int ret = 0;
    DIR *d = depth < 8 ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        cleanup_free char *child = fs_path_join(dir, e->d_name);
        if (!child) {
            ret = ret ? ret : err_set(err, ENOMEM, "cgroup parent: out of memory");
            continue;
        }
        int r = remove_empty_tree(child, depth + 1, err);
        if (r < 0 && ret == 0)
            ret = r;
    }
    if (d)
        closedir(d);
    if (rmdir(dir) < 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY && ret == 0)
        ret = err_errno(err, errno, "remove cgroup %s", dir);
    return ret;
}

int
rt_cgroup_parent_remove(const char *parent, struct err *err)
{
    if (!parent || !*parent || parent[0] == '/' || strstr(parent, ".."))
        return err_set(err, EINVAL, "cgroup parent %s: not a relative path",
                       parent ? parent : "(null)");
    cleanup_fclose FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return err_errno(err, errno, "open /proc/self/cgroup");
    int ret = 0;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        /* "ID:CONTROLLERS:PATH"; v2 is "0::PATH". One controller names a
         * v1 hierarchy ("cpu" of "cpu,cpuacct", or "name=systemd"). */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        char controller[256];
        size_t n = strcspn(c1 + 1, ",:");
        if (n >= sizeof(controller))
            continue;
        memcpy(controller, c1 + 1, n);
        controller[n] = '\0';
        if (n == 0 && strncmp(line, "0:", 2) != 0)
            continue;
        cleanup_free char *dir = NULL;
        struct err ignored = {0};
        if (rt_cgroup_dir(getpid(), n ? controller : NULL, &dir, &ignored) < 0)
            continue; /* not mounted here: runc made nothing there either */
        cleanup_free char *path = fs_path_join(dir, parent);
        if (!path)
            return err_set(err, ENOMEM, "cgroup parent: out of memory");
        int r = remove_empty_tree(path, 0, err);
        if (r < 0 && ret == 0)
            ret = r;
    }
    return ret;
}

static int
read_u64_file(const char *dir, const char *name, const char *key, uint64_t *out, struct err *err)
{
    cleanup_free char *path = fs_path_join(dir, name);
    if (!path)
        return err_set(err, ENOMEM, "read %s: out of memory", name);
    cleanup_free char *text = NULL;
    int ret = fs_read_file(path, 1 << 16, &text, NULL, err);
    if (ret < 0)
        return ret;
    const char *p = text;
    if (key) {
        size_t kl = strlen(key);
        for (p = text; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
            if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
                p += kl + 1;
                break;
            }
        }
        if (!p)
            return err_set(err, ENOENT, "%s: no %s", path, key);
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || end == p)
        return err_set(err, EIO, "%s: not a number", path);
    *out = v;
    return 0;
}

int
rt_cgroup_stats(pid_t pid, struct rt_stats *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    cleanup_free char *mem = NULL;
    cleanup_free char *cpu = NULL;
    struct err ignored = {0};
    /* v1 controllers win on a hybrid host: that is where runc put the limits. */
    if (rt_cgroup_dir(pid, "memory", &mem, &ignored) == 0 &&
        rt_cgroup_dir(pid, "cpuacct", &cpu, &ignored) == 0) {
        int ret = read_u64_file(mem, "memory.usage_in_bytes", NULL, &out->memory_bytes, err);
        if (ret == 0)
            ret = read_u64_file(cpu, "cpuacct.usage", NULL, &out->cpu_ns, err);
        return ret < 0 ? err_wrap(err, "cgroup v1 stats") : 0;
    }
    cleanup_free char *dir = NULL;
    int ret = rt_cgroup_dir(pid, NULL, &dir, err);
    if (ret < 0)
        return err_wrap(err, "cgroup stats of pid %d", (int)pid);
    ret = read_u64_file(dir, "memory.current", NULL, &out->memory_bytes, err);
    uint64_t usec = 0;
    if (ret == 0)
        ret = read_u64_file(dir, "cpu.stat", "usage_usec", &usec, err);
    if (ret < 0)
        return err_wrap(err, "cgroup v2 stats");
    out->cpu_ns = usec * 1000;
    return 0;
}

int
rt_cgroup_oom_kills(pid_t pid, uint64_t *out, struct err *err)
{
    cleanup_free char *dir = NULL;
    struct err ignored = {0};
    if (rt_cgroup_dir(pid, "memory", &dir, &ignored) == 0)
        return read_u64_file(dir, "memory.oom_control", "oom_kill", out, err);
    int ret = rt_cgroup_dir(pid, NULL, &dir, err);
    if (ret < 0)
        return err_wrap(err, "OOM kills of pid %d", (int)pid);
    return read_u64_file(dir, "memory.events", "oom_kill", out, err);
}
