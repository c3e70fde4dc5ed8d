/*
 * store/rootfs_tar: a container's paths resolved inside its root
 * filesystem (symlinks followed, never out of it), the stat and the tar
 * names the engine gives, and uploads that land under the resolved
 * directory or, refused, leave nothing behind.
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "store/rootfs_tar.h"
#include "tests/unit/testutil.h"

static char *base, *rootfs;

static void
setup(void)
{
    base = tu_tmpdir("rootfs_tar");
    rootfs = fs_path_join(base, "rootfs");
    ck_assert_int_eq(tu_sh("cd %s && mkdir -p rootfs/etc rootfs/d/e outside && "
                           "echo host > outside/secret && echo c > rootfs/etc/secret && "
                           "echo f > rootfs/d/f && ln -s /etc rootfs/d/etc && "
                           "ln -s ../../../../.. rootfs/d/up && ln -s %s/outside rootfs/d/host",
                           base, base),
                     0);
}

static void
teardown(void)
{
    tu_rmtree(base);
    free(base);
    free(rootfs);
}

START_TEST(stat_resolves_inside_the_rootfs_and_names_as_the_engine)
{
    struct rootfs_stat st;
    struct err err = {0};
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/d/etc", NULL, &st, &err), 0);
    ck_assert_str_eq(st.name, "etc");
    ck_assert(S_ISLNK(st.mode));
    ck_assert_str_eq(st.link_target, "/etc");
    /* The host path a symlink names is the container's path, missing here. */
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/d/host/secret", NULL, &st, &err), -ENOENT);
    ck_assert_int_eq(rootfs_path_stat(rootfs, "d/up/etc/secret", NULL, &st, &err), 0);
    ck_assert_int_eq(st.size, 2);
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/../../../etc/secret", NULL, &st, &err), 0);
    ck_assert_int_eq(st.size, 2);
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/d/etc/", NULL, &st, &err), 0);
    ck_assert(S_ISDIR(st.mode));
    ck_assert_str_eq(st.name, "etc");
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/d/.", NULL, &st, &err), 0);
    ck_assert_str_eq(st.name, ".");
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/", NULL, &st, &err), 0);
    ck_assert_str_eq(st.name, "/");
    ck_assert_int_eq(rootfs_path_stat(rootfs, "/d/f/x", NULL, &st, &err), -EINVAL);
    ck_assert_int_eq(rootfs_path_stat(rootfs, "", NULL, &st, &err), -EINVAL);
}
END_TEST

struct mem {
    char *buf;
    size_t len;
};

static int
mem_write(void *ctx, const void *buf, size_t len)
{
    struct mem *m = ctx;
    m->buf = realloc(m->buf, m->len + len);
    memcpy(m->buf + m->len, buf, len);
    m->len += len;
    return 0;
}

/* The entry names of the tar of path, space-separated (caller frees). */
static char *
names_of(const char *path)
{
    struct mem m = {0};
    struct volume_tar_out out = {.write = mem_write, .ctx = &m};
    struct rootfs_stat st;
    struct err err = {0};
    ck_assert_msg(rootfs_tar_export(rootfs, path, NULL, &st, &out, &err) == 0, "%s", err.msg);
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    ck_assert_int_eq(archive_read_open_memory(a, m.buf, m.len), ARCHIVE_OK);
    char *names = calloc(1, 4096);
    struct archive_entry *e;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
        strcat(names, archive_entry_pathname(e));
        strcat(names, " ");
    }
    archive_read_free(a);
    free(m.buf);
    return names;
}

START_TEST(export_names_a_directory_by_its_basename_and_dot_by_dot)
{
    ck_assert_int_eq(tu_sh("rm -f %s/d/up %s/d/host", rootfs, rootfs), 0);
    char *n = names_of("/d/e");
    ck_assert_str_eq(n, "e/ ");
    free(n);
    n = names_of("/d/f");
    ck_assert_str_eq(n, "f ");
    free(n);
    n = names_of("/d/etc/.");
    ck_assert_str_eq(n, "./ ./secret ");
    free(n);
}
END_TEST

struct file_in {
    int fd;
};

static ssize_t
file_read(void *ctx, void *buf, size_t len)
{
    struct file_in *f = ctx;
    ssize_t n = read(f->fd, buf, len);
    return n < 0 ? -1 : n;
}

/* Imports the tar made by shell command mk (in a scratch directory, into t.tar). */
static int
import(const char *mk, const char *path, bool nodir, struct err *err)
{
    ck_assert_int_eq(tu_sh("mkdir -p %s/src && cd %s/src && rm -rf ./* && %s", base, base, mk), 0);
    char *tar = fs_path_join(base, "src/t.tar");
    struct file_in f = {.fd = open(tar, O_RDONLY)};
    ck_assert_int_ge(f.fd, 0);
    struct volume_tar_in in = {.read = file_read, .ctx = &f};
    char *notes = fs_path_join(base, "notes");
    struct rootfs_tar_in_opts o = {.no_dir_nondir = nodir, .notes = notes};
    int r = rootfs_tar_import(rootfs, path, &in, &o, NULL, err);
    free(notes);
    close(f.fd);
    free(tar);
    return r;
}

START_TEST(import_lands_under_the_resolved_directory_or_nowhere)
{
    struct err err = {0};
    /* Through the container's symlinks, into its own /etc. */
    ck_assert_int_eq(import("echo n > new && tar cf t.tar new", "/d/up/d/etc", false, &err), 0);
    ck_assert_int_eq(tu_sh("test -f %s/etc/new && ! test -e %s/new", rootfs, base), 0);
    /* Refused: an absolute name, with an entry before it; nothing of it stays. */
    ck_assert_int_eq(import("echo a > a && tar cf t.tar a -P /etc/hostname", "/d", false, &err),
                     -ERR_INVALID_CONTENT);
    ck_assert_int_eq(tu_sh("test \"$(ls -A %s/d | tr '\\n' ' ')\" = 'e etc f host up '", rootfs),
                     0);
    /* An entry under the container's symlink to the host is refused too. */
    ck_assert_int_eq(
        import("mkdir host && echo x > host/x && tar cf t.tar host/x", "/d", false, &err),
        -ERR_INVALID_CONTENT);
    ck_assert_int_eq(tu_sh("! test -e %s/outside/x", base), 0);
    /* noOverwriteDirNonDir: a file over the directory e is refused. */
    ck_assert_int_eq(import("echo x > e && tar cf t.tar e", "/d", true, &err),
                     -ERR_INVALID_CONTENT);
    ck_assert_int_eq(tu_sh("test -d %s/d/e", rootfs), 0);
    /* Not a directory, missing. */
    ck_assert_int_eq(import("echo x > y && tar cf t.tar y", "/d/f", false, &err), -EINVAL);
    ck_assert_int_eq(import("echo x > y && tar cf t.tar y", "/nope", false, &err), -ENOENT);
}
END_TEST

START_TEST(a_path_in_a_mount_is_the_path_inside_it_and_the_mount_point_keeps_its_name)
{
    char *rest = NULL, *top = NULL;
    ck_assert_int_eq(rootfs_path_in_mount("/data/x/y", "/data", &rest, &top), 1);
    ck_assert_str_eq(rest, "/x/y");
    ck_assert_ptr_null(top);
    free(rest);
    ck_assert_int_eq(rootfs_path_in_mount("/data/../data//x/.", "/data", &rest, &top), 1);
    ck_assert_str_eq(rest, "/x/.");
    free(rest);
    ck_assert_int_eq(rootfs_path_in_mount("data/", "/data", &rest, &top), 1);
    ck_assert_str_eq(rest, "/");
    ck_assert_str_eq(top, "data");
    free(rest);
    free(top);
    ck_assert_int_eq(rootfs_path_in_mount("/data/.", "/data", &rest, &top), 1);
    ck_assert_str_eq(rest, "/.");
    ck_assert_ptr_null(top);
    free(rest);
    ck_assert_int_eq(rootfs_path_in_mount("/database", "/data", &rest, &top), 0);
    ck_assert_int_eq(rootfs_path_in_mount("/", "/data", &rest, &top), 0);
    ck_assert_int_eq(rootfs_path_in_mount("/a/data", "/data", &rest, &top), 0);
    /* The mount's root as its own tar and stat: named as the mount point. */
    struct rootfs_stat st;
    struct err err = {0};
    char *d = fs_path_join(rootfs, "d/e");
    ck_assert_int_eq(rootfs_path_stat(d, "/", "data", &st, &err), 0);
    ck_assert_str_eq(st.name, "data");
    free(d);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("store_rootfs_tar");
    TCase *tc = tcase_create("rootfs_tar");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, stat_resolves_inside_the_rootfs_and_names_as_the_engine);
    tcase_add_test(tc, export_names_a_directory_by_its_basename_and_dot_by_dot);
    tcase_add_test(tc, import_lands_under_the_resolved_directory_or_nowhere);
    tcase_add_test(tc, a_path_in_a_mount_is_the_path_inside_it_and_the_mount_point_keeps_its_name);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
