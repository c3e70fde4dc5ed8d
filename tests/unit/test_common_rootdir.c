/*
 * common/rootdir: nothing resolves through a symlink or out of its base,
 * with openat2 and with the component walk; metadata calls touch the
 * entry, never what a symlink points to. And the daemon's sources never
 * call chdir or fchdir: the working directory is process-wide, and the
 * daemon's pool threads must never depend on it (issue 8).
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/rootdir.h"
#include "tests/unit/testutil.h"

static char *base;

static void
setup(void)
{
    base = tu_tmpdir("rootdir");
    ck_assert_int_eq(tu_sh("cd %s && mkdir -p d/e outside && echo s > outside/secret && "
                           "ln -s %s/outside d/out && ln -s .. d/up && echo f > d/f",
                           base, base),
                     0);
}

static void
teardown(void)
{
    rootdir_test_force_walk(false);
    tu_rmtree(base);
    free(base);
}

START_TEST(rootdir_open_dir_follows_no_symlink_and_stays_beneath)
{
    rootdir_test_force_walk(_i == 1);
    char *d = fs_path_join(base, "d");
    int root = rootdir_open(d);
    ck_assert_int_ge(root, 0);
    int fd = rootdir_open_dir(root, "e");
    ck_assert_int_ge(fd, 0);
    rootdir_close(fd);
    ck_assert_int_eq(rootdir_open_dir(root, "out"), -ELOOP);
    ck_assert_int_eq(rootdir_open_dir(root, "out/x"), -ELOOP);
    ck_assert_int_eq(rootdir_open_dir(root, "up"), -ELOOP);
    ck_assert_int_eq(rootdir_open_dir(root, "f"), -ENOTDIR);
    ck_assert_int_eq(rootdir_open_dir(root, "missing"), -ENOENT);
    /* ".." is refused outright, whichever way the path is resolved. */
    ck_assert_int_lt(rootdir_open_dir(root, "../outside"), 0);
    ck_assert_int_lt(rootdir_open_dir(root, "e/../../outside"), 0);
    ck_assert_int_eq(rootdir_open_node(root, "out/secret"), -ELOOP);
    int node = rootdir_open_node(root, "out");
    ck_assert_int_ge(node, 0); /* the symlink itself */
    struct stat st;
    ck_assert_int_eq(fstat(node, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    rootdir_close(node);
    rootdir_close(root);
    free(d);
}
END_TEST

START_TEST(rootdir_metadata_calls_touch_the_symlink_not_its_target)
{
    char *d = fs_path_join(base, "d");
    char *secret = fs_path_join(base, "outside/secret");
    ck_assert_int_eq(tu_sh("ln -s ../outside/secret %s/lnk", d), 0);
    int root = rootdir_open(d);
    ck_assert_int_ge(root, 0);
    struct stat before, after;
    ck_assert_int_eq(stat(secret, &before), 0);
    ck_assert_int_eq(rootdir_set_owner(root, "lnk", 1234, 1234), 0);
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    ck_assert_int_eq(rootdir_set_times(root, "lnk", ts), 0);
    int r = rootdir_set_xattr(root, "lnk", "trusted.berth-test", "v", 1);
    ck_assert_msg(r == 0, "set xattr on a symlink: %s", strerror(-r));
    ck_assert_int_eq(stat(secret, &after), 0);
    ck_assert_uint_eq(after.st_uid, before.st_uid);
    ck_assert_int_eq(after.st_mtime, before.st_mtime);
    char v[8];
    ck_assert_int_lt(getxattr(secret, "trusted.berth-test", v, sizeof(v)), 0);
    char *lnk = fs_path_join(d, "lnk");
    ck_assert_int_eq(lgetxattr(lnk, "trusted.berth-test", v, sizeof(v)), 1);
    ck_assert_int_eq(lstat(lnk, &after), 0);
    ck_assert_uint_eq(after.st_uid, 1234);
    ck_assert_int_eq(after.st_mtime, 1000000000);
    /* A hard link of the symlink is a link of the symlink. */
    ck_assert_int_eq(rootdir_link(root, "lnk", root, "lnk2"), 0);
    char *lnk2 = fs_path_join(d, "lnk2");
    ck_assert_int_eq(lstat(lnk2, &after), 0);
    ck_assert(S_ISLNK(after.st_mode));
    ck_assert_int_eq(rootdir_create_file(root, "lnk", 0644), -EEXIST);
    ck_assert_int_lt(rootdir_open_file(root, "lnk"), 0);
    rootdir_close(root);
    free(lnk2), free(lnk), free(secret), free(d);
}
END_TEST

/* ---- no chdir in the daemon ------------------------------------------------ */

/* src with comments and string literals blanked out. */
static void
strip_comments(char *s)
{
    for (char *p = s; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end ? end + 2 : p + strlen(p);
            memset(p, ' ', (size_t)(stop - p));
            p = stop - 1;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                *p++ = ' ';
            if (!*p)
                break;
        } else if (*p == '"') {
            char *q = p + 1;
            while (*q && *q != '"')
                q += q[0] == '\\' && q[1] ? 2 : 1;
            memset(p, ' ', (size_t)(q - p) + (*q ? 1 : 0));
            p = *q ? q : q - 1;
        }
    }
}

/* The first call of one of the names in the file, or NULL. */
static const char *
forbidden_call(const char *src, int *line)
{
    static const char *const names[] = {"chdir", "fchdir", "archive_write_disk_new",
                                        "archive_read_disk_new", NULL};
    for (const char *p = src; *p; p++) {
        for (int i = 0; names[i]; i++) {
            size_t n = strlen(names[i]);
            if (strncmp(p, names[i], n) != 0)
                continue;
            if (p > src && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                            (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9')))
                continue;
            const char *q = p + n;
            while (*q == ' ' || *q == '\t' || *q == '\n')
                q++;
            if (*q != '(')
                continue;
            *line = 1;
            for (const char *c = src; c < p; c++)
                *line += *c == '\n';
            return names[i];
        }
    }
    return NULL;
}

static void
scan_dir(const char *rel, char *report, size_t len)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", BERTH_SOURCE_DIR, rel);
    DIR *d = opendir(dir);
    if (!d)
        return; /* not every tree has every directory */
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        char sub[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s/%s", rel, e->d_name);
        /* The container init runs in the container, a process of its own. */
        if (strcmp(sub, "runtime/init") == 0)
            continue;
        if (e->d_type == DT_DIR) {
            scan_dir(sub, report, len);
            continue;
        }
        if (n < 3 || (strcmp(e->d_name + n - 2, ".c") != 0 && strcmp(e->d_name + n - 2, ".h") != 0))
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", BERTH_SOURCE_DIR, sub);
        char *src = NULL;
        struct err err = {0};
        ck_assert_msg(fs_read_file(path, 16 << 20, &src, NULL, &err) == 0, "%s", err.msg);
        strip_comments(src);
        int line = 0;
        const char *what = forbidden_call(src, &line);
        if (what) {
            size_t o = strlen(report);
            snprintf(report + o, len - o, "  %s:%d calls %s()\n", sub, line, what);
        }
        free(src);
    }
    closedir(d);
}

/* A container's view: symlinks followed, but an absolute one and ".." start again at the root. */
START_TEST(rootdir_in_root_calls_follow_symlinks_but_never_leave_the_root)
{
    char *d = fs_path_join(base, "d");
    int root = rootdir_open(d);
    ck_assert_int_ge(root, 0);
    ck_assert_int_eq(
        tu_sh("ln -s / %s/abs && ln -s ../../../.. %s/e/far && ln -s /e %s/toe", d, d, d), 0);
    char where[PATH_MAX];
    /* "out" names the host's base/outside: inside the root that is /outside, missing. */
    ck_assert_int_eq(rootdir_open_dir_in_root(root, "out"), -ENOENT);
    ck_assert_int_eq(rootdir_resolve_in_root(root, "out", where, sizeof(where)), -ENOENT);
    ck_assert_int_eq(rootdir_open_dir_in_root(root, "../outside"), -ENOENT);
    ck_assert_int_eq(rootdir_resolve_in_root(root, "up/up/f", where, sizeof(where)), 2);
    ck_assert_str_eq(where, "/f");
    ck_assert_int_eq(rootdir_resolve_in_root(root, "e/far/toe", where, sizeof(where)), 2);
    ck_assert_str_eq(where, "/e");
    ck_assert_int_eq(rootdir_resolve_in_root(root, "", where, sizeof(where)), 1);
    ck_assert_str_eq(where, "/");
    ck_assert_int_eq(rootdir_resolve_in_root(root, "abs", where, 1), -ENAMETOOLONG);
    int fd = rootdir_open_dir_in_root(root, "abs/e/far");
    ck_assert_int_ge(fd, 0);
    struct os_stat a, b;
    ck_assert_int_eq(rootdir_stat(fd, "", &a), 0);
    ck_assert_int_eq(rootdir_stat(root, "", &b), 0);
    ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    rootdir_close(fd);
    ck_assert_int_eq(rootdir_open_dir_in_root(root, "f"), -ENOTDIR);
    fd = rootdir_open_dir_in_root(root, "");
    ck_assert_int_ge(fd, 0);
    rootdir_close(fd);
    rootdir_close(root);
    free(d);
}
END_TEST

/* The kernel answers EAGAIN to a RESOLVE_IN_ROOT lookup through ".."
 * whenever any rename anywhere ran during it (it cannot prove the ".."
 * stayed inside). Busy hosts rename all the time: a docker cp to
 * "/t/uplink" (a ".." symlink) failed a CI run with "Resource
 * temporarily unavailable". Every in-root call must retry instead. */
static atomic_bool renaming;

static void *
rename_loop(void *arg)
{
    const char *dir = arg;
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof(a), "%s/ra", dir);
    snprintf(b, sizeof(b), "%s/rb", dir);
    while (atomic_load(&renaming)) {
        if (rename(a, b) == 0)
            (void)rename(b, a);
    }
    return NULL;
}

START_TEST(rootdir_in_root_calls_retry_when_a_rename_races_dotdot)
{
    char *d = fs_path_join(base, "d");
    ck_assert_int_eq(
        tu_sh("mkdir -p %s/e/x/y && ln -s ../../../.. %s/e/x/y/up && touch %s/ra", d, d, base), 0);
    int root = rootdir_open(d);
    ck_assert_int_ge(root, 0);
    atomic_store(&renaming, true);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, rename_loop, base), 0);
    const char *deep = "e/x/y/up/e/x/y/up/e/x/y/up/e/x/y/up/e/../e/../e";
    int failures = 0, first = 0;
    char where[PATH_MAX];
    for (int i = 0; i < 20000; i++) {
        int fd = rootdir_open_dir_in_root(root, deep);
        ssize_t n = rootdir_resolve_in_root(root, deep, where, sizeof(where));
        int ffd = rootdir_open_in_root(root, "e/x/y/up/f");
        if (fd < 0 || n < 0 || ffd < 0) {
            failures++;
            if (!first)
                first = fd < 0 ? fd : n < 0 ? (int)n : ffd;
        }
        if (fd >= 0)
            rootdir_close(fd);
        if (ffd >= 0)
            close(ffd);
    }
    atomic_store(&renaming, false);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(failures == 0, "%d of 20000 rounds failed, first with %s", failures,
                  strerror(-first));
    ck_assert_int_eq(rootdir_resolve_in_root(root, deep, where, sizeof(where)), 2);
    ck_assert_str_eq(where, "/e");
    rootdir_close(root);
    free(d);
}
END_TEST

START_TEST(daemon_sources_never_call_chdir)
{
    static char report[8192];
    report[0] = '\0';
    static const char *const dirs[] = {"common", "store", "daemon", "api", "runtime", NULL};
    for (int i = 0; dirs[i]; i++)
        scan_dir(dirs[i], report, sizeof(report));
    ck_assert_msg(report[0] == '\0',
                  "the daemon changes or depends on the working directory (process-wide, shared "
                  "by every pool thread):\n%s",
                  report);
}
END_TEST

START_TEST(the_chdir_scan_finds_a_call)
{
    /* The scan itself: it must see through spacing, and not be fooled by
     * comments, strings or longer names. */
    char a[] = "int f(void) { return chdir (\"/\"); }";
    char b[] = "/* chdir(x) */ const char *s = \"fchdir(\"; int my_chdir(int);";
    char c[] = "x = archive_write_disk_new();";
    int line = 0;
    strip_comments(a);
    strip_comments(b);
    strip_comments(c);
    ck_assert_ptr_nonnull(forbidden_call(a, &line));
    ck_assert_ptr_null(forbidden_call(b, &line));
    ck_assert_ptr_nonnull(forbidden_call(c, &line));
}
END_TEST

/* rootdir_open_file reopens through a /proc/self/fd it keeps open; in a
 * child forked without exec that descriptor lists the parent's table, so
 * the child must walk its own /proc/self instead. */
START_TEST(rootdir_open_file_in_a_forked_child_opens_the_childs_file)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/d", base);
    int dfd = rootdir_open(p);
    ck_assert_int_ge(dfd, 0);
    int fd = rootdir_open_file(dfd, "f"); /* the parent's /proc/self/fd is kept from here */
    ck_assert_int_ge(fd, 0);
    close(fd);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int w = openat(dfd, "g", O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (w < 0 || write(w, "child\n", 6) != 6)
            _exit(2);
        close(w);
        int r = rootdir_open_file(dfd, "g");
        char buf[16] = "";
        _exit(r >= 0 && read(r, buf, sizeof(buf)) == 6 && memcmp(buf, "child\n", 6) == 0 ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    /* And the parent's own reopen still works. */
    fd = rootdir_open_file(dfd, "g");
    ck_assert_int_ge(fd, 0);
    close(fd);
    close(dfd);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("common_rootdir");
    TCase *tc = tcase_create("rootdir");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, rootdir_open_dir_follows_no_symlink_and_stays_beneath, 0, 2);
    tcase_add_test(tc, rootdir_metadata_calls_touch_the_symlink_not_its_target);
    tcase_add_test(tc, rootdir_in_root_calls_follow_symlinks_but_never_leave_the_root);
    tcase_add_test(tc, rootdir_in_root_calls_retry_when_a_rename_races_dotdot);
    tcase_add_test(tc, rootdir_open_file_in_a_forked_child_opens_the_childs_file);
    tcase_add_test(tc, daemon_sources_never_call_chdir);
    tcase_add_test(tc, the_chdir_scan_finds_a_call);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
