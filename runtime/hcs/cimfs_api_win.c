/*
 * cimfs.dll through LoadLibraryExW and GetProcAddress (cimfs_api.h), and
 * the process's one loaded copy. Windows only; any thread.
 */
#include "runtime/hcs/cimfs_api.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static wchar_t *
wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    wchar_t *w = n > 0 ? malloc((size_t)n * sizeof(wchar_t)) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        w = NULL;
    }
    return w;
}

static const struct {
    const char *name;
    size_t offset;
} cimfs_exports[] = {
#define CIMFS_EXPORT(ret, name, args) {#name, offsetof(struct cimfs_api, name)},
    CIMFS_FUNCS(CIMFS_EXPORT)
#undef CIMFS_EXPORT
};

int
cimfs_api_open(const char *dll_path, struct cimfs_api **out, struct err *err)
{
#ifdef BERTH_TEST_HOOKS
    if (!dll_path) {
        const char *env = getenv("BERTH_TEST_CIMFS_DLL");
        if (env && *env)
            dll_path = env;
    }
#else
    if (dll_path)
        return err_set(err, EINVAL, "cimfs.dll: a path (%.200s) is honoured in test builds only",
                       dll_path);
#endif
    struct cimfs_api *api = calloc(1, sizeof(*api));
    if (!api)
        return err_set(err, ENOMEM, "cimfs.dll: out of memory");
    if (dll_path) {
        char *p = strdup(dll_path);
        for (char *c = p; c && *c; c++)
            if (*c == '/')
                *c = '\\';
        wchar_t *w = p ? wide(p) : NULL;
        free(p);
        api->dll = w ? LoadLibraryExW(w, NULL, LOAD_WITH_ALTERED_SEARCH_PATH) : NULL;
        free(w);
    } else {
        api->dll = LoadLibraryExW(L"cimfs.dll", NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
    }
    if (!api->dll) {
        DWORD e = GetLastError();
        free(api);
        return err_set(err, ERR_UNAVAILABLE,
                       "cimfs.dll%s%s cannot be loaded (error %lu): this Windows has no CimFS "
                       "(Windows 10 2004 and later have it)",
                       dll_path ? " at " : "", dll_path ? dll_path : "", (unsigned long)e);
    }
    for (size_t i = 0; i < sizeof(cimfs_exports) / sizeof(cimfs_exports[0]); i++) {
        FARPROC f = GetProcAddress(api->dll, cimfs_exports[i].name);
        if (!f) {
            FreeLibrary(api->dll);
            free(api);
            return err_set(err, ERR_UNAVAILABLE, "cimfs.dll%s%s has no %s", dll_path ? " at " : "",
                           dll_path ? dll_path : "", cimfs_exports[i].name);
        }
        memcpy((char *)api + cimfs_exports[i].offset, &f, sizeof(f));
    }
    *out = api;
    return 0;
}

void
cimfs_api_free(struct cimfs_api *api)
{
    if (!api)
        return;
    FreeLibrary(api->dll);
    free(api);
}

static INIT_ONCE default_once = INIT_ONCE_STATIC_INIT;
static struct cimfs_api *default_api;
static struct err default_err;

static BOOL CALLBACK
default_load(PINIT_ONCE once, PVOID param, PVOID *ctx)
{
    (void)once, (void)param, (void)ctx;
    if (cimfs_api_open(NULL, &default_api, &default_err) < 0)
        default_api = NULL;
    return TRUE;
}

int
cimfs_api_default(struct cimfs_api **out, struct err *err)
{
    InitOnceExecuteOnce(&default_once, default_load, NULL, NULL);
    if (!default_api)
        return err_set(err, default_err.code, "%s", default_err.msg);
    *out = default_api;
    return 0;
}
