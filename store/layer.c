/*
 * Typed layers: one parse function per source (Linux snapshot chain,
 * Windows LayerFolders, CimFS) and one mount/unmount pair per type, behind
 * layers_mount and struct mounted_layers (see layer.h). Also the small
 * text record that lets a restarted daemon undo a mount it did not make:
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
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/log.h"

#define OVERLAYFS_MAGIC 0x794c7630
#define RECORD_MAGIC "berth-mounted-layers 1"
#define RECORD_MAX 16384

struct mounted_layers {
    enum layer_type type;
    char *rootfs;
    char *target; /* the mount point, NULL when nothing is mounted */
    char *record; /* the record file, NULL when there is none */
};

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

static struct mounted_layers *
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

/* --- LAYER_LINUX_DIR: overlayfs ------------------------------------------ */

/*
 * Builds the overlay option string. With fds non-NULL, every directory is
 * opened and named /proc/self/fd/N (fds, count + 2 slots preset to -1,
 * receives them for the caller to close) so the string stays short.
 */
static char *
overlay_options(const struct layer_list *l, const char *upper, const char *work, int *fds,
                struct err *err)
{
    size_t cap = 64 + strlen(upper) + strlen(work);
    for (size_t i = 0; i < l->count; i++)
        cap += strlen(l->layers[i].path) + 32;
    char *opts = malloc(cap);
    if (!opts) {
        err_set(err, ENOMEM, "mount layers: out of memory");
        return NULL;
    }
    size_t o = 0;
    o += (size_t)snprintf(opts + o, cap - o, "lowerdir=");
    size_t nfd = 0;
    for (size_t i = l->count; i-- > 0;) {
        const char *p = l->layers[i].path;
        char buf[32];
        if (fds) {
            int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0) {
                err_errno(err, errno, "mount layers: open %s", p);
                free(opts);
                return NULL;
            }
            fds[nfd++] = fd;
            snprintf(buf, sizeof(buf), "/proc/self/fd/%d", fd);
            p = buf;
        }
        o += (size_t)snprintf(opts + o, cap - o, "%s%s", p, i ? ":" : "");
    }
    const char *dirs[2] = {upper, work};
    char bufs[2][32];
    for (int k = 0; k < 2 && fds; k++) {
        int fd = open(dirs[k], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            err_errno(err, errno, "mount layers: open %s", dirs[k]);
            free(opts);
            return NULL;
        }
        fds[nfd++] = fd;
        snprintf(bufs[k], sizeof(bufs[k]), "/proc/self/fd/%d", fd);
        dirs[k] = bufs[k];
    }
    o += (size_t)snprintf(opts + o, cap - o, ",upperdir=%s,workdir=%s", dirs[0], dirs[1]);
    /* index=off: a snapshot is a lower layer of many mounts at once. */
    if (access("/sys/module/overlay/parameters/index", F_OK) == 0)
        snprintf(opts + o, cap - o, ",index=off");
    return opts;
}

static int
overlay_mount(const struct layer_list *l, const char *scratch_dir, const char *target,
              struct mounted_layers **out, struct err *err)
{
    if (!scratch_dir) {
        if (l->count != 1)
            return err_set(err, EINVAL, "mount layers: %zu layers need a scratch directory",
                           l->count);
        struct mounted_layers *m =
            mounted_layers_new(LAYER_LINUX_DIR, l->layers[0].path, NULL, NULL);
        if (!m)
            return err_set(err, ENOMEM, "mount layers: out of memory");
        *out = m;
        return 0;
    }
    if (!target || target[0] != '/' || strpbrk(target, "\n"))
        return err_set(err, EINVAL, "mount layers: target %s is not an absolute path",
                       target ? target : "null");
    cleanup_free char *upper = fs_path_join(scratch_dir, "upper");
    cleanup_free char *work = fs_path_join(scratch_dir, "work");
    cleanup_free char *record = fs_path_join(scratch_dir, LAYERS_RECORD_NAME);
    if (!upper || !work || !record)
        return err_set(err, ENOMEM, "mount layers: out of memory");
    if (strpbrk(scratch_dir, ":,\n"))
        return err_set(err, EINVAL, "mount layers: scratch %s has ':', ',' or a newline",
                       scratch_dir);
    int r = fs_mkdir_p(upper, 0755, err);
    if (r == 0)
        r = fs_mkdir_p(work, 0700, err);
    if (r == 0)
        r = fs_mkdir_p(target, 0755, err);
    if (r < 0)
        return err_wrap(err, "mount layers");

    struct mounted_layers *m = mounted_layers_new(LAYER_LINUX_DIR, target, target, record);
    if (!m)
        return err_set(err, ENOMEM, "mount layers: out of memory");
    /* The record first: a crash after mount(2) must leave a way to undo it. */
    r = mounted_layers_record(m, record, err);
    if (r < 0) {
        mounted_layers_free(m);
        return r;
    }

    long page = sysconf(_SC_PAGESIZE);
    int *fds = NULL;
    char *opts = overlay_options(l, upper, work, NULL, err);
    if (opts && (long)strlen(opts) >= page) {
        free(opts);
        fds = malloc((l->count + 2) * sizeof(int));
        for (size_t i = 0; fds && i < l->count + 2; i++)
            fds[i] = -1;
        opts = fds ? overlay_options(l, upper, work, fds, err) : NULL;
        if (!fds)
            err_set(err, ENOMEM, "mount layers: out of memory");
    }
    r = 0;
    if (!opts) {
        r = -(err && err->code ? err->code : ENOMEM);
    } else if ((long)strlen(opts) >= page) {
        r = err_set(err, ERR_INVALID_CONTENT,
                    "mount layers: %zu layers do not fit in a mount option string", l->count);
    } else if (mount("overlay", target, "overlay", 0, opts) < 0) {
        r = err_errno(err, errno, "mount overlay of %zu layers at %s", l->count, target);
    }
    if (fds) {
        for (size_t i = 0; i < l->count + 2; i++) {
            if (fds[i] >= 0)
                close(fds[i]);
        }
        free(fds);
    }
    free(opts);
    if (r < 0) {
        unlink(record);
        mounted_layers_free(m);
        return r;
    }
    log_debug("mounted %zu layers at %s", l->count, target);
    *out = m;
    return 0;
}

static int
overlay_unmount(struct mounted_layers *m, struct err *err)
{
    if (!m->target)
        return 0;
    struct statfs sf;
    if (statfs(m->target, &sf) < 0) {
        if (errno == ENOENT)
            return 0;
        return err_errno(err, errno, "unmount layers: statfs %s", m->target);
    }
    /* Only an overlay is ours to unmount; anything else means not mounted. */
    if (sf.f_type != OVERLAYFS_MAGIC)
        return 0;
    if (umount2(m->target, UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
        return err_errno(err, errno, "unmount layers at %s", m->target);
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
        return overlay_mount(l, scratch_dir, target, out, err);
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
        r = overlay_unmount(m, err);
        break;
    case LAYER_WCIFS:
    case LAYER_CIMFS:
        return err_set(err, ENOTSUP, "unmount %s layers: they need the hcs driver on Windows",
                       layer_type_name(m->type));
    }
    if (r < 0)
        return r;
    if (m->record && unlink(m->record) < 0 && errno != ENOENT)
        return err_errno(err, errno, "unmount layers: remove record %s", m->record);
    return 0;
}
