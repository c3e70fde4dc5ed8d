/*
 * Typed layers: one parse function per source (Linux snapshot chain,
 * Windows LayerFolders, CimFS) and one mount/unmount pair per type, behind
 * layers_mount and struct mounted_layers (see layer.h). Every mount is an
 * entry of the mount journal (store/mount_journal.h), written before
 * mount(2), so that a restarted daemon undoes a mount it did not make.
 * The record berth wrote before the journal, read for old containers only:
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
#include <errno.h>
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
#include "store/mount_journal.h"

#define RECORD_MAGIC "berth-mounted-layers 1"
#define RECORD_MAX 16384

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
    free(l->merged);
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

/* xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, either case. */
static bool
guid_valid(const char *s)
{
    if (!s || strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return false;
    }
    return true;
}

/* The checks LayerFolders and CIM chains share: n read-only paths and their ids. */
static int
windows_layers_check(const char *what, const char *const *paths, const char *const *ids, size_t n,
                     const char *scratch, const char *suffix, struct err *err)
{
    if (n == 0 || !scratch)
        return err_set(err, EINVAL, "parse %s: need at least one layer and the scratch", what);
    if (!ids)
        return err_set(err, EINVAL, "parse %s: no layer ids", what);
    for (size_t i = 0; i <= n; i++) {
        const char *f = i < n ? paths[i] : scratch;
        if (!f || !f[0])
            return err_set(err, EINVAL, "parse %s: folder %zu is empty", what, i);
        if (!windows_path_absolute(f))
            return err_set(err, EINVAL, "parse %s: folder %zu (%s) is not absolute", what, i, f);
        if (strpbrk(f, "\r\n"))
            return err_set(err, EINVAL, "parse %s: folder %zu has a line break", what, i);
        size_t len = strlen(f), sl = suffix ? strlen(suffix) : 0;
        if (i < n && suffix && (len <= sl || strcasecmp(f + len - sl, suffix) != 0))
            return err_set(err, EINVAL, "parse %s: %s is not a %s file", what, f, suffix);
        if (i < n && !guid_valid(ids[i]))
            return err_set(err, EINVAL, "parse %s: layer %zu (%s) has no GUID (%.40s)", what, i, f,
                           ids[i] ? ids[i] : "null");
        for (size_t j = 0; j < i; j++) {
            if (strcasecmp(paths[j], f) == 0)
                return err_set(err, EINVAL, "parse %s: %s is listed twice", what, f);
            if (i < n && strcasecmp(ids[j], ids[i]) == 0)
                return err_set(err, EINVAL, "parse %s: layer id %s is listed twice", what, ids[i]);
        }
    }
    return 0;
}

/* A list of n Windows layers given top-most first, stored bottom first. */
static int
windows_layers_list(enum layer_type type, const char *const *paths, const char *const *ids,
                    size_t n, const char *scratch, struct layer_list **out, struct err *err)
{
    struct layer_list *l = layer_list_alloc(type, n);
    if (!l || !(l->scratch = strdup(scratch))) {
        layer_list_free(l);
        return err_set(err, ENOMEM, "parse layers: out of memory");
    }
    for (size_t i = n; i-- > 0;) {
        int r = layer_list_add(l, paths[i], ids[i], err);
        if (r < 0) {
            layer_list_free(l);
            return r;
        }
    }
    *out = l;
    return 0;
}

int
layer_list_parse_wcifs(const char *const *folders, const char *const *ids, size_t count,
                       struct layer_list **out, struct err *err)
{
    if (count < 2)
        return err_set(err, EINVAL,
                       "parse layer folders: need at least one layer and the scratch, got %zu "
                       "folder%s",
                       count, count == 1 ? "" : "s");
    int r = windows_layers_check("layer folders", folders, ids, count - 1, folders[count - 1], NULL,
                                 err);
    if (r < 0)
        return r;
    return windows_layers_list(LAYER_WCIFS, folders, ids, count - 1, folders[count - 1], out, err);
}

int
layer_list_parse_cimfs(const char *const *cims, const char *const *ids, size_t count,
                       const char *scratch, struct layer_list **out, struct err *err)
{
    int r = windows_layers_check("cimfs layers", cims, ids, count, scratch, ".cim", err);
    if (r < 0)
        return r;
    return windows_layers_list(LAYER_CIMFS, cims, ids, count, scratch, out, err);
}

/* --- the mounted record ------------------------------------------------- */

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
    for (size_t i = 0; i < m->nlayers; i++) {
        free(m->layer_ids ? m->layer_ids[i] : NULL);
        free(m->layer_paths ? m->layer_paths[i] : NULL);
    }
    free(m->layer_ids);
    free(m->layer_paths);
    mj_entry_free(m->undo);
    free(m->rootfs);
    free(m->target);
    free(m->record);
    free(m->entry);
    free(m);
}

int
mounted_layers_set_entry(struct mounted_layers *m, struct mjournal *j, const char *name,
                         struct err *err)
{
    free(m->entry);
    m->journal = j;
    if (!(m->entry = strdup(name)))
        return err_set(err, ENOMEM, "mount layers: out of memory");
    return 0;
}

const char *
mounted_layers_rootfs(const struct mounted_layers *m)
{
    return m->rootfs;
}

size_t
mounted_layers_count(const struct mounted_layers *m)
{
    return m->nlayers;
}

const char *
mounted_layers_layer_id(const struct mounted_layers *m, size_t i)
{
    return i < m->nlayers ? m->layer_ids[i] : NULL;
}

const char *
mounted_layers_layer_path(const struct mounted_layers *m, size_t i)
{
    return i < m->nlayers ? m->layer_paths[i] : NULL;
}

int
layer_journal_put(const struct layer_mount_rec *rec, struct mj_entry *e, struct err *err)
{
    int r = mjournal_put(rec->journal, e, err);
    return r < 0 ? err_wrap(err, "mount layers") : 0;
}

int
layer_journal_step(const struct layer_mount_rec *rec, struct mj_entry *e, const char *step,
                   const char *rootfs, struct err *err)
{
    int r = mj_entry_set(e, "step", step, err);
    if (r == 0 && rootfs)
        r = mj_entry_set(e, "rootfs", rootfs, err);
    return r == 0 ? layer_journal_put(rec, e, err) : r;
}

/* The layers an entry lists ("layers" N, then "layer-<i>-id" and "layer-<i>-path"). */
static int
layers_from_entry(struct mounted_layers *m, const struct mj_entry *e, struct err *err)
{
    const char *ns = mj_entry_get(e, "layers");
    if (!ns)
        return 0;
    char *end = NULL;
    unsigned long n = strtoul(ns, &end, 10);
    if (*ns == '\0' || *end != '\0' || n > MJ_FIELDS_MAX / 2)
        return err_set(err, EINVAL, "mount journal entry %s: bad layer count %s", e->name, ns);
    m->layer_ids = calloc(n ? n : 1, sizeof(char *));
    m->layer_paths = calloc(n ? n : 1, sizeof(char *));
    if (!m->layer_ids || !m->layer_paths)
        return err_set(err, ENOMEM, "mount layers: out of memory");
    for (unsigned long i = 0; i < n; i++) {
        char kid[32], kpath[32];
        snprintf(kid, sizeof(kid), "layer-%lu-id", i);
        snprintf(kpath, sizeof(kpath), "layer-%lu-path", i);
        const char *id = mj_entry_get(e, kid), *path = mj_entry_get(e, kpath);
        if (!id || !path)
            return err_set(err, EINVAL, "mount journal entry %s: layer %lu is missing", e->name, i);
        m->layer_ids[i] = strdup(id);
        m->layer_paths[i] = strdup(path);
        m->nlayers = i + 1;
        if (!m->layer_ids[i] || !m->layer_paths[i])
            return err_set(err, ENOMEM, "mount layers: out of memory");
    }
    return 0;
}

int
mounted_layers_from_entry(struct mjournal *j, const struct mj_entry *e, struct mounted_layers **out,
                          struct err *err)
{
    enum layer_type t;
    if (strcmp(e->kind, LAYER_KIND_OVERLAY) == 0)
        t = LAYER_LINUX_DIR;
    else if (strcmp(e->kind, LAYER_KIND_WCIFS) == 0)
        t = LAYER_WCIFS;
    else if (strcmp(e->kind, LAYER_KIND_CIMFS) == 0)
        t = LAYER_CIMFS;
    else
        return err_set(err, EINVAL, "mount journal entry %s: %s is not a layer mount", e->name,
                       e->kind);
    const char *rootfs = mj_entry_get(e, "rootfs");
    const char *target = t == LAYER_LINUX_DIR ? mj_entry_get(e, "target") : NULL;
    if (!rootfs || !rootfs[0] || (t == LAYER_LINUX_DIR && (!target || target[0] != '/')))
        return err_set(err, EINVAL, "mount journal entry %s: no rootfs or target", e->name);
    struct mounted_layers *m = mounted_layers_new(t, rootfs, target, NULL);
    int r = m ? mounted_layers_set_entry(m, j, e->name, err)
              : err_set(err, ENOMEM, "mount layers: out of memory");
    if (r == 0 && t != LAYER_LINUX_DIR && !(m->undo = mj_entry_dup(e)))
        r = err_set(err, ENOMEM, "mount layers: out of memory");
    if (r == 0)
        r = layers_from_entry(m, e, err);
    if (r < 0) {
        mounted_layers_free(m);
        return r;
    }
    *out = m;
    return 0;
}

/* --- the record of berth before the journal ------------------------------- */

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
             const struct layer_mount_rec *rec, struct mounted_layers **out, struct err *err)
{
    if (!l || l->count == 0)
        return err_set(err, EINVAL, "mount layers: no layer");
    if (rec && (!rec->journal || !mj_name_valid(rec->name) || !rec->owner))
        return err_set(err, EINVAL, "mount layers: bad journal entry name %.80s",
                       rec->name ? rec->name : "(null)");
    switch (l->type) {
    case LAYER_LINUX_DIR:
        return layer_overlay_mount(l, scratch_dir, target, rec, out, err);
    case LAYER_WCIFS:
    case LAYER_CIMFS:
        if (!rec)
            return err_set(err, EINVAL, "mount layers: no journal to record the mount in");
        return layer_windows_mount(l, scratch_dir, rec, out, err);
    }
    return err_set(err, EINVAL, "mount layers: unknown layer type %d", (int)l->type);
}

int
layers_undo_entry(const struct mj_entry *e, struct err *err)
{
    if (strcmp(e->kind, LAYER_KIND_OVERLAY) == 0) {
        const char *target = mj_entry_get(e, "target");
        if (!target || target[0] != '/')
            return err_set(err, EINVAL, "mount journal entry %s: no target", e->name);
        return layer_overlay_unmount(target, err);
    }
    if (strcmp(e->kind, LAYER_KIND_WCIFS) == 0 || strcmp(e->kind, LAYER_KIND_CIMFS) == 0)
        return layer_windows_undo(e, err);
    return err_set(err, ENOTSUP, "mount journal entry %s: berth does not know kind %s", e->name,
                   e->kind);
}

int
mounted_layers_unmount(struct mounted_layers *m, struct err *err)
{
    int r = 0;
    switch (m->type) {
    case LAYER_LINUX_DIR:
        r = layer_overlay_unmount(m->target, err);
        break;
    case LAYER_WCIFS:
    case LAYER_CIMFS:
        r = m->undo ? layer_windows_undo(m->undo, err) : 0;
        break;
    }
    if (r < 0)
        return r;
    if (m->journal && m->entry && (r = mjournal_remove(m->journal, m->entry, err)) < 0)
        return err_wrap(err, "unmount layers");
    if (m->record && (r = osfs_unlink(m->record)) < 0 && r != -ENOENT)
        return err_errno(err, -r, "unmount layers: remove record %s", m->record);
    return 0;
}

int
layers_unmount_owner(struct mjournal *j, const char *owner, struct err *err)
{
    struct mj_entry **v = NULL;
    size_t n = 0;
    int r = mjournal_list(j, owner, &v, &n, NULL, err);
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (strcmp(v[i]->kind, LAYER_KIND_OVERLAY) != 0 &&
            strcmp(v[i]->kind, LAYER_KIND_WCIFS) != 0 && strcmp(v[i]->kind, LAYER_KIND_CIMFS) != 0)
            continue; /* not a layer mount: its own module's to undo */
        struct mounted_layers *m = NULL;
        r = mounted_layers_from_entry(j, v[i], &m, err);
        if (r == 0)
            r = mounted_layers_unmount(m, err);
        mounted_layers_free(m);
    }
    mj_entry_list_free(v, n);
    return r;
}
