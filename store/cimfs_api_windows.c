/*
 * cimfs.dll through LoadLibraryExW and GetProcAddress (cimfs_api.h), and
 * the process's one loaded copy. Windows only; any thread.
 */
#include "store/cimfs_api.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/windll.h"
#include "store/wcstorage.h"

static const struct windll_export cimfs_exports[] = {
#define CIMFS_EXPORT(ret, name, args) {#name, offsetof(struct cimfs_api, name)},
    CIMFS_FUNCS(CIMFS_EXPORT)
#undef CIMFS_EXPORT
};

int
cimfs_api_open(const char *dll_path, struct cimfs_api **out, struct err *err)
{
    static const struct windll_spec spec = {
        .system_name = L"cimfs.dll",
        .name = "cimfs.dll",
        .test_env = "BERTH_TEST_CIMFS_DLL",
        .why_absent = "this Windows has no CimFS (Windows 10 2004 and later have it)",
        .exports = cimfs_exports,
        .nexports = sizeof(cimfs_exports) / sizeof(cimfs_exports[0]),
    };
    void *table = NULL;
    int ret = windll_table_new(&spec, dll_path, sizeof(struct cimfs_api),
                               offsetof(struct cimfs_api, dll), &table, err);
    if (ret < 0)
        return ret;
    struct cimfs_api *api = table;
    /* The block exports are optional: looked up one by one, all or none. */
#define CIMFS_BLOCK_LOOKUP(rtype, fname, args)                                                     \
    if (!api->block_why[0] &&                                                                      \
        !(api->fname = (rtype(WINAPI *) args)(void (*)(void))GetProcAddress(api->dll, #fname)))    \
        snprintf(api->block_why, sizeof(api->block_why),                                           \
                 "cimfs.dll has no %s (block and merged CIMs need a later Windows build)",         \
                 #fname);
    CIMFS_BLOCK_FUNCS(CIMFS_BLOCK_LOOKUP)
#undef CIMFS_BLOCK_LOOKUP
    if (api->block_why[0]) {
#define CIMFS_BLOCK_CLEAR(rtype, fname, args) api->fname = NULL;
        CIMFS_BLOCK_FUNCS(CIMFS_BLOCK_CLEAR)
#undef CIMFS_BLOCK_CLEAR
    }
    *out = api;
    return 0;
}

int
cimfs_api_block(const struct cimfs_api *api, struct err *err)
{
    if (!api)
        return err ? err_set(err, ERR_UNAVAILABLE, "cimfs.dll is not loaded") : -ERR_UNAVAILABLE;
    if (!api->block_why[0])
        return 0;
    return err ? err_set(err, ERR_UNAVAILABLE, "%s", api->block_why) : -ERR_UNAVAILABLE;
}

void
cimfs_api_free(struct cimfs_api *api)
{
    windll_table_free(api, offsetof(struct cimfs_api, dll));
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

int
cimfs_err_set(struct err *err, HRESULT hr, const char *fmt, ...)
{
    char what[200], text[200] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                             (DWORD)hr, 0, text, sizeof(text), NULL);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == '.'))
        text[--n] = '\0';
    return err_set(err, wcs_hresult_errno((uint32_t)hr), "%s: %s (0x%08lx)", what,
                   n ? text : "failed", (unsigned long)(uint32_t)hr);
}
