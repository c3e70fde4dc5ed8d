/*
 * LAYER_CIMFS mounts (store/layer_cimfs_windows.c through store/layer.h)
 * against the TEST DOUBLES of cimfs.dll (tests/doubles/cimfs/),
 * computestorage.dll and virtdisk.dll, on images this suite writes with
 * store/cim_writer: the top-most CIM mounted under a volume GUID
 * journaled before the mount, the scratch VHDX made, attached,
 * initialized and given the UnionFS filter over the CIM's Files, the
 * record a container document needs (the rootfs is the scratch's volume,
 * the one layer the CIM's), unmount in reverse and its journal entry, a
 * failed mount or a failed journal write that leaves nothing, a failure
 * half-way that undoes itself, and the replay after a crash that takes
 * away what the dead daemon left. The doubles are not CimFS: no volume
 * appears; their mounts are files that outlive the process, as a real
 * mount outlives berthd.
 */
#include "store/layer.h"

#include <windows.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fixtures/wclayer_tar.h"
#include "store/cim_writer.h"
#include "store/cimfs_api.h"
#include "store/mount_journal.h"
#include "cimfs_double.h"

#define TOP_ID "6ba9cac1-7086-5ee9-a197-c465d3f50ad7"
#define BASE_ID "02740e08-d1d3-5715-9c08-c255eab4ca01"
#define ENTRY "container.build-1.rootfs"
#define OWNER "container:build-1"

static char jdir[MAX_PATH + 100];
static char top_cim[MAX_PATH + 100], base_cim[MAX_PATH + 100], scratch[MAX_PATH + 100];
static char scratch_b[MAX_PATH + 100];
static struct mjournal *journal;
static struct layer_list *list;

static void
write_images(void)
{
    struct cimfs_api *api = NULL;
    struct err err = {0};
    ck_assert_msg(cimfs_api_open(cimfs_dbl_path, &api, &err) == 0, "%s", err.msg);
    struct tbuf b = {0}, c = {0};
    entry(&b, "Files", '5', NULL, NULL, NULL);
    entry(&b, "Files/base.txt", '0', "base", NULL, NULL);
    entry(&b, "Hives", '5', NULL, NULL, NULL);
    finish(&b);
    entry(&c, "Files", '5', NULL, NULL, NULL);
    entry(&c, "Files/top.txt", '0', "top", NULL, NULL);
    finish(&c);
    ck_assert_msg(cim_layer_write(api, cimfs_cims, NULL, "base.cim", tb_read, &b, NULL, &err) == 0,
                  "%s", err.msg);
    ck_assert_msg(
        cim_layer_write(api, cimfs_cims, "base.cim", "top.cim", tb_read, &c, NULL, &err) == 0, "%s",
        err.msg);
    free(b.p);
    free(c.p);
    cimfs_api_free(api);
}

static void
setup(void)
{
    /* The storage doubles log to wcs_log_dir; cimfs.dll's to cimfs_dir. */
    wcs_double_setup("cimm");
    cimfs_double_setup();
    /* What cimfs_api_default() loads in this test build (it reads the C
     * runtime's environment, which _putenv updates with the process's). */
    static char env[3][MAX_PATH * 2];
    snprintf(env[0], sizeof(env[0]), "BERTH_TEST_CIMFS_DLL=%s", cimfs_dbl_path);
    snprintf(env[1], sizeof(env[1]), "BERTH_TEST_HCS_STORAGE_DLL=%s", wcs_dbl_path);
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    *strrchr(exe, '\\') = '\0';
    snprintf(env[2], sizeof(env[2]), "BERTH_TEST_VIRTDISK_DLL=%s\\virtdisk-double\\virtdisk.dll",
             exe);
    for (int i = 0; i < 3; i++)
        _putenv(env[i]);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_DIR", wcs_log_dir);
    SetEnvironmentVariableA("BERTH_VIRTDISK_DOUBLE_FAIL", NULL);
    snprintf(jdir, sizeof(jdir), "%s\\journal", cimfs_dir);
    snprintf(top_cim, sizeof(top_cim), "%s\\top.cim", cimfs_cims);
    snprintf(base_cim, sizeof(base_cim), "%s\\base.cim", cimfs_cims);
    snprintf(scratch, sizeof(scratch), "%s\\scratch", cimfs_dir);
    snprintf(scratch_b, sizeof(scratch_b), "%s\\scratch-b", cimfs_dir);
    CreateDirectoryA(scratch, NULL);
    CreateDirectoryA(scratch_b, NULL);
    write_images();
    struct err err = {0};
    ck_assert_msg(mjournal_open(jdir, &journal, &err) == 0, "%s", err.msg);
    const char *cims[] = {top_cim, base_cim}, *ids[] = {TOP_ID, BASE_ID};
    ck_assert_msg(layer_list_parse_cimfs(cims, ids, 2, scratch, &list, &err) == 0, "%s", err.msg);
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

static int
mount(struct mounted_layers **m, struct err *err)
{
    struct layer_mount_rec rec = {journal, ENTRY, OWNER};
    return layers_mount(list, NULL, NULL, &rec, m, err);
}

/* The CIM volume's GUID of the journal's entry, into id; its step is want. */
static void
entry_volume(char id[64], const char *want)
{
    struct mj_entry *e = NULL;
    struct err err = {0};
    ck_assert_msg(mjournal_get(journal, ENTRY, &e, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(e->kind, "cimfs");
    ck_assert_str_eq(e->owner, OWNER);
    ck_assert_ptr_nonnull(mj_entry_get(e, "cim-guid"));
    snprintf(id, 64, "%s", mj_entry_get(e, "cim-guid"));
    ck_assert_str_eq(mj_entry_get(e, "cim"), top_cim);
    ck_assert_str_eq(mj_entry_get(e, "step"), want);
    mj_entry_free(e);
}

/* Is the scratch VHDX in dir attached (the virtdisk double's mark)? */
static bool
attached(const char *dir)
{
    char p[MAX_PATH * 2];
    snprintf(p, sizeof(p), "%s\\sandbox.vhdx.double-attached", dir);
    return wcs_exists(p);
}

START_TEST(the_top_most_cim_is_mounted_with_a_scratch_and_the_union_filter_over_it)
{
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    char id[64], line[512], vol[128];
    entry_volume(id, "filter");
    snprintf(line, sizeof(line), "CimMountImage flags=0 volume=%s %s", id, top_cim);
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), line), "%s\nnot in\n%s", line,
                  cimfs_slurp("calls.log"));
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);
    ck_assert_str_eq(wcs_calls(), "OpenVirtualDisk CreateVirtualDisk AttachVirtualDisk "
                                  "HcsFormatWritableLayerVhd HcsGetLayerVhdMountPath "
                                  "HcsInitializeWritableLayer HcsAttachOverlayFilter ");
    ck_assert(attached(scratch));
    /* UnionFS over the CIM volume's Files, named by the top layer's id. */
    snprintf(vol, sizeof(vol), "\\\\?\\Volume{%s}\\", id);
    char *ld = wcs_doc("HcsAttachOverlayFilter", 1);
    char files[160];
    snprintf(files, sizeof(files), "\\\\\\\\?\\\\Volume{%s}\\\\Files", id);
    ck_assert_msg(ld && strstr(ld, "\"FilterType\":\"UnionFS\"") && strstr(ld, TOP_ID) &&
                      strstr(ld, files),
                  "%s (want %s)", ld ? ld : "no document", files);
    free(ld);
    /* The rootfs is the scratch's volume; the one layer is the CIM's. */
    const char *rootfs = mounted_layers_rootfs(m);
    ck_assert_msg(strncmp(rootfs, "\\\\?\\Volume{", 11) == 0 && strcmp(rootfs, vol) != 0,
                  "rootfs %s", rootfs);
    ck_assert_uint_eq(mounted_layers_count(m), 1);
    ck_assert_str_eq(mounted_layers_layer_id(m, 0), TOP_ID);
    ck_assert_str_eq(mounted_layers_layer_path(m, 0), vol);

    /* Undone in reverse: the filter, the VHDX, then the CIM. */
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    const char *calls = wcs_calls();
    ck_assert_msg(strstr(calls, "HcsAttachOverlayFilter HcsDetachOverlayFilter OpenVirtualDisk "
                                "DetachVirtualDisk "),
                  "%s", calls);
    ck_assert(!attached(scratch));
    snprintf(line, sizeof(line), "CimDismountImage volume=%s", id);
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), line), "%s", cimfs_slurp("calls.log"));
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    /* Twice is fine: nothing is mounted any more. */
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);

    /* The same scratch again: attached and filtered, not made or initialized again. */
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    calls = wcs_calls();
    ck_assert_msg(strstr(calls, "DetachVirtualDisk OpenVirtualDisk AttachVirtualDisk "
                                "HcsGetLayerVhdMountPath HcsAttachOverlayFilter "),
                  "%s", calls);
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
}
END_TEST

START_TEST(each_mount_gets_a_volume_of_its_own)
{
    struct mounted_layers *a = NULL, *b = NULL;
    struct err err = {0};
    struct layer_mount_rec ra = {journal, "container.a.rootfs", "container:a"};
    struct layer_mount_rec rb = {journal, "container.b.rootfs", "container:b"};
    ck_assert_msg(layers_mount(list, NULL, NULL, &ra, &a, &err) == 0, "%s", err.msg);
    ck_assert_msg(layers_mount(list, scratch_b, NULL, &rb, &b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("mounts"), 2);
    ck_assert(attached(scratch) && attached(scratch_b));
    ck_assert_str_ne(mounted_layers_rootfs(a), mounted_layers_rootfs(b));
    ck_assert_str_ne(mounted_layers_layer_path(a, 0), mounted_layers_layer_path(b, 0));
    ck_assert_msg(layers_unmount_owner(journal, "container:a", &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);
    ck_assert(!attached(scratch) && attached(scratch_b));
    ck_assert_msg(mounted_layers_unmount(b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    ck_assert(!attached(scratch_b));
    mounted_layers_free(a);
    mounted_layers_free(b);
}
END_TEST

START_TEST(a_failure_half_way_undoes_the_scratch_and_the_cim)
{
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", "HcsAttachOverlayFilter");
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_int_lt(mount(&m, &err), 0);
    ck_assert_msg(strstr(err.msg, "HcsAttachOverlayFilter"), "%s", err.msg);
    ck_assert_ptr_null(m);
    const char *calls = wcs_calls();
    ck_assert_msg(strstr(calls, "HcsAttachOverlayFilter HcsDetachOverlayFilter OpenVirtualDisk "
                                "DetachVirtualDisk "),
                  "%s", calls);
    ck_assert(!attached(scratch));
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), "CimDismountImage"), "%s",
                  cimfs_slurp("calls.log"));
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
}
END_TEST

START_TEST(a_failed_mount_leaves_no_entry_and_no_volume)
{
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "mount");
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_int_eq(mount(&m, &err), -EACCES);
    ck_assert_msg(strstr(err.msg, "mount cim") && strstr(err.msg, "top.cim"), "%s", err.msg);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), "CimMountImage"), "the mount was not tried");
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    /* No scratch over a CIM that is not there. */
    ck_assert_str_eq(wcs_calls(), "");
}
END_TEST

START_TEST(a_journal_that_cannot_be_written_stops_the_mount_before_cimfs)
{
    /* A directory where the entry's file must go: its rename fails. */
    char blocker[MAX_PATH * 2];
    snprintf(blocker, sizeof(blocker), "%s\\%s.mnt", jdir, ENTRY);
    ck_assert(CreateDirectoryA(blocker, NULL));
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_int_lt(mount(&m, &err), 0);
    ck_assert_msg(!strstr(cimfs_slurp("calls.log"), "CimMountImage"),
                  "mounted without a journal entry");
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    ck_assert_str_eq(wcs_calls(), "");
    RemoveDirectoryA(blocker);
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

START_TEST(a_restart_after_a_crash_dismounts_what_was_left_and_removes_the_entry)
{
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    char id[64], line[128];
    entry_volume(id, "filter");
    /* The crash: the process forgets its mount; the journal and the volume stay. */
    mounted_layers_free(m);
    mjournal_free(journal);
    journal = NULL;
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);

    /* A first restart where cimfs.dll fails the dismount keeps the entry. */
    ck_assert_msg(mjournal_open(jdir, &journal, &err) == 0, "%s", err.msg);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "dismount");
    struct mj_replay_stats st = {0};
    ck_assert_msg(mjournal_replay(journal, keep_none, undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.failed, 1);
    ck_assert_uint_eq(st.undone, 0);
    entry_volume(id, "filter");
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);
    ck_assert(!attached(scratch)); /* the scratch went first, the CIM could not */

    /* The next one undoes it. */
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", NULL);
    memset(&st, 0, sizeof(st));
    ck_assert_msg(mjournal_replay(journal, keep_none, undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.undone, 1);
    snprintf(line, sizeof(line), "CimDismountImage volume=%s", id);
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), line), "%s", cimfs_slurp("calls.log"));
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
}
END_TEST

/* An entry as a crash at step leaves it, before the step was made. */
static struct mj_entry *
entry_at(const char *step)
{
    struct mj_entry *e = mj_entry_new(ENTRY, OWNER, "cimfs");
    struct err err = {0};
    char vhd[MAX_PATH * 2];
    snprintf(vhd, sizeof(vhd), "%s\\sandbox.vhdx", scratch);
    ck_assert_int_eq(mj_entry_set(e, "cim-guid", "0c8d2f8e-4a7e-4d5b-9a0e-3d3c0b6f6a11", &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "cim", top_cim, &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "vhd", vhd, &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "rootfs", vhd, &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "step", step, &err), 0);
    return e;
}

START_TEST(an_entry_undoes_only_the_steps_it_journaled)
{
    struct err err = {0};
    /* Begun: nothing was made, nothing is called. */
    struct mj_entry *e = entry_at("begin");
    ck_assert_msg(layers_undo_entry(e, &err) == 0, "%s", err.msg);
    mj_entry_free(e);
    ck_assert_str_eq(wcs_calls(), "");
    ck_assert_msg(!strstr(cimfs_slurp("calls.log"), "CimDismountImage"), "%s",
                  cimfs_slurp("calls.log"));
    /* At the CIM: only its dismount (one never mounted is success). */
    e = entry_at("cim");
    ck_assert_msg(layers_undo_entry(e, &err) == 0, "%s", err.msg);
    mj_entry_free(e);
    ck_assert_str_eq(wcs_calls(), "");
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), "CimDismountImage"), "%s",
                  cimfs_slurp("calls.log"));
    /* At the attach: the VHDX (absent: nothing) and the CIM, no filter. */
    e = entry_at("attach");
    ck_assert_msg(layers_undo_entry(e, &err) == 0, "%s", err.msg);
    mj_entry_free(e);
    ck_assert_str_eq(wcs_calls(), "OpenVirtualDisk ");
    /* A step this berth does not know stays for one that does. */
    e = entry_at("later");
    ck_assert_int_eq(layers_undo_entry(e, &err), -EINVAL);
    mj_entry_free(e);
}
END_TEST

START_TEST(an_entry_journaled_but_never_mounted_undoes_cleanly)
{
    /* A crash between the journal write and CimMountImage. */
    struct mj_entry *e = mj_entry_new(ENTRY, OWNER, "cimfs");
    struct err err = {0};
    ck_assert_int_eq(mj_entry_set(e, "volume", "0c8d2f8e-4a7e-4d5b-9a0e-3d3c0b6f6a11", &err), 0);
    ck_assert_int_eq(
        mj_entry_set(e, "rootfs", "\\\\?\\Volume{0c8d2f8e-4a7e-4d5b-9a0e-3d3c0b6f6a11}\\", &err),
        0);
    ck_assert_msg(layers_undo_entry(e, &err) == 0, "%s", err.msg);
    /* One that names no volume cannot be undone: it stays for a person to look at. */
    struct mj_entry *bad = mj_entry_new(ENTRY, OWNER, "cimfs");
    ck_assert_int_eq(mj_entry_set(bad, "volume", "not-a-guid", &err), 0);
    ck_assert_int_eq(layers_undo_entry(bad, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "not-a-guid"), "%s", err.msg);
    mj_entry_free(e);
    mj_entry_free(bad);
}
END_TEST

/* ---- block CIMs: a merged one mounted with its sources ---- */

static char bdir[MAX_PATH + 100], btop[MAX_PATH + 120], bbase[MAX_PATH + 120];
static char bmerged[MAX_PATH + 120];

/* Block CIMs of the two layers and their merge, and a list of them in *out. */
static void
block_list(bool merged, struct layer_list **out)
{
    struct cimfs_api *api = NULL;
    struct err err = {0};
    snprintf(bdir, sizeof(bdir), "%s\\block", cimfs_dir);
    CreateDirectoryA(bdir, NULL);
    snprintf(btop, sizeof(btop), "%s\\top.cim", bdir);
    snprintf(bbase, sizeof(bbase), "%s\\base.cim", bdir);
    snprintf(bmerged, sizeof(bmerged), "%s\\top-merged.cim", bdir);
    ck_assert_msg(cimfs_api_open(cimfs_dbl_path, &api, &err) == 0, "%s", err.msg);
    struct tbuf b = {0}, c = {0};
    entry(&b, "Files", '5', NULL, NULL, NULL);
    entry(&b, "Files/base.txt", '0', "base", NULL, NULL);
    finish(&b);
    entry(&c, "Files", '5', NULL, NULL, NULL);
    entry(&c, "Files/.wh.base.txt", '0', NULL, NULL, NULL);
    finish(&c);
    ck_assert_msg(
        cim_block_layer_write(api, bbase, CIM_BLOCK_IMAGE, true, tb_read, &b, NULL, &err) == 0,
        "%s", err.msg);
    ck_assert_msg(
        cim_block_layer_write(api, btop, CIM_BLOCK_IMAGE, false, tb_read, &c, NULL, &err) == 0,
        "%s", err.msg);
    const char *src[] = {btop, bbase};
    ck_assert_msg(cim_block_merge(api, bmerged, CIM_MERGED_IMAGE, src, CIM_BLOCK_IMAGE, 2, &err) ==
                      0,
                  "%s", err.msg);
    free(b.p);
    free(c.p);
    cimfs_api_free(api);
    const char *cims[] = {btop, bbase}, *ids[] = {TOP_ID, BASE_ID};
    ck_assert_msg(layer_list_parse_cimfs(merged ? cims : cims + 1, merged ? ids : ids + 1,
                                         merged ? 2 : 1, scratch, out, &err) == 0,
                  "%s", err.msg);
    (*out)->block = true;
    if (merged)
        ck_assert_ptr_nonnull((*out)->merged = strdup(bmerged));
}

static int
mount_list(struct layer_list *l, struct mounted_layers **m, struct err *err)
{
    struct layer_mount_rec rec = {journal, ENTRY, OWNER};
    return layers_mount(l, NULL, NULL, &rec, m, err);
}

START_TEST(a_merged_block_cim_is_mounted_with_its_sources_top_most_first)
{
    struct layer_list *l = NULL;
    block_list(true, &l);
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount_list(l, &m, &err) == 0, "%s", err.msg);
    struct mj_entry *e = NULL;
    ck_assert_msg(mjournal_get(journal, ENTRY, &e, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(mj_entry_get(e, "block"), "1");
    ck_assert_str_eq(mj_entry_get(e, "merged"), bmerged);
    ck_assert_str_eq(mj_entry_get(e, "cim"), btop);
    ck_assert_str_eq(mj_entry_get(e, "step"), "filter");
    char line[MAX_PATH * 6], vol[128];
    snprintf(
        line, sizeof(line),
        "CimMergeMountImage n=3 flags=0x20 volume=%s %s\\merged.cim %s\\layer.cim %s\\layer.cim",
        mj_entry_get(e, "cim-guid"), bmerged, btop, bbase);
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), line), "%s\nnot in\n%s", line,
                  cimfs_slurp("calls.log"));
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);
    /* The same scratch and UnionFS steps as forked CIMs, over the merged volume. */
    ck_assert_str_eq(wcs_calls(), "OpenVirtualDisk CreateVirtualDisk AttachVirtualDisk "
                                  "HcsFormatWritableLayerVhd HcsGetLayerVhdMountPath "
                                  "HcsInitializeWritableLayer HcsAttachOverlayFilter ");
    snprintf(vol, sizeof(vol), "\\\\?\\Volume{%s}\\", mj_entry_get(e, "cim-guid"));
    ck_assert_uint_eq(mounted_layers_count(m), 1);
    ck_assert_str_eq(mounted_layers_layer_path(m, 0), vol);
    ck_assert_str_eq(mounted_layers_layer_id(m, 0), TOP_ID);
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    snprintf(line, sizeof(line), "CimDismountImage volume=%s", mj_entry_get(e, "cim-guid"));
    ck_assert_msg(strstr(cimfs_slurp("calls.log"), line), "%s", cimfs_slurp("calls.log"));
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    mj_entry_free(e);
    mounted_layers_free(m);
    layer_list_free(l);
}
END_TEST

START_TEST(one_block_layer_is_mounted_alone_as_a_single_file_cim)
{
    struct layer_list *l = NULL;
    block_list(false, &l);
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount_list(l, &m, &err) == 0, "%s", err.msg);
    char line[MAX_PATH * 3];
    snprintf(line, sizeof(line), "CimMountImage flags=32 volume=");
    const char *log = cimfs_slurp("calls.log");
    const char *at = strstr(log, line);
    snprintf(line, sizeof(line), " %s\\layer.cim\n", bbase);
    ck_assert_msg(at && strstr(at, line) && !strstr(log, "CimMergeMountImage"), "%s", log);
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    mounted_layers_free(m);
    layer_list_free(l);
}
END_TEST

START_TEST(a_failed_merged_mount_leaves_no_entry_and_a_crash_after_it_is_undone_at_replay)
{
    struct layer_list *l = NULL;
    block_list(true, &l);
    struct mounted_layers *m = NULL;
    struct err err = {0};
    /* Two block layers and no merged CIM: refused, nothing mounted. */
    char *keep = l->merged;
    l->merged = NULL;
    ck_assert_int_eq(mount_list(l, &m, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "no merged cim"), "%s", err.msg);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    l->merged = keep;
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "mount");
    ck_assert_int_eq(mount_list(l, &m, &err), -EACCES);
    ck_assert_msg(strstr(err.msg, "mount merged cim"), "%s", err.msg);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", NULL);
    /* Merged and mounted, then the scratch fails: the merged volume goes too. */
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", "HcsAttachOverlayFilter");
    ck_assert_int_lt(mount_list(l, &m, &err), 0);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    ck_assert(!attached(scratch));
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    SetEnvironmentVariableA("BERTH_HCS_STORAGE_DOUBLE_FAIL", NULL);
    /* A crash after the mount: the replay dismounts the merged volume. */
    ck_assert_msg(mount_list(l, &m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    mjournal_free(journal);
    journal = NULL;
    ck_assert_int_eq(cimfs_files_in("mounts"), 1);
    ck_assert_msg(mjournal_open(jdir, &journal, &err) == 0, "%s", err.msg);
    struct mj_replay_stats st = {0};
    ck_assert_msg(mjournal_replay(journal, keep_none, undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.undone, 1);
    ck_assert_int_eq(cimfs_files_in("mounts"), 0);
    ck_assert(!attached(scratch));
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    layer_list_free(l);
}
END_TEST

static Suite *
cimfs_mount_suite(void)
{
    Suite *s = suite_create("cimfs_mount");
    TCase *tc = tcase_create("mount");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_top_most_cim_is_mounted_with_a_scratch_and_the_union_filter_over_it);
    tcase_add_test(tc, each_mount_gets_a_volume_of_its_own);
    tcase_add_test(tc, a_failure_half_way_undoes_the_scratch_and_the_cim);
    tcase_add_test(tc, a_failed_mount_leaves_no_entry_and_no_volume);
    tcase_add_test(tc, a_journal_that_cannot_be_written_stops_the_mount_before_cimfs);
    tcase_add_test(tc, a_restart_after_a_crash_dismounts_what_was_left_and_removes_the_entry);
    tcase_add_test(tc, an_entry_undoes_only_the_steps_it_journaled);
    tcase_add_test(tc, an_entry_journaled_but_never_mounted_undoes_cleanly);
    tcase_add_test(tc, a_merged_block_cim_is_mounted_with_its_sources_top_most_first);
    tcase_add_test(tc, one_block_layer_is_mounted_alone_as_a_single_file_cim);
    tcase_add_test(tc,
                   a_failed_merged_mount_leaves_no_entry_and_a_crash_after_it_is_undone_at_replay);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cimfs_mount_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
