/*
 * A TEST DOUBLE of computestorage.dll, the Host Compute Service's layer
 * API, for berth's Wine suites: it is not HCS, keeps no NTFS security
 * descriptors or hives, formats no VHDX and filters no volume. It exports
 * the functions of mingw-w64's computestorage.h with their signatures
 * (the header is included, so a mismatch does not compile), checks the
 * documents berth sends, and leaves on disk what a test can look at:
 *
 *   HcsImportLayer        the source folder (it must hold Files\) copied
 *                         into layerPath, which it creates
 *   HcsSetupBaseOSLayer   Type "Container": layerPath\Files must exist,
 *                         Hives\ and layout must not; both are made.
 *                         Type "Vm": layerPath\Files must exist and the
 *                         VHD handle must be of an attached disk (the
 *                         virtdisk double's <file>.double-attached mark)
 *   HcsDestroyLayer       layerPath removed (a missing one is success)
 *   HcsFormatWritableLayerVhd  writes BERTH_DOUBLE_FORMATTED at the start
 *                         of the file the handle is open on
 *   HcsGetLayerVhdMountPath    for a formatted file F: \\?\Volume{GUID}\,
 *                         whose stand-in is the directory "F.volume\" (made
 *                         here; the other calls find it from the GUID)
 *   HcsInitializeWritableLayer  marks the volume .double-initialized
 *   HcsAttachLayerStorageFilter  marks it .double-filter (the LayerData);
 *                         attaching twice is ERROR_ALREADY_EXISTS
 *   HcsDetachLayerStorageFilter  removes the mark; none is ERROR_NOT_FOUND
 *   HcsAttachOverlayFilter  (CimFS scratches) the LayerData must have
 *                         "FilterType":"UnionFS" and one layer whose Path
 *                         ends in \Files; marks the volume .double-overlay;
 *                         attaching twice is ERROR_ALREADY_EXISTS
 *   HcsDetachOverlayFilter  "FilterType":"UnionFS" required; removes the
 *                         mark; none is ERROR_NOT_FOUND
 * The other exports are logged and answer E_NOTIMPL: berth does not call
 * them.
 *
 * Controlled at every call by the environment and by a control file:
 *
 *   BERTH_HCS_STORAGE_DOUBLE_DIR  a directory: calls.log gets
 *       "NNNN <Function> <first path>" per call (appended, so the calls of
 *       several processes, a killed berthd.exe's and its successor's, are
 *       one log), every JSON document received is written there as
 *       NNNN-<Function>.json, and the control file is <dir>\fail
 *   BERTH_HCS_STORAGE_DOUBLE_FAIL, and the control file's first line:
 *       comma-separated <Function> names that fail (HcsImportLayer answers
 *       HCS_E_INVALID_LAYER, the others E_FAIL), and stall:<Function>,
 *       which blocks that call for as long as it is asked for (a test kills
 *       its caller meanwhile, or rewrites the control file to let it go)
 */
#include <windows.h>

#include <computestorage.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <wctype.h>

#define HCS_E_INVALID_LAYER ((HRESULT)0x80370112L)
#define FORMATTED_MARK "BERTH_DOUBLE_FORMATTED"

static SRWLOCK lock = SRWLOCK_INIT;

static bool
env_get(const char *name, char *buf, DWORD size)
{
    DWORD n = GetEnvironmentVariableA(name, buf, size);
    return n > 0 && n < size;
}

/* The failure list: the environment's, then the control file's. */
static void
fail_list(char *out, size_t size)
{
    char env[512] = "", dir[MAX_PATH], file[512] = "";
    env_get("BERTH_HCS_STORAGE_DOUBLE_FAIL", env, sizeof(env));
    if (env_get("BERTH_HCS_STORAGE_DOUBLE_DIR", dir, sizeof(dir))) {
        char path[MAX_PATH + 16];
        snprintf(path, sizeof(path), "%s\\fail", dir);
        FILE *f = fopen(path, "rb");
        if (f) {
            if (!fgets(file, sizeof(file), f))
                file[0] = '\0';
            fclose(f);
            file[strcspn(file, "\r\n")] = '\0';
        }
    }
    snprintf(out, size, "%s,%s", env, file);
}

static bool
asked(const char *what)
{
    char buf[1100];
    fail_list(buf, sizeof(buf));
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, what) == 0)
            return true;
    return false;
}

/* Blocks while stall:<fn> is asked for; then says whether fn fails. */
static bool
failing(const char *fn)
{
    char stall[128];
    snprintf(stall, sizeof(stall), "stall:%s", fn);
    while (asked(stall))
        Sleep(20);
    return asked(fn);
}

static char *
narrow(PCWSTR w)
{
    if (!w)
        return NULL;
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = n > 0 ? malloc((size_t)n) : NULL;
    if (s)
        WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL);
    return s;
}

/* The next call number: one more than the lines calls.log has. */
static unsigned
next_seq(const char *dir)
{
    char path[MAX_PATH + 16];
    snprintf(path, sizeof(path), "%s\\calls.log", dir);
    FILE *f = fopen(path, "rb");
    unsigned n = 1;
    if (f) {
        int c;
        while ((c = fgetc(f)) != EOF)
            n += c == '\n';
        fclose(f);
    }
    return n;
}

/* Logs the call and its document (either may be NULL). */
static void
record(const char *fn, PCWSTR path, PCWSTR doc)
{
    char dir[MAX_PATH];
    if (!env_get("BERTH_HCS_STORAGE_DOUBLE_DIR", dir, sizeof(dir)))
        return;
    AcquireSRWLockExclusive(&lock);
    unsigned n = next_seq(dir);
    char file[MAX_PATH + 64];
    char *p = narrow(path);
    if (doc) {
        char *d = narrow(doc);
        snprintf(file, sizeof(file), "%s\\%04u-%s.json", dir, n, fn);
        FILE *f = fopen(file, "wb");
        if (f) {
            fputs(d ? d : "", f);
            fclose(f);
        }
        free(d);
    }
    snprintf(file, sizeof(file), "%s\\calls.log", dir);
    FILE *log = fopen(file, "ab");
    if (log) {
        fprintf(log, "%04u %s %s\n", n, fn, p && *p ? p : "-");
        fclose(log);
    }
    free(p);
    ReleaseSRWLockExclusive(&lock);
}

static bool
is_dir(const wchar_t *p)
{
    DWORD a = GetFileAttributesW(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}

static bool
exists(const wchar_t *p)
{
    return GetFileAttributesW(p) != INVALID_FILE_ATTRIBUTES;
}

/* dir\name, malloc'd. */
static wchar_t *
join(const wchar_t *dir, const wchar_t *name)
{
    size_t a = wcslen(dir), b = wcslen(name);
    wchar_t *w = malloc((a + b + 2) * sizeof(wchar_t));
    if (!w)
        return NULL;
    memcpy(w, dir, a * sizeof(wchar_t));
    size_t k = a;
    if (k && w[k - 1] != L'\\')
        w[k++] = L'\\';
    memcpy(w + k, name, (b + 1) * sizeof(wchar_t));
    return w;
}

/* Copies the tree src into dst (made when missing). */
static bool
copy_tree(const wchar_t *src, const wchar_t *dst)
{
    if (!CreateDirectoryW(dst, NULL) && GetLastError() != ERROR_ALREADY_EXISTS)
        return false;
    wchar_t *pat = join(src, L"*");
    WIN32_FIND_DATAW fd;
    HANDLE h = pat ? FindFirstFileW(pat, &fd) : INVALID_HANDLE_VALUE;
    free(pat);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_NOT_FOUND;
    bool ok = true;
    do {
        if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0)
            continue;
        wchar_t *s = join(src, fd.cFileName), *d = join(dst, fd.cFileName);
        if (!s || !d)
            ok = false;
        else if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
            ok = copy_tree(s, d);
        else
            ok = CopyFileW(s, d, FALSE) != 0;
        free(s);
        free(d);
    } while (ok && FindNextFileW(h, &fd));
    FindClose(h);
    return ok;
}

static void
remove_tree(const wchar_t *p)
{
    DWORD a = GetFileAttributesW(p);
    if (a == INVALID_FILE_ATTRIBUTES)
        return;
    if (!(a & FILE_ATTRIBUTE_DIRECTORY)) {
        SetFileAttributesW(p, FILE_ATTRIBUTE_NORMAL);
        DeleteFileW(p);
        return;
    }
    wchar_t *pat = join(p, L"*");
    WIN32_FIND_DATAW fd;
    HANDLE h = pat ? FindFirstFileW(pat, &fd) : INVALID_HANDLE_VALUE;
    free(pat);
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0)
                continue;
            wchar_t *c = join(p, fd.cFileName);
            if (c)
                remove_tree(c);
            free(c);
        } while (FindNextFileW(h, &fd));
        FindClose(h);
    }
    RemoveDirectoryW(p);
}

static bool
write_file(const wchar_t *dir, const wchar_t *name, const char *text)
{
    wchar_t *p = join(dir, name);
    HANDLE h =
        p ? CreateFileW(p, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL) : INVALID_HANDLE_VALUE;
    free(p);
    if (h == INVALID_HANDLE_VALUE)
        return false;
    DWORD n = 0;
    BOOL ok = WriteFile(h, text, (DWORD)strlen(text), &n, NULL);
    CloseHandle(h);
    return ok && n == strlen(text);
}

/* A LayerData document as HCS reads it: SchemaVersion 2.x, Layers of {Id, Path}. */
static bool
layer_data_valid(PCWSTR doc)
{
    char *t = narrow(doc);
    json_object *o = t ? json_tokener_parse(t) : NULL, *v, *sv, *layers;
    free(t);
    bool ok = o && json_object_is_type(o, json_type_object) &&
              json_object_object_get_ex(o, "SchemaVersion", &sv) &&
              json_object_object_get_ex(sv, "Major", &v) && json_object_get_int(v) == 2 &&
              json_object_object_get_ex(o, "Layers", &layers) &&
              json_object_is_type(layers, json_type_array);
    for (size_t i = 0; ok && i < json_object_array_length(layers); i++) {
        json_object *l = json_object_array_get_idx(layers, i), *id, *path;
        ok = json_object_object_get_ex(l, "Id", &id) && json_object_is_type(id, json_type_string) &&
             json_object_get_string_len(id) == 36 && json_object_object_get_ex(l, "Path", &path) &&
             json_object_is_type(path, json_type_string) && json_object_get_string_len(path) > 0;
    }
    json_object_put(o);
    return ok;
}

/* The "Type" of OsLayerOptions, or "" when the document is not valid. */
static void
os_layer_type(PCWSTR doc, char out[16])
{
    out[0] = '\0';
    char *t = narrow(doc);
    json_object *o = t ? json_tokener_parse(t) : NULL, *v;
    free(t);
    if (o && json_object_object_get_ex(o, "Type", &v) && json_object_is_type(v, json_type_string))
        snprintf(out, 16, "%s", json_object_get_string(v));
    json_object_put(o);
}

HRESULT WINAPI
HcsImportLayer(PCWSTR layerPath, PCWSTR sourceFolderPath, PCWSTR layerData)
{
    record("HcsImportLayer", layerPath, layerData);
    if (failing("HcsImportLayer"))
        return HCS_E_INVALID_LAYER;
    if (!layerPath || !sourceFolderPath || !layer_data_valid(layerData))
        return E_INVALIDARG;
    wchar_t *files = join(sourceFolderPath, L"Files");
    bool has_files = files && is_dir(files);
    free(files);
    if (!has_files)
        return HCS_E_INVALID_LAYER;
    if (!copy_tree(sourceFolderPath, layerPath)) {
        HRESULT hr = HRESULT_FROM_WIN32(GetLastError());
        return FAILED(hr) ? hr : E_FAIL;
    }
    return S_OK;
}

/* Is the disk h is open on attached (the virtdisk double's mark beside it)? */
static bool
attached(HANDLE h)
{
    wchar_t path[MAX_PATH * 2];
    DWORD n = GetFinalPathNameByHandleW(h, path, MAX_PATH * 2 - 20, FILE_NAME_NORMALIZED);
    if (n == 0 || n >= MAX_PATH * 2 - 20)
        return false;
    wcscat(path, L".double-attached");
    return exists(path);
}

HRESULT WINAPI
HcsSetupBaseOSLayer(PCWSTR layerPath, HANDLE vhdHandle, PCWSTR options)
{
    record("HcsSetupBaseOSLayer", layerPath, options);
    if (failing("HcsSetupBaseOSLayer"))
        return E_FAIL;
    char type[16];
    os_layer_type(options, type);
    if (!layerPath)
        return E_INVALIDARG;
    wchar_t *files = join(layerPath, L"Files"), *hives = join(layerPath, L"Hives"),
            *layout = join(layerPath, L"layout");
    HRESULT hr = S_OK;
    if (!files || !hives || !layout)
        hr = E_OUTOFMEMORY;
    else if (!is_dir(files))
        hr = HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    else if (strcmp(type, "Vm") == 0)
        hr = !vhdHandle || vhdHandle == INVALID_HANDLE_VALUE ? E_INVALIDARG
             : attached(vhdHandle)                           ? S_OK
                                                             : HRESULT_FROM_WIN32(ERROR_NOT_READY);
    else if (strcmp(type, "Container") != 0)
        hr = E_INVALIDARG;
    else if (exists(hives) || exists(layout))
        hr = HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS);
    else if (!CreateDirectoryW(hives, NULL) || !write_file(layerPath, L"layout", "double\n"))
        hr = E_FAIL;
    free(files);
    free(hives);
    free(layout);
    return hr;
}

HRESULT WINAPI
HcsDestroyLayer(PCWSTR layerPath)
{
    record("HcsDestroyLayer", layerPath, NULL);
    if (failing("HcsDestroyLayer"))
        return E_FAIL;
    if (!layerPath)
        return E_INVALIDARG;
    remove_tree(layerPath);
    return exists(layerPath) ? HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED) : S_OK;
}

/* The volume directory that stands in for the one on the VHD h is open on. */
static wchar_t *
volume_of(HANDLE h)
{
    wchar_t path[MAX_PATH * 2];
    DWORD n = GetFinalPathNameByHandleW(h, path, MAX_PATH * 2 - 16, FILE_NAME_NORMALIZED);
    if (n == 0 || n >= MAX_PATH * 2 - 16)
        return NULL;
    wcscat(path, L".volume\\");
    return _wcsdup(path);
}

/*
 * A volume as HCS names one, \\?\Volume{GUID}\: the GUID is an FNV hash
 * of the stand-in directory's path, and %TEMP%\berth-storage-double\<GUID>
 * holds that path, so that any process finds the directory again.
 */
static wchar_t *
volume_name(const wchar_t *dir)
{
    unsigned long long h = 1469598103934665603ull;
    for (const wchar_t *c = dir; *c; c++)
        h = (h ^ (unsigned long long)towlower(*c)) * 1099511628211ull;
    wchar_t guid[40], map[MAX_PATH + 80], tmp[MAX_PATH];
    swprintf(guid, 40, L"%08lx-%04x-%04x-%04x-%012llx", (unsigned long)(h >> 32),
             (unsigned)(h >> 16) & 0xffff, (unsigned)h & 0xffff, 0x8000u | ((unsigned)h & 0xfff),
             h & 0xffffffffffffull);
    GetTempPathW(MAX_PATH, tmp);
    swprintf(map, MAX_PATH + 80, L"%lsberth-storage-double", tmp);
    CreateDirectoryW(map, NULL);
    swprintf(map, MAX_PATH + 80, L"%lsberth-storage-double\\%ls", tmp, guid);
    HANDLE f = CreateFileW(map, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL);
    if (f != INVALID_HANDLE_VALUE) {
        DWORD n;
        WriteFile(f, dir, (DWORD)(wcslen(dir) * sizeof(wchar_t)), &n, NULL);
        CloseHandle(f);
    }
    wchar_t *out = malloc(64 * sizeof(wchar_t));
    if (out)
        swprintf(out, 64, L"\\\\?\\Volume{%ls}\\", guid);
    return out;
}

/* The stand-in directory of a \\?\Volume{GUID}\ path (caller frees); other paths as they are. */
static wchar_t *
volume_dir(PCWSTR path)
{
    if (!path)
        return NULL;
    if (wcsncmp(path, L"\\\\?\\Volume{", 11) != 0 || wcslen(path) < 48)
        return _wcsdup(path);
    wchar_t guid[40], map[MAX_PATH + 80], tmp[MAX_PATH];
    wcsncpy(guid, path + 11, 36);
    guid[36] = L'\0';
    GetTempPathW(MAX_PATH, tmp);
    swprintf(map, MAX_PATH + 80, L"%lsberth-storage-double\\%ls", tmp, guid);
    HANDLE f = CreateFileW(map, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, 0, NULL);
    if (f == INVALID_HANDLE_VALUE)
        return NULL;
    wchar_t *dir = calloc(MAX_PATH * 2, sizeof(wchar_t));
    DWORD n = 0;
    if (dir && !ReadFile(f, dir, (MAX_PATH * 2 - 1) * sizeof(wchar_t), &n, NULL)) {
        free(dir);
        dir = NULL;
    }
    CloseHandle(f);
    return dir;
}

HRESULT WINAPI
HcsFormatWritableLayerVhd(HANDLE vhdHandle)
{
    record("HcsFormatWritableLayerVhd", NULL, NULL);
    if (failing("HcsFormatWritableLayerVhd"))
        return E_FAIL;
    if (!vhdHandle || vhdHandle == INVALID_HANDLE_VALUE)
        return E_INVALIDARG;
    OVERLAPPED at = {0};
    DWORD n = 0;
    if (!WriteFile(vhdHandle, FORMATTED_MARK, sizeof(FORMATTED_MARK) - 1, &n, &at))
        return HRESULT_FROM_WIN32(GetLastError());
    return S_OK;
}

HRESULT WINAPI
HcsGetLayerVhdMountPath(HANDLE vhdHandle, PWSTR *mountPath)
{
    record("HcsGetLayerVhdMountPath", NULL, NULL);
    if (failing("HcsGetLayerVhdMountPath"))
        return E_FAIL;
    if (!vhdHandle || vhdHandle == INVALID_HANDLE_VALUE || !mountPath)
        return E_INVALIDARG;
    char mark[sizeof(FORMATTED_MARK)] = "";
    OVERLAPPED at = {0};
    DWORD n = 0;
    if (!ReadFile(vhdHandle, mark, sizeof(mark) - 1, &n, &at) ||
        memcmp(mark, FORMATTED_MARK, sizeof(mark) - 1) != 0)
        return HRESULT_FROM_WIN32(ERROR_UNRECOGNIZED_VOLUME);
    wchar_t *vol = volume_of(vhdHandle);
    if (!vol)
        return E_FAIL;
    if (!CreateDirectoryW(vol, NULL) && GetLastError() != ERROR_ALREADY_EXISTS) {
        free(vol);
        return HRESULT_FROM_WIN32(GetLastError());
    }
    wchar_t *name = volume_name(vol);
    free(vol);
    if (!name)
        return E_OUTOFMEMORY;
    size_t len = (wcslen(name) + 1) * sizeof(wchar_t);
    *mountPath = LocalAlloc(LMEM_FIXED, len);
    if (*mountPath)
        memcpy(*mountPath, name, len);
    free(name);
    return *mountPath ? S_OK : E_OUTOFMEMORY;
}

HRESULT WINAPI
HcsInitializeWritableLayer(PCWSTR writableLayerPath, PCWSTR layerData, PCWSTR options)
{
    (void)options;
    record("HcsInitializeWritableLayer", writableLayerPath, layerData);
    if (failing("HcsInitializeWritableLayer"))
        return E_FAIL;
    if (!writableLayerPath || !layer_data_valid(layerData))
        return E_INVALIDARG;
    wchar_t *dir = volume_dir(writableLayerPath);
    HRESULT hr = !dir || !is_dir(dir) ? HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND)
                 : write_file(dir, L".double-initialized", "1\n") ? S_OK
                                                                  : E_FAIL;
    free(dir);
    return hr;
}

/* A filter's mark on the volume: the LayerData it was attached with;
 * attaching twice is ERROR_ALREADY_EXISTS. */
static HRESULT
mark_attach(PCWSTR volume, const wchar_t *name, PCWSTR layerData)
{
    wchar_t *dir = volume_dir(volume);
    if (!dir || !is_dir(dir)) {
        free(dir);
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    }
    wchar_t *mark = join(dir, name);
    bool attached = mark && exists(mark);
    free(mark);
    if (attached) {
        free(dir);
        return HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS);
    }
    char *d = narrow(layerData);
    bool ok = d && write_file(dir, name, d);
    free(d);
    free(dir);
    return ok ? S_OK : E_FAIL;
}

/* The mark removed; none is ERROR_NOT_FOUND. */
static HRESULT
mark_detach(PCWSTR volume, const wchar_t *name)
{
    wchar_t *dir = volume_dir(volume);
    wchar_t *mark = dir ? join(dir, name) : NULL;
    free(dir);
    BOOL ok = mark && DeleteFileW(mark);
    DWORD e = GetLastError();
    free(mark);
    if (!ok)
        return e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND
                   ? HRESULT_FROM_WIN32(ERROR_NOT_FOUND)
                   : HRESULT_FROM_WIN32(e);
    return S_OK;
}

HRESULT WINAPI
HcsAttachLayerStorageFilter(PCWSTR layerPath, PCWSTR layerData)
{
    record("HcsAttachLayerStorageFilter", layerPath, layerData);
    if (failing("HcsAttachLayerStorageFilter"))
        return E_FAIL;
    if (!layerPath || !layer_data_valid(layerData))
        return E_INVALIDARG;
    return mark_attach(layerPath, L".double-filter", layerData);
}

HRESULT WINAPI
HcsDetachLayerStorageFilter(PCWSTR layerPath)
{
    record("HcsDetachLayerStorageFilter", layerPath, NULL);
    if (failing("HcsDetachLayerStorageFilter"))
        return E_FAIL;
    if (!layerPath)
        return E_INVALIDARG;
    return mark_detach(layerPath, L".double-filter");
}

/* The LayerData's FilterType is UnionFS and, when want_layer, its one layer is a Files folder. */
static bool
union_data_valid(PCWSTR doc, bool want_layer)
{
    char *t = narrow(doc);
    json_object *o = t ? json_tokener_parse(t) : NULL, *ft, *layers, *path;
    free(t);
    bool ok = o && json_object_object_get_ex(o, "FilterType", &ft) &&
              strcmp(json_object_get_string(ft), "UnionFS") == 0;
    if (ok && want_layer) {
        ok = json_object_object_get_ex(o, "Layers", &layers) &&
             json_object_is_type(layers, json_type_array) &&
             json_object_array_length(layers) == 1 &&
             json_object_object_get_ex(json_object_array_get_idx(layers, 0), "Path", &path);
        const char *p = ok ? json_object_get_string(path) : "";
        size_t n = strlen(p);
        ok = ok && n > 6 && strcmp(p + n - 6, "\\Files") == 0;
    }
    json_object_put(o);
    return ok;
}

/* Windows builds with CimFS for containers export these two; mingw-w64's
 * header does not declare them. */
HRESULT WINAPI HcsAttachOverlayFilter(PCWSTR volumePath, PCWSTR layerData);
HRESULT WINAPI HcsDetachOverlayFilter(PCWSTR volumePath, PCWSTR layerData);

HRESULT WINAPI
HcsAttachOverlayFilter(PCWSTR volumePath, PCWSTR layerData)
{
    record("HcsAttachOverlayFilter", volumePath, layerData);
    if (failing("HcsAttachOverlayFilter"))
        return E_FAIL;
    if (!volumePath || !layer_data_valid(layerData) || !union_data_valid(layerData, true))
        return E_INVALIDARG;
    return mark_attach(volumePath, L".double-overlay", layerData);
}

HRESULT WINAPI
HcsDetachOverlayFilter(PCWSTR volumePath, PCWSTR layerData)
{
    record("HcsDetachOverlayFilter", volumePath, layerData);
    if (failing("HcsDetachOverlayFilter"))
        return E_FAIL;
    if (!volumePath || !union_data_valid(layerData, false))
        return E_INVALIDARG;
    return mark_detach(volumePath, L".double-overlay");
}

/* ---- exported as the real DLL does, never called by berth ---- */

HRESULT WINAPI
HcsExportLayer(PCWSTR layerPath, PCWSTR exportFolderPath, PCWSTR layerData, PCWSTR options)
{
    (void)exportFolderPath, (void)options;
    record("HcsExportLayer", layerPath, layerData);
    return E_NOTIMPL;
}

HRESULT WINAPI
HcsExportLegacyWritableLayer(PCWSTR writableLayerMountPath, PCWSTR writableLayerFolderPath,
                             PCWSTR exportFolderPath, PCWSTR layerData)
{
    (void)writableLayerFolderPath, (void)exportFolderPath;
    record("HcsExportLegacyWritableLayer", writableLayerMountPath, layerData);
    return E_NOTIMPL;
}

HRESULT WINAPI
HcsInitializeLegacyWritableLayer(PCWSTR writableLayerMountPath, PCWSTR writableLayerFolderPath,
                                 PCWSTR layerData, PCWSTR options)
{
    (void)writableLayerFolderPath, (void)options;
    record("HcsInitializeLegacyWritableLayer", writableLayerMountPath, layerData);
    return E_NOTIMPL;
}

HRESULT WINAPI
HcsSetupBaseOSVolume(PCWSTR layerPath, PCWSTR volumePath, PCWSTR options)
{
    (void)volumePath;
    record("HcsSetupBaseOSVolume", layerPath, options);
    return E_NOTIMPL;
}
