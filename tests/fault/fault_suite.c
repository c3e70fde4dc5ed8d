/* The fault suites' engine: control client, walk, store checks; see fault_suite.h. */
#include "tests/fault/fault_suite.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const fault_kind_names[FAULT_KINDS] = {
    "fsync", "rename",   "write",   "mount",   "umount",  "unlink",
    "mkdir", "sqlwrite", "sqlsync", "sqlread", "sqllock",
};

#define MAX_OBJECTS 64

static unsigned failures; /* with BERTH_FAULT_KEEP_GOING */

/* Whether the store checks look for files nothing owns (see fault_check_store_now). */
static bool check_files = true;

void
fault_suite_init(void)
{
    const char *p = getenv("BERTH_TEST_BERTHD_FAULT");
    setenv("BERTH_TEST_BERTHD", p && *p ? p : BERTHD_FAULT_PATH, 1);
}

static void
ctl_path(const struct berthd *b, char *out, size_t len)
{
    snprintf(out, len, "%s/fault.sock", b->tmp);
}

void
fault_berthd_start(struct berthd *b, const struct berthd_opts *extra)
{
    static char env[PATH_MAX + 32];
    struct berthd_opts opts = {0};
    if (extra)
        opts = *extra;
    if (!b->tmp[0])
        harness_mkdtemp(b->tmp, sizeof(b->tmp));
    char path[PATH_MAX];
    ctl_path(b, path, sizeof(path));
    snprintf(env, sizeof(env), "BERTH_FAULT_CTL=%s", path);
    size_t n = 0;
    while (opts.env[n])
        n++;
    ck_assert_uint_lt(n, sizeof(opts.env) / sizeof(opts.env[0]) - 1);
    opts.env[n] = env;
    opts.env[n + 1] = NULL;
    berthd_start(b, &opts);
}

void
fault_cmd(const struct berthd *b, const char *cmd, char *out, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ctl_path(b, sa.sun_path, sizeof(sa.sun_path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        ck_abort_msg("fault control %s: %s (is the daemon berthd-fault?)", sa.sun_path,
                     strerror(e));
    }
    char line[600];
    int n = snprintf(line, sizeof(line), "%s\n", cmd);
    ck_assert_int_eq(send(fd, line, (size_t)n, MSG_NOSIGNAL), n);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = recv(fd, out + got, len - 1 - got, 0)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fd);
}

void
fault_arm(const struct berthd *b, const char *spec)
{
    char cmd[256], out[512];
    snprintf(cmd, sizeof(cmd), "arm %s", spec);
    fault_cmd(b, cmd, out, sizeof(out));
    ck_assert_msg(strcmp(out, "ok\n") == 0, "arm %s: %s", spec, out);
}

void
fault_reset(const struct berthd *b)
{
    char out[64];
    fault_cmd(b, "reset", out, sizeof(out));
    ck_assert_msg(strcmp(out, "ok\n") == 0, "reset: %s", out);
}

void
fault_counts_get(const struct berthd *b, struct fault_counts *c)
{
    char out[2048];
    fault_cmd(b, "counts", out, sizeof(out));
    memset(c, 0, sizeof(*c));
    for (int k = 0; k < FAULT_KINDS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "%s=", fault_kind_names[k]);
        const char *p = strstr(out, key);
        ck_assert_msg(p, "counts: no %s in %s", key, out);
        c->calls[k] = strtoul(p + strlen(key), NULL, 10);
    }
    const char *f = strstr(out, "fired=");
    ck_assert_msg(f, "counts: no fired= in %s", out);
    c->fired = strtoul(f + 6, NULL, 10);
    const char *l = strstr(out, "last: ");
    if (l)
        snprintf(c->last, sizeof(c->last), "%.*s", (int)strcspn(l + 6, "\n"), l + 6);
}

/* The last lines of the daemon's log (static). */
static const char *
log_tail(const struct berthd *b, int lines)
{
    static char tail[8192];
    char *log = berthd_log(b);
    size_t len = strlen(log);
    const char *p = log + len;
    while (p > log && lines >= 0) {
        p--;
        if (*p == '\n')
            lines--;
    }
    snprintf(tail, sizeof(tail), "%s", p);
    free(log);
    return tail;
}

void
fault_failure(const struct berthd *b, const char *what, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *keep = getenv("BERTH_FAULT_KEEP_GOING");
    if (keep && *keep && strcmp(keep, "0") != 0) {
        failures++;
        fprintf(stderr, "FAULT FINDING %s: %s\n", what, msg);
        return;
    }
    ck_abort_msg("%s: %s\nlog tail:\n%s", what, msg, log_tail(b, 40));
}

void
fault_checks_done(const char *name)
{
    if (failures)
        ck_abort_msg("%s: %u checks failed; see FAULT FINDING lines", name, failures);
}

void
fault_http(const struct berthd *b, const char *method, const char *path, const char *body,
           struct hresp *out)
{
    http_do(b,
            &(struct hreq){.method = method,
                           .path = path,
                           .body = body,
                           .headers = (const char *[]){"Content-Type: application/json", NULL},
                           .timeout_ms = 60000},
            out);
}

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

/* Whether a mount point under the root belongs to a listed container or volume. */
static bool
mount_owned(const struct berthd *b, const char *mnt, const struct name_set *ctrs,
            const struct name_set *vols)
{
    char prefix[PATH_MAX];
    for (size_t i = 0; i < ctrs->n; i++) {
        snprintf(prefix, sizeof(prefix), "%s/containers/%s/", b->root, ctrs->names[i]);
        if (strncmp(mnt, prefix, strlen(prefix)) == 0)
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

/* This root's cgroup parent (daemon/containers_ops.c): berth-<12 hex of sha256(root)>. */
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
    check_mounts(b, what, &ctrs, vols);
    check_cgroups(b, what, &ctrs);
    check_loops(b, what, &ctrs);
}

static void
check_store(struct berthd *b, const char *what, bool files)
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
    check_store(b, what, true);
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

/* ---- the walk --------------------------------------------------------------------- */

static bool
walk_full(void)
{
    const char *w = getenv("BERTH_FAULT_WALK");
    return w && strcmp(w, "full") == 0;
}

/*
 * The Ns to walk for a kind counted count times; returns how many. The
 * first and last few always: an operation's set-up and its clean-up (a
 * lease dropped, a temporary removed) are where a failure is most often
 * mishandled.
 */
size_t
fault_walk_points(unsigned long count, bool full, unsigned quick, unsigned long *out, size_t max)
{
    size_t n = 0;
    if (full || walk_full() || count <= quick) {
        for (unsigned long i = 1; i <= count && n < max; i++)
            out[n++] = i;
        return n;
    }
    /* A third at each end, a third spread between them. */
    unsigned end = quick / 3, mid = quick - 2 * end;
    for (unsigned long i = 1; i <= end; i++)
        out[n++] = i;
    for (unsigned long i = 1; i <= mid; i++)
        out[n++] = end + (count - 2 * end) * i / (mid + 1);
    for (unsigned long i = count - end + 1; i <= count; i++)
        out[n++] = i;
    return n;
}

unsigned
fault_quick_points(int k, unsigned n)
{
    /* A refused lock is SQLite's busy handler's to retry: a few points
     * prove that it does. */
    return k == FAULT_SQLLOCK ? 3 : n;
}

static bool
status_ok(const struct fault_op *op, long status)
{
    return status == op->ok_status[0] || (op->ok_status[1] && status == op->ok_status[1]);
}

static bool
kind_wanted(const struct fault_op *op, int k)
{
    if (!op->kinds)
        return true;
    const char *name = fault_kind_names[k];
    size_t len = strlen(name);
    for (const char *p = op->kinds; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, name, len) == 0)
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

bool
fault_point_wanted(const char *op, const char *kind, unsigned long n)
{
    const char *only = getenv("BERTH_FAULT_POINT");
    if (!only || !*only)
        return true;
    char have[128];
    if (!kind)
        snprintf(have, sizeof(have), "%s", op);
    else
        snprintf(have, sizeof(have), "%s:%s:%lu", op, kind, n);
    size_t len = strlen(only), hlen = strlen(have);
    if (!kind) /* the operation: a prefix of what was asked for */
        return strncmp(only, have, hlen) == 0 && (only[hlen] == ':' || only[hlen] == '\0');
    return strncmp(have, only, len) == 0 && (have[len] == ':' || have[len] == '\0');
}

static bool
point_wanted(const struct fault_op *op, int k, unsigned long n)
{
    return fault_point_wanted(op->name, k < 0 ? NULL : fault_kind_names[k], n);
}

/* Undoes a success, and checks that what is left is the starting state, leaking nothing. */
static void
teardown_checked(struct berthd *b, const struct fault_op *op, const char *what)
{
    if (!op->teardown)
        return;
    op->teardown(b, op->ctx);
    char after[1200];
    snprintf(after, sizeof(after), "%s, after the teardown", what);
    fault_check_store(b, after);
}

/* Stops the daemon cleanly and starts it again on the same root. */
void
fault_restart(struct berthd *b, const char *what)
{
    int st = berthd_term(b, 20000);
    fault_check(b, what, st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "berthd-fault did not stop cleanly: status 0x%x", st);
    char saved[PATH_MAX + 16];
    snprintf(saved, sizeof(saved), "%s.prev", b->log_path);
    rename(b->log_path, saved);
    fault_berthd_start(b, NULL);
}

/* Runs a garbage collection and nothing else (a prune that keeps every image). */
static void
collect_garbage(struct berthd *b, const char *what)
{
    struct hresp r;
    fault_http(b, "POST", "/v1/images/prune", "{\"keep_bytes\":1000000000000000}", &r);
    fault_check(b, what, r.status == 200, "a garbage collection answered %ld: %.300s", r.status,
                r.body);
    hresp_free(&r);
}

/*
 * A failed removal leaves what it could not remove (a temporary, an
 * unreferenced blob, a container's directory): berth logs it, and the
 * next start (temporaries) or the next garbage collection (blobs,
 * snapshots) removes it. So right after an unlink fault the store checks
 * leave such files alone (not what is listed, mounted or running), and
 * after the retry or teardown settle() restarts the daemon and collects
 * the garbage before the full checks.
 */
static bool
tolerant(int k)
{
    return k == FAULT_UNLINK;
}

static void
settle(struct berthd *b, int k, const char *what)
{
    if (!tolerant(k))
        return;
    fault_restart(b, what);
    collect_garbage(b, what);
}

/* A daemon that died under a fault: say so with its log, and start it again on the root. */
static void
restart_if_dead(struct berthd *b, const char *what)
{
    if (berthd_alive(b))
        return;
    int st = b->wait_status;
    char saved[PATH_MAX + 16];
    snprintf(saved, sizeof(saved), "%s.dead", b->log_path);
    rename(b->log_path, saved);
    fault_failure(b, what, "berthd-fault exited (wait status 0x%x) under the fault; log in %s", st,
                  saved);
    fault_berthd_start(b, NULL);
}

/* A reply that is a clean error: 4xx or 5xx with {"error": {"code", "message"}}. */
static void
check_error_reply(struct berthd *b, const char *what, const struct hresp *r)
{
    fault_check(b, what, r->status >= 400 && r->status < 600,
                "the operation answered %ld (curl code %d) under the fault: %.500s", r->status,
                r->curl_code, r->body ? r->body : "");
    if (r->status < 400)
        return;
    json_object *code = json_at(r->json, "error.code");
    char why[1024];
    bool ok =
        code && error_body_ok(r, r->status, json_object_get_string(code), NULL, why, sizeof(why));
    fault_check(b, what, ok, "not a JSON error reply: %s", code ? why : r->body);
}

bool
fault_walk_filtered(void)
{
    const char *only = getenv("BERTH_FAULT_POINT");
    return only && *only;
}

unsigned
fault_walk(struct berthd *b, const struct fault_op *op)
{
    char what[1024];
    struct hresp r;
    struct fault_counts before, after;
    unsigned walked = 0;

    if (!point_wanted(op, -1, 0))
        return 0;
    fault_reset(b);
    op->setup(b, op->ctx);
    fault_reset(b);
    op->run(b, op->ctx, &r);
    fault_counts_get(b, &before);
    snprintf(what, sizeof(what), "%s (counting run)", op->name);
    fault_check(b, what, status_ok(op, r.status), "answered %ld: %.500s", r.status, r.body);
    hresp_free(&r);
    op->check_done(b, op->ctx, what);
    fault_check_store(b, what);
    teardown_checked(b, op, what);
    fprintf(stderr, "fault walk %s: calls:", op->name);
    for (int k = 0; k < FAULT_KINDS; k++)
        fprintf(stderr, " %s=%lu", fault_kind_names[k], before.calls[k]);
    fprintf(stderr, "\n");

    for (int k = 0; k < FAULT_KINDS; k++) {
        if (!kind_wanted(op, k) || before.calls[k] == 0)
            continue;
        unsigned long points[512];
        size_t np =
            fault_walk_points(before.calls[k], op->full, fault_quick_points(k, 9), points, 512);
        unsigned clean = 0, absorbed = 0, unfired = 0, here = 0;
        double t0 = now_ms();
        for (size_t i = 0; i < np; i++) {
            if (!point_wanted(op, k, points[i]))
                continue;
            char spec[64];
            snprintf(spec, sizeof(spec), "%s:%lu", fault_kind_names[k], points[i]);
            snprintf(what, sizeof(what), "%s %s", op->name, spec);
            op->setup(b, op->ctx);
            fault_arm(b, spec);
            op->run(b, op->ctx, &r);
            bool alive = berthd_alive(b);
            if (alive) {
                fault_counts_get(b, &after);
                fault_reset(b);
            } else {
                /* Dead: what fired is in its log. */
                memset(&after, 0, sizeof(after));
                after.fired = 1;
                char *log = berthd_log(b);
                const char *line = NULL;
                for (const char *p = strstr(log, "berth-fault: failing"); p;
                     p = strstr(p + 1, "berth-fault: failing"))
                    line = p;
                snprintf(after.last, sizeof(after.last), "%.*s",
                         line ? (int)strcspn(line, "\n") : 0, line ? line : "");
                free(log);
            }
            snprintf(what, sizeof(what), "%s %s (%s)", op->name, spec,
                     after.last[0] ? after.last : "no fault fired");
            restart_if_dead(b, what);
            walked++;
            here++;
            if (after.fired == 0 || status_ok(op, r.status)) {
                /* The operation made fewer calls this time, or took the fault in its stride. */
                fault_check(b, what, status_ok(op, r.status),
                            "no fault fired, yet the operation answered %ld: %.500s", r.status,
                            r.body);
                if (after.fired) {
                    absorbed++;
                    /* A busy lock is retried by SQLite's busy handler: no news. */
                    if (k != FAULT_SQLLOCK)
                        fprintf(stderr, "fault walk %s: absorbed: %s\n", op->name, after.last);
                } else {
                    unfired++;
                }
                hresp_free(&r);
                op->check_done(b, op->ctx, what);
                check_store(b, what, !tolerant(k));
                settle(b, k, what);
                if (tolerant(k))
                    fault_check_store(b, what);
                teardown_checked(b, op, what);
                continue;
            }
            clean++;
            check_error_reply(b, what, &r);
            hresp_free(&r);
            if (op->check_failed)
                op->check_failed(b, op->ctx, what);
            check_store(b, what, !tolerant(k));
            /* The same operation again, with nothing armed, must work. */
            char retry[1100];
            snprintf(retry, sizeof(retry), "%s, retried", what);
            op->run(b, op->ctx, &r);
            fault_check(b, retry, status_ok(op, r.status), "the retry answered %ld: %.500s",
                        r.status, r.body);
            hresp_free(&r);
            op->check_done(b, op->ctx, retry);
            settle(b, k, retry);
            fault_check_store(b, retry);
            teardown_checked(b, op, retry);
        }
        if (here)
            fprintf(stderr,
                    "fault walk %s %s: %u of %lu calls (%u failed cleanly, %u absorbed, %u not "
                    "reached) in %.1f s\n",
                    op->name, fault_kind_names[k], here, before.calls[k], clean, absorbed, unfired,
                    (now_ms() - t0) / 1000);
    }
    fault_checks_done(op->name);
    return walked;
}
