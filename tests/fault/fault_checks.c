/*
 * The fault suites' checks from outside the daemon (see fault_suite.h):
 * the store's listings against what is on disk, in the mount table, the
 * cgroup hierarchies and the loop devices, and listings of trees. Runs in
 * the test process.
 */
#include "tests/fault/fault_suite.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OBJECTS 64

/* Whether the checks look for files nothing owns (fault_check_store_files). */
static bool check_files = true;

size_t
fault_list(const struct berthd *b, const char *path, const char *key, const char *field,
           char out[][160], size_t max)
{
    struct hresp r;
    http_get(b, path, &r);
    ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
    json_object *arr = json_at(r.json, key);
    ck_assert_msg(arr && json_object_is_type(arr, json_type_array), "GET %s: no %s: %s", path, key,
                  r.body);
    size_t n = json_object_array_length(arr);
    ck_assert_uint_le(n, max);
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_at(json_object_array_get_idx(arr, i), field);
        snprintf(out[i], 160, "%s", v ? json_object_get_string(v) : "");
    }
    hresp_free(&r);
    return n;
}

/* ---- the store checks ------------------------------------------------------------- */

struct name_set {
    char names[256][160];
    size_t n;
};

static void
set_add(struct name_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return;
    ck_assert_uint_lt(s->n, 256);
    snprintf(s->names[s->n++], 160, "%s", name);
}

static bool
set_has(const struct name_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return true;
    return false;
}

static const char *
hex_of(const char *digest)
{
    return strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
}

/* The entries of dir (not . and ..) into s; false when dir does not exist. */
static bool
dir_entries(const char *dir, struct name_set *s)
{
    s->n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            set_add(s, e->d_name);
    closedir(d);
    return true;
}

/* Whether root/sub/name exists (not followed). */
static bool
exists(const char *root, const char *sub, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s/%s", root, sub, name);
    struct stat st;
    return lstat(path, &st) == 0;
}

static void
check_images(struct berthd *b, const char *what)
{
    struct hresp r;
    http_get(b, "/v1/images", &r);
    fault_check(b, what, r.status == 200, "GET /v1/images: %ld %s", r.status, r.body);
    json_object *arr = json_at(r.json, "images");
    struct name_set blobs = {0}, chains = {0};
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
        json_object *img = json_object_array_get_idx(arr, i);
        const char *digest = json_object_get_string(json_at(img, "digest"));
        char path[256];
        snprintf(path, sizeof(path), "/v1/images/%s", digest);
        struct hresp g;
        http_get(b, path, &g);
        fault_check(b, what, g.status == 200, "image %s is listed but GET answers %ld %s", digest,
                    g.status, g.body);
        hresp_free(&g);
        set_add(&blobs, hex_of(digest));
        set_add(&blobs, hex_of(json_object_get_string(json_at(img, "config_digest"))));
        json_object *layers = json_at(img, "layers");
        for (size_t l = 0; layers && l < json_object_array_length(layers); l++) {
            json_object *layer = json_object_array_get_idx(layers, l);
            set_add(&blobs, hex_of(json_object_get_string(json_at(layer, "digest"))));
            set_add(&chains, hex_of(json_object_get_string(json_at(layer, "chain_id"))));
        }
    }
    hresp_free(&r);
    for (size_t i = 0; i < blobs.n; i++)
        fault_check(b, what, exists(b->root, "content/sha256", blobs.names[i]),
                    "a listed image's blob %s is missing from content/", blobs.names[i]);
    for (size_t i = 0; i < chains.n; i++)
        fault_check(b, what, exists(b->root, "snapshots", chains.names[i]),
                    "a listed image's snapshot %s is missing from snapshots/", chains.names[i]);
    if (!check_files)
        return;
    struct name_set have = {0};
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/content/sha256", b->root);
    dir_entries(dir, &have);
    for (size_t i = 0; i < have.n; i++)
        fault_check(b, what, set_has(&blobs, have.names[i]),
                    "content/sha256/%s is no listed image's (a leaked blob)", have.names[i]);
    snprintf(dir, sizeof(dir), "%s/snapshots", b->root);
    dir_entries(dir, &have);
    for (size_t i = 0; i < have.n; i++)
        fault_check(b, what, set_has(&chains, have.names[i]),
                    "snapshots/%s is no listed image's (a leaked snapshot)", have.names[i]);
    snprintf(dir, sizeof(dir), "%s/tmp", b->root);
    dir_entries(dir, &have);
    fault_check(b, what, have.n == 0, "<root>/tmp is not empty: %s%s", have.n ? have.names[0] : "",
                have.n > 1 ? " ..." : "");
}

static void
check_volumes(struct berthd *b, const char *what, struct name_set *handles)
{
    static char list[MAX_OBJECTS][160];
    size_t n = fault_list(b, "/v1/volumes", "volumes", "handle", list, MAX_OBJECTS);
    handles->n = 0;
    for (size_t i = 0; i < n; i++)
        set_add(handles, list[i]);
    struct name_set have = {0};
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/volumes", b->root);
    dir_entries(dir, check_files ? &have : &(struct name_set){0});
    for (size_t i = 0; i < have.n; i++)
        fault_check(b, what, set_has(handles, have.names[i]),
                    "volumes/%s is no listed volume's (a leaked volume directory)", have.names[i]);
    for (size_t i = 0; i < handles->n; i++) {
        snprintf(dir, sizeof(dir), "%s/fs/data", handles->names[i]);
        fault_check(b, what, exists(b->root, "volumes", dir), "listed volume %s has no fs/data",
                    handles->names[i]);
        struct name_set fs = {0};
        snprintf(dir, sizeof(dir), "%s/volumes/%s/fs", b->root, handles->names[i]);
        if (check_files)
            dir_entries(dir, &fs);
        for (size_t k = 0; k < fs.n; k++)
            fault_check(b, what, strcmp(fs.names[k], "data") == 0,
                        "volumes/%s/fs/%s is left (an upload's staging or journal)",
                        handles->names[i], fs.names[k]);
    }
}

/*
 * Whether a mount point under the root belongs to a listed container or
 * volume: under its directory, or its network namespace (bound at
 * <root>/network/netns/<handle>, daemon/net_host.c).
 */
static bool
mount_owned(const struct berthd *b, const char *mnt, const struct name_set *ctrs,
            const struct name_set *vols)
{
    char prefix[PATH_MAX];
    for (size_t i = 0; i < ctrs->n; i++) {
        snprintf(prefix, sizeof(prefix), "%s/containers/%s/", b->root, ctrs->names[i]);
        if (strncmp(mnt, prefix, strlen(prefix)) == 0)
            return true;
        snprintf(prefix, sizeof(prefix), "%s/network/netns/%s", b->root, ctrs->names[i]);
        if (strcmp(mnt, prefix) == 0)
            return true;
    }
    for (size_t i = 0; i < vols->n; i++) {
        snprintf(prefix, sizeof(prefix), "%s/volumes/%s/", b->root, vols->names[i]);
        if (strncmp(mnt, prefix, strlen(prefix)) == 0)
            return true;
    }
    return false;
}

static void
check_mounts(struct berthd *b, const char *what, const struct name_set *ctrs,
             const struct name_set *vols)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    ck_assert_ptr_nonnull(f);
    char line[8192];
    size_t rootlen = strlen(b->root);
    while (fgets(line, sizeof(line), f)) {
        /* id parent major:minor root mount-point ... */
        char mnt[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
            continue;
        if (strncmp(mnt, b->root, rootlen) != 0 || (mnt[rootlen] != '/' && mnt[rootlen]))
            continue;
        fault_check(b, what, mount_owned(b, mnt, ctrs, vols),
                    "mount %s is left under the root (no listed container or volume has it)", mnt);
    }
    fclose(f);
}

/* This root's cgroup parent (daemon/containers_open.c): berth-<12 hex of sha256(root)>. */
static const char *
cgroup_parent(const struct berthd *b)
{
    static char root[PATH_MAX], parent[64];
    if (strcmp(root, b->root) != 0) {
        snprintf(root, sizeof(root), "%s", b->root);
        snprintf(parent, sizeof(parent), "berth-%s",
                 ctr_sh_out("printf %%s '%s' | sha256sum | cut -c1-12", b->root));
    }
    return parent;
}

/* No cgroup of this root's but a listed container's, in any hierarchy. */
static void
check_cgroups(struct berthd *b, const char *what, const struct name_set *ctrs)
{
    struct name_set hier = {0}, kids = {0};
    dir_entries("/sys/fs/cgroup", &hier);
    for (size_t i = 0; i < hier.n; i++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", hier.names[i], cgroup_parent(b));
        if (!dir_entries(dir, &kids))
            continue;
        for (size_t k = 0; k < kids.n; k++) {
            char sub[PATH_MAX * 2];
            snprintf(sub, sizeof(sub), "%s/%s", dir, kids.names[k]);
            struct stat st;
            if (stat(sub, &st) < 0 || !S_ISDIR(st.st_mode))
                continue; /* the parent's own control files */
            fault_check(b, what, set_has(ctrs, kids.names[k]),
                        "cgroup %s is left (no listed container %s)", sub, kids.names[k]);
        }
    }
}

static bool loops_clean(struct berthd *b, const struct name_set *ctrs, char *why, size_t why_len);

/*
 * Loop devices: only a listed container's writable layer may be one. The
 * kernel may detach an autoclear loop device a moment after the unmount
 * that dropped its last user returned, so a stray one is given 2 s.
 */
static void
check_loops(struct berthd *b, const char *what, const struct name_set *ctrs)
{
    for (int round = 0; round < 40; round++) {
        if (loops_clean(b, ctrs, NULL, 0))
            return;
        sleep_ms(50);
    }
    char why[PATH_MAX + 64];
    loops_clean(b, ctrs, why, sizeof(why));
    fault_check(b, what, false, "%s", why);
}

/* Whether no loop device but a listed container's is on a file under the root; why if not. */
static bool
loops_clean(struct berthd *b, const struct name_set *ctrs, char *why, size_t why_len)
{
    struct name_set devs = {0};
    dir_entries("/sys/block", &devs);
    for (size_t i = 0; i < devs.n; i++) {
        if (strncmp(devs.names[i], "loop", 4) != 0)
            continue;
        char path[PATH_MAX], back[PATH_MAX] = "";
        snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", devs.names[i]);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        if (!fgets(back, sizeof(back), f))
            back[0] = '\0';
        fclose(f);
        back[strcspn(back, "\n")] = '\0';
        if (strncmp(back, b->root, strlen(b->root)) != 0 || back[strlen(b->root)] != '/')
            continue;
        if (!mount_owned(b, back, ctrs, &(struct name_set){0})) {
            if (why)
                snprintf(why, why_len, "loop device %s on %s is left", devs.names[i], back);
            return false;
        }
    }
    return true;
}

static void
check_containers(struct berthd *b, const char *what, const struct name_set *vols)
{
    static char list[MAX_OBJECTS][160];
    size_t n = fault_list(b, "/v1/containers", "containers", "handle", list, MAX_OBJECTS);
    struct name_set ctrs = {0}, have = {0};
    for (size_t i = 0; i < n; i++)
        set_add(&ctrs, list[i]);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/containers", b->root);
    /* A deleted container's directory goes in a job after its 204. */
    if (check_files && !wait_container_trash_gone(b, 30000))
        fault_check(b, what, false, "a deleted container's renamed directory is left");
    if (check_files)
        dir_entries(dir, &have);
    for (size_t i = 0; i < have.n; i++)
        fault_check(b, what, set_has(&ctrs, have.names[i]),
                    "containers/%s is no listed container's (a leaked container directory)",
                    have.names[i]);
    snprintf(dir, sizeof(dir), "%s/runtime/runc", b->root);
    dir_entries(dir, &have);
    for (size_t i = 0; i < have.n; i++)
        fault_check(b, what, set_has(&ctrs, have.names[i]),
                    "runc state runtime/runc/%s is left for a container that is not listed",
                    have.names[i]);
    /* A container's network: its namespace, record and /etc files (daemon/net*.c). */
    static const char *const net_subs[] = {"netns", "attach", "files"};
    for (size_t k = 0; check_files && k < 3; k++) {
        snprintf(dir, sizeof(dir), "%s/network/%s", b->root, net_subs[k]);
        dir_entries(dir, &have);
        for (size_t i = 0; i < have.n; i++) {
            char name[160];
            snprintf(name, sizeof(name), "%s", have.names[i]);
            char *dot = k == 1 ? strrchr(name, '.') : NULL;
            if (dot && strcmp(dot, ".json") == 0)
                *dot = '\0';
            fault_check(b, what, set_has(&ctrs, name),
                        "network/%s/%s is left for a container that is not listed", net_subs[k],
                        have.names[i]);
        }
    }
    check_mounts(b, what, &ctrs, vols);
    check_cgroups(b, what, &ctrs);
    check_loops(b, what, &ctrs);
}

void
fault_check_store_files(struct berthd *b, const char *what, bool files)
{
    check_files = files;
    struct hresp r;
    http_get(b, "/v1/health", &r);
    fault_check(b, what, r.status == 200, "/v1/health: %ld %s", r.status, r.body);
    hresp_free(&r);
    check_images(b, what);
    struct name_set vols = {0};
    check_volumes(b, what, &vols);
    check_containers(b, what, &vols);
    check_files = true;
}

void
fault_check_store(struct berthd *b, const char *what)
{
    fault_check_store_files(b, what, true);
}

/* ---- trees ------------------------------------------------------------------------ */

static struct {
    char **v;
    size_t n, cap;
    size_t skip; /* the root's length */
} tree;

/* FNV-1a over a file's bytes: enough to tell two contents apart. */
static unsigned long long
file_hash(const char *path)
{
    unsigned long long h = 1469598103934665603ULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ULL;
    close(fd);
    return h;
}

static int
tree_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    const char *rel = path + tree.skip;
    if (*rel == '/')
        rel++;
    if (!*rel)
        return 0;
    char extra[PATH_MAX + 64] = "";
    if (S_ISREG(st->st_mode)) {
        snprintf(extra, sizeof(extra), "%lld %016llx %lld", (long long)st->st_size, file_hash(path),
                 (long long)st->st_mtim.tv_sec);
    } else if (S_ISLNK(st->st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        snprintf(extra, sizeof(extra), "-> %s", target);
    }
    if (tree.n == tree.cap) {
        tree.cap = tree.cap ? tree.cap * 2 : 64;
        tree.v = realloc(tree.v, tree.cap * sizeof(char *));
        ck_assert_ptr_nonnull(tree.v);
    }
    char *line = NULL;
    ck_assert_int_gt(asprintf(&line, "%s %06o %u:%u %s", rel, (unsigned)st->st_mode,
                              (unsigned)st->st_uid, (unsigned)st->st_gid, extra),
                     0);
    tree.v[tree.n++] = line;
    return 0;
}

static int
cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *
fault_tree(const char *dir)
{
    tree.n = 0;
    tree.skip = strlen(dir);
    nftw(dir, tree_cb, 16, FTW_PHYS);
    qsort(tree.v, tree.n, sizeof(char *), cmp_line);
    char *out = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&out, &len);
    for (size_t i = 0; i < tree.n; i++) {
        fprintf(mem, "%s\n", tree.v[i]);
        free(tree.v[i]);
    }
    fclose(mem);
    return out;
}
