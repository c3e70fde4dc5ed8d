/*
 * A TEST DOUBLE of cimfs.dll for berth's Wine suites: it is not CimFS,
 * builds no real image and mounts no volume. It exports what
 * store/cimfs_api_windows.c calls, with the signatures of
 * store/cimfs_api.h (included, so a mismatch does not compile), and
 * keeps what an image holds in memory until CimCommitImage writes it as a
 * stand-in .cim file: a text listing, one line per file, directory,
 * stream or link with its metadata, which a later CimCreateImage forks
 * from and CimMountImage checks. Calls run on the caller's thread.
 *
 * Block CIMs (CimCreateImage2 with the single-file flag, the only kind
 * berth writes): the listing goes into the block file itself, with
 * "block <name>" after the magic and no region files; a tombstone is a
 * 't' line; a merged image's CimAddFsToMergedImage2 sources are 'm'
 * lines, in the order added; CimMergeMountImage checks that its first
 * image is a merged one whose sources are the rest, in that order
 * (hcsshim: "MUST be provided in the exact same order"), and records the
 * list as the mount.
 *
 * Controlled through the environment, read at every call:
 *
 *   BERTH_CIMFS_DOUBLE_DIR   a directory: calls.log gets one line per call,
 *                            "<Function> key=value ... [path]" (what the
 *                            tests read: paths, attributes, security
 *                            descriptor lengths, sizes, creation times,
 *                            and at CimCloseStream the bytes written and
 *                            their FNV-1a 64 hash); mounts/<volume GUID>
 *                            holds each mounted image, so that a mount
 *                            outlives the process that made it, as a real
 *                            one does (the crash tests need that)
 *   BERTH_CIMFS_DOUBLE_FAIL  comma-separated calls that fail:
 *     create-image  CimCreateImage: E_ACCESSDENIED
 *     create-file   CimCreateFile and CimCreateAlternateStream: E_FAIL
 *     write-stream  CimWriteStream: HRESULT_FROM_WIN32(ERROR_DISK_FULL)
 *     hard-link     CimCreateHardLink: E_FAIL
 *     delete-path   CimDeletePath: E_FAIL
 *     commit        CimCommitImage: writes half of the .cim file, then
 *                   HRESULT_FROM_WIN32(ERROR_DISK_FULL) (a writer must not
 *                   leave it behind)
 *     tombstone     CimTombstoneFile: E_FAIL
 *     merge         CimAddFsToMergedImage2: E_FAIL
 *     mount         CimMountImage and CimMergeMountImage: E_ACCESSDENIED
 *     dismount      CimDismountImage: E_FAIL
 *
 * As the real DLL (Microsoft's cimfs.h reference): paths are relative to
 * the image root, '\'-separated (a '/' is E_INVALIDARG here, to catch a
 * caller that forgot to convert), a file's parent directory must exist,
 * one stream is open at a time and a commit with a stream open is
 * ERROR_SHARING_VIOLATION, a stream takes at most the size it was created
 * with, a missing path to delete or link to is ERROR_FILE_NOT_FOUND, a
 * volume GUID mounted twice is ERROR_ALREADY_EXISTS, dismounting one that
 * is not mounted ERROR_FILE_NOT_FOUND.
 */
#include <windows.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/cimfs_api.h"

#define MAGIC "berth-cimfs-double 1"
#define MAXE 4096

struct entry {
    char kind; /* 'd' directory, 'f' file, 's' stream, 'l' hard link, 't' tombstone,
                  'm' a merged image's source (path: "<block file>\\<name>") */
    uint32_t attr;
    int64_t size, ctime, mtime;
    uint32_t sd, reparse;
    uint64_t hash;
    char path[1024];
    char target[1024]; /* links */
};

struct CIMFS_IMAGE_HANDLE__ {
    char dir[1024]; /* a block image's: its file */
    char name[256];
    bool block;
    struct entry *e;
    size_t n;
    bool stream_open;
};

struct CIMFS_STREAM_HANDLE__ {
    struct CIMFS_IMAGE_HANDLE__ *img;
    size_t entry;
    int64_t written;
    uint64_t hash;
};

static SRWLOCK lock = SRWLOCK_INIT;

static bool
env_get(const char *name, char *buf, DWORD size)
{
    DWORD n = GetEnvironmentVariableA(name, buf, size);
    return n > 0 && n < size;
}

static bool
failing(const char *mode)
{
    char buf[512];
    if (!env_get("BERTH_CIMFS_DOUBLE_FAIL", buf, sizeof(buf)))
        return false;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (strcmp(t, mode) == 0)
            return true;
    return false;
}

static void
log_call(const char *fmt, ...)
{
    char dir[MAX_PATH], path[MAX_PATH + 16];
    if (!env_get("BERTH_CIMFS_DOUBLE_DIR", dir, sizeof(dir)))
        return;
    snprintf(path, sizeof(path), "%s\\calls.log", dir);
    FILE *f = fopen(path, "ab");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static bool
utf8(PCWSTR w, char *out, size_t size)
{
    if (!w)
        return snprintf(out, size, "-"), true;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, out, (int)size, NULL, NULL);
    return n > 0;
}

static uint64_t
fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}
#define FNV_INIT 14695981039346656037ull

static int64_t
li(LARGE_INTEGER v)
{
    return v.QuadPart;
}

static void
guid_text(const GUID *g, char out[40])
{
    snprintf(out, 40, "%08lx-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", (unsigned long)g->Data1,
             g->Data2, g->Data3, g->Data4[0], g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4],
             g->Data4[5], g->Data4[6], g->Data4[7]);
}

/* ---- the image's listing ---- */

static struct entry *
find(struct CIMFS_IMAGE_HANDLE__ *img, const char *path)
{
    for (size_t i = 0; i < img->n; i++)
        if (_stricmp(img->e[i].path, path) == 0)
            return &img->e[i];
    return NULL;
}

/* A relative path as the real DLL takes it: the leading '\' dropped. */
static HRESULT
rel_path(PCWSTR w, char *out, size_t size)
{
    if (!w || !utf8(w, out, size) || !*out || strchr(out, '/'))
        return E_INVALIDARG;
    if (out[0] == '\\')
        memmove(out, out + 1, strlen(out));
    return *out ? S_OK : E_INVALIDARG;
}

static bool
parent_exists(struct CIMFS_IMAGE_HANDLE__ *img, const char *path)
{
    char parent[1024];
    snprintf(parent, sizeof(parent), "%s", path);
    char *s = strrchr(parent, '\\');
    if (!s)
        return true;
    *s = '\0';
    struct entry *p = find(img, parent);
    return p && p->kind == 'd';
}

static struct entry *
add(struct CIMFS_IMAGE_HANDLE__ *img, const char *path)
{
    struct entry *e = find(img, path);
    if (!e) {
        if (img->n == MAXE)
            return NULL;
        e = &img->e[img->n++];
    }
    memset(e, 0, sizeof(*e));
    snprintf(e->path, sizeof(e->path), "%s", path);
    return e;
}

static int
load_path(struct CIMFS_IMAGE_HANDLE__ *img, const char *path)
{
    char line[2600];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    bool ok = fgets(line, sizeof(line), f) && strncmp(line, MAGIC, strlen(MAGIC)) == 0;
    while (ok && fgets(line, sizeof(line), f)) {
        if (strcmp(line, "end\n") == 0)
            break;
        struct entry e = {0};
        int off = 0;
        unsigned long long h;
        if (sscanf(line,
                   "%c attr=0x%x size=%lld sd=%u reparse=%u ctime=%lld mtime=%lld hash=%llx %n",
                   &e.kind, &e.attr, (long long *)&e.size, &e.sd, &e.reparse, (long long *)&e.ctime,
                   (long long *)&e.mtime, &h, &off) < 8 ||
            img->n == MAXE) {
            ok = false;
            break;
        }
        e.hash = h;
        line[strcspn(line, "\n")] = '\0';
        char *arrow = strstr(line + off, " => ");
        if (arrow) {
            snprintf(e.target, sizeof(e.target), "%s", arrow + 4);
            *arrow = '\0';
        }
        snprintf(e.path, sizeof(e.path), "%s", line + off);
        img->e[img->n++] = e;
    }
    fclose(f);
    return ok ? 0 : -1;
}

static int
load(struct CIMFS_IMAGE_HANDLE__ *img, const char *name)
{
    char path[1400];
    snprintf(path, sizeof(path), "%s\\%s", img->dir, name);
    return load_path(img, path);
}

/*
 * Does the block file hold image name? A block file is the listing with
 * "block <name>" after the magic (one image a file, here).
 */
static bool
block_has(const char *file, const char *name)
{
    char line[600], want[600];
    FILE *f = fopen(file, "rb");
    if (!f)
        return false;
    snprintf(want, sizeof(want), "%s block %s\n", MAGIC, name);
    bool ok = fgets(line, sizeof(line), f) && _stricmp(line, want) == 0;
    fclose(f);
    return ok;
}

/* ---- exports ---- */

HRESULT WINAPI
CimCreateImage(PCWSTR dir, PCWSTR existing, PCWSTR name, CIMFS_IMAGE_HANDLE *out)
{
    char d[1024], x[256], n[256];
    if (!out || !dir || (!existing && !name) || !utf8(dir, d, sizeof(d)) ||
        !utf8(existing, x, sizeof(x)) || !utf8(name, n, sizeof(n)))
        return E_INVALIDARG;
    log_call("CimCreateImage dir=%s existing=%s new=%s", d, x, n);
    if (failing("create-image"))
        return E_ACCESSDENIED;
    DWORD a = GetFileAttributesA(d);
    if (a == INVALID_FILE_ATTRIBUTES || !(a & FILE_ATTRIBUTE_DIRECTORY))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    struct CIMFS_IMAGE_HANDLE__ *img = calloc(1, sizeof(*img));
    if (!img || !(img->e = calloc(MAXE, sizeof(struct entry)))) {
        free(img);
        return E_OUTOFMEMORY;
    }
    snprintf(img->dir, sizeof(img->dir), "%s", d);
    snprintf(img->name, sizeof(img->name), "%s", name ? n : x);
    if (existing && load(img, x) < 0) {
        free(img->e);
        free(img);
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    }
    *out = img;
    return S_OK;
}

void WINAPI
CimCloseImage(CIMFS_IMAGE_HANDLE img)
{
    log_call("CimCloseImage");
    if (img) {
        free(img->e);
        free(img);
    }
}

HRESULT WINAPI
CimCommitImage(CIMFS_IMAGE_HANDLE img)
{
    if (!img)
        return E_INVALIDARG;
    log_call("CimCommitImage name=%s entries=%zu", img->name, img->n);
    if (img->stream_open)
        return HRESULT_FROM_WIN32(ERROR_SHARING_VIOLATION);
    char path[1400];
    /* As CimFS, the data goes into region and object ID files beside the
     * .cim, named by a GUID of the image's own (here: a counter); a block
     * image is all in its one file. */
    static LONG regions;
    LONG id = InterlockedIncrement(&regions);
    for (int k = 0; !img->block && k < 2; k++) {
        snprintf(path, sizeof(path), "%s\\%s_%08lx%08lx_0", img->dir, k ? "objectid" : "region",
                 GetCurrentProcessId(), (unsigned long)id);
        FILE *rf = fopen(path, "wb");
        if (!rf)
            return HRESULT_FROM_WIN32(GetLastError());
        fprintf(rf, "%s\n", img->name);
        fclose(rf);
    }
    if (img->block)
        snprintf(path, sizeof(path), "%s", img->dir);
    else
        snprintf(path, sizeof(path), "%s\\%s", img->dir, img->name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return HRESULT_FROM_WIN32(GetLastError());
    if (img->block)
        fprintf(f, "%s block %s\n", MAGIC, img->name);
    else
        fprintf(f, "%s\n", MAGIC);
    bool fail = failing("commit");
    for (size_t i = 0; i < (fail ? img->n / 2 : img->n); i++) {
        const struct entry *e = &img->e[i];
        fprintf(f, "%c attr=0x%x size=%lld sd=%u reparse=%u ctime=%lld mtime=%lld hash=%016llx %s",
                e->kind, e->attr, (long long)e->size, e->sd, e->reparse, (long long)e->ctime,
                (long long)e->mtime, (unsigned long long)e->hash, e->path);
        if (e->kind == 'l')
            fprintf(f, " => %s", e->target);
        fputc('\n', f);
    }
    if (!fail)
        fputs("end\n", f);
    fclose(f);
    return fail ? HRESULT_FROM_WIN32(ERROR_DISK_FULL) : S_OK;
}

static HRESULT
stream_new(struct CIMFS_IMAGE_HANDLE__ *img, struct entry *e, CIMFS_STREAM_HANDLE *out)
{
    if (!out)
        return S_OK;
    struct CIMFS_STREAM_HANDLE__ *s = calloc(1, sizeof(*s));
    if (!s)
        return E_OUTOFMEMORY;
    s->img = img;
    s->entry = (size_t)(e - img->e);
    s->hash = FNV_INIT;
    img->stream_open = true;
    *out = s;
    return S_OK;
}

HRESULT WINAPI
CimCreateFile(CIMFS_IMAGE_HANDLE img, PCWSTR wpath, const CIMFS_FILE_METADATA *md,
              CIMFS_STREAM_HANDLE *out)
{
    char path[1024];
    if (!img || !md || rel_path(wpath, path, sizeof(path)) != S_OK)
        return E_INVALIDARG;
    bool dir = md->Attributes & FILE_ATTRIBUTE_DIRECTORY;
    log_call("CimCreateFile attr=0x%x size=%lld sd=%u reparse=%u ctime=%lld mtime=%lld %s",
             (unsigned)md->Attributes, (long long)md->FileSize,
             (unsigned)md->SecurityDescriptorSize, (unsigned)md->ReparseDataSize,
             (long long)li(md->CreationTime), (long long)li(md->LastWriteTime), path);
    if (failing("create-file"))
        return E_FAIL;
    if (img->stream_open)
        return HRESULT_FROM_WIN32(ERROR_SHARING_VIOLATION);
    if ((md->SecurityDescriptorSize && !md->SecurityDescriptorBuffer) ||
        (md->ReparseDataSize && !md->ReparseDataBuffer) || md->FileSize < 0 ||
        (dir && md->FileSize))
        return E_INVALIDARG;
    if (!parent_exists(img, path))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    struct entry *e = add(img, path);
    if (!e)
        return E_OUTOFMEMORY;
    e->kind = dir ? 'd' : 'f';
    e->attr = md->Attributes;
    e->size = md->FileSize;
    e->sd = md->SecurityDescriptorSize;
    e->reparse = md->ReparseDataSize;
    e->ctime = li(md->CreationTime);
    e->mtime = li(md->LastWriteTime);
    e->hash = FNV_INIT;
    return stream_new(img, e, out);
}

HRESULT WINAPI
CimCreateAlternateStream(CIMFS_IMAGE_HANDLE img, PCWSTR wpath, UINT64 size,
                         CIMFS_STREAM_HANDLE *out)
{
    char path[1024];
    if (!img || !out || rel_path(wpath, path, sizeof(path)) != S_OK)
        return E_INVALIDARG;
    log_call("CimCreateAlternateStream size=%llu %s", (unsigned long long)size, path);
    if (failing("create-file"))
        return E_FAIL;
    if (img->stream_open)
        return HRESULT_FROM_WIN32(ERROR_SHARING_VIOLATION);
    char *colon = strchr(path, ':');
    if (!colon)
        return E_INVALIDARG;
    *colon = '\0';
    struct entry *owner = find(img, path);
    *colon = ':';
    if (!owner)
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    struct entry *e = add(img, path);
    if (!e)
        return E_OUTOFMEMORY;
    e->kind = 's';
    e->size = (int64_t)size;
    e->hash = FNV_INIT;
    return stream_new(img, e, out);
}

HRESULT WINAPI
CimWriteStream(CIMFS_STREAM_HANDLE s, const void *buf, UINT32 len)
{
    if (!s || (len && !buf))
        return E_INVALIDARG;
    if (failing("write-stream")) {
        log_call("CimWriteStream n=%u", (unsigned)len);
        return HRESULT_FROM_WIN32(ERROR_DISK_FULL);
    }
    struct entry *e = &s->img->e[s->entry];
    if (s->written + len > e->size)
        return E_INVALIDARG;
    s->hash = fnv(s->hash, buf, len);
    s->written += len;
    return S_OK;
}

void WINAPI
CimCloseStream(CIMFS_STREAM_HANDLE s)
{
    if (!s)
        return;
    struct entry *e = &s->img->e[s->entry];
    e->hash = s->hash;
    log_call("CimCloseStream bytes=%lld hash=%016llx %s", (long long)s->written,
             (unsigned long long)s->hash, e->path);
    s->img->stream_open = false;
    free(s);
}

HRESULT WINAPI
CimCreateHardLink(CIMFS_IMAGE_HANDLE img, PCWSTR wpath, PCWSTR wexisting)
{
    char path[1024], existing[1024];
    if (!img || rel_path(wpath, path, sizeof(path)) != S_OK ||
        rel_path(wexisting, existing, sizeof(existing)) != S_OK)
        return E_INVALIDARG;
    log_call("CimCreateHardLink %s => %s", path, existing);
    if (failing("hard-link"))
        return E_FAIL;
    if (img->stream_open)
        return HRESULT_FROM_WIN32(ERROR_SHARING_VIOLATION);
    struct entry *t = find(img, existing);
    if (!t || t->kind == 'd')
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    if (!parent_exists(img, path))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    struct entry copy = *t;
    struct entry *e = add(img, path);
    if (!e)
        return E_OUTOFMEMORY;
    e->kind = 'l';
    e->attr = copy.attr;
    e->size = copy.size;
    e->hash = copy.hash;
    snprintf(e->target, sizeof(e->target), "%s", existing);
    return S_OK;
}

HRESULT WINAPI
CimDeletePath(CIMFS_IMAGE_HANDLE img, PCWSTR wpath)
{
    char path[1024];
    if (!img || rel_path(wpath, path, sizeof(path)) != S_OK)
        return E_INVALIDARG;
    log_call("CimDeletePath %s", path);
    if (failing("delete-path"))
        return E_FAIL;
    size_t pl = strlen(path), kept = 0;
    bool found = false;
    for (size_t i = 0; i < img->n; i++) {
        const char *p = img->e[i].path;
        bool under =
            _strnicmp(p, path, pl) == 0 && (p[pl] == '\0' || p[pl] == '\\' || p[pl] == ':');
        found |= under;
        if (!under)
            img->e[kept++] = img->e[i];
    }
    img->n = kept;
    return found ? S_OK : HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
}

static bool
mount_file(const GUID *g, char *out, size_t size)
{
    char dir[MAX_PATH], id[40];
    if (!env_get("BERTH_CIMFS_DOUBLE_DIR", dir, sizeof(dir)))
        return false;
    guid_text(g, id);
    snprintf(out, size, "%s\\mounts", dir);
    CreateDirectoryA(out, NULL);
    snprintf(out, size, "%s\\mounts\\%s", dir, id);
    return true;
}

HRESULT WINAPI
CimMountImage(PCWSTR wdir, PCWSTR wname, CIM_MOUNT_IMAGE_FLAGS flags, const GUID *volume)
{
    char d[1024], n[256], id[40], mf[MAX_PATH + 64], image[1400], line[64] = "";
    if (!wdir || !wname || !volume || !utf8(wdir, d, sizeof(d)) || !utf8(wname, n, sizeof(n)))
        return E_INVALIDARG;
    guid_text(volume, id);
    log_call("CimMountImage flags=%u volume=%s %s\\%s", (unsigned)flags, id, d, n);
    if (failing("mount"))
        return E_ACCESSDENIED;
    if (flags & ~(CIM_MOUNT_CHILD_ONLY | CIMFS_MOUNT_SINGLE_FILE))
        return E_INVALIDARG;
    snprintf(image, sizeof(image), "%s\\%s", d, n);
    /* A single-file block CIM: d is the file, n the image in it. */
    if ((flags & CIMFS_MOUNT_SINGLE_FILE) && GetFileAttributesA(d) != INVALID_FILE_ATTRIBUTES &&
        !block_has(d, n))
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    FILE *f = fopen(flags & CIMFS_MOUNT_SINGLE_FILE ? d : image, "rb");
    bool ok = f && fgets(line, sizeof(line), f) && strncmp(line, MAGIC, strlen(MAGIC)) == 0;
    if (f)
        fclose(f);
    if (!f)
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    if (!ok)
        return HRESULT_FROM_WIN32(ERROR_FILE_CORRUPT);
    if (!mount_file(volume, mf, sizeof(mf)))
        return E_ACCESSDENIED;
    AcquireSRWLockExclusive(&lock);
    HRESULT hr = S_OK;
    FILE *m = GetFileAttributesA(mf) != INVALID_FILE_ATTRIBUTES ? NULL : fopen(mf, "wb");
    if (!m)
        hr = HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS);
    else {
        fprintf(m, "%s\n", image);
        fclose(m);
    }
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
CimDismountImage(const GUID *volume)
{
    char id[40], mf[MAX_PATH + 64];
    if (!volume)
        return E_INVALIDARG;
    guid_text(volume, id);
    log_call("CimDismountImage volume=%s", id);
    if (failing("dismount"))
        return E_FAIL;
    if (!mount_file(volume, mf, sizeof(mf)))
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    AcquireSRWLockExclusive(&lock);
    BOOL ok = DeleteFileA(mf);
    ReleaseSRWLockExclusive(&lock);
    return ok ? S_OK : HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
}

/* Writes the mount file of volume: one line per image it shows. */
static HRESULT
mount_record(const GUID *volume, const char *const *images, size_t n)
{
    char mf[MAX_PATH + 64];
    if (!mount_file(volume, mf, sizeof(mf)))
        return E_ACCESSDENIED;
    AcquireSRWLockExclusive(&lock);
    HRESULT hr = S_OK;
    FILE *m = GetFileAttributesA(mf) != INVALID_FILE_ATTRIBUTES ? NULL : fopen(mf, "wb");
    if (!m)
        hr = HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS);
    else {
        for (size_t i = 0; i < n; i++)
            fprintf(m, "%s\n", images[i]);
        fclose(m);
    }
    ReleaseSRWLockExclusive(&lock);
    return hr;
}

HRESULT WINAPI
CimCreateImage2(PCWSTR file, UINT32 flags, PCWSTR existing, PCWSTR name, CIMFS_IMAGE_HANDLE *out)
{
    char d[1024], n[256];
    if (!out || !file || !name || !utf8(file, d, sizeof(d)) || !utf8(name, n, sizeof(n)))
        return E_INVALIDARG;
    log_call("CimCreateImage2 flags=0x%x file=%s new=%s", (unsigned)flags, d, n);
    if (failing("create-image"))
        return E_ACCESSDENIED;
    /* berth writes single-file CIMs only, each new. */
    if (existing || !(flags & CIMFS_CREATE_SINGLE_FILE) || (flags & CIMFS_CREATE_BLOCK_DEVICE))
        return E_INVALIDARG;
    char parent[1024];
    snprintf(parent, sizeof(parent), "%s", d);
    char *s = strrchr(parent, '\\');
    if (!s)
        return E_INVALIDARG;
    *s = '\0';
    DWORD a = GetFileAttributesA(parent);
    if (a == INVALID_FILE_ATTRIBUTES || !(a & FILE_ATTRIBUTE_DIRECTORY))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    struct CIMFS_IMAGE_HANDLE__ *img = calloc(1, sizeof(*img));
    if (!img || !(img->e = calloc(MAXE, sizeof(struct entry)))) {
        free(img);
        return E_OUTOFMEMORY;
    }
    snprintf(img->dir, sizeof(img->dir), "%s", d);
    snprintf(img->name, sizeof(img->name), "%s", n);
    img->block = true;
    *out = img;
    return S_OK;
}

HRESULT WINAPI
CimTombstoneFile(CIMFS_IMAGE_HANDLE img, PCWSTR wpath)
{
    char path[1024];
    if (!img || rel_path(wpath, path, sizeof(path)) != S_OK)
        return E_INVALIDARG;
    log_call("CimTombstoneFile %s", path);
    if (failing("tombstone"))
        return E_FAIL;
    if (!img->block || img->stream_open)
        return E_INVALIDARG;
    struct entry *e = add(img, path);
    if (!e)
        return E_OUTOFMEMORY;
    e->kind = 't';
    return S_OK;
}

HRESULT WINAPI
CimAddFsToMergedImage2(CIMFS_IMAGE_HANDLE img, PCWSTR wpath, UINT32 flags)
{
    char path[1024], file[1024];
    if (!img || !wpath || !utf8(wpath, path, sizeof(path)))
        return E_INVALIDARG;
    log_call("CimAddFsToMergedImage2 flags=0x%x %s", (unsigned)flags, path);
    if (failing("merge"))
        return E_FAIL;
    if (!img->block || flags != CIMFS_MERGE_SINGLE_FILE || img->n == MAXE)
        return E_INVALIDARG;
    snprintf(file, sizeof(file), "%s", path);
    char *s = strrchr(file, '\\');
    if (!s)
        return E_INVALIDARG;
    *s = '\0';
    if (!block_has(file, s + 1))
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    struct entry *e = &img->e[img->n++];
    memset(e, 0, sizeof(*e));
    e->kind = 'm';
    snprintf(e->path, sizeof(e->path), "%s", path);
    return S_OK;
}

HRESULT WINAPI
CimMergeMountImage(UINT32 n, const CIMFS_IMAGE_PATH *paths, UINT32 flags, const GUID *volume)
{
    char id[40], msg[4096] = "", (*img)[1300] = NULL;
    if (!paths || !volume || n < 2 || n > 128 || !(img = calloc(n, sizeof(*img))))
        return E_INVALIDARG;
    guid_text(volume, id);
    HRESULT hr = S_OK;
    for (UINT32 i = 0; i < n && hr == S_OK; i++) {
        char d[1024], nm[256];
        if (!paths[i].ImageDir || !paths[i].ImageName || !utf8(paths[i].ImageDir, d, sizeof(d)) ||
            !utf8(paths[i].ImageName, nm, sizeof(nm)))
            hr = E_INVALIDARG;
        else {
            snprintf(img[i], sizeof(img[i]), "%s\\%s", d, nm);
            size_t l = strlen(msg);
            snprintf(msg + l, sizeof(msg) - l, " %s", img[i]);
        }
    }
    log_call("CimMergeMountImage n=%u flags=0x%x volume=%s%s", (unsigned)n, (unsigned)flags, id,
             msg);
    if (hr == S_OK && failing("mount"))
        hr = E_ACCESSDENIED;
    if (hr == S_OK && flags != CIMFS_MOUNT_SINGLE_FILE)
        hr = E_INVALIDARG;
    /* The merged image (the first) must list the others, in their order. */
    struct CIMFS_IMAGE_HANDLE__ *m = hr == S_OK ? calloc(1, sizeof(*m)) : NULL;
    if (hr == S_OK && (!m || !(m->e = calloc(MAXE, sizeof(struct entry)))))
        hr = E_OUTOFMEMORY;
    if (hr == S_OK) {
        char file[1300];
        snprintf(file, sizeof(file), "%s", img[0]);
        char *s = strrchr(file, '\\');
        *s = '\0';
        if (!block_has(file, s + 1) || load_path(m, file) < 0)
            hr = HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    }
    for (UINT32 i = 1; hr == S_OK && i < n; i++)
        if (m->n != n - 1 || m->e[i - 1].kind != 'm' || _stricmp(m->e[i - 1].path, img[i]) != 0)
            hr = E_INVALIDARG;
    if (m)
        free(m->e);
    free(m);
    if (hr == S_OK) {
        const char *v[128];
        for (UINT32 i = 0; i < n; i++)
            v[i] = img[i];
        hr = mount_record(volume, v, n);
    }
    free(img);
    return hr;
}

/* Each export has the type of store/cimfs_api.h's pointer to it. */
#define CIMFS_CHECK(ret, name, args)                                                               \
    static ret(WINAPI *const check_##name) args __attribute__((unused)) = name;
CIMFS_FUNCS(CIMFS_CHECK)
CIMFS_BLOCK_FUNCS(CIMFS_CHECK)
