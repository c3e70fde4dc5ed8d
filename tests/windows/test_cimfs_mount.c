/*
 * LAYER_CIMFS mounts (store/layer_cimfs_windows.c through store/layer.h)
 * against the TEST DOUBLE of cimfs.dll (tests/doubles/cimfs/), on images
 * this suite writes with store/cim_writer: the top-most CIM mounted under
 * a volume GUID journaled before the mount, the record a container
 * document needs, unmount and its journal entry, a failed mount or a
 * failed journal write that leaves nothing, and the replay after a crash
 * that dismounts what the dead daemon left. The double is not CimFS: no
 * volume appears; its mounts are files that outlive the process, as a
 * real mount outlives berthd.
 */
#include "store/layer.h"

#include <windows.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cimfs_tar.h"
#include "store/cimfs_api.h"
#include "store/cim_writer.h"
#include "store/mount_journal.h"

#define TOP_ID "6ba9cac1-7086-5ee9-a197-c465d3f50ad7"
#define BASE_ID "02740e08-d1d3-5715-9c08-c255eab4ca01"
#define ENTRY "container.build-1.rootfs"
#define OWNER "container:build-1"

static char dbl_path[MAX_PATH + 32];
static char rec_dir[MAX_PATH + 64];
static char cim_dir[MAX_PATH + 80], jdir[MAX_PATH + 80];
static char top_cim[MAX_PATH + 100], base_cim[MAX_PATH + 100], scratch[MAX_PATH + 100];
static struct mjournal *journal;
static struct layer_list *list;

static void
rm_tree(const char *dir)
{
    char pat[MAX_PATH * 2];
    snprintf(pat, sizeof(pat), "%s\\*", dir);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    if (f != INVALID_HANDLE_VALUE) {
        do {
            if (strcmp(fd.cFileName, ".") == 0 || strcmp(fd.cFileName, "..") == 0)
                continue;
            char p[MAX_PATH * 2];
            snprintf(p, sizeof(p), "%s\\%s", dir, fd.cFileName);
            if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
                rm_tree(p);
            else
                DeleteFileA(p);
        } while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    RemoveDirectoryA(dir);
}

static const char *
slurp(const char *rel)
{
    static char out[65536];
    out[0] = '\0';
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\%s", rec_dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return out;
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    return out;
}

/* How many volumes the double has mounted now. */
static int
mounted(void)
{
    char pat[MAX_PATH * 2];
    snprintf(pat, sizeof(pat), "%s\\mounts\\*", rec_dir);
    WIN32_FIND_DATAA fd;
    HANDLE f = FindFirstFileA(pat, &fd);
    int n = 0;
    if (f != INVALID_HANDLE_VALUE) {
        do
            n += !(fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY);
        while (FindNextFileA(f, &fd));
        FindClose(f);
    }
    return n;
}

static void
write_images(void)
{
    struct cimfs_api *api = NULL;
    struct err err = {0};
    ck_assert_msg(cimfs_api_open(dbl_path, &api, &err) == 0, "%s", err.msg);
    struct tbuf b = {0}, c = {0};
    entry(&b, "Files", '5', NULL, NULL, NULL);
    entry(&b, "Files/base.txt", '0', "base", NULL, NULL);
    entry(&b, "Hives", '5', NULL, NULL, NULL);
    finish(&b);
    entry(&c, "Files", '5', NULL, NULL, NULL);
    entry(&c, "Files/top.txt", '0', "top", NULL, NULL);
    finish(&c);
    ck_assert_msg(cim_layer_write(api, cim_dir, NULL, "base.cim", tb_read, &b, NULL, &err) == 0,
                  "%s", err.msg);
    ck_assert_msg(cim_layer_write(api, cim_dir, "base.cim", "top.cim", tb_read, &c, NULL, &err) ==
                      0,
                  "%s", err.msg);
    free(b.p);
    free(c.p);
    cimfs_api_free(api);
}

static void
setup(void)
{
    static int n;
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    char *slash = strrchr(exe, '\\');
    if (slash)
        *slash = '\0';
    snprintf(dbl_path, sizeof(dbl_path), "%s\\cimfs-double\\cimfs.dll", exe);
    /* What cimfs_api_default() loads in this test build (it reads the C
     * runtime's environment, which _putenv updates with the process's). */
    static char env[MAX_PATH + 64];
    snprintf(env, sizeof(env), "BERTH_TEST_CIMFS_DLL=%s", dbl_path);
    _putenv(env);
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(rec_dir, sizeof(rec_dir), "%sberth-cimm-%lu-%d", tmp, GetCurrentProcessId(), ++n);
    CreateDirectoryA(rec_dir, NULL);
    snprintf(cim_dir, sizeof(cim_dir), "%s\\cims", rec_dir);
    CreateDirectoryA(cim_dir, NULL);
    snprintf(jdir, sizeof(jdir), "%s\\journal", rec_dir);
    snprintf(top_cim, sizeof(top_cim), "%s\\top.cim", cim_dir);
    snprintf(base_cim, sizeof(base_cim), "%s\\base.cim", cim_dir);
    snprintf(scratch, sizeof(scratch), "%s\\scratch", rec_dir);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_DIR", rec_dir);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", NULL);
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
    rm_tree(rec_dir);
}

static int
mount(struct mounted_layers **m, struct err *err)
{
    struct layer_mount_rec rec = {journal, ENTRY, OWNER};
    return layers_mount(list, NULL, NULL, &rec, m, err);
}

/* The volume GUID of the journal's entry, into id. */
static void
entry_volume(char id[64])
{
    struct mj_entry *e = NULL;
    struct err err = {0};
    ck_assert_msg(mjournal_get(journal, ENTRY, &e, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(e->kind, "cimfs");
    ck_assert_str_eq(e->owner, OWNER);
    ck_assert_ptr_nonnull(mj_entry_get(e, "volume"));
    snprintf(id, 64, "%s", mj_entry_get(e, "volume"));
    ck_assert_str_eq(mj_entry_get(e, "cim"), top_cim);
    mj_entry_free(e);
}

START_TEST(the_top_most_cim_is_mounted_under_the_journaled_volume)
{
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mount(&m, &err) == 0, "%s", err.msg);
    char id[64], line[512], vol[128];
    entry_volume(id);
    snprintf(line, sizeof(line), "CimMountImage flags=0 volume=%s %s", id, top_cim);
    ck_assert_msg(strstr(slurp("calls.log"), line), "%s\nnot in\n%s", line, slurp("calls.log"));
    ck_assert_int_eq(mounted(), 1);
    snprintf(vol, sizeof(vol), "\\\\?\\Volume{%s}\\", id);
    ck_assert_uint_eq(mounted_layers_count(m), 1);
    ck_assert_str_eq(mounted_layers_layer_id(m, 0), TOP_ID);
    ck_assert_str_eq(mounted_layers_layer_path(m, 0), vol);
    ck_assert_str_eq(mounted_layers_rootfs(m), vol);

    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    snprintf(line, sizeof(line), "CimDismountImage volume=%s", id);
    ck_assert_msg(strstr(slurp("calls.log"), line), "%s", slurp("calls.log"));
    ck_assert_int_eq(mounted(), 0);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    /* Twice is fine: the volume is no longer mounted. */
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
    ck_assert_msg(layers_mount(list, NULL, NULL, &rb, &b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(mounted(), 2);
    ck_assert_str_ne(mounted_layers_rootfs(a), mounted_layers_rootfs(b));
    ck_assert_msg(layers_unmount_owner(journal, "container:a", &err) == 0, "%s", err.msg);
    ck_assert_int_eq(mounted(), 1);
    ck_assert_msg(mounted_layers_unmount(b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(mounted(), 0);
    mounted_layers_free(a);
    mounted_layers_free(b);
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
    ck_assert_msg(strstr(slurp("calls.log"), "CimMountImage"), "the mount was not tried");
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
    ck_assert_int_eq(mounted(), 0);
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
    ck_assert_msg(!strstr(slurp("calls.log"), "CimMountImage"), "mounted without a journal entry");
    ck_assert_int_eq(mounted(), 0);
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
    entry_volume(id);
    /* The crash: the process forgets its mount; the journal and the volume stay. */
    mounted_layers_free(m);
    mjournal_free(journal);
    journal = NULL;
    ck_assert_int_eq(mounted(), 1);

    /* A first restart where cimfs.dll fails the dismount keeps the entry. */
    ck_assert_msg(mjournal_open(jdir, &journal, &err) == 0, "%s", err.msg);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "dismount");
    struct mj_replay_stats st = {0};
    ck_assert_msg(mjournal_replay(journal, keep_none, undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.failed, 1);
    ck_assert_uint_eq(st.undone, 0);
    entry_volume(id);
    ck_assert_int_eq(mounted(), 1);

    /* The next one undoes it. */
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", NULL);
    memset(&st, 0, sizeof(st));
    ck_assert_msg(mjournal_replay(journal, keep_none, undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.undone, 1);
    snprintf(line, sizeof(line), "CimDismountImage volume=%s", id);
    ck_assert_msg(strstr(slurp("calls.log"), line), "%s", slurp("calls.log"));
    ck_assert_int_eq(mounted(), 0);
    struct mj_entry *e = NULL;
    ck_assert_int_eq(mjournal_get(journal, ENTRY, &e, &err), -ENOENT);
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

static Suite *
cimfs_mount_suite(void)
{
    Suite *s = suite_create("cimfs_mount");
    TCase *tc = tcase_create("mount");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_top_most_cim_is_mounted_under_the_journaled_volume);
    tcase_add_test(tc, each_mount_gets_a_volume_of_its_own);
    tcase_add_test(tc, a_failed_mount_leaves_no_entry_and_no_volume);
    tcase_add_test(tc, a_journal_that_cannot_be_written_stops_the_mount_before_cimfs);
    tcase_add_test(tc, a_restart_after_a_crash_dismounts_what_was_left_and_removes_the_entry);
    tcase_add_test(tc, an_entry_journaled_but_never_mounted_undoes_cleanly);
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
