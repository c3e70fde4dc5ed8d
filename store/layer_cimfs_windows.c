/*
 * LAYER_CIMFS mounts (store/layer_cimfs.h): the top-most CIM (or the
 * merged block CIM with its sources) through cimfs.dll, then the
 * container's scratch VHDX (virtdisk.dll, computestorage.dll) with the
 * UnionFS filter over the CIM's Files, each step journaled before it is
 * made; the undo takes them away in reverse. Windows only; pool threads
 * or start-up.
 */
#include "store/layer_cimfs.h"

#include <windows.h>

#include <objbase.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "store/cim_writer.h"
#include "store/cimfs_api.h"
#include "store/vdisk.h"
#include "store/wcstorage.h"

/* What a WCIFS scratch is too (store/layer_wcifs_windows.c): Docker's and
 * containerd's default size of a Windows writable layer. */
#define CIMFS_SCRATCH_BYTES (20ull * 1024 * 1024 * 1024)
#define CIMFS_VHD_NAME "sandbox.vhdx"

#define GUID_TEXT 37

static void
guid_format(const GUID *g, char out[GUID_TEXT])
{
    snprintf(out, GUID_TEXT, "%08lx-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             (unsigned long)g->Data1, g->Data2, g->Data3, g->Data4[0], g->Data4[1], g->Data4[2],
             g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6], g->Data4[7]);
}

static int
guid_parse(const char *s, GUID *g)
{
    unsigned long d1;
    unsigned d2, d3, b[8];
    int n = 0;
    if (!s || strlen(s) != GUID_TEXT - 1 ||
        sscanf(s, "%8lx-%4x-%4x-%2x%2x-%2x%2x%2x%2x%2x%2x%n", &d1, &d2, &d3, &b[0], &b[1], &b[2],
               &b[3], &b[4], &b[5], &b[6], &b[7], &n) != 11 ||
        n != GUID_TEXT - 1)
        return -EINVAL;
    g->Data1 = (DWORD)d1;
    g->Data2 = (WORD)d2;
    g->Data3 = (WORD)d3;
    for (int i = 0; i < 8; i++)
        g->Data4[i] = (BYTE)b[i];
    return 0;
}

static wchar_t *
wide(const char *s, size_t len)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, (int)len, NULL, 0);
    wchar_t *w = n > 0 ? malloc(((size_t)n + 1) * sizeof(wchar_t)) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, (int)len, w, n) != n) {
        free(w);
        return NULL;
    }
    if (w) {
        w[n] = L'\0';
        for (wchar_t *c = w; *c; c++)
            if (*c == L'/')
                *c = L'\\';
    }
    return w;
}

/* CimMountImage of the .cim at path (its directory and its name) as volume g. */
static int
mount_cim(struct cimfs_api *api, const char *path, const GUID *g, struct err *err)
{
    const char *slash = strrchr(path, '/'), *bs = strrchr(path, '\\');
    if (bs > slash)
        slash = bs;
    if (!slash || slash == path || !slash[1])
        return err_set(err, EINVAL, "mount cim %s: no directory and name", path);
    cleanup_free wchar_t *dir = wide(path, (size_t)(slash - path));
    cleanup_free wchar_t *name = wide(slash + 1, strlen(slash + 1));
    if (!dir || !name)
        return err_set(err, ENOMEM, "mount cim %s: out of memory", path);
    HRESULT hr = api->CimMountImage(dir, name, CIM_MOUNT_IMAGE_NONE, g);
    if (FAILED(hr))
        return cimfs_err_set(err, hr, "mount cim %s", path);
    return 0;
}

/*
 * Block CIMs (l->block): one layer's single-file CIM mounted alone
 * (CimMountImage of <file>, CIM_BLOCK_IMAGE, single-file flag), or the
 * merged one with its sources, top-most first as they were merged
 * (CimMergeMountImage: the merged CIM, then each layer; hcsshim's
 * MountMergedBlockCIMs), as volume g.
 */
static int
mount_block(struct cimfs_api *api, const struct layer_list *l, const GUID *g, struct err *err)
{
    int r = cimfs_api_block(api, err);
    if (r < 0)
        return err_wrap(err, "mount block cims");
    /* A top block CIM alone lacks the layers under it. */
    if (l->count > 1 && !l->merged)
        return err_set(err, EINVAL, "mount block cims: %zu layers and no merged cim", l->count);
    size_t n = l->merged ? l->count + 1 : 1;
    CIMFS_IMAGE_PATH *v = calloc(n, sizeof(*v));
    wchar_t **dirs = calloc(n, sizeof(wchar_t *));
    cleanup_free wchar_t *layer = wide(CIM_BLOCK_IMAGE, strlen(CIM_BLOCK_IMAGE));
    cleanup_free wchar_t *merged = wide(CIM_MERGED_IMAGE, strlen(CIM_MERGED_IMAGE));
    r = v && dirs && layer && merged ? 0 : err_set(err, ENOMEM, "mount block cims: out of memory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        /* [0] the merged CIM, then the layers top-most first; or the one layer. */
        const char *file = l->merged ? (i == 0 ? l->merged : l->layers[l->count - i].path)
                                     : l->layers[l->count - 1].path;
        if (!(dirs[i] = wide(file, strlen(file))))
            r = err_set(err, ENOMEM, "mount block cims: out of memory");
        v[i].ImageDir = dirs[i];
        v[i].ImageName = l->merged && i == 0 ? merged : layer;
    }
    HRESULT hr = S_OK;
    if (r == 0 && l->merged)
        hr = api->CimMergeMountImage((UINT32)n, v, CIMFS_MOUNT_SINGLE_FILE, g);
    else if (r == 0)
        hr = api->CimMountImage(v[0].ImageDir, v[0].ImageName,
                                (CIM_MOUNT_IMAGE_FLAGS)CIMFS_MOUNT_SINGLE_FILE, g);
    if (r == 0 && FAILED(hr))
        r = cimfs_err_set(err, hr, "mount %s %s", l->merged ? "merged cim" : "block cim",
                          l->merged ? l->merged : l->layers[l->count - 1].path);
    for (size_t i = 0; dirs && i < n; i++)
        free(dirs[i]);
    free(dirs);
    free(v);
    return r;
}

/* The steps of a mount, in the order they are made; undo goes back from the journaled one. */
static const char *const steps[] = {"begin", "cim", "create", "attach", "filter"};

static int
step_index(const char *step)
{
    for (int i = 0; step && i < (int)(sizeof(steps) / sizeof(steps[0])); i++)
        if (strcmp(step, steps[i]) == 0)
            return i;
    return -1;
}

/* The UnionFS LayerData over the CIM volume's Files folder (hcsshim's
 * mountProcessIsolatedCimLayersCommon). */
static char *
union_data(const char *layer_id, const char *cim_volume, struct err *err)
{
    char files[GUID_TEXT + 32];
    snprintf(files, sizeof(files), "%sFiles", cim_volume);
    struct wcs_layer y = {layer_id, files};
    return wcs_union_layer_data(&y, 1, err);
}

/* CimDismountImage of the volume GUID id; one not mounted is success. */
static int
dismount(const char *name, const char *id, struct err *err)
{
    GUID g;
    if (guid_parse(id, &g) < 0)
        return err_set(err, EINVAL, "undo cimfs mount %s: no volume GUID (%.60s)", name,
                       id ? id : "none");
    struct cimfs_api *api = NULL;
    if (cimfs_api_default(&api, err) < 0)
        return err_wrap(err, "undo cimfs mount %s", name);
    HRESULT hr = api->CimDismountImage(&g);
    if (hr == HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND))
        return 0; /* not mounted: never made, or undone already */
    if (FAILED(hr))
        return cimfs_err_set(err, hr, "undo cimfs mount %s: dismount %s", name, id);
    return 0;
}

int
layer_cimfs_undo(const struct mj_entry *e, struct err *err)
{
    const char *step = mj_entry_get(e, "step");
    /* An entry without steps is a CIM mount alone, as berth wrote them
     * before the scratch was made here: "volume" is the CIM's GUID. */
    if (!step)
        return dismount(e->name, mj_entry_get(e, "volume"), err);
    int at = step_index(step);
    const char *vhd = mj_entry_get(e, "vhd"), *volume = mj_entry_get(e, "volume");
    const char *guid = mj_entry_get(e, "cim-guid");
    if (at < 0 || !vhd || !guid)
        return err_set(err, EINVAL, "undo cimfs mount %s: no step, vhd or cim-guid", e->name);
    int r = 0;
    if (at >= step_index("filter") && volume) {
        struct wcs_api *wcs = NULL;
        char *ld = NULL;
        r = wcs_api_open(NULL, &wcs, err);
        if (r == 0 && !(ld = wcs_union_layer_data(NULL, 0, err)))
            r = -err->code;
        if (r == 0 && (r = wcs_detach_overlay(wcs, volume, ld, err)) == -ENOENT)
            r = 0; /* never attached, or detached before a crash */
        free(ld);
        wcs_api_free(wcs);
    }
    if (r == 0 && at >= step_index("attach"))
        r = vdisk_detach_path(vhd, err);
    if (r == 0 && at >= step_index("cim"))
        r = dismount(e->name, guid, err);
    return r < 0 ? err_wrap(err, "undo cimfs mount %s", e->name) : 0;
}

/* The scratch VHDX at vhd (made and formatted when missing), attached, its
 * volume into *volume, the UnionFS filter over the CIM volume's Files. */
static int
scratch_mount(const struct layer_mount_rec *rec, struct mj_entry *e, const char *vhd,
              const char *layer_id, const char *cim_volume, char **volume, struct err *err)
{
    struct wcs_api *wcs = NULL;
    struct vdisk_api *vd = NULL;
    void *h = NULL;
    bool created = false;
    char *ld = union_data(layer_id, cim_volume, err);
    int r = ld ? 0 : -err->code;
    if (r == 0 && (r = wcs_api_open(NULL, &wcs, err)) == 0)
        r = vdisk_api_open(NULL, &vd, err);
    if (r == 0 && (r = vdisk_open(vd, vhd, &h, err)) == -ENOENT) {
        if ((r = mj_entry_set(e, "new", "1", err)) == 0 &&
            (r = layer_journal_step(rec, e, "create", NULL, err)) == 0)
            r = vdisk_create(vd, vhd, CIMFS_SCRATCH_BYTES, &h, err);
        created = r == 0;
    }
    if (r == 0 && (r = layer_journal_step(rec, e, "attach", NULL, err)) == 0)
        r = vdisk_attach(vd, h, err);
    if (r == 0 && created)
        r = wcs_format_vhd(wcs, h, err);
    if (r == 0 && (r = wcs_vhd_mount_path(wcs, h, volume, err)) == 0)
        r = mj_entry_set(e, "volume", *volume, err);
    /* A new writable layer is initialized once, over the CIM's files. */
    if (r == 0 && created)
        r = wcs_initialize_writable(wcs, *volume, ld, err);
    if (r == 0 && (r = layer_journal_step(rec, e, "filter", *volume, err)) == 0)
        r = wcs_attach_overlay(wcs, *volume, ld, err);
    vdisk_close(h);
    vdisk_api_free(vd);
    wcs_api_free(wcs);
    free(ld);
    return r;
}

int
layer_cimfs_mount(const struct layer_list *l, const char *scratch_dir,
                  const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    const struct layer *top = &l->layers[l->count - 1];
    const char *dir = scratch_dir ? scratch_dir : l->scratch;
    if (!dir || !dir[0])
        return err_set(err, EINVAL, "mount cimfs layers: no scratch folder");
    struct cimfs_api *api = NULL;
    int r = cimfs_api_default(&api, err);
    if (r < 0)
        return err_wrap(err, "mount cimfs layers");
    GUID g;
    if (FAILED(CoCreateGuid(&g)))
        return err_set(err, EIO, "mount cimfs layers: no GUID for the volume");
    char id[GUID_TEXT], cim_volume[GUID_TEXT + 16];
    guid_format(&g, id);
    snprintf(cim_volume, sizeof(cim_volume), "\\\\?\\Volume{%s}\\", id);
    size_t dl = strlen(dir);
    cleanup_free char *vhd = malloc(dl + sizeof(CIMFS_VHD_NAME) + 2);
    struct mj_entry *e = mj_entry_new(rec->name, rec->owner, LAYER_KIND_CIMFS);
    char *volume = NULL;
    struct mounted_layers *m = NULL;
    if (!vhd || !e) {
        r = err_set(err, ENOMEM, "mount cimfs layers: out of memory");
        goto out;
    }
    snprintf(vhd, dl + sizeof(CIMFS_VHD_NAME) + 2, "%s%s%s", dir,
             dir[dl - 1] == '\\' || dir[dl - 1] == '/' ? "" : "\\", CIMFS_VHD_NAME);
    if ((r = mj_entry_set(e, "cim-guid", id, err)) < 0 ||
        (r = mj_entry_set(e, "cim", top->path, err)) < 0 ||
        (r = mj_entry_set(e, "vhd", vhd, err)) < 0 ||
        (r = mj_entry_set(e, "layers", "1", err)) < 0 ||
        (r = mj_entry_set(e, "layer-0-id", top->layer_id, err)) < 0 ||
        (r = mj_entry_set(e, "layer-0-path", cim_volume, err)) < 0 ||
        (l->block && (r = mj_entry_set(e, "block", "1", err)) < 0) ||
        (l->merged && (r = mj_entry_set(e, "merged", l->merged, err)) < 0) ||
        (r = layer_journal_step(rec, e, "begin", vhd, err)) < 0)
        goto out;
    /* Each step is journaled before it is made: a crash at any point
     * leaves an entry that says what to take away. */
    if ((r = layer_journal_step(rec, e, "cim", NULL, err)) < 0 ||
        (r = l->block ? mount_block(api, l, &g, err) : mount_cim(api, top->path, &g, err)) < 0 ||
        (r = scratch_mount(rec, e, vhd, top->layer_id, cim_volume, &volume, err)) < 0 ||
        (r = mounted_layers_from_entry(rec->journal, e, &m, err)) < 0)
        goto undo;
    *out = m;
    goto out;
undo : {
    /* Whatever the entry says may be there goes, then the entry. */
    struct err uerr = {0};
    if (layer_cimfs_undo(e, &uerr) == 0)
        mjournal_remove(rec->journal, rec->name, &uerr);
}
out:
    free(volume);
    mj_entry_free(e);
    return r < 0 ? err_wrap(err, "mount cimfs layers") : 0;
}
