/*
 * Typed layers: one parse function per source (Linux snapshot chain,
 * Windows LayerFolders, CimFS) and one mount/unmount pair per type, behind
 * layers_mount and struct mounted_layers (see layer.h); overlayfs's pair
 * is in layer_linux.c (layer_windows.c has none). Also the small text
 * record that lets a restarted daemon undo a mount it did not make:
 *
 *   berth-mounted-layers 1
 *   type linux-dir
 *   target /abs/path        ("-" when nothing was mounted)
 *   rootfs /abs/path
 *
 * Parsing runs anywhere; mounting and unmounting block and run on pool
 * threads or at start-up.
 */
#include "store/layer.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/osfs.h"
#include "store/layer_int.h"

#define RECORD_MAGIC "berth-mounted-layers 1"
#define RECORD_MAX 16384

static const char *
layer_type_name(enum layer_type t)
{
    switch (t) {
    case LAYER_LINUX_DIR:
        return "linux-dir";
    case LAYER_WCIFS:
        return "wcifs";
    case LAYER_CIMFS:
        return "cimfs";
    }
    return "unknown";
}

/* --- parsing ------------------------------------------------------------ */

static struct layer_list *
layer_list_alloc(enum layer_type type, size_t count)
{
    struct layer_list *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->type = type;
    l->layers = calloc(count ? count : 1, sizeof(*l->layers));
    if (!l->layers) {
        free(l);
        return NULL;
    }
    return l;
}

void
layer_list_free(struct layer_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->layers[i].path);
        free(l->layers[i].layer_id);
    }
    free(l->layers);
    free(l->scratch);
    free(l);
}

static int
layer_list_add(struct layer_list *l, const char *path, const char *id, struct err *err)
{
    struct layer *ly = &l->layers[l->count];
    ly->type = l->type;
    ly->path = strdup(path);
    ly->layer_id = id ? strdup(id) : NULL;
    if (!ly->path || (id && !ly->layer_id)) {
        free(ly->path);
        free(ly->layer_id);
        return err_set(err, ENOMEM, "parse layers: out of memory");
    }
    l->count++;
    return 0;
}

int
layer_list_parse_linux(const char *const *dirs, size_t count, struct layer_list **out,
                       struct err *err)
{
    if (count == 0)
        return err_set(err, EINVAL, "parse layers: no layer");
    for (size_t i = 0; i < count; i++) {
        const char *d = dirs[i];
        if (!d || d[0] != '/')
            return err_set(err, EINVAL, "parse layers: layer %zu (%s) is not an absolute path", i,
                           d ? d : "null");
        if (strpbrk(d, ":,\n"))
            return err_set(err, EINVAL, "parse layers: layer %zu (%s) has ':', ',' or a newline", i,
                           d);
    }
    struct layer_list *l = layer_list_alloc(LAYER_LINUX_DIR, count);
    if (!l)
        return err_set(err, ENOMEM, "parse layers: out of memory");
    for (size_t i = 0; i < count; i++) {
        int r = layer_list_add(l, dirs[i], NULL, err);
        if (r < 0) {
            layer_list_free(l);
            return r;
        }
    }
    *out = l;
    return 0;
}

/* C:\x, C:/x, \\server\share, \\?\Volume{...}, or /x. */
static bool
windows_path_absolute(const char *p)
{
    if (isalpha((unsigned char)p[0]) && p[1] == ':' && (p[2] == '\\' || p[2] == '/'))
        return true;
    if (p[0] == '\\' && p[1] == '\\' && p[2] != '\0')
        return true;
    return p[0] == '/';
}

int
layer_list_parse_wcifs(const char *const *folders, size_t count, struct layer_list **out,
                       struct err *err)
{
    if (count < 2)
        return err_set(err, EINVAL,
                       "parse layer folders: need at least one layer and the scratch, got %zu "
                       "folder%s",
                       count, count == 1 ? "" : "s");
    for (size_t i = 0; i < count; i++) {
        const char *f = folders[i];
        if (!f || !f[0])
            return err_set(err, EINVAL, "parse layer folders: folder %zu is empty", i);
        if (!windows_path_absolute(f))
            return err_set(err, EINVAL, "parse layer folders: folder %zu (%s) is not absolute", i,
                           f);
        if (strchr(f, '\n'))
            return err_set(err, EINVAL, "parse layer folders: folder %zu has a newline", i);
        for (size_t j = 0; j < i; j++) {
            if (strcasecmp(folders[j], f) == 0)
                return err_set(err, EINVAL, "parse layer folders: %s is listed twice", f);
        }
    }
    struct layer_list *l = layer_list_alloc(LAYER_WCIFS, count - 1);
    if (!l)
        return err_set(err, ENOMEM, "parse layer folders: out of memory");
    l->scratch = strdup(folders[count - 1]);
    if (!l->scratch) {
        layer_list_free(l);
        return err_set(err, ENOMEM, "parse layer folders: out of memory");
    }
    /* LayerFolders lists the top-most first; the list is bottom first. */
    for (size_t i = count - 1; i-- > 0;) {
        int r = layer_list_add(l, folders[i], NULL, err);
        if (r < 0) {
            layer_list_free(l);
            return r;
        }
    }
    *out = l;
    return 0;
}

int
layer_list_parse_cimfs(const char *cim_path, const char *layer_id, struct layer_list **out,
                       struct err *err)
{
    if (!cim_path || !windows_path_absolute(cim_path))
        return err_set(err, EINVAL, "parse cimfs layer: cim path %s is not absolute",
                       cim_path ? cim_path : "null");
    size_t len = strlen(cim_path);
    if (len < 4 || strcasecmp(cim_path + len - 4, ".cim") != 0)
        return err_set(err, EINVAL, "parse cimfs layer: %s is not a .cim file", cim_path);
    if (!layer_id || !layer_id[0] || strpbrk(layer_id, "/\\\n"))
        return err_set(err, EINVAL, "parse cimfs layer: invalid layer id %s",
                       layer_id ? layer_id : "null");
    struct layer_list *l = layer_list_alloc(LAYER_CIMFS, 1);
    if (!l)
        return err_set(err, ENOMEM, "parse cimfs layer: out of memory");
    int r = layer_list_add(l, cim_path, layer_id, err);
    if (r < 0) {
        layer_list_free(l);
        return r;
    }
    *out = l;
    return 0;
}

/* --- the record --------------------------------------------------------- */

struct mounted_layers *
mounted_layers_new(enum layer_type type, const char *rootfs, const char *target, const char *record)
{
    struct mounted_layers *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->type = type;
    m->rootfs = strdup(rootfs);
    m->target = target ? strdup(target) : NULL;
    m->record = record ? strdup(record) : NULL;
    if (!m->rootfs || (target && !m->target) || (record && !m->record)) {
        mounted_layers_free(m);
        return NULL;
    }
    return m;
}

void
mounted_layers_free(struct mounted_layers *m)
{
    if (!m)
        return;
    free(m->rootfs);
    free(m->target);
    free(m->record);
    free(m);
}

const char *
mounted_layers_rootfs(const struct mounted_layers *m)
{
    return m->rootfs;
}

int
mounted_layers_record(const struct mounted_layers *m, const char *path, struct err *err)
{
    cleanup_free char *text = NULL;
    if (asprintf(&text, "%s\ntype %s\ntarget %s\nrootfs %s\n", RECORD_MAGIC,
                 layer_type_name(m->type), m->target ? m->target : "-", m->rootfs) < 0) {
        text = NULL;
        return err_set(err, ENOMEM, "write mount record %s: out of memory", path);
    }
    int r = fs_write_file_atomic(path, text, strlen(text), 0600, err);
    if (r < 0)
        return err_wrap(err, "write mount record");
    return 0;
}

int
mounted_layers_load(const char *path, struct mounted_layers **out, struct err *err)
{
    cleanup_free char *text = NULL;
    int r = fs_read_file(path, RECORD_MAX, &text, NULL, err);
    if (r < 0)
        return r;
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, RECORD_MAGIC) != 0)
        return err_set(err, EINVAL, "read mount record %s: not a berth mount record", path);
    const char *type = NULL, *target = NULL, *rootfs = NULL;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        if (strncmp(line, "type ", 5) == 0)
            type = line + 5;
        else if (strncmp(line, "target ", 7) == 0)
            target = line + 7;
        else if (strncmp(line, "rootfs ", 7) == 0)
            rootfs = line + 7;
    }
    if (!type || !target || !rootfs || rootfs[0] != '/' ||
        (strcmp(target, "-") != 0 && target[0] != '/'))
        return err_set(err, EINVAL, "read mount record %s: missing or bad fields", path);
    enum layer_type t;
    if (strcmp(type, "linux-dir") == 0)
        t = LAYER_LINUX_DIR;
    else if (strcmp(type, "wcifs") == 0)
        t = LAYER_WCIFS;
    else if (strcmp(type, "cimfs") == 0)
        t = LAYER_CIMFS;
    else
        return err_set(err, EINVAL, "read mount record %s: unknown layer type %s", path, type);
    struct mounted_layers *m =
        mounted_layers_new(t, rootfs, strcmp(target, "-") == 0 ? NULL : target, path);
    if (!m)
        return err_set(err, ENOMEM, "read mount record %s: out of memory", path);
    *out = m;
    return 0;
}

/* --- dispatch ----------------------------------------------------------- */

int
layers_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
             struct mounted_layers **out, struct err *err)
{
    if (!l || l->count == 0)
        return err_set(err, EINVAL, "mount layers: no layer");
    switch (l->type) {
    case LAYER_LINUX_DIR:
        return layer_overlay_mount(l, scratch_dir, target, out, err);
    case LAYER_WCIFS:
        return err_set(err, ENOTSUP, "mount layers: wcifs layers need the hcs driver on Windows");
    case LAYER_CIMFS:
        return err_set(err, ENOTSUP, "mount layers: cimfs layers need the hcs driver on Windows");
    }
    return err_set(err, EINVAL, "mount layers: unknown layer type %d", (int)l->type);
}

int
mounted_layers_unmount(struct mounted_layers *m, struct err *err)
{
    int r = 0;
    switch (m->type) {
    case LAYER_LINUX_DIR:
        r = layer_overlay_unmount(m, err);
        break;
    case LAYER_WCIFS:
    case LAYER_CIMFS:
        return err_set(err, ENOTSUP, "unmount %s layers: they need the hcs driver on Windows",
                       layer_type_name(m->type));
    }
    if (r < 0)
        return r;
    if (m->record && (r = osfs_unlink(m->record)) < 0 && r != -ENOENT)
        return err_errno(err, -r, "unmount layers: remove record %s", m->record);
    return 0;
}
