/*
 * The run-time DLL loader of common/windll.h. Windows only; any thread.
 */
#include "common/windll.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/winutil.h"

/* Loads path (UTF-8, '/' or '\'), its own directory searched for its imports. */
static HMODULE
load_path(const char *path, DWORD *error)
{
    char *p = strdup(path);
    for (char *c = p; c && *c; c++)
        if (*c == '/')
            *c = '\\';
    wchar_t *w = p ? win_wide(p) : NULL;
    free(p);
    HMODULE m = w ? LoadLibraryExW(w, NULL, LOAD_WITH_ALTERED_SEARCH_PATH) : NULL;
    *error = m ? 0 : w ? GetLastError() : ERROR_NOT_ENOUGH_MEMORY;
    free(w);
    return m;
}

int
windll_open(const struct windll_spec *spec, const char *dll_path, void *table, HMODULE *out,
            struct err *err)
{
#ifdef BERTH_TEST_HOOKS
    if (!dll_path && spec->test_env) {
        const char *env = getenv(spec->test_env);
        if (env && *env)
            dll_path = env;
    }
#else
    if (dll_path)
        return err_set(err, EINVAL, "%s: a path (%.200s) is honoured in test builds only",
                       spec->name, dll_path);
#endif
    DWORD error = 0;
    HMODULE m;
    if (dll_path) {
        m = load_path(dll_path, &error);
    } else {
        m = LoadLibraryExW(spec->system_name, NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
        error = m ? 0 : GetLastError();
    }
    const char *at = dll_path ? " at " : "", *where = dll_path ? dll_path : "";
    if (!m)
        return err_set(err, ERR_UNAVAILABLE, "%s%s%s cannot be loaded (error %lu)%s%s", spec->name,
                       at, where, (unsigned long)error, spec->why_absent ? ": " : "",
                       spec->why_absent ? spec->why_absent : "");
    for (size_t i = 0; i < spec->nexports; i++) {
        FARPROC f = GetProcAddress(m, spec->exports[i].name);
        if (!f) {
            FreeLibrary(m);
            return err_set(err, ERR_UNAVAILABLE, "%s%s%s has no %s", spec->name, at, where,
                           spec->exports[i].name);
        }
        memcpy((char *)table + spec->exports[i].offset, &f, sizeof(f));
    }
    *out = m;
    return 0;
}

int
windll_table_new(const struct windll_spec *spec, const char *dll_path, size_t size,
                 size_t module_offset, void **out, struct err *err)
{
    char *table = calloc(1, size);
    if (!table)
        return err_set(err, ENOMEM, "%s: out of memory", spec->name);
    HMODULE m = NULL;
    int ret = windll_open(spec, dll_path, table, &m, err);
    if (ret < 0) {
        free(table);
        return ret;
    }
    memcpy(table + module_offset, &m, sizeof(m));
    *out = table;
    return 0;
}

void
windll_table_free(void *table, size_t module_offset)
{
    if (!table)
        return;
    HMODULE m;
    memcpy(&m, (char *)table + module_offset, sizeof(m));
    FreeLibrary(m);
    free(table);
}
