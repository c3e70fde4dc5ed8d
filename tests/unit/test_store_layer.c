/*
 * Typed layers: parsing of the three sources, overlay mount and unmount,
 * the crash record that lets another process undo a mount, long lowerdir
 * lists. Runs as root (mount).
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
#include "tests/unit/testutil.h"

#define OVERLAYFS_MAGIC 0x794c7630

static char *base;

static void
setup(void)
{
    base = tu_tmpdir("layer");
}

static void
teardown(void)
{
    tu_sh("umount %s/merged 2>/dev/null", base);
    tu_rmtree(base);
    free(base);
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

    /* LayerFolders: top-most first, scratch last. */
    const char *folders[] = {"C:\\layers\\top", "C:\\layers\\base", "C:\\scratch\\c1"};
    ck_assert_int_eq(layer_list_parse_wcifs(folders, 3, &l, &err), 0);
    ck_assert_int_eq(l->type, LAYER_WCIFS);
    ck_assert_uint_eq(l->count, 2);
    ck_assert_str_eq(l->layers[0].path, "C:\\layers\\base");
    ck_assert_str_eq(l->layers[1].path, "C:\\layers\\top");
    ck_assert_str_eq(l->scratch, "C:\\scratch\\c1");
    layer_list_free(l);
    ck_assert_int_eq(layer_list_parse_wcifs(folders + 2, 1, &l, &err), -EINVAL);
    const char *dup[] = {"C:\\l\\a", "c:\\L\\A", "C:\\s"};
    ck_assert_int_eq(layer_list_parse_wcifs(dup, 3, &l, &err), -EINVAL);
    const char *relw[] = {"layers\\a", "C:\\s"};
    ck_assert_int_eq(layer_list_parse_wcifs(relw, 2, &l, &err), -EINVAL);

    ck_assert_int_eq(layer_list_parse_cimfs("C:\\cim\\layer.cim", "abc-123", &l, &err), 0);
    ck_assert_int_eq(l->type, LAYER_CIMFS);
    ck_assert_str_eq(l->layers[0].layer_id, "abc-123");
    layer_list_free(l);
    ck_assert_int_eq(layer_list_parse_cimfs("C:\\cim\\layer.vhd", "x", &l, &err), -EINVAL);
    ck_assert_int_eq(layer_list_parse_cimfs("C:\\cim\\layer.cim", "", &l, &err), -EINVAL);
}
END_TEST

START_TEST(layer_windows_types_are_not_supported_on_linux)
{
    struct layer_list *l = NULL;
    struct mounted_layers *m = NULL;
    struct err err = {0};
    const char *folders[] = {"C:\\l\\base", "C:\\s"};
    ck_assert_int_eq(layer_list_parse_wcifs(folders, 2, &l, &err), 0);
    ck_assert_int_eq(layers_mount(l, base, "/nonexistent", &m, &err), -ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err.msg, "wcifs layers need the hcs driver on Windows"));
    layer_list_free(l);
    ck_assert_int_eq(layer_list_parse_cimfs("C:\\c\\x.cim", "id", &l, &err), 0);
    ck_assert_int_eq(layers_mount(l, base, "/nonexistent", &m, &err), -ENOTSUP);
    layer_list_free(l);
}
END_TEST

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
    ck_assert_msg(layers_mount(l, scratch, merged, &m, &err) == 0, "%s", err.msg);
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
    struct stat st;
    ck_assert_int_eq(stat(p = path_in(scratch, LAYERS_RECORD_NAME), &st), 0);
    free(p);

    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert(!is_overlay_mount(merged));
    ck_assert_int_ne(stat(p = path_in(scratch, LAYERS_RECORD_NAME), &st), 0);
    free(p);
    /* Idempotent. */
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    mounted_layers_free(m);
    layer_list_free(l);
    free(scratch), free(merged);
}
END_TEST

START_TEST(layers_record_lets_another_process_unmount)
{
    struct layer_list *l = two_layers();
    char *scratch = path_in(base, "scratch"), *merged = path_in(base, "merged");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* A daemon that mounts and dies without unmounting. */
        struct mounted_layers *m = NULL;
        struct err err = {0};
        _exit(layers_mount(l, scratch, merged, &m, &err) == 0 ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert(is_overlay_mount(merged));

    char *record = path_in(scratch, LAYERS_RECORD_NAME);
    struct mounted_layers *m = NULL;
    struct err err = {0};
    ck_assert_msg(mounted_layers_load(record, &m, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(mounted_layers_rootfs(m), merged);
    ck_assert_msg(mounted_layers_unmount(m, &err) == 0, "%s", err.msg);
    ck_assert(!is_overlay_mount(merged));
    mounted_layers_free(m);
    /* The record is gone: nothing left to undo. */
    ck_assert_int_eq(mounted_layers_load(record, &m, &err), -ENOENT);
    /* A record written before a mount that never happened unloads fine. */
    tu_write(record, "berth-mounted-layers 1\ntype linux-dir\n", 38);
    ck_assert_int_eq(mounted_layers_load(record, &m, &err), -EINVAL);
    free(record), free(scratch), free(merged);
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
    ck_assert_msg(layers_mount(l, scratch, merged, &m, &err) == 0, "%s", err.msg);
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
    ck_assert_msg(layers_mount(l, NULL, NULL, &m, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(mounted_layers_rootfs(m), only);
    ck_assert_int_eq(mounted_layers_unmount(m, &err), 0);
    mounted_layers_free(m);
    layer_list_free(l);
    struct layer_list *l2 = two_layers();
    ck_assert_int_eq(layers_mount(l2, NULL, NULL, &m, &err), -EINVAL);
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
    tcase_add_test(tc, layers_record_lets_another_process_unmount);
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
