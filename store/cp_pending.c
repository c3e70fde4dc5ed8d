/*
 * Notes of a container's archive uploads in flight (store/cp_pending.h):
 * one small file per upload, "<process token>-<staging name>" (its merge
 * journal beside it, the same name + VOLUME_JOURNAL_SUFFIX), holding
 * NUL-separated fields: a magic line, the token, "rootfs" or "mount",
 * the root, the target directory in it and the staging name. The token
 * is random, made once per process, so a note is known to be of a dead
 * process even when a restarted daemon got the same PID (PID 1 in a
 * container). Pool threads and main; blocks on disk.
 */
#include "store/cp_pending.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/randid.h"
#include "common/rootdir.h"
#include "store/volume_merge.h"

/* 2: the merge journal is in the notes' directory. A note of 1 had it in
 * the target, where the container could have written it: set aside. */
#define NOTE_MAGIC "berth-cp-pending 2"
#define ASIDE_DIR CP_PENDING_ASIDE
#define NOTE_MAX (3 * 4096 + 256)

static pthread_once_t token_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t replay_lock = PTHREAD_MUTEX_INITIALIZER;
static char token[24];

static void
token_make(void)
{
    randid_new(token, sizeof(token), "p");
}

static const char *
own_token(void)
{
    pthread_once(&token_once, token_make);
    return token;
}

/* Whether name (a note, or a temporary ".<note>.tmp.N") is this process's. */
static bool
note_is_own(const char *name)
{
    const char *t = own_token();
    size_t n = strlen(t);
    if (name[0] == '.')
        name++;
    return strncmp(name, t, n) == 0 && name[n] == '-';
}

static int
notes_open(const char *dir, bool make, struct err *err)
{
    if (make) {
        int r = osfs_mkdir(dir, 0700);
        if (r < 0 && r != -EEXIST)
            return err_errno(err, -r, "make %s", dir);
    }
    int fd = rootdir_open(dir);
    if (fd < 0 && !(fd == -ENOENT && !make))
        return err_errno(err, -fd, "open %s", dir);
    return fd;
}

int
cp_pending_add(const char *dir, const char *root, bool rootfs, const char *target,
               const char *staging, struct cp_note *note, struct err *err)
{
    const char *t = own_token();
    if (snprintf(note->name, sizeof(note->name), "%s-%s", t, staging) >= (int)sizeof(note->name))
        return err_set(err, ENAMETOOLONG, "upload note: staging name %s too long", staging);
    snprintf(note->journal, sizeof(note->journal), "%s%s", note->name, VOLUME_JOURNAL_SUFFIX);
    const char *kind = rootfs ? "rootfs" : "mount";
    size_t len = strlen(NOTE_MAGIC) + strlen(t) + strlen(kind) + strlen(root) + strlen(target) +
                 strlen(staging) + 6;
    if (len > NOTE_MAX)
        return err_set(err, ENAMETOOLONG, "upload note: paths too long");
    cleanup_free char *text = malloc(len);
    if (!text)
        return err_set(err, ENOMEM, "upload note: out of memory");
    char *p = text;
    const char *fields[] = {NOTE_MAGIC, t, kind, root, target, staging};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        size_t n = strlen(fields[i]) + 1;
        memcpy(p, fields[i], n);
        p += n;
    }
    int fd = notes_open(dir, true, err);
    if (fd < 0)
        return err_wrap(err, "upload note");
    int r = fs_write_file_atomic_at(fd, note->name, text, len, 0600, err);
    rootdir_close(fd);
    return r < 0 ? err_wrap(err, "upload note") : 0;
}

void
cp_pending_remove(const char *dir, const struct cp_note *note)
{
    int fd = rootdir_open(dir);
    if (fd < 0)
        return;
    int r = rootdir_remove(fd, note->name, false);
    if (r < 0 && r != -ENOENT)
        log_warn("upload note %s/%s: %s", dir, note->name, strerror(-r));
    else
        osfs_fsync(fd);
    rootdir_close(fd);
}

struct note {
    bool rootfs;
    const char *root, *target, *staging;
};

static int
note_parse(char *text, size_t len, struct note *n)
{
    const char *f[6];
    size_t k = 0;
    for (size_t off = 0; off < len && k < 6; k++) {
        f[k] = text + off;
        const char *end = memchr(text + off, '\0', len - off);
        if (!end)
            return -1;
        off = (size_t)(end - text) + 1;
    }
    if (k != 6 || strcmp(f[0], NOTE_MAGIC) != 0 ||
        (strcmp(f[2], "rootfs") != 0 && strcmp(f[2], "mount") != 0) || f[3][0] != '/' ||
        strncmp(f[5], CP_STAGING_PREFIX, strlen(CP_STAGING_PREFIX)) != 0 || strchr(f[5], '/'))
        return -1;
    n->rootfs = strcmp(f[2], "rootfs") == 0;
    n->root = f[3];
    n->target = f[4];
    n->staging = f[5];
    return 0;
}

/* A container's root filesystem is a mount: on the same device as its
 * parent, it is the bare mount point and what the note names is not there. */
static bool
root_mounted(const char *root)
{
    cleanup_free char *parent = strdup(root);
    char *slash = parent ? strrchr(parent, '/') : NULL;
    if (!slash)
        return false;
    *(slash == parent ? slash + 1 : slash) = '\0';
    struct os_stat rs, ps;
    return osfs_stat(root, &rs) == 0 && osfs_stat(parent, &ps) == 0 && rs.st_dev != ps.st_dev;
}

/* Whether the directory rfd holds has no entry (or cannot be listed). */
static bool
dir_is_empty(int rfd)
{
    struct osfs_dir *d = NULL;
    if (osfs_dir_open_at(rfd, &d) < 0)
        return true;
    int r = 0;
    bool empty = !osfs_dir_next(d, &r) || r < 0;
    osfs_dir_close(d);
    return empty;
}

/*
 * Whether a target missing in the root rfd holds may still come: a
 * mount's source that is an empty directory may be a mount point whose
 * filesystem is not mounted yet. A root filesystem is known mounted here
 * (root_mounted), and a source with files in it is the filesystem
 * itself: the container removed the target, the staging with it.
 */
static bool
target_may_come(const struct note *n, int rfd)
{
    return !n->rootfs && dir_is_empty(rfd);
}

/*
 * Replays one note (its journal, if any, journal in nfd): 1 when it is
 * done with (the note may go), 0 when it must wait (the root filesystem
 * is not mounted, the root is missing, or the target is missing in a
 * mount's empty source: it may be a filesystem not mounted yet, and the
 * note is the only record of what is in it), or a negative errno (a bad
 * note, set aside; so is one whose target the container removed: it
 * would wait for ever, read again before every upload). *theirs says
 * when the container's doing made it bad (its target removed, or a
 * symlink or a file on the way), not berth's.
 */
static int
note_replay(const struct note *n, int nfd, const char *journal, bool *theirs, struct err *err)
{
    if (n->rootfs && !root_mounted(n->root))
        return 0;
    int rfd = rootdir_open(n->root);
    if (rfd == -ENOENT) {
        log_warn("upload into %s%s: %s is missing, the note waits for it", n->root, n->target,
                 n->root);
        return 0;
    }
    if (rfd < 0)
        return err_errno(err, -rfd, "open %s", n->root);
    /* The note names the directory as read from its descriptor, with no
     * symlink in it: one on the way now is the container's, and following
     * it would replay berth's journal (as root) and remove a staging
     * directory in another directory of the container's choosing. */
    const char *rel = n->target + strspn(n->target, "/");
    int tfd = rootdir_open_dir(rfd, rel);
    bool may_come = tfd == -ENOENT && target_may_come(n, rfd);
    rootdir_close(rfd);
    if (may_come) {
        log_warn("upload into %s%s: the directory is missing, the note waits for it", n->root,
                 n->target);
        return 0;
    }
    *theirs = tfd == -ENOENT || tfd == -ELOOP || tfd == -ENOTDIR;
    if (tfd == -ENOENT)
        return err_set(err, ENOENT, "open %s in %s: missing (the container removed it)", n->target,
                       n->root);
    if (tfd == -ELOOP || tfd == -ENOTDIR)
        return err_set(err, -tfd, "open %s in %s: %s on the way (the container changed it)",
                       n->target, n->root, tfd == -ELOOP ? "a symlink" : "not a directory");
    if (tfd < 0)
        return err_errno(err, -tfd, "open %s in %s", n->target, n->root);
    struct os_stat st;
    int ret = 1;
    if (rootdir_stat(nfd, journal, &st) == 0) {
        /* ERR_INVALID_CONTENT: a journal cut short, so no step ran (it is removed). */
        int r = volume_merge_recover_at(tfd, nfd, journal, err);
        if (r < 0 && r != -ERR_INVALID_CONTENT)
            ret = err_wrap(err, "upload into %s%s", n->root, n->target);
        else
            log_info("upload into %s%s: rolled back the merge a crash cut short", n->root,
                     n->target);
    }
    struct err rerr = {0};
    if (ret == 1 && fs_remove_tree_at(tfd, n->staging, &rerr) < 0)
        ret = err_set(err, rerr.code, "%s", rerr.msg);
    rootdir_close(tfd);
    return ret;
}

/*
 * Moves a bad note (and its journal) to aside/, out of every later
 * replay's way. A warning when the container made it bad (theirs: it
 * removed or replaced the target, which is its right), an error when
 * the note itself is (berth cannot read it, or did not write it so) or
 * berth cannot move it.
 */
static void
note_set_aside(int fd, const char *dir, const char *name, const char *journal, const char *why,
               bool theirs)
{
    bool made = false;
    int afd = rootdir_open_or_make_dir(fd, ASIDE_DIR, 0700, &made);
    int r = afd < 0 ? afd : rootdir_replace(fd, name, afd, name);
    if (r == 0 && journal[0] && (r = rootdir_replace(fd, journal, afd, journal)) == -ENOENT)
        r = 0;
    if (afd >= 0) {
        osfs_fsync(afd);
        rootdir_close(afd);
    }
    if (r < 0)
        log_error("upload note %s/%s: %s; setting it aside failed: %s", dir, name, why,
                  strerror(-r));
    else
        log_write(theirs ? LOG_WARN : LOG_ERROR,
                  "upload note %s/%s: %s; set aside in %s/%s (what it names is left as it is)", dir,
                  name, why, dir, ASIDE_DIR);
}

/* Whether name ends in suffix. */
static bool
ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && strcmp(name + n - k, suffix) == 0;
}

int
cp_pending_recover(const char *dir, struct err *err)
{
    int fd = notes_open(dir, false, err);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    struct osfs_dir *d = NULL;
    int ret = osfs_dir_open_at(fd, &d);
    if (ret < 0) {
        rootdir_close(fd);
        return err_errno(err, -ret, "read %s", dir);
    }
    pthread_mutex_lock(&replay_lock);
    const char *name;
    bool removed = false;
    while ((name = osfs_dir_next(d, NULL))) {
        if (note_is_own(name))
            continue; /* an upload of this process, under way */
        if (name[0] == '.') {
            /* A note or journal a dead process was writing: before the
             * staging directory, or before the merge's first step. */
            removed |= rootdir_remove(fd, name, false) == 0;
            continue;
        }
        if (strcmp(name, ASIDE_DIR) == 0 || ends_with(name, VOLUME_JOURNAL_SUFFIX))
            continue; /* a journal goes with its note */
        char journal[sizeof(((struct cp_note *)0)->journal)];
        if (snprintf(journal, sizeof(journal), "%s%s", name, VOLUME_JOURNAL_SUFFIX) >=
            (int)sizeof(journal)) {
            note_set_aside(fd, dir, name, "", "not an upload note (name too long)", false);
            continue;
        }
        cleanup_free char *text = NULL;
        size_t len = 0;
        struct err e = {0};
        struct note n = {0};
        bool theirs = false;
        int r = fs_read_file_at(fd, name, NOTE_MAX, &text, &len, &e);
        if (r == -ENOENT)
            continue; /* replayed meanwhile */
        if (r == 0 && note_parse(text, len, &n) < 0)
            r = err_set(&e, ERR_INVALID_CONTENT, "not an upload note of this version");
        if (r == 0)
            r = note_replay(&n, fd, journal, &theirs, &e);
        if (r == 1) {
            removed |= rootdir_remove(fd, journal, false) == 0;
            removed |= rootdir_remove(fd, name, false) == 0;
        } else if (r < 0) {
            /* One bad note (what it names changed under it, or it is not
             * ours) must not hold up every later upload into the
             * container: reported, kept aside for a look, and skipped. */
            note_set_aside(fd, dir, name, journal, e.msg, theirs);
        }
    }
    if (removed)
        osfs_fsync(fd);
    pthread_mutex_unlock(&replay_lock);
    osfs_dir_close(d);
    rootdir_close(fd);
    return ret;
}
