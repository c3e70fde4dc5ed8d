/*
 * LAYER_WCIFS mounts (store/layer.h, layers_mount): a container's scratch
 * VHDX, sandbox.vhdx in its scratch folder, made and formatted when
 * missing (virtdisk.dll, computestorage.dll's HcsFormatWritableLayerVhd),
 * attached without a drive letter, its volume found
 * (HcsGetLayerVhdMountPath), initialized once as a writable layer over
 * the read-only layer folders (HcsInitializeWritableLayer), and the WCIFS
 * filter attached to it (HcsAttachLayerStorageFilter). The rootfs is
 * that volume.
 *
 * Each step is journaled before it is made: the entry (kind "wcifs") is
 * rewritten with "step" create, attach, then filter, and "volume" once it
 * is known, so that an undo after a crash at any point takes away exactly
 * what may be there: the filter (step filter), then the VHD's attachment
 * (step attach or filter). Fields: vhd, step, new (1 when this mount made
 * the VHDX), volume, rootfs (the volume, the VHDX's path until it is
 * known) and the layers (store/layer.c's "layers", "layer-<i>-id",
 * "layer-<i>-path", topmost first). A failed mount undoes itself and
 * removes its entry.
 *
 * A utility VM's scratch (layer_list.vm_scratch, hyperv isolation) is
 * only created and formatted here (HcsFormatWritableLayerVhd mounts a
 * VHD it is given for as long as it formats it): the VM attaches it by
 * SCSI and unions the layers itself, and a VHDX cannot be attached on
 * the host and in a VM at once. Its entry says "vm" 1 and never gets
 * past step create, so an undo has nothing on the host to take away;
 * the rootfs is the VHDX's path.
 *
 * layer_folder_remove (store/layer.h) is here too: a WCIFS layer folder
 * that gc sweeps goes through HcsDestroyLayer first.
 *
 * Windows only; blocking: pool threads or start-up.
 */
#include "store/layer_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/osfs.h"
#include "store/vdisk.h"
#include "store/wcstorage.h"

/* Docker's and containerd's default size of a Windows scratch layer. */
#define WCIFS_SCRATCH_BYTES (20ull * 1024 * 1024 * 1024)
#define WCIFS_VHD_NAME "sandbox.vhdx"

/* The LayerData of l's layers, topmost first. */
static char *
layer_data_of(const struct layer_list *l, struct err *err)
{
    struct wcs_layer *v = calloc(l->count + 1, sizeof(*v));
    if (!v) {
        err_set(err, ENOMEM, "mount layers: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < l->count; i++) {
        const struct layer *y = &l->layers[l->count - 1 - i];
        v[i] = (struct wcs_layer){y->layer_id, y->path};
    }
    char *s = wcs_layer_data(v, l->count, err);
    free(v);
    return s;
}

static int
set_layers(struct mj_entry *e, const struct layer_list *l, struct err *err)
{
    char key[40], num[24];
    snprintf(num, sizeof(num), "%zu", l->count);
    int r = mj_entry_set(e, "layers", num, err);
    for (size_t i = 0; r == 0 && i < l->count; i++) {
        const struct layer *y = &l->layers[l->count - 1 - i];
        snprintf(key, sizeof(key), "layer-%zu-id", i);
        r = mj_entry_set(e, key, y->layer_id, err);
        snprintf(key, sizeof(key), "layer-%zu-path", i);
        if (r == 0)
            r = mj_entry_set(e, key, y->path, err);
    }
    return r;
}

static bool
step_at_least(const char *step, const char *want)
{
    static const char *const order[] = {"begin", "create", "attach", "filter"};
    int a = -1, b = -1;
    for (int i = 0; i < 4; i++) {
        if (step && strcmp(step, order[i]) == 0)
            a = i;
        if (strcmp(want, order[i]) == 0)
            b = i;
    }
    return a >= b && b >= 0;
}

int
layer_wcifs_undo(const struct mj_entry *e, struct err *err)
{
    const char *step = mj_entry_get(e, "step"), *vhd = mj_entry_get(e, "vhd");
    const char *volume = mj_entry_get(e, "volume");
    if (!step || !vhd)
        return err_set(err, EINVAL, "undo wcifs mount %s: no step or vhd", e->name);
    const char *vm = mj_entry_get(e, "vm");
    if (!step_at_least(step, "attach") || (vm && strcmp(vm, "1") == 0))
        return 0; /* nothing was attached on the host */
    struct wcs_api *wcs = NULL;
    int r = 0;
    if (volume && step_at_least(step, "filter")) {
        r = wcs_api_open(NULL, &wcs, err);
        if (r == 0 && (r = wcs_detach_filter(wcs, volume, err)) == -ENOENT)
            r = 0; /* never attached, or detached before a crash */
    }
    wcs_api_free(wcs);
    if (r == 0)
        r = vdisk_detach_path(vhd, err);
    return r < 0 ? err_wrap(err, "undo wcifs mount %s", e->name) : 0;
}

/* The record of the made mount: the volume and the layers, topmost first. */
static int
mounted_of(const struct layer_list *l, const char *volume, const struct layer_mount_rec *rec,
           const struct mj_entry *e, struct mounted_layers **out, struct err *err)
{
    struct mounted_layers *m = mounted_layers_new(LAYER_WCIFS, volume, NULL, NULL);
    int r = m ? mounted_layers_set_entry(m, rec->journal, rec->name, err)
              : err_set(err, ENOMEM, "mount layers: out of memory");
    if (r == 0 && !(m->undo = mj_entry_dup(e)))
        r = err_set(err, ENOMEM, "mount layers: out of memory");
    if (r == 0) {
        m->layer_ids = calloc(l->count, sizeof(char *));
        m->layer_paths = calloc(l->count, sizeof(char *));
        if (!m->layer_ids || !m->layer_paths)
            r = err_set(err, ENOMEM, "mount layers: out of memory");
    }
    for (size_t i = 0; r == 0 && i < l->count; i++) {
        const struct layer *y = &l->layers[l->count - 1 - i];
        m->layer_ids[i] = strdup(y->layer_id);
        m->layer_paths[i] = strdup(y->path);
        m->nlayers = i + 1;
        if (!m->layer_ids[i] || !m->layer_paths[i])
            r = err_set(err, ENOMEM, "mount layers: out of memory");
    }
    if (r < 0) {
        mounted_layers_free(m);
        return r;
    }
    *out = m;
    return 0;
}

int
layer_wcifs_mount(const struct layer_list *l, const char *scratch_dir,
                  const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    const char *dir = scratch_dir ? scratch_dir : l->scratch;
    if (!dir)
        return err_set(err, EINVAL, "mount wcifs layers: no scratch folder");
    size_t dl = strlen(dir);
    char *vhd = malloc(dl + sizeof(WCIFS_VHD_NAME) + 2);
    struct mj_entry *e = mj_entry_new(rec->name, rec->owner, LAYER_KIND_WCIFS);
    char *ld = layer_data_of(l, err);
    struct wcs_api *wcs = NULL;
    struct vdisk_api *vd = NULL;
    void *h = NULL;
    char *volume = NULL;
    bool created = false;
    int r = 0;
    if (!vhd || !e || !ld) {
        r = ld ? err_set(err, ENOMEM, "mount layers: out of memory") : -err->code;
        goto out;
    }
    snprintf(vhd, dl + sizeof(WCIFS_VHD_NAME) + 2, "%s%s%s", dir,
             dir[dl - 1] == '\\' || dir[dl - 1] == '/' ? "" : "\\", WCIFS_VHD_NAME);
    if ((r = mj_entry_set(e, "vhd", vhd, err)) < 0 || (r = set_layers(e, l, err)) < 0 ||
        (l->vm_scratch && (r = mj_entry_set(e, "vm", "1", err)) < 0) ||
        (r = layer_journal_step(rec, e, "begin", vhd, err)) < 0)
        goto out;
    if ((r = wcs_api_open(NULL, &wcs, err)) < 0 || (r = vdisk_api_open(NULL, &vd, err)) < 0)
        goto undo;
    r = vdisk_open(vd, vhd, &h, err);
    if (r == -ENOENT) {
        if ((r = mj_entry_set(e, "new", "1", err)) < 0 ||
            (r = layer_journal_step(rec, e, "create", NULL, err)) < 0 ||
            (r = vdisk_create(vd, vhd, WCIFS_SCRATCH_BYTES, &h, err)) < 0)
            goto undo;
        created = true;
    } else if (r < 0) {
        goto undo;
    }
    if (l->vm_scratch) {
        /* Formatted through the handle, never attached: the VM's to attach. */
        if (created && (r = wcs_format_vhd(wcs, h, err)) < 0)
            goto undo;
        r = mounted_of(l, vhd, rec, e, out, err);
        if (r == 0)
            goto out;
        goto undo;
    }
    if ((r = layer_journal_step(rec, e, "attach", NULL, err)) < 0 ||
        (r = vdisk_attach(vd, h, err)) < 0)
        goto undo;
    if (created && (r = wcs_format_vhd(wcs, h, err)) < 0)
        goto undo;
    if ((r = wcs_vhd_mount_path(wcs, h, &volume, err)) < 0 ||
        (r = mj_entry_set(e, "volume", volume, err)) < 0)
        goto undo;
    /* A writable layer is initialized once, when its VHDX is new. */
    if (created && (r = wcs_initialize_writable(wcs, volume, ld, err)) < 0)
        goto undo;
    if ((r = layer_journal_step(rec, e, "filter", volume, err)) < 0 ||
        (r = wcs_attach_filter(wcs, volume, ld, err)) < 0)
        goto undo;
    r = mounted_of(l, volume, rec, e, out, err);
    if (r == 0)
        goto out;
undo:
    /* Whatever the entry says may be there goes, then the entry. */
    {
        struct err uerr = {0};
        if (layer_wcifs_undo(e, &uerr) == 0)
            mjournal_remove(rec->journal, rec->name, &uerr);
    }
out:
    vdisk_close(h);
    vdisk_api_free(vd);
    wcs_api_free(wcs);
    free(volume);
    free(ld);
    free(vhd);
    mj_entry_free(e);
    return r < 0 ? err_wrap(err, "mount wcifs layers") : 0;
}

int
layer_folder_remove(const char *path, struct err *err)
{
    size_t n = strlen(path);
    char *win = malloc(n + sizeof("\\Files"));
    if (!win)
        return err_set(err, ENOMEM, "remove layer %.300s: out of memory", path);
    for (size_t i = 0; i <= n; i++)
        win[i] = path[i] == '/' ? '\\' : path[i];
    memcpy(win + n, "\\Files", sizeof("\\Files"));
    struct os_stat st;
    bool wcifs = osfs_stat(win, &st) == 0 && S_ISDIR(st.st_mode);
    win[n] = '\0';
    int r = 0;
    if (wcifs) {
        struct wcs_api *wcs = NULL;
        r = wcs_api_open(NULL, &wcs, err);
        if (r == 0)
            r = wcs_destroy_layer(wcs, win, err);
        wcs_api_free(wcs);
    }
    free(win);
    if (r < 0)
        return err_wrap(err, "remove layer %.300s", path);
    return fs_remove_tree(path, err);
}
