/*
 * A Windows image's layer tar imported as a WCIFS layer folder through
 * the platform's layer writer (store/wcstorage.h), never by unpacking it
 * file by file as a layer of the image's own:
 *
 * - a layer with parents: the tar's entries (store/wclayer.h validates
 *   them) are written into a staging folder beside layer_dir as the
 *   legacy transport format has them (Files\, Hives\, UtilityVM\, the
 *   whiteouts in tombstones.txt), each with its security descriptor,
 *   attributes and times; then HcsImportLayer(layer_dir, staging,
 *   LayerData of the parents, topmost first), and the staging folder is
 *   removed;
 * - a base layer (no parents, no whiteouts): written straight into
 *   layer_dir, then set up with its blank VHDXs (store/wclayer_base.h:
 *   blank-base.vhdx formatted, HcsSetupBaseOSLayer(layer_dir, NULL,
 *   "Container"), blank.vhdx over it, both granted to the VM group).
 *   A base layer with a UtilityVM then gets its UtilityVM set up
 *   (store/wclayer_uvm.h: HcsSetupBaseOSLayer of layer_dir\UtilityVM, "Vm",
 *   with an attached SystemTemplateBase.vhdx, and SystemTemplate.vhdx
 *   over it, both granted to the VM group too).
 *
 * On failure nothing is left: the staging folder and layer_dir are
 * removed, after HcsDestroyLayer when HCS got as far as making the layer.
 * A bad tar is ERR_INVALID_CONTENT naming the entry.
 *
 * Windows only (wclayer_import_windows.c; the declaration is portable so
 * that store/image_build.c can name it). Blocking: pool threads.
 */
#ifndef BERTH_STORE_WCLAYER_IMPORT_H
#define BERTH_STORE_WCLAYER_IMPORT_H

#include <stddef.h>

#include "common/err.h"
#include "store/unpack.h"
#include "store/wclayer.h"
#include "store/wcstorage.h"
#include "store/wintar.h"

int wclayer_import_layer(struct wcs_api *api, wtar_read_fn read, void *ctx, const char *layer_dir,
                         const struct wcs_layer *parents, size_t nparents,
                         struct wcl_layer_info *info, struct err *err);

/*
 * An import's layer blob (store/image_build.c, on Windows, for a Windows
 * image): read once from read(ctx) (store/wclayer_blob.h: digest and
 * diff_id in *res, with unpacked_bytes and entries), imported into
 * layer_dir with wclayer_import_layer over computestorage.dll
 * (wcs_api_open(NULL): the system's, or the test double in test builds).
 * lowers are the snapshot folders below it, topmost first, and
 * lower_chain_ids their chain IDs (their layer ids are wcs_layer_id of
 * them), both NULL-terminated. The blob's digest and diff_id are checked
 * against want_digest and want_diff_id (NULL: not checked) before HCS is
 * asked anything: ERR_INVALID_CONTENT when they differ.
 */
int wclayer_blob_import(ssize_t (*read)(void *ctx, void *buf, size_t len), void *ctx,
                        const char *layer_dir, const char *const *lowers,
                        const char *const *lower_chain_ids, const char *want_digest,
                        const char *want_diff_id, struct unpack_result *res, struct err *err);

#endif
