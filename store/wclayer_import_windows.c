/*
 * Windows layer tars into WCIFS layer folders (store/wclayer_import.h):
 * the staging writer (a struct wcl_sink that makes each entry with Win32
 * calls, descriptors and attributes included) and the HCS import around
 * it (a base layer's UtilityVM: store/wclayer_uvm.h). Windows only; pool
 * threads.
 */
#include "store/wclayer_import.h"
#include "store/wclayer_reparse.h"

#include <windows.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "common/winutil.h"
#include "store/wclayer_base.h"
#include "store/wclayer_blob.h"
#include "store/wclayer_uvm.h"

struct writer {
    wchar_t *root; /* \\?\ form, no trailing '\' */
    bool base;     /* no parents: whiteouts are refused */
    HANDLE file;   /* the file or stream being written */
    wchar_t *file_path;
    struct wcl_entry pending; /* what to apply when its data ends */
    unsigned char *sd;
    size_t sd_len;
    struct strbuf tombstones; /* "\<path>\n" per whiteout under Files */
};

/* The \\?\ absolute form of path, without a trailing separator. */
static wchar_t *
long_path(const char *path)
{
    wchar_t *w = win_wide(path);
    if (!w)
        return NULL;
    for (wchar_t *c = w; *c; c++)
        if (*c == L'/')
            *c = L'\\';
    if (wcsncmp(w, L"\\\\?\\", 4) == 0)
        return w;
    DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
    wchar_t *full = n ? malloc((n + 8) * sizeof(wchar_t)) : NULL;
    if (full) {
        wcscpy(full, L"\\\\?\\");
        if (GetFullPathNameW(w, n, full + 4, NULL) == 0) {
            free(full);
            full = NULL;
        }
    }
    free(w);
    if (full) {
        size_t len = wcslen(full);
        while (len > 7 && full[len - 1] == L'\\')
            full[--len] = L'\0';
    }
    return full;
}

/* root\rel (rel '/'-separated, as wclayer normalizes it). */
static wchar_t *
under(const wchar_t *root, const char *rel)
{
    wchar_t *r = win_wide(rel);
    if (!r)
        return NULL;
    size_t a = wcslen(root), b = wcslen(r);
    wchar_t *w = malloc((a + b + 2) * sizeof(wchar_t));
    if (w) {
        memcpy(w, root, a * sizeof(wchar_t));
        w[a] = L'\\';
        for (size_t i = 0; i <= b; i++)
            w[a + 1 + i] = r[i] == L'/' ? L'\\' : r[i];
    }
    free(r);
    return w;
}

static int
win_fail(struct err *err, DWORD e, const char *what, const char *path)
{
    int code = e == ERROR_ACCESS_DENIED                                 ? EACCES
               : e == ERROR_FILE_EXISTS || e == ERROR_ALREADY_EXISTS    ? EEXIST
               : e == ERROR_DISK_FULL                                   ? ENOSPC
               : e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? ENOENT
                                                                        : EIO;
    return err_set(err, code, "windows layer: %s %.300s: error %lu", what, path, (unsigned long)e);
}

/* Makes the parents of p (the part after the root), as plain directories. */
static void
make_parents(const wchar_t *root, wchar_t *p)
{
    size_t start = wcslen(root) + 1;
    for (size_t i = start; p[i]; i++) {
        if (p[i] != L'\\')
            continue;
        p[i] = L'\0';
        CreateDirectoryW(p, NULL);
        p[i] = L'\\';
    }
}

static FILETIME
filetime(int64_t sec, uint32_t nsec)
{
    /* 100 ns ticks since 1601. */
    uint64_t t = (uint64_t)(sec + 11644473600LL) * 10000000u + nsec / 100u;
    FILETIME ft = {(DWORD)t, (DWORD)(t >> 32)};
    return ft;
}

/* Times, attributes and descriptor of e, onto p (open as h, or by name when h is NULL). */
static int
apply_meta(const struct wcl_entry *e, const unsigned char *sd, const wchar_t *p, HANDLE h,
           struct err *err)
{
    FILETIME m = filetime(e->mtime, 0);
    FILETIME c = e->has_creation_time ? filetime(e->creation_sec, e->creation_nsec) : m;
    HANDLE own = NULL;
    if (!h) {
        own = CreateFileW(p, FILE_WRITE_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                          OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
                          NULL);
        h = own != INVALID_HANDLE_VALUE ? own : NULL;
    }
    if (h)
        SetFileTime(h, &c, NULL, &m);
    if (own && own != INVALID_HANDLE_VALUE)
        CloseHandle(own);
    if (sd && !SetFileSecurityW(p,
                                OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION |
                                    DACL_SECURITY_INFORMATION,
                                (PSECURITY_DESCRIPTOR)sd))
        return win_fail(err, GetLastError(), "set the security descriptor of", e->path);
    if (e->has_attributes &&
        !SetFileAttributesW(p, e->attributes & ~WCL_ATTR_DIRECTORY & ~WCL_ATTR_REPARSE_POINT))
        return win_fail(err, GetLastError(), "set the attributes of", e->path);
    return 0;
}

/* Times, descriptor and attributes of a reparse point, through h (opened
 * with FILE_FLAG_OPEN_REPARSE_POINT): by name, SetFileSecurityW and
 * SetFileAttributesW would reach the target, the host's own C:\Users. */
static int
reparse_meta(const struct wcl_entry *e, HANDLE h, struct err *err)
{
    FILETIME m = filetime(e->mtime, 0);
    FILETIME c = e->has_creation_time ? filetime(e->creation_sec, e->creation_nsec) : m;
    if (!SetFileTime(h, &c, NULL, &m))
        return win_fail(err, GetLastError(), "set the times of", e->path);
    if (e->sd && !SetKernelObjectSecurity(h,
                                          OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION |
                                              DACL_SECURITY_INFORMATION,
                                          (PSECURITY_DESCRIPTOR)e->sd))
        return win_fail(err, GetLastError(), "set the security descriptor of", e->path);
    if (e->has_attributes) {
        FILE_BASIC_INFO bi = {0}; /* zero times: left as they are */
        bi.FileAttributes = e->attributes & ~WCL_ATTR_DIRECTORY & ~WCL_ATTR_REPARSE_POINT;
        if (bi.FileAttributes && !SetFileInformationByHandle(h, FileBasicInfo, &bi, sizeof(bi)))
            return win_fail(err, GetLastError(), "set the attributes of", e->path);
    }
    return 0;
}

/*
 * A junction: a directory, then its mount point reparse data (go-winio's
 * encoding, wcl_reparse_encode) set with FSCTL_SET_REPARSE_POINT, then
 * its times, descriptor and attributes on the reparse point itself.
 */
static int
junction_make(const struct wcl_entry *e, const wchar_t *p, struct err *err)
{
    unsigned char buf[WCL_REPARSE_MAX];
    size_t len = 0;
    int rc = wcl_reparse_encode(e->target, true, buf, sizeof(buf), &len, err);
    if (rc < 0)
        return err_wrap(err, "windows layer: junction %.300s", e->path);
    if (!CreateDirectoryW(p, NULL))
        return win_fail(err, GetLastError(), "create the junction", e->path);
    HANDLE h = CreateFileW(p, GENERIC_WRITE | WRITE_DAC | WRITE_OWNER, 0, NULL, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        rc = win_fail(err, GetLastError(), "open the junction", e->path);
        RemoveDirectoryW(p);
        return rc;
    }
    DWORD got = 0;
    BOOL ok = DeviceIoControl(h, FSCTL_SET_REPARSE_POINT, buf, (DWORD)len, NULL, 0, &got, NULL);
    DWORD le = GetLastError();
    rc = ok ? reparse_meta(e, h, err)
            : win_fail(err, le, "set the reparse point of junction", e->path);
    CloseHandle(h);
    if (!ok)
        RemoveDirectoryW(p);
    return rc;
}

static int
sink_entry(void *ctx, const struct wcl_entry *e, struct err *err)
{
    struct writer *w = ctx;
    if (e->kind == WCL_WHITEOUT) {
        if (w->base)
            return err_set(err, ERR_INVALID_CONTENT,
                           "windows layer: whiteout %.300s in a base layer", e->path);
        /* tombstones.txt names a removed entry from the root of Files, '\'-separated. */
        const char *rel = strncmp(e->path, "Files/", 6) == 0 ? e->path + 5 : e->path;
        for (const char *c = rel; *c; c++)
            strbuf_put(&w->tombstones, *c == '/' ? "\\" : c, 1);
        strbuf_puts(&w->tombstones, "\n");
        return 0;
    }
    /* A base layer's Hives\ is HcsSetupBaseOSLayer's to make (it refuses
     * one that exists), from Files\Windows\System32\config; a delta has
     * nothing to apply to there. */
    if (w->base && e->root == WCL_ROOT_HIVES) {
        if (e->kind == WCL_DIR)
            return 0;
        return err_set(err, ERR_INVALID_CONTENT,
                       "windows layer: %.300s: a base layer carries no hive delta", e->path);
    }
    wchar_t *p = under(w->root, e->path);
    if (!p)
        return err_set(err, ENOMEM, "windows layer: out of memory");
    make_parents(w->root, p);
    int rc = 0;
    switch (e->kind) {
    case WCL_DIR:
        if (!CreateDirectoryW(p, NULL) && GetLastError() != ERROR_ALREADY_EXISTS)
            rc = win_fail(err, GetLastError(), "create directory", e->path);
        if (rc == 0)
            rc = apply_meta(e, e->sd, p, NULL, err);
        free(p);
        return rc;
    case WCL_FILE:
    case WCL_STREAM: {
        HANDLE h = CreateFileW(p, GENERIC_WRITE | WRITE_DAC | WRITE_OWNER, 0, NULL, CREATE_ALWAYS,
                               FILE_ATTRIBUTE_NORMAL, NULL);
        if (h == INVALID_HANDLE_VALUE) {
            DWORD le = GetLastError();
            free(p);
            return win_fail(err, le, "create", e->path);
        }
        w->file = h;
        w->file_path = p;
        w->pending = *e;
        free(w->sd);
        w->sd = NULL;
        if (e->sd && (w->sd = malloc(e->sd_len)))
            memcpy(w->sd, e->sd, e->sd_len);
        if (e->sd && !w->sd)
            return err_set(err, ENOMEM, "windows layer: out of memory");
        return 0;
    }
    case WCL_HARDLINK: {
        wchar_t *t = under(w->root, e->target);
        if (!t || !CreateHardLinkW(p, t, NULL))
            rc = t ? win_fail(err, GetLastError(), "hard link", e->path)
                   : err_set(err, ENOMEM, "windows layer: out of memory");
        free(t);
        free(p);
        return rc;
    }
    case WCL_SYMLINK: {
        if (e->mount_point) {
            rc = junction_make(e, p, err);
            free(p);
            return rc;
        }
        wchar_t *t = win_wide_sep(e->target);
        DWORD flags = 0x2 /* SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE */;
        if (e->has_attributes && (e->attributes & WCL_ATTR_DIRECTORY))
            flags |= SYMBOLIC_LINK_FLAG_DIRECTORY;
        if (!t || !CreateSymbolicLinkW(p, t, flags))
            rc = t ? win_fail(err, GetLastError(), "symlink", e->path)
                   : err_set(err, ENOMEM, "windows layer: out of memory");
        free(t);
        free(p);
        return rc;
    }
    default:
        free(p);
        return err_set(err, ERR_INVALID_CONTENT, "windows layer: %.300s: unknown kind", e->path);
    }
}

static int
sink_data(void *ctx, const void *buf, size_t len, struct err *err)
{
    struct writer *w = ctx;
    if (len > 0) {
        DWORD n = 0;
        if (!WriteFile(w->file, buf, (DWORD)len, &n, NULL) || n != len)
            return win_fail(err, GetLastError(), "write", w->pending.path);
        return 0;
    }
    /* The end of the entry's data. */
    int rc = apply_meta(&w->pending, NULL, w->file_path, w->file, err);
    CloseHandle(w->file);
    w->file = NULL;
    if (rc == 0)
        rc = apply_meta(&w->pending, w->sd, w->file_path, NULL, err);
    free(w->file_path);
    w->file_path = NULL;
    return rc;
}

static int
sink_make_writable(void *ctx, const char *path, struct err *err)
{
    struct writer *w = ctx;
    wchar_t *p = under(w->root, path);
    if (!p)
        return err_set(err, ENOMEM, "windows layer: out of memory");
    DWORD a = GetFileAttributesW(p);
    int rc = 0;
    if (a == INVALID_FILE_ATTRIBUTES ||
        !SetFileAttributesW(p, (a & ~(DWORD)FILE_ATTRIBUTE_READONLY) | FILE_ATTRIBUTE_NORMAL))
        rc = win_fail(err, GetLastError(), "make writable", path);
    free(p);
    return rc;
}

static void
remove_tree(const wchar_t *p)
{
    DWORD a = GetFileAttributesW(p);
    if (a == INVALID_FILE_ATTRIBUTES)
        return;
    if (!(a & FILE_ATTRIBUTE_DIRECTORY) || (a & FILE_ATTRIBUTE_REPARSE_POINT)) {
        SetFileAttributesW(p, FILE_ATTRIBUTE_NORMAL);
        if (!DeleteFileW(p))
            RemoveDirectoryW(p);
        return;
    }
    size_t n = wcslen(p);
    wchar_t *pat = malloc((n + 3) * sizeof(wchar_t));
    if (!pat)
        return;
    memcpy(pat, p, n * sizeof(wchar_t));
    wcscpy(pat + n, L"\\*");
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileW(pat, &fd);
    free(pat);
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0)
                continue;
            size_t m = wcslen(fd.cFileName);
            wchar_t *c = malloc((n + m + 2) * sizeof(wchar_t));
            if (!c)
                continue;
            memcpy(c, p, n * sizeof(wchar_t));
            c[n] = L'\\';
            memcpy(c + n + 1, fd.cFileName, (m + 1) * sizeof(wchar_t));
            remove_tree(c);
            free(c);
        } while (FindNextFileW(h, &fd));
        FindClose(h);
    }
    SetFileAttributesW(p, FILE_ATTRIBUTE_DIRECTORY);
    RemoveDirectoryW(p);
}

/* Importing needs SeBackupPrivilege and SeRestorePrivilege (descriptors
 * with any owner); enabled when the token has them, as containerd does. */
static void
enable_privileges(void)
{
    HANDLE tok;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &tok))
        return;
    const wchar_t *names[] = {L"SeBackupPrivilege", L"SeRestorePrivilege"};
    for (size_t i = 0; i < 2; i++) {
        TOKEN_PRIVILEGES tp = {.PrivilegeCount = 1};
        if (LookupPrivilegeValueW(NULL, names[i], &tp.Privileges[0].Luid)) {
            tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
            AdjustTokenPrivileges(tok, FALSE, &tp, 0, NULL, NULL);
        }
    }
    CloseHandle(tok);
}

static int
write_tombstones(struct writer *w, struct err *err)
{
    size_t len = 0;
    char *body = strbuf_steal(&w->tombstones, &len);
    if (!body)
        return err_set(err, ENOMEM, "windows layer: out of memory");
    if (len == 0) {
        free(body);
        return 0; /* no whiteouts */
    }
    wchar_t *p = under(w->root, "tombstones.txt");
    HANDLE h =
        p ? CreateFileW(p, GENERIC_WRITE, 0, NULL, CREATE_NEW, 0, NULL) : INVALID_HANDLE_VALUE;
    int rc = 0;
    static const char head[] = "\xef\xbb\xbfVersion 1.0\n";
    DWORD n1 = 0, n2 = 0;
    if (h == INVALID_HANDLE_VALUE || !WriteFile(h, head, sizeof(head) - 1, &n1, NULL) ||
        !WriteFile(h, body, (DWORD)len, &n2, NULL) || n2 != len)
        rc = win_fail(err, GetLastError(), "write", "tombstones.txt");
    if (h != INVALID_HANDLE_VALUE)
        CloseHandle(h);
    free(p);
    free(body);
    return rc;
}

/* One layer being imported: staged (entries written), then committed (HCS). */
struct stage {
    char *layer_dir;
    char *staging;
    wchar_t *layer_w;
    bool base;
    bool hcs_called; /* HCS may have made the layer: HcsDestroyLayer on failure */
    bool uvm;        /* a base layer with a UtilityVM (store/wclayer_uvm.h) */
    struct writer w;
};

static void
stage_free(struct stage *st, struct wcs_api *api, bool failed)
{
    if (!st)
        return;
    if (st->w.file)
        CloseHandle(st->w.file);
    free(st->w.file_path);
    free(st->w.sd);
    strbuf_clear(&st->w.tombstones);
    if (!st->base && st->w.root)
        remove_tree(st->w.root);
    if (failed) {
        /* HCS's own undo first; the folder goes below whatever it says. */
        struct err ignored = {0};
        if (st->hcs_called)
            (void)wcs_destroy_layer(api, st->layer_dir, &ignored);
        if (st->layer_w)
            remove_tree(st->layer_w);
    }
    free(st->w.root);
    free(st->layer_w);
    free(st->staging);
    free(st->layer_dir);
    free(st);
}

static int
stage_new(const char *layer_dir, bool base, struct stage **out, struct err *err)
{
    struct stage *st = calloc(1, sizeof(*st));
    size_t dl = strlen(layer_dir);
    if (st) {
        st->base = base;
        st->layer_dir = strdup(layer_dir);
        st->staging = malloc(dl + 16);
        st->layer_w = long_path(layer_dir);
        if (st->staging)
            snprintf(st->staging, dl + 16, "%s.staging", layer_dir);
        st->w.root = st->staging ? long_path(base ? layer_dir : st->staging) : NULL;
        st->w.base = base;
    }
    if (!st || !st->layer_dir || !st->staging || !st->layer_w || !st->w.root) {
        stage_free(st, NULL, false);
        return err_set(err, ENOMEM, "windows layer %.300s: out of memory or not UTF-8", layer_dir);
    }
    *out = st;
    return 0;
}

/* Writes the tar's entries (and the tombstones) where HCS will take them from. */
static int
stage_run(struct stage *st, wtar_read_fn read, void *ctx, struct wcl_layer_info *info,
          struct err *err)
{
    enable_privileges();
    remove_tree(st->w.root);
    if (!CreateDirectoryW(st->w.root, NULL))
        return win_fail(err, GetLastError(), "create", st->base ? st->layer_dir : st->staging);
    struct wcl_sink sink = {sink_entry, sink_data, sink_make_writable, &st->w};
    int rc = wclayer_import(read, ctx, &sink, info, err);
    if (st->w.file) {
        CloseHandle(st->w.file);
        st->w.file = NULL;
    }
    if (rc == 0 && !st->base)
        rc = write_tombstones(&st->w, err);
    st->uvm = st->base && info->utility_vm;
    if (rc == 0 && st->uvm)
        rc = wclayer_uvm_check(st->layer_dir, err);
    return rc;
}

/* The platform's part: the base layer set up, or the staging folder imported. */
static int
stage_commit(struct stage *st, struct wcs_api *api, const struct wcs_layer *parents,
             size_t nparents, struct err *err)
{
    st->hcs_called = true;
    if (st->base) {
        int rc = wclayer_base_setup(api, st->layer_dir, err);
        return rc == 0 && st->uvm ? wclayer_uvm_setup(api, st->layer_dir, err) : rc;
    }
    char *ld = wcs_layer_data(parents, nparents, err);
    int rc = ld ? wcs_import_layer(api, st->layer_dir, st->staging, ld, err) : -err->code;
    free(ld);
    return rc;
}

int
wclayer_import_layer(struct wcs_api *api, wtar_read_fn read, void *ctx, const char *layer_dir,
                     const struct wcs_layer *parents, size_t nparents, struct wcl_layer_info *info,
                     struct err *err)
{
    struct stage *st = NULL;
    int rc = stage_new(layer_dir, nparents == 0, &st, err);
    if (rc < 0)
        return rc;
    rc = stage_run(st, read, ctx, info, err);
    if (rc == 0)
        rc = stage_commit(st, api, parents, nparents, err);
    stage_free(st, api, rc < 0);
    return rc < 0 ? err_wrap(err, "windows layer %.200s", layer_dir) : 0;
}

struct blob_import {
    struct stage *st;
    struct wcl_layer_info info;
};

static int
blob_consume(void *arg, wtar_read_fn read, void *rctx, struct err *err)
{
    struct blob_import *bi = arg;
    return stage_run(bi->st, read, rctx, &bi->info, err);
}

int
wclayer_blob_import(ssize_t (*read)(void *ctx, void *buf, size_t len), void *ctx,
                    const char *layer_dir, const char *const *lowers,
                    const char *const *lower_chain_ids, const char *want_digest,
                    const char *want_diff_id, struct unpack_result *res, struct err *err)
{
    size_t n = 0;
    while (lowers && lowers[n] && lower_chain_ids && lower_chain_ids[n])
        n++;
    struct wcs_layer *parents = calloc(n + 1, sizeof(*parents));
    char(*ids)[WCS_LAYER_ID_SIZE] = calloc(n + 1, sizeof(*ids));
    char **paths = calloc(n + 1, sizeof(char *));
    int rc = 0;
    if (!parents || !ids || !paths)
        rc = err_set(err, ENOMEM, "windows layer: out of memory");
    for (size_t k = 0; rc == 0 && k < n; k++) {
        rc = wcs_layer_id(lower_chain_ids[k], ids[k], err);
        /* HCS takes Windows paths. */
        if (rc == 0 && !(paths[k] = strdup(lowers[k])))
            rc = err_set(err, ENOMEM, "windows layer: out of memory");
        for (char *c = paths[k]; rc == 0 && *c; c++)
            if (*c == '/')
                *c = '\\';
        parents[k] = (struct wcs_layer){ids[k], paths[k]};
    }
    struct wcs_api *api = NULL;
    struct blob_import bi = {0};
    if (rc == 0)
        rc = wcs_api_open(NULL, &api, err);
    if (rc == 0)
        rc = stage_new(layer_dir, n == 0, &bi.st, err);
    struct wcl_blob_result br = {0};
    if (rc == 0)
        rc = wcl_blob_read(read, ctx, blob_consume, &bi, &br, err);
    /* Nothing reaches HCS before the bytes are known to be the image's. */
    if (rc == 0 && want_digest && strcmp(br.digest, want_digest) != 0)
        rc = err_set(err, ERR_INVALID_CONTENT, "content is %s, %llu bytes", br.digest,
                     (unsigned long long)br.size);
    if (rc == 0 && want_diff_id && strcmp(br.diff_id, want_diff_id) != 0)
        rc = err_set(err, ERR_INVALID_CONTENT,
                     "uncompressed digest is %s, but the config's diff_id is %s", br.diff_id,
                     want_diff_id);
    if (rc == 0)
        rc = stage_commit(bi.st, api, parents, n, err);
    if (rc == 0) {
        memcpy(res->digest, br.digest, sizeof(res->digest));
        memcpy(res->diff_id, br.diff_id, sizeof(res->diff_id));
        res->size = br.size;
        res->uncompressed_size = br.tar_size;
        res->unpacked_bytes = bi.info.bytes;
        res->entries = bi.info.entries;
    }
    stage_free(bi.st, api, rc < 0);
    wcs_api_free(api);
    for (size_t k = 0; paths && k < n; k++)
        free(paths[k]);
    free(paths);
    free(ids);
    free(parents);
    return rc;
}
