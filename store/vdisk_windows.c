/*
 * virtdisk.dll through LoadLibraryExW and GetProcAddress (store/vdisk.h).
 * Windows only; blocking: pool threads or start-up.
 */
#include "store/vdisk.h"

#include <windows.h>

#include <initguid.h>
#include <virtdisk.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/windll.h"
#include "common/winutil.h"

#define VD_FUNCS(X)                                                                                \
    X(CreateVirtualDisk)                                                                           \
    X(OpenVirtualDisk)                                                                             \
    X(AttachVirtualDisk)                                                                           \
    X(DetachVirtualDisk)

struct vdisk_api {
    HMODULE dll;
#define VD_FIELD(name) __typeof__(&name) name;
    VD_FUNCS(VD_FIELD)
#undef VD_FIELD
};

static const struct windll_export vd_exports[] = {
#define VD_EXPORT(name) {#name, offsetof(struct vdisk_api, name)},
    VD_FUNCS(VD_EXPORT)
#undef VD_EXPORT
};

/* VIRTUAL_STORAGE_TYPE_VENDOR_MICROSOFT, spelled out: not every mingw-w64 defines it. */
static const GUID vendor_microsoft = {
    0xec984aec, 0xa0f9, 0x47e9, {0x90, 0x1f, 0x71, 0x41, 0x5a, 0x66, 0x34, 0x5b}};

static int
vd_fail(struct err *err, DWORD e, const char *what, const char *path)
{
    int code = e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? ENOENT
               : e == ERROR_FILE_EXISTS || e == ERROR_ALREADY_EXISTS  ? EEXIST
               : e == ERROR_ACCESS_DENIED                             ? EACCES
               : e == ERROR_DISK_FULL                                 ? ENOSPC
                                                                      : EIO;
    return err_set(err, code, "%s %.300s: error %lu", what, path ? path : "", (unsigned long)e);
}

int
vdisk_api_open(const char *dll_path, struct vdisk_api **out, struct err *err)
{
    static const struct windll_spec spec = {
        .system_name = L"virtdisk.dll",
        .name = "virtdisk.dll",
        .test_env = "BERTH_TEST_VIRTDISK_DLL",
        .why_absent = NULL,
        .exports = vd_exports,
        .nexports = sizeof(vd_exports) / sizeof(vd_exports[0]),
    };
    void *table = NULL;
    int ret = windll_table_new(&spec, dll_path, sizeof(struct vdisk_api),
                               offsetof(struct vdisk_api, dll), &table, err);
    if (ret < 0)
        return ret;
    struct vdisk_api *api = table;
    *out = api;
    return 0;
}

void
vdisk_api_free(struct vdisk_api *api)
{
    windll_table_free(api, offsetof(struct vdisk_api, dll));
}

int
vdisk_create(struct vdisk_api *api, const char *path, uint64_t size, void **h, struct err *err)
{
    wchar_t *w = win_wide_sep(path);
    if (!w)
        return err_set(err, EINVAL, "create vhdx %.300s: not UTF-8", path);
    VIRTUAL_STORAGE_TYPE type = {VIRTUAL_STORAGE_TYPE_DEVICE_VHDX, vendor_microsoft};
    CREATE_VIRTUAL_DISK_PARAMETERS p = {0};
    p.Version = CREATE_VIRTUAL_DISK_VERSION_2;
    p.Version2.MaximumSize = size;
    HANDLE hd = NULL;
    DWORD e = api->CreateVirtualDisk(&type, w, VIRTUAL_DISK_ACCESS_NONE, NULL,
                                     CREATE_VIRTUAL_DISK_FLAG_NONE, 0, &p, NULL, &hd);
    free(w);
    if (e != ERROR_SUCCESS)
        return vd_fail(err, e, "create vhdx", path);
    *h = hd;
    return 0;
}

int
vdisk_create_diff(struct vdisk_api *api, const char *path, const char *parent, struct err *err)
{
    wchar_t *w = win_wide_sep(path), *wp = win_wide_sep(parent);
    if (!w || !wp) {
        free(w);
        free(wp);
        return err_set(err, EINVAL, "create vhdx %.300s: not UTF-8", path);
    }
    VIRTUAL_STORAGE_TYPE type = {VIRTUAL_STORAGE_TYPE_DEVICE_VHDX, vendor_microsoft};
    CREATE_VIRTUAL_DISK_PARAMETERS p = {0};
    p.Version = CREATE_VIRTUAL_DISK_VERSION_2;
    p.Version2.ParentPath = wp; /* the size is the parent's */
    HANDLE hd = NULL;
    DWORD e = api->CreateVirtualDisk(&type, w, VIRTUAL_DISK_ACCESS_NONE, NULL,
                                     CREATE_VIRTUAL_DISK_FLAG_NONE, 0, &p, NULL, &hd);
    free(w);
    free(wp);
    if (e != ERROR_SUCCESS)
        return vd_fail(err, e, "create differencing vhdx", path);
    CloseHandle(hd);
    return 0;
}

int
vdisk_open(struct vdisk_api *api, const char *path, void **h, struct err *err)
{
    wchar_t *w = win_wide_sep(path);
    if (!w)
        return err_set(err, EINVAL, "open vhdx %.300s: not UTF-8", path);
    VIRTUAL_STORAGE_TYPE type = {VIRTUAL_STORAGE_TYPE_DEVICE_VHDX, vendor_microsoft};
    OPEN_VIRTUAL_DISK_PARAMETERS p = {0};
    p.Version = OPEN_VIRTUAL_DISK_VERSION_2;
    HANDLE hd = NULL;
    DWORD e = api->OpenVirtualDisk(&type, w, VIRTUAL_DISK_ACCESS_NONE, OPEN_VIRTUAL_DISK_FLAG_NONE,
                                   &p, &hd);
    free(w);
    if (e != ERROR_SUCCESS)
        return vd_fail(err, e, "open vhdx", path);
    *h = hd;
    return 0;
}

int
vdisk_attach(struct vdisk_api *api, void *h, struct err *err)
{
    ATTACH_VIRTUAL_DISK_PARAMETERS p = {0};
    p.Version = ATTACH_VIRTUAL_DISK_VERSION_1;
    DWORD e = api->AttachVirtualDisk((HANDLE)h, NULL,
                                     ATTACH_VIRTUAL_DISK_FLAG_NO_DRIVE_LETTER |
                                         ATTACH_VIRTUAL_DISK_FLAG_PERMANENT_LIFETIME,
                                     0, &p, NULL);
    return e == ERROR_SUCCESS ? 0 : vd_fail(err, e, "attach vhdx", NULL);
}

int
vdisk_detach(struct vdisk_api *api, void *h, struct err *err)
{
    DWORD e = api->DetachVirtualDisk((HANDLE)h, DETACH_VIRTUAL_DISK_FLAG_NONE, 0);
    /* What a disk that is not attached answers. */
    if (e == ERROR_SUCCESS || e == ERROR_NOT_READY || e == ERROR_DEV_NOT_EXIST)
        return 0;
    return vd_fail(err, e, "detach vhdx", NULL);
}

int
vdisk_detach_path(const char *path, struct err *err)
{
    struct vdisk_api *vd = NULL;
    void *h = NULL;
    int r = vdisk_api_open(NULL, &vd, err);
    if (r == 0 && (r = vdisk_open(vd, path, &h, err)) == -ENOENT)
        r = 0; /* no disk, nothing attached */
    else if (r == 0)
        r = vdisk_detach(vd, h, err);
    vdisk_close(h);
    vdisk_api_free(vd);
    return r;
}

void
vdisk_close(void *h)
{
    if (h && h != INVALID_HANDLE_VALUE)
        CloseHandle((HANDLE)h);
}
