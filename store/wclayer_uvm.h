/*
 * The UtilityVM of a Windows base layer (<layer>\UtilityVM\Files: the
 * utility VM's own OS, for hyperv isolation) made bootable, as hcsshim's
 * computestorage.SetupUtilityVMBaseLayer does it: a template VHDX,
 * SystemTemplateBase.vhdx, created, attached and given to
 * HcsSetupBaseOSLayer with {"Type":"Vm"} for the UtilityVM folder,
 * detached again, SystemTemplate.vhdx made as a differencing disk over
 * it (what a utility VM's scratch is copied from), and both granted to
 * the Virtual Machines group (store/wclayer_base.h). Windows only;
 * blocks on virtdisk.dll and HCS: pool threads.
 */
#ifndef BERTH_STORE_WCLAYER_UVM_H
#define BERTH_STORE_WCLAYER_UVM_H

#include "common/err.h"
#include "store/wcstorage.h"

/* What the template VHDXs are called, in <layer>\UtilityVM. */
#define WCL_UVM_BASE_VHD "SystemTemplateBase.vhdx"
#define WCL_UVM_TEMPLATE_VHD "SystemTemplate.vhdx"
/* The template's size: hcsshim's and containerd's default, 10 GiB. */
#define WCL_UVM_VHD_BYTES (10ull * 1024 * 1024 * 1024)

/*
 * ERR_INVALID_CONTENT when layer_dir\UtilityVM\Files has no boot
 * configuration (Files\EFI\Microsoft\Boot\BCD, which HCS rewrites):
 * checked before anything reaches HCS.
 */
int wclayer_uvm_check(const char *layer_dir, struct err *err);

/*
 * Sets up layer_dir\UtilityVM (after the container base of layer_dir was
 * set up). ERR_UNAVAILABLE without virtdisk.dll. A failure leaves the
 * disk detached; the VHDXs are in the layer folder, which the caller's
 * undo removes.
 */
int wclayer_uvm_setup(struct wcs_api *api, const char *layer_dir, struct err *err);

#endif
