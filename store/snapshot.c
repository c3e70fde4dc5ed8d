/*
 * Snapshot directories: atomic build-and-rename, single flight per chain
 * ID, and the unpack slots (see snapshot.h). One mutex guards the list of
 * builds in flight and the free slot count; one condition variable wakes
 * both the threads waiting for a build and those waiting for a slot, which
 * then recheck what they wait for. Builds are few, so a list will do.
 *
 * Called from pool threads; snapshot_acquire, commit, abort and remove
 * block.
 */
#include "store/snapshot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "store/digest.h"

/* Tries of a temporary name: pid and sequence repeat across restarts (a
 * daemon that is pid 1 in its container), and a leftover may hold one. */
#define TMP_NAME_TRIES 64

struct snapshot_build {
    struct snapshot_build *next;
    char hex[DIGEST_HEX_LEN + 1];
};

struct snapshot_store {
    char *dir; /* <root>/snapshots */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned slots_free;
    struct snapshot_build *builds;
    atomic_uint tmp_seq;
};

struct snapshot_claim {
    struct snapshot_store *s;
    struct snapshot_build *build;
    char chain_id[DIGEST_STR_LEN];
    char *tmp; /* <dir>/tmp-<hex>-<pid>-<seq> */
    char *fs;  /* <tmp>/fs */
};

int
snapshot_store_clean(const char *root, struct err *err)
{
    cleanup_free char *dir = fs_path_join(root, "snapshots");
    if (!dir)
        return err_set(err, ENOMEM, "clean snapshots: out of memory");
    struct osfs_dir *d = NULL;
    int ret = osfs_dir_open(dir, &d);
    if (ret < 0) {
        if (ret == -ENOENT)
            return 0;
        return err_errno(err, -ret, "open %s", dir);
    }
    const char *name;
    while ((name = osfs_dir_next(d, NULL)) != NULL) {
        if (strncmp(name, "tmp-", 4) != 0)
            continue;
        cleanup_free char *path = fs_path_join(dir, name);
        if (!path) {
            ret = err_set(err, ENOMEM, "clean snapshots: out of memory");
            break;
        }
        log_info("snapshots: removing %s left by an earlier run", path);
        /* A leftover that will not go (a filesystem mounted in it) is no
         * reason to refuse the store: nothing looks a tmp- name up. */
        struct err rerr = {0};
        if (fs_remove_tree(path, &rerr) < 0)
            log_warn("snapshots: %s stays: %s", path, rerr.msg);
    }
    osfs_dir_close(d);
    return ret;
}

int
snapshot_store_open(const char *root, unsigned max_unpacks, struct snapshot_store **out,
                    struct err *err)
{
    struct snapshot_store *s = calloc(1, sizeof(*s));
    if (!s)
        return err_set(err, ENOMEM, "open snapshots: out of memory");
    s->dir = fs_path_join(root, "snapshots");
    if (!s->dir) {
        free(s);
        return err_set(err, ENOMEM, "open snapshots: out of memory");
    }
    int r = fs_mkdir_p(s->dir, 0700, err);
    if (r < 0) {
        free(s->dir);
        free(s);
        return r;
    }
    /* Each snapshot in block groups of its own (osfs.h): a hint only. */
    if ((r = osfs_dir_spread(s->dir)) < 0)
        log_debug("snapshots: %s cannot be marked as a top directory: %s", s->dir, strerror(-r));
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->slots_free = max_unpacks ? max_unpacks : 1;
    *out = s;
    return 0;
}

void
snapshot_store_free(struct snapshot_store *s)
{
    if (!s)
        return;
    while (s->builds) {
        struct snapshot_build *b = s->builds;
        s->builds = b->next;
        free(b);
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s->dir);
    free(s);
}

/* <dir>/<hex>[/sub]; NULL for an invalid chain ID or on OOM. */
static char *
snapshot_dir_path(const struct snapshot_store *s, const char *chain_id, const char *sub)
{
    const char *hex = digest_hex(chain_id);
    if (!hex)
        return NULL;
    char *p = NULL;
    if (asprintf(&p, "%s/%s%s%s", s->dir, hex, sub ? "/" : "", sub ? sub : "") < 0)
        return NULL;
    return p;
}

char *
snapshot_path(const struct snapshot_store *s, const char *chain_id)
{
    return snapshot_dir_path(s, chain_id, "fs");
}

bool
snapshot_exists(struct snapshot_store *s, const char *chain_id)
{
    cleanup_free char *p = snapshot_dir_path(s, chain_id, NULL);
    struct os_stat st;
    return p && osfs_stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static struct snapshot_build *
build_find(struct snapshot_store *s, const char *hex)
{
    for (struct snapshot_build *b = s->builds; b; b = b->next) {
        if (strcmp(b->hex, hex) == 0)
            return b;
    }
    return NULL;
}

/* Unlinks b from the list, frees it, gives the slot back, wakes everyone. */
static void
build_finish(struct snapshot_store *s, struct snapshot_build *b)
{
    pthread_mutex_lock(&s->lock);
    for (struct snapshot_build **pp = &s->builds; *pp; pp = &(*pp)->next) {
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    }
    s->slots_free++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    free(b);
}

static void
claim_free(struct snapshot_claim *c)
{
    free(c->tmp);
    free(c->fs);
    free(c);
}

int
snapshot_acquire(struct snapshot_store *s, const char *chain_id, struct snapshot_claim **claim,
                 struct err *err)
{
    *claim = NULL;
    const char *hex = digest_hex(chain_id);
    if (!hex)
        return err_set(err, EINVAL, "snapshot: invalid chain id %s", chain_id ? chain_id : "");
    /* The fast path: a ready snapshot needs no slot. */
    if (snapshot_exists(s, chain_id))
        return SNAPSHOT_EXISTS;

    struct snapshot_claim *c = calloc(1, sizeof(*c));
    struct snapshot_build *b = calloc(1, sizeof(*b));
    if (!c || !b) {
        free(c);
        free(b);
        return err_set(err, ENOMEM, "snapshot %s: out of memory", chain_id);
    }
    snprintf(b->hex, sizeof(b->hex), "%s", hex);
    snprintf(c->chain_id, sizeof(c->chain_id), "%s", chain_id);

    pthread_mutex_lock(&s->lock);
    while (s->slots_free == 0)
        pthread_cond_wait(&s->cond, &s->lock);
    s->slots_free--;
    for (;;) {
        if (snapshot_exists(s, chain_id)) {
            s->slots_free++;
            pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->lock);
            free(b);
            free(c);
            return SNAPSHOT_EXISTS;
        }
        if (!build_find(s, hex))
            break;
        pthread_cond_wait(&s->cond, &s->lock);
    }
    b->next = s->builds;
    s->builds = b;
    pthread_mutex_unlock(&s->lock);
    c->s = s;
    c->build = b;

    int r;
    for (int tries = 1;; tries++) {
        unsigned seq = atomic_fetch_add(&s->tmp_seq, 1);
        free(c->tmp);
        if (asprintf(&c->tmp, "%s/tmp-%s-%ld-%u", s->dir, hex, os_pid(), seq) < 0) {
            c->tmp = NULL;
            r = err_set(err, ENOMEM, "snapshot %s: out of memory", chain_id);
            goto fail;
        }
        if ((r = osfs_mkdir(c->tmp, 0700)) == 0)
            break;
        if (r != -EEXIST || tries == TMP_NAME_TRIES) {
            r = err_errno(err, -r, "snapshot %s: mkdir %s", chain_id, c->tmp);
            free(c->tmp); /* not ours: the abort must not remove it */
            c->tmp = NULL;
            goto fail;
        }
    }
    c->fs = fs_path_join(c->tmp, "fs");
    if (!c->fs) {
        r = err_set(err, ENOMEM, "snapshot %s: out of memory", chain_id);
        goto fail;
    }
    /* The layer's root: 0755 like any rootfs unless the layer says else. */
    if ((r = osfs_mkdir(c->fs, 0755)) < 0) {
        r = err_errno(err, -r, "snapshot %s: mkdir %s", chain_id, c->fs);
        goto fail;
    }
    *claim = c;
    return SNAPSHOT_CLAIMED;

fail:
    snapshot_abort(c);
    return r;
}

const char *
snapshot_claim_dir(const struct snapshot_claim *c)
{
    return c->fs;
}

int
snapshot_commit(struct snapshot_claim *c, struct err *err)
{
    struct snapshot_store *s = c->s;
    cleanup_free char *final = snapshot_dir_path(s, c->chain_id, NULL);
    cleanup_free char *meta = fs_path_join(c->tmp, "meta");
    cleanup_free char *text = NULL;
    int r;
    if (!final || !meta || asprintf(&text, "chain %s\n", c->chain_id) < 0) {
        text = NULL;
        r = err_set(err, ENOMEM, "commit snapshot %s: out of memory", c->chain_id);
        goto fail;
    }
    r = fs_write_file_atomic(meta, text, strlen(text), 0600, err);
    if (r < 0)
        goto fail;
    /* Everything unpacked must be on disk before the name says it is whole. */
    {
        int fd = rootdir_open(c->tmp);
        r = fd < 0 ? fd : rootdir_fd_sync_fs(fd);
        rootdir_close(fd);
        if (r < 0) {
            r = err_errno(err, -r, "commit snapshot %s: sync %s", c->chain_id, c->tmp);
            goto fail;
        }
    }
    if ((r = osfs_rename(c->tmp, final)) < 0) {
        r = err_errno(err, -r, "commit snapshot %s: rename %s to %s", c->chain_id, c->tmp, final);
        goto fail;
    }
    struct err sync_err = {0};
    if (fs_fsync_dir(s->dir, &sync_err) < 0)
        log_warn("commit snapshot %s: %s", c->chain_id, sync_err.msg);
    build_finish(s, c->build);
    claim_free(c);
    return 0;

fail:
    err_wrap(err, "snapshot %s", c->chain_id);
    snapshot_abort(c);
    return r;
}

void
snapshot_abort(struct snapshot_claim *c)
{
    if (!c)
        return;
    if (c->tmp) {
        struct err e = {0};
        if (fs_remove_tree(c->tmp, &e) < 0)
            log_warn("abort snapshot %s: %s (removed at next start)", c->chain_id, e.msg);
    }
    build_finish(c->s, c->build);
    claim_free(c);
}

int
snapshot_dir_set_aside(const char *dir, const char *hex, char **aside, struct err *err)
{
    static atomic_uint aside_seq;
    *aside = NULL;
    cleanup_free char *final = fs_path_join(dir, hex);
    if (!final)
        return err_set(err, ENOMEM, "set snapshot %s aside: out of memory", hex);
    for (int tries = 1;; tries++) {
        char *tmp = NULL;
        unsigned seq = atomic_fetch_add(&aside_seq, 1);
        if (asprintf(&tmp, "%s/" SNAPSHOT_ASIDE_PREFIX "%s-%ld-%u", dir, hex, os_pid(), seq) < 0)
            return err_set(err, ENOMEM, "set snapshot %s aside: out of memory", hex);
        int r = osfs_rename(final, tmp);
        if (r == 0) {
            /* The new name on disk before any of the tree goes. */
            struct err sync_err = {0};
            if (fs_fsync_dir(dir, &sync_err) < 0)
                log_warn("set snapshot %s aside: %s", hex, sync_err.msg);
            *aside = tmp;
            return 0;
        }
        free(tmp);
        if (r == -ENOENT)
            return 0;
        if ((r != -EEXIST && r != -ENOTEMPTY) || tries == TMP_NAME_TRIES)
            return err_errno(err, -r, "set snapshot %s aside: rename %s", hex, final);
    }
}

int
snapshot_remove(struct snapshot_store *s, const char *chain_id, struct err *err)
{
    const char *hex = digest_hex(chain_id);
    if (!hex)
        return err_set(err, EINVAL, "remove snapshot: invalid chain id %s",
                       chain_id ? chain_id : "");
    cleanup_free char *tmp = NULL;
    pthread_mutex_lock(&s->lock);
    if (build_find(s, hex)) {
        pthread_mutex_unlock(&s->lock);
        return err_set(err, ERR_CONFLICT, "remove snapshot %s: it is being built", chain_id);
    }
    int r = snapshot_dir_set_aside(s->dir, hex, &tmp, err);
    pthread_mutex_unlock(&s->lock);
    if (r < 0)
        return err_wrap(err, "remove snapshot %s", chain_id);
    if (tmp && fs_remove_tree(tmp, err) < 0)
        return err_wrap(err, "remove snapshot %s", chain_id);
    return 0;
}
