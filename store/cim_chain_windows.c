/*
 * An image's layer blobs written into forked CIMs at first use
 * (store/cim_chain.h). Windows only; blocking: pool threads.
 */
#include "store/cim_chain.h"

#include <windows.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/osfs.h"
#include "store/cim_writer.h"
#include "store/cimfs_api.h"
#include "store/wclayer_blob.h"

/* One writer at a time in the process: a CIM is not there until committed. */
static SRWLOCK chain_lock = SRWLOCK_INIT;

/* "<hex>.cim" of a chain ID ("sha256:<hex>"). */
static int
cim_name(const char *chain_id, char *out, size_t len, struct err *err)
{
    const char *colon = strchr(chain_id, ':');
    if (!digest_valid(chain_id) || !colon)
        return err_set(err, EINVAL, "cim of layer %.80s: not a chain ID", chain_id);
    snprintf(out, len, "%s.cim", colon + 1);
    return 0;
}

static ssize_t
fd_read(void *ctx, void *buf, size_t len)
{
    ssize_t n = read(*(int *)ctx, buf, len > 1u << 20 ? 1u << 20 : len);
    return n < 0 ? -errno : n;
}

struct chain_write {
    struct cimfs_api *api;
    const char *dir, *parent, *name;
};

static int
chain_consume(void *arg, wtar_read_fn read, void *rctx, struct err *err)
{
    struct chain_write *w = arg;
    return cim_layer_write(w->api, w->dir, w->parent, w->name, read, rctx, NULL, err);
}

/* Writes layer y's blob into <dir>\<name>, forked from parent (NULL: a base). */
static int
layer_write(struct cimfs_api *api, struct blob_store *bs, const char *dir,
            const struct meta_layer *y, const char *parent, const char *name, struct err *err)
{
    cleanup_free char *blob = blob_path(bs, y->digest);
    if (!blob)
        return err_set(err, ENOMEM, "out of memory");
    int fd = osfs_open(blob, O_RDONLY, 0);
    if (fd < 0)
        return err_set(err, -fd, "open layer blob %s: %s", y->digest, strerror(-fd));
    struct chain_write w = {api, dir, parent, name};
    struct wcl_blob_result res = {0};
    int r = wcl_blob_read(fd_read, &fd, chain_consume, &w, &res, err);
    close(fd);
    if (r == 0 && (strcmp(res.digest, y->digest) != 0 || strcmp(res.diff_id, y->diff_id) != 0))
        r = err_set(err, ERR_INVALID_CONTENT,
                    "layer blob %s: read as %s with diff_id %s, the image says diff_id %s",
                    y->digest, res.digest, res.diff_id, y->diff_id);
    if (r < 0 && r != -EEXIST) {
        /* A CIM committed from bytes that are not the image's goes. */
        char path[MAX_PATH * 2];
        snprintf(path, sizeof(path), "%s\\%s", dir, name);
        if (res.digest[0])
            osfs_unlink(path);
    }
    return r;
}

int
cim_chain_ensure(struct blob_store *bs, const char *cim_dir, const struct meta_layer *layers,
                 size_t n, char ***out, struct err *err)
{
    if (n == 0)
        return err_set(err, ERR_INVALID_CONTENT, "cim layers: the image has no layers");
    struct cimfs_api *api = NULL;
    int r = cimfs_api_default(&api, err);
    if (r < 0)
        return err_wrap(err, "cim layers");
    cleanup_free char *dir = strdup(cim_dir);
    char **cims = calloc(n, sizeof(char *));
    if (!dir || !cims) {
        free(cims);
        return err_set(err, ENOMEM, "cim layers: out of memory");
    }
    for (char *c = dir; *c; c++)
        if (*c == '/')
            *c = '\\';
    if ((r = fs_mkdir_p(cim_dir, 0700, err)) < 0) {
        free(cims);
        return err_wrap(err, "cim layers");
    }
    AcquireSRWLockExclusive(&chain_lock);
    char parent[DIGEST_STR_LEN + 8] = "", name[DIGEST_STR_LEN + 8];
    for (size_t i = 0; r == 0 && i < n; i++) {
        if ((r = cim_name(layers[i].chain_id, name, sizeof(name), err)) < 0)
            break;
        size_t len = strlen(dir) + strlen(name) + 2;
        if (!(cims[i] = malloc(len))) {
            r = err_set(err, ENOMEM, "cim layers: out of memory");
            break;
        }
        snprintf(cims[i], len, "%s\\%s", dir, name);
        struct os_stat sb;
        if (osfs_stat(cims[i], &sb) != 0)
            r = layer_write(api, bs, dir, &layers[i], parent[0] ? parent : NULL, name, err);
        if (r < 0)
            err_wrap(err, "cim of layer %zu (%s)", i, layers[i].chain_id);
        memcpy(parent, name, sizeof(name));
    }
    ReleaseSRWLockExclusive(&chain_lock);
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(cims[i]);
        free(cims);
        return r;
    }
    *out = cims;
    return 0;
}
