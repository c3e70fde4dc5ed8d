/*
 * Windows layer tars (store/wclayer.c, store/wintar.c) on tars this suite
 * writes itself, block by block, with the PAX records go-winio writes:
 * what a valid layer becomes, the records libarchive would drop, links,
 * streams, whiteouts, hives across layers, case-only collisions and
 * read-only overwrites (against a sink that behaves as NTFS does), and
 * hostile names, records and streams, each refused naming the entry.
 * Portable: runs on Linux and under Wine.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/wclayer.h"
#include "store/wclayer_reparse.h"
#include "store/wintar.h"
#include "tests/fixtures/wclayer_tar.h"

/* --- a sink that records, and refuses as NTFS does ----------------------------- */

#define MAXE 64

struct rec_entry {
    struct wcl_entry e;
    char path[512], target[512], replaced[512], data[256];
    unsigned char sd[256];
};

struct rsink {
    struct rec_entry v[MAXE];
    size_t n;
    char calls[2048]; /* "E:path;W:path;..." */
    bool ntfs;        /* refuse to replace a read-only file, as NTFS does */
    char readonly[8][512];
    size_t nro;
    int fail_all; /* an errno every entry fails with */
};

static bool
ascii_caseeq_str(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = (*a >= 'A' && *a <= 'Z') ? (char)(*a + 32) : *a;
        char y = (*b >= 'A' && *b <= 'Z') ? (char)(*b + 32) : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

static int
rs_entry(void *ctx, const struct wcl_entry *e, struct err *err)
{
    struct rsink *s = ctx;
    size_t cl = strlen(s->calls);
    snprintf(s->calls + cl, sizeof(s->calls) - cl, "E:%s;", e->path);
    if (s->fail_all)
        return err_set(err, s->fail_all, "create %s: refused", e->path);
    for (size_t i = 0; s->ntfs && i < s->nro; i++) {
        if (s->readonly[i][0] && ascii_caseeq_str(s->readonly[i], e->path))
            return err_set(err, EACCES, "create %s: access denied", e->path);
    }
    if (s->ntfs && e->has_attributes && (e->attributes & WCL_ATTR_READONLY) && s->nro < 8)
        snprintf(s->readonly[s->nro++], 512, "%s", e->path);
    ck_assert_uint_lt(s->n, MAXE);
    struct rec_entry *r = &s->v[s->n++];
    r->e = *e;
    snprintf(r->path, sizeof(r->path), "%s", e->path);
    r->e.path = r->path;
    if (e->target) {
        snprintf(r->target, sizeof(r->target), "%s", e->target);
        r->e.target = r->target;
    }
    if (e->replaced) {
        snprintf(r->replaced, sizeof(r->replaced), "%s", e->replaced);
        r->e.replaced = r->replaced;
    }
    if (e->sd) {
        ck_assert_uint_le(e->sd_len, sizeof(r->sd));
        memcpy(r->sd, e->sd, e->sd_len);
        r->e.sd = r->sd;
    }
    r->e.sddl = NULL;
    return 0;
}

static int
rs_data(void *ctx, const void *buf, size_t len, struct err *err)
{
    (void)err;
    struct rsink *s = ctx;
    struct rec_entry *r = &s->v[s->n - 1];
    size_t have = strlen(r->data);
    ck_assert_uint_lt(have + len, sizeof(r->data));
    memcpy(r->data + have, buf, len);
    r->data[have + len] = '\0';
    return 0;
}

static int
rs_writable(void *ctx, const char *path, struct err *err)
{
    (void)err;
    struct rsink *s = ctx;
    size_t cl = strlen(s->calls);
    snprintf(s->calls + cl, sizeof(s->calls) - cl, "W:%s;", path);
    for (size_t i = 0; i < s->nro; i++) {
        if (strcmp(s->readonly[i], path) == 0)
            s->readonly[i][0] = '\0';
    }
    return 0;
}

static int
run(struct tbuf *t, struct rsink *s, struct wcl_layer_info *info, struct err *err)
{
    struct wcl_sink sink = {rs_entry, rs_data, rs_writable, s};
    t->off = 0;
    return wclayer_import(tb_read, t, &sink, info, err);
}

static const struct rec_entry *
find(const struct rsink *s, const char *path)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->v[i].path, path) == 0)
            return &s->v[i];
    }
    return NULL;
}

/* A self-relative descriptor: owner S-1-5-18, group S-1-5-18, a DACL of one ACE. */
static const unsigned char SD[] = {
    1,  0, 0x04, 0x80, /* revision, sbz1, control SE_DACL_PRESENT|SE_SELF_RELATIVE */
    20, 0, 0,    0,    32,   0,    0,    0,    0,  0, 0, 0,
    44, 0, 0,    0,                                         /* owner, group, sacl, dacl */
    1,  1, 0,    0,    0,    0,    0,    5,    18, 0, 0, 0, /* owner SID S-1-5-18 */
    1,  1, 0,    0,    0,    0,    0,    5,    18, 0, 0, 0, /* group SID */
    2,  0, 28,   0,    1,    0,    0,    0,                 /* ACL rev 2, size 28, 1 ACE */
    0,  0, 20,   0,    0xff, 0x01, 0x1f, 0x00,              /* ACCESS_ALLOWED, size 20, mask */
    1,  1, 0,    0,    0,    0,    0,    5,    18, 0, 0, 0, /* its SID */
};
#define SD_B64                                                                                     \
    "AQAEgBQAAAAgAAAAAAAAACwAAAABAQAAAAAABRIAAAABAQAAAAAABRIAAAACABwAAQAAAAAAFAD/AR8AAQEAAAAAAAUS" \
    "AAAA"

START_TEST(wclayer_imports_files_hives_and_the_utility_vm_with_their_records)
{
    struct tbuf t = {0};
    entry(&t, "Files", '5', NULL, NULL, (const char *const[]){"MSWINDOWS.fileattr=16", NULL});
    entry(&t, "Files/Windows/notepad.exe", '0', "MZ-hello", NULL,
          (const char *const[]){"MSWINDOWS.rawsd=" SD_B64, "MSWINDOWS.fileattr=33",
                                "LIBARCHIVE.creationtime=1600000000.25", NULL});
    entry(&t, "Hives", '5', NULL, NULL, NULL);
    entry(&t, "Hives/Software_Delta", '0', "regf", NULL, NULL);
    entry(&t, "UtilityVM/Files/EFI/boot.efi", '0', "efi", NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(s.n, 5);
    const struct rec_entry *n = find(&s, "Files/Windows/notepad.exe");
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(n->e.kind, WCL_FILE);
    ck_assert_int_eq(n->e.root, WCL_ROOT_FILES);
    ck_assert_str_eq(n->data, "MZ-hello");
    ck_assert_uint_eq(n->e.sd_len, sizeof(SD));
    ck_assert_mem_eq(n->sd, SD, sizeof(SD));
    ck_assert(n->e.has_attributes);
    ck_assert_uint_eq(n->e.attributes, 33);
    ck_assert(n->e.has_creation_time);
    ck_assert_int_eq(n->e.creation_sec, 1600000000);
    ck_assert_uint_eq(n->e.creation_nsec, 250000000);
    ck_assert_int_eq(find(&s, "Files")->e.kind, WCL_DIR);
    ck_assert_int_eq(find(&s, "Hives/Software_Delta")->e.root, WCL_ROOT_HIVES);
    ck_assert_int_eq(find(&s, "UtilityVM/Files/EFI/boot.efi")->e.root, WCL_ROOT_UTILITYVM);
    ck_assert_uint_eq(info.hives, 1u << WCL_HIVE_SOFTWARE);
    ck_assert(info.utility_vm);
    ck_assert_uint_eq(info.entries, 5);
    ck_assert_uint_eq(info.bytes, strlen("MZ-hello") + 4 + 3);
    free(t.p);
}
END_TEST

START_TEST(wclayer_folds_dot_slash_and_repeated_slashes_and_keeps_long_pax_names)
{
    char longname[400];
    snprintf(longname, sizeof(longname), "Files/%0150d/%0150d/x.txt", 1, 2);
    struct tbuf t = {0};
    entry(&t, "./Files//dir/", '5', NULL, NULL, NULL);
    entry(&t, longname, '0', "long", NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    ck_assert_ptr_nonnull(find(&s, "Files/dir"));
    ck_assert_str_eq(find(&s, longname)->data, "long");
    free(t.p);
}
END_TEST

START_TEST(wclayer_reparse_points_junctions_and_hard_links)
{
    struct tbuf t = {0};
    entry(&t, "Files/a.txt", '0', "a", NULL, NULL);
    entry(&t, "Files/link", '2', NULL, "C:\\Windows\\System32", NULL);
    entry(&t, "Files/junction", '2', NULL, "C:\\ProgramData",
          (const char *const[]){"MSWINDOWS.mountpoint=1", "MSWINDOWS.fileattr=1040", NULL});
    entry(&t, "Files/hard", '1', NULL, "./Files/A.TXT", NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(find(&s, "Files/link")->e.kind, WCL_SYMLINK);
    ck_assert(!find(&s, "Files/link")->e.mount_point);
    ck_assert_str_eq(find(&s, "Files/link")->target, "C:\\Windows\\System32");
    ck_assert(find(&s, "Files/junction")->e.mount_point);
    ck_assert_int_eq(find(&s, "Files/hard")->e.kind, WCL_HARDLINK);
    ck_assert_str_eq(find(&s, "Files/hard")->target, "Files/A.TXT");
    free(t.p);

    /* Hard links only to a file earlier in this layer, under the same root. */
    const char *bad[][2] = {{"Files/missing", "hard link Files/h leads to Files/missing"},
                            {"Files/d", "hard link Files/h leads to Files/d"},
                            {"Hives/Software_Delta", "in another root"},
                            {"Files/../Files/a.txt", "'.' or '..'"},
                            {"/Files/a.txt", "absolute"},
                            {"Files/a.txt:s", "in another root or a stream"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct tbuf u = {0};
        entry(&u, "Files/a.txt", '0', "a", NULL, NULL);
        entry(&u, "Files/d", '5', NULL, NULL, NULL);
        entry(&u, "Hives/Software_Delta", '0', "r", NULL, NULL);
        entry(&u, "Files/h", '1', NULL, bad[i][0], NULL);
        finish(&u);
        struct rsink s2 = {0};
        struct err e2 = {0};
        ck_assert_int_eq(run(&u, &s2, &info, &e2), -ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(e2.msg, bad[i][1]), "%s: %s", bad[i][0], e2.msg);
        ck_assert_ptr_null(find(&s2, "Files/h"));
        free(u.p);
    }
    /* A junction is a reparse point; the record on a file is refused. */
    struct tbuf u = {0};
    entry(&u, "Files/f", '0', "x", NULL, (const char *const[]){"MSWINDOWS.mountpoint=1", NULL});
    finish(&u);
    struct rsink s3 = {0};
    ck_assert_int_eq(run(&u, &s3, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "MSWINDOWS.mountpoint"));
    free(u.p);
}
END_TEST

/* A layer with one reparse point at path to target (a junction when mp); run's result. */
static int
one_link(const char *path, const char *target, bool mp, struct err *err)
{
    struct tbuf t = {0};
    entry(&t, "Files/Windows/System32/x.dll", '0', "x", NULL, NULL);
    entry(&t, path, '2', NULL, target,
          mp ? (const char *const[]){"MSWINDOWS.mountpoint=1", "MSWINDOWS.fileattr=1040", NULL}
             : NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    int rc = run(&t, &s, &info, err);
    if (rc == 0)
        ck_assert_ptr_nonnull(find(&s, path));
    else
        ck_assert_ptr_null(find(&s, path));
    free(t.p);
    return rc;
}

START_TEST(wclayer_reparse_targets_stay_inside_the_layer)
{
    /* How Windows images name their own files, and relative ones that stay inside. */
    const struct {
        const char *path, *target;
        bool mp;
    } ok[] = {
        {"Files/Documents and Settings", "C:\\Users", true},
        {"Files/ProgramData/App", "c:/ProgramData/Real", true},
        {"Files/Users/All Users", "\\\\?\\C:\\ProgramData", false},
        {"Files/link", "\\Windows\\System32", false},
        {"Files/a/b/up", "..\\..\\Windows", false},
        {"Files/a/rel", "./b/../c", false},
        {"Files/root", "C:\\", true},
        {"UtilityVM/Files/Windows/sys", "..\\Windows\\System32", false},
        {"Files/deep", "C:\\a\\..\\..\\..", false}, /* refused below: climbs out */
    };
    for (size_t i = 0; i + 1 < sizeof(ok) / sizeof(ok[0]); i++) {
        struct err err = {0};
        ck_assert_msg(one_link(ok[i].path, ok[i].target, ok[i].mp, &err) == 0, "%s -> %s: %s",
                      ok[i].path, ok[i].target, err.msg);
    }
    const struct {
        const char *path, *target;
        bool mp;
        const char *why;
    } bad[] = {
        {"Files/deep", "C:\\a\\..\\..\\..", false, "leads out of the layer's Files"},
        {"Files/up", "..\\Hives\\Sam_Delta", false, "leads out of the layer's Files"},
        {"Files/a/up", "../../x", false, "leads out of the layer's Files"},
        {"UtilityVM/Files/up", "..\\..\\Files\\x", false,
         "leads out of the layer's UtilityVM/Files"},
        {"UtilityVM/link", "C:\\Windows", false, "outside UtilityVM/Files"},
        {"Files/d", "D:\\data", true, "another drive"},
        {"Files/share", "\\\\server\\share\\x", false, "network share"},
        {"Files/dev", "\\\\.\\PhysicalDrive0", false, "network share or device"},
        {"Files/vol", "\\\\?\\Volume{0b5e0e57-0000-4000-8000-000000000001}\\x", true,
         "device or volume"},
        {"Files/unc", "\\??\\UNC\\server\\share", true, "device or volume"},
        {"Files/cwd", "C:Windows", false, "relative to C:'s current folder"},
        {"Files/stream", "C:\\x.txt:secret", false, "':' in a name"},
        {"Files/j", "Windows\\System32", true, "is relative; a junction names an absolute"},
        {"Files/j2", "..\\Windows", true, "is relative; a junction"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        ck_assert_int_eq(one_link(bad[i].path, bad[i].target, bad[i].mp, &err),
                         -ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(err.msg, bad[i].why) && strstr(err.msg, bad[i].path), "%s -> %s: %s",
                      bad[i].path, bad[i].target, err.msg);
    }
}
END_TEST

/* Nothing is written through a reparse point: the host would follow it out
 * of the layer (a junction to C:\Windows names the host's own). */
START_TEST(wclayer_refuses_entries_below_a_reparse_point)
{
    static const char *const dirattr[] = {"MSWINDOWS.fileattr=16", NULL};
    const struct {
        const char *name;
        char type;
        const char *const *pax;
    } below[] = {
        {"Files/x/System32/evil.dll", '0', NULL},
        {"Files/X/System32", '5', dirattr},
        {"Files/x/.wh.System32", '0', NULL},
        {"Files/x/a.txt", '2', NULL},
    };
    for (int mp = 0; mp < 2; mp++) {
        for (size_t i = 0; i < sizeof(below) / sizeof(below[0]); i++) {
            struct tbuf t = {0};
            entry(&t, "Files/x", '2', NULL, "C:\\Windows",
                  mp ? (const char *const[]){"MSWINDOWS.mountpoint=1", "MSWINDOWS.fileattr=1040",
                                             NULL}
                     : NULL);
            entry(&t, below[i].name, below[i].type, below[i].type == '0' ? "x" : NULL,
                  below[i].type == '2' ? "C:\\Users" : NULL, below[i].pax);
            finish(&t);
            struct rsink s = {0};
            struct wcl_layer_info info;
            struct err err = {0};
            ck_assert_int_eq(run(&t, &s, &info, &err), -ERR_INVALID_CONTENT);
            ck_assert_msg(strstr(err.msg, "lies below Files/x, a symlink or junction"), "%s: %s",
                          below[i].name, err.msg);
            ck_assert_int_eq(s.n, 1); /* the link alone reached the writer */
            free(t.p);
        }
    }
    /* Nor is anything created over one (a file written through a link to
     * C:\Windows\x.dll is the host's x.dll), in any case. */
    static const char *const over[] = {"Files/x", "Files/X"};
    for (int mp = 0; mp < 2; mp++) {
        for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
            struct tbuf t = {0};
            entry(&t, "Files/x", '2', NULL, "C:\\Windows\\x.dll",
                  mp ? (const char *const[]){"MSWINDOWS.mountpoint=1", "MSWINDOWS.fileattr=1040",
                                             NULL}
                     : NULL);
            entry(&t, over[i], '0', "evil", NULL, NULL);
            finish(&t);
            struct rsink s = {0};
            struct wcl_layer_info info;
            struct err err = {0};
            ck_assert_int_eq(run(&t, &s, &info, &err), -ERR_INVALID_CONTENT);
            ck_assert_msg(strstr(err.msg, "would replace Files/x, a symlink or junction"), "%s: %s",
                          over[i], err.msg);
            ck_assert_int_eq(s.n, 1);
            free(t.p);
        }
    }
    /* A directory of the same name first is a directory: below it is fine. */
    struct tbuf t = {0};
    entry(&t, "Files/x", '5', NULL, NULL, NULL);
    entry(&t, "Files/x/a.txt", '0', "a", NULL, NULL);
    entry(&t, "Files/xy", '2', NULL, "C:\\Windows", NULL);
    entry(&t, "Files/xy.txt", '0', "b", NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    free(t.p);
}
END_TEST

/* The little-endian UTF-16 of ASCII s, for comparing reparse buffers. */
static size_t
u16(const char *s, unsigned char *out)
{
    size_t n = 0;
    for (; *s; s++)
        out[n++] = (unsigned char)*s, out[n++] = 0;
    return n;
}

START_TEST(wclayer_reparse_data_is_go_winios_encoding)
{
    unsigned char buf[WCL_REPARSE_MAX], want[512];
    size_t len = 0;
    struct err err = {0};
    /* A junction: tag, data length, names \??\C:\ProgramData then C:\ProgramData, no NULs. */
    ck_assert_int_eq(wcl_reparse_encode("C:/ProgramData", true, buf, sizeof(buf), &len, &err), 0);
    size_t sub = u16("\\??\\C:\\ProgramData", want + 16);
    size_t pr = u16("C:\\ProgramData", want + 16 + sub);
    const unsigned char mp_head[16] = {0x03,
                                       0x00,
                                       0x00,
                                       0xa0,
                                       (unsigned char)(8 + sub + pr),
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       (unsigned char)sub,
                                       0,
                                       (unsigned char)sub,
                                       0,
                                       (unsigned char)pr,
                                       0};
    memcpy(want, mp_head, 16);
    ck_assert_uint_eq(len, 16 + sub + pr);
    ck_assert_mem_eq(buf, want, len);
    /* A relative symlink: the flags word says so, the substitute name is the target. */
    ck_assert_int_eq(wcl_reparse_encode("..\\Windows", false, buf, sizeof(buf), &len, &err), 0);
    ck_assert_uint_eq(len, 20 + 2 * 20);
    ck_assert_uint_eq(buf[0] | buf[1] << 8 | buf[2] << 16 | (uint32_t)buf[3] << 24,
                      WCL_REPARSE_TAG_SYMLINK);
    ck_assert_uint_eq(buf[4] | buf[5] << 8, 12 + 2 * 20);
    ck_assert_uint_eq(buf[16], WCL_SYMLINK_FLAG_RELATIVE);
    sub = u16("..\\Windows", want);
    ck_assert_mem_eq(buf + 20, want, sub);
    ck_assert_mem_eq(buf + 20 + sub, want, sub);
    /* \\?\C:\x and rooted \x are absolute: \??\C:\x, flags 0. */
    ck_assert_int_eq(wcl_reparse_encode("\\Windows", false, buf, sizeof(buf), &len, &err), 0);
    ck_assert_uint_eq(buf[16], 0);
    sub = u16("\\??\\C:\\Windows", want);
    ck_assert_mem_eq(buf + 20, want, sub);
    ck_assert_int_eq(wcl_reparse_encode("\\\\?\\C:\\x", true, buf, sizeof(buf), &len, &err), 0);
    sub = u16("\\??\\C:\\x", want);
    ck_assert_mem_eq(buf + 16, want, sub);
    /* Too little room is an error, never a short buffer. */
    ck_assert_int_lt(wcl_reparse_encode("C:\\ProgramData", true, buf, 30, &len, &err), 0);
}
END_TEST

START_TEST(wclayer_streams_belong_to_the_entry_before_them)
{
    struct tbuf t = {0};
    entry(&t, "Files/a.txt", '0', "main", NULL, NULL);
    entry(&t, "Files/a.txt:Zone.Identifier", '0', "zone", NULL, NULL);
    entry(&t, "Files/a.txt:second:$DATA", '0', "2", NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(find(&s, "Files/a.txt:Zone.Identifier")->e.kind, WCL_STREAM);
    ck_assert_str_eq(find(&s, "Files/a.txt:Zone.Identifier")->data, "zone");
    ck_assert_int_eq(find(&s, "Files/a.txt:second:$DATA")->e.kind, WCL_STREAM);
    free(t.p);

    struct tbuf u = {0};
    entry(&u, "Files/a.txt", '0', "main", NULL, NULL);
    entry(&u, "Files/b.txt", '0', "b", NULL, NULL);
    entry(&u, "Files/a.txt:late", '0', "zone", NULL, NULL);
    finish(&u);
    struct rsink s2 = {0};
    ck_assert_int_eq(run(&u, &s2, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "stream Files/a.txt:late does not follow its file"));
    free(u.p);
}
END_TEST

START_TEST(wclayer_whiteouts_name_what_they_remove)
{
    struct tbuf t = {0};
    entry(&t, "Files/dir/.wh.gone.txt", '0', NULL, NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(s.v[0].e.kind, WCL_WHITEOUT);
    ck_assert_str_eq(s.v[0].path, "Files/dir/gone.txt");
    free(t.p);
    const char *bad[][2] = {{"Files/dir/.wh..wh..opq", "no opaque directories"},
                            {"Hives/.wh.Software_Delta", "outside Files/ and UtilityVM/"},
                            {"Files/.wh.", "ending in '.'"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct tbuf u = {0};
        entry(&u, bad[i][0], '0', NULL, NULL, NULL);
        finish(&u);
        struct rsink s2 = {0};
        ck_assert_int_eq(run(&u, &s2, &info, &err), -ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
        ck_assert_uint_eq(s2.n, 0);
        free(u.p);
    }
    struct tbuf u = {0};
    entry(&u, "Files/.wh.dir", '5', NULL, NULL, NULL);
    finish(&u);
    struct rsink s3 = {0};
    ck_assert_int_eq(run(&u, &s3, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "whiteout Files/.wh.dir is not a regular entry"));
    free(u.p);
}
END_TEST

START_TEST(wclayer_refuses_hostile_names_naming_them)
{
    char longc[300];
    snprintf(longc, sizeof(longc), "Files/%0256d", 7);
    const char *bad[][2] = {
        {"../x", "'.' or '..'"},
        {"Files/../../etc/passwd", "'.' or '..'"},
        {"Files/a/./b", "'.' or '..'"},
        {"/Files/x", "absolute"},
        {"C:/Files/x", "absolute"},
        {"c:Files", "absolute"},
        {"Files\\..\\x", "character Windows refuses"},
        {"Other/x", "not under Files/, Hives/ or UtilityVM/"},
        {"files/x", "not under Files/, Hives/ or UtilityVM/"},
        {"FilesX/y", "not under Files/, Hives/ or UtilityVM/"},
        {"Files:evil", "not under Files/"},
        {"Files/dir:x/y", "character Windows refuses"},
        {"Files/CON", "names a device"},
        {"Files/nul.txt", "names a device"},
        {"Files/Com1", "names a device"},
        {"Files/lpt9.log", "names a device"},
        {"Files/trail.", "ending in '.' or ' '"},
        {"Files/trail ", "ending in '.' or ' '"},
        {"Files/a<b", "character Windows refuses"},
        {"Files/a>b", "character Windows refuses"},
        {"Files/a\"b", "character Windows refuses"},
        {"Files/a|b", "character Windows refuses"},
        {"Files/a?b", "character Windows refuses"},
        {"Files/a*b", "character Windows refuses"},
        {"Files/a\x01"
         "b",
         "character Windows refuses"},
        {"Files/\xff\xfe", "not valid UTF-8"},
        {"Files/\xc0\xaf", "not valid UTF-8"},
        {"Files/\xed\xa0\x80", "not valid UTF-8"},
        {"Files/a.txt:", "empty component"},
        {longc, "component of 256 bytes"},
        {"Hives/Evil_Delta", "not a hive delta"},
        {"Hives/sub/System_Delta", "not a hive delta"},
        {"Hives/System", "not a hive delta"},
        {"./", "empty name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct tbuf t = {0};
        entry(&t, "Files/ok", '0', "fine", NULL, NULL);
        entry(&t, bad[i][0], '0', "x", NULL, NULL);
        finish(&t);
        struct rsink s = {0};
        struct wcl_layer_info info;
        struct err err = {0};
        ck_assert_msg(run(&t, &s, &info, &err) == -ERR_INVALID_CONTENT, "%s was accepted",
                      bad[i][0]);
        ck_assert_msg(strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
        ck_assert_uint_eq(s.n, 1); /* nothing of the hostile entry reached the sink */
        free(t.p);
    }
    /* Device types and FIFOs are not in Windows layers. */
    struct tbuf t = {0};
    entry(&t, "Files/dev", '3', NULL, NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_int_eq(run(&t, &s, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "Files/dev is of tar type '3'"));
    free(t.p);
}
END_TEST

START_TEST(wclayer_case_only_collisions_replace_the_earlier_entry)
{
    struct tbuf t = {0};
    entry(&t, "Files/Readme.txt", '0', "first", NULL, NULL);
    entry(&t, "Files/README.TXT", '0', "second", NULL, NULL);
    entry(&t, "Files/Dir", '5', NULL, NULL, NULL);
    entry(&t, "Files/DIR", '5', NULL, NULL, NULL);
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    const struct rec_entry *r = find(&s, "Files/README.TXT");
    ck_assert(r->e.replaces);
    ck_assert(!r->e.replaces_readonly);
    ck_assert_str_eq(r->replaced, "Files/Readme.txt");
    ck_assert(!find(&s, "Files/Readme.txt")->e.replaces);
    ck_assert_uint_eq(info.case_collisions, 1);
    free(t.p);

    /* A file over a directory (or the reverse) of the same name in another case is refused. */
    struct tbuf u = {0};
    entry(&u, "Files/Dir", '5', NULL, NULL, NULL);
    entry(&u, "Files/dir", '0', "x", NULL, NULL);
    finish(&u);
    struct rsink s2 = {0};
    ck_assert_int_eq(run(&u, &s2, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "Files/dir would replace Files/Dir, a directory"));
    free(u.p);
}
END_TEST

START_TEST(wclayer_read_only_namesake_is_made_writable_and_created_again)
{
    struct tbuf t = {0};
    entry(&t, "Files/Setup.ini", '0', "old", NULL,
          (const char *const[]){"MSWINDOWS.fileattr=1", NULL});
    entry(&t, "Files/SETUP.INI", '0', "new", NULL, NULL);
    finish(&t);
    struct rsink s = {.ntfs = true};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_msg(run(&t, &s, &info, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(s.calls,
                     "E:Files/Setup.ini;E:Files/SETUP.INI;W:Files/Setup.ini;E:Files/SETUP.INI;");
    ck_assert_uint_eq(info.readonly_retries, 1);
    ck_assert(find(&s, "Files/SETUP.INI")->e.replaces_readonly);
    ck_assert_str_eq(find(&s, "Files/SETUP.INI")->data, "new");
    free(t.p);

    /* A permission error for any other reason is the import's error: no retry. */
    struct tbuf u = {0};
    entry(&u, "Files/a", '0', "x", NULL, NULL);
    finish(&u);
    struct rsink s2 = {.fail_all = EACCES};
    ck_assert_int_eq(run(&u, &s2, &info, &err), -EACCES);
    ck_assert_str_eq(s2.calls, "E:Files/a;");
    ck_assert_ptr_nonnull(strstr(err.msg, "windows layer: Files/a"));
    free(u.p);
}
END_TEST

START_TEST(wclayer_hive_deltas_apply_in_layer_order)
{
    const char *layers[3][3] = {{"Hives/Software_Delta", "Hives/System_Delta", NULL},
                                {NULL},
                                {"Hives/Software_Delta", "Hives/Sam_Delta", NULL}};
    struct wcl_layer_info info[3];
    for (int l = 0; l < 3; l++) {
        struct tbuf t = {0};
        entry(&t, "Files/x", '0', "x", NULL, NULL);
        for (int i = 0; layers[l][i]; i++)
            entry(&t, layers[l][i], '0', "regf", NULL, NULL);
        finish(&t);
        struct rsink s = {0};
        struct err err = {0};
        ck_assert_msg(run(&t, &s, &info[l], &err) == 0, "%s", err.msg);
        free(t.p);
    }
    struct wcl_hive_plan p;
    struct err err = {0};
    ck_assert_int_eq(wcl_hive_plan_build(info, 3, &p, &err), 0);
    /* Every layer's delta is kept, bottom first (flattening kept only the last). */
    ck_assert_uint_eq(p.count[WCL_HIVE_SOFTWARE], 2);
    ck_assert_uint_eq(p.layers[WCL_HIVE_SOFTWARE][0], 0);
    ck_assert_uint_eq(p.layers[WCL_HIVE_SOFTWARE][1], 2);
    ck_assert_uint_eq(p.count[WCL_HIVE_SYSTEM], 1);
    ck_assert_uint_eq(p.layers[WCL_HIVE_SYSTEM][0], 0);
    ck_assert_uint_eq(p.count[WCL_HIVE_SAM], 1);
    ck_assert_uint_eq(p.layers[WCL_HIVE_SAM][0], 2);
    ck_assert_uint_eq(p.count[WCL_HIVE_SECURITY], 0);
    ck_assert_uint_eq(p.count[WCL_HIVE_DEFAULTUSER], 0);
    ck_assert_str_eq(wcl_hive_name(WCL_HIVE_DEFAULTUSER), "DefaultUser");
    wcl_hive_plan_close(&p);
}
END_TEST

START_TEST(wclayer_refuses_bad_pax_records)
{
    const char *bad[][2] = {
        {"MSWINDOWS.rawsd=not base64!", "MSWINDOWS.rawsd is not base64"},
        {"MSWINDOWS.rawsd=AQAEgA", "MSWINDOWS.rawsd is not base64"},
        {"MSWINDOWS.rawsd=AQAEgA==", "shorter than its 20-byte header"},
        /* revision 2 */
        {"MSWINDOWS.rawsd=AgAEgAAAAAAAAAAAAAAAAAAAAAA=", "revision is not 1"},
        /* absolute (not self-relative) */
        {"MSWINDOWS.rawsd=AQAEAAAAAAAAAAAAAAAAAAAAAAA=", "not self-relative"},
        /* owner at offset 200 of 20 bytes */
        {"MSWINDOWS.rawsd=AQAEgMgAAAAAAAAAAAAAAAAAAAA=", "bad owner SID"},
        /* owner SID with 16 sub-authorities */
        {"MSWINDOWS.rawsd=AQAEgBQAAAAAAAAAAAAAAAAAAAABEAAAAAAABRIAAAA=", "bad owner SID"},
        /* DACL whose one ACE claims 64 bytes in an ACL of 16 */
        {"MSWINDOWS.rawsd=AQAEgAAAAAAAAAAAAAAAABQAAAACABAAAQAAAAAAQAAAAAAA", "bad DACL"},
        {"MSWINDOWS.fileattr=abc", "MSWINDOWS.fileattr abc is not a 32-bit decimal"},
        {"MSWINDOWS.fileattr=4294967296", "not a 32-bit decimal"},
        {"MSWINDOWS.fileattr=-1", "not a 32-bit decimal"},
        {"MSWINDOWS.fileattr=16", "has the directory bit of a file"},
        {"LIBARCHIVE.creationtime=yesterday", "LIBARCHIVE.creationtime yesterday"},
        {"LIBARCHIVE.creationtime=1.", "LIBARCHIVE.creationtime 1."},
        {"LIBARCHIVE.creationtime=99999999999999999999", "LIBARCHIVE.creationtime"},
        {"MSWINDOWS.xattr.user=@@@@", "extended attribute MSWINDOWS.xattr.user"},
        {"MSWINDOWS.xattr.=AAAA", "extended attribute"},
        {"MSWINDOWS.sd=O:SY\x01", "not printable SDDL"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct tbuf t = {0};
        entry(&t, "Files/f", '0', "x", NULL, (const char *const[]){bad[i][0], NULL});
        finish(&t);
        struct rsink s = {0};
        struct wcl_layer_info info;
        struct err err = {0};
        ck_assert_msg(run(&t, &s, &info, &err) == -ERR_INVALID_CONTENT, "%s was accepted",
                      bad[i][0]);
        ck_assert_msg(strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
        ck_assert_msg(strstr(err.msg, "Files/f"), "%s", err.msg);
        ck_assert_uint_eq(s.n, 0);
        free(t.p);
    }
    /* A directory without the directory bit is refused too; with it, it is a directory. */
    struct tbuf t = {0};
    entry(&t, "Files/d", '5', NULL, NULL, (const char *const[]){"MSWINDOWS.fileattr=32", NULL});
    finish(&t);
    struct rsink s = {0};
    struct wcl_layer_info info;
    struct err err = {0};
    ck_assert_int_eq(run(&t, &s, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "lacks the directory bit of a directory"));
    free(t.p);
}
END_TEST

START_TEST(wclayer_base64_is_strict)
{
    unsigned char *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(wcl_base64_decode("aGk=", 4, &out, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(out, "hi", 2);
    free(out);
    ck_assert_int_eq(wcl_base64_decode("aGl=", 4, &out, &n), -EINVAL); /* non-canonical */
    ck_assert_int_eq(wcl_base64_decode("aG=k", 4, &out, &n), -EINVAL);
    ck_assert_int_eq(wcl_base64_decode("a===", 4, &out, &n), -EINVAL);
    ck_assert_int_eq(wcl_base64_decode("aGk", 3, &out, &n), -EINVAL);
    ck_assert_int_eq(wcl_base64_decode("aG\nk", 4, &out, &n), -EINVAL);
    ck_assert_int_eq(wcl_base64_decode("", 0, &out, &n), 0);
    ck_assert_uint_eq(n, 0);
    free(out);
}
END_TEST

START_TEST(wclayer_refuses_damaged_tar_streams)
{
    struct rsink s;
    struct wcl_layer_info info;
    struct err err;

    /* A flipped byte in a header. */
    struct tbuf t = {0};
    entry(&t, "Files/a", '0', "data", NULL, NULL);
    finish(&t);
    t.p[3] ^= 1;
    memset(&s, 0, sizeof(s));
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(run(&t, &s, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "bad header checksum at byte 0"));
    t.p[3] ^= 1;

    /* Cut inside the data, inside a header, and before the end marker. */
    size_t cuts[] = {512 + 2, 100, 1024};
    const char *why[] = {"ends early", "ends early", "ends early"};
    size_t full = t.len;
    for (size_t i = 0; i < 3; i++) {
        t.len = cuts[i];
        memset(&s, 0, sizeof(s));
        memset(&err, 0, sizeof(err));
        ck_assert_int_eq(run(&t, &s, &info, &err), -ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(err.msg, why[i]), "cut at %zu: %s", cuts[i], err.msg);
    }
    t.len = full;
    free(t.p);

    /* A PAX record whose length lies, and an extended header past the bound. */
    struct tbuf u = {0};
    header(&u, "PaxHeaders/x", 'x', 12, NULL);
    tb_put(&u, "99 path=a\n\0\0", 12);
    tb_pad(&u);
    header(&u, "Files/a", '0', 0, NULL);
    finish(&u);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(run(&u, &s, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "bad PAX record"));
    free(u.p);
    struct tbuf v = {0};
    header(&v, "PaxHeaders/x", 'x', WTAR_PAX_MAX + 1, NULL);
    finish(&v);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(run(&v, &s, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "extended header"));
    free(v.p);

    /* A PAX path that renames the entry to a hostile name is checked as the name. */
    struct tbuf w = {0};
    entry(&w, "Files/innocent", '0', "x", NULL,
          (const char *const[]){"path=Files/../../evil", NULL});
    finish(&w);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(run(&w, &s, &info, &err), -ERR_INVALID_CONTENT);
    ck_assert_ptr_nonnull(strstr(err.msg, "Files/../../evil"));
    free(w.p);
}
END_TEST

static Suite *
wclayer_suite(void)
{
    Suite *s = suite_create("store_wclayer");
    TCase *tc = tcase_create("wclayer");
    tcase_add_test(tc, wclayer_imports_files_hives_and_the_utility_vm_with_their_records);
    tcase_add_test(tc, wclayer_folds_dot_slash_and_repeated_slashes_and_keeps_long_pax_names);
    tcase_add_test(tc, wclayer_reparse_points_junctions_and_hard_links);
    tcase_add_test(tc, wclayer_refuses_entries_below_a_reparse_point);
    tcase_add_test(tc, wclayer_reparse_targets_stay_inside_the_layer);
    tcase_add_test(tc, wclayer_reparse_data_is_go_winios_encoding);
    tcase_add_test(tc, wclayer_streams_belong_to_the_entry_before_them);
    tcase_add_test(tc, wclayer_whiteouts_name_what_they_remove);
    tcase_add_test(tc, wclayer_refuses_hostile_names_naming_them);
    tcase_add_test(tc, wclayer_case_only_collisions_replace_the_earlier_entry);
    tcase_add_test(tc, wclayer_read_only_namesake_is_made_writable_and_created_again);
    tcase_add_test(tc, wclayer_hive_deltas_apply_in_layer_order);
    tcase_add_test(tc, wclayer_refuses_bad_pax_records);
    tcase_add_test(tc, wclayer_base64_is_strict);
    tcase_add_test(tc, wclayer_refuses_damaged_tar_streams);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(wclayer_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
