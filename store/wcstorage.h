/*
 * computestorage.dll, the Host Compute Service's layer API, for the
 * Windows layer code of store/ (the WCIFS import of an image's layer
 * tars, a container's scratch VHDX and its layer filter). It lives in
 * store/, beside its only callers, because store/ may not depend on
 * runtime/ (STYLE.md); it is loaded at run time as runtime/hcs loads
 * computecore.dll: an .exe that imported it would not start where the
 * Containers feature is absent, Wine included.
 *
 * The documents (LayerData, OsLayerOptions) are built here by hand, as
 * store/ does not use json-c; they are portable and tested on Linux
 * (wcstorage_doc.c). The calls (wcstorage_windows.c, Windows only) take
 * UTF-8, block until HCS answers (pool threads only), and turn a failing
 * HRESULT into an errno with a message naming the call, its path, the
 * system's text and the code.
 *
 * Test builds (BERTH_TEST_HOOKS) can load the TEST DOUBLE in
 * tests/doubles/computestorage/: wcs_api_open() with a path, or with NULL
 * and BERTH_TEST_HCS_STORAGE_DLL set to one. Other builds load only
 * %SystemRoot%\System32\computestorage.dll and refuse a path.
 */
#ifndef BERTH_STORE_WCSTORAGE_H
#define BERTH_STORE_WCSTORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A layer as LayerData names it: its GUID and its folder (a Windows path). */
struct wcs_layer {
    const char *id;
    const char *path;
};

/*
 * The LayerData document of layers[0..n) (topmost first, as HCS wants the
 * parents of a layer): {"SchemaVersion":{"Major":2,"Minor":1},"Layers":
 * [{"Id":..,"Path":..}...]}, strings JSON-escaped. n may be 0 (a base
 * layer). Caller frees; NULL with err set (EINVAL for a string that is
 * not UTF-8 or holds a control character, ENOMEM).
 */
char *wcs_layer_data(const struct wcs_layer *layers, size_t n, struct err *err);

/*
 * The same with "FilterType":"UnionFS": what HcsAttachOverlayFilter takes
 * for a scratch over a mounted CIM (layers: the CIM volume's Files
 * folder), and, with n 0, what HcsDetachOverlayFilter takes to name the
 * filter to detach.
 */
char *wcs_union_layer_data(const struct wcs_layer *layers, size_t n, struct err *err);

/*
 * The GUID HCS knows a layer by: version 5 of name (the layer's chain ID)
 * in berth's layer namespace, fa8cb113-b3b4-4190-9b82-b68915aed3d6, the
 * same derivation as runtime/hcs/guid.h's hcs_guid_layer (store/ may not
 * call runtime/), so the import, the mount and the container document
 * name a layer alike. 36 lowercase characters and a NUL into out.
 */
#define WCS_LAYER_ID_SIZE 37
int wcs_layer_id(const char *name, char out[WCS_LAYER_ID_SIZE], struct err *err);

/* OsLayerOptions for HcsSetupBaseOSLayer: {"Type":"Container"} or {"Type":"Vm"}. */
const char *wcs_os_layer_options(bool vm);

/* The errno a failing HRESULT is reported as: ENOENT, EEXIST, EACCES,
 * EINVAL, ENOMEM, ENOSPC, ERR_INVALID_CONTENT (HCS_E_INVALID_LAYER),
 * EIO for the rest. */
int wcs_hresult_errno(uint32_t hr);

struct wcs_api;

/* ERR_UNAVAILABLE naming what is missing when the DLL or an export is absent. */
int wcs_api_open(const char *dll_path, struct wcs_api **out, struct err *err);
/* NULL is a no-op. */
void wcs_api_free(struct wcs_api *api);

/* HcsImportLayer(layer, source, layer_data): source (a staging folder of
 * Files\, Hives\, UtilityVM\) into the new layer folder. */
int wcs_import_layer(struct wcs_api *api, const char *layer, const char *source,
                     const char *layer_data, struct err *err);
/* HcsSetupBaseOSLayer(layer, vhd, options): vm false for the container
 * base (vhd NULL), true for a UtilityVM folder (vhd: its attached
 * SystemTemplateBase.vhdx). */
int wcs_setup_base_layer(struct wcs_api *api, const char *layer, void *vhd, bool vm,
                         struct err *err);
/* HcsDestroyLayer(layer). */
int wcs_destroy_layer(struct wcs_api *api, const char *layer, struct err *err);
/* HcsFormatWritableLayerVhd(vhd). */
int wcs_format_vhd(struct wcs_api *api, void *vhd, struct err *err);
/* HcsGetLayerVhdMountPath(vhd): the volume's path, UTF-8 (caller frees). */
int wcs_vhd_mount_path(struct wcs_api *api, void *vhd, char **out, struct err *err);
/* HcsInitializeWritableLayer(volume, layer_data, NULL). */
int wcs_initialize_writable(struct wcs_api *api, const char *volume, const char *layer_data,
                            struct err *err);
/* HcsAttachLayerStorageFilter(volume, layer_data). */
int wcs_attach_filter(struct wcs_api *api, const char *volume, const char *layer_data,
                      struct err *err);
/* HcsDetachLayerStorageFilter(volume): -ENOENT when no filter is attached. */
int wcs_detach_filter(struct wcs_api *api, const char *volume, struct err *err);

/*
 * HcsAttachOverlayFilter(volume, layer_data) and HcsDetachOverlayFilter
 * (volume, layer_data): the UnionFS filter of a scratch over a mounted
 * CIM (hcsshim's computestorage.AttachOverlayFilter). computestorage.dll
 * has them only on builds with CimFS for containers, so they are looked
 * up apart from the table wcs_api_open requires: where they are absent
 * these are ERR_UNAVAILABLE, and WCIFS still loads. The detach of a
 * volume without the filter is -ENOENT.
 */
int wcs_attach_overlay(struct wcs_api *api, const char *volume, const char *layer_data,
                       struct err *err);
int wcs_detach_overlay(struct wcs_api *api, const char *volume, const char *layer_data,
                       struct err *err);

#endif
