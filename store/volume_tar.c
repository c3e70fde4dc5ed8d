/*
 * Tar streams into and out of volumes.
 *
 * In: the stream is extracted by layer_unpack (the same secure extraction
 * that unpacks image layers, with whiteout conversion and hashing turned
 * off) into a staging directory beside the volume's data, on the same
 * filesystem, and synced. Only when the whole stream was read and
 * extracted is it moved into place, under the store's lock, by
 * volume_merge (store/volume_merge.c): planned, journaled, carried out
 * step by step, undone on failure, and rolled back at the next start
 * after a crash, so the volume is either the old tree or the new one,
 * never a mix. A target path that does not exist yet is built in the
 * staging area too (the staged tree wrapped in the missing directories),
 * so that nothing of the upload touches the volume before the merge.
 * Nothing is ever followed through a symlink: every step is relative to
 * a directory descriptor (common/rootdir.h).
 *
 * Out: the path opened inside the volume without following a symlink,
 * then store/tree_tar.c's writer (a walk through common/rootdir.h, never
 * chdir, which is process-wide, feeding libarchive's pax writer).
 *
 * Runs on pool threads; blocks on the stream's callbacks and on disk.
 */
#include "store/volume.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/randid.h"
#include "common/log.h"
#include "common/os.h"
#include "common/osfs.h"
#include "common/rootdir.h"
#include "store/tree_tar.h"
#include "store/unpack.h"
#include "store/volume_merge.h"

#define NEW_DIR_MODE 0755

/* ---- in -------------------------------------------------------------------- */

/*
 * The deepest existing directory of data/<rel> (*have components of rel,
 * as a path below fs/ in *base) and, when it opens, its descriptor in
 * *fd (-1 when rel exists only in part). A symlink or a non-directory on
 * the way is ERR_INVALID_CONTENT.
 */
static int
target_find(int fs_fd, const char *rel, char **base, size_t *have, int *fd, struct err *err)
{
    *fd = -1;
    *have = 0;
    cleanup_free char *path = malloc(strlen(rel) + 8);
    if (!path)
        return err_set(err, ENOMEM, "volume: out of memory");
    strcpy(path, "data");
    int dfd = rootdir_open_dir(fs_fd, "data");
    if (dfd < 0)
        return err_errno(err, -dfd, "open the volume's data");
    size_t n = 0;
    for (const char *p = rel; *p;) {
        size_t len = strcspn(p, "/");
        char name[NAME_MAX + 1];
        if (len > NAME_MAX) {
            rootdir_close(dfd);
            return err_set(err, ERR_INVALID_CONTENT, "path /%s: a component of %zu bytes", rel,
                           len);
        }
        memcpy(name, p, len);
        name[len] = '\0';
        int nfd = rootdir_open_dir(dfd, name);
        if (nfd == -ENOENT)
            break;
        rootdir_close(dfd);
        if (nfd == -ELOOP || nfd == -ENOTDIR)
            return err_set(err, ERR_INVALID_CONTENT, "path /%s: %s is a symlink or not a directory",
                           rel, name);
        if (nfd < 0)
            return err_errno(err, -nfd, "open /%s in the volume", rel);
        dfd = nfd;
        strcat(path, "/");
        strncat(path, p, len);
        n++;
        p += len;
        p += strspn(p, "/");
    }
    *have = n;
    *base = steal_ptr(&path);
    *fd = dfd;
    return 0;
}

int
volume_tar_stage(const struct volume_tar_in *in, int sfd, const struct volume_stage_opts *o,
                 struct volume_tar_in_result *res, struct err *err)
{
    const int lowers[] = {o->target_fd, -1};
    const char *mt = NULL;
    if (in->encoding && strcmp(in->encoding, "gzip") == 0)
        mt = "application/x-tar+gzip";
    else if (in->encoding && strcmp(in->encoding, "zstd") == 0)
        mt = "application/x-tar+zstd";
    struct unpack_input uin = {.read = in->read, .ctx = in->ctx, .media_type = mt};
    struct unpack_opts opts = {.target_fd = sfd,
                               .shown_dir = o->shown_dir,
                               .lower_fds = o->target_fd >= 0 ? lowers : NULL,
                               .allow_device_nodes = o->allow_device_nodes,
                               .refuse_device_nodes = o->refuse_device_nodes,
                               .no_whiteouts = true,
                               .no_digests = true};
    struct unpack_result ur = {0};
    int ret = layer_unpack(&uin, &opts, &ur, err);
    if (ret == 0 && res) {
        res->entries = ur.entries;
        res->bytes = ur.uncompressed_size;
    }
    return ret;
}

/* Puts staging under the missing directories tail of the target (the
 * components after the first have of rel), in wrap: the merge then moves
 * the first missing directory in, whole. */
static int
wrap_build(int fs_fd, const char *staging, const char *wrap, const char *rel, size_t have,
           struct err *err)
{
    const char *p = rel;
    for (size_t i = 0; i < have; i++) {
        p += strcspn(p, "/");
        p += strspn(p, "/");
    }
    /* p: the missing tail, "a/b/c". */
    cleanup_free char *chain = malloc(strlen(wrap) + strlen(p) + 2);
    if (!chain)
        return err_set(err, ENOMEM, "volume: out of memory");
    int r = rootdir_mkdir(fs_fd, wrap, 0700);
    strcpy(chain, wrap);
    const char *last = p;
    for (const char *q = p; r == 0 && *q;) {
        size_t len = strcspn(q, "/");
        if (q[len] == '\0') {
            last = q;
            break;
        }
        strcat(chain, "/");
        strncat(chain, q, len);
        int dfd = -1;
        if ((r = rootdir_mkdir(fs_fd, chain, NEW_DIR_MODE)) == 0 &&
            (dfd = rootdir_open_dir(fs_fd, chain)) >= 0)
            r = rootdir_fd_set_mode(dfd, NEW_DIR_MODE); /* whatever the umask */
        rootdir_close(dfd);
        q += len + 1;
    }
    int pfd = -1, sfd = -1;
    if (r == 0 && (pfd = rootdir_open_dir(fs_fd, chain)) < 0)
        r = pfd;
    if (r == 0)
        r = rootdir_rename(fs_fd, staging, pfd, last);
    if (r == 0 && (sfd = rootdir_open_dir(pfd, last)) >= 0)
        r = rootdir_fd_set_mode(sfd, NEW_DIR_MODE);
    rootdir_close(sfd);
    rootdir_close(pfd);
    return r < 0 ? err_errno(err, -r, "build the missing directories of /%s", rel) : 0;
}

int
volume_tar_import(struct volume_store *vs, const char *handle, const char *path,
                  const struct volume_tar_in *in, struct volume_tar_in_result *res, struct err *err)
{
    if (!volume_handle_valid(handle))
        return err_set(err, EINVAL, "volume %s: not a volume handle", handle ? handle : "");
    cleanup_free char *rel = NULL;
    int ret = volume_path_clean(path, &rel, err);
    if (ret < 0)
        return ret;
    cleanup_free char *fs = NULL;
    bool privileged = false;
    ret = volume_write_begin(vs, handle, &fs, &privileged, err);
    if (ret < 0)
        return ret;

    char hex[17] = "";
    char staging[64], wrap[64], journal[64];
    cleanup_free char *shown = NULL, *base = NULL;
    int fs_fd = rootdir_open(fs);
    int tfd = -1;
    bool made = false;
    if (fs_fd < 0)
        ret = err_errno(err, -fs_fd, "open volume %s", handle);
    if (ret == 0 && randid_hex(hex, 8, NULL) < 0)
        ret = err_set(err, EIO, "volume %s: no random name", handle);
    snprintf(staging, sizeof(staging), "%s%s", VOLUME_STAGING_PREFIX, hex);
    snprintf(wrap, sizeof(wrap), "%s%s", staging, VOLUME_WRAP_SUFFIX);
    snprintf(journal, sizeof(journal), "%s%s", staging, VOLUME_JOURNAL_SUFFIX);
    if (ret == 0 && asprintf(&shown, "%s/data%s%s", fs, rel[0] ? "/" : "", rel) < 0) {
        shown = NULL;
        ret = err_set(err, ENOMEM, "volume: out of memory");
    }
    if (ret == 0 && strlen(shown) >= PATH_MAX - 1)
        ret = err_set(err, ERR_INVALID_CONTENT,
                      "path /%.100s...: %zu bytes in the volume, "
                      "reaching PATH_MAX",
                      rel, strlen(rel));
    /* The target as it is now: the symlink checks look at it. */
    size_t have = 0, ncomp = 0;
    for (const char *p = rel; *p; ncomp++) {
        size_t n = strcspn(p, "/");
        if (n > NAME_MAX && ret == 0)
            ret = err_set(err, ERR_INVALID_CONTENT,
                          "path /%.100s...: a component of %zu bytes, over NAME_MAX (%d)", rel, n,
                          NAME_MAX);
        p += n;
        p += strspn(p, "/");
    }
    if (ret == 0)
        ret = target_find(fs_fd, rel, &base, &have, &tfd, err);
    if (ret == 0 && (ret = rootdir_mkdir(fs_fd, staging, 0700)) < 0)
        ret = err_errno(err, -ret, "create staging directory in volume %s", handle);
    made = ret == 0;
    int sfd = -1;
    if (ret == 0 && (sfd = rootdir_open_dir(fs_fd, staging)) < 0)
        ret = err_errno(err, -sfd, "open the staging directory in volume %s", handle);
    if (ret == 0) {
        /* Only an existing target has entries to check against. */
        struct volume_stage_opts so = {.shown_dir = shown,
                                       .target_fd = have == ncomp ? tfd : -1,
                                       .allow_device_nodes = privileged};
        ret = volume_tar_stage(in, sfd, &so, res, err);
        rootdir_close(sfd);
        /* The staged data durable before any of it is moved in, outside
         * the lock: the commit's own sync then has little left to do. */
        if (ret == 0 && (ret = rootdir_fd_sync_fs(fs_fd)) < 0)
            ret = err_errno(err, -ret, "sync the upload into volume %s", handle);
        if (ret == 0) {
            volume_store_lock(vs);
            /* Look again: another upload may have made the path meanwhile. */
            rootdir_close(tfd);
            free(base);
            base = NULL;
            ret = target_find(fs_fd, rel, &base, &have, &tfd, err);
            const char *src = staging;
            if (ret == 0 && have < ncomp) {
                ret = wrap_build(fs_fd, staging, wrap, rel, have, err);
                src = wrap;
            }
            if (ret == 0)
                ret = volume_merge(fs_fd, src, base, journal, err);
            volume_store_unlock(vs);
            if (ret < 0)
                err_wrap(err, "move the upload into volume %s", handle);
        }
    }
    rootdir_close(tfd);
    /* An undo that failed left the journal, and what the steps replaced
     * is in the staging tree: both stay for the next start's recovery. */
    if (made && volume_merge_journal_left(fs_fd, journal)) {
        log_error("volume %s: kept %s and its journal for recovery", handle, staging);
        made = false;
    }
    rootdir_close(fs_fd);
    struct err rerr = {0};
    cleanup_free char *sp = made ? fs_path_join(fs, staging) : NULL;
    cleanup_free char *wp = made ? fs_path_join(fs, wrap) : NULL;
    if (sp && fs_remove_tree(sp, &rerr) < 0)
        log_warn("volume %s: %s", handle, rerr.msg);
    if (wp && fs_remove_tree(wp, &rerr) < 0)
        log_warn("volume %s: %s", handle, rerr.msg);
    volume_write_end(vs, handle);
    return ret;
}

/* ---- export ---------------------------------------------------------------- */

int
volume_tar_export(struct volume_store *vs, const char *handle, const char *path,
                  const struct volume_tar_out *out, struct err *err)
{
    cleanup_free char *rel = NULL;
    int ret = volume_path_clean(path, &rel, err);
    if (ret < 0)
        return ret;
    /* Split rel into the directory (opened safely) and the last name. */
    char *slash = strrchr(rel, '/');
    const char *base = rel[0] ? (slash ? slash + 1 : rel) : NULL;
    cleanup_free char *dir = strndup(rel, slash ? (size_t)(slash - rel) : 0);
    if (!dir)
        return err_set(err, ENOMEM, "export: out of memory");
    int dfd = -1;
    ret = volume_open_dir(vs, handle, base ? dir : "", &dfd, err);
    if (ret < 0)
        return ret;
    struct os_stat st;
    int r = rootdir_stat(dfd, base ? base : "", &st);
    if (r < 0) {
        rootdir_close(dfd);
        return r == -ENOENT ? err_set(err, ENOENT, "volume %s: path %s: not found", handle, path)
                            : err_errno(err, -r, "volume %s: stat %s", handle, path);
    }
    /* A directory's tree as "./...", anything else named by its last component. */
    ret = tree_tar_export(dfd, base, &st, S_ISDIR(st.st_mode) ? "." : base, out, err);
    if (ret < 0 && S_ISDIR(st.st_mode))
        err_wrap(err, "volume %s", handle);
    rootdir_close(dfd);
    return ret;
}
