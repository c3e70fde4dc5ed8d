/*
 * The all-or-nothing move of a staged upload into a volume: plan, journal,
 * steps, commit; undo from the journal after a failure or a crash.
 *
 * Why a journal and not a tree built beside the old one and swapped in
 * with one renameat2(RENAME_EXCHANGE): an upload merges into what is
 * there (files the tar does not name stay), so a tree beside the old one
 * would have to hold a copy or hard links of everything the upload does
 * not touch: work proportional to the target, not to the upload, and in
 * a copy-on-write child (an overlay) every hard link of a lower file
 * copies it up whole. And a container that bind-mounts the volume holds
 * the inode of the directory it mounted: swapping the volume's root (or
 * a directory above a mount target) would leave it looking at the old,
 * then deleted, tree. The journal's steps are renames of single entries
 * inside the existing directories, which every bind mount sees at once.
 *
 * The steps: an entry missing in the target is moved in (RENAME_NOREPLACE);
 * an entry of the target that the upload replaces is exchanged with the
 * staged one (RENAME_EXCHANGE), so the old entry is kept in the staging
 * tree until the commit; a directory on both sides is merged and then
 * takes the staged directory's metadata, the old metadata being recorded
 * first. Each step records the staged entry's inode, so after a crash the
 * journal tells a step done (the target holds that inode) from one not
 * done. The journal is written (fsynced, renamed into place)
 * before the first step; the commit is syncfs, then unlinking the
 * journal. A failure undoes the steps done, in reverse; a journal found at
 * start-up is undone the same way: the volume is the old tree or, once
 * the journal is gone, the new one.
 *
 * Readers and containers may see the steps as they happen (each entry is
 * old or new, never half-written); what is guaranteed is the outcome.
 *
 * Runs on a pool thread (or at start-up) under the volume store's lock;
 * blocks on disk.
 */
#include "store/volume_merge.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "common/strbuf.h"

#define OVERLAY_XATTR_PREFIX "trusted.overlay."
#define MAX_DEPTH 1024
#define JOURNAL_MAGIC "berth-volume-merge 1"
#define JOURNAL_MAX (256 << 20)

enum step_kind { STEP_MOVE = 'M', STEP_SWAP = 'X', STEP_META = 'D' };

struct old_xattr {
    char *key;
    bool had;
    void *value;
    size_t len;
};

struct step {
    char kind;
    char *path;   /* relative to src and to base */
    uint64_t dev; /* of the staged entry (MOVE, SWAP) */
    uint64_t ino;
    struct os_stat old; /* the target directory's (META) */
    struct old_xattr *xa;
    size_t nxa;
};

struct plan {
    struct step *v;
    size_t n, cap;
    int src, base;
    bool no_dir_nondir; /* a directory and a non-directory never replace each other */
    struct err *err;
};

static void
plan_clear(struct plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].path);
        for (size_t k = 0; k < p->v[i].nxa; k++) {
            free(p->v[i].xa[k].key);
            free(p->v[i].xa[k].value);
        }
        free(p->v[i].xa);
    }
    free(p->v);
    p->v = NULL;
    p->n = p->cap = 0;
}

static struct step *
plan_add(struct plan *p, char kind, const char *path)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct step *v = realloc(p->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        p->v = v;
        p->cap = cap;
    }
    struct step *s = &p->v[p->n];
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    if (!(s->path = strdup(path)))
        return NULL;
    p->n++;
    return s;
}

/* ---- paths ----------------------------------------------------------------- */

/* Opens the parent of path (below root) into *fd; *name is the last
 * component. *fd is root itself when path has one component. */
static int
parent_open(int root, char *path, const char **name, int *fd)
{
    char *slash = strrchr(path, '/');
    if (!slash) {
        *name = path;
        *fd = root;
        return 0;
    }
    *slash = '\0';
    int r = rootdir_open_dir(root, path);
    *slash = '/';
    *name = slash + 1;
    if (r < 0)
        return r;
    *fd = r;
    return 0;
}

static void
parent_close(int root, int fd)
{
    if (fd != root)
        rootdir_close(fd);
}

static char *
path_join(const char *a, const char *b)
{
    char *p = NULL;
    if (asprintf(&p, "%s%s%s", a, a[0] ? "/" : "", b) < 0)
        return NULL;
    return p;
}

/* ---- planning -------------------------------------------------------------- */

/* The target directory's xattrs of the keys the staged one has. */
static int
plan_old_xattrs(struct step *s, int sfd, int tfd)
{
    char names[8192];
    ssize_t len = rootdir_fd_list_xattrs(sfd, names, sizeof(names));
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1) {
        const char *key = names + off;
        if (strncmp(key, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0)
            continue;
        struct old_xattr *v = realloc(s->xa, (s->nxa + 1) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->xa = v;
        struct old_xattr *x = &s->xa[s->nxa++];
        memset(x, 0, sizeof(*x));
        if (!(x->key = strdup(key)))
            return -ENOMEM;
        char value[65536];
        ssize_t n = rootdir_fd_get_xattr(tfd, key, value, sizeof(value));
        if (n >= 0) {
            x->had = true;
            x->len = (size_t)n;
            if (!(x->value = malloc(n ? (size_t)n : 1)))
                return -ENOMEM;
            memcpy(x->value, value, (size_t)n);
        }
    }
    return 0;
}

static int plan_dir(struct plan *p, int sfd, int tfd, const char *prefix, int depth);

static int
plan_entry(struct plan *p, int sfd, int tfd, const char *name, const char *path, int depth)
{
    struct os_stat ss, ts;
    int r = rootdir_stat(sfd, name, &ss);
    if (r < 0)
        return err_errno(p->err, -r, "stat staged %s", path);
    r = rootdir_stat(tfd, name, &ts);
    if (r < 0 && r != -ENOENT)
        return err_errno(p->err, -r, "stat %s", path);
    struct step *s;
    if (r == 0 && p->no_dir_nondir && S_ISDIR(ss.st_mode) != S_ISDIR(ts.st_mode))
        return err_set(p->err, ERR_INVALID_CONTENT, "cannot overwrite %sdirectory \"/%s\" with %s",
                       S_ISDIR(ts.st_mode) ? "" : "non-", path,
                       S_ISDIR(ss.st_mode) ? "a directory" : "a non-directory");
    if (r == -ENOENT || !S_ISDIR(ss.st_mode) || !S_ISDIR(ts.st_mode)) {
        if (!(s = plan_add(p, r == -ENOENT ? STEP_MOVE : STEP_SWAP, path)))
            return err_set(p->err, ENOMEM, "volume merge: out of memory");
        s->dev = ss.st_dev;
        s->ino = ss.st_ino;
        return 0;
    }
    int s2 = rootdir_open_dir(sfd, name), t2 = rootdir_open_dir(tfd, name);
    int ret = 0;
    if (s2 < 0 || t2 < 0)
        ret = err_errno(p->err, -(s2 < 0 ? s2 : t2), "open %s", path);
    if (ret == 0)
        ret = plan_dir(p, s2, t2, path, depth + 1);
    /* The directory's metadata last, after everything inside it. */
    if (ret == 0 && !(s = plan_add(p, STEP_META, path)))
        ret = err_set(p->err, ENOMEM, "volume merge: out of memory");
    if (ret == 0) {
        s->old = ts;
        if (plan_old_xattrs(s, s2, t2) < 0)
            ret = err_set(p->err, ENOMEM, "volume merge: out of memory");
    }
    rootdir_close(s2);
    rootdir_close(t2);
    return ret;
}

static int
plan_dir(struct plan *p, int sfd, int tfd, const char *prefix, int depth)
{
    if (depth > MAX_DEPTH)
        return err_set(p->err, ERR_INVALID_CONTENT, "tree deeper than %d levels", MAX_DEPTH);
    struct osfs_dir *d = NULL;
    int r = osfs_dir_open_at(sfd, &d);
    if (r < 0)
        return err_errno(p->err, -r, "read staging directory");
    int ret = 0;
    const char *name;
    while (ret == 0 && (name = osfs_dir_next(d, NULL))) {
        cleanup_free char *path = path_join(prefix, name);
        ret = path ? plan_entry(p, sfd, tfd, name, path, depth)
                   : err_set(p->err, ENOMEM, "volume merge: out of memory");
    }
    osfs_dir_close(d);
    return ret;
}

/* ---- the journal ------------------------------------------------------------ */

static void
hex_put(struct strbuf *f, const void *data, size_t len)
{
    const unsigned char *p = data;
    if (len == 0)
        strbuf_puts(f, "-");
    for (size_t i = 0; i < len; i++)
        strbuf_printf(f, "%02x", p[i]);
}

/* Decodes hex (or "-") in place; its length, or -1. */
static ssize_t
hex_get(char *s)
{
    if (strcmp(s, "-") == 0) {
        s[0] = '\0';
        return 0;
    }
    size_t n = strlen(s);
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        s[i] = (char)v;
    }
    s[n / 2] = '\0';
    return (ssize_t)(n / 2);
}

static int
journal_write(int fs_fd, const char *journal, const char *src, const char *base,
              const struct plan *p, struct err *err)
{
    struct strbuf f = {0};
    strbuf_printf(&f, "%s\nS ", JOURNAL_MAGIC);
    hex_put(&f, src, strlen(src));
    strbuf_puts(&f, "\nB ");
    hex_put(&f, base, strlen(base));
    strbuf_puts(&f, "\n");
    for (size_t i = 0; i < p->n; i++) {
        const struct step *s = &p->v[i];
        strbuf_printf(&f, "%c ", s->kind);
        hex_put(&f, s->path, strlen(s->path));
        if (s->kind != STEP_META) {
            strbuf_printf(&f, " %llu %llu\n", (unsigned long long)s->dev,
                          (unsigned long long)s->ino);
            continue;
        }
        strbuf_printf(&f, " %o %u %u %lld %ld %lld %ld\n", (unsigned)s->old.st_mode & 07777,
                      (unsigned)s->old.st_uid, (unsigned)s->old.st_gid,
                      (long long)s->old.st_atim.tv_sec, (long)s->old.st_atim.tv_nsec,
                      (long long)s->old.st_mtim.tv_sec, (long)s->old.st_mtim.tv_nsec);
        for (size_t k = 0; k < s->nxa; k++) {
            strbuf_puts(&f, "A ");
            hex_put(&f, s->xa[k].key, strlen(s->xa[k].key));
            strbuf_printf(&f, " %d ", s->xa[k].had);
            hex_put(&f, s->xa[k].value, s->xa[k].len);
            strbuf_puts(&f, "\n");
        }
    }
    strbuf_puts(&f, "E\n");
    size_t len = 0;
    char *text = strbuf_steal(&f, &len);
    if (!text)
        return err_set(err, ENOMEM, "volume merge: out of memory");
    int r = fs_write_file_atomic_at(fs_fd, journal, text, len, 0600, err);
    free(text);
    return r;
}

/* Reads a journal back into p; *src and *base (caller frees). */
static int
journal_read(int fs_fd, const char *journal, struct plan *p, char **src, char **base,
             struct err *err)
{
    cleanup_free char *text = NULL;
    int r = fs_read_file_at(fs_fd, journal, JOURNAL_MAX, &text, NULL, err);
    if (r < 0)
        return r;
    bool complete = false;
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, JOURNAL_MAGIC) != 0)
        return err_set(err, ERR_INVALID_CONTENT, "journal %s: not a merge journal", journal);
    /* Hex doubles: a path of PATH_MAX, an xattr value of 64 KiB. */
    cleanup_free char *a = malloc(2 * PATH_MAX + 8), *b = malloc(2 * PATH_MAX + 8),
                      *c = malloc(2 * 65536 + 8);
    if (!a || !b || !c)
        return err_set(err, ENOMEM, "volume merge: out of memory");
    while ((line = strtok_r(NULL, "\n", &save))) {
        char kind = line[0];
        if (kind == 'E') {
            complete = true;
        } else if ((kind == 'S' || kind == 'B') && sscanf(line + 1, " %8199s", a) == 1 &&
                   hex_get(a) >= 0) {
            char **dst = kind == 'S' ? src : base;
            free(*dst);
            *dst = strdup(a);
        } else if ((kind == STEP_MOVE || kind == STEP_SWAP)) {
            unsigned long long dev, ino;
            if (sscanf(line + 1, " %8199s %llu %llu", a, &dev, &ino) != 3 || hex_get(a) < 0)
                break;
            struct step *s = plan_add(p, kind, a);
            if (!s)
                return err_set(err, ENOMEM, "volume merge: out of memory");
            s->dev = dev;
            s->ino = ino;
        } else if (kind == STEP_META) {
            unsigned mode, uid, gid;
            long long as, ms;
            long ans, mns;
            if (sscanf(line + 1, " %8199s %o %u %u %lld %ld %lld %ld", a, &mode, &uid, &gid, &as,
                       &ans, &ms, &mns) != 8 ||
                hex_get(a) < 0)
                break;
            struct step *s = plan_add(p, kind, a);
            if (!s)
                return err_set(err, ENOMEM, "volume merge: out of memory");
            s->old.st_mode = (mode_t)mode;
            s->old.st_uid = (uid_t)uid;
            s->old.st_gid = (gid_t)gid;
            s->old.st_atim = (struct timespec){(time_t)as, ans};
            s->old.st_mtim = (struct timespec){(time_t)ms, mns};
        } else if (kind == 'A' && p->n > 0 && p->v[p->n - 1].kind == STEP_META) {
            int had;
            if (sscanf(line + 1, " %8199s %d %131079s", b, &had, c) != 3)
                break;
            ssize_t klen = hex_get(b), vlen = hex_get(c);
            struct step *s = &p->v[p->n - 1];
            struct old_xattr *v = realloc(s->xa, (s->nxa + 1) * sizeof(*v));
            if (klen < 0 || vlen < 0 || !v)
                break;
            s->xa = v;
            struct old_xattr *x = &s->xa[s->nxa++];
            x->key = strdup(b);
            x->had = had != 0;
            x->len = (size_t)vlen;
            x->value = malloc(x->len ? x->len : 1);
            if (!x->key || !x->value)
                return err_set(err, ENOMEM, "volume merge: out of memory");
            memcpy(x->value, c, x->len);
        } else {
            break;
        }
    }
    if (!complete || !*src || !*base)
        return err_set(err, ERR_INVALID_CONTENT, "journal %s: cut short", journal);
    return 0;
}

/* ---- steps ------------------------------------------------------------------ */

/* Gives the target directory the staged one's owner, mode, xattrs, times. */
static int
meta_apply(int sfd, int tfd)
{
    struct os_stat ss;
    int r = rootdir_stat(sfd, "", &ss);
    if (r < 0)
        return r;
    if (rootdir_fd_set_owner(tfd, ss.st_uid, ss.st_gid) < 0 ||
        rootdir_fd_set_mode(tfd, ss.st_mode & 07777) < 0)
        log_debug("volume merge: directory metadata: %s", strerror(errno));
    char names[8192];
    ssize_t len = rootdir_fd_list_xattrs(sfd, names, sizeof(names));
    for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1) {
        const char *key = names + off;
        if (strncmp(key, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0)
            continue;
        char value[65536];
        ssize_t vlen = rootdir_fd_get_xattr(sfd, key, value, sizeof(value));
        if (vlen >= 0 && rootdir_fd_set_xattr(tfd, key, value, (size_t)vlen) < 0)
            log_debug("volume merge: set xattr %s", key);
    }
    struct timespec ts[2] = {ss.st_atim, ss.st_mtim};
    return rootdir_fd_set_times(tfd, ts);
}

static void
meta_restore(int tfd, const struct step *s)
{
    if (rootdir_fd_set_owner(tfd, s->old.st_uid, s->old.st_gid) < 0 ||
        rootdir_fd_set_mode(tfd, s->old.st_mode & 07777) < 0)
        log_warn("volume merge: restore metadata of %s: %s", s->path, strerror(errno));
    for (size_t k = 0; k < s->nxa; k++) {
        const struct old_xattr *x = &s->xa[k];
        int r = x->had ? rootdir_fd_set_xattr(tfd, x->key, x->value, x->len)
                       : rootdir_fd_remove_xattr(tfd, x->key);
        if (r < 0 && r != -ENODATA)
            log_warn("volume merge: restore xattr %s of %s: %s", x->key, s->path, strerror(-r));
    }
    struct timespec ts[2] = {s->old.st_atim, s->old.st_mtim};
    rootdir_fd_set_times(tfd, ts);
}

static int
step_do(struct plan *p, struct step *s)
{
    if (s->kind == STEP_META) {
        int sfd = rootdir_open_dir(p->src, s->path), tfd = rootdir_open_dir(p->base, s->path);
        int r = sfd < 0 ? sfd : tfd < 0 ? tfd : meta_apply(sfd, tfd);
        rootdir_close(sfd);
        rootdir_close(tfd);
        return r;
    }
    const char *sname, *tname;
    int sdir = -1, tdir = -1;
    int r = parent_open(p->src, s->path, &sname, &sdir);
    if (r == 0)
        r = parent_open(p->base, s->path, &tname, &tdir);
    if (r == 0)
        r = s->kind == STEP_MOVE ? rootdir_rename(sdir, sname, tdir, tname)
                                 : rootdir_exchange(sdir, sname, tdir, tname);
    if (sdir >= 0)
        parent_close(p->src, sdir);
    if (tdir >= 0)
        parent_close(p->base, tdir);
    return r;
}

/* Undoes s if it was done (the target holds the staged inode). */
static int
step_undo(struct plan *p, struct step *s)
{
    if (s->kind == STEP_META) {
        int tfd = rootdir_open_dir(p->base, s->path);
        if (tfd < 0)
            return tfd;
        meta_restore(tfd, s);
        rootdir_close(tfd);
        return 0;
    }
    const char *sname, *tname;
    int sdir = -1, tdir = -1;
    int r = parent_open(p->src, s->path, &sname, &sdir);
    if (r == 0)
        r = parent_open(p->base, s->path, &tname, &tdir);
    /* Where an exchange is three renames (Windows), one a crash cut
     * short is first finished or undone. */
    if (r == 0 && s->kind == STEP_SWAP)
        r = rootdir_exchange_repair(sdir, sname, tdir, tname);
    /* The inode alone: an overlay gets a new st_dev each time it is
     * mounted, and every layer of a volume is on one filesystem, so its
     * inode numbers are unique and survive the remount. */
    struct os_stat st;
    if (r == 0 && rootdir_stat(tdir, tname, &st) == 0 && st.st_ino == s->ino)
        r = s->kind == STEP_MOVE ? rootdir_rename(tdir, tname, sdir, sname)
                                 : rootdir_exchange(tdir, tname, sdir, sname);
    if (sdir >= 0)
        parent_close(p->src, sdir);
    if (tdir >= 0)
        parent_close(p->base, tdir);
    return r;
}

static int
undo_all(struct plan *p, size_t done)
{
    int ret = 0;
    for (size_t i = done; i-- > 0;) {
        int r = step_undo(p, &p->v[i]);
        if (r < 0) {
            log_error("volume merge: undo %c %s: %s", p->v[i].kind, p->v[i].path, strerror(-r));
            ret = r;
        }
    }
    return ret;
}

static int
journal_remove(int fs_fd, const char *journal)
{
    int r = rootdir_remove(fs_fd, journal, false);
    if (r < 0 && r != -ENOENT)
        return r;
    return osfs_fsync(fs_fd);
}

#ifdef BERTH_TEST_HOOKS
/* Test builds: BERTH_TEST_MERGE_KILL=N kills the daemon once N steps are
 * done (N = steps + 1: after the commit), for the crash tests. */
static void
test_kill_point(size_t at)
{
    const char *v = getenv("BERTH_TEST_MERGE_KILL");
    if (v && *v && strtoull(v, NULL, 10) == at) {
        log_warn("volume merge: killed after %zu steps (BERTH_TEST_MERGE_KILL)", at);
        raise(SIGKILL);
    }
}
#else
static void
test_kill_point(size_t at)
{
    (void)at;
}
#endif

int
volume_merge(int fs_fd, const char *src, const char *base, const char *journal, struct err *err)
{
    return volume_merge_at(fs_fd, src, base, fs_fd, journal, false, err);
}

int
volume_merge_at(int fs_fd, const char *src, const char *base, int jfd, const char *journal,
                bool no_dir_nondir, struct err *err)
{
    struct plan p = {.src = -1, .base = -1, .no_dir_nondir = no_dir_nondir, .err = err};
    p.src = rootdir_open_dir(fs_fd, src);
    p.base = rootdir_open_dir(fs_fd, base);
    int ret = 0;
    if (p.src < 0 || p.base < 0)
        ret = err_errno(err, -(p.src < 0 ? p.src : p.base), "open %s", p.src < 0 ? src : base);
    if (ret == 0)
        ret = plan_dir(&p, p.src, p.base, "", 0);
    if (ret == 0)
        ret = journal_write(jfd, journal, src, base, &p, err);
    size_t done = 0;
    while (ret == 0 && done < p.n) {
        test_kill_point(done);
        int r = step_do(&p, &p.v[done]);
        if (r == -EEXIST || r == -ENOENT || r == -ENOTEMPTY || r == -ENOTDIR)
            ret = err_set(err, ERR_CONFLICT, "%s changed during the upload (%s)",
                          p.v[done].path[0] ? p.v[done].path : ".", strerror(-r));
        else if (r < 0)
            ret = err_errno(err, -r, "move %s into place", p.v[done].path);
        else
            done++;
    }
    if (ret == 0) {
        test_kill_point(p.n);
        int r = rootdir_fd_sync_fs(p.base);
        if (r == 0)
            r = journal_remove(jfd, journal);
        if (r < 0)
            ret = err_errno(err, -r, "commit the upload");
        else
            test_kill_point(p.n + 1);
    }
    if (ret < 0 && done > 0) {
        /* A step or the commit failed: back to the old tree. */
        if (undo_all(&p, done) == 0)
            journal_remove(jfd, journal);
        else
            log_error("volume merge: left journal %s for the next start", journal);
    } else if (ret < 0) {
        journal_remove(jfd, journal);
    }
    rootdir_close(p.src);
    rootdir_close(p.base);
    plan_clear(&p);
    return ret;
}

bool
volume_merge_journal_left(int fs_fd, const char *journal)
{
    struct os_stat st;
    return rootdir_stat(fs_fd, journal, &st) != -ENOENT;
}

int
volume_merge_recover(int fs_fd, const char *journal, struct err *err)
{
    return volume_merge_recover_at(fs_fd, fs_fd, journal, err);
}

int
volume_merge_recover_at(int fs_fd, int jfd, const char *journal, struct err *err)
{
    struct plan p = {.src = -1, .base = -1, .err = err};
    char *src = NULL, *base = NULL;
    int ret = journal_read(jfd, journal, &p, &src, &base, err);
    if (ret == 0) {
        p.src = rootdir_open_dir(fs_fd, src);
        p.base = rootdir_open_dir(fs_fd, base);
        if (p.src < 0 || p.base < 0)
            ret = err_errno(err, -(p.src < 0 ? p.src : p.base), "journal %s: open %s", journal,
                            p.src < 0 ? src : base);
    }
    if (ret == 0 && undo_all(&p, p.n) < 0)
        ret = err_set(err, EIO, "journal %s: some steps could not be undone", journal);
    if (ret == 0 || ret == -ERR_INVALID_CONTENT) {
        /* Undone, or a journal that was never complete: no step ran. */
        int r = journal_remove(jfd, journal);
        if (r < 0 && ret == 0)
            ret = err_errno(err, -r, "remove journal %s", journal);
        if (ret == 0)
            log_info("volume: rolled back an upload cut short (%zu steps)", p.n);
    }
    rootdir_close(p.src);
    rootdir_close(p.base);
    plan_clear(&p);
    free(src);
    free(base);
    return ret;
}
