/*
 * The VHDXs of a Windows base layer, as hcsshim's
 * computestorage.SetupContainerBaseLayer makes them: blank-base.vhdx
 * created and formatted (HcsFormatWritableLayerVhd) but not attached,
 * closed, HcsSetupBaseOSLayer {"Type":"Container"} of the layer folder
 * with no disk, blank.vhdx made as a differencing disk over blank-base
 * (what a container's scratch is copied from), and both granted to the
 * "NT VIRTUAL MACHINE\Virtual Machines" group (S-1-5-83-0), which a
 * hyperv-isolated container's VM worker process runs as. The UtilityVM's
 * templates get the same grant (store/wclayer_uvm.h). Windows only
 * (wclayer_base_windows.c); blocks on virtdisk.dll and HCS: pool threads.
 */
#ifndef BERTH_STORE_WCLAYER_BASE_H
#define BERTH_STORE_WCLAYER_BASE_H

#include "common/err.h"
#include "store/wcstorage.h"

/* What the container base's VHDXs are called, in the layer folder. */
#define WCL_BASE_VHD "blank-base.vhdx"
#define WCL_BLANK_VHD "blank.vhdx"
/* Its size: what containerd asks SetupContainerBaseLayer for, 20 GiB. */
#define WCL_BASE_VHD_BYTES (20ull * 1024 * 1024 * 1024)
/* The well-known SID of "NT VIRTUAL MACHINE\Virtual Machines". */
#define WCL_VM_GROUP_SID "S-1-5-83-0"

/*
 * Sets up layer_dir as a container base layer (its Files\ written).
 * ERR_UNAVAILABLE without virtdisk.dll. A failure removes both VHDXs
 * again (the caller's undo removes the folder and asks HcsDestroyLayer).
 */
int wclayer_base_setup(struct wcs_api *api, const char *layer_dir, struct err *err);

/*
 * Adds an ACE to the DACL of the file at path allowing GENERIC_READ to
 * the Virtual Machines group (not inherited; the entries already there
 * are kept), as hcsshim's security.GrantVmGroupAccess does.
 */
int wclayer_grant_vm_group(const char *path, struct err *err);

/* dir\rel, malloc'd (NULL: out of memory). */
char *wclayer_path_in(const char *dir, const char *rel);

#endif
