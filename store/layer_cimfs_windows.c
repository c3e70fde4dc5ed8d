/*
 * LAYER_CIMFS mounts through cimfs.dll (store/layer_cimfs.h): the
 * journal entry first, then CimMountImage; the undo is CimDismountImage.
 * Windows only; pool threads or start-up.
 */
#include "store/layer_cimfs.h"

#include <windows.h>

#include <objbase.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "store/cimfs_api.h"

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

int
layer_cimfs_mount(const struct layer_list *l, const struct layer_mount_rec *rec,
                  struct mounted_layers **out, struct err *err)
{
    const struct layer *top = &l->layers[l->count - 1];
    struct cimfs_api *api = NULL;
    int r = cimfs_api_default(&api, err);
    if (r < 0)
        return err_wrap(err, "mount cimfs layers");
    GUID g;
    if (FAILED(CoCreateGuid(&g)))
        return err_set(err, EIO, "mount cimfs layers: no GUID for the volume");
    char id[GUID_TEXT], volume[GUID_TEXT + 16];
    guid_format(&g, id);
    snprintf(volume, sizeof(volume), "\\\\?\\Volume{%s}\\", id);

    struct mj_entry *e = mj_entry_new(rec->name, rec->owner, LAYER_KIND_CIMFS);
    if (!e)
        return err_set(err, ENOMEM, "mount cimfs layers: out of memory");
    struct mounted_layers *m = NULL;
    if ((r = mj_entry_set(e, "volume", id, err)) < 0 ||
        (r = mj_entry_set(e, "cim", top->path, err)) < 0 ||
        (r = mj_entry_set(e, "rootfs", volume, err)) < 0 ||
        (r = mj_entry_set(e, "layers", "1", err)) < 0 ||
        (r = mj_entry_set(e, "layer-0-id", top->layer_id, err)) < 0 ||
        (r = mj_entry_set(e, "layer-0-path", volume, err)) < 0)
        goto out;
    /* Journaled before it is made: a crash after CimMountImage leaves an
     * entry that names the volume to dismount. */
    if ((r = layer_journal_put(rec, e, err)) < 0)
        goto out;
    if ((r = mount_cim(api, top->path, &g, err)) < 0) {
        struct err e2 = {0};
        mjournal_remove(rec->journal, rec->name, &e2); /* nothing was mounted */
        goto out;
    }
    r = mounted_layers_from_entry(rec->journal, e, &m, err);
    if (r < 0) {
        struct err e2 = {0};
        if (layer_cimfs_undo(e, &e2) == 0)
            mjournal_remove(rec->journal, rec->name, &e2);
        goto out;
    }
    *out = m;
out:
    mj_entry_free(e);
    return r;
}

int
layer_cimfs_undo(const struct mj_entry *e, struct err *err)
{
    const char *id = mj_entry_get(e, "volume");
    GUID g;
    if (guid_parse(id, &g) < 0)
        return err_set(err, EINVAL, "undo cimfs mount %s: no volume GUID (%.60s)", e->name,
                       id ? id : "none");
    struct cimfs_api *api = NULL;
    if (cimfs_api_default(&api, err) < 0)
        return err_wrap(err, "undo cimfs mount %s", e->name);
    HRESULT hr = api->CimDismountImage(&g);
    if (hr == HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND))
        return 0; /* not mounted: never made, or undone already */
    if (FAILED(hr))
        return cimfs_err_set(err, hr, "undo cimfs mount %s: dismount %s", e->name, id);
    return 0;
}
