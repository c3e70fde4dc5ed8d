/*
 * The mount journal: entries and their text form (a round trip, every
 * torn prefix and every flipped byte refused), the limits on names,
 * owners, kinds and fields, put/get/remove/list, and replay (temporaries
 * removed, damaged entries set aside, live owners kept, undo failures
 * kept for the next start). Portable: runs on Linux and under Wine (the
 * Windows file operations, mount_journal_io_windows.c).
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#ifdef _WIN32
#include <windows.h>
#endif

#include "common/strv.h"
#include "store/mount_journal.h"
#include "store/mount_journal_io.h"

static char dir[1024];
static struct mjournal *j;

static void
setup(void)
{
    static int n;
#ifdef _WIN32
    char tmp[MAX_PATH];
    GetTempPathA(sizeof(tmp), tmp);
    snprintf(dir, sizeof(dir), "%sberth-mj-%lu-%d\\mounts", tmp, GetCurrentProcessId(), ++n);
#else
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/berth-mj-%d-%d/mounts", t && *t ? t : "/tmp", (int)getpid(),
             ++n);
#endif
    struct err err = {0};
    ck_assert_msg(mjournal_open(dir, &j, &err) == 0, "%s", err.msg);
}

static void
teardown(void)
{
    char **names = NULL;
    if (mj_io_list(dir, &names) == 0)
        for (size_t i = 0; names[i]; i++)
            mj_io_remove(dir, names[i]);
    strv_free(names);
    rmdir(dir);
    char *slash = strrchr(dir, '/') ? strrchr(dir, '/') : strrchr(dir, '\\');
    if (slash) {
        *slash = '\0';
        rmdir(dir);
    }
    mjournal_free(j);
    j = NULL;
}

static struct mj_entry *
entry(const char *name, const char *owner)
{
    struct mj_entry *e = mj_entry_new(name, owner, "overlay");
    struct err err = {0};
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(mj_entry_set(e, "target", "/var/lib/berth/containers/c1/rootfs", &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "path", "C:\\Program Files\\berth\\x y=z", &err), 0);
    return e;
}

static void
put(const char *name, const char *owner)
{
    struct mj_entry *e = entry(name, owner);
    struct err err = {0};
    ck_assert_msg(mjournal_put(j, e, &err) == 0, "%s", err.msg);
    mj_entry_free(e);
}

static void
write_raw(const char *file, const char *text, size_t len)
{
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".raw-%s", file);
    ck_assert_int_eq(mj_io_write_atomic(dir, tmp, file, text, len), 0);
}

static bool
exists(const char *file)
{
    char *text = NULL;
    size_t len = 0;
    int r = mj_io_read(dir, file, 1 << 20, &text, &len);
    free(text);
    return r == 0;
}

START_TEST(mj_entry_text_round_trips)
{
    struct mj_entry *e = entry("container.c1.rootfs", "container:c1");
    char *text = NULL;
    size_t len = 0;
    struct err err = {0};
    ck_assert_int_eq(mj_entry_format(e, &text, &len, &err), 0);
    ck_assert_ptr_nonnull(strstr(text, "berth-mount 1\nowner container:c1\nkind overlay\n"));
    ck_assert_ptr_nonnull(strstr(text, "f path=C:\\Program Files\\berth\\x y=z\n"));
    struct mj_entry *back = NULL;
    ck_assert_msg(mj_entry_parse("container.c1.rootfs", text, len, &back, &err) == 0, "%s",
                  err.msg);
    ck_assert_str_eq(back->owner, "container:c1");
    ck_assert_str_eq(back->kind, "overlay");
    ck_assert_uint_eq(back->nfields, 2);
    ck_assert_str_eq(mj_entry_get(back, "path"), "C:\\Program Files\\berth\\x y=z");
    ck_assert_str_eq(mj_owner_container(back->owner), "c1");
    ck_assert_ptr_null(mj_owner_container("volume:v"));
    mj_entry_free(back);
    mj_entry_free(e);
    free(text);
}
END_TEST

START_TEST(mj_entry_torn_or_flipped_text_is_refused)
{
    struct mj_entry *e = entry("n", "container:c1");
    char *text = NULL;
    size_t len = 0;
    struct err err = {0};
    ck_assert_int_eq(mj_entry_format(e, &text, &len, &err), 0);
    struct mj_entry *back = NULL;
    /* Every prefix a torn write could leave. */
    for (size_t cut = 0; cut < len; cut++) {
        ck_assert_msg(mj_entry_parse("n", text, cut, &back, &err) == -ERR_INVALID_CONTENT,
                      "a prefix of %zu bytes was taken", cut);
    }
    /* Every byte flipped (the checksum line itself included). */
    for (size_t i = 0; i < len; i++) {
        char *copy = malloc(len);
        memcpy(copy, text, len);
        copy[i] ^= 0x20;
        int r = mj_entry_parse("n", copy, len, &back, &err);
        if (r == 0)
            mj_entry_free(back);
        ck_assert_msg(r == -ERR_INVALID_CONTENT, "byte %zu flipped was taken", i);
        free(copy);
    }
    /* Garbage with a valid checksum line is still refused line by line. */
    const char *junk = "berth-mount 1\nowner a\nkind b\nzzz\n";
    char buf[256];
    unsigned c = 0xFFFFFFFFu;
    for (const char *p = junk; *p; p++) {
        c ^= (unsigned char)*p;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    int n = snprintf(buf, sizeof(buf), "%ssum %08x\n", junk, ~c);
    ck_assert_int_eq(mj_entry_parse("n", buf, (size_t)n, &back, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown line"));
    mj_entry_free(e);
    free(text);
}
END_TEST

START_TEST(mj_entry_limits_are_checked)
{
    struct err err = {0};
    ck_assert(mj_name_valid("container.build-42.rootfs"));
    ck_assert(!mj_name_valid(""));
    ck_assert(!mj_name_valid(".tmp-x"));
    ck_assert(!mj_name_valid("a/b"));
    ck_assert(!mj_name_valid("a\\b"));
    char longname[MJ_NAME_MAX + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert(!mj_name_valid(longname));

    struct mj_entry *e = mj_entry_new("n", "owner with space", "k");
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(mj_entry_format(e, &text, &len, &err), -EINVAL);
    ck_assert_int_eq(mjournal_put(j, e, &err), -EINVAL);
    mj_entry_free(e);

    e = mj_entry_new("n", "o", "k");
    ck_assert_int_eq(mj_entry_set(e, "Bad", "v", &err), -EINVAL);
    ck_assert_int_eq(mj_entry_set(e, "k", "line\nbreak", &err), -EINVAL);
    ck_assert_int_eq(mj_entry_set(e, "k", "carriage\rreturn", &err), -EINVAL);
    char *big = malloc(MJ_VALUE_MAX + 2);
    memset(big, 'v', MJ_VALUE_MAX + 1);
    big[MJ_VALUE_MAX + 1] = '\0';
    ck_assert_int_eq(mj_entry_set(e, "k", big, &err), -EINVAL);
    big[MJ_VALUE_MAX] = '\0';
    ck_assert_int_eq(mj_entry_set(e, "k", big, &err), 0);
    ck_assert_int_eq(mj_entry_set(e, "k", "again", &err), 0);
    ck_assert_uint_eq(e->nfields, 1);
    for (int i = 1; i < MJ_FIELDS_MAX; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i);
        ck_assert_int_eq(mj_entry_set(e, key, big, &err), 0);
    }
    ck_assert_int_eq(mj_entry_set(e, "one-more", "v", &err), -E2BIG);
    /* The largest entry there can be still reads back. */
    ck_assert_msg(mjournal_put(j, e, &err) == 0, "%s", err.msg);
    struct mj_entry *back = NULL;
    ck_assert_msg(mjournal_get(j, "n", &back, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(back->nfields, MJ_FIELDS_MAX);
    mj_entry_free(back);
    mj_entry_free(e);
    free(big);
}
END_TEST

START_TEST(mjournal_put_get_remove_list)
{
    struct err err = {0};
    put("container.b.rootfs", "container:b");
    put("container.a.rootfs", "container:a");
    put("container.a.extra", "container:a");
    /* Replacing keeps one entry. */
    struct mj_entry *e = entry("container.a.extra", "container:a");
    ck_assert_int_eq(mj_entry_set(e, "step", "2", &err), 0);
    ck_assert_int_eq(mjournal_put(j, e, &err), 0);
    mj_entry_free(e);

    struct mj_entry **v = NULL;
    size_t n = 0, bad = 9;
    ck_assert_int_eq(mjournal_list(j, NULL, &v, &n, &bad, &err), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(bad, 0);
    ck_assert_str_eq(v[0]->name, "container.a.extra");
    ck_assert_str_eq(mj_entry_get(v[0], "step"), "2");
    ck_assert_str_eq(v[2]->name, "container.b.rootfs");
    mj_entry_list_free(v, n);
    ck_assert_int_eq(mjournal_list(j, "container:a", &v, &n, NULL, &err), 0);
    ck_assert_uint_eq(n, 2);
    mj_entry_list_free(v, n);

    ck_assert_int_eq(mjournal_remove(j, "container.a.extra", &err), 0);
    ck_assert_int_eq(mjournal_remove(j, "container.a.extra", &err), 0);
    ck_assert_int_eq(mjournal_get(j, "container.a.extra", &e, &err), -ENOENT);
    ck_assert_int_eq(mjournal_remove(j, "../x", &err), -EINVAL);

    /* A damaged file is left out of lists and counted. */
    write_raw("container.c.rootfs.mnt", "berth-mount 1\nowner container:c\n", 33);
    ck_assert_int_eq(mjournal_list(j, NULL, &v, &n, &bad, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(bad, 1);
    mj_entry_list_free(v, n);
    ck_assert_int_eq(mjournal_get(j, "container.c.rootfs", &e, &err), -ERR_INVALID_CONTENT);
}
END_TEST

struct replay_ctx {
    int undos;
    char undone[8][64];
};

static bool
keep_a(void *arg, const struct mj_entry *e)
{
    (void)arg;
    const char *h = mj_owner_container(e->owner);
    return h && strcmp(h, "a") == 0;
}

static int
undo_but_fail_f(void *arg, const struct mj_entry *e, struct err *err)
{
    struct replay_ctx *c = arg;
    if (strcmp(e->owner, "container:f") == 0)
        return err_set(err, EBUSY, "target is busy");
    snprintf(c->undone[c->undos++], 64, "%s", e->name);
    return 0;
}

START_TEST(mjournal_replay_undoes_what_no_owner_keeps)
{
    struct err err = {0};
    put("container.a.rootfs", "container:a");
    put("container.b.rootfs", "container:b");
    put("container.f.rootfs", "container:f");
    /* A torn write: the temporary of an entry never renamed. */
    write_raw(".tmp-container.c.rootfs-99", "berth-mount 1\nown", 17);
    /* A damaged entry. */
    write_raw("container.d.rootfs.mnt", "berth-mount 1\nowner container:d\nkind overlay\nsum 0\n",
              50);
    /* Something that is not the journal's. */
    write_raw("README", "hello", 5);

    struct replay_ctx c = {0};
    struct mj_replay_stats st = {0};
    ck_assert_msg(mjournal_replay(j, keep_a, undo_but_fail_f, &c, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.kept, 1);
    ck_assert_uint_eq(st.undone, 1);
    ck_assert_uint_eq(st.failed, 1);
    ck_assert_uint_eq(st.damaged, 1);
    ck_assert_uint_eq(st.temporary, 1);
    ck_assert_int_eq(c.undos, 1);
    ck_assert_str_eq(c.undone[0], "container.b.rootfs");
    ck_assert(exists("container.a.rootfs.mnt"));
    ck_assert(!exists("container.b.rootfs.mnt"));
    ck_assert(exists("container.f.rootfs.mnt")); /* tried again at the next start */
    ck_assert(!exists("container.d.rootfs.mnt"));
    ck_assert(exists(".corrupt-container.d.rootfs.mnt"));
    ck_assert(!exists(".tmp-container.c.rootfs-99"));
    ck_assert(exists("README"));

    /* A second replay changes nothing but retries f. */
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(mjournal_replay(j, keep_a, undo_but_fail_f, &c, &st, &err), 0);
    ck_assert_uint_eq(st.kept, 1);
    ck_assert_uint_eq(st.failed, 1);
    ck_assert_uint_eq(st.undone + st.damaged + st.temporary, 0);
}
END_TEST

START_TEST(mjournal_replay_removes_an_empty_entry)
{
    /* What a power loss can leave of an unsynced entry (Linux writes
     * them without fsync: an overlay does not outlive the boot): the
     * rename reached the disk, the data did not. It names nothing, so the
     * replay removes it instead of setting it aside as damaged; a
     * non-empty damaged entry is still set aside. */
    struct err err = {0};
    write_raw("container.e.rootfs.mnt", "", 0);
    write_raw("container.d.rootfs.mnt", "berth-mount 1\nowner", 20);
    struct replay_ctx c = {0};
    struct mj_replay_stats st = {0};
    ck_assert_msg(mjournal_replay(j, keep_a, undo_but_fail_f, &c, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.temporary, 1);
    ck_assert_uint_eq(st.damaged, 1);
    ck_assert_int_eq(c.undos, 0);
    ck_assert(!exists("container.e.rootfs.mnt"));
    ck_assert(!exists(".corrupt-container.e.rootfs.mnt"));
    ck_assert(exists(".corrupt-container.d.rootfs.mnt"));
}
END_TEST

static Suite *
journal_suite(void)
{
    Suite *s = suite_create("store_mount_journal");
    TCase *tc = tcase_create("journal");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, mj_entry_text_round_trips);
    tcase_add_test(tc, mj_entry_torn_or_flipped_text_is_refused);
    tcase_add_test(tc, mj_entry_limits_are_checked);
    tcase_add_test(tc, mjournal_put_get_remove_list);
    tcase_add_test(tc, mjournal_replay_undoes_what_no_owner_keeps);
    tcase_add_test(tc, mjournal_replay_removes_an_empty_entry);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(journal_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
