/*
 * An image's layer blobs written into forked CIMs at first use, each with
 * the record of the files its write added, and their garbage collection
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
#include "common/log.h"
#include "common/osfs.h"
#include "common/strbuf.h"
#include "common/strv.h"
#include "common/winutil.h"
#include "store/layer_int.h"
#include "store/mount_journal.h"
#include "store/cim_writer.h"
#include "store/cimfs_api.h"
#include "store/wclayer_blob.h"

#define OWN_MAGIC "berth-cim 1"
#define OWN_MAX (1u << 20)

/* One writer at a time in the process: a CIM is not there until committed
 * and recorded; the gc holds it too, so it never sees a write half-way. */
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
    bool block; /* a block CIM file <dir>\<name>, parent only saying it is no base */
};

static int
chain_consume(void *arg, wtar_read_fn read, void *rctx, struct err *err)
{
    struct chain_write *w = arg;
    if (w->block) {
        char file[MAX_PATH * 2];
        snprintf(file, sizeof(file), "%s\\%s", w->dir, w->name);
        return cim_block_layer_write(w->api, file, CIM_BLOCK_IMAGE, !w->parent, read, rctx, NULL,
                                     err);
    }
    return cim_layer_write(w->api, w->dir, w->parent, w->name, read, rctx, NULL, err);
}

/* Writes layer y's blob into <dir>\<name>, forked from parent (NULL: a
 * base), or as a block CIM file of that name. */
static int
layer_write(struct cimfs_api *api, struct blob_store *bs, const char *dir,
            const struct meta_layer *y, const char *parent, const char *name, bool block,
            struct err *err)
{
    cleanup_free char *blob = blob_path(bs, y->digest);
    if (!blob)
        return err_set(err, ENOMEM, "out of memory");
    int fd = osfs_open(blob, O_RDONLY, 0);
    if (fd < 0)
        return err_set(err, -fd, "open layer blob %s: %s", y->digest, strerror(-fd));
    struct chain_write w = {api, dir, parent, name, block};
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

/* The names in dir (without . and ..) into a new NULL-terminated *v. */
static int
dir_names(const char *dir, char ***v, size_t *n, struct err *err)
{
    struct osfs_dir *d = NULL;
    *v = NULL;
    *n = 0;
    int r = osfs_dir_open(dir, &d);
    if (r < 0)
        return r == -ENOENT ? 0 : err_errno(err, -r, "list %s", dir);
    const char *name;
    int e = 0;
    while (r == 0 && (name = osfs_dir_next(d, &e)) != NULL)
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && strv_push(v, n, name) < 0)
            r = err_set(err, ENOMEM, "list %s: out of memory", dir);
    osfs_dir_close(d);
    if (r == 0 && e < 0)
        r = err_errno(err, -e, "list %s", dir);
    if (r < 0) {
        strv_free(*v);
        *v = NULL;
    }
    return r;
}

static bool
names_have(char *const *v, const char *s)
{
    for (size_t i = 0; v && v[i]; i++)
        if (_stricmp(v[i], s) == 0)
            return true;
    return false;
}

/* Is name "<64 hex digits><suffix>"? */
static bool
hex_name(const char *name, const char *suffix)
{
    if (strlen(name) != DIGEST_HEX_LEN + strlen(suffix) || strcmp(name + DIGEST_HEX_LEN, suffix))
        return false;
    return strspn(name, "0123456789abcdef") == DIGEST_HEX_LEN;
}

/* <dir>\<hex><suffix>; NULL on out of memory. */
static char *
dir_file(const char *dir, const char *name, size_t len, const char *suffix)
{
    char *p = NULL;
    return asprintf(&p, "%s\\%.*s%s", dir, (int)len, name, suffix) < 0 ? NULL : p;
}

/*
 * Writes layer y's CIM <dir>\<name> and then its record <hex>.own: the
 * parent's name and every file the write added beside the .cim (CimFS's
 * region and object ID files), which are what the gc removes with it. A
 * .cim without its record is one a crash left half-way.
 */
static int
layer_write_recorded(struct cimfs_api *api, struct blob_store *bs, const char *dir,
                     const struct meta_layer *y, const char *parent, const char *name, bool block,
                     struct err *err)
{
    char **before = NULL, **after = NULL;
    size_t nb = 0, na = 0;
    int r = dir_names(dir, &before, &nb, err);
    if (r == 0)
        r = layer_write(api, bs, dir, y, parent, name, block, err);
    if (r == 0)
        r = dir_names(dir, &after, &na, err);
    cleanup_free char *own = dir_file(dir, name, DIGEST_HEX_LEN, ".own");
    struct strbuf b = {0};
    if (r == 0) {
        strbuf_printf(&b, "%s\n", OWN_MAGIC);
        if (parent)
            strbuf_printf(&b, "parent %s\n", parent);
        for (size_t i = 0; i < na; i++)
            if (_stricmp(after[i], name) != 0 && !names_have(before, after[i]))
                strbuf_printf(&b, "file %s\n", after[i]);
        if (!own || b.failed)
            r = err_set(err, ENOMEM, "cim layer %s: out of memory", name);
    }
    if (r == 0)
        r = fs_write_file_atomic(own, b.data, b.len, 0600, err);
    strbuf_clear(&b);
    strv_free(before);
    strv_free(after);
    return r;
}

static int chain_ensure(struct blob_store *bs, const char *cim_dir, const struct meta_layer *layers,
                        size_t n, bool block, char ***out, char **merged, struct err *err);

int
cim_chain_ensure(struct blob_store *bs, const char *cim_dir, const struct meta_layer *layers,
                 size_t n, char ***out, struct err *err)
{
    return chain_ensure(bs, cim_dir, layers, n, false, out, NULL, err);
}

int
cim_chain_ensure_block(struct blob_store *bs, const char *cim_dir, const struct meta_layer *layers,
                       size_t n, char ***out, char **merged, struct err *err)
{
    *merged = NULL;
    return chain_ensure(bs, cim_dir, layers, n, true, out, n > 1 ? merged : NULL, err);
}

#define MERGED_OF "merged-of "

/*
 * What a merged CIM of cims[0..n) is made of: a digest of each source's
 * file index, size and last write time, bottom first. A layer written
 * again (the gc removed the base, a crash stopped it before the top, and
 * an image of the base alone wrote it back) is another file with another
 * time, so the top's record line MERGED_OF "<digest>" names the sources a
 * merged CIM was made for by equality, whatever the clock did meanwhile.
 */
static int
sources_id(char **cims, size_t n, char out[DIGEST_STR_LEN], struct err *err)
{
    struct strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        struct os_stat st;
        int r = osfs_stat(cims[i], &st);
        if (r < 0) {
            strbuf_clear(&b);
            return err_errno(err, -r, "stat %s", cims[i]);
        }
        strbuf_printf(&b, "%llu %lld %lld\n", (unsigned long long)st.st_ino, (long long)st.st_size,
                      (long long)win_ticks(&st.st_mtim));
    }
    int r = b.failed ? -ENOMEM : digest_of(b.data, b.len, out);
    strbuf_clear(&b);
    return r < 0 ? err_set(err, -r, "merged cim: digest of its sources") : 0;
}

/* Does the record text hold the line prefix + value? */
static bool
own_has_line(const char *text, const char *prefix, const char *value)
{
    size_t pl = strlen(prefix), vl = strlen(value);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, pl) == 0 && strncmp(l + pl, value, vl) == 0 &&
            (l[pl + vl] == '\n' || l[pl + vl] == '\0'))
            return true;
    return false;
}

/*
 * The merged block CIM of cims[0..n) (bottom first), <dir>\<tophex>-merged.cim,
 * written unless the top layer's record names it ("file") as made of these
 * very sources (MERGED_OF, sources_id) and it is there, and then named in
 * that record, so that it is shared by every image of that top chain and
 * goes with the top CIM at the gc. The record names it only while it is
 * whole: the lines go before a rewrite and come back after.
 */
static int
merged_ensure(struct cimfs_api *api, const char *dir, const char *top_name, char **cims, size_t n,
              char **out, struct err *err)
{
    char mname[DIGEST_HEX_LEN + 16], line[DIGEST_HEX_LEN + 24], made_of[DIGEST_STR_LEN];
    snprintf(mname, sizeof(mname), "%.*s-merged.cim", DIGEST_HEX_LEN, top_name);
    snprintf(line, sizeof(line), "file %s\n", mname);
    cleanup_free char *own = dir_file(dir, top_name, DIGEST_HEX_LEN, ".own");
    cleanup_free char *file = dir_file(dir, mname, strlen(mname), "");
    cleanup_free char *text = NULL;
    size_t len = 0;
    if (!own || !file)
        return err_set(err, ENOMEM, "merged cim: out of memory");
    int r = fs_read_file(own, OWN_MAX, &text, &len, err);
    if (r == 0)
        r = sources_id(cims, n, made_of, err);
    if (r < 0)
        return err_wrap(err, "merged cim %s", mname);
    bool recorded = own_has_line(text, "file ", mname);
    if (recorded && own_has_line(text, MERGED_OF, made_of) && osfs_exists(file)) {
        *out = file;
        file = NULL;
        return 0;
    }
    /* The record without its lines: what stays true while it is written. */
    struct strbuf b = {0};
    for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        size_t ll = nl ? (size_t)(nl - l) + 1 : strlen(l);
        bool ours = (ll == strlen(line) && strncmp(l, line, ll) == 0) ||
                    strncmp(l, MERGED_OF, strlen(MERGED_OF)) == 0;
        if (!ours)
            strbuf_printf(&b, "%.*s", (int)ll, l);
    }
    if (b.failed)
        r = err_set(err, ENOMEM, "merged cim: out of memory");
    if (r == 0 && b.len != len)
        r = fs_write_file_atomic(own, b.data, b.len, 0600, err);
    int u = r == 0 ? osfs_unlink(file) : 0;
    if (u < 0 && u != -ENOENT)
        r = err_errno(err, -u, "remove stale %s", file);
    const char **src = r == 0 ? calloc(n, sizeof(char *)) : NULL;
    if (r == 0 && !src)
        r = err_set(err, ENOMEM, "merged cim: out of memory");
    for (size_t i = 0; r == 0 && i < n; i++)
        src[i] = cims[n - 1 - i]; /* top-most first */
    if (r == 0)
        r = cim_block_merge(api, file, CIM_MERGED_IMAGE, src, CIM_BLOCK_IMAGE, n, err);
    free(src);
    if (r == 0) {
        /* Taken again: should a merge touch its sources, the line names them as they are. */
        r = sources_id(cims, n, made_of, err);
        if (r == 0)
            strbuf_printf(&b, "%s%s%s\n", line, MERGED_OF, made_of);
        if (r == 0)
            r = b.failed ? err_set(err, ENOMEM, "merged cim: out of memory")
                         : fs_write_file_atomic(own, b.data, b.len, 0600, err);
        if (r < 0)
            osfs_unlink(file);
    }
    strbuf_clear(&b);
    if (r < 0)
        return r;
    *out = file;
    file = NULL;
    return 0;
}

static int
chain_ensure(struct blob_store *bs, const char *cim_dir, const struct meta_layer *layers, size_t n,
             bool block, char ***out, char **merged, struct err *err)
{
    if (n == 0)
        return err_set(err, ERR_INVALID_CONTENT, "cim layers: the image has no layers");
    struct cimfs_api *api = NULL;
    int r = cimfs_api_default(&api, err);
    if (r == 0 && block)
        r = cimfs_api_block(api, err);
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
        cleanup_free char *own = dir_file(dir, name, DIGEST_HEX_LEN, ".own");
        bool have = osfs_stat(cims[i], &sb) == 0;
        if (!own)
            r = err_set(err, ENOMEM, "cim layers: out of memory");
        else if (have && !osfs_exists(own)) {
            /* No record: a crash cut its write short. */
            int u = osfs_unlink(cims[i]);
            if (u < 0 && u != -ENOENT)
                r = err_errno(err, -u, "remove half-written %s", cims[i]);
            have = false;
        }
        if (r == 0 && !have)
            r = layer_write_recorded(api, bs, dir, &layers[i], parent[0] ? parent : NULL, name,
                                     block, err);
        if (r < 0)
            err_wrap(err, "cim of layer %zu (%s)", i, layers[i].chain_id);
        memcpy(parent, name, sizeof(name));
    }
    if (r == 0 && merged && (r = merged_ensure(api, dir, name, cims, n, merged, err)) < 0)
        err_wrap(err, "merged cim of %s", layers[n - 1].chain_id);
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

/* A CIM's record (<hex>.own): its parent's hex (or ""), the files it added. */
struct cim_own {
    char hex[DIGEST_HEX_LEN + 1];
    char parent[DIGEST_HEX_LEN + 1];
    char **files;
    size_t nfiles;
    bool keep;
};

static bool
plain_name(const char *s)
{
    return s[0] && s[0] != '.' && !strpbrk(s, "/\\:");
}

static int
own_read(const char *dir, const char *hex, struct cim_own *o, struct err *err)
{
    cleanup_free char *path = dir_file(dir, hex, DIGEST_HEX_LEN, ".own");
    cleanup_free char *text = NULL;
    size_t len = 0;
    memset(o, 0, sizeof(*o));
    memcpy(o->hex, hex, DIGEST_HEX_LEN);
    int r = path ? fs_read_file(path, OWN_MAX, &text, &len, err) : -ENOMEM;
    if (r < 0)
        return r == -ENOMEM ? err_set(err, ENOMEM, "out of memory") : r;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, OWN_MAGIC) != 0)
        return err_set(err, ERR_INVALID_CONTENT, "%s: not a CIM record", path);
    while (r == 0 && (line = strtok_r(NULL, "\n", &save)) != NULL) {
        if (strncmp(line, "parent ", 7) == 0 && hex_name(line + 7, ".cim"))
            memcpy(o->parent, line + 7, DIGEST_HEX_LEN);
        else if (strncmp(line, "file ", 5) == 0 && plain_name(line + 5))
            r = strv_push(&o->files, &o->nfiles, line + 5) < 0 ? err_set(err, ENOMEM, "oom") : 0;
        else if (strncmp(line, MERGED_OF, strlen(MERGED_OF)) == 0 &&
                 digest_valid(line + strlen(MERGED_OF)))
            continue; /* merged_ensure's */
        else
            r = err_set(err, ERR_INVALID_CONTENT, "%s: bad line %.80s", path, line);
    }
    return r;
}

/* The hex names of the CIMs the journal's cimfs entries have mounted. */
static int
mounted_cims(const char *journal_dir, char ***v, size_t *n, struct err *err)
{
    struct mjournal *j = NULL;
    struct mj_entry **es = NULL;
    size_t ne = 0;
    int r = mjournal_open(journal_dir, &j, err);
    if (r == 0)
        r = mjournal_list(j, NULL, &es, &ne, NULL, err);
    for (size_t i = 0; r == 0 && i < ne; i++) {
        const char *cim = mj_entry_get(es[i], "cim"), *base = cim;
        if (!cim || strcmp(es[i]->kind, LAYER_KIND_CIMFS) != 0)
            continue;
        for (const char *c = cim; *c; c++)
            if (*c == '\\' || *c == '/')
                base = c + 1;
        char hex[DIGEST_HEX_LEN + 1];
        snprintf(hex, sizeof(hex), "%s", base);
        if (hex_name(base, ".cim") && strv_push(v, n, hex) < 0)
            r = err_set(err, ENOMEM, "out of memory");
    }
    mj_entry_list_free(es, ne);
    mjournal_free(j);
    return r;
}

static struct cim_own *
own_find(struct cim_own *os, size_t n, const char *hex)
{
    for (size_t i = 0; hex[0] && i < n; i++)
        if (_strnicmp(os[i].hex, hex, DIGEST_HEX_LEN) == 0)
            return &os[i];
    return NULL;
}

/* Removes <dir>\<name>; true when it is gone, else logged and counted. */
static bool
remove_counted(const char *dir, const char *name, struct cim_gc_result *res)
{
    cleanup_free char *path = dir_file(dir, name, strlen(name), "");
    int r = path ? osfs_unlink(path) : -ENOMEM;
    if (r == 0 || r == -ENOENT)
        return true;
    log_warn("gc: remove %s\\%s: %s", dir, name, strerror(-r));
    if (r == -EBUSY || r == -EACCES)
        res->busy++;
    else
        res->errors++;
    return false;
}

/* An unused CIM goes: the files it added, the .cim, the record last (so a
 * run cut short is finished by the next). */
static void
own_remove(const char *dir, const struct cim_own *o, struct cim_gc_result *res)
{
    char name[DIGEST_HEX_LEN + 8];
    bool gone = true;
    for (size_t i = 0; i < o->nfiles; i++)
        gone = remove_counted(dir, o->files[i], res) && gone;
    snprintf(name, sizeof(name), "%s.cim", o->hex);
    if (!gone || !remove_counted(dir, name, res))
        return;
    snprintf(name, sizeof(name), "%s.own", o->hex);
    if (remove_counted(dir, name, res))
        res->removed++;
}

static void
sweep(const char *dir, char **names, struct cim_own *os, size_t nos, char **mounted, bool all_read,
      struct cim_gc_result *res)
{
    for (size_t i = 0; i < nos; i++)
        if (!os[i].keep)
            own_remove(dir, &os[i], res);
    /* With every record read, what no record names was left by a crash
     * (a .cim not recorded, region files of a write cut short, a record's
     * temporary): nothing is writing (chain_lock), so it goes. */
    for (size_t i = 0; all_read && names[i]; i++) {
        const char *n = names[i];
        bool named = hex_name(n, ".own");
        for (size_t k = 0; !named && k < nos; k++)
            named = names_have(os[k].files, n);
        if (named || (hex_name(n, ".cim") && own_find(os, nos, n)))
            continue;
        if (hex_name(n, ".cim")) {
            char hex[DIGEST_HEX_LEN + 1];
            snprintf(hex, sizeof(hex), "%.64s", n);
            if (names_have(mounted, hex)) {
                log_warn("gc: cim %s is mounted but has no record, kept", n);
                res->busy++;
                continue;
            }
        }
        if (remove_counted(dir, n, res) && hex_name(n, ".cim"))
            res->removed++;
    }
}

int
cim_chain_gc(const char *cim_dir, const char *journal_dir, cim_live_fn live, void *arg,
             struct cim_gc_result *res, struct err *err)
{
    char **names = NULL, **mounted = NULL;
    size_t nn = 0, nm = 0, nos = 0;
    struct cim_own *os = NULL;
    bool all_read = true;
    memset(res, 0, sizeof(*res));
    AcquireSRWLockExclusive(&chain_lock);
    int r = dir_names(cim_dir, &names, &nn, err);
    if (r == 0 && nn)
        r = mounted_cims(journal_dir, &mounted, &nm, err);
    if (r == 0 && nn && !(os = calloc(nn, sizeof(*os))))
        r = err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < nn; i++) {
        if (!hex_name(names[i], ".own"))
            continue;
        struct err e = {0};
        if (own_read(cim_dir, names[i], &os[nos], &e) == 0) {
            char chain[DIGEST_STR_LEN];
            snprintf(chain, sizeof(chain), DIGEST_PREFIX "%s", os[nos].hex);
            os[nos].keep = live(arg, chain) || names_have(mounted, os[nos].hex);
            nos++;
            continue;
        }
        strv_free(os[nos].files);
        if (e.code == ENOMEM) {
            r = err_set(err, ENOMEM, "out of memory");
            break;
        }
        /* What it added is not known: this run removes nothing unnamed. */
        log_warn("gc: %s", e.msg);
        res->errors++;
        all_read = false;
        memset(&os[nos], 0, sizeof(os[nos]));
        memcpy(os[nos].hex, names[i], DIGEST_HEX_LEN);
        os[nos++].keep = true;
    }
    /* A kept CIM keeps its parents: a fork reads their regions. */
    for (bool more = true; r == 0 && more;) {
        more = false;
        for (size_t i = 0; i < nos; i++) {
            struct cim_own *p = os[i].keep ? own_find(os, nos, os[i].parent) : NULL;
            if (p && !p->keep)
                more = p->keep = true;
        }
    }
    if (r == 0 && nn)
        sweep(cim_dir, names, os, nos, mounted, all_read, res);
    ReleaseSRWLockExclusive(&chain_lock);
    for (size_t i = 0; i < nos; i++)
        strv_free(os[i].files);
    free(os);
    strv_free(names);
    strv_free(mounted);
    return r < 0 ? err_wrap(err, "gc of cims %s", cim_dir) : 0;
}
