/*
 * computestorage.dll through LoadLibraryExW and GetProcAddress
 * (store/wcstorage.h): one wrapper per call, UTF-8 in, an errno and a
 * message naming the call out. Windows only; every call blocks until HCS
 * answers: pool threads (or start-up) only.
 */
#include "store/wcstorage.h"

#include <windows.h>

#include <computestorage.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/windll.h"
#include "common/winutil.h"

#define WCS_FUNCS(X)                                                                               \
    X(HcsImportLayer)                                                                              \
    X(HcsDestroyLayer)                                                                             \
    X(HcsSetupBaseOSLayer)                                                                         \
    X(HcsFormatWritableLayerVhd)                                                                   \
    X(HcsGetLayerVhdMountPath)                                                                     \
    X(HcsInitializeWritableLayer)                                                                  \
    X(HcsAttachLayerStorageFilter)                                                                 \
    X(HcsDetachLayerStorageFilter)

/* The UnionFS filter's pair, which mingw-w64's computestorage.h does not
 * declare (hcsshim's computestorage/storage.go has them). */
typedef HRESULT(WINAPI *wcs_overlay_fn)(PCWSTR volumePath, PCWSTR layerData);

struct wcs_api {
    HMODULE dll;
#define WCS_FIELD(name) __typeof__(&name) name;
    WCS_FUNCS(WCS_FIELD)
#undef WCS_FIELD
    wcs_overlay_fn HcsAttachOverlayFilter; /* NULL where the build lacks them */
    wcs_overlay_fn HcsDetachOverlayFilter;
};

static const struct windll_export wcs_exports[] = {
#define WCS_EXPORT(name) {#name, offsetof(struct wcs_api, name)},
    WCS_FUNCS(WCS_EXPORT)
#undef WCS_EXPORT
};

static char *
narrow(const wchar_t *w)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    char *s = n > 0 ? malloc((size_t)n) : NULL;
    if (s && WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n) {
        free(s);
        s = NULL;
    }
    return s;
}

/* err for a failed call: "<fn> <arg>: <system text> (0x...)". */
static int
fail(struct err *err, HRESULT hr, const char *fn, const char *arg)
{
    char text[256] = "";
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                             (DWORD)hr, 0, text, sizeof(text), NULL);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == '.'))
        text[--n] = '\0';
    return err_set(err, wcs_hresult_errno((uint32_t)hr), "%s %.300s: %s (0x%08lx)", fn,
                   arg ? arg : "", n ? text : "failed", (unsigned long)(uint32_t)hr);
}

int
wcs_api_open(const char *dll_path, struct wcs_api **out, struct err *err)
{
    static const struct windll_spec spec = {
        .system_name = L"computestorage.dll",
        .name = "computestorage.dll",
        .test_env = "BERTH_TEST_HCS_STORAGE_DLL",
        .why_absent = "this Windows has no Host Compute Service layer API (Windows Server 2019 or "
                      "Windows 10 1809 "
                      "and later, with the Containers feature)",
        .exports = wcs_exports,
        .nexports = sizeof(wcs_exports) / sizeof(wcs_exports[0]),
    };
    void *table = NULL;
    int ret = windll_table_new(&spec, dll_path, sizeof(struct wcs_api),
                               offsetof(struct wcs_api, dll), &table, err);
    if (ret < 0)
        return ret;
    struct wcs_api *api = table;
    api->HcsAttachOverlayFilter =
        (wcs_overlay_fn)(void (*)(void))GetProcAddress(api->dll, "HcsAttachOverlayFilter");
    api->HcsDetachOverlayFilter =
        (wcs_overlay_fn)(void (*)(void))GetProcAddress(api->dll, "HcsDetachOverlayFilter");
    *out = api;
    return 0;
}

void
wcs_api_free(struct wcs_api *api)
{
    windll_table_free(api, offsetof(struct wcs_api, dll));
}

/* Up to three UTF-8 strings as wide ones (NULL stays NULL); false on bad UTF-8. */
static bool
widen(const char *a, const char *b, const char *c, wchar_t *w[3])
{
    const char *s[3] = {a, b, c};
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        w[i] = s[i] ? win_wide(s[i]) : NULL;
        ok = ok && (!s[i] || w[i]);
    }
    return ok;
}

static void
wfree(wchar_t *w[3])
{
    for (int i = 0; i < 3; i++)
        free(w[i]);
}

#define WIDEN_OR_FAIL(fn, a, b, c)                                                                 \
    wchar_t *w[3];                                                                                 \
    if (!widen(a, b, c, w)) {                                                                      \
        wfree(w);                                                                                  \
        return err_set(err, EINVAL, "%s %.300s: not UTF-8", fn, (a) ? (a) : "");                   \
    }

int
wcs_import_layer(struct wcs_api *api, const char *layer, const char *source, const char *layer_data,
                 struct err *err)
{
    WIDEN_OR_FAIL("HcsImportLayer", layer, source, layer_data);
    HRESULT hr = api->HcsImportLayer(w[0], w[1], w[2]);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, "HcsImportLayer", layer) : 0;
}

int
wcs_setup_base_layer(struct wcs_api *api, const char *layer, void *vhd, bool vm, struct err *err)
{
    WIDEN_OR_FAIL("HcsSetupBaseOSLayer", layer, wcs_os_layer_options(vm), NULL);
    HRESULT hr = api->HcsSetupBaseOSLayer(w[0], (HANDLE)vhd, w[1]);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, "HcsSetupBaseOSLayer", layer) : 0;
}

int
wcs_destroy_layer(struct wcs_api *api, const char *layer, struct err *err)
{
    WIDEN_OR_FAIL("HcsDestroyLayer", layer, NULL, NULL);
    HRESULT hr = api->HcsDestroyLayer(w[0]);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, "HcsDestroyLayer", layer) : 0;
}

int
wcs_format_vhd(struct wcs_api *api, void *vhd, struct err *err)
{
    HRESULT hr = api->HcsFormatWritableLayerVhd((HANDLE)vhd);
    return FAILED(hr) ? fail(err, hr, "HcsFormatWritableLayerVhd", "") : 0;
}

int
wcs_vhd_mount_path(struct wcs_api *api, void *vhd, char **out, struct err *err)
{
    PWSTR path = NULL;
    HRESULT hr = api->HcsGetLayerVhdMountPath((HANDLE)vhd, &path);
    if (FAILED(hr))
        return fail(err, hr, "HcsGetLayerVhdMountPath", "");
    *out = path ? narrow(path) : NULL;
    LocalFree(path);
    return *out ? 0 : err_set(err, ENOMEM, "HcsGetLayerVhdMountPath: out of memory");
}

int
wcs_initialize_writable(struct wcs_api *api, const char *volume, const char *layer_data,
                        struct err *err)
{
    WIDEN_OR_FAIL("HcsInitializeWritableLayer", volume, layer_data, NULL);
    HRESULT hr = api->HcsInitializeWritableLayer(w[0], w[1], NULL);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, "HcsInitializeWritableLayer", volume) : 0;
}

int
wcs_attach_filter(struct wcs_api *api, const char *volume, const char *layer_data, struct err *err)
{
    WIDEN_OR_FAIL("HcsAttachLayerStorageFilter", volume, layer_data, NULL);
    HRESULT hr = api->HcsAttachLayerStorageFilter(w[0], w[1]);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, "HcsAttachLayerStorageFilter", volume) : 0;
}

int
wcs_detach_filter(struct wcs_api *api, const char *volume, struct err *err)
{
    WIDEN_OR_FAIL("HcsDetachLayerStorageFilter", volume, NULL, NULL);
    HRESULT hr = api->HcsDetachLayerStorageFilter(w[0]);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, "HcsDetachLayerStorageFilter", volume) : 0;
}

/* One of the overlay pair, ERR_UNAVAILABLE where computestorage.dll lacks it. */
static int
overlay_call(wcs_overlay_fn f, const char *fn, const char *volume, const char *layer_data,
             struct err *err)
{
    if (!f)
        return err_set(err, ERR_UNAVAILABLE,
                       "%s %.300s: computestorage.dll has no %s (a Windows build without CimFS "
                       "for containers)",
                       fn, volume, fn);
    WIDEN_OR_FAIL(fn, volume, layer_data, NULL);
    HRESULT hr = f(w[0], w[1]);
    wfree(w);
    return FAILED(hr) ? fail(err, hr, fn, volume) : 0;
}

int
wcs_attach_overlay(struct wcs_api *api, const char *volume, const char *layer_data, struct err *err)
{
    return overlay_call(api->HcsAttachOverlayFilter, "HcsAttachOverlayFilter", volume, layer_data,
                        err);
}

int
wcs_detach_overlay(struct wcs_api *api, const char *volume, const char *layer_data, struct err *err)
{
    return overlay_call(api->HcsDetachOverlayFilter, "HcsDetachOverlayFilter", volume, layer_data,
                        err);
}
