/*
 * Volumes on disk: creating them (and copy-on-write children by freezing
 * the parent into an overlay layer), deleting them, mounting their
 * overlays, crash clean-up at open, mount records for containers, and
 * safe path resolution inside a volume. The layout and the rules are in
 * volume.h. Runs on pool threads (and at start-up); blocks on disk.
 *
 * Ordering for crash safety when a child is made: (1) the parent's
 * current content (fs/ of a plain volume, u/ of an overlay) is renamed to
 * a new frozen layer l/<rand>; (2) one transaction records the parent's
 * new layer list and the child; (3) the parent's fresh upper and both
 * mounts are made. A crash between (1) and (2) leaves an l/<rand> that
 * no record names: opening the store renames it back. After (2), opening
 * the store makes whatever directories and mounts are missing.
 */
#include "store/volume.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/randid.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "store/volume_merge.h"
#include "store/volume_os.h"

#define TRASH_PREFIX ".trash-"
#define COPY_PREFIX ".copy-"
/* As many frozen layers as an option string of /proc/self/fd/N fits. */
#define VOLUME_LAYERS_MAX 200

struct volume_writer {
    char handle[VOLUME_HANDLE_MAX + 1];
    unsigned count;
    struct volume_writer *next;
};

struct volume_store {
    char *dir; /* <root>/volumes */
    struct meta *meta;
    pthread_mutex_t mu;
    struct volume_writer *writers;
};

/* ---- small helpers --------------------------------------------------------- */

bool
volume_handle_valid(const char *h)
{
    size_t n = h ? strlen(h) : 0;
    if (n == 0 || n > VOLUME_HANDLE_MAX || h[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)h[i]) && !strchr("_.-", h[i]))
            return false;
    return true;
}

/* <dir>/<handle>[/<sub>]; caller frees, NULL on OOM. */
static char *
vpath(const struct volume_store *vs, const char *handle, const char *sub)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s%s%s", vs->dir, handle, sub ? "/" : "", sub ? sub : "") < 0)
        return NULL;
    return p;
}

char *
volume_data_path(const struct volume_store *vs, const char *handle)
{
    return vpath(vs, handle, "fs/data");
}

static int
mkdir_if_missing(const char *path, mode_t mode, struct err *err)
{
    int r = osfs_mkdir(path, mode);
    if (r < 0 && r != -EEXIST)
        return err_errno(err, -r, "mkdir %s", path);
    return 0;
}

/* A /v1 upload's staging directory or journal, in fs/ beside data/. */
static bool
is_staging(const char *name)
{
    return strncmp(name, VOLUME_STAGING_PREFIX, strlen(VOLUME_STAGING_PREFIX)) == 0;
}

/*
 * Rolls back the uploads that a crash cut short in their merge (their
 * journals), then removes the staging directories left in fs by uploads
 * that died (at open no upload of this process is under way); all of it
 * stays when a journal could not be undone (the next start tries again).
 * Only fs/ is read, which no container can write: a docker cp stages in
 * its target directory inside data/, where a container can plant any
 * name, so nothing there is taken for berth's; its container's note, and
 * its journal, in the daemon's own directory find it instead
 * (store/cp_pending.h, daemon/containers_open.c).
 */
static void
clean_staging(const char *fs)
{
    int fs_fd = rootdir_open(fs);
    struct osfs_dir *d = NULL;
    if (fs_fd < 0 || osfs_dir_open_at(fs_fd, &d) < 0) {
        rootdir_close(fs_fd);
        return;
    }
    const char *name;
    size_t jlen = strlen(VOLUME_JOURNAL_SUFFIX);
    bool stuck = false;
    while ((name = osfs_dir_next(d, NULL))) {
        size_t n = strlen(name);
        if (!is_staging(name) || n <= jlen || strcmp(name + n - jlen, VOLUME_JOURNAL_SUFFIX) != 0)
            continue;
        struct err err = {0};
        if (volume_merge_recover(fs_fd, name, &err) < 0) {
            log_error("volume clean-up: %s: %s", fs, err.msg);
            stuck = true;
        }
    }
    osfs_dir_rewind(d);
    while (!stuck && (name = osfs_dir_next(d, NULL))) {
        if (!is_staging(name))
            continue;
        /* By the directory's descriptor, nothing followed. */
        struct err err = {0};
        if (fs_remove_tree_at(fs_fd, name, &err) < 0)
            log_warn("volume clean-up in %s: %s", fs, err.msg);
    }
    osfs_dir_close(d);
    rootdir_close(fs_fd);
}

/*
 * Mounts handle's overlay: lower = layers (relative to vs->dir, top-most
 * first), upper u/, work w/, at fs/. Makes the directories it needs.
 */
static int
mount_overlay(struct volume_store *vs, const char *handle, char *const *layers, size_t n,
              struct err *err)
{
    cleanup_free char *fs = vpath(vs, handle, "fs");
    cleanup_free char *up = vpath(vs, handle, "u");
    cleanup_free char *wk = vpath(vs, handle, "w");
    if (!fs || !up || !wk)
        return err_set(err, ENOMEM, "mount volume %s: out of memory", handle);
    int ret;
    /* The store's own directories are 0700 (the overlay's root takes the
     * upper's mode); only data/ inside is the volume's content. */
    if ((ret = mkdir_if_missing(fs, 0700, err)) < 0 ||
        (ret = mkdir_if_missing(up, 0700, err)) < 0 || (ret = mkdir_if_missing(wk, 0700, err)) < 0)
        return err_wrap(err, "mount volume %s", handle);
    if ((ret = osfs_chmod(up, 0700)) < 0)
        log_warn("mount volume %s: chmod %s: %s", handle, up, strerror(-ret));
    if ((ret = volume_os_mount_overlay(vs->dir, layers, n, up, wk, fs, err)) < 0)
        return err_wrap(err, "mount volume %s", handle);
    return 0;
}

/* ---- open and close -------------------------------------------------------- */

static bool
layer_listed(const struct volume_rec *v, const char *rel)
{
    for (size_t i = 0; i < v->n_layers; i++)
        if (strcmp(v->layers[i], rel) == 0)
            return true;
    return false;
}

/* Puts back a frozen layer that no record names (a child creation cut
 * between the rename and the transaction). */
static void
repair_orphan_layer(struct volume_store *vs, const struct volume_rec *v)
{
    cleanup_free char *ldir = vpath(vs, v->handle, "l");
    struct osfs_dir *d = NULL;
    if (!ldir || osfs_dir_open(ldir, &d) < 0)
        return;
    const char *name;
    while ((name = osfs_dir_next(d, NULL))) {
        if (name[0] == '.')
            continue;
        cleanup_free char *rel = NULL;
        if (asprintf(&rel, "%s/l/%s", v->handle, name) < 0) {
            rel = NULL;
            continue;
        }
        if (layer_listed(v, rel))
            continue;
        cleanup_free char *src = fs_path_join(vs->dir, rel);
        cleanup_free char *dst = vpath(vs, v->handle, v->n_layers ? "u" : "fs");
        if (!src || !dst)
            continue;
        struct err err = {0};
        /* The fresh directory, if any, was made after the transaction
         * that did not happen: it is empty. */
        if (osfs_exists(dst) && fs_remove_tree(dst, &err) < 0) {
            log_warn("volume %s: repair: %s", v->handle, err.msg);
            continue;
        }
        int r = osfs_rename(src, dst);
        if (r < 0)
            log_warn("volume %s: repair: rename %s: %s", v->handle, src, strerror(-r));
        else
            log_info("volume %s: put back layer %s after an interrupted child creation", v->handle,
                     rel);
    }
    osfs_dir_close(d);
}

/* Brings one recorded volume to a usable state: directories and mount. */
static int
volume_bring_up(struct volume_store *vs, const struct volume_rec *v, struct err *err)
{
    cleanup_free char *vd = vpath(vs, v->handle, NULL);
    cleanup_free char *fs = vpath(vs, v->handle, "fs");
    cleanup_free char *data = vpath(vs, v->handle, "fs/data");
    if (!vd || !fs || !data)
        return err_set(err, ENOMEM, "volume %s: out of memory", v->handle);
    int ret = mkdir_if_missing(vd, 0700, err);
    if (ret < 0)
        return ret;
    repair_orphan_layer(vs, v);
    if (v->n_layers) {
        bool mounted = volume_os_is_mountpoint(fs);
        if (mounted && v->mounts > 0) {
            /* A previous daemon's mount that containers still use (they
             * outlive the daemon): mounting again over the same upper and
             * work directories would corrupt both mounts. Keep it. */
        } else {
            if (mounted)
                volume_os_unmount_detach(fs); /* a previous daemon's, unused: make it afresh */
            if ((ret = mount_overlay(vs, v->handle, v->layers, v->n_layers, err)) < 0)
                return ret;
        }
    } else if ((ret = mkdir_if_missing(fs, 0700, err)) < 0) {
        return ret;
    }
    clean_staging(fs);
    return mkdir_if_missing(data, 0755, err);
}

int
volume_store_open(const char *root, struct meta *meta, struct volume_store **out, struct err *err)
{
    struct volume_store *vs = calloc(1, sizeof(*vs));
    if (!vs || !(vs->dir = fs_path_join(root, "volumes"))) {
        free(vs);
        return err_set(err, ENOMEM, "open volumes: out of memory");
    }
    vs->meta = meta;
    pthread_mutex_init(&vs->mu, NULL);
    struct volume_rec **recs = NULL;
    size_t n = 0;
    int ret = fs_mkdir_p(vs->dir, 0700, err);
    int sr = ret == 0 ? osfs_dir_spread(vs->dir) : 0; /* a hint only (osfs.h) */
    if (sr < 0)
        log_debug("volumes: %s cannot be marked as a top directory: %s", vs->dir, strerror(-sr));
    if (ret == 0)
        ret = vmeta_init(meta, err);
    if (ret == 0)
        ret = vmeta_list(meta, &recs, &n, err);
    if (ret < 0) {
        volume_store_close(vs);
        return err_wrap(err, "open volumes");
    }
    /* Directories without a record: deleted volumes' leftovers, and
     * copies for children (Windows) that a crash cut short. */
    struct osfs_dir *d = NULL;
    osfs_dir_open(vs->dir, &d);
    const char *name;
    while (d && (name = osfs_dir_next(d, NULL))) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(recs[i]->handle, name) == 0;
        if (known)
            continue;
        cleanup_free char *p = fs_path_join(vs->dir, name);
        cleanup_free char *pfs = fs_path_join(p, "fs");
        struct err rerr = {0};
        if (!p || !pfs)
            continue;
        volume_os_unmount_detach(pfs);
        if (fs_remove_tree(p, &rerr) < 0)
            log_warn("volume clean-up: %s", rerr.msg);
        else
            log_info("volume clean-up: removed %s", p);
    }
    osfs_dir_close(d);
    for (size_t i = 0; i < n; i++) {
        struct err verr = {0};
        if (volume_bring_up(vs, recs[i], &verr) < 0)
            log_error("volume %s: %s", recs[i]->handle, verr.msg);
    }
    volume_rec_list_free(recs, n);
    *out = vs;
    return 0;
}

void
volume_store_close(struct volume_store *vs)
{
    if (!vs)
        return;
    struct osfs_dir *d = NULL;
    if (vs->dir)
        osfs_dir_open(vs->dir, &d);
    const char *name;
    while (d && (name = osfs_dir_next(d, NULL))) {
        if (name[0] == '.')
            continue;
        cleanup_free char *fs = vpath(vs, name, "fs");
        if (!fs || !volume_os_is_mountpoint(fs))
            continue;
        /* Containers keep running across a restart of the daemon, and so
         * do the volume mounts they use; only unused ones are taken down. */
        struct volume_rec *rec = NULL;
        struct err ignored = {0};
        bool in_use = vmeta_get(vs->meta, name, &rec, &ignored) == 0 && rec->mounts > 0;
        volume_rec_free(rec);
        if (!in_use)
            volume_os_unmount_detach(fs);
    }
    osfs_dir_close(d);
    while (vs->writers) {
        struct volume_writer *w = vs->writers;
        vs->writers = w->next;
        free(w);
    }
    pthread_mutex_destroy(&vs->mu);
    free(vs->dir);
    free(vs);
}

/* ---- writers and the lock -------------------------------------------------- */

void
volume_store_lock(struct volume_store *vs)
{
    pthread_mutex_lock(&vs->mu);
}

void
volume_store_unlock(struct volume_store *vs)
{
    pthread_mutex_unlock(&vs->mu);
}

static unsigned
writers_locked(struct volume_store *vs, const char *handle)
{
    for (struct volume_writer *w = vs->writers; w; w = w->next)
        if (strcmp(w->handle, handle) == 0)
            return w->count;
    return 0;
}

int
volume_write_begin(struct volume_store *vs, const char *handle, char **fs_dir, bool *privileged,
                   struct err *err)
{
    struct volume_rec *v = NULL;
    pthread_mutex_lock(&vs->mu);
    int ret = vmeta_get(vs->meta, handle, &v, err);
    struct volume_writer *w = vs->writers;
    while (ret == 0 && w && strcmp(w->handle, handle) != 0)
        w = w->next;
    if (ret == 0 && !w) {
        if (!(w = calloc(1, sizeof(*w)))) {
            ret = err_set(err, ENOMEM, "volume %s: out of memory", handle);
        } else {
            snprintf(w->handle, sizeof(w->handle), "%s", handle);
            w->next = vs->writers;
            vs->writers = w;
        }
    }
    if (ret == 0 && !(*fs_dir = vpath(vs, handle, "fs")))
        ret = err_set(err, ENOMEM, "volume %s: out of memory", handle);
    if (ret == 0) {
        w->count++;
        *privileged = v->privileged;
    }
    pthread_mutex_unlock(&vs->mu);
    volume_rec_free(v);
    return ret;
}

void
volume_write_end(struct volume_store *vs, const char *handle)
{
    pthread_mutex_lock(&vs->mu);
    for (struct volume_writer **p = &vs->writers; *p; p = &(*p)->next) {
        if (strcmp((*p)->handle, handle) != 0)
            continue;
        if (--(*p)->count == 0) {
            struct volume_writer *dead = *p;
            *p = dead->next;
            free(dead);
        }
        break;
    }
    pthread_mutex_unlock(&vs->mu);
}

/* ---- create ---------------------------------------------------------------- */

/* Freezes parent p: its current content becomes the frozen layer rel. */
static int
freeze(struct volume_store *vs, const struct volume_rec *p, const char *rel, struct err *err)
{
    cleanup_free char *ldir = vpath(vs, p->handle, "l");
    cleanup_free char *src = vpath(vs, p->handle, p->n_layers ? "u" : "fs");
    cleanup_free char *dst = fs_path_join(vs->dir, rel);
    if (!ldir || !src || !dst)
        return err_set(err, ENOMEM, "freeze volume %s: out of memory", p->handle);
    int ret = mkdir_if_missing(ldir, 0700, err);
    if (ret < 0)
        return ret;
    if (p->n_layers) {
        cleanup_free char *fs = vpath(vs, p->handle, "fs");
        if (!fs)
            return err_set(err, ENOMEM, "freeze volume %s: out of memory", p->handle);
        if ((ret = volume_os_unmount(fs, err)) < 0)
            return err_wrap(err, "freeze volume %s", p->handle);
    }
    if ((ret = osfs_rename(src, dst)) < 0) {
        ret = err_errno(err, -ret, "freeze volume %s: rename %s", p->handle, src);
        if (p->n_layers) {
            struct err merr = {0};
            if (mount_overlay(vs, p->handle, p->layers, p->n_layers, &merr) < 0)
                log_error("%s", merr.msg);
        }
        return ret;
    }
    return 0;
}

/* Undoes freeze after the transaction failed. */
static void
unfreeze(struct volume_store *vs, const struct volume_rec *p, const char *rel)
{
    cleanup_free char *src = fs_path_join(vs->dir, rel);
    cleanup_free char *dst = vpath(vs, p->handle, p->n_layers ? "u" : "fs");
    int r = src && dst ? osfs_rename(src, dst) : -ENOMEM;
    if (r < 0) {
        log_error("volume %s: cannot put back %s: %s", p->handle, rel, strerror(-r));
        return;
    }
    struct err err = {0};
    if (p->n_layers && mount_overlay(vs, p->handle, p->layers, p->n_layers, &err) < 0)
        log_error("%s", err.msg);
}

/*
 * Copies parent p's data into a new <dir>/.copy-<rand>/fs/data, which
 * becomes the child's directory once its record is in (a crash before
 * leaves a directory no record names, removed at the next start).
 * *out is the new directory (caller frees).
 */
static int
copy_parent(struct volume_store *vs, const struct volume_rec *p, char **out, struct err *err)
{
    char hex[17];
    int ret = randid_hex(hex, 8, err);
    if (ret < 0)
        return ret;
    cleanup_free char *dir = NULL, *fs = NULL, *data = NULL;
    if (asprintf(&dir, "%s/%s%s", vs->dir, COPY_PREFIX, hex) < 0) {
        dir = NULL;
        return err_set(err, ENOMEM, "copy volume %s: out of memory", p->handle);
    }
    if (!(fs = fs_path_join(dir, "fs")) || !(data = fs_path_join(fs, "data")))
        return err_set(err, ENOMEM, "copy volume %s: out of memory", p->handle);
    int sfd = -1, dfd = -1;
    if ((ret = mkdir_if_missing(dir, 0700, err)) < 0 ||
        (ret = mkdir_if_missing(fs, 0700, err)) < 0 ||
        (ret = mkdir_if_missing(data, 0755, err)) < 0)
        goto fail;
    if ((ret = volume_open_dir(vs, p->handle, "", &sfd, err)) < 0)
        goto fail;
    if ((dfd = rootdir_open(data)) < 0) {
        ret = err_errno(err, -dfd, "open %s", data);
        goto fail;
    }
    if ((ret = volume_copy_tree(sfd, dfd, err)) < 0)
        goto fail;
    rootdir_close(sfd);
    rootdir_close(dfd);
    *out = steal_ptr(&dir);
    return 0;
fail:
    rootdir_close(sfd);
    rootdir_close(dfd);
    struct err rerr = {0};
    if (fs_remove_tree(dir, &rerr) < 0)
        log_warn("copy volume %s: %s", p->handle, rerr.msg);
    return err_wrap(err, "copy parent volume %s", p->handle);
}

static int
create_locked(struct volume_store *vs, const struct volume_create_opts *o, const char *handle,
              struct err *err)
{
    struct volume_rec rec = {0};
    snprintf(rec.handle, sizeof(rec.handle), "%s", handle);
    rec.parent = (char *)o->parent;
    rec.props = (struct volume_prop *)o->props;
    rec.n_props = o->n_props;
    rec.created_at = (int64_t)time(NULL);
    rec.ttl_s = o->ttl_s;
    rec.expires_at = o->ttl_s > 0 ? rec.created_at + o->ttl_s : 0;
    rec.privileged = o->privileged;

    cleanup_free char *vd = vpath(vs, handle, NULL);
    if (!vd)
        return err_set(err, ENOMEM, "create volume %s: out of memory", handle);
    struct volume_rec *p = NULL;
    char **layers = NULL;
    char rel[VOLUME_HANDLE_MAX + 64] = "";
    /* Without overlays (Windows) a child starts as a copy of its parent. */
    bool copy_children = !volume_os_overlay();
    char *copy = NULL;
    struct volume_rec *existing = NULL;
    int ret = vmeta_get(vs->meta, handle, &existing, err);
    volume_rec_free(existing);
    if (ret == 0)
        return err_set(err, EEXIST, "volume %s: the handle is taken", handle);
    if (ret != -ENOENT)
        return ret;
    memset(err, 0, sizeof(*err));
    ret = 0;
    if (o->parent) {
        ret = vmeta_get(vs->meta, o->parent, &p, err);
        if (ret == -ENOENT)
            ret = err_set(err, ENOENT, "parent volume %s: not found", o->parent);
        if (ret == 0 && writers_locked(vs, o->parent) > 0)
            ret = err_set(err, ERR_CONFLICT, "parent volume %s: an upload into it is in progress",
                          o->parent);
        if (ret == 0 && !copy_children && p->n_layers + 1 > VOLUME_LAYERS_MAX)
            ret = err_set(err, ERR_INVALID_CONTENT,
                          "parent volume %s: %zu generations of children deep, and an overlay "
                          "stacks at most %d",
                          o->parent, p->n_layers, VOLUME_LAYERS_MAX);
        if (ret == 0 && p->mounts > 0)
            ret = err_set(err, ERR_CONFLICT,
                          "parent volume %s: mounted by %lld container%s; a child can only be "
                          "made of a volume no container mounts",
                          o->parent, (long long)p->mounts, p->mounts == 1 ? "" : "s");
        if (copy_children) {
            if (ret == 0)
                ret = copy_parent(vs, p, &copy, err);
            if (ret < 0) {
                volume_rec_free(p);
                return ret;
            }
            goto insert;
        }
        char hex[17];
        if (ret == 0 && (ret = randid_hex(hex, 8, err)) == 0)
            snprintf(rel, sizeof(rel), "%s/l/%s", o->parent, hex);
        if (ret == 0 && !(layers = calloc(p->n_layers + 1, sizeof(char *))))
            ret = err_set(err, ENOMEM, "create volume %s: out of memory", handle);
        if (ret == 0) {
            layers[0] = rel;
            for (size_t i = 0; i < p->n_layers; i++)
                layers[i + 1] = p->layers[i];
            rec.layers = layers;
            rec.n_layers = p->n_layers + 1;
        }
        if (ret == 0)
            ret = freeze(vs, p, rel, err);
        if (ret < 0) {
            free(layers);
            volume_rec_free(p);
            return ret;
        }
    }
insert:
    ret = vmeta_insert(vs->meta, &rec, rec.n_layers ? rec.layers : NULL, rec.n_layers, err);
    if (ret < 0) {
        if (copy) {
            struct err rerr = {0};
            if (fs_remove_tree(copy, &rerr) < 0)
                log_warn("create volume %s: %s", handle, rerr.msg);
        } else if (p) {
            unfreeze(vs, p, rel);
        }
    } else {
        /* Whatever was at the new volume's place belonged to no record. */
        cleanup_free char *vfs = vpath(vs, handle, "fs");
        struct err rerr = {0};
        if (vfs)
            volume_os_unmount_detach(vfs);
        if (fs_remove_tree(vd, &rerr) < 0)
            log_warn("create volume %s: %s", handle, rerr.msg);
        int r = copy ? osfs_rename(copy, vd) : 0;
        if (r < 0)
            log_error("create volume %s: move the copy of %s into place: %s", handle, o->parent,
                      strerror(-r));
        if (p && !copy) {
            /* The parent goes on over its frozen layers with a fresh upper. */
            cleanup_free char *pw = vpath(vs, p->handle, "w");
            struct err werr = {0};
            if (pw && fs_remove_tree(pw, &werr) < 0)
                log_warn("%s", werr.msg);
            struct volume_rec np = *p;
            np.layers = rec.layers;
            np.n_layers = rec.n_layers;
            if (volume_bring_up(vs, &np, &werr) < 0)
                log_error("parent volume %s: %s", p->handle, werr.msg);
        }
        ret = volume_bring_up(vs, &rec, err);
    }
    free(layers);
    free(copy);
    volume_rec_free(p);
    return ret;
}

int
volume_create(struct volume_store *vs, const struct volume_create_opts *o, struct volume_rec **out,
              struct err *err)
{
    char gen[33];
    const char *handle = o->handle;
    if (!handle) {
        int ret = randid_hex(gen, 16, err);
        if (ret < 0)
            return ret;
        handle = gen;
    }
    if (!volume_handle_valid(handle))
        return err_set(err, EINVAL,
                       "handle %s: expected 1-128 characters of [A-Za-z0-9_.-], not starting "
                       "with a dot",
                       handle);
    if (o->parent && !volume_handle_valid(o->parent))
        return err_set(err, EINVAL, "parent %s: not a volume handle", o->parent);
    pthread_mutex_lock(&vs->mu);
    int ret = create_locked(vs, o, handle, err);
    pthread_mutex_unlock(&vs->mu);
    if (ret < 0)
        return ret;
    return vmeta_get(vs->meta, handle, out, err);
}

/* ---- delete ---------------------------------------------------------------- */

/* What volume_delete and volume_delete_expired delete: a handle (with or
 * without force), or an expired volume if it still is. */
struct delete_what {
    const char *handle;
    bool force;
    const struct volume_expiry *expiry; /* not NULL: vmeta_delete_expired at now */
    int64_t now;
};

static int
delete_records(struct volume_store *vs, const struct delete_what *w, char ***gone, size_t *ngone,
               struct err *err)
{
    if (w->expiry)
        return vmeta_delete_expired(vs->meta, w->expiry, w->now, gone, ngone, err);
    return vmeta_delete(vs->meta, w->handle, w->force, gone, ngone, err);
}

static int
delete_volume(struct volume_store *vs, const struct delete_what *w, char ***deleted, size_t *n,
              struct err *err)
{
    const char *handle = w->handle;
    char **gone = NULL;
    size_t ngone = 0;
    pthread_mutex_lock(&vs->mu);
    int ret = 0;
    if (writers_locked(vs, handle) > 0)
        ret = err_set(err, ERR_CONFLICT, "volume %s: an upload into it is in progress", handle);
    if (ret == 0)
        ret = delete_records(vs, w, &gone, &ngone, err);
    char **trash = ret == 0 ? calloc(ngone + 1, sizeof(char *)) : NULL;
    for (size_t i = 0; ret == 0 && i < ngone; i++) {
        cleanup_free char *fs = vpath(vs, gone[i], "fs");
        cleanup_free char *vd = vpath(vs, gone[i], NULL);
        char hex[17];
        if (!fs || !vd || randid_hex(hex, 8, NULL) < 0)
            continue;
        volume_os_unmount_detach(fs);
        char *t = NULL;
        if (asprintf(&t, "%s/%s%s", vs->dir, TRASH_PREFIX, hex) < 0)
            continue;
        int r = osfs_rename(vd, t);
        if (r < 0) {
            log_warn("delete volume %s: rename %s: %s", gone[i], vd, strerror(-r));
            free(t);
            continue;
        }
        if (trash)
            trash[i] = t;
        else
            free(t);
    }
    pthread_mutex_unlock(&vs->mu);
    if (ret < 0)
        return ret;
    /* The removal itself needs no lock: nothing names the trash. */
    for (size_t i = 0; trash && i < ngone; i++) {
        struct err rerr = {0};
        if (trash[i] && fs_remove_tree(trash[i], &rerr) < 0)
            log_warn("delete volume: %s (removed at the next start)", rerr.msg);
        free(trash[i]);
    }
    free(trash);
    *deleted = gone;
    *n = ngone;
    return 0;
}

int
volume_delete(struct volume_store *vs, const char *handle, bool force, char ***deleted, size_t *n,
              struct err *err)
{
    struct delete_what w = {.handle = handle, .force = force};
    return delete_volume(vs, &w, deleted, n, err);
}

int
volume_delete_expired(struct volume_store *vs, const struct volume_expiry *e, int64_t now,
                      char ***deleted, size_t *n, struct err *err)
{
    struct delete_what w = {.handle = e->handle, .expiry = e, .now = now};
    return delete_volume(vs, &w, deleted, n, err);
}

/* ---- mounts ---------------------------------------------------------------- */

int
volume_mount_add(struct volume_store *vs, const char *handle, const char *user_id, bool readonly,
                 char **path_out, struct err *err)
{
    if (!volume_handle_valid(handle))
        return err_set(err, EINVAL, "volume %s: not a volume handle", handle ? handle : "");
    if (!user_id || !*user_id)
        return err_set(err, EINVAL, "mount volume %s: no user id", handle);
    cleanup_free char *path = volume_data_path(vs, handle);
    if (!path)
        return err_set(err, ENOMEM, "mount volume %s: out of memory", handle);
    pthread_mutex_lock(&vs->mu);
    int ret = vmeta_mount_add(vs->meta, handle, user_id, readonly, err);
    pthread_mutex_unlock(&vs->mu);
    if (ret < 0)
        return ret;
    if (path_out)
        *path_out = steal_ptr(&path);
    return 0;
}

int
volume_mount_remove(struct volume_store *vs, const char *handle, const char *user_id,
                    struct err *err)
{
    if (!volume_handle_valid(handle) || !user_id)
        return err_set(err, EINVAL, "unmount volume: bad handle or user id");
    pthread_mutex_lock(&vs->mu);
    int ret = vmeta_mount_remove(vs->meta, handle, user_id, err);
    pthread_mutex_unlock(&vs->mu);
    return ret;
}

/* ---- paths ----------------------------------------------------------------- */

int
volume_path_clean(const char *path, char **rel, struct err *err)
{
    if (!path)
        path = "";
    size_t len = strlen(path);
    if (len > 4096)
        return err_set(err, EINVAL, "path: %zu bytes, over the limit of 4096", len);
    char *out = malloc(len + 1);
    if (!out)
        return err_set(err, ENOMEM, "path: out of memory");
    size_t o = 0;
    const char *p = path;
    while (*p) {
        const char *end = strchrnul(p, '/');
        size_t n = (size_t)(end - p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            free(out);
            return err_set(err, EINVAL, "path %s: has a .. component", path);
        }
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o > 0)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p = *end ? end + 1 : end;
    }
    out[o] = '\0';
    *rel = out;
    return 0;
}

/* Opens data/<rel> component by component, refusing symlinks. */
int
volume_open_dir(struct volume_store *vs, const char *handle, const char *path, int *fd_out,
                struct err *err)
{
    if (!volume_handle_valid(handle))
        return err_set(err, EINVAL, "volume %s: not a volume handle", handle ? handle : "");
    cleanup_free char *rel = NULL;
    int ret = volume_path_clean(path, &rel, err);
    if (ret < 0)
        return ret;
    cleanup_free char *fs = vpath(vs, handle, "fs");
    if (!fs)
        return err_set(err, ENOMEM, "volume %s: out of memory", handle);
    /* fs/ is the store's (an overlay's mount point); data/ in it, the
     * volume's content, is not followed if it were a symlink. */
    int vfd = rootdir_open(fs);
    int fd = vfd < 0 ? vfd : rootdir_open_dir(vfd, "data");
    rootdir_close(vfd);
    if (fd < 0)
        return fd == -ENOENT ? err_set(err, ENOENT, "volume %s: not found", handle)
                             : err_errno(err, -fd, "open volume %s", handle);
    char *save = NULL;
    for (char *c = strtok_r(rel, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        int nfd = rootdir_open_dir(fd, c);
        int e = -nfd;
        rootdir_close(fd);
        if (nfd < 0) {
            if (e == ENOENT)
                return err_set(err, ENOENT, "volume %s: path %s: %s is missing", handle, path, c);
            if (e == ELOOP || e == ENOTDIR)
                return err_set(err, ERR_INVALID_CONTENT,
                               "volume %s: path %s: %s is a symlink or not a directory", handle,
                               path, c);
            return err_errno(err, e, "volume %s: open %s", handle, path);
        }
        fd = nfd;
    }
    *fd_out = fd;
    return 0;
}

/* ---- size ------------------------------------------------------------------ */

static int64_t
tree_size(int dfd, int depth)
{
    struct osfs_dir *d = NULL;
    if (osfs_dir_open_at(dfd, &d) < 0) {
        rootdir_close(dfd);
        return 0;
    }
    int64_t total = 0;
    const char *name;
    while ((name = osfs_dir_next(d, NULL))) {
        struct os_stat st;
        if (rootdir_stat(dfd, name, &st) < 0)
            continue;
        if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
            total += st.st_size;
        } else if (S_ISDIR(st.st_mode) && depth < 512) {
            int sub = rootdir_open_dir(dfd, name);
            if (sub >= 0)
                total += tree_size(sub, depth + 1);
        }
    }
    osfs_dir_close(d);
    rootdir_close(dfd);
    return total;
}

int
volume_size(struct volume_store *vs, const char *handle, int64_t *bytes, struct err *err)
{
    int fd = -1;
    int ret = volume_open_dir(vs, handle, "", &fd, err);
    if (ret < 0)
        return ret;
    *bytes = tree_size(fd, 0);
    return 0;
}
