/*
 * cim_writer.h on Windows: a wcl_sink that writes each validated entry of
 * a layer tar into an open CimFS image, and the commit or clean-up
 * around it. Pool threads (blocking: cimfs.dll writes to disk).
 */
#include "store/cim_writer.h"

#include <windows.h>

#include <sddl.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/winutil.h"
#include "store/cimfs_api.h"

#define REPARSE_TAG_SYMLINK 0xA000000Cu
#define REPARSE_TAG_MOUNT_POINT 0xA0000003u
#define SYMLINK_RELATIVE 1u
/* Seconds from 1601-01-01 (FILETIME's epoch) to 1970-01-01. */
#define EPOCH_1601 11644473600LL
#define WRITE_CHUNK (1u << 20)

struct cimw {
    struct cimfs_api *api;
    CIMFS_IMAGE_HANDLE img;
    CIMFS_STREAM_HANDLE stream; /* the file or stream being written, or NULL */
    const char *path;           /* for messages: the entry being written */
    char cur[WCL_PATH_MAX + 1];
    bool hives_dir; /* the layer made Hives\ */
    bool block;     /* a block CIM: whiteouts are tombstones */
};

static int
fail(struct err *err, HRESULT hr, const char *what, const char *path)
{
    return cimfs_err_set(err, hr, "cim layer: %s %.300s", what, path);
}

static LARGE_INTEGER
filetime(int64_t sec, uint32_t nsec)
{
    LARGE_INTEGER v;
    v.QuadPart = sec < -EPOCH_1601 ? 0 : (sec + EPOCH_1601) * 10000000LL + nsec / 100;
    return v;
}

/*
 * A REPARSE_DATA_BUFFER for a symlink or junction to target (winnt.h's
 * layout, which mingw-w64 keeps out of user mode): tag, data length,
 * reserved, then substitute and print name offsets and lengths in bytes,
 * a symlink's flags, and the names. Caller frees.
 */
static unsigned char *
reparse_buffer(const struct wcl_entry *e, uint32_t *len)
{
    wchar_t *t = win_wide_sep(e->target);
    if (!t)
        return NULL;
    bool drive = ((t[0] >= L'A' && t[0] <= L'Z') || (t[0] >= L'a' && t[0] <= L'z')) && t[1] == L':';
    bool absolute = drive || t[0] == L'\\';
    const wchar_t *prefix = drive ? L"\\??\\" : L"";
    size_t tl = wcslen(t) * 2, pl = wcslen(prefix) * 2;
    size_t sub = pl + tl, head = e->mount_point ? 8 : 12;
    size_t data = head + sub + 2 + tl + 2;
    unsigned char *b = data + 8 <= 0xFFFF ? calloc(1, 8 + data) : NULL;
    if (!b) {
        free(t);
        return NULL;
    }
    uint32_t tag = e->mount_point ? REPARSE_TAG_MOUNT_POINT : REPARSE_TAG_SYMLINK;
    uint16_t u16[4] = {0, (uint16_t)sub, (uint16_t)(sub + 2), (uint16_t)tl};
    uint16_t dl = (uint16_t)data;
    memcpy(b, &tag, 4);
    memcpy(b + 4, &dl, 2);
    memcpy(b + 8, u16, 8);
    if (!e->mount_point) {
        uint32_t flags = absolute ? 0 : SYMLINK_RELATIVE;
        memcpy(b + 16, &flags, 4);
    }
    unsigned char *names = b + 8 + head;
    memcpy(names, prefix, pl);
    memcpy(names + pl, t, tl);
    memcpy(names + sub + 2, t, tl);
    free(t);
    *len = (uint32_t)(8 + data);
    return b;
}

static int
close_stream(struct cimw *w)
{
    if (w->stream) {
        w->api->CimCloseStream(w->stream);
        w->stream = NULL;
    }
    return 0;
}

static int
create_file(struct cimw *w, const struct wcl_entry *e, const wchar_t *path, struct err *err)
{
    CIMFS_FILE_METADATA md = {0};
    bool dir = e->kind == WCL_DIR;
    md.Attributes = e->has_attributes ? e->attributes
                    : dir             ? FILE_ATTRIBUTE_DIRECTORY
                                      : FILE_ATTRIBUTE_NORMAL;
    md.FileSize = e->kind == WCL_FILE ? (INT64)e->size : 0;
    md.LastWriteTime = md.ChangeTime = md.LastAccessTime = filetime(e->mtime, 0);
    md.CreationTime =
        e->has_creation_time ? filetime(e->creation_sec, e->creation_nsec) : md.LastWriteTime;
    PSECURITY_DESCRIPTOR legacy = NULL;
    if (e->sd) {
        md.SecurityDescriptorBuffer = e->sd;
        md.SecurityDescriptorSize = (UINT32)e->sd_len;
    } else if (e->sddl) {
        /* MSWINDOWS.sd, the older SDDL form: CimFS takes the binary one. */
        wchar_t *s = win_wide_sep(e->sddl);
        ULONG n = 0;
        BOOL ok = s && ConvertStringSecurityDescriptorToSecurityDescriptorW(s, SDDL_REVISION_1,
                                                                            &legacy, &n);
        free(s);
        if (!ok)
            return err_set(err, ERR_INVALID_CONTENT,
                           "cim layer: %.300s: security descriptor %.200s is not valid SDDL",
                           e->path, e->sddl);
        md.SecurityDescriptorBuffer = legacy;
        md.SecurityDescriptorSize = n;
    }
    unsigned char *reparse = NULL;
    if (e->kind == WCL_SYMLINK) {
        uint32_t rl = 0;
        if (!(reparse = reparse_buffer(e, &rl))) {
            LocalFree(legacy);
            return err_set(err, ERR_INVALID_CONTENT,
                           "cim layer: %.300s: link target %.300s does not fit a reparse point",
                           e->path, e->target);
        }
        md.Attributes |= FILE_ATTRIBUTE_REPARSE_POINT;
        if (e->mount_point)
            md.Attributes |= FILE_ATTRIBUTE_DIRECTORY;
        md.ReparseDataBuffer = reparse;
        md.ReparseDataSize = rl;
    }
    HRESULT hr = w->api->CimCreateFile(w->img, path, &md, &w->stream);
    LocalFree(legacy);
    free(reparse);
    if (FAILED(hr)) {
        w->stream = NULL;
        return fail(err, hr, "create", e->path);
    }
    if (e->kind != WCL_FILE)
        close_stream(w);
    return 0;
}

static int
sink_entry(void *ctx, const struct wcl_entry *e, struct err *err)
{
    struct cimw *w = ctx;
    close_stream(w);
    snprintf(w->cur, sizeof(w->cur), "%s", e->path);
    w->path = w->cur;
    wchar_t *path = win_wide_sep(e->path);
    if (!path)
        return err_set(err, ENOMEM, "cim layer: %.300s: out of memory", e->path);
    int r = 0;
    HRESULT hr;
    if (e->kind == WCL_DIR && strcmp(e->path, "Hives") == 0)
        w->hives_dir = true;
    switch (e->kind) {
    case WCL_DIR:
    case WCL_FILE:
    case WCL_SYMLINK:
        r = create_file(w, e, path, err);
        break;
    case WCL_STREAM:
        hr = w->api->CimCreateAlternateStream(w->img, path, e->size, &w->stream);
        if (FAILED(hr)) {
            w->stream = NULL;
            r = fail(err, hr, "create stream", e->path);
        }
        break;
    case WCL_HARDLINK: {
        wchar_t *target = win_wide_sep(e->target);
        hr = target ? w->api->CimCreateHardLink(w->img, path, target) : E_OUTOFMEMORY;
        free(target);
        if (FAILED(hr))
            r = fail(err, hr, "link", e->path);
        break;
    }
    case WCL_WHITEOUT:
        if (w->block) {
            /* A block CIM holds its layer alone: the whiteout is a
             * tombstone that hides the path of lower CIMs once they are
             * merged (hcsshim's BlockCIMLayerWriter.Remove, AddTombstone). */
            hr = w->api->CimTombstoneFile(w->img, path);
            if (FAILED(hr))
                r = fail(err, hr, "tombstone", e->path);
            break;
        }
        /* A whiteout of something no lower layer has removes nothing. */
        hr = w->api->CimDeletePath(w->img, path);
        if (FAILED(hr) && hr != HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND) &&
            hr != HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND))
            r = fail(err, hr, "delete", e->path);
        break;
    }
    free(path);
    return r;
}

static int
sink_data(void *ctx, const void *buf, size_t len, struct err *err)
{
    struct cimw *w = ctx;
    if (len == 0)
        return close_stream(w);
    if (!w->stream)
        return err_set(err, EIO, "cim layer: %.300s: data without a stream", w->path);
    for (size_t off = 0; off < len;) {
        UINT32 n = len - off > WRITE_CHUNK ? WRITE_CHUNK : (UINT32)(len - off);
        HRESULT hr = w->api->CimWriteStream(w->stream, (const char *)buf + off, n);
        if (FAILED(hr))
            return fail(err, hr, "write", w->path);
        off += n;
    }
    return 0;
}

/* CimCreateFile replaces a path that exists, read-only or not: nothing to do. */
static int
sink_make_writable(void *ctx, const char *path, struct err *err)
{
    (void)ctx, (void)path, (void)err;
    return 0;
}

/*
 * A base layer's registry: Hives\<NAME>_BASE, a hard link to each hive
 * of Files\Windows\System32\config the layer has, as hcsshim's CIM
 * layer writer makes them (internal/wclayer/cim: the hive table and its
 * base-layer processing); a child layer's Hives\*_DELTA go on top.
 */
static int
base_hives(struct cimw *w, struct err *err)
{
    static const wchar_t *const hives[][2] = {
        {L"SYSTEM", L"SYSTEM_BASE"},     {L"SOFTWARE", L"SOFTWARE_BASE"},   {L"SAM", L"SAM_BASE"},
        {L"SECURITY", L"SECURITY_BASE"}, {L"DEFAULT", L"DEFAULTUSER_BASE"},
    };
    for (size_t i = 0; i < sizeof(hives) / sizeof(hives[0]); i++) {
        wchar_t from[64] = L"Hives\\", to[96] = L"Files\\Windows\\System32\\config\\";
        wcscat(from, hives[i][1]);
        wcscat(to, hives[i][0]);
        if (!w->hives_dir) {
            CIMFS_FILE_METADATA md = {.Attributes = FILE_ATTRIBUTE_DIRECTORY};
            CIMFS_STREAM_HANDLE s = NULL;
            HRESULT hr = w->api->CimCreateFile(w->img, L"Hives", &md, &s);
            if (FAILED(hr))
                return fail(err, hr, "create", "Hives");
            if (s)
                w->api->CimCloseStream(s);
            w->hives_dir = true;
        }
        HRESULT hr = w->api->CimCreateHardLink(w->img, from, to);
        if (hr == HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND))
            continue; /* the layer has no such hive */
        if (FAILED(hr))
            return fail(err, hr, "link base hive", "Hives");
    }
    return 0;
}

/* ---- the directory's files, so that a failure removes what it added ---- */

struct names {
    wchar_t **v;
    size_t n;
};

static void
names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static int
names_list(const wchar_t *dir, struct names *out)
{
    size_t dl = wcslen(dir);
    wchar_t *pat = malloc((dl + 3) * sizeof(wchar_t));
    if (!pat)
        return -ENOMEM;
    memcpy(pat, dir, dl * sizeof(wchar_t));
    memcpy(pat + dl, L"\\*", 3 * sizeof(wchar_t));
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileW(pat, &fd);
    free(pat);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_NOT_FOUND ? 0 : -EIO;
    int r = 0;
    do {
        if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
            continue;
        wchar_t **v = realloc(out->v, (out->n + 1) * sizeof(*v));
        if (!v || !(v[out->n] = _wcsdup(fd.cFileName))) {
            if (v)
                out->v = v;
            r = -ENOMEM;
            break;
        }
        out->v = v;
        out->n++;
    } while (FindNextFileW(h, &fd));
    FindClose(h);
    return r;
}

/* Removes the files of dir that are not in before. */
static void
names_remove_new(const wchar_t *dir, const struct names *before)
{
    struct names now = {0};
    names_list(dir, &now);
    for (size_t i = 0; i < now.n; i++) {
        bool old = false;
        for (size_t j = 0; j < before->n && !old; j++)
            old = _wcsicmp(now.v[i], before->v[j]) == 0;
        if (old)
            continue;
        size_t dl = wcslen(dir), nl = wcslen(now.v[i]);
        wchar_t *p = malloc((dl + nl + 2) * sizeof(wchar_t));
        if (!p)
            continue;
        memcpy(p, dir, dl * sizeof(wchar_t));
        p[dl] = L'\\';
        memcpy(p + dl + 1, now.v[i], (nl + 1) * sizeof(wchar_t));
        DeleteFileW(p);
        free(p);
    }
    names_free(&now);
}

static bool
cim_name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 4 && n <= 200 && strcmp(s + n - 4, ".cim") == 0 && !strpbrk(s, "/\\:") &&
           s[0] != '.';
}

int
cim_layer_write(struct cimfs_api *api, const char *dir, const char *parent, const char *name,
                wtar_read_fn read, void *ctx, struct wcl_layer_info *info, struct err *err)
{
    if (!cim_name_valid(name) || (parent && !cim_name_valid(parent)))
        return err_set(err, EINVAL, "cim layer: bad image name %.200s (or parent %.200s)",
                       name ? name : "(null)", parent ? parent : "(none)");
    wchar_t *wdir = win_wide_sep(dir), *wname = win_wide_sep(name),
            *wparent = parent ? win_wide_sep(parent) : NULL;
    struct names before = {0};
    struct cimw w = {.api = api, .path = name};
    int r = 0;
    if (!wdir || !wname || (parent && !wparent) || names_list(wdir, &before) < 0) {
        r = err_set(err, ENOMEM, "cim layer %s: out of memory", name);
        goto out;
    }
    for (size_t i = 0; i < before.n; i++)
        if (_wcsicmp(before.v[i], wname) == 0) {
            r = err_set(err, EEXIST, "cim layer: image %s exists in %s", name, dir);
            goto out;
        }
    HRESULT hr = api->CimCreateImage(wdir, wparent, wname, &w.img);
    if (FAILED(hr)) {
        w.img = NULL;
        r = fail(err, hr, "create image", name);
        goto out;
    }
    struct wcl_sink sink = {sink_entry, sink_data, sink_make_writable, &w};
    struct wcl_layer_info own;
    r = wclayer_import(read, ctx, &sink, info ? info : &own, err);
    close_stream(&w);
    if (r == 0 && !parent)
        r = base_hives(&w, err);
    if (r == 0 && FAILED(hr = api->CimCommitImage(w.img)))
        r = fail(err, hr, "commit image", name);
    api->CimCloseImage(w.img);
    if (r < 0)
        names_remove_new(wdir, &before);
out:
    names_free(&before);
    free(wdir);
    free(wname);
    free(wparent);
    return r;
}

/* ---- block CIMs: one layer, or a merge of several, in one file ---- */

/* The new single-file block CIM file, image name inside it (hcsshim
 * CreateBlockCIMWithOptions: CimCreateImage2 with the single-file and
 * consistent flags, no existing image). EEXIST when file exists. */
static int
block_create(struct cimfs_api *api, const char *file, const char *name, CIMFS_IMAGE_HANDLE *img,
             wchar_t **wfile_out, struct err *err)
{
    if (cimfs_api_block(api, err) < 0)
        return err_wrap(err, "block cim %s", file);
    if (!cim_name_valid(name))
        return err_set(err, EINVAL, "block cim: bad image name %.200s", name ? name : "(null)");
    wchar_t *wfile = win_wide_sep(file), *wname = win_wide_sep(name);
    int r = 0;
    if (!wfile || !wname)
        r = err_set(err, ENOMEM, "block cim %s: out of memory", file);
    else if (GetFileAttributesW(wfile) != INVALID_FILE_ATTRIBUTES)
        r = err_set(err, EEXIST, "block cim: %s exists", file);
    HRESULT hr;
    if (r == 0 &&
        FAILED(hr = api->CimCreateImage2(wfile, CIMFS_CREATE_SINGLE_FILE | CIMFS_CREATE_CONSISTENT,
                                         NULL, wname, img))) {
        *img = NULL;
        r = cimfs_err_set(err, hr, "block cim: create image %.300s", file);
        DeleteFileW(wfile);
    }
    free(wname);
    if (r < 0) {
        free(wfile);
        return r;
    }
    *wfile_out = wfile;
    return 0;
}

/* Commits and closes img (r == 0), or closes it; on any failure the file goes. */
static int
block_finish(struct cimfs_api *api, CIMFS_IMAGE_HANDLE img, wchar_t *wfile, const char *file, int r,
             struct err *err)
{
    HRESULT hr;
    if (r == 0 && FAILED(hr = api->CimCommitImage(img)))
        r = cimfs_err_set(err, hr, "block cim: commit %.300s", file);
    api->CimCloseImage(img);
    if (r < 0)
        DeleteFileW(wfile);
    free(wfile);
    return r;
}

int
cim_block_layer_write(struct cimfs_api *api, const char *file, const char *name, bool base,
                      wtar_read_fn read, void *ctx, struct wcl_layer_info *info, struct err *err)
{
    struct cimw w = {.api = api, .path = name, .block = true};
    wchar_t *wfile = NULL;
    int r = block_create(api, file, name, &w.img, &wfile, err);
    if (r < 0)
        return r;
    struct wcl_sink sink = {sink_entry, sink_data, sink_make_writable, &w};
    struct wcl_layer_info own;
    r = wclayer_import(read, ctx, &sink, info ? info : &own, err);
    close_stream(&w);
    if (r == 0 && base)
        r = base_hives(&w, err);
    return block_finish(api, w.img, wfile, file, r, err);
}

int
cim_block_merge(struct cimfs_api *api, const char *file, const char *name,
                const char *const *sources, const char *source_name, size_t n, struct err *err)
{
    if (!cim_name_valid(source_name))
        return err_set(err, EINVAL, "merged cim %s: bad source image name", file);
    if (n < 2)
        return err_set(err, EINVAL, "merged cim %s: needs 2 source cims or more, got %zu", file, n);
    CIMFS_IMAGE_HANDLE img = NULL;
    wchar_t *wfile = NULL;
    int r = block_create(api, file, name, &img, &wfile, err);
    if (r < 0)
        return r;
    /* Top-most first: CimAddFsToMergedImage2 wants the CIM whose files
     * shadow the others' added before them (hcsshim MergeBlockCIMsWithOpts). */
    for (size_t i = 0; r == 0 && i < n; i++) {
        /* A CIM of a block file is named <file>\<image name> (hcsshim
         * joins BlockPath and CimName). */
        char *path = NULL;
        wchar_t *src =
            asprintf(&path, "%s\\%s", sources[i], source_name) < 0 ? NULL : win_wide_sep(path);
        free(path);
        HRESULT hr =
            src ? api->CimAddFsToMergedImage2(img, src, CIMFS_MERGE_SINGLE_FILE) : E_OUTOFMEMORY;
        free(src);
        if (FAILED(hr))
            r = cimfs_err_set(err, hr, "merged cim %.200s: add %.300s", file, sources[i]);
    }
    return block_finish(api, img, wfile, file, r, err);
}
