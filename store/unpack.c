/*
 * Layer unpacking into a snapshot directory, in one pass.
 *
 * Two libarchive readers are chained. The outer one has the raw format and
 * every decompression filter; its read callback pulls the blob from the
 * caller and hashes the compressed bytes. The inner one reads tar; its
 * read callback pulls decompressed bytes from the outer reader and hashes
 * them (the diff_id). After the tar's end, the rest of both streams is
 * drained through the same callbacks, so the digests cover every byte
 * (tar padding, trailing zero blocks, anything after the last gzip member).
 *
 * Entries go to archive_write_disk with the secure flags, after checks of
 * our own (see unpack.h). archive_write_disk resolves names against the
 * process's working directory, and chdir is process-wide, so it cannot be
 * used from a pool thread: every name is made absolute under the target's
 * realpath() after our checks proved it relative and free of "..". That is
 * why ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS is not set; SECURE_SYMLINKS
 * and SECURE_NODOTDOT still are, as a second line behind our checks.
 *
 * Runs on a pool thread; blocks on the caller's read callback and on disk.
 */
#include "store/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"

#define UNPACK_BUF_SIZE (128 * 1024)
#define UNPACK_PROGRESS_STEP (1024 * 1024)

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define OVERLAY_OPAQUE_XATTR "trusted.overlay.opaque"
#define OVERLAY_XATTR_PREFIX "trusted.overlay."

struct unpack {
    const struct unpack_input *in;
    const struct unpack_opts *opts;
    struct err *err;

    struct sha256 *zhash; /* compressed bytes */
    struct sha256 *thash; /* tar stream */
    uint64_t zsize;
    uint64_t tsize;
    unsigned char *zbuf;
    unsigned char *tbuf;

    /* Why a read callback failed, for the error message. */
    int read_errno;
    bool decompress_failed;
    char decompress_msg[256];

    struct archive *outer;
    struct archive *inner;
    struct archive *disk;

    char *root; /* realpath of the target */
    int root_fd;
    size_t nlowers;
    int *lower_fds;
    bool *active; /* scratch for check_parents, one per lower */

    char *last_parent; /* parent checked for the previous entry */
    uint64_t last_progress;
    struct unpack_result *res;
};

/* --- streams ------------------------------------------------------------ */

static la_ssize_t
outer_read_cb(struct archive *a, void *data, const void **buf)
{
    struct unpack *u = data;
    ssize_t n = u->in->read(u->in->ctx, u->zbuf, UNPACK_BUF_SIZE);
    if (n < 0) {
        u->read_errno = (int)-n;
        archive_set_error(a, (int)-n, "read layer blob: %s", strerror((int)-n));
        return ARCHIVE_FATAL;
    }
    if (!u->opts->no_digests)
        sha256_update(u->zhash, u->zbuf, (size_t)n);
    u->zsize += (uint64_t)n;
    *buf = u->zbuf;
    return n;
}

/* Pulls decompressed bytes from the outer reader into tbuf, hashing them. */
static la_ssize_t
tar_pull(struct unpack *u)
{
    la_ssize_t n = archive_read_data(u->outer, u->tbuf, UNPACK_BUF_SIZE);
    if (n < 0) {
        if (!u->read_errno) {
            u->decompress_failed = true;
            snprintf(u->decompress_msg, sizeof(u->decompress_msg), "%s",
                     archive_error_string(u->outer) ? archive_error_string(u->outer)
                                                    : "unknown error");
        }
        return ARCHIVE_FATAL;
    }
    if (!u->opts->no_digests)
        sha256_update(u->thash, u->tbuf, (size_t)n);
    u->tsize += (uint64_t)n;
    return n;
}

static la_ssize_t
inner_read_cb(struct archive *a, void *data, const void **buf)
{
    struct unpack *u = data;
    la_ssize_t n = tar_pull(u);
    if (n < 0) {
        archive_set_error(a, u->read_errno ? u->read_errno : EIO, "%s",
                          u->read_errno ? strerror(u->read_errno) : u->decompress_msg);
        return ARCHIVE_FATAL;
    }
    *buf = u->tbuf;
    return n;
}

/* Turns a failure of the reading side into err: I/O or invalid content. */
static int
unpack_read_error(struct unpack *u, struct archive *a, const char *what)
{
    if (u->read_errno)
        return err_errno(u->err, u->read_errno, "read layer blob");
    if (u->decompress_failed)
        return err_set(u->err, ERR_INVALID_CONTENT, "decompress layer: %s", u->decompress_msg);
    const char *msg = archive_error_string(a);
    return err_set(u->err, ERR_INVALID_CONTENT, "%s: %s", what, msg ? msg : "unknown error");
}

/* Checks the compression the bytes show against the media type, if any. */
static int
unpack_check_filter(struct unpack *u)
{
    int nfilters = archive_filter_count(u->outer);
    int code = archive_filter_code(u->outer, 0);
    /* The last filter is the client's bytes as they are ("none"). */
    if (nfilters > 2 ||
        (code != ARCHIVE_FILTER_NONE && code != ARCHIVE_FILTER_GZIP && code != ARCHIVE_FILTER_ZSTD))
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "layer blob: compression %s is not gzip, zstd or none",
                       archive_filter_name(u->outer, 0));
    const char *mt = u->in->media_type;
    if (!mt)
        return 0;
    size_t len = strlen(mt);
    int want = -1;
    if (len >= 4 && strcmp(mt + len - 4, "gzip") == 0)
        want = ARCHIVE_FILTER_GZIP;
    else if (len >= 4 && strcmp(mt + len - 4, "zstd") == 0)
        want = ARCHIVE_FILTER_ZSTD;
    else if (len >= 4 && strcmp(mt + len - 4, ".tar") == 0)
        want = ARCHIVE_FILTER_NONE;
    if (want >= 0 && want != code)
        return err_set(
            u->err, ERR_INVALID_CONTENT, "layer blob: media type %s but the bytes are %s", mt,
            code == ARCHIVE_FILTER_NONE ? "uncompressed" : archive_filter_name(u->outer, 0));
    return 0;
}

/* --- paths -------------------------------------------------------------- */

/*
 * Cleans a tar name into a relative path without "." components or
 * repeated slashes ("" for the root). Returns NULL with *why set for an
 * absolute name or a ".." component, or on OOM (*why NULL).
 */
static char *
path_clean(const char *name, const char **why)
{
    *why = NULL;
    /* "/" alone names the layer's root (umoci writes it so); any other
     * absolute name would land outside the snapshot. */
    if (name[0] == '/' && name[strspn(name, "/.")] != '\0') {
        *why = "is an absolute path";
        return NULL;
    }
    if (name[0] == '/')
        return strdup("");
    size_t len = strlen(name);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    const char *p = name;
    while (*p) {
        const char *end = strchrnul(p, '/');
        size_t n = (size_t)(end - p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            free(out);
            *why = "has a .. component";
            return NULL;
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
    return out;
}

static bool
stat_is_whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/* True when the directory at base/rel carries the overlay opaque xattr. */
static bool
dir_is_opaque(const char *base, const char *rel)
{
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%s/%s", base, rel) < 0)
        return false;
    char v[4];
    ssize_t n = lgetxattr(path, OVERLAY_OPAQUE_XATTR, v, sizeof(v));
    return n == 1 && v[0] == 'y';
}

static int
dir_set_opaque(struct unpack *u, const char *rel)
{
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%s/%s", u->root, rel) < 0)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    if (lsetxattr(path, OVERLAY_OPAQUE_XATTR, "y", 1, 0) < 0)
        return err_errno(u->err, errno, "set %s on %s", OVERLAY_OPAQUE_XATTR, path);
    return 0;
}

/* Replaces a whiteout of this layer at rel by an opaque directory. */
static int
whiteout_to_dir(struct unpack *u, const char *rel)
{
    if (unlinkat(u->root_fd, rel, 0) < 0)
        return err_errno(u->err, errno, "unlink whiteout %s", rel);
    if (mkdirat(u->root_fd, rel, 0755) < 0)
        return err_errno(u->err, errno, "mkdir %s", rel);
    return dir_set_opaque(u, rel);
}

/*
 * Walks the lower layers for the component prefix p, keeping in active[]
 * the lowers whose p takes part in the merged view an overlay mount would
 * show. upper_dir says this layer already has p as a directory (which
 * hides lower non-directories). Rejects p when the merged view shows a
 * symlink there.
 */
static int
lowers_step(struct unpack *u, const char *entry, const char *p, bool upper_dir)
{
    bool found = upper_dir;
    bool blocked = false;
    for (size_t i = 0; i < u->nlowers; i++) {
        if (!u->active[i])
            continue;
        struct stat st;
        if (blocked || fstatat(u->lower_fds[i], p, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            u->active[i] = false;
            continue;
        }
        if (!found && S_ISLNK(st.st_mode))
            return err_set(u->err, ERR_INVALID_CONTENT,
                           "layer entry %s: parent %s is a symlink in a lower layer", entry, p);
        found = true;
        if (!S_ISDIR(st.st_mode)) {
            /* A whiteout or a file: hides p in every lower below. */
            u->active[i] = false;
            blocked = true;
        } else if (dir_is_opaque(u->opts->lower_dirs[i], p)) {
            blocked = true;
        }
    }
    return 0;
}

/*
 * Checks every parent component of entry path rel: a directory in this
 * layer, or absent here and not a symlink in the merged lower layers. A
 * whiteout of this layer in the way becomes an opaque directory.
 */
static int
check_parents(struct unpack *u, const char *rel)
{
    const char *slash = strrchr(rel, '/');
    if (!slash) {
        /* A top-level entry may replace the cached parent itself. */
        free(u->last_parent);
        u->last_parent = NULL;
        return 0;
    }
    size_t plen = (size_t)(slash - rel);
    if (u->last_parent && strlen(u->last_parent) == plen && memcmp(u->last_parent, rel, plen) == 0)
        return 0;
    cleanup_free char *p = strndup(rel, plen);
    if (!p)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    for (size_t i = 0; i < u->nlowers; i++)
        u->active[i] = true;

    for (char *c = p;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char saved = *c;
        *c = '\0';
        struct stat st;
        bool upper_dir = false;
        if (fstatat(u->root_fd, p, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (S_ISLNK(st.st_mode))
                return err_set(u->err, ERR_INVALID_CONTENT,
                               "layer entry %s: parent %s is a symlink in this layer", rel, p);
            if (stat_is_whiteout(&st) && !u->opts->no_whiteouts) {
                int r = whiteout_to_dir(u, p);
                if (r < 0)
                    return r;
                for (size_t i = 0; i < u->nlowers; i++)
                    u->active[i] = false;
            } else if (!S_ISDIR(st.st_mode)) {
                return err_set(u->err, ERR_INVALID_CONTENT,
                               "layer entry %s: parent %s is not a directory", rel, p);
            } else {
                upper_dir = true;
            }
        } else if (errno != ENOENT) {
            return err_errno(u->err, errno, "stat %s/%s", u->root, p);
        }
        int r = lowers_step(u, rel, p, upper_dir);
        if (r < 0)
            return r;
        if (upper_dir && dir_is_opaque(u->root, p)) {
            for (size_t i = 0; i < u->nlowers; i++)
                u->active[i] = false;
        }
        *c = saved;
        if (saved == '\0')
            break;
    }
    free(u->last_parent);
    u->last_parent = steal_ptr(&p);
    return 0;
}

/* Creates the missing directories of rel (already checked) in this layer. */
static int
ensure_dir(struct unpack *u, const char *rel)
{
    if (rel[0] == '\0')
        return 0;
    cleanup_free char *p = strdup(rel);
    if (!p)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    for (char *c = p;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char saved = *c;
        *c = '\0';
        struct stat st;
        if (fstatat(u->root_fd, p, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (stat_is_whiteout(&st) && !u->opts->no_whiteouts) {
                int r = whiteout_to_dir(u, p);
                if (r < 0)
                    return r;
            } else if (!S_ISDIR(st.st_mode)) {
                return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: %s is not a directory",
                               rel, p);
            }
        } else if (mkdirat(u->root_fd, p, 0755) < 0) {
            return err_errno(u->err, errno, "mkdir %s/%s", u->root, p);
        }
        *c = saved;
        if (saved == '\0')
            break;
    }
    return 0;
}

/* --- whiteouts ---------------------------------------------------------- */

/* Applies whiteout entry rel (dir + ".wh." + name) in the overlay format. */
static int
whiteout_apply(struct unpack *u, const char *rel, const char *dir, const char *base)
{
    int r = ensure_dir(u, dir);
    if (r < 0)
        return r;
    if (strcmp(base, WHITEOUT_OPAQUE) == 0)
        return dir_set_opaque(u, dir[0] ? dir : ".");

    const char *name = base + strlen(WHITEOUT_PREFIX);
    if (strncmp(name, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0) {
        /* Other aufs metadata (.wh..wh.plnk and such): never applied. */
        log_debug("unpack: skipping whiteout metadata %s", rel);
        return 0;
    }
    if (name[0] == '\0' || strcmp(name, ".") == 0)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: whiteout without a name", rel);
    cleanup_free char *target = NULL;
    if (asprintf(&target, "%s%s%s", dir, dir[0] ? "/" : "", name) < 0)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    struct stat st;
    if (fstatat(u->root_fd, target, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        /* An entry of this layer: it stays. A directory loses what the
         * lower layers had under it, as the whiteout asked. */
        if (S_ISDIR(st.st_mode))
            return dir_set_opaque(u, target);
        return 0;
    }
    if (errno != ENOENT)
        return err_errno(u->err, errno, "stat %s/%s", u->root, target);
    if (mknodat(u->root_fd, target, S_IFCHR | 0, makedev(0, 0)) < 0)
        return err_errno(u->err, errno, "create whiteout %s/%s", u->root, target);
    return 0;
}

/* --- entries ------------------------------------------------------------ */

/* Drops trusted.overlay.* xattrs the tar carries: only we may set those. */
static int
entry_strip_overlay_xattrs(struct unpack *u, struct archive_entry *e, const char *rel)
{
    if (archive_entry_xattr_reset(e) == 0)
        return 0;
    bool found = false;
    const char *name;
    const void *value;
    size_t size;
    while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
        if (strncmp(name, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0)
            found = true;
    }
    if (!found)
        return 0;
    int n = archive_entry_xattr_reset(e);
    struct kept {
        char *name;
        void *value;
        size_t size;
    } *kept = calloc((size_t)n, sizeof(*kept));
    if (!kept)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    int k = 0;
    int ret = 0;
    while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
        if (strncmp(name, OVERLAY_XATTR_PREFIX, strlen(OVERLAY_XATTR_PREFIX)) == 0) {
            log_debug("unpack: %s: dropping xattr %s", rel, name);
            continue;
        }
        kept[k].name = strdup(name);
        kept[k].value = malloc(size ? size : 1);
        if (!kept[k].name || !kept[k].value) {
            free(kept[k].name);
            free(kept[k].value);
            ret = err_set(u->err, ENOMEM, "unpack: out of memory");
            break;
        }
        memcpy(kept[k].value, value, size);
        kept[k].size = size;
        k++;
    }
    if (ret == 0) {
        archive_entry_xattr_clear(e);
        for (int i = 0; i < k; i++)
            archive_entry_xattr_add_entry(e, kept[i].name, kept[i].value, kept[i].size);
    }
    for (int i = 0; i < k; i++) {
        free(kept[i].name);
        free(kept[i].value);
    }
    free(kept);
    return ret;
}

/*
 * Checks a hard link's target: relative, no "..", an earlier non-directory
 * entry of this layer reached through directories only. Returns the
 * cleaned target in *out.
 */
static int
check_link_target(struct unpack *u, const char *rel, const char *link, char **out)
{
    const char *why = NULL;
    cleanup_free char *t = path_clean(link, &why);
    if (!t && !why)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    if (!t)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: hard link target %s %s", rel,
                       link, why);
    if (t[0] == '\0')
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "layer entry %s: hard link target %s is the root", rel, link);
    for (char *c = t;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char saved = *c;
        *c = '\0';
        struct stat st;
        if (fstatat(u->root_fd, t, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            *c = saved;
            return err_set(u->err, ERR_INVALID_CONTENT,
                           "layer entry %s: hard link target %s is not in this layer", rel, link);
        }
        if (saved == '\0') {
            if (S_ISDIR(st.st_mode))
                return err_set(u->err, ERR_INVALID_CONTENT,
                               "layer entry %s: hard link target %s is a directory", rel, link);
            break;
        }
        if (!S_ISDIR(st.st_mode))
            return err_set(u->err, ERR_INVALID_CONTENT,
                           "layer entry %s: hard link target %s goes through %s, %s", rel, link, t,
                           S_ISLNK(st.st_mode) ? "a symlink" : "not a directory");
        *c = saved;
    }
    *out = steal_ptr(&t);
    return 0;
}

/* Makes an existing regular file writable: mode u+w, no immutable flag. */
static void
file_make_writable(const char *path)
{
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
        (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)) != 0) {
        flags &= ~(FS_IMMUTABLE_FL | FS_APPEND_FL);
        if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
            log_debug("unpack: clear flags on %s: %s", path, strerror(errno));
    }
    if ((st.st_mode & S_IWUSR) == 0 && fchmod(fd, (st.st_mode & 07777) | S_IWUSR) < 0)
        log_debug("unpack: chmod %s: %s", path, strerror(errno));
}

static int
disk_error(struct unpack *u, const char *rel, const char *what)
{
    int e = archive_errno(u->disk);
    const char *msg = archive_error_string(u->disk);
    if (e <= 0)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: %s: %s", rel, what,
                       msg ? msg : "refused");
    return err_set(u->err, e, "layer entry %s: %s: %s", rel, what, msg ? msg : strerror(e));
}

static int
entry_copy_data(struct unpack *u, const char *rel)
{
    for (;;) {
        const void *buf;
        size_t size;
        la_int64_t off;
        int r = archive_read_data_block(u->inner, &buf, &size, &off);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN) {
            unpack_read_error(u, u->inner, "read layer tar");
            return err_wrap(u->err, "layer entry %s", rel);
        }
        if (archive_write_data_block(u->disk, buf, size, off) < ARCHIVE_OK)
            return disk_error(u, rel, "write");
    }
}

static int
entry_extract(struct unpack *u, struct archive_entry *e)
{
    const char *name = archive_entry_pathname(e);
    if (!name)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry without a name");
    const char *why = NULL;
    cleanup_free char *rel = path_clean(name, &why);
    if (!rel && !why)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    if (!rel)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer entry %s: %s", name, why);
    if (rel[0] == '\0') {
        log_debug("unpack: skipping the root entry %s", name);
        return 0;
    }
    int r = check_parents(u, rel);
    if (r < 0)
        return r;

    char *slash = strrchr(rel, '/');
    const char *base = slash ? slash + 1 : rel;
    cleanup_free char *dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
    if (!dir)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    if (!u->opts->no_whiteouts && strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) == 0)
        return whiteout_apply(u, rel, dir, base);

    mode_t type = archive_entry_filetype(e);
    if ((type == AE_IFCHR || type == AE_IFBLK) && !u->opts->allow_device_nodes) {
        log_debug("unpack: skipping device node %s", rel);
        return 0;
    }

    const char *link = archive_entry_hardlink(e);
    cleanup_free char *abs_link = NULL;
    if (link) {
        cleanup_free char *t = NULL;
        r = check_link_target(u, rel, link, &t);
        if (r < 0)
            return r;
        if (asprintf(&abs_link, "%s/%s", u->root, t) < 0) {
            abs_link = NULL;
            return err_set(u->err, ENOMEM, "unpack: out of memory");
        }
        archive_entry_set_hardlink(e, abs_link);
    }
    r = entry_strip_overlay_xattrs(u, e, rel);
    if (r < 0)
        return r;

    struct stat st;
    bool over_whiteout = !u->opts->no_whiteouts &&
                         fstatat(u->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                         stat_is_whiteout(&st);
    cleanup_free char *abs = NULL;
    if (asprintf(&abs, "%s/%s", u->root, rel) < 0) {
        abs = NULL;
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    }
    archive_entry_set_pathname(e, abs);

    /* A failed archive_write_header zeroes the entry's size: keep it. */
    la_int64_t size = archive_entry_size(e);
    r = archive_write_header(u->disk, e);
    if (r < ARCHIVE_WARN && type == AE_IFREG &&
        (archive_errno(u->disk) == EACCES || archive_errno(u->disk) == EPERM)) {
        /* A read-only (or immutable) file of that name is in the way. */
        log_debug("unpack: %s is read-only, making it writable and retrying", rel);
        file_make_writable(abs);
        archive_entry_set_size(e, size);
        r = archive_write_header(u->disk, e);
    }
    if (r < ARCHIVE_WARN)
        return disk_error(u, rel, "create");
    if (r == ARCHIVE_WARN)
        log_warn("unpack: layer entry %s: %s", rel, archive_error_string(u->disk));
    if (size > 0 && type == AE_IFREG) {
        r = entry_copy_data(u, rel);
        if (r < 0)
            return r;
    }
    r = archive_write_finish_entry(u->disk);
    if (r < ARCHIVE_WARN)
        return disk_error(u, rel, "finish");
    if (r == ARCHIVE_WARN)
        log_warn("unpack: layer entry %s: %s", rel, archive_error_string(u->disk));

    if (type == AE_IFREG && !link)
        u->res->unpacked_bytes += (uint64_t)size;
    if (type == AE_IFDIR && over_whiteout)
        return dir_set_opaque(u, rel);
    return 0;
}

/* --- the pass ----------------------------------------------------------- */

static void
unpack_progress(struct unpack *u, bool force)
{
    if (!u->opts->progress_cb)
        return;
    if (!force && u->zsize - u->last_progress < UNPACK_PROGRESS_STEP)
        return;
    u->last_progress = u->zsize;
    u->opts->progress_cb(u->opts->progress_ctx, u->zsize);
}

static int
unpack_setup(struct unpack *u)
{
    const struct unpack_opts *o = u->opts;
    u->zhash = sha256_new();
    u->thash = sha256_new();
    u->zbuf = malloc(UNPACK_BUF_SIZE);
    u->tbuf = malloc(UNPACK_BUF_SIZE);
    if (!u->zhash || !u->thash || !u->zbuf || !u->tbuf)
        return err_set(u->err, ENOMEM, "unpack: out of memory");

    u->root = realpath(o->target_dir, NULL);
    if (!u->root)
        return err_errno(u->err, errno, "unpack into %s", o->target_dir);
    u->root_fd = open(u->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (u->root_fd < 0)
        return err_errno(u->err, errno, "open %s", u->root);

    while (o->lower_dirs && o->lower_dirs[u->nlowers])
        u->nlowers++;
    u->lower_fds = calloc(u->nlowers + 1, sizeof(int));
    u->active = calloc(u->nlowers + 1, sizeof(bool));
    if (!u->lower_fds || !u->active)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    for (size_t i = 0; i < u->nlowers; i++)
        u->lower_fds[i] = -1;
    for (size_t i = 0; i < u->nlowers; i++) {
        u->lower_fds[i] = open(o->lower_dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (u->lower_fds[i] < 0)
            return err_errno(u->err, errno, "open lower layer %s", o->lower_dirs[i]);
    }

    u->outer = archive_read_new();
    u->inner = archive_read_new();
    u->disk = archive_write_disk_new();
    if (!u->outer || !u->inner || !u->disk)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    archive_read_support_filter_all(u->outer);
    archive_read_support_format_raw(u->outer);
    archive_read_support_format_empty(u->outer);
    archive_read_support_format_tar(u->inner);
    archive_read_support_format_empty(u->inner);
    /* No archive_write_disk_set_standard_lookup: owners stay numeric, as
     * the image has them, whatever names the host gives those ids. */
    archive_write_disk_set_options(
        u->disk, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                     ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                     ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    return 0;
}

static int
unpack_run(struct unpack *u)
{
    if (archive_read_open(u->outer, u, NULL, outer_read_cb, NULL) != ARCHIVE_OK)
        return unpack_read_error(u, u->outer, "open layer blob");
    struct archive_entry *oe;
    int r = archive_read_next_header(u->outer, &oe);
    if (r == ARCHIVE_EOF)
        return err_set(u->err, ERR_INVALID_CONTENT, "layer blob is empty");
    if (r < ARCHIVE_WARN)
        return unpack_read_error(u, u->outer, "open layer blob");
    r = unpack_check_filter(u);
    if (r < 0)
        return r;
    if (archive_read_open(u->inner, u, NULL, inner_read_cb, NULL) != ARCHIVE_OK)
        return unpack_read_error(u, u->inner, "read layer tar");

    for (;;) {
        struct archive_entry *e;
        r = archive_read_next_header(u->inner, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return unpack_read_error(u, u->inner, "read layer tar");
        u->res->entries++;
        r = entry_extract(u, e);
        if (r < 0)
            return r;
        unpack_progress(u, false);
    }

    /* The digests cover every byte: what the tar reader left, then what
     * the decompressor left. */
    la_ssize_t n;
    while ((n = tar_pull(u)) > 0)
        ;
    if (n < 0)
        return unpack_read_error(u, u->outer, "read layer blob");
    while ((n = outer_read_cb(u->outer, u, &(const void *){NULL})) > 0)
        ;
    if (n < 0)
        return unpack_read_error(u, u->outer, "read layer blob");

    if (archive_write_close(u->disk) < ARCHIVE_WARN)
        return disk_error(u, ".", "finish directories");
    unpack_progress(u, true);
    return 0;
}

int
layer_unpack(const struct unpack_input *in, const struct unpack_opts *opts,
             struct unpack_result *res, struct err *err)
{
    if (!in || !in->read || !opts || !opts->target_dir || !res)
        return err_set(err, EINVAL, "unpack: missing input, target or result");
    struct unpack u = {.in = in, .opts = opts, .err = err, .root_fd = -1};
    struct unpack_result out = {0};
    u.res = &out;

    int ret = unpack_setup(&u);
    if (ret == 0)
        ret = unpack_run(&u);
    if (ret == 0) {
        if (!opts->no_digests) {
            sha256_final(u.zhash, out.digest);
            sha256_final(u.thash, out.diff_id);
        }
        out.size = u.zsize;
        out.uncompressed_size = u.tsize;
        *res = out;
        log_debug("unpack: %s (%s) into %s: %llu entries, %llu bytes", out.digest, out.diff_id,
                  u.root, (unsigned long long)out.entries, (unsigned long long)out.unpacked_bytes);
    }

    if (u.disk)
        archive_write_free(u.disk);
    if (u.inner)
        archive_read_free(u.inner);
    if (u.outer)
        archive_read_free(u.outer);
    for (size_t i = 0; u.lower_fds && i < u.nlowers; i++) {
        if (u.lower_fds[i] >= 0)
            close(u.lower_fds[i]);
    }
    free(u.lower_fds);
    free(u.active);
    if (u.root_fd >= 0)
        close(u.root_fd);
    free(u.root);
    free(u.last_parent);
    free(u.zbuf);
    free(u.tbuf);
    sha256_free(u.zhash);
    sha256_free(u.thash);
    return ret;
}
