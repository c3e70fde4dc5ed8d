/*
 * A base layer's UtilityVM set up through virtdisk.dll and
 * computestorage.dll (store/wclayer_uvm.h). Windows only; pool threads.
 */
#include "store/wclayer_uvm.h"

#include <windows.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/winutil.h"
#include "store/vdisk.h"
#include "store/wclayer_base.h"

static bool
is_file(const char *path)
{
    wchar_t *w = win_wide(path);
    DWORD a = w ? GetFileAttributesW(w) : INVALID_FILE_ATTRIBUTES;
    free(w);
    return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

int
wclayer_uvm_check(const char *layer_dir, struct err *err)
{
    char *bcd = wclayer_path_in(layer_dir, "UtilityVM\\Files\\EFI\\Microsoft\\Boot\\BCD");
    int rc = !bcd            ? err_set(err, ENOMEM, "utility vm: out of memory")
             : !is_file(bcd) ? err_set(err, ERR_INVALID_CONTENT,
                                       "utility vm: UtilityVM\\Files has no "
                                       "EFI\\Microsoft\\Boot\\BCD to boot from")
                             : 0;
    free(bcd);
    return rc;
}

int
wclayer_uvm_setup(struct wcs_api *api, const char *layer_dir, struct err *err)
{
    char *uvm = wclayer_path_in(layer_dir, "UtilityVM");
    char *base = wclayer_path_in(layer_dir, "UtilityVM\\" WCL_UVM_BASE_VHD);
    char *tmpl = wclayer_path_in(layer_dir, "UtilityVM\\" WCL_UVM_TEMPLATE_VHD);
    struct vdisk_api *vd = NULL;
    void *h = NULL;
    int rc = 0;
    if (!uvm || !base || !tmpl)
        rc = err_set(err, ENOMEM, "utility vm: out of memory");
    if (rc == 0)
        rc = vdisk_api_open(NULL, &vd, err);
    if (rc == 0)
        rc = vdisk_create(vd, base, WCL_UVM_VHD_BYTES, &h, err);
    /* HCS writes the VM's boot volume onto the attached template. */
    bool attached = rc == 0 && (rc = vdisk_attach(vd, h, err)) == 0;
    if (rc == 0)
        rc = wcs_setup_base_layer(api, uvm, h, true, err);
    if (attached) {
        struct err derr = {0};
        int dr = vdisk_detach(vd, h, &derr);
        if (dr < 0 && rc == 0) {
            err_copy(err, &derr);
            rc = dr;
        }
    }
    vdisk_close(h);
    if (rc == 0)
        rc = vdisk_create_diff(vd, tmpl, base, err);
    /* The utility VM's worker process opens both (hcsshim grants them too). */
    if (rc == 0)
        rc = wclayer_grant_vm_group(base, err);
    if (rc == 0)
        rc = wclayer_grant_vm_group(tmpl, err);
    vdisk_api_free(vd);
    free(uvm);
    free(base);
    free(tmpl);
    return rc < 0 ? err_wrap(err, "utility vm of %.200s", layer_dir) : 0;
}
