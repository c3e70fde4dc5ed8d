/*
 * store/cp_pending with store/rootfs_tar's uploads, against a container
 * that writes its own tree while berth works there: nothing berth reads
 * back (note, journal) is ever in the container's tree, a journal forged
 * there is not replayed, a crash mid-merge is undone from the daemon's
 * journal and leaves nothing of berth's behind, a note waits while its
 * root is missing or not mounted but not for a target the container
 * removed, a bad note is set aside without holding up the rest, and the
 * note names the directory the staging is really in even when the
 * container swaps a symlink of the path during the upload.
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "store/cp_pending.h"
#include "store/rootfs_tar.h"
#include "tests/unit/testutil.h"

static char *base, *rootfs, *notes;

#define STAGING ".berth-cp-0123456789abcdef"
#define STAGING_HEX "2e62657274682d63702d30313233343536373839616263646566"

static void
setup(void)
{
    base = tu_tmpdir("cp_pending");
    rootfs = fs_path_join(base, "rootfs");
    notes = fs_path_join(base, "notes");
    ck_assert_int_eq(tu_sh("cd %s && mkdir -p rootfs/t notes src && chmod 0755 rootfs/t && "
                           "echo old a > rootfs/t/a && echo old b > rootfs/t/b && "
                           "cd src && echo new a > a && echo new c > c && tar cf ../t.tar a c",
                           base),
                     0);
}

static void
teardown(void)
{
    tu_sh("umount %s 2>/dev/null", rootfs);
    tu_rmtree(base);
    free(base);
    free(rootfs);
    free(notes);
}

struct file_in {
    int fd;
    void (*hook)(void *arg); /* runs at the first read (the note is written, the staging made) */
    void *arg;
    bool hooked;
};

static ssize_t
file_read(void *ctx, void *buf, size_t len)
{
    struct file_in *f = ctx;
    if (f->hook && !f->hooked) {
        f->hooked = true;
        f->hook(f->arg);
    }
    ssize_t n = read(f->fd, buf, len);
    return n < 0 ? -1 : n;
}

static int
import_at(const char *path, void (*hook)(void *), void *arg, struct err *err)
{
    char *tar = fs_path_join(base, "t.tar");
    struct file_in f = {.fd = open(tar, O_RDONLY), .hook = hook, .arg = arg};
    ck_assert_int_ge(f.fd, 0);
    struct volume_tar_in in = {.read = file_read, .ctx = &f};
    struct rootfs_tar_in_opts o = {.notes = notes};
    int r = rootfs_tar_import(rootfs, path, &in, &o, NULL, err);
    close(f.fd);
    free(tar);
    return r;
}

/* Writes a note of a dead process ("pdead") for an upload into root's target. */
static void
dead_note(const char *staging, const char *kind, const char *root, const char *target)
{
    ck_assert_int_eq(tu_sh("printf 'berth-cp-pending 2\\0pdead\\0%s\\0%s\\0%s\\0%s\\0' > "
                           "'%s/pdead-%s'",
                           kind, root, target, staging, notes, staging),
                     0);
}

/* The hostile container's view while the upload runs: nothing but the
 * staging directory of berth's is in the target. */
static void
look_at_target(void *arg)
{
    (void)arg;
    ck_assert_int_eq(tu_sh("cd %s/t && test \"$(ls -A | grep -v '^%s[0-9a-f]*$' | tr '\\n' ' ')\" "
                           "= 'a b '",
                           rootfs, CP_STAGING_PREFIX),
                     0);
}

START_TEST(an_upload_keeps_its_note_and_journal_out_of_the_container)
{
    struct err err = {0};
    ck_assert_int_eq(import_at("/t", look_at_target, NULL, &err), 0);
    ck_assert_int_eq(tu_sh("cd %s/t && test \"$(ls -A | tr '\\n' ' ')\" = 'a b c ' && "
                           "grep -q 'new a' a && test -z \"$(ls -A %s)\"",
                           rootfs, notes),
                     0);
}
END_TEST

/* berthd killed in the middle of the merge (after its first step): the
 * container's tree holds the staged data and nothing else of berth's,
 * the journal is the daemon's, and the recovery puts the old tree back
 * and leaves nothing behind, in the tree or in the notes. */
START_TEST(a_crash_mid_merge_leaves_nothing_in_the_container_after_recovery)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("BERTH_TEST_MERGE_KILL", "1", 1);
        struct err err = {0};
        import_at("/t", NULL, NULL, &err);
        _exit(3); /* not killed: the kill point was not reached */
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the upload was not killed: %d", st);
    ck_assert_int_eq(tu_sh("cd %s/t && ! ls -A | grep -q journal && "
                           "ls -A %s | grep -q '^p.*-%s[0-9a-f]*%s$'",
                           rootfs, notes, CP_STAGING_PREFIX, ".journal"),
                     0);
    struct err err = {0};
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("cd %s/t && test \"$(ls -A | tr '\\n' ' ')\" = 'a b ' && "
                           "grep -q 'old a' a && test -z \"$(ls -A %s)\"",
                           rootfs, notes),
                     0);
}
END_TEST

/* The container forges the journal of a dead upload in its target, where
 * an older berth kept it: a replay (as root) would chmod the target 0777.
 * The journal is the daemon's now; the forged file is the container's own
 * and stays, untouched, and so does the target's mode. */
START_TEST(a_journal_forged_in_the_target_is_not_replayed)
{
    ck_assert_int_eq(
        tu_sh("cd %s/t && mkdir %s && echo staged > %s/f && "
              "printf 'berth-volume-merge 1\\nS %s\\nB -\\nD - 777 0 0 0 0 0 0\\nE\\n' "
              "> %s.journal",
              rootfs, STAGING, STAGING, STAGING_HEX, STAGING),
        0);
    dead_note(STAGING, "mount", rootfs, "/t");
    struct err err = {0};
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("test \"$(stat -c %%a %s/t)\" = 755 && test -f %s/t/%s.journal && "
                           "! test -e %s/t/%s && test -z \"$(ls -A %s)\"",
                           rootfs, rootfs, STAGING, rootfs, STAGING, notes),
                     0);
}
END_TEST

/* A mount's source that is missing (a filesystem not mounted yet) may
 * come back with the staging in it: the note is the only record, so it
 * stays until the clean-up has really happened. */
START_TEST(a_note_waits_while_its_root_is_missing)
{
    char *vol = fs_path_join(base, "vol");
    dead_note(STAGING, "mount", vol, "/t");
    struct err err = {0};
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("test -f %s/pdead-%s", notes, STAGING), 0);
    /* Its target missing too. */
    ck_assert_int_eq(tu_sh("mkdir -p %s", vol), 0);
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("test -f %s/pdead-%s", notes, STAGING), 0);
    /* Back: the staging goes, then the note. */
    ck_assert_int_eq(tu_sh("mkdir -p %s/t/%s && echo x > %s/t/%s/f", vol, STAGING, vol, STAGING),
                     0);
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("! test -e %s/t/%s && test -d %s/t && test -z \"$(ls -A %s)\"", vol,
                           STAGING, vol, notes),
                     0);
    free(vol);
}
END_TEST

/* A container's root filesystem that is not mounted is the bare mount
 * point: the note waits for it, its target missing or not. */
START_TEST(a_rootfs_note_waits_while_its_root_is_not_mounted)
{
    dead_note(STAGING, "rootfs", rootfs, "/gone");
    struct err err = {0};
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("test \"$(ls -A %s | tr '\\n' ' ')\" = 'pdead-%s '", notes, STAGING), 0);
}
END_TEST

/* Mounts a tmpfs on the root filesystem (a container's is a mount of its
 * own), with the target /t in it. */
static void
mount_rootfs(void)
{
    ck_assert_int_eq(
        tu_sh("mount -t tmpfs -o size=1m tmpfs %s && mkdir -m 0755 %s/t", rootfs, rootfs), 0);
}

/* The notes' directory holds aside/ only, and aside/ the note and its journal. */
static void
check_set_aside(const char *name)
{
    ck_assert_int_eq(tu_sh("test \"$(ls -A %s | tr '\\n' ' ')\" = '%s ' && "
                           "test \"$(ls -A %s/%s | tr '\\n' ' ')\" = '%s %s.journal '",
                           notes, CP_PENDING_ASIDE, notes, CP_PENDING_ASIDE, name, name),
                     0);
}

/* ---- what the replay logs ------------------------------------------------- */

static int saved_stderr = -1;

/* From here on the log (stderr) goes to <base>/berth.log. */
static void
log_capture(void)
{
    fflush(stderr);
    saved_stderr = dup(2);
    char *path = fs_path_join(base, "berth.log");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    free(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(dup2(fd, 2), 0);
    close(fd);
}

/* Back to stderr; 0 when the captured log has a line at level (a name
 * as the text format writes it) with a note set aside whose reason has
 * why in it. */
static int
log_set_aside_at(const char *level, const char *why)
{
    if (saved_stderr >= 0) {
        fflush(stderr);
        dup2(saved_stderr, 2);
        close(saved_stderr);
        saved_stderr = -1;
    }
    return tu_sh("grep -E ' %s +upload note .*%s.*; set aside in ' '%s/berth.log'", level, why,
                 base);
}

/* The container removed its target after the crash (rm -rf, the staging
 * with it) from a root that is there: a mounted root filesystem, or a
 * mount's source with files in it. Nothing can bring the target back, so
 * the note is set aside with its journal rather than wait for ever (read
 * again before every upload), and a second replay has nothing to do. */
START_TEST(a_note_whose_target_the_container_removed_is_set_aside)
{
    mount_rootfs();
    ck_assert_int_eq(
        tu_sh("mkdir -p %s/t/%s && echo x > %s/t/%s/f", rootfs, STAGING, rootfs, STAGING), 0);
    dead_note(STAGING, "rootfs", rootfs, "/t");
    ck_assert_int_eq(tu_sh("printf 'berth-volume-merge 1\\nS %s\\nB -\\nE\\n' "
                           "> '%s/pdead-%s.journal' && rm -rf %s/t",
                           STAGING_HEX, notes, STAGING, rootfs),
                     0);
    struct err err = {0};
    log_capture();
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    /* The container's doing, not berth's: a warning. */
    ck_assert_int_eq(log_set_aside_at("warn", "missing \\(the container removed it\\)"), 0);
    ck_assert_int_ne(log_set_aside_at("error", ""), 0);
    check_set_aside("pdead-" STAGING);
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    check_set_aside("pdead-" STAGING);
    ck_assert_int_eq(tu_sh("umount %s", rootfs), 0);

    /* A mount's source with files in it is the filesystem itself. */
    ck_assert_int_eq(tu_sh("rm -rf %s/%s && mkdir -p %s/v && echo mine > %s/v/keep", notes,
                           CP_PENDING_ASIDE, base, base),
                     0);
    char *vol = fs_path_join(base, "v");
    dead_note(STAGING, "mount", vol, "/t");
    ck_assert_int_eq(tu_sh("printf x > '%s/pdead-%s.journal'", notes, STAGING), 0);
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    check_set_aside("pdead-" STAGING);
    ck_assert_int_eq(tu_sh("test \"$(ls -A %s)\" = keep", vol), 0);
    free(vol);
}
END_TEST

/* One note that cannot be replayed (the container made its target a
 * symlink loop) is reported and set aside; the other notes are replayed
 * and a later upload into the container goes through. */
START_TEST(a_bad_note_is_set_aside_and_holds_up_nothing)
{
    ck_assert_int_eq(tu_sh("cd %s && ln -s loop loop && mkdir -p t/%s && echo x > t/%s/f", rootfs,
                           STAGING, STAGING),
                     0);
    dead_note(".berth-cp-00000000000000ff", "mount", rootfs, "/loop");
    dead_note(STAGING, "mount", rootfs, "/t");
    /* And one of an older berth, whose journal was in the container's tree. */
    ck_assert_int_eq(tu_sh("printf 'berth-cp-pending 1\\0pold\\0mount\\0%s\\0/t\\0%s\\0' > "
                           "'%s/pold-%s'",
                           rootfs, STAGING, notes, STAGING),
                     0);
    struct err err = {0};
    log_capture();
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    /* The loop is the container's doing; a note berth cannot read as its own is berth's. */
    ck_assert_int_eq(log_set_aside_at("warn", "a symlink on the way"), 0);
    ck_assert_int_eq(log_set_aside_at("error", "not an upload note of this version"), 0);
    ck_assert_int_eq(tu_sh("cd %s && test \"$(ls -A | tr '\\n' ' ')\" = '%s ' && "
                           "test \"$(ls -A %s | tr '\\n' ' ')\" = "
                           "'pdead-.berth-cp-00000000000000ff pold-%s ' && ! test -e %s/t/%s",
                           notes, CP_PENDING_ASIDE, CP_PENDING_ASIDE, STAGING, rootfs, STAGING),
                     0);
    /* Set aside once: the next replay has nothing left to do. */
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(import_at("/t", NULL, NULL, &err), 0);
}
END_TEST

/* After the crash the container moves its target away and puts a symlink
 * there to another directory of its own, holding a staging directory of
 * the same name: the note names the directory as it was read from its
 * descriptor (no symlink in it), so a symlink on the way now is the
 * container's doing. The recovery must not follow it: followed, it would
 * remove the container's own files there and restore, as root, the old
 * target's owner and mode on that other directory. The note is set aside
 * and the other directory left as it is. */
START_TEST(a_recovery_does_not_follow_a_symlink_put_in_the_target_path)
{
    ck_assert_int_eq(tu_sh("cd %s && mv t t.real && mkdir -m 0755 u && mkdir u/%s && "
                           "echo mine > u/%s/mine && ln -s u t",
                           rootfs, STAGING, STAGING),
                     0);
    dead_note(STAGING, "mount", rootfs, "/t");
    /* berth's journal of that upload: the target's old mode was 0700. */
    ck_assert_int_eq(
        tu_sh("printf 'berth-volume-merge 1\\nS %s\\nB -\\nD - 700 0 0 0 0 0 0\\nE\\n' "
              "> '%s/pdead-%s.journal'",
              STAGING_HEX, notes, STAGING),
        0);
    struct err err = {0};
    ck_assert_int_eq(cp_pending_recover(notes, &err), 0);
    ck_assert_int_eq(tu_sh("cd %s && test \"$(stat -c %%a u)\" = 755 && grep -q mine u/%s/mine && "
                           "test \"$(ls -A %s | tr '\\n' ' ')\" = '%s ' && "
                           "test \"$(ls -A %s/%s | tr '\\n' ' ')\" = 'pdead-%s pdead-%s.journal '",
                           rootfs, STAGING, notes, CP_PENDING_ASIDE, notes, CP_PENDING_ASIDE,
                           STAGING, STAGING),
                     0);
}
END_TEST

/* ---- the note names where the staging is ----------------------------------- */

struct flipper {
    char *link, *tmp;
    atomic_bool stop;
};

/* The container: /l points at /x, then at /y, and back, as fast as it can. */
static void *
flip(void *arg)
{
    struct flipper *f = arg;
    for (unsigned i = 0; !atomic_load(&f->stop); i++) {
        unlink(f->tmp);
        if (symlink(i % 2 ? "x" : "y", f->tmp) == 0)
            rename(f->tmp, f->link);
    }
    return NULL;
}

struct seen {
    int checked, wrong;
};

/* At the first read: the staging directory is made; the note must name its directory. */
static void
note_names_the_staging_dir(void *arg)
{
    struct seen *s = arg;
    char *cmd = NULL;
    ck_assert_int_ge(asprintf(&cmd,
                              "cd %s && n=$(ls | grep -v '^\\.') && t=$(tr '\\0' '\\n' < \"$n\" | "
                              "sed -n 5p) && g=$(tr '\\0' '\\n' < \"$n\" | sed -n 6p) && "
                              "test -d \"%s$t/$g\"",
                              notes, rootfs),
                     0);
    s->checked++;
    if (tu_sh("%s", cmd) != 0)
        s->wrong++;
    free(cmd);
}

START_TEST(the_note_names_the_directory_the_staging_is_in_while_a_symlink_flips)
{
    ck_assert_int_eq(tu_sh("cd %s && mkdir x y && ln -s x l", rootfs), 0);
    struct flipper f = {.link = fs_path_join(rootfs, "l"), .tmp = fs_path_join(rootfs, "l.tmp")};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, flip, &f), 0);
    struct seen s = {0};
    struct err err = {0};
    for (int i = 0; i < 300 && s.wrong == 0; i++) {
        int r = import_at("/l", note_names_the_staging_dir, &s, &err);
        /* The flip may swap the target between the staging and the merge. */
        ck_assert_msg(r == 0 || r == -ERR_CONFLICT || r == -ENOENT, "import: %d %s", r, err.msg);
    }
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    ck_assert_msg(s.wrong == 0, "the note named another directory than the staging's (%d of %d)",
                  s.wrong, s.checked);
    free(f.link);
    free(f.tmp);
}
END_TEST

static Suite *
cp_pending_suite(void)
{
    Suite *s = suite_create("store_cp_pending");
    TCase *tc = tcase_create("cp_pending");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, an_upload_keeps_its_note_and_journal_out_of_the_container);
    tcase_add_test(tc, a_crash_mid_merge_leaves_nothing_in_the_container_after_recovery);
    tcase_add_test(tc, a_journal_forged_in_the_target_is_not_replayed);
    tcase_add_test(tc, a_note_waits_while_its_root_is_missing);
    tcase_add_test(tc, a_rootfs_note_waits_while_its_root_is_not_mounted);
    tcase_add_test(tc, a_note_whose_target_the_container_removed_is_set_aside);
    tcase_add_test(tc, a_bad_note_is_set_aside_and_holds_up_nothing);
    tcase_add_test(tc, a_recovery_does_not_follow_a_symlink_put_in_the_target_path);
    tcase_add_test(tc, the_note_names_the_directory_the_staging_is_in_while_a_symlink_flips);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    Suite *s = cp_pending_suite();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
