/*
 * Typed layers: parsing of the three sources, overlay mount and unmount,
 * the journal entry that lets another process undo a mount (and the
 * record of berth before the journal), long lowerdir lists. Runs as root
 * (mount).
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "store/layer.h"
#include "store/mount_journal.h"
#include "tests/unit/testutil.h"

#define OVERLAYFS_MAGIC 0x794c7630

static char *base;
static struct mjournal *journal;
static const struct layer_mount_rec rec_c1 = {NULL, "container.c1.rootfs", "container:c1"};
static struct layer_mount_rec rec;

static void
setup(void)
{
    base = tu_tmpdir("layer");
    char *jdir = fs_path_join(base, "mounts");
    struct err err = {0};
    ck_assert_msg(mjournal_open(jdir, &journal, &err) == 0, "%s", err.msg);
    free(jdir);
    rec = rec_c1;
    rec.journal = journal;
}

static void
teardown(void)
{
    tu_sh("umount %s/merged 2>/dev/null", base);
    mjournal_free(journal);
    journal = NULL;
    tu_rmtree(base);
    free(base);
}

/* How many entries the journal holds. */
static size_t
journal_count(void)
{
    struct mj_entry **v = NULL;
    size_t n = 0;
    struct err err = {0};
    ck_assert_msg(mjournal_list(journal, NULL, &v, &n, NULL, &err) == 0, "%s", err.msg);
    mj_entry_list_free(v, n);
    return n;
}

static char *
path_in(const char *dir, const char *name)
{
    char *p = fs_path_join(dir, name);
    ck_assert_ptr_nonnull(p);
    return p;
}

static bool
is_overlay_mount(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == OVERLAYFS_MAGIC;
}

static char *
read_all(const char *path)
{
    char *out = NULL;
    struct err err = {0};
    ck_assert_msg(fs_read_file(path, 4096, &out, NULL, &err) == 0, "%s", err.msg);
    return out;
}

START_TEST(layer_parse_validates_each_source)
{
    struct layer_list *l = NULL;
    struct err err = {0};
    const char *linux_dirs[] = {"/s/bottom", "/s/top"};
    ck_assert_int_eq(layer_list_parse_linux(linux_dirs, 2, &l, &err), 0);
    ck_assert_int_eq(l->type, LAYER_LINUX_DIR);
    ck_assert_uint_eq(l->count, 2);
    ck_assert_str_eq(l->layers[0].path, "/s/bottom");
    ck_assert_str_eq(l->layers[1].path, "/s/top");
    layer_list_free(l);
    const char *bad_linux[] = {"/s/a:b"};
    ck_assert_int_eq(layer_list_parse_linux(bad_linux, 1, &l, &err), -EINVAL);
    const char *rel_linux[] = {"s/a"};
    ck_assert_int_eq(layer_list_parse_linux(rel_linux, 1, &l, &err), -EINVAL);
    ck_assert_int_eq(layer_list_parse_linux(linux_dirs, 0, &l, &err), -EINVAL);

    /* LayerFolders: top-most first, scratch last; an id per layer. */
    const char *folders[] = {"C:\\layers\\top", "C:\\layers\\base", "C:\\scratch\\c1"};
    const char *ids[] = {"6ba9cac1-7086-5ee9-a197-c465d3f50ad7",
                         "02740e08-d1d3-5715-9c08-c255eab4ca01"};
    ck_assert_int_eq(layer_list_parse_wcifs(folders, ids, 3, &l, &err), 0);
    ck_assert_int_eq(l->type, LAYER_WCIFS);
    ck_assert_uint_eq(l->count, 2);
    ck_assert_str_eq(l->layers[0].path, "C:\\layers\\base");
    ck_assert_str_eq(l->layers[0].layer_id, ids[1]);
    ck_assert_str_eq(l->layers[1].path, "C:\\layers\\top");
    ck_assert_str_eq(l->layers[1].layer_id, ids[0]);
    ck_assert_str_eq(l->scratch, "C:\\scratch\\c1");
    layer_list_free(l);
    ck_assert_int_eq(layer_list_parse_wcifs(folders + 2, ids, 1, &l, &err), -EINVAL);
    ck_assert_int_eq(layer_list_parse_wcifs(folders, NULL, 3, &l, &err), -EINVAL);
    const char *dup[] = {"C:\\l\\a", "c:\\L\\A", "C:\\s"};
    ck_assert_int_eq(layer_list_parse_wcifs(dup, ids, 3, &l, &err), -EINVAL);
    const char *dup_ids[] = {ids[0], "6BA9CAC1-7086-5EE9-A197-C465D3F50AD7"};
    ck_assert_int_eq(layer_list_parse_wcifs(folders, dup_ids, 3, &l, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "listed twice"));
    const char *bad_ids[] = {ids[0], "not-a-guid"};
    ck_assert_int_eq(layer_list_parse_wcifs(folders, bad_ids, 3, &l, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "not-a-guid"));
    const char *relw[] = {"layers\\a", "C:\\s"};
    ck_assert_int_eq(layer_list_parse_wcifs(relw, ids, 2, &l, &err), -EINVAL);

    /* CIMs: top-most first, each forked from the next. */
    const char *cims[] = {"C:\\cim\\top.cim", "C:\\cim\\base.cim"};
    ck_assert_int_eq(layer_list_parse_cimfs(cims, ids, 2, "C:\\scratch\\c1", &l, &err), 0);
    ck_assert_int_eq(l->type, LAYER_CIMFS);
    ck_assert_str_eq(l->layers[0].path, "C:\\cim\\base.cim");
    ck_assert_str_eq(l->layers[1].layer_id, ids[0]);
    ck_assert_str_eq(l->scratch, "C:\\scratch\\c1");
    layer_list_free(l);
    const char *vhd[] = {"C:\\cim\\layer.vhd"};
    ck_assert_int_eq(layer_list_parse_cimfs(vhd, ids, 1, "C:\\s", &l, &err), -EINVAL);
    ck_assert_int_eq(layer_list_parse_cimfs(cims, ids, 2, NULL, &l, &err), -EINVAL);
    ck_assert_int_eq(layer_list_parse_cimfs(cims, ids, 0, "C:\\s", &l, &err), -EINVAL);
}
END_TEST

START_TEST(layer_windows_types_are_not_supported_on_linux)
{
    struct layer_list *l = NULL;
    struct mounted_layers *m = NULL;
    struct err err = {0};
    const char *folders[] = {"C:\\l\\base", "C:\\s"};
    const char *ids[] = {"02740e08-d1d3-5715-9c08-c255eab4ca01"};
    ck_assert_int_eq(layer_list_parse_wcifs(folders, ids, 2, &l, &err), 0);
    ck_assert_int_eq(layers_mount(l, base, "/nonexistent", &rec, &m, &err), -ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err.msg, "wcifs layers need Windows"));
    layer_list_free(l);
    const char *cims[] = {"C:\\c\\x.cim"};
    ck_assert_int_eq(layer_list_parse_cimfs(cims, ids, 1, "C:\\s", &l, &err), 0);
    ck_assert_int_eq(layers_mount(l, base, "/nonexistent", &rec, &m, &err), -ENOTSUP);
    layer_list_free(l);
    ck_assert_uint_eq(journal_count(), 0);
    /* An entry of a Windows mount stays on Linux: nothing here can undo it. */
    struct mj_entry *e = mj_entry_new("container.w.rootfs", "container:w", "wcifs");
    ck_assert_int_eq(layers_undo_entry(e, &err), -ENOTSUP);
    mj_entry_free(e);
}
END_TEST

static int
replay_undo(void *arg, const struct mj_entry *e, struct err *err)
{
    (void)arg;
    return layers_undo_entry(e, err);
}

/* Two lower layers: bottom has a, b; top overrides b, adds c. */
static struct layer_list *
two_layers(void)
{
    char *bottom = path_in(base, "bottom"), *top = path_in(base, "top");
    char *p;
    tu_write(p = path_in(bottom, "a"), "a-bottom", 8);
    free(p);
    tu_write(p = path_in(bottom, "b"), "b-bottom", 8);
    free(p);
    tu_write(p = path_in(top, "b"), "b-top", 5);
    free(p);
    tu_write(p = path_in(top, "c"), "c-top", 5);
    free(p);
    const char *dirs[] = {bottom, top};
    struct layer_list *l = NULL;
    struct err err = {0};
    ck_assert_msg(layer_list_parse_linux(dirs, 2, &l, &err) == 0, "%s", err.msg);
    free(bottom), free(top);
    return l;
}

START_TEST(layers_mount_two_layers_with_scratch)
{
    struct layer_list *l = two_layers();
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(layers_mount(l, scratch, merged, &rec, &m, &err) == 0, "%s", err.msg);
    const char *root = mounted_layers_rootfs(m);
    ck_assert_str_eq(root, merged);
    ck_assert(is_overlay_mount(root));
    char *p, *c;
    c = read_all(p = path_in(root, "a"));
    free(p);
    ck_assert_str_eq(c, "a-bottom");
    free(c);
    c = read_all(p = path_in(root, "b"));
    free(p);
    ck_assert_str_eq(c, "b-top");
    free(c);
    /* Writes land in the scratch's upper dir, not in the layers. */
    tu_write(p = path_in(root, "a"), "changed", 7);
    free(p);
    c = read_all(p = path_in(base, "bottom/a"));
    free(p);
    ck_assert_str_eq(c, "a-bottom");
    free(c);
    c = read_all(p = path_in(scratch, "upper/a"));
    free(p);
    ck_assert_str_eq(c, "changed");
    free(c);
    /* The journal entry says what to undo. */
    struct mj_entry *e = NULL;
    ck_assert_msg(mjournal_get(journal, "container.c1.rootfs", &e, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(e->kind, "overlay");
    ck_assert_str_eq(e->owner, "container:c1");
    ck_assert_str_eq(mj_entry_get(e, "target"), merged);
    mj_entry_free(e);

    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert(!is_overlay_mount(merged));
    ck_assert_int_eq(mjournal_get(journal, "container.c1.rootfs", &e, &err), -ENOENT);
    /* Idempotent. */
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    layer_list_free(l);
    free(scratch), free(merged);
}
END_TEST

/* How many of this process's descriptors are on an overlay. */
static int
overlay_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++) {
        struct statfs sf;
        if (fstatfs(fd, &sf) == 0 && sf.f_type == OVERLAYFS_MAGIC)
            n++;
    }
    return n;
}

START_TEST(layers_unmount_retires_the_overlay_until_released)
{
    /* The unmount detaches the overlay at once (the target is free) and
     * keeps it alive by a descriptor, so the sync of the upper filesystem
     * at its end is not the unmount's to wait for (a container's delete):
     * it ends at layers_release_retired (the job after the answer). */
    struct layer_list *l = two_layers();
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(layers_mount(l, scratch, merged, &rec, &m, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(overlay_fds(), 0);
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert(!is_overlay_mount(merged));
    ck_assert_int_eq(overlay_fds(), 1);
    /* The target can be mounted again meanwhile (a new container of the
     * name has a scratch of its own: the old one was renamed away). */
    mounted_layers_free(m);
    char *scratch2 = path_in(base, "scratch2");
    ck_assert_msg(layers_mount(l, scratch2, merged, &rec, &m, &err) == 0, "%s", err.msg);
    free(scratch2);
    ck_assert(is_overlay_mount(merged));
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(overlay_fds(), 2);
    layers_release_retired();
    ck_assert_int_eq(overlay_fds(), 0);
    ck_assert(!is_overlay_mount(merged));
    mounted_layers_free(m);
    layer_list_free(l);
    free(scratch), free(merged);
}
END_TEST

START_TEST(layers_journal_lets_another_process_unmount)
{
    struct layer_list *l = two_layers();
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* A daemon that mounts and dies without unmounting. */
        struct mounted_layers *m = NULL;
        struct err err = {0};
        _exit(layers_mount(l, scratch, merged, &rec, &m, &err) == 0 ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert(is_overlay_mount(merged));

    /* The next daemon: the owner is gone, replay undoes the mount. */
    struct mj_replay_stats st = {0};
    struct err err = {0};
    ck_assert_msg(mjournal_replay(journal, NULL, replay_undo, NULL, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.undone, 1);
    ck_assert(!is_overlay_mount(merged));
    ck_assert_uint_eq(journal_count(), 0);
    layer_list_free(l);
    free(scratch), free(merged);
}
END_TEST

START_TEST(layers_unmount_owner_undoes_each_of_its_mounts)
{
    struct layer_list *l = two_layers();
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(layers_mount(l, scratch, merged, &rec, &m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m); /* forgotten, as by a daemon that restarted */
    /* Another owner's entry is not touched. */
    struct mj_entry *e = mj_entry_new("container.c2.rootfs", "container:c2", "overlay");
    ck_assert_int_eq(mj_entry_set(e, "target", "/nonexistent/c2", &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "rootfs", "/nonexistent/c2", &err), 0);
    ck_assert_int_eq(mjournal_put(journal, e, &err), 0);
    mj_entry_free(e);
    ck_assert_msg(layers_unmount_owner(journal, "container:c1", &err) == 0, "%s", err.msg);
    ck_assert(!is_overlay_mount(merged));
    ck_assert_uint_eq(journal_count(), 1);
    ck_assert_msg(layers_unmount_owner(journal, "container:c1", &err) == 0, "%s", err.msg);
    layer_list_free(l);
    free(scratch), free(merged);
}
END_TEST

START_TEST(layers_legacy_record_still_unmounts)
{
    /* A container made by berth before the journal: its record in scratch. */
    struct layer_list *l = two_layers();
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    char *up = path_in(scratch, "upper"), *wk = path_in(scratch, "work");
    ck_assert_int_eq(tu_sh("mkdir -p %s %s %s && mount -t overlay overlay -o "
                           "lowerdir=%s:%s,upperdir=%s,workdir=%s "
                           "%s",
                           up, wk, merged, l->layers[1].path, l->layers[0].path, up, wk, merged),
                     0);
    ck_assert(is_overlay_mount(merged));
    char *record = path_in(scratch, LAYERS_RECORD_NAME);
    char text[1024];
    int n =
        snprintf(text, sizeof(text),
                 "berth-mounted-layers 1\ntype linux-dir\ntarget %s\nrootfs %s\n", merged, merged);
    tu_write(record, text, (size_t)n);
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mounted_layers_load(record, &m, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(mounted_layers_rootfs(m), merged);
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert(!is_overlay_mount(merged));
    mounted_layers_free(m);
    ck_assert_int_eq(mounted_layers_load(record, &m, &err), -ENOENT);
    tu_write(record, "berth-mounted-layers 1\ntype linux-dir\n", 38);
    ck_assert_int_eq(mounted_layers_load(record, &m, &err), -EINVAL);
    free(record), free(scratch), free(merged), free(up), free(wk);
    layer_list_free(l);
}
END_TEST

START_TEST(layers_mount_many_long_paths)
{
    /* 40 layers with long paths: over a page of mount options. */
    enum { N = 40 };
    char *dirs[N];
    char long_name[160];
    memset(long_name, 'x', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    for (int i = 0; i < N; i++) {
        ck_assert_int_ge(asprintf(&dirs[i], "%s/%s-%02d", base, long_name, i), 0);
        char *f = NULL;
        ck_assert_int_ge(asprintf(&f, "%s/layer-%02d", dirs[i], i), 0);
        tu_write(f, "x", 1);
        free(f);
    }
    char *top = NULL;
    ck_assert_int_ge(asprintf(&top, "%s/who", dirs[N - 1]), 0);
    tu_write(top, "top", 3);
    char *bottom = NULL;
    ck_assert_int_ge(asprintf(&bottom, "%s/who", dirs[0]), 0);
    tu_write(bottom, "bottom", 6);
    struct layer_list *l = NULL;
    struct err err = {0};
    ck_assert_int_eq(layer_list_parse_linux((const char *const *)dirs, N, &l, &err), 0);
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    struct mounted_layers *m = NULL;
    ck_assert_msg(layers_mount(l, scratch, merged, &rec, &m, &err) == 0, "%s", err.msg);
    char *p, *c;
    c = read_all(p = path_in(merged, "who"));
    free(p);
    bool top_wins = strcmp(c, "top") == 0;
    free(c);
    struct stat st;
    bool all = true;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "layer-%02d", i);
        p = path_in(merged, name);
        all = all && stat(p, &st) == 0;
        free(p);
    }
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    ck_assert(top_wins);
    ck_assert(all);
    layer_list_free(l);
    for (int i = 0; i < N; i++)
        free(dirs[i]);
    free(top), free(bottom), free(scratch), free(merged);
}
END_TEST

START_TEST(layers_single_layer_without_scratch_is_used_as_is)
{
    char *only = path_in(base, "only");
    ck_assert_int_eq(mkdir(only, 0755), 0);
    const char *dirs[] = {only};
    struct layer_list *l = NULL;
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_int_eq(layer_list_parse_linux(dirs, 1, &l, &err), 0);
    ck_assert_msg(layers_mount(l, NULL, NULL, NULL, &m, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(mounted_layers_rootfs(m), only);
    ck_assert_uint_eq(journal_count(), 0);
    ck_assert_int_eq(mounted_layers_unmount(m, &err), 0);
    mounted_layers_free(m);
    layer_list_free(l);
    struct layer_list *l2 = two_layers();
    ck_assert_int_eq(layers_mount(l2, NULL, NULL, NULL, &m, &err), -EINVAL);
    /* A mount that is made needs its journal. */
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    ck_assert_int_eq(layers_mount(l2, scratch, merged, NULL, &m, &err), -EINVAL);
    ck_assert(!is_overlay_mount(merged));
    free(scratch), free(merged);
    layer_list_free(l2);
    free(only);
}
END_TEST

static Suite *
layer_suite(void)
{
    Suite *s = suite_create("store_layer");
    TCase *tc = tcase_create("layer");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, layer_parse_validates_each_source);
    tcase_add_test(tc, layer_windows_types_are_not_supported_on_linux);
    tcase_add_test(tc, layers_mount_two_layers_with_scratch);
    tcase_add_test(tc, layers_journal_lets_another_process_unmount);
    tcase_add_test(tc, layers_unmount_owner_undoes_each_of_its_mounts);
    tcase_add_test(tc, layers_unmount_retires_the_overlay_until_released);
    tcase_add_test(tc, layers_legacy_record_still_unmounts);
    tcase_add_test(tc, layers_mount_many_long_paths);
    tcase_add_test(tc, layers_single_layer_without_scratch_is_used_as_is);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(layer_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
