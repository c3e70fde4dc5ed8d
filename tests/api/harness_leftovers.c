/*
 * What a test's dead daemon leaves on the host that removing its store
 * root would not (harness.h, harness_remove_leftovers): containers keep
 * running across a stop of berthd by design, so a test that ended with
 * one (the Docker suites do) left a running berth-init, its mounts and
 * its cgroups for ever once the root went, and its cgroup parent
 * (berth-<12 hex of sha256(root)>) in every hierarchy. Only what lies
 * under that root or is named after it is touched. Runs in the test
 * process (berthd_cleanup, the atexit net), after the daemon ended.
 */
#include "tests/api/harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs a shell command quietly; its exit status or -1. */
static int
quiet_sh(const char *cmd)
{
    char full[PATH_MAX * 2 + 64];
    snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
    int st = system(full);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every container runc knows under root's runtime state: delete --force. */
static void
delete_containers(const char *root)
{
    char state[PATH_MAX + 32], cmd[PATH_MAX * 2 + 64];
    struct stat st;
    snprintf(state, sizeof(state), "%s/runtime/runc", root);
    if (stat(state, &st) < 0 || !S_ISDIR(st.st_mode) || quiet_sh("command -v runc") != 0)
        return;
    snprintf(cmd, sizeof(cmd), "runc --root '%s' list -q 2>/dev/null", state);
    FILE *p = popen(cmd, "r");
    char id[256];
    while (p && fgets(id, sizeof(id), p)) {
        id[strcspn(id, "\n")] = '\0';
        if (!id[0] || strchr(id, '\''))
            continue;
        snprintf(cmd, sizeof(cmd), "runc --root '%s' delete --force '%s'", state, id);
        quiet_sh(cmd);
    }
    if (p)
        pclose(p);
}

/* Detaches every mount below root, deepest (latest) first. */
static void
unmount_below(const char *root)
{
    size_t rl = strlen(root);
    for (int round = 0; round < 64; round++) {
        FILE *f = fopen("/proc/self/mountinfo", "r");
        char line[8192], last[PATH_MAX] = "";
        while (f && fgets(line, sizeof(line), f)) {
            char mp[PATH_MAX];
            if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && strncmp(mp, root, rl) == 0 &&
                mp[rl] == '/')
                snprintf(last, sizeof(last), "%s", mp);
        }
        if (f)
            fclose(f);
        if (!last[0] || umount2(last, MNT_DETACH) < 0)
            return;
    }
}

/* rmdir of dir and every cgroup below it that holds no process. */
static void
remove_empty_cgroups(const char *dir, int depth)
{
    DIR *d = depth < 8 ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        char child[PATH_MAX];
        snprintf(child, sizeof(child), "%s/%s", dir, e->d_name);
        remove_empty_cgroups(child, depth + 1);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

void
harness_cgroup_parent_name(const char *root, char *out, size_t len)
{
    char cmd[PATH_MAX + 64], hex[80] = "";
    snprintf(cmd, sizeof(cmd), "printf %%s '%s' | sha256sum", root);
    FILE *p = popen(cmd, "r");
    if (p && !fgets(hex, sizeof(hex), p))
        hex[0] = '\0';
    if (p)
        pclose(p);
    snprintf(out, len, "berth-%.12s", hex);
}

void
harness_cgroup_parent_dirs(const char *root, char (*out)[PATH_MAX], int max, int *n)
{
    *n = 0;
    char parent[64];
    harness_cgroup_parent_name(root, parent, sizeof(parent));
    /* runc puts a relative cgroupsPath below the cgroup of the process
     * that runs it, in each hierarchy: the daemon's, which is this one's. */
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[4096];
    DIR *h = opendir("/sys/fs/cgroup");
    struct dirent *e;
    /* Each mounted hierarchy (v1 controllers, v2's "unified"), then
     * /sys/fs/cgroup itself, v2's mount on a host without v1. */
    bool top = false;
    while (h && ((e = readdir(h)) || !top)) {
        const char *hier = "";
        if (e && e->d_name[0] == '.')
            continue;
        if (e)
            hier = e->d_name;
        else
            top = true;
        if (f)
            rewind(f);
        while (f && fgets(line, sizeof(line), f) && *n < max) {
            line[strcspn(line, "\n")] = '\0';
            char *path = strchr(line, ':');
            path = path ? strchr(path + 1, ':') : NULL;
            if (!path)
                continue;
            path++;
            char dir[PATH_MAX];
            struct stat st;
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s%s%s/%s", hier[0] ? "/" : "", hier,
                     strcmp(path, "/") == 0 ? "" : path, parent);
            bool seen = false;
            for (int i = 0; i < *n && !seen; i++)
                seen = strcmp(out[i], dir) == 0;
            if (!seen && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
                snprintf(out[(*n)++], PATH_MAX, "%s", dir);
        }
    }
    if (h)
        closedir(h);
    if (f)
        fclose(f);
}

void
harness_remove_leftovers(const char *root)
{
    if (!root[0])
        return;
    delete_containers(root);
    unmount_below(root);
    char dirs[32][PATH_MAX];
    int n = 0;
    harness_cgroup_parent_dirs(root, dirs, 32, &n);
    for (int i = 0; i < n; i++)
        remove_empty_cgroups(dirs[i], 0);
}
