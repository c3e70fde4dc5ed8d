/*
 * store/wclayer_import_windows.c against the TEST DOUBLE of
 * computestorage.dll (and of virtdisk.dll, both logging to one calls.log):
 * Windows layer tars this suite writes become a base layer (written in
 * place, then blank-base.vhdx formatted, HcsSetupBaseOSLayer "Container",
 * blank.vhdx over it, both readable by the Virtual Machines group) and a
 * child layer (a staging folder with its tombstones.txt, then
 * HcsImportLayer with the parent in LayerData), with their attributes;
 * and every failure leaves nothing: a hostile tar (ERR_INVALID_CONTENT,
 * no HCS call), a failing HcsImportLayer (HcsDestroyLayer, the folder
 * removed). A base layer with a UtilityVM gets its template VHDXs
 * (through the virtdisk double too), and a UtilityVM that cannot boot or
 * whose disk does not detach leaves nothing, as does a failing step of
 * the container base. Wine keeps no DACL on a file (SetSecurityInfo
 * succeeds, the ACE is not read back), so the VM group's ACE is checked in
 * the SDDL a test build logs of what it wrote. The doubles are not HCS: this is what berth writes
 * and asks, not what a real host makes of it.
 */
#include "store/wclayer_import.h"

#include <windows.h>

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/wclayer_base.h"
#include "store/wclayer_reparse.h"
#include "tests/fixtures/wclayer_tar.h"
#include "wcs_double.h"

/* One entry after one PAX record (NULL: none); for a hard link ('1')
 * data is its target. */
static void
layer_entry(struct tbuf *t, const char *name, char type, const char *data, const char *pax)
{
    const char *recs[2] = {pax, NULL};
    bool link = type == '1';
    entry(t, name, type, link ? NULL : data, link ? data : NULL, pax ? recs : NULL);
}

#define G1 "11111111-2222-3333-4444-555555555555"

static struct wcs_api *api;

static void
setup(void)
{
    wcs_double_setup("wcli");
    /* The grants berth writes, in the doubles' log (Wine keeps no DACL). */
    static char grant_log[MAX_PATH * 2];
    snprintf(grant_log, sizeof(grant_log), "%s\\calls.log", wcs_log_dir);
    SetEnvironmentVariableA("BERTH_TEST_VM_GRANT_LOG", grant_log);
    struct err err = {0};
    ck_assert_msg(wcs_api_open(wcs_dbl_path, &api, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    wcs_api_free(api);
    api = NULL;
    wcs_double_teardown();
}

static int
import(struct tbuf *t, const char *layer, const struct wcs_layer *parents, size_t n,
       struct wcl_layer_info *info, struct err *err)
{
    t->off = 0;
    return wclayer_import_layer(api, tb_read, t, layer, parents, n, info, err);
}

/* A base layer whose UtilityVM\Files boots (it has the BCD HCS rewrites). */
static void
uvm_tar(struct tbuf *t, bool with_bcd)
{
    layer_entry(t, "Files/", '5', NULL, NULL);
    layer_entry(t, "UtilityVM/", '5', NULL, NULL);
    layer_entry(t, "UtilityVM/Files/", '5', NULL, NULL);
    layer_entry(t, "UtilityVM/Files/EFI/", '5', NULL, NULL);
    layer_entry(t, "UtilityVM/Files/EFI/Microsoft/", '5', NULL, NULL);
    layer_entry(t, "UtilityVM/Files/EFI/Microsoft/Boot/", '5', NULL, NULL);
    if (with_bcd)
        layer_entry(t, "UtilityVM/Files/EFI/Microsoft/Boot/BCD", '0', "regf", NULL);
    finish(t);
}

/* The virtdisk double, logging beside the computestorage double. */
static void
virtdisk_double_use(void)
{
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    *strrchr(exe, '\\') = '\0';
    static char env[2][MAX_PATH * 2];
    snprintf(env[0], sizeof(env[0]), "BERTH_TEST_VIRTDISK_DLL=%s\\virtdisk-double\\virtdisk.dll",
             exe);
    snprintf(env[1], sizeof(env[1]), "BERTH_VIRTDISK_DOUBLE_DIR=%s", wcs_log_dir);
    _putenv(env[0]);
    _putenv(env[1]);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", NULL);
}

/* The first line of the file at p, in a static buffer ("" when unreadable). */
static const char *
head_of(const char *p)
{
    static char line[MAX_PATH * 3];
    line[0] = '\0';
    FILE *f = fopen(p, "rb");
    if (f) {
        if (!fgets(line, sizeof(line), f))
            line[0] = '\0';
        fclose(f);
    }
    return line;
}

/*
 * The DACL berth wrote onto p for the Virtual Machines group, as SDDL (a
 * static buffer; "" when it granted p nothing): what store/wclayer_base.h
 * logs in test builds, as Wine keeps no DACL to read back.
 */
static const char *
granted(const char *p)
{
    static char sddl[4096];
    sddl[0] = '\0';
    char path[MAX_PATH * 2], line[8192], want[MAX_PATH * 2 + 32];
    snprintf(path, sizeof(path), "%s\\calls.log", wcs_log_dir);
    snprintf(want, sizeof(want), " GrantVmGroupAccess %s ", p);
    FILE *f = fopen(path, "rb");
    while (f && fgets(line, sizeof(line), f)) {
        char *at = strstr(line, want);
        if (at) {
            snprintf(sddl, sizeof(sddl), "%s", at + strlen(want));
            sddl[strcspn(sddl, "\r\n")] = '\0';
        }
    }
    if (f)
        fclose(f);
    return sddl;
}

/* An allowing, not inherited GENERIC_READ ACE for S-1-5-83-0, and the entries that were there. */
static void
assert_vm_group_granted(const char *p)
{
    const char *d = granted(p);
    ck_assert_msg(strncmp(d, "D:", 2) == 0 && strstr(d, "(A;;GR;;;S-1-5-83-0)") != NULL, "%s: %s",
                  p, d);
    ck_assert_msg(strstr(d, ";;;SY)") != NULL, "the DACL lost its entries: %s", d);
}

/*
 * A container base gets what hcsshim's SetupContainerBaseLayer makes:
 * blank-base.vhdx created and formatted but never attached, HcsSetupBaseOSLayer
 * "Container" with no disk, blank.vhdx over blank-base, both readable by
 * the Virtual Machines group.
 */
START_TEST(a_base_layer_is_written_in_place_then_set_up)
{
    virtdisk_double_use();
    struct tbuf t = {0};
    layer_entry(&t, "Files/", '5', NULL, NULL);
    layer_entry(&t, "Files/Windows/", '5', NULL, NULL);
    layer_entry(&t, "Files/Windows/win.ini", '0', "[fonts]\n", "MSWINDOWS.fileattr=33");
    layer_entry(&t, "Files/Windows/link.ini", '1', "Files/Windows/win.ini", NULL);
    layer_entry(&t, "Hives/", '5', NULL, NULL);
    finish(&t);
    struct wcl_layer_info info;
    struct err err = {0};
    const char *layer = wcs_path(0, "base");
    ck_assert_msg(import(&t, layer, NULL, 0, &info, &err) == 0, "%s", err.msg);
    ck_assert(wcs_exists(wcs_path(1, "base\\Files\\Windows\\win.ini")));
    ck_assert(wcs_exists(wcs_path(1, "base\\Files\\Windows\\link.ini")));
    /* FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_READONLY, as the record says. */
    DWORD a = GetFileAttributesA(wcs_path(1, "base\\Files\\Windows\\win.ini"));
    ck_assert_msg((a & (FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_ARCHIVE)) ==
                      (FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_ARCHIVE),
                  "attributes %lx", (unsigned long)a);
    ck_assert_str_eq(wcs_calls(), "CreateVirtualDisk HcsFormatWritableLayerVhd HcsSetupBaseOSLayer "
                                  "CreateVirtualDisk GrantVmGroupAccess GrantVmGroupAccess ");
    char *doc = wcs_doc("HcsSetupBaseOSLayer", 1);
    ck_assert_str_eq(doc, "{\"Type\":\"Container\"}");
    free(doc);
    ck_assert(!wcs_exists(wcs_path(1, "base.staging")));
    const char *bb = wcs_path(1, "base\\" WCL_BASE_VHD), *bl = wcs_path(2, "base\\" WCL_BLANK_VHD);
    ck_assert_str_eq(head_of(bb), "BERTH_DOUBLE_FORMATTED");
    ck_assert(!wcs_exists(wcs_path(3, "base\\" WCL_BASE_VHD ".double-attached")));
    const char *line = head_of(bl);
    ck_assert_msg(strncmp(line, "parent=", 7) == 0 && strstr(line, "\\base\\" WCL_BASE_VHD), "%s",
                  line);
    assert_vm_group_granted(bb);
    assert_vm_group_granted(bl);
    free(t.p);
}
END_TEST

START_TEST(a_child_layer_is_staged_with_its_tombstones_and_imported)
{
    struct tbuf t = {0};
    layer_entry(&t, "Files/", '5', NULL, NULL);
    layer_entry(&t, "Files/app.exe", '0', "MZ", NULL);
    layer_entry(&t, "Files/Windows/.wh.win.ini", '0', NULL, NULL);
    layer_entry(&t, "Hives/", '5', NULL, NULL);
    layer_entry(&t, "Hives/Software_Delta", '0', "regf", NULL);
    finish(&t);
    struct wcs_layer parent = {G1, wcs_path(2, "base")};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(import(&t, wcs_path(0, "child"), &parent, 1, &info, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(wcs_calls(), "HcsImportLayer ");
    char *doc = wcs_doc("HcsImportLayer", 1);
    char *want = wcs_layer_data(&parent, 1, &err);
    ck_assert_str_eq(doc, want);
    free(doc);
    free(want);
    /* The double copied the staging folder in: what berth staged. */
    ck_assert(wcs_exists(wcs_path(0, "child\\Files\\app.exe")));
    ck_assert(wcs_exists(wcs_path(0, "child\\Hives\\Software_Delta")));
    ck_assert(!wcs_exists(wcs_path(0, "child\\Files\\Windows\\.wh.win.ini")));
    FILE *f = fopen(wcs_path(0, "child\\tombstones.txt"), "rb");
    ck_assert_ptr_nonnull(f);
    char buf[256] = "";
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "\xef\xbb\xbfVersion 1.0\n\\Windows\\win.ini\n");
    /* The staging folder is gone once HCS took it. */
    ck_assert(!wcs_exists(wcs_path(0, "child.staging")));
    free(t.p);
}
END_TEST

START_TEST(a_hostile_tar_is_refused_before_any_hcs_call_and_leaves_nothing)
{
    struct tbuf t = {0};
    layer_entry(&t, "Files/", '5', NULL, NULL);
    layer_entry(&t, "Files/ok.txt", '0', "x", NULL);
    layer_entry(&t, "Files/../escape.txt", '0', "x", NULL);
    finish(&t);
    struct wcs_layer parent = {G1, wcs_path(2, "base")};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_int_eq(import(&t, wcs_path(0, "child"), &parent, 1, &info, &err),
                     -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "escape.txt") != NULL, "%s", err.msg);
    ck_assert_str_eq(wcs_calls(), "");
    ck_assert(!wcs_exists(wcs_path(0, "child")));
    ck_assert(!wcs_exists(wcs_path(0, "child.staging")));
    ck_assert(!wcs_exists(wcs_path(0, "escape.txt")));
    /* A base layer may not remove anything. */
    struct tbuf w = {0};
    layer_entry(&w, "Files/.wh.x", '0', NULL, NULL);
    finish(&w);
    ck_assert_int_eq(import(&w, wcs_path(0, "base"), NULL, 0, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert(!wcs_exists(wcs_path(0, "base")));
    /* Nor carry a hive delta: it has nothing beneath to apply it to. */
    struct tbuf hv = {0};
    layer_entry(&hv, "Files/", '5', NULL, NULL);
    layer_entry(&hv, "Hives/", '5', NULL, NULL);
    layer_entry(&hv, "Hives/System_Delta", '0', "regf", NULL);
    finish(&hv);
    ck_assert_int_eq(import(&hv, wcs_path(0, "base"), NULL, 0, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "System_Delta") != NULL, "%s", err.msg);
    ck_assert(!wcs_exists(wcs_path(0, "base")));
    ck_assert_str_eq(wcs_calls(), "");
    free(hv.p);
    free(t.p);
    free(w.p);
}
END_TEST

/* Does this host set a mount point reparse point (Wine 8 answers ERROR_NOT_SUPPORTED)? */
static bool
reparse_points_supported(void)
{
    char dir[MAX_PATH * 2];
    snprintf(dir, sizeof(dir), "%s", wcs_path(0, "probe-junction"));
    CreateDirectoryA(dir, NULL);
    HANDLE h = CreateFileA(dir, GENERIC_WRITE, 0, NULL, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
    unsigned char buf[WCL_REPARSE_MAX];
    size_t len = 0;
    struct err err = {0};
    ck_assert_int_eq(wcl_reparse_encode("C:\\Users", true, buf, sizeof(buf), &len, &err), 0);
    DWORD got = 0;
    BOOL ok = h != INVALID_HANDLE_VALUE &&
              DeviceIoControl(h, FSCTL_SET_REPARSE_POINT, buf, (DWORD)len, NULL, 0, &got, NULL);
    if (h != INVALID_HANDLE_VALUE)
        CloseHandle(h);
    RemoveDirectoryA(dir);
    return ok;
}

/*
 * Reparse points in a layer: a junction to C:\Users (how images keep
 * "Documents and Settings") is written as a mount point; a symlink whose
 * target leaves the layer (another drive) is refused by the validation,
 * before anything is written or HCS is asked, naming the entry.
 */
START_TEST(a_junction_is_a_mount_point_and_an_escaping_link_is_refused_before_hcs)
{
    struct tbuf t = {0};
    layer_entry(&t, "Files/", '5', NULL, NULL);
    layer_entry(&t, "Files/Users/", '5', NULL, NULL);
    const char *jrecs[] = {"MSWINDOWS.mountpoint=1", "MSWINDOWS.fileattr=1040", NULL};
    entry(&t, "Files/Documents and Settings", '2', NULL, "C:\\Users", jrecs);
    finish(&t);
    struct wcs_layer parent = {G1, wcs_path(2, "base")};
    struct wcl_layer_info info;
    struct err err = {0};
    bool supported = reparse_points_supported();
    int rc = import(&t, wcs_path(0, "child"), &parent, 1, &info, &err);
    if (supported) {
        ck_assert_msg(rc == 0, "%s", err.msg);
        HANDLE h = CreateFileA(wcs_path(0, "child\\Files\\Documents and Settings"), 0,
                               FILE_SHARE_READ, NULL, OPEN_EXISTING,
                               FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
        ck_assert(h != INVALID_HANDLE_VALUE);
        unsigned char got[WCL_REPARSE_MAX], want[WCL_REPARSE_MAX];
        DWORD n = 0;
        size_t wl = 0;
        ck_assert(DeviceIoControl(h, FSCTL_GET_REPARSE_POINT, NULL, 0, got, sizeof(got), &n, NULL));
        CloseHandle(h);
        ck_assert_int_eq(wcl_reparse_encode("C:\\Users", true, want, sizeof(want), &wl, &err), 0);
        ck_assert_uint_eq(n, wl);
        ck_assert_mem_eq(got, want, wl);
    } else {
        /* Wine 8 has no FSCTL_SET_REPARSE_POINT: the write gets as far as that call, and the
         * failed import leaves nothing and never reached HCS. */
        ck_assert_int_lt(rc, 0);
        ck_assert_msg(strstr(err.msg, "set the reparse point of junction Files/Documents and "
                                      "Settings"),
                      "%s", err.msg);
        ck_assert_str_eq(wcs_calls(), "");
    }
    ck_assert(!wcs_exists(wcs_path(0, "child.staging")));
    free(t.p);

    struct tbuf e = {0};
    layer_entry(&e, "Files/", '5', NULL, NULL);
    layer_entry(&e, "Files/ok.txt", '0', "x", NULL);
    entry(&e, "Files/evil", '2', NULL, "D:\\secrets", NULL);
    finish(&e);
    ck_assert_int_eq(import(&e, wcs_path(0, "evil"), &parent, 1, &info, &err),
                     -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "Files/evil") && strstr(err.msg, "another drive"), "%s", err.msg);
    ck_assert(!wcs_exists(wcs_path(0, "evil")));
    ck_assert(!wcs_exists(wcs_path(0, "evil.staging")));
    if (!supported)
        ck_assert_str_eq(wcs_calls(), "");
    free(e.p);
}
END_TEST

START_TEST(a_failed_hcs_import_is_destroyed_and_removed)
{
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", "HcsImportLayer");
    struct tbuf t = {0};
    layer_entry(&t, "Files/", '5', NULL, NULL);
    layer_entry(&t, "Files/app.exe", '0', "MZ", NULL);
    finish(&t);
    struct wcs_layer parent = {G1, wcs_path(2, "base")};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_int_eq(import(&t, wcs_path(0, "child"), &parent, 1, &info, &err),
                     -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "HcsImportLayer") != NULL, "%s", err.msg);
    ck_assert_str_eq(wcs_calls(), "HcsImportLayer HcsDestroyLayer ");
    ck_assert(!wcs_exists(wcs_path(0, "child")));
    ck_assert(!wcs_exists(wcs_path(0, "child.staging")));
    free(t.p);
}
END_TEST

/*
 * The UtilityVM gets what hcsshim's SetupUtilityVMBaseLayer makes: its
 * SystemTemplateBase.vhdx created and attached for HcsSetupBaseOSLayer
 * "Vm" of the UtilityVM folder (the double refuses a detached disk),
 * detached again, and SystemTemplate.vhdx over it.
 */
START_TEST(a_base_layer_with_a_utility_vm_gets_its_template_vhds)
{
    virtdisk_double_use();
    struct tbuf t = {0};
    uvm_tar(&t, true);
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(import(&t, wcs_path(0, "base"), NULL, 0, &info, &err) == 0, "%s", err.msg);
    ck_assert(info.utility_vm);
    ck_assert_str_eq(wcs_calls(), "CreateVirtualDisk HcsFormatWritableLayerVhd HcsSetupBaseOSLayer "
                                  "CreateVirtualDisk GrantVmGroupAccess GrantVmGroupAccess "
                                  "CreateVirtualDisk AttachVirtualDisk HcsSetupBaseOSLayer "
                                  "DetachVirtualDisk CreateVirtualDisk GrantVmGroupAccess "
                                  "GrantVmGroupAccess ");
    char *doc = wcs_doc("HcsSetupBaseOSLayer", 1);
    ck_assert_str_eq(doc, "{\"Type\":\"Container\"}");
    free(doc);
    doc = wcs_doc("HcsSetupBaseOSLayer", 2);
    ck_assert_str_eq(doc, "{\"Type\":\"Vm\"}");
    free(doc);
    /* The second set-up was of the UtilityVM folder. */
    FILE *f;
    char path[MAX_PATH * 2], log[8192] = "";
    snprintf(path, sizeof(path), "%s\\calls.log", wcs_log_dir);
    f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    log[fread(log, 1, sizeof(log) - 1, f)] = '\0';
    fclose(f);
    ck_assert_msg(strstr(log, "base\\UtilityVM\n") != NULL, "%s", log);
    ck_assert(wcs_exists(wcs_path(0, "base\\UtilityVM\\SystemTemplateBase.vhdx")));
    ck_assert(!wcs_exists(wcs_path(0, "base\\UtilityVM\\SystemTemplateBase.vhdx.double-attached")));
    /* The template is a differencing disk over the base. */
    f = fopen(wcs_path(0, "base\\UtilityVM\\SystemTemplate.vhdx"), "rb");
    ck_assert_ptr_nonnull(f);
    char line[MAX_PATH * 3] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    fclose(f);
    ck_assert_msg(strncmp(line, "parent=", 7) == 0 && strstr(line, "SystemTemplateBase.vhdx"), "%s",
                  line);
    /* Both templates are the utility VM's to open. */
    assert_vm_group_granted(wcs_path(0, "base\\UtilityVM\\SystemTemplateBase.vhdx"));
    assert_vm_group_granted(wcs_path(0, "base\\UtilityVM\\SystemTemplate.vhdx"));
    free(t.p);
}
END_TEST

/* A UtilityVM that cannot boot, or an HCS that refuses it: nothing is left, no disk attached. */
START_TEST(a_utility_vm_that_fails_leaves_nothing)
{
    virtdisk_double_use();
    struct tbuf t = {0};
    uvm_tar(&t, false);
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_int_eq(import(&t, wcs_path(0, "base"), NULL, 0, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "BCD") != NULL, "%s", err.msg);
    ck_assert(!wcs_exists(wcs_path(0, "base")));
    ck_assert_str_eq(wcs_calls(), ""); /* refused before HCS */
    free(t.p);

    struct tbuf t2 = {0};
    uvm_tar(&t2, true);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", "DetachVirtualDisk");
    ck_assert_int_lt(import(&t2, wcs_path(0, "base"), NULL, 0, &info, &err), 0);
    ck_assert_msg(strstr(err.msg, "detach") != NULL, "%s", err.msg);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", NULL);
    ck_assert(!wcs_exists(wcs_path(0, "base")));
    free(t2.p);
}
END_TEST

/* A base layer tar of one file. */
static void
base_tar(struct tbuf *t)
{
    layer_entry(t, "Files/", '5', NULL, NULL);
    layer_entry(t, "Files/a.txt", '0', "a", NULL);
    finish(t);
}

/*
 * Each step of the container base failing, and virtdisk.dll missing:
 * HcsDestroyLayer, nothing left, no step after the failed one, the
 * failure named.
 */
START_TEST(a_container_base_that_fails_leaves_nothing)
{
    virtdisk_double_use();
    static const struct {
        const char *fail, *vd_fail, *calls, *msg;
    } cases[] = {
        {NULL, "CreateVirtualDisk", "CreateVirtualDisk HcsDestroyLayer ", WCL_BASE_VHD},
        {"HcsFormatWritableLayerVhd", NULL,
         "CreateVirtualDisk HcsFormatWritableLayerVhd HcsDestroyLayer ",
         "HcsFormatWritableLayerVhd"},
        {"HcsSetupBaseOSLayer", NULL,
         "CreateVirtualDisk HcsFormatWritableLayerVhd HcsSetupBaseOSLayer HcsDestroyLayer ",
         "HcsSetupBaseOSLayer"},
    };
    char log[MAX_PATH * 2];
    snprintf(log, sizeof(log), "%s\\calls.log", wcs_log_dir);
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        DeleteFileA(log);
        SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", cases[k].fail);
        SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", cases[k].vd_fail);
        struct tbuf t = {0};
        base_tar(&t);
        struct wcl_layer_info info;
        struct err err = {0};
        ck_assert_int_lt(import(&t, wcs_path(0, "base"), NULL, 0, &info, &err), 0);
        ck_assert_msg(strstr(err.msg, cases[k].msg) != NULL, "%s", err.msg);
        ck_assert_str_eq(wcs_calls(), cases[k].calls);
        ck_assert(!wcs_exists(wcs_path(0, "base")));
        free(t.p);
    }
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", NULL);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", NULL);

    /* No virtdisk.dll: unavailable, before any disk. */
    DeleteFileA(log);
    char missing[MAX_PATH * 2];
    snprintf(missing, sizeof(missing), "%s\\no-such-virtdisk.dll", wcs_tmp);
    static char env[MAX_PATH * 2 + 32];
    snprintf(env, sizeof(env), "BERTH_TEST_VIRTDISK_DLL=%s", missing);
    _putenv(env); /* windll_open reads the CRT's copy */
    struct tbuf t = {0};
    base_tar(&t);
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_int_eq(import(&t, wcs_path(0, "base"), NULL, 0, &info, &err), -ERR_UNAVAILABLE);
    ck_assert_str_eq(wcs_calls(), "HcsDestroyLayer ");
    ck_assert(!wcs_exists(wcs_path(0, "base")));
    free(t.p);
}
END_TEST

/* The set-up's own undo: its disks go, a folder it did not make stays, and so does a file
 * named blank.vhdx that was there before it. */
START_TEST(a_failed_container_base_removes_only_its_own_disks)
{
    virtdisk_double_use();
    const char *dir = wcs_path(0, "layer");
    ck_assert(CreateDirectoryA(dir, NULL));
    ck_assert(CreateDirectoryA(wcs_path(1, "layer\\Files"), NULL));
    wcs_write(wcs_path(1, "layer\\" WCL_BLANK_VHD), "someone else's");
    struct err err = {0};
    ck_assert_int_eq(wclayer_base_setup(api, dir, &err), -EEXIST);
    ck_assert_msg(strstr(err.msg, WCL_BLANK_VHD) != NULL, "%s", err.msg);
    ck_assert_str_eq(wcs_calls(), "CreateVirtualDisk HcsFormatWritableLayerVhd HcsSetupBaseOSLayer "
                                  "CreateVirtualDisk ");
    ck_assert(!wcs_exists(wcs_path(1, "layer\\" WCL_BASE_VHD)));
    ck_assert_str_eq(head_of(wcs_path(1, "layer\\" WCL_BLANK_VHD)), "someone else's");
    ck_assert(wcs_exists(wcs_path(1, "layer\\Files")));
}
END_TEST

static Suite *
import_suite(void)
{
    Suite *s = suite_create("wclayer_import");
    TCase *tc = tcase_create("double");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_base_layer_is_written_in_place_then_set_up);
    tcase_add_test(tc, a_child_layer_is_staged_with_its_tombstones_and_imported);
    tcase_add_test(tc, a_hostile_tar_is_refused_before_any_hcs_call_and_leaves_nothing);
    tcase_add_test(tc, a_junction_is_a_mount_point_and_an_escaping_link_is_refused_before_hcs);
    tcase_add_test(tc, a_failed_hcs_import_is_destroyed_and_removed);
    tcase_add_test(tc, a_base_layer_with_a_utility_vm_gets_its_template_vhds);
    tcase_add_test(tc, a_utility_vm_that_fails_leaves_nothing);
    tcase_add_test(tc, a_container_base_that_fails_leaves_nothing);
    tcase_add_test(tc, a_failed_container_base_removes_only_its_own_disks);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(import_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
