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
 * libarchive only reads here. The entries are written by berth's own
 * writer (store/unpack_tree.c), relative to directory descriptors of the
 * target through common/rootdir.h: libarchive's archive_write_disk takes
 * names relative to the process's working directory and, past PATH_MAX,
 * chdir()s the whole process step by step, which from a pool thread sent
 * concurrent unpacks into each other's targets.
 *
 * This file: the streams, cleaning each name, the checks that need only
 * the name (".." and absolute names, PATH_MAX, NAME_MAX), and the pass.
 *
 * Runs on a pool thread; blocks on the caller's read callback and on disk.
 */
#include "store/unpack.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/os.h"
#include "store/unpack_int.h"

#define UNPACK_BUF_SIZE (128 * 1024)
#define UNPACK_PROGRESS_STEP (1024 * 1024)

/* --- streams ------------------------------------------------------------ */

static la_ssize_t
outer_read_cb(struct archive *a, void *data, const void **buf)
{
    struct unpack *u = data;
    ssize_t n = u->in->read(u->in->ctx, u->zbuf, UNPACK_BUF_SIZE);
    if (n < 0) {
        u->read_errno = (int)-n;
        archive_set_error(a, (int)-n, "read %s: %s", UNPACK_BLOB(u), strerror((int)-n));
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
unpack_read_error(struct unpack *u, struct archive *a, const char *verb, const char *what)
{
    if (u->read_errno)
        return err_errno(u->err, u->read_errno, "read %s", UNPACK_BLOB(u));
    if (u->decompress_failed)
        return err_set(u->err, ERR_INVALID_CONTENT, "decompress %s: %s", UNPACK_BLOB(u),
                       u->decompress_msg);
    const char *msg = archive_error_string(a);
    return err_set(u->err, ERR_INVALID_CONTENT, "%s %s: %s", verb, what,
                   msg ? msg : "unknown error");
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
        return err_set(u->err, ERR_INVALID_CONTENT, "%s: compression %s is not gzip, zstd or none",
                       UNPACK_BLOB(u), archive_filter_name(u->outer, 0));
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
    const char *got =
        code == ARCHIVE_FILTER_NONE ? "uncompressed" : archive_filter_name(u->outer, 0);
    /* An upload's media type is berth's reading of its Content-Encoding:
     * the client knows the header, not the type. */
    if (want >= 0 && want != code && u->opts->no_whiteouts)
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "upload: Content-Encoding is %s but the bytes are %s",
                       want == ARCHIVE_FILTER_GZIP   ? "gzip"
                       : want == ARCHIVE_FILTER_ZSTD ? "zstd"
                                                     : "none",
                       got);
    if (want >= 0 && want != code)
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "layer blob: media type %s but the bytes are %s", mt, got);
    return 0;
}

/* --- paths -------------------------------------------------------------- */

char *
unpack_path_clean(const char *name, const char **why)
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

/* --- entries ----------------------------------------------------------- */

int
unpack_data_block(struct unpack *u, const char *rel, const void **buf, size_t *size, int64_t *off)
{
    la_int64_t o = 0;
    int r = archive_read_data_block(u->inner, buf, size, &o);
    if (r == ARCHIVE_EOF)
        return 0;
    if (r < ARCHIVE_WARN) {
        unpack_read_error(u, u->inner, "read", UNPACK_TAR(u));
        return err_wrap(u->err, "%s %.*s", UNPACK_ENTRY(u), UNPACK_QUOTE_MAX, rel);
    }
    *off = o;
    return 1;
}

const char *
unpack_quote(const char *name, char buf[UNPACK_QUOTE_BUF])
{
    size_t n = strlen(name);
    if (n <= UNPACK_QUOTE_MAX)
        return name;
    memcpy(buf, name, UNPACK_QUOTE_MAX);
    memcpy(buf + UNPACK_QUOTE_MAX, "...", 4);
    return buf;
}

/*
 * Refuses names that no filesystem below the target can hold: a
 * component over NAME_MAX, or a path that, under the directory where the
 * entries will be seen, reaches PATH_MAX. Such a tree could only be
 * reached step by step (the chdir walk that libarchive did), and every
 * tool that later takes a path into it (an overlay copy-up, runc, tar)
 * would fail or do the same.
 */
static int
check_name_lengths(struct unpack *u, const char *what, const char *name, const char *rel)
{
    char q[UNPACK_QUOTE_BUF];
    size_t len = strlen(rel);
    if (u->shown_len + 1 + len >= PATH_MAX)
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "%s %s: %s is %zu bytes under %s, reaching PATH_MAX (%d)", UNPACK_ENTRY(u),
                       unpack_quote(name, q), what, len, u->shown_dir, PATH_MAX);
    for (const char *p = rel; *p;) {
        size_t n = strcspn(p, "/");
        if (n > NAME_MAX)
            return err_set(u->err, ERR_INVALID_CONTENT,
                           "%s %s: %s has a component of %zu bytes, over NAME_MAX (%d)",
                           UNPACK_ENTRY(u), unpack_quote(name, q), what, n, NAME_MAX);
        p += n;
        p += strspn(p, "/");
    }
    return 0;
}

static int
entry_extract(struct unpack *u, struct archive_entry *e)
{
    const char *name = archive_entry_pathname(e);
    char q[UNPACK_QUOTE_BUF];
    if (!name)
        return err_set(u->err, ERR_INVALID_CONTENT, "%s without a name", UNPACK_ENTRY(u));
    const char *why = NULL;
    cleanup_free char *rel = unpack_path_clean(name, &why);
    if (!rel && !why)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    if (!rel)
        return err_set(u->err, ERR_INVALID_CONTENT, "%s %s: %s", UNPACK_ENTRY(u),
                       unpack_quote(name, q), why);
    if (rel[0] == '\0') {
        log_debug("unpack: skipping the root entry %s", name);
        return 0;
    }
    int r = check_name_lengths(u, "the path", name, rel);
    if (r < 0)
        return r;
    const char *link = archive_entry_hardlink(e);
    if (link) {
        cleanup_free char *t = unpack_path_clean(link, &why);
        if (!t && !why)
            return err_set(u->err, ENOMEM, "unpack: out of memory");
        /* A bad target is the writer's to name; only its length here. */
        if (t && (r = check_name_lengths(u, "the hard link target", name, t)) < 0)
            return r;
    }
    const char *sym = archive_entry_filetype(e) == AE_IFLNK ? archive_entry_symlink(e) : NULL;
    if (sym && strlen(sym) >= PATH_MAX)
        return err_set(u->err, ERR_INVALID_CONTENT,
                       "%s %s: symlink target of %zu bytes reaches PATH_MAX (%d)", UNPACK_ENTRY(u),
                       unpack_quote(name, q), strlen(sym), PATH_MAX);
    return tree_entry(u, e, rel);
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
    u->zhash = sha256_new();
    u->thash = sha256_new();
    u->zbuf = malloc(UNPACK_BUF_SIZE);
    u->tbuf = malloc(UNPACK_BUF_SIZE);
    if (!u->zhash || !u->thash || !u->zbuf || !u->tbuf)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    int r = tree_open(u);
    if (r < 0)
        return r;
    u->outer = archive_read_new();
    u->inner = archive_read_new();
    if (!u->outer || !u->inner)
        return err_set(u->err, ENOMEM, "unpack: out of memory");
    archive_read_support_filter_all(u->outer);
    archive_read_support_format_raw(u->outer);
    archive_read_support_format_empty(u->outer);
    archive_read_support_format_tar(u->inner);
    archive_read_support_format_empty(u->inner);
    return 0;
}

static int
unpack_run(struct unpack *u)
{
    if (archive_read_open(u->outer, u, NULL, outer_read_cb, NULL) != ARCHIVE_OK)
        return unpack_read_error(u, u->outer, "open", UNPACK_BLOB(u));
    struct archive_entry *oe;
    int r = archive_read_next_header(u->outer, &oe);
    if (r == ARCHIVE_EOF)
        return err_set(u->err, ERR_INVALID_CONTENT, "%s is empty", UNPACK_BLOB(u));
    if (r < ARCHIVE_WARN)
        return unpack_read_error(u, u->outer, "open", UNPACK_BLOB(u));
    r = unpack_check_filter(u);
    if (r < 0)
        return r;
    if (archive_read_open(u->inner, u, NULL, inner_read_cb, NULL) != ARCHIVE_OK)
        return unpack_read_error(u, u->inner, "read", UNPACK_TAR(u));

    for (;;) {
        struct archive_entry *e;
        r = archive_read_next_header(u->inner, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return unpack_read_error(u, u->inner, "read", UNPACK_TAR(u));
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
        return unpack_read_error(u, u->outer, "read", UNPACK_BLOB(u));
    while ((n = outer_read_cb(u->outer, u, &(const void *){NULL})) > 0)
        ;
    if (n < 0)
        return unpack_read_error(u, u->outer, "read", UNPACK_BLOB(u));

    r = tree_finish(u);
    if (r < 0)
        return r;
    unpack_progress(u, true);
    return 0;
}

int
layer_unpack(const struct unpack_input *in, const struct unpack_opts *opts,
             struct unpack_result *res, struct err *err)
{
    if (!in || !in->read || !opts || (!opts->target_dir && !opts->shown_dir) || !res)
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
                  u.shown_dir, (unsigned long long)out.entries,
                  (unsigned long long)out.unpacked_bytes);
    }

    if (u.inner)
        archive_read_free(u.inner);
    if (u.outer)
        archive_read_free(u.outer);
    tree_close(&u);
    free(u.zbuf);
    free(u.tbuf);
    sha256_free(u.zhash);
    sha256_free(u.thash);
    return ret;
}
