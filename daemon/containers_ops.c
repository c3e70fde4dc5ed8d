/*
 * The blocking side of containers: the create and delete steps (record,
 * image use, overlay mount, runtime). The record itself is
 * containers_record.c, the reload at start-up containers_open.c, user
 * names looked up in a container's /etc/passwd ctr_user.c. Pool threads,
 * or main before the loop runs.
 *
 * Order is what makes a crash harmless: the record is written (state
 * "creating") before any image use, mount or runtime state exists, and
 * rewritten as "deleting" before the undo starts; the mount is journaled
 * (store/mount_journal.h) by layers_mount before mount(2). At start-up a
 * record in either state is finished off with containers_delete_blocking,
 * whose every step is a no-op when already done, and then the journal is
 * replayed: a mount whose container is gone (its directory removed, its
 * record unreadable) is undone there.
 *
 * What is synced, and why no more (issue 16): the record is made durable
 * once, as "running", when the container exists (its writable layer is
 * the user's until the delete), and as "deleting", before the delete
 * starts removing what a "running" record would still claim (the image
 * use, the volumes' users). The "creating" record only has to survive a
 * crash of the daemon, which the page cache gives: what it guards either
 * dies with the machine (the overlay mount, the runtime's processes) or
 * is reconciled at start-up without it (the image use: image users that
 * no loaded container is are dropped, containers_open.c). A container
 * that mounts volumes is the exception: their users are recorded durably
 * by the volume store, and only this record names them for the undo, so
 * its "creating" record is synced as before.
 */
#include "daemon/containers.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "common/strv.h"
#include "store/digest.h"
#include "daemon/ctr_stops.h"
#include "daemon/daemon.h"
#include "daemon/svc_main.h"
#include "store/layer.h"
#include "store/oci.h"
#include "store/refname.h"
#include "store/scratch.h"
#include "store/store.h"
#ifdef _WIN32
#include "store/cim_chain.h"
#include "store/wcstorage.h"
#endif
#include "daemon/containers_int.h"

/* limits.disk_bytes: what bounds the writable layer (store/scratch.h), beside it. */
#define SCRATCH_RECORD "scratch.disk"
#define SCRATCH_IMAGE "scratch.img"

/* ---- create and delete ------------------------------------------------------ */

/* env over base, by name: a name in env replaces the base's entry. */
static char **
env_layer(char *const *base, char *const *env)
{
    char **out = calloc(1, sizeof(char *));
    size_t n = 0;
    for (size_t i = 0; out && base && base[i]; i++)
        if (strv_env_find(env, base[i]) < 0 && strv_push(&out, &n, base[i]) < 0) {
            strv_free(out);
            out = NULL;
        }
    for (size_t i = 0; out && env && env[i]; i++)
        if (strv_push(&out, &n, env[i]) < 0) {
            strv_free(out);
            out = NULL;
        }
    return out;
}

/*
 * The image config's run defaults, as Docker applies them: the
 * container's env over the image's Env, WorkingDir when the request
 * gave no working_dir, and Entrypoint, Cmd and User kept for its
 * processes.
 */
static int
apply_image_config(struct store *st, const struct meta_image *img, struct ctr_params *p,
                   struct err *err)
{
    cleanup_free char *buf = NULL;
    size_t len = 0;
    int ret = blob_read_small(st->blobs, img->config_digest, OCI_DOC_MAX, &buf, &len, err);
    if (ret < 0)
        return ret;
    struct oci_config *cfg = NULL;
    if ((ret = oci_config_parse(buf, len, img->config_digest, &cfg, err)) < 0)
        return ret;
    bool oom = false, oom2 = false, oom3 = false;
    char **env = env_layer(cfg->env, p->env);
    strv_free(p->image_entrypoint);
    strv_free(p->image_cmd);
    free(p->image_user);
    p->image_entrypoint = strv_dup(cfg->entrypoint, &oom);
    p->image_cmd = strv_dup(cfg->cmd, &oom2);
    p->image_user = cfg->user ? strdup(cfg->user) : NULL;
    if (!p->working_dir && cfg->working_dir && cfg->working_dir[0] == '/' &&
        !(p->working_dir = strdup(cfg->working_dir)))
        oom3 = true;
    oom3 |= cfg->user && !p->image_user;
    oci_config_free(cfg);
    if (!env || oom || oom2 || oom3) {
        strv_free(env);
        return err_set(err, ENOMEM, "image config: out of memory");
    }
    strv_free(p->env);
    p->env = env;
    return 0;
}

/* Whether the container mounts a volume of the store. */
static bool
ctr_mounts_volumes(const struct ctr_params *p)
{
    for (size_t i = 0; p->mount_volumes && i < p->nmounts; i++)
        if (p->mount_volumes[i])
            return true;
    return false;
}

static int delete_steps(struct containers *reg, struct store *st, const struct ctr_params *p,
                        const char *dir, bool undo, char **trash, struct err *err);

#ifndef _WIN32
static int
mount_rootfs(struct store *st, const struct ctr_params *p, const char *dir,
             const struct meta_image *img, struct mounted_layers **m, struct err *err)
{
    size_t n = img ? img->n_layers : 1;
    if (n == 0)
        return err_set(err, ERR_INVALID_CONTENT, "image %s: has no layers", p->image_digest);
    char **dirs = calloc(n, sizeof(char *));
    if (!dirs)
        return err_set(err, ENOMEM, "mount rootfs: out of memory");
    int ret = 0;
    for (size_t i = 0; i < n && ret == 0; i++) {
        dirs[i] = img ? snapshot_path(st->snaps, img->layers[i].chain_id) : strdup(p->rootfs_dir);
        if (!dirs[i])
            ret = err_set(err, ENOMEM, "mount rootfs: out of memory");
    }
    struct layer_list *list = NULL;
    cleanup_free char *scratch = fs_path_join(dir, "scratch");
    cleanup_free char *target = fs_path_join(dir, "rootfs");
    cleanup_free char *srec = fs_path_join(dir, SCRATCH_RECORD);
    cleanup_free char *simg = fs_path_join(dir, SCRATCH_IMAGE);
    if (ret == 0 && (!scratch || !target || !srec || !simg))
        ret = err_set(err, ENOMEM, "mount rootfs: out of memory");
    if (ret == 0)
        ret = layer_list_parse_linux((const char *const *)dirs, n, &list, err);
    /* The writable layer, bounded by limits.disk_bytes when there is one. */
    enum scratch_kind kind = SCRATCH_PLAIN;
    if (ret == 0)
        ret = scratch_make(scratch, p->limits.disk_bytes, srec, simg, &kind, err);
    if (ret == 0 && kind != SCRATCH_PLAIN)
        log_info("container %s: writable layer of %llu bytes (%s)", p->handle,
                 (unsigned long long)p->limits.disk_bytes,
                 kind == SCRATCH_QUOTA ? "project quota" : "loop-mounted ext4 image");
    char entry[MJ_NAME_MAX + 1], owner[MJ_WORD_MAX + 1];
    snprintf(entry, sizeof(entry), "container.%s.rootfs", p->handle);
    snprintf(owner, sizeof(owner), MJ_OWNER_CONTAINER "%s", p->handle);
    struct layer_mount_rec rec = {.journal = st ? st->mounts : NULL, .name = entry, .owner = owner};
    if (ret == 0)
        ret = layers_mount(list, scratch, target, &rec, m, err);
    layer_list_free(list);
    for (size_t i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
    return ret;
}
#endif

#ifdef _WIN32
/* A Windows path (HCS takes no '/'), copied. */
static char *
win_path_dup(const char *p)
{
    char *s = p ? strdup(p) : NULL;
    for (char *c = s; c && *c; c++)
        if (*c == '/')
            *c = '\\';
    return s;
}

/* The journal entry of a container's rootfs mount: its name and owner. */
struct rootfs_rec {
    char entry[MJ_NAME_MAX + 1], owner[MJ_WORD_MAX + 1];
    struct layer_mount_rec rec;
};

static void
rootfs_rec_init(struct rootfs_rec *r, struct store *st, const struct ctr_params *p)
{
    snprintf(r->entry, sizeof(r->entry), "container.%s.rootfs", p->handle);
    snprintf(r->owner, sizeof(r->owner), MJ_OWNER_CONTAINER "%s", p->handle);
    r->rec = (struct layer_mount_rec){.journal = st->mounts, .name = r->entry, .owner = r->owner};
}

/* <dir>\scratch, created, as a Windows path into *out (caller frees). */
static int
scratch_folder(const char *dir, char **out, struct err *err)
{
    cleanup_free char *posix = fs_path_join(dir, "scratch");
    if (!posix || !(*out = win_path_dup(posix)))
        return err_set(err, ENOMEM, "mount rootfs: out of memory");
    int ret = fs_mkdir_p(posix, 0700, err);
    if (ret < 0) {
        free(*out);
        *out = NULL;
    }
    return ret;
}

/*
 * Windows: the image's layer folders (or the raw rootfs's one folder),
 * topmost first, mounted as WCIFS layers over a scratch VHDX in
 * <dir>\scratch (store/layer_wcifs_windows.c), journaled as the
 * container's rootfs entry; under hyperv the scratch is only made and
 * formatted, for the utility VM to attach. A layer's id is wcs_layer_id
 * of its chain ID (of the raw folder's name: what the hcs driver derives
 * for it).
 */
static int
mount_wcifs(struct store *st, const struct ctr_params *p, const char *dir,
            const struct meta_image *img, struct mounted_layers **m, struct err *err)
{
    if (!st)
        return err_set(err, ERR_UNAVAILABLE, "mount rootfs: the store is not available");
    size_t n = img ? img->n_layers : 1;
    if (n == 0)
        return err_set(err, ERR_INVALID_CONTENT, "image %s: has no layers", p->image_digest);
    char **folders = calloc(n + 1, sizeof(char *));
    char(*idbuf)[WCS_LAYER_ID_SIZE] = calloc(n, sizeof(*idbuf));
    const char **ids = calloc(n, sizeof(char *));
    int ret = folders && idbuf && ids ? 0 : err_set(err, ENOMEM, "mount rootfs: out of memory");
    for (size_t k = 0; ret == 0 && k < n; k++) {
        const char *chain = img ? img->layers[n - 1 - k].chain_id : NULL;
        cleanup_free char *snap = chain ? snapshot_path(st->snaps, chain) : NULL;
        folders[k] = win_path_dup(chain ? snap : p->rootfs_dir);
        if (!folders[k]) {
            ret = err_set(err, ENOMEM, "mount rootfs: out of memory");
            break;
        }
        const char *name = strrchr(folders[k], '\\');
        ret = wcs_layer_id(chain ? chain : name ? name + 1 : folders[k], idbuf[k], err);
        ids[k] = idbuf[k];
    }
    if (ret == 0)
        ret = scratch_folder(dir, &folders[n], err);
    struct layer_list *list = NULL;
    if (ret == 0)
        ret = layer_list_parse_wcifs((const char *const *)folders, ids, n + 1, &list, err);
    /* hyperv: the scratch is the utility VM's to attach, not the host's. */
    if (ret == 0)
        list->vm_scratch = strcmp(p->isolation, "hyperv") == 0;
    struct rootfs_rec rr;
    rootfs_rec_init(&rr, st, p);
    if (ret == 0)
        ret = layers_mount(list, NULL, NULL, &rr.rec, m, err);
    layer_list_free(list);
    for (size_t k = 0; folders && k <= n; k++)
        free(folders[k]);
    free(folders);
    free(idbuf);
    free(ids);
    return ret;
}

/*
 * Windows with --layer-format cimfs: the image's layers as forked CIMs
 * (written from the image store's blobs at first use, store/cim_chain.h),
 * the top-most one mounted with the container's scratch and the UnionFS
 * filter over it (store/layer_cimfs.h), journaled as the container's
 * rootfs entry. The ids are the WCIFS ones (wcs_layer_id of the chain
 * ID), so a layer is named alike in either format.
 */
static int
mount_cimfs(struct store *st, const struct ctr_params *p, const char *dir,
            const struct meta_image *img, bool block, struct mounted_layers **m, struct err *err)
{
    size_t n = img->n_layers;
    cleanup_free char *cim_dir = fs_path_join(st->root, block ? CIM_BLOCK_DIR_NAME : CIM_DIR_NAME);
    char **cims = NULL, *merged = NULL;
    int ret = !cim_dir ? err_set(err, ENOMEM, "mount rootfs: out of memory")
              : block
                  ? cim_chain_ensure_block(st->blobs, cim_dir, img->layers, n, &cims, &merged, err)
                  : cim_chain_ensure(st->blobs, cim_dir, img->layers, n, &cims, err);
    const char **top = calloc(n + 1, sizeof(char *));
    const char **ids = calloc(n + 1, sizeof(char *));
    char(*idbuf)[WCS_LAYER_ID_SIZE] = calloc(n + 1, sizeof(*idbuf));
    if (ret == 0 && (!top || !ids || !idbuf))
        ret = err_set(err, ENOMEM, "mount rootfs: out of memory");
    for (size_t k = 0; ret == 0 && k < n; k++) {
        top[k] = cims[n - 1 - k];
        ret = wcs_layer_id(img->layers[n - 1 - k].chain_id, idbuf[k], err);
        ids[k] = idbuf[k];
    }
    cleanup_free char *scratch = NULL;
    if (ret == 0)
        ret = scratch_folder(dir, &scratch, err);
    struct layer_list *list = NULL;
    if (ret == 0)
        ret = layer_list_parse_cimfs(top, ids, n, scratch, &list, err);
    if (ret == 0 && block) {
        /* --layer-format blockcim: the merged block CIM of the chain over them. */
        list->block = true;
        list->merged = merged;
        merged = NULL;
    }
    free(merged);
    struct rootfs_rec rr;
    rootfs_rec_init(&rr, st, p);
    if (ret == 0)
        ret = layers_mount(list, NULL, NULL, &rr.rec, m, err);
    layer_list_free(list);
    for (size_t k = 0; cims && k < n; k++)
        free(cims[k]);
    free(cims);
    free(top);
    free(ids);
    free(idbuf);
    return ret;
}

/*
 * Does this container's image go through CimFS? With --layer-format
 * cimfs in use (auto included), or blockcim (*block then), an image's
 * process-isolated container does; a raw rootfs is a folder, and hyperv isolation takes the WCIFS
 * folders the import made (hcsshim mounts forked CIMs for process
 * isolation only).
 */
static bool
uses_cimfs(const struct containers *reg, const struct ctr_params *p, const struct meta_image *img,
           bool *block)
{
    const char *f = reg->d && reg->d->cfg ? reg->d->cfg->layer_format_used : NULL;
    *block = f && strcmp(f, "blockcim") == 0;
    return img && f && (strcmp(f, "cimfs") == 0 || *block) && strcmp(p->isolation, "hyperv") != 0;
}

/*
 * What the hcs driver is given of the container's WCIFS mount, read back
 * from its journal entry: the layer folders and their ids (topmost
 * first) and the scratch, its volume under process isolation, the VHDX
 * itself under hyperv. Caller frees the vectors with strv_free and
 * *scratch.
 */
static int
wcifs_spec(struct store *st, const struct ctr_params *p, char ***layers, char ***ids,
           char **scratch, struct err *err)
{
    char entry[MJ_NAME_MAX + 1];
    snprintf(entry, sizeof(entry), "container.%s.rootfs", p->handle);
    struct mj_entry *e = NULL;
    int ret = st ? mjournal_get(st->mounts, entry, &e, err)
                 : err_set(err, ERR_UNAVAILABLE, "the store is not available");
    if (ret < 0)
        return ret;
    const char *ns = mj_entry_get(e, "layers");
    size_t n = ns ? strtoul(ns, NULL, 10) : 0;
    size_t nl = 0, ni = 0;
    *layers = calloc(1, sizeof(char *));
    *ids = calloc(1, sizeof(char *));
    bool hyperv = strcmp(p->isolation, "hyperv") == 0;
    const char *s = mj_entry_get(e, hyperv ? "vhd" : "volume");
    *scratch = s ? strdup(s) : NULL;
    ret = *layers && *ids && *scratch ? 0 : err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; ret == 0 && i < n; i++) {
        char kid[32], kpath[32];
        snprintf(kid, sizeof(kid), "layer-%zu-id", i);
        snprintf(kpath, sizeof(kpath), "layer-%zu-path", i);
        const char *id = mj_entry_get(e, kid), *path = mj_entry_get(e, kpath);
        if (!id || !path || strv_push(layers, &nl, path) < 0 || strv_push(ids, &ni, id) < 0)
            ret = err_set(err, EINVAL, "mount journal entry %s: layer %zu", entry, i);
    }
    mj_entry_free(e);
    if (ret < 0) {
        strv_free(*layers);
        strv_free(*ids);
        free(*scratch);
        *layers = *ids = NULL;
        *scratch = NULL;
    }
    return ret;
}
#endif

int
containers_prepare_blocking(struct containers *reg, struct store *st, struct ctr_params *p,
                            const char *dir, char **rootfs, struct err *err)
{
    if (!reg->drv) {
        err_copy(err, &reg->drv_err);
        return -err->code;
    }
    struct meta_image *img = NULL;
    struct mounted_layers *m = NULL;
    struct err ignored = {0};
    int ret = 0;
    uint64_t t_start = uv_hrtime();
    if (p->image_ref) {
        if (!st)
            return err_set(err, ERR_UNAVAILABLE, "create container %s: the store is not available",
                           p->handle);
        ret = image_ref_lookup(st->meta, p->image_ref, &img, err);
        if (ret < 0)
            return ret;
        free(p->image_digest);
        free(p->image_config);
        p->image_digest = strdup(img->digest);
        p->image_config = strdup(img->config_digest);
        if (!p->image_digest || !p->image_config) {
            meta_image_free(img);
            return err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
        }
        if ((ret = apply_image_config(st, img, p, err)) < 0) {
            meta_image_free(img);
            return err_wrap(err, "create container %s", p->handle);
        }
    }
    /* A main process needs a command, from the request or the image. */
    if (p->main) {
        struct process_spec spec;
        container_main_spec(p->main, &spec);
        char **argv = process_command(p, &spec, err);
        strv_free(argv);
        if (!argv) {
            meta_image_free(img);
            return err_set(err, EINVAL, "create container %s: no command specified", p->handle);
        }
    }
    /* A directory left by an earlier container of this handle that its
     * delete could not remove goes first. */
    fs_remove_tree(dir, &ignored);
    ret = fs_mkdir_p(dir, 0700, err);
    if (ret == 0)
        ret = ctr_record_write(p, dir, "creating", ctr_mounts_volumes(p), err);
    if (ret == 0 && img) {
        ret = meta_image_use_add(st->meta, img->digest, p->handle, err);
        if (ret == -ENOENT)
            err_set(err, ENOENT, "image %s: not found (deleted meanwhile)", p->image_ref);
    }
    for (size_t i = 0; ret == 0 && p->mount_volumes && i < p->nmounts; i++) {
        if (!p->mount_volumes[i])
            continue;
        char *path = NULL;
        ret = volume_mount_add(st->volumes, p->mount_volumes[i], p->handle, p->mounts[i].readonly,
                               &path, err);
        if (ret == 0) {
            free((char *)p->mounts[i].source);
            p->mounts[i].source = path;
        }
    }
    uint64_t t_meta = uv_hrtime();
#ifdef _WIN32
    /* Windows: the image's layers, or a raw rootfs's one folder, are WCIFS
     * layers over a scratch of the container's own, or the image's CIMs
     * with --layer-format cimfs. */
    bool block = false;
    if (ret == 0 && uses_cimfs(reg, p, p->rootfs_dir ? NULL : img, &block))
        ret = mount_cimfs(st, p, dir, img, block, &m, err);
    else if (ret == 0)
        ret = mount_wcifs(st, p, dir, p->rootfs_dir ? NULL : img, &m, err);
#else
    if (ret == 0 && p->rootfs_dir && reg->drv->rootfs_normalise) {
        /* The driver takes a raw rootfs as it is. */
        if (!(*rootfs = strdup(p->rootfs_dir)))
            ret = err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
    } else if (ret == 0) {
        ret = mount_rootfs(st, p, dir, img, &m, err);
    }
#endif
    /* No rootfs path (Windows layers: the driver is given the layers
     * instead) is the runtime's to judge, not a failure here. */
    const char *mounted = ret == 0 && m ? mounted_layers_rootfs(m) : NULL;
    if (mounted && !(*rootfs = strdup(mounted)))
        ret = err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
    log_debug("create %s: record and image %.1f ms, mount %.1f ms", p->handle,
              (t_meta - t_start) / 1e6, (uv_hrtime() - t_meta) / 1e6);
    mounted_layers_free(m);
    meta_image_free(img);
    if (ret < 0) {
        struct err uerr = {0};
        if (delete_steps(reg, st, p, dir, true, NULL, &uerr) < 0)
            log_warn("undo the failed create of %s: %s", p->handle, uerr.msg);
        return err_wrap(err, "create container %s", p->handle);
    }
    return 0;
}

size_t
ctr_mounts_merge(const struct rt_mount *own, size_t nown, const struct rt_mount *net, size_t nnet,
                 struct rt_mount *out)
{
    size_t n = 0;
    for (size_t i = 0; i < nown; i++)
        out[n++] = own[i];
    for (size_t j = 0; j < nnet; j++) {
        bool replaced = false;
        for (size_t i = 0; i < nown && !replaced; i++)
            replaced =
                strcmp(own[i].target, net[j].target) == 0 || strcmp(own[i].target, "/etc") == 0;
        if (!replaced)
            out[n++] = net[j];
    }
    return n;
}

int
containers_start_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                          const char *dir, const char *rootfs, const struct ctr_net_spec *net,
                          struct err *err)
{
    uint64_t t_start = uv_hrtime();
    size_t nnet = net ? net->nmounts : 0;
    cleanup_free struct rt_mount *mounts = calloc(p->nmounts + nnet + 1, sizeof(*mounts));
    int ret = mounts ? 0 : err_set(err, ENOMEM, "create container %s: out of memory", p->handle);
    char **layers = NULL, **layer_ids = NULL;
    cleanup_free char *scratch = NULL;
#ifdef _WIN32
    if (ret == 0)
        ret = wcifs_spec(st, p, &layers, &layer_ids, &scratch, err);
#endif
    if (ret == 0) {
        size_t nmounts =
            ctr_mounts_merge(p->mounts, p->nmounts, net ? net->mounts : NULL, nnet, mounts);
        struct rt_container_spec spec = {
            .handle = p->handle,
            .dir = dir,
            .rootfs = rootfs,
            .env = p->env,
            .cwd = p->working_dir,
            .limits = p->limits,
            .mounts = mounts,
            .nmounts = nmounts,
            .netns_path = net ? net->netns_path : NULL,
            .net_adapter = net ? net->adapter : NULL,
            .readonly_rootfs = p->readonly_rootfs,
            .hostname = p->hostname,
            .isolation = p->isolation[0] ? p->isolation : NULL,
            .layers = layers,
            .layer_ids = layer_ids,
            .scratch = scratch,
        };
        ret = reg->drv->container_create(reg->drv_ctx, &spec, err);
    }
    strv_free(layers);
    strv_free(layer_ids);
    uint64_t t_rt = uv_hrtime();
    if (ret == 0)
        ret = ctr_record_write(p, dir, "running", true, err);
    log_debug("create %s: runtime %.1f ms, record %.1f ms", p->handle, (t_rt - t_start) / 1e6,
              (uv_hrtime() - t_rt) / 1e6);
    if (ret < 0) {
        struct err uerr = {0};
        if (delete_steps(reg, st, p, dir, true, NULL, &uerr) < 0)
            log_warn("undo the failed create of %s: %s", p->handle, uerr.msg);
        return err_wrap(err, "create container %s", p->handle);
    }
    return 0;
}

int
containers_undo_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                         const char *dir, struct err *err)
{
    return delete_steps(reg, st, p, dir, true, NULL, err);
}

/*
 * Removes a container's directory by first renaming it out of the way
 * (to ".removing-<name>.<n>" beside it, n unique in this daemon's life):
 * a status read racing the delete then finds no process directory,
 * instead of finding one half-removed and settling it as never started
 * (which wrote its exit record back into the tree being removed:
 * "Directory not empty"). With trash set, the renamed tree is not
 * removed but handed back (*trash, caller frees), for a job that removes
 * it after the delete was answered: once renamed, the tree is no
 * container's any more, and a new container of the same name makes a
 * directory of its own. A crash between the rename and the removal
 * leaves the renamed tree for the next start-up.
 */
static int
container_dir_remove(const char *dir, char **trash_out, struct err *err)
{
    static atomic_uint serial;
    const char *slash = strrchr(dir, '/');
    if (!slash || !slash[1])
        return fs_remove_tree(dir, err);
    cleanup_free char *trash = NULL;
    if (asprintf(&trash, "%.*s/" REMOVING_PREFIX "%s.%u", (int)(slash - dir), dir, slash + 1,
                 atomic_fetch_add(&serial, 1)) < 0)
        return err_set(err, ENOMEM, "out of memory");
    int r = osfs_rename(dir, trash);
    if (r < 0)
        return r == -ENOENT ? 0 : fs_remove_tree(dir, err);
    if (trash_out) {
        *trash_out = steal_ptr(&trash);
        return 0;
    }
    return fs_remove_tree(trash, err);
}

/*
 * undo: the runtime's create failed (and cleaned up after itself), so a
 * runtime that cannot even be run does not stop the rest of the undo.
 */
static int
delete_steps(struct containers *reg, struct store *st, const struct ctr_params *p, const char *dir,
             bool undo, char **trash, struct err *err)
{
    struct os_stat sb;
    bool have_dir = osfs_stat(dir, &sb) == 0;
    int ret = 0;
    /* Each step's end (uv_hrtime), for the debug log. */
    uint64_t t0 = uv_hrtime(), t_rec, t_rt, t_mnt, t_use;
    if (have_dir)
        ret = ctr_record_write(p, dir, "deleting", true, err);
    t_rec = uv_hrtime();
    if (ret == 0 && reg->drv) {
        ret = reg->drv->container_delete(reg->drv_ctx, p->handle, dir, err);
        if (ret == -ERR_UNAVAILABLE && undo)
            ret = 0;
    }
    t_rt = uv_hrtime();
    if (ret == 0 && st) {
        char owner[MJ_WORD_MAX + 1];
        snprintf(owner, sizeof(owner), MJ_OWNER_CONTAINER "%s", p->handle);
        ret = layers_unmount_owner(st->mounts, owner, err);
    }
    if (ret == 0 && have_dir) {
        /* A container made by berth before the mount journal. */
        cleanup_free char *rec = fs_path_join(dir, "scratch/" LAYERS_RECORD_NAME);
        struct mounted_layers *m = NULL;
        int lr = mounted_layers_load(rec, &m, err);
        if (lr == 0) {
            ret = mounted_layers_unmount(m, err);
            mounted_layers_free(m);
        } else if (lr != -ENOENT) {
            ret = lr;
        }
    }
    /* The overlay's end (and its sync of the store's disk) waits for the
     * job that removes the renamed tree after the answer; without one,
     * here. */
    if (!trash)
        layers_release_retired();
    if (ret == 0 && have_dir) {
        /* After the overlay, whose upper it holds. */
        cleanup_free char *srec = fs_path_join(dir, SCRATCH_RECORD);
        ret = srec ? scratch_release(srec, err) : err_set(err, ENOMEM, "out of memory");
    }
    t_mnt = uv_hrtime();
    for (size_t i = 0; ret == 0 && st && p->mount_volumes && i < p->nmounts; i++) {
        if (!p->mount_volumes[i])
            continue;
        struct err verr = {0};
        int vr = volume_mount_remove(st->volumes, p->mount_volumes[i], p->handle, &verr);
        if (vr < 0 && vr != -ENOENT) {
            err_copy(err, &verr);
            ret = vr;
        }
    }
    if (ret == 0 && p->image_digest && st) {
        struct err uerr = {0};
        int ur = meta_image_use_remove(st->meta, p->image_digest, p->handle, &uerr);
        if (ur < 0 && ur != -ENOENT) {
            err_copy(err, &uerr);
            ret = ur;
        }
    }
    t_use = uv_hrtime();
    if (ret == 0 && have_dir)
        ret = container_dir_remove(dir, trash, err);
    log_debug("delete %s: record %.1f ms, runtime %.1f, unmount %.1f, volumes and image use %.1f, "
              "rename %.1f",
              p->handle, (t_rec - t0) / 1e6, (t_rt - t_rec) / 1e6, (t_mnt - t_rt) / 1e6,
              (t_use - t_mnt) / 1e6, (uv_hrtime() - t_use) / 1e6);
    return ret < 0 ? err_wrap(err, "delete container %s", p->handle) : 0;
}

int
containers_delete_blocking(struct containers *reg, struct store *st, const struct ctr_params *p,
                           const char *dir, char **trash, struct err *err)
{
    if (trash)
        *trash = NULL;
    return delete_steps(reg, st, p, dir, false, trash, err);
}

int
containers_trash_remove_blocking(const char *trash, struct err *err)
{
    layers_release_retired();
    return fs_remove_tree(trash, err);
}
