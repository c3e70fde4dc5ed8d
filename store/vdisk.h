/*
 * virtdisk.dll, for a container's scratch VHDX (store/layer_wcifs_windows.c):
 * created when missing, opened, attached without a drive letter for the
 * lifetime of the host (so it outlives a crashed berth, whose successor
 * detaches it), and detached. Loaded at run time as computestorage.dll
 * is (store/wcstorage.h). Windows only (vdisk_windows.c); every call
 * blocks: pool threads or start-up.
 *
 * Test builds (BERTH_TEST_HOOKS) can load the TEST DOUBLE in
 * tests/doubles/virtdisk/: vdisk_api_open() with a path, or with NULL and
 * BERTH_TEST_VIRTDISK_DLL set to one. Other builds load only
 * %SystemRoot%\System32\virtdisk.dll and refuse a path.
 */
#ifndef BERTH_STORE_VDISK_H
#define BERTH_STORE_VDISK_H

#include <stdint.h>

#include "common/err.h"

struct vdisk_api;

/* ERR_UNAVAILABLE naming what is missing when the DLL or an export is absent. */
int vdisk_api_open(const char *dll_path, struct vdisk_api **out, struct err *err);
void vdisk_api_free(struct vdisk_api *api);

/* A new dynamically sized VHDX of size bytes at path (EEXIST when there is one); *h its handle. */
int vdisk_create(struct vdisk_api *api, const char *path, uint64_t size, void **h, struct err *err);
/* A new differencing VHDX at path over the VHDX parent (EEXIST when there is one); not kept open.
 */
int vdisk_create_diff(struct vdisk_api *api, const char *path, const char *parent, struct err *err);
/* Opens the VHDX at path: ENOENT when there is none. */
int vdisk_open(struct vdisk_api *api, const char *path, void **h, struct err *err);
/* Attaches it, no drive letter, until detached (it outlives h and the process). */
int vdisk_attach(struct vdisk_api *api, void *h, struct err *err);
/* Detaches it; one not attached is success. */
int vdisk_detach(struct vdisk_api *api, void *h, struct err *err);
/* Opens the VHDX at path, detaches it and closes it (the undo of a mount,
 * store/layer_*_windows.c): no disk there, or one not attached, is success. */
int vdisk_detach_path(const char *path, struct err *err);
/* Closes h; NULL is a no-op. */
void vdisk_close(void *h);

#endif
