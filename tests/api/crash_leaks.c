/*
 * The crash campaign's look at the host and the store root from outside
 * (see crash_campaign.h): what a volume's tar stream holds, and what is
 * left that nothing listed explains: mounts under the root (each listed
 * container's rootfs, scratch and network namespace, each listed
 * volume's overlay, each at most once), loop devices on files under the root (a listed container's
 * scratch image), cgroups under this root's cgroup parent in every
 * hierarchy, runc state, container, network and volume directories, staging
 * directories and temporaries, and processes of a dead daemon still at
 * work on the root; and that a clean shutdown leaves no cgroup parent.
 *
 * Runs on the campaign's threads; no state of its own.
 */
#include "tests/api/crash_campaign.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- names ----------------------------------------------------------------------------------- */

bool
cc_names_has(const struct cc_names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

void
cc_names_add(struct cc_names *s, const char *name)
{
    if (s->n < CC_LIST_MAX && !cc_names_has(s, name))
        snprintf(s->v[s->n++], CC_NAME_LEN, "%s", name);
}

void
cc_names_remove(struct cc_names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0) {
            memmove(s->v[i], s->v[s->n - 1], CC_NAME_LEN);
            s->n--;
            return;
        }
}

void
cc_dir_names(const char *dir, const char *prefix, struct cc_names *out)
{
    out->n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        cc_names_add(out, e->d_name);
    }
    if (d)
        closedir(d);
}

/* ---- tar streams -------------------------------------------------------------------------------
 */

static uint64_t
octal(const char *p, size_t n)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n && p[i]; i++)
        if (p[i] >= '0' && p[i] <= '7')
            x = x * 8 + (uint64_t)(p[i] - '0');
    return x;
}

bool
cc_tar_matches(const char *tar, size_t len, const struct cc_files *want, char *why, size_t why_len)
{
    bool seen[CC_FILES] = {0};
    char pax_path[512] = "";
    char *buf = NULL;
    size_t off = 0;
    bool ok = true, ended = false;
    while (ok && off + 512 <= len) {
        const char *h = tar + off;
        bool zero = true;
        for (int i = 0; i < 512 && zero; i++)
            zero = h[i] == 0;
        if (zero) {
            ended = true;
            break;
        }
        uint64_t size = octal(h + 124, 12);
        char type = h[156];
        const char *data = h + 512;
        size_t padded = (size_t)((size + 511) & ~(uint64_t)511);
        if (off + 512 + padded > len) {
            snprintf(why, why_len, "truncated at entry %.100s", h);
            ok = false;
            break;
        }
        off += 512 + padded;
        if (type == 'x') {
            /* pax records "<len> key=value\n": only path matters here. */
            for (size_t p = 0; p < size;) {
                size_t rl = (size_t)strtoul(data + p, NULL, 10);
                const char *kv = memchr(data + p, ' ', size - p);
                if (!rl || !kv || p + rl > size)
                    break;
                if (strncmp(kv + 1, "path=", 5) == 0)
                    snprintf(pax_path, sizeof(pax_path), "%.*s",
                             (int)(data + p + rl - 1 - (kv + 6)), kv + 6);
                p += rl;
            }
            continue;
        }
        if (type == 'g')
            continue;
        char name[512];
        if (pax_path[0])
            snprintf(name, sizeof(name), "%s", pax_path);
        else if (h[345])
            snprintf(name, sizeof(name), "%.155s/%.100s", h + 345, h);
        else
            snprintf(name, sizeof(name), "%.100s", h);
        pax_path[0] = '\0';
        const char *rel = name;
        while (rel[0] == '.' && rel[1] == '/')
            rel += 2;
        size_t rl = strlen(rel);
        while (rl && rel[rl - 1] == '/')
            rl--;
        if (type == '5') {
            bool wanted = rl == 0 || (rl == 1 && rel[0] == '.');
            for (int i = 0; i < want->n && !wanted; i++)
                wanted = strncmp(want->f[i].path, rel, rl) == 0 && want->f[i].path[rl] == '/';
            if (!wanted) {
                snprintf(why, why_len, "a directory no upload made: %s", name);
                ok = false;
            }
            continue;
        }
        if (type != '0' && type != '\0') {
            snprintf(why, why_len, "an entry of type '%c' no upload made: %s", type, name);
            ok = false;
            break;
        }
        int i;
        for (i = 0; i < want->n; i++)
            if (strlen(want->f[i].path) == rl && strncmp(want->f[i].path, rel, rl) == 0)
                break;
        if (i == want->n) {
            snprintf(why, why_len, "a file no acknowledged upload wrote: %s (%llu bytes)", name,
                     (unsigned long long)size);
            ok = false;
            break;
        }
        if (size != want->f[i].size) {
            snprintf(why, why_len, "%s: %llu bytes, want %u", name, (unsigned long long)size,
                     want->f[i].size);
            ok = false;
            break;
        }
        buf = realloc(buf, want->f[i].size + 1);
        cc_fill(want->f[i].key, buf, want->f[i].size);
        if (memcmp(buf, data, want->f[i].size) != 0) {
            snprintf(why, why_len, "%s: not the content of its last acknowledged upload", name);
            ok = false;
            break;
        }
        seen[i] = true;
    }
    free(buf);
    if (ok && !ended) {
        snprintf(why, why_len, "no end-of-archive blocks (%zu bytes)", len);
        ok = false;
    }
    for (int i = 0; ok && i < want->n; i++)
        if (!seen[i]) {
            snprintf(why, why_len, "%s is missing (%u bytes acknowledged)", want->f[i].path,
                     want->f[i].size);
            ok = false;
        }
    return ok;
}

/* ---- leaks ---------------------------------------------------------------------------------- */

struct lctx {
    const struct cc_campaign *c;
    const struct cc_names *containers, *volumes; /* what is listed */
    char *why;
    size_t len;
};

__attribute__((format(printf, 2, 3))) static bool
lfail(struct lctx *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->why, v->len, fmt, ap);
    va_end(ap);
    return false;
}

/* Octal escapes (\040) of /proc/self/mountinfo, undone in place. */
static void
unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
            *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

static bool
check_mounts(struct lctx *v, const char *when)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return lfail(v, "open /proc/self/mountinfo");
    char line[8192];
    struct cc_names seen = {0};
    size_t rlen = strlen(v->c->root);
    bool ok = true;
    while (ok && fgets(line, sizeof(line), f)) {
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (!tok)
            continue;
        unescape(tok);
        if (strncmp(tok, v->c->root, rlen) != 0 || tok[rlen] != '/')
            continue;
        const char *rel = tok + rlen + 1;
        char h[CC_NAME_LEN] = "", what[32] = "";
        bool allowed = false;
        if (sscanf(rel, "containers/%255[^/]/%31s", h, what) == 2)
            allowed = cc_names_has(v->containers, h) &&
                      (strcmp(what, "rootfs") == 0 || strcmp(what, "scratch") == 0);
        else if (sscanf(rel, "volumes/%255[^/]/%31s", h, what) == 2)
            allowed = cc_names_has(v->volumes, h) && strcmp(what, "fs") == 0;
        else if (sscanf(rel, "network/netns/%255[^/]%31s", h, what) == 1)
            allowed = true; /* a network namespace: check_network's */
        if (!allowed)
            ok = lfail(v, "%s: a mount nothing listed explains: %s", when, tok);
        else if (cc_names_has(&seen, rel))
            ok = lfail(v, "%s: mounted twice: %s", when, tok);
        cc_names_add(&seen, rel);
    }
    fclose(f);
    return ok;
}

/* A loop device on a file under the root that no listed container has:
 * its description in out, or false. */
static bool
stray_loop(struct lctx *v, char *out, size_t len)
{
    DIR *d = opendir("/sys/block");
    struct dirent *e;
    size_t rlen = strlen(v->c->root);
    bool found = false;
    while (!found && d && (e = readdir(d))) {
        if (strncmp(e->d_name, "loop", 4) != 0)
            continue;
        char p[PATH_MAX], file[PATH_MAX] = "";
        snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        if (!fgets(file, sizeof(file), f))
            file[0] = '\0';
        fclose(f);
        file[strcspn(file, "\n")] = '\0';
        if (strncmp(file, v->c->root, rlen) != 0 || file[rlen] != '/')
            continue;
        char h[CC_NAME_LEN] = "", rest[64] = "";
        if (sscanf(file + rlen + 1, "containers/%255[^/]/%63[^\n]", h, rest) != 2 ||
            strcmp(rest, "scratch.img") != 0 || !cc_names_has(v->containers, h)) {
            snprintf(out, len, "/dev/%s is attached to %s", e->d_name, file);
            found = true;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static bool
check_loops(struct lctx *v, const char *when)
{
    /* The kernel detaches an autoclear loop device after its last
     * unmount, a little later: give it 5 s. */
    char what[PATH_MAX + 64];
    for (int i = 0; i < 100; i++) {
        if (!stray_loop(v, what, sizeof(what)))
            return true;
        sleep_ms(50);
    }
    return lfail(v, "%s: %s, which no listed container has (for 5 s)", when, what);
}

/* Every directory named after this root's cgroup parent: in each
 * hierarchy, below the cgroup this process (and so berthd and runc) is in. */
static void
cgroup_parents(const struct cc_campaign *c, struct cc_names *out)
{
    out->n = 0;
    struct cc_names own = {0};
    cc_names_add(&own, "");
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[4096];
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *p = strchr(line, ':');
        p = p ? strchr(p + 1, ':') : NULL;
        if (p && strcmp(p + 1, "/") != 0)
            cc_names_add(&own, p + 1);
    }
    if (f)
        fclose(f);
    struct cc_names hier = {0};
    cc_dir_names("/sys/fs/cgroup", NULL, &hier);
    cc_names_add(&hier, ".");
    for (int i = 0; i < hier.n; i++)
        for (int j = 0; j < own.n; j++) {
            char p[PATH_MAX];
            struct stat st;
            snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s/%s", hier.v[i], own.v[j], c->cgroup_name);
            if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
                cc_names_add(out, p);
        }
}

static bool
check_cgroups(struct lctx *v, const char *when)
{
    struct cc_names parents;
    cgroup_parents(v->c, &parents);
    for (int i = 0; i < parents.n; i++) {
        DIR *d = opendir(parents.v[i]);
        struct dirent *e;
        bool ok = true;
        while (ok && d && (e = readdir(d)))
            if (e->d_type == DT_DIR && e->d_name[0] != '.' &&
                !cc_names_has(v->containers, e->d_name))
                ok = lfail(v, "%s: cgroup %s/%s of a container that is not listed", when,
                           parents.v[i], e->d_name);
        if (d)
            closedir(d);
        if (!ok)
            return false;
    }
    return true;
}

bool
cc_check_cgroups_gone(const struct cc_campaign *c, char *why, size_t len)
{
    struct cc_names parents;
    cgroup_parents(c, &parents);
    if (parents.n)
        snprintf(why, len, "after the shutdown: cgroup parent %s left (%d hierarchies)",
                 parents.v[0], parents.n);
    return parents.n == 0;
}

/* A process other than the daemon whose command line names the root: a
 * runtime call or a helper of the killed daemon, still at work. */
static pid_t
root_process(const struct cc_campaign *c, char *cmd, size_t len)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (!found && d && (e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == c->b.pid || pid == getpid())
            continue;
        char p[64], buf[8192];
        snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[n] = '\0';
        char needle[PATH_MAX + 2];
        snprintf(needle, sizeof(needle), "%s/", c->root);
        if (strstr(buf, needle)) {
            found = pid;
            snprintf(cmd, len, "%s", buf);
        }
    }
    if (d)
        closedir(d);
    return found;
}

static bool
check_dirs(struct lctx *v, const char *when)
{
    const struct cc_campaign *c = v->c;
    char p[PATH_MAX + 64];
    struct cc_names n;
    snprintf(p, sizeof(p), "%s/runtime/runc", c->root);
    cc_dir_names(p, NULL, &n);
    for (int i = 0; i < n.n; i++)
        if (!cc_names_has(v->containers, n.v[i]))
            return lfail(v, "%s: runc state %s/%s of a container that is not listed", when, p,
                         n.v[i]);
    snprintf(p, sizeof(p), "%s/containers", c->root);
    cc_dir_names(p, NULL, &n);
    for (int i = 0; i < n.n; i++)
        if (n.v[i][0] != '.' && !cc_names_has(v->containers, n.v[i]))
            return lfail(v, "%s: %s/%s of a container that is not listed", when, p, n.v[i]);
    snprintf(p, sizeof(p), "%s/volumes", c->root);
    cc_dir_names(p, NULL, &n);
    for (int i = 0; i < n.n; i++)
        if (n.v[i][0] != '.' && !cc_names_has(v->volumes, n.v[i]))
            return lfail(v, "%s: %s/%s of a volume that is not listed", when, p, n.v[i]);
    for (int i = 0; i < v->volumes->n; i++) {
        snprintf(p, sizeof(p), "%s/volumes/%s/fs", c->root, v->volumes->v[i]);
        cc_dir_names(p, ".staging-", &n);
        if (n.n)
            return lfail(v, "%s: %s/%s left", when, p, n.v[0]);
    }
    snprintf(p, sizeof(p), "%s/tmp", c->root);
    cc_dir_names(p, NULL, &n);
    if (n.n)
        return lfail(v, "%s: %s/%s left (%d entries)", when, p, n.v[0], n.n);
    snprintf(p, sizeof(p), "%s/snapshots", c->root);
    cc_dir_names(p, "tmp-", &n);
    if (n.n)
        return lfail(v, "%s: %s/%s left", when, p, n.v[0]);
    return true;
}

/*
 * What the network keeps of each listed container only: its namespace
 * (a file and a mount), its record (<handle>.json) and its /etc files.
 * The daemon's start-up reconciliation releases those of containers that
 * are gone after it starts listening, so what is left is given 10 s.
 */
static bool
network_clean(struct lctx *v, char *why, size_t len)
{
    static const char *const subs[] = {"netns", "attach", "files"};
    char p[PATH_MAX + 64];
    struct cc_names n;
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof(p), "%s/network/%s", v->c->root, subs[k]);
        cc_dir_names(p, NULL, &n);
        for (int i = 0; i < n.n; i++) {
            char h[CC_NAME_LEN];
            snprintf(h, sizeof(h), "%s", n.v[i]);
            size_t hl = strlen(h);
            if (k == 1 && hl > 5 && strcmp(h + hl - 5, ".json") == 0)
                h[hl - 5] = '\0';
            if (!cc_names_has(v->containers, h)) {
                snprintf(why, len, "%s/%s of a container that is not listed", p, n.v[i]);
                return false;
            }
        }
    }
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[8192], prefix[PATH_MAX + 32];
    snprintf(prefix, sizeof(prefix), "%s/network/netns/", v->c->root);
    bool ok = true;
    while (ok && f && fgets(line, sizeof(line), f)) {
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (!tok)
            continue;
        unescape(tok);
        if (strncmp(tok, prefix, strlen(prefix)) != 0)
            continue;
        if (!cc_names_has(v->containers, tok + strlen(prefix))) {
            snprintf(why, len, "a network namespace of a container that is not listed: %s", tok);
            ok = false;
        }
    }
    if (f)
        fclose(f);
    return ok;
}

static bool
check_network(struct lctx *v, const char *when)
{
    char why[PATH_MAX + 128];
    for (int round = 0; round < 200; round++) {
        if (network_clean(v, why, sizeof(why)))
            return true;
        sleep_ms(50);
    }
    return lfail(v, "%s: after 10 s: %s", when, why);
}

bool
cc_check_leaks(const struct cc_campaign *c, const struct cc_names *containers,
               const struct cc_names *volumes, const char *when, char *why, size_t len)
{
    struct lctx lv = {.c = c, .containers = containers, .volumes = volumes, .why = why, .len = len};
    struct lctx *v = &lv;
    /* A helper of the killed daemon (runc, mkfs) may still be finishing:
     * wait for it, then look at what it left. */
    char cmd[8192];
    pid_t pid = 0;
    for (int i = 0; i < 200 && (pid = root_process(v->c, cmd, sizeof(cmd))); i++)
        sleep_ms(50);
    if (pid)
        return lfail(v, "%s: process %d still at work on the root after 10 s: %s", when, (int)pid,
                     cmd);
    return check_mounts(v, when) && check_loops(v, when) && check_cgroups(v, when) &&
           check_dirs(v, when) && check_network(v, when);
}
