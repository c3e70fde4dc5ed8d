/*
 * store/layer_wcifs_windows.c against the TEST DOUBLES of
 * computestorage.dll and virtdisk.dll (one log for both): a WCIFS mount
 * makes, attaches, formats and initializes a new scratch VHDX and puts the
 * filter on its volume, journaled step by step; a second mount of the
 * same scratch only attaches; the unmount detaches both and removes the
 * entry; a mount that fails half-way undoes itself; an entry left by
 * a "crash" is undone by the journal's replay; and a utility VM's scratch
 * (hyperv) is made and formatted but never attached on the host. The doubles are not HCS:
 * this is the order of calls and what berth records, not a real volume.
 */
#include "store/layer.h"

#include <windows.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/mount_journal.h"
#include "wcs_double.h"

#define G_BASE "11111111-2222-3333-4444-555555555555"
#define G_TOP "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

static struct mjournal *journal;
static struct layer_list *list;
static char vd_path[MAX_PATH + 40];

static void
setup(void)
{
    wcs_double_setup("wcifs");
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    *strrchr(exe, '\\') = '\0';
    snprintf(vd_path, sizeof(vd_path), "%s\\virtdisk-double\\virtdisk.dll", exe);
    /* berth reads these with getenv: the C runtime's copy of the
     * environment, which _putenv updates (and Windows' with it). */
    static char env[3][MAX_PATH * 2];
    snprintf(env[0], sizeof(env[0]), "BERTH_TEST_HCS_STORAGE_DLL=%s", wcs_dbl_path);
    snprintf(env[1], sizeof(env[1]), "BERTH_TEST_VIRTDISK_DLL=%s", vd_path);
    snprintf(env[2], sizeof(env[2]), "BERTH_VIRTDISK_DOUBLE_DIR=%s", wcs_log_dir);
    for (int i = 0; i < 3; i++)
        _putenv(env[i]);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", NULL);
    struct err err = {0};
    ck_assert_msg(mjournal_open(wcs_path(0, "mounts"), &journal, &err) == 0, "%s", err.msg);
    CreateDirectoryA(wcs_path(0, "top"), NULL);
    CreateDirectoryA(wcs_path(0, "base"), NULL);
    CreateDirectoryA(wcs_path(0, "scratch"), NULL);
    char top[MAX_PATH * 2], base[MAX_PATH * 2], scratch[MAX_PATH * 2];
    snprintf(top, sizeof(top), "%s", wcs_path(0, "top"));
    snprintf(base, sizeof(base), "%s", wcs_path(0, "base"));
    snprintf(scratch, sizeof(scratch), "%s", wcs_path(0, "scratch"));
    const char *folders[] = {top, base, scratch};
    const char *ids[] = {G_TOP, G_BASE};
    ck_assert_msg(layer_list_parse_wcifs(folders, ids, 3, &list, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    layer_list_free(list);
    list = NULL;
    mjournal_free(journal);
    journal = NULL;
    wcs_double_teardown();
}

static const struct layer_mount_rec rec = {NULL, "container.c1.rootfs", "container:c1"};

static int
mount(struct mounted_layers **m, struct err *err)
{
    struct layer_mount_rec r = rec;
    r.journal = journal;
    return layers_mount(list, NULL, NULL, &r, m, err);
}

START_TEST(a_new_scratch_is_made_formatted_initialized_and_filtered)
{
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(wcs_calls(), "OpenVirtualDisk CreateVirtualDisk AttachVirtualDisk "
                                  "HcsFormatWritableLayerVhd HcsGetLayerVhdMountPath "
                                  "HcsInitializeWritableLayer HcsAttachLayerStorageFilter ");
    const char *rootfs = mounted_layers_rootfs(m);
    ck_assert_msg(strncmp(rootfs, "\\\\?\\Volume{", 11) == 0, "rootfs %s", rootfs);
    /* The layers as the container document names them: topmost first. */
    ck_assert_uint_eq(mounted_layers_count(m), 2);
    ck_assert_str_eq(mounted_layers_layer_id(m, 0), G_TOP);
    ck_assert_str_eq(mounted_layers_layer_id(m, 1), G_BASE);
    char *ld = wcs_doc("HcsAttachLayerStorageFilter", 1);
    ck_assert_ptr_nonnull(ld);
    ck_assert_msg(strstr(ld, G_TOP) && strstr(ld, G_BASE) && strstr(ld, G_TOP) < strstr(ld, G_BASE),
                  "%s", ld);
    free(ld);
    /* Journaled with its last step, the volume and the VHDX. */
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), 0);
    ck_assert_str_eq(e->kind, "wcifs");
    ck_assert_str_eq(mj_entry_get(e, "step"), "filter");
    ck_assert_str_eq(mj_entry_get(e, "volume"), rootfs);
    ck_assert_str_eq(mj_entry_get(e, "rootfs"), rootfs);
    ck_assert_ptr_nonnull(strstr(mj_entry_get(e, "vhd"), "sandbox.vhdx"));
    mj_entry_free(e);
    ck_assert(wcs_exists(wcs_path(0, "scratch\\sandbox.vhdx.double-attached")));

    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), -ENOENT);
    ck_assert(!wcs_exists(wcs_path(0, "scratch\\sandbox.vhdx.double-attached")));
    const char *calls = wcs_calls();
    ck_assert_msg(strstr(calls, "HcsAttachLayerStorageFilter HcsDetachLayerStorageFilter "
                                "OpenVirtualDisk DetachVirtualDisk ") != NULL,
                  "%s", calls);

    /* The same scratch again: attached and filtered, not made again. */
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    calls = wcs_calls();
    ck_assert_msg(strstr(calls, "DetachVirtualDisk OpenVirtualDisk AttachVirtualDisk "
                                "HcsGetLayerVhdMountPath HcsAttachLayerStorageFilter ") != NULL,
                  "%s", calls);
    ck_assert_int_eq(mounted_layers_unmount(m, &err), 0);
    mounted_layers_free(m);
}
END_TEST

START_TEST(a_mount_that_fails_half_way_undoes_itself)
{
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", "HcsAttachLayerStorageFilter");
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_int_lt(mount(&m, &err), 0);
    ck_assert_msg(strstr(err.msg, "HcsAttachLayerStorageFilter") != NULL, "%s", err.msg);
    const char *calls = wcs_calls();
    /* The filter may be there (its step was journaled): detached, then the disk. */
    ck_assert_msg(strstr(calls, "HcsAttachLayerStorageFilter HcsDetachLayerStorageFilter "
                                "OpenVirtualDisk DetachVirtualDisk ") != NULL,
                  "%s", calls);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), -ENOENT);
    ck_assert(!wcs_exists(wcs_path(0, "scratch\\sandbox.vhdx.double-attached")));
}
END_TEST

static bool
keep_none(void *arg, const struct mj_entry *e)
{
    (void)arg, (void)e;
    return false;
}

static int
undo(void *arg, const struct mj_entry *e, struct err *err)
{
    (void)arg;
    return layers_undo_entry(e, err);
}

/* Mounts, then "dies" (its record gone, the journal and the disk kept); the replay undoes it. */
static void
mount_crash_replay(void)
{
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    mjournal_free(journal);
    ck_assert_int_eq(mjournal_open(wcs_path(0, "mounts"), &journal, &err), 0);
    struct mj_replay_stats st = {0};
    ck_assert_msg(mjournal_replay(journal, keep_none, undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.undone, 1);
    ck_assert_uint_eq(st.failed, 0);
}

START_TEST(an_entry_left_by_a_crash_is_undone_by_the_replay)
{
    struct err err = {0};
    mount_crash_replay();
    const char *calls = wcs_calls();
    ck_assert_msg(strstr(calls, "HcsAttachLayerStorageFilter HcsDetachLayerStorageFilter "
                                "OpenVirtualDisk DetachVirtualDisk ") != NULL,
                  "%s", calls);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), -ENOENT);
    ck_assert(!wcs_exists(wcs_path(0, "scratch\\sandbox.vhdx.double-attached")));
}
END_TEST

/*
 * hyperv: the utility VM attaches the scratch by SCSI, so the host only
 * makes and formats it; no attach, no volume, no filter. Its entry has
 * nothing on the host to undo, at an unmount or at a replay.
 */
START_TEST(a_vm_scratch_is_made_and_formatted_but_never_attached_on_the_host)
{
    list->vm_scratch = true;
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(wcs_calls(), "OpenVirtualDisk CreateVirtualDisk HcsFormatWritableLayerVhd ");
    const char *rootfs = mounted_layers_rootfs(m);
    ck_assert_msg(strstr(rootfs, "scratch\\sandbox.vhdx") != NULL, "rootfs %s", rootfs);
    ck_assert_uint_eq(mounted_layers_count(m), 2);
    ck_assert_str_eq(mounted_layers_layer_id(m, 0), G_TOP);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), 0);
    ck_assert_str_eq(mj_entry_get(e, "vm"), "1");
    ck_assert_str_eq(mj_entry_get(e, "step"), "create");
    ck_assert_ptr_null(mj_entry_get(e, "volume"));
    mj_entry_free(e);
    ck_assert(!wcs_exists(wcs_path(0, "scratch\\sandbox.vhdx.double-attached")));
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), -ENOENT);
    ck_assert_str_eq(wcs_calls(), "OpenVirtualDisk CreateVirtualDisk HcsFormatWritableLayerVhd ");

    /* Made again over the same scratch and left by a "crash": the replay detaches nothing. */
    mount_crash_replay();
    const char *calls = wcs_calls();
    ck_assert_msg(strstr(calls, "Attach") == NULL && strstr(calls, "Detach") == NULL &&
                      strstr(calls, "MountPath") == NULL,
                  "%s", calls);
    ck_assert_int_eq(mjournal_get(journal, rec.name, &e, &err), -ENOENT);
}
END_TEST

static Suite *
wcifs_suite(void)
{
    Suite *s = suite_create("layer_wcifs");
    TCase *tc = tcase_create("doubles");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_new_scratch_is_made_formatted_initialized_and_filtered);
    tcase_add_test(tc, a_mount_that_fails_half_way_undoes_itself);
    tcase_add_test(tc, an_entry_left_by_a_crash_is_undone_by_the_replay);
    tcase_add_test(tc, a_vm_scratch_is_made_and_formatted_but_never_attached_on_the_host);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(wcifs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
