/*
 * A Windows base layer's blank VHDXs and the Virtual Machines group's
 * access to them (store/wclayer_base.h), through virtdisk.dll,
 * computestorage.dll and advapi32's security calls. Windows only; pool
 * threads.
 */
#include "store/wclayer_base.h"

#include <windows.h>

#include <aclapi.h>
#include <sddl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/winutil.h"
#include "store/vdisk.h"

char *
wclayer_path_in(const char *dir, const char *rel)
{
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s\\%s", dir, rel);
    return s;
}

#ifdef BERTH_TEST_HOOKS
/*
 * Wine accepts SetSecurityInfo on a file but keeps no DACL (it reads one
 * back from the mode bits), so test builds tell what was written: with
 * BERTH_TEST_VM_GRANT_LOG naming a file (the doubles' calls.log), a line
 * "NNNN GrantVmGroupAccess <path> <the DACL written, as SDDL>".
 */
static void
grant_observed(const char *path, PACL dacl)
{
    char log[MAX_PATH * 2];
    DWORD n = GetEnvironmentVariableA("BERTH_TEST_VM_GRANT_LOG", log, sizeof(log));
    SECURITY_DESCRIPTOR sd;
    LPSTR sddl = NULL;
    if (n == 0 || n >= sizeof(log) ||
        !InitializeSecurityDescriptor(&sd, SECURITY_DESCRIPTOR_REVISION) ||
        !SetSecurityDescriptorDacl(&sd, TRUE, dacl, FALSE) ||
        !ConvertSecurityDescriptorToStringSecurityDescriptorA(
            &sd, SDDL_REVISION_1, DACL_SECURITY_INFORMATION, &sddl, NULL))
        return;
    unsigned lines = 1;
    FILE *f = fopen(log, "rb");
    for (int c; f && (c = fgetc(f)) != EOF;)
        lines += c == '\n';
    if (f)
        fclose(f);
    if ((f = fopen(log, "ab"))) {
        fprintf(f, "%04u GrantVmGroupAccess %s %s\n", lines, path, sddl);
        fclose(f);
    }
    LocalFree(sddl);
}
#endif

int
wclayer_grant_vm_group(const char *path, struct err *err)
{
    wchar_t *w = win_wide(path);
    if (!w)
        return err_set(err, ENOMEM, "grant vm access: out of memory");
    HANDLE h = CreateFileW(w, READ_CONTROL | WRITE_DAC, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return err_set(err, EIO, "grant vm access: open %.300s: error %lu", path,
                       (unsigned long)GetLastError());
    PACL dacl = NULL, merged = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    PSID sid = NULL;
    const char *step = "read the DACL of";
    DWORD e =
        GetSecurityInfo(h, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL, &dacl, NULL, &sd);
    if (e == ERROR_SUCCESS && !ConvertStringSidToSidW(L"" WCL_VM_GROUP_SID, &sid)) {
        e = GetLastError();
        step = "make the Virtual Machines SID for";
    }
    if (e == ERROR_SUCCESS) {
        EXPLICIT_ACCESS_W ea = {
            .grfAccessPermissions = GENERIC_READ,
            .grfAccessMode = GRANT_ACCESS,
            .grfInheritance = NO_INHERITANCE,
            .Trustee = {.TrusteeForm = TRUSTEE_IS_SID,
                        .TrusteeType = TRUSTEE_IS_WELL_KNOWN_GROUP,
                        .ptstrName = (LPWSTR)sid},
        };
        step = "merge the Virtual Machines ACE into";
        e = SetEntriesInAclW(1, &ea, dacl, &merged);
    }
    if (e == ERROR_SUCCESS) {
        step = "write the DACL of";
        e = SetSecurityInfo(h, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL, merged, NULL);
    }
#ifdef BERTH_TEST_HOOKS
    if (e == ERROR_SUCCESS)
        grant_observed(path, merged);
#endif
    LocalFree(merged);
    LocalFree(sid);
    LocalFree(sd);
    CloseHandle(h);
    if (e != ERROR_SUCCESS)
        return err_set(err, e == ERROR_ACCESS_DENIED ? EACCES : EIO,
                       "grant vm access: %s %.300s: error %lu", step, path, (unsigned long)e);
    return 0;
}

static void
remove_file(const char *path)
{
    wchar_t *w = win_wide(path);
    if (w)
        DeleteFileW(w);
    free(w);
}

int
wclayer_base_setup(struct wcs_api *api, const char *layer_dir, struct err *err)
{
    char *base = wclayer_path_in(layer_dir, WCL_BASE_VHD);
    char *blank = wclayer_path_in(layer_dir, WCL_BLANK_VHD);
    struct vdisk_api *vd = NULL;
    void *h = NULL;
    int rc = 0;
    if (!base || !blank)
        rc = err_set(err, ENOMEM, "container base: out of memory");
    if (rc == 0)
        rc = vdisk_api_open(NULL, &vd, err);
    bool created = rc == 0 && (rc = vdisk_create(vd, base, WCL_BASE_VHD_BYTES, &h, err)) == 0;
    /* Formatted while only created, and closed before the set-up: HCS
     * wants no disk for a container base (hcsshim's order). */
    if (rc == 0)
        rc = wcs_format_vhd(api, h, err);
    vdisk_close(h);
    if (rc == 0)
        rc = wcs_setup_base_layer(api, layer_dir, NULL, false, err);
    bool diffed = rc == 0 && (rc = vdisk_create_diff(vd, blank, base, err)) == 0;
    if (rc == 0)
        rc = wclayer_grant_vm_group(base, err);
    if (rc == 0)
        rc = wclayer_grant_vm_group(blank, err);
    /* Only what this made: a blank.vhdx that was there stays. */
    if (rc < 0 && diffed)
        remove_file(blank);
    if (rc < 0 && created)
        remove_file(base);
    vdisk_api_free(vd);
    free(base);
    free(blank);
    return rc < 0 ? err_wrap(err, "container base of %.200s", layer_dir) : 0;
}
