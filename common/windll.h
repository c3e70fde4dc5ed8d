/*
 * Windows DLLs loaded at run time (computecore, computenetwork,
 * computestorage, virtdisk, cimfs): the system's from System32 only, or,
 * in test builds, a test double's by path, and every function a table
 * needs looked up by name. Windows only; any thread.
 */
#ifndef BERTH_COMMON_WINDLL_H
#define BERTH_COMMON_WINDLL_H

#ifndef _WIN32
#error "common/windll.h is for the Windows build only"
#endif

#include <windows.h>

#include <stddef.h>

#include "common/err.h"

/* A function the DLL must export, and where its address goes in the table. */
struct windll_export {
    const char *name;
    size_t offset;
};

/* What to load. */
struct windll_spec {
    const wchar_t *system_name; /* L"cimfs.dll": looked for in System32 only */
    const char *name;           /* the same for messages */
    const char *test_env;       /* test builds: the variable naming a double to load instead */
    const char *why_absent; /* appended to "cannot be loaded": what such a Windows lacks, or NULL */
    const struct windll_export *exports;
    size_t nexports;
};

/*
 * Loads the DLL of spec and fills table (the struct the exports' offsets
 * are in) with their addresses; *out the module, for FreeLibrary.
 * dll_path (NULL: the system's, or in test builds the one spec->test_env
 * names) is loaded with its own directory searched for its imports; a
 * build without BERTH_TEST_HOOKS refuses it (EINVAL). A DLL that does not
 * load, or lacks an export, is ERR_UNAVAILABLE naming it.
 */
int windll_open(const struct windll_spec *spec, const char *dll_path, void *table, HMODULE *out,
                struct err *err);

/*
 * windll_open into a new zeroed table of size bytes whose HMODULE is at
 * module_offset: *out, for windll_table_free. Nothing is left on an error
 * (ENOMEM, or windll_open's).
 */
int windll_table_new(const struct windll_spec *spec, const char *dll_path, size_t size,
                     size_t module_offset, void **out, struct err *err);

/* Frees a table of windll_table_new and its DLL; NULL is nothing. */
void windll_table_free(void *table, size_t module_offset);

#endif
