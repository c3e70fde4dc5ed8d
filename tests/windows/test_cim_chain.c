/*
 * store/cim_chain_windows.c against the TEST DOUBLE of cimfs.dll: an
 * image's layer blobs, in a real blob store, written into one CIM per
 * layer named by its chain ID, each forked from its parent's; a second
 * call (the next container of the image) writes nothing; an image that
 * shares the base reuses its CIM; a blob whose bytes are not the layer's
 * diff_id leaves no CIM. The gc (cim_chain_gc): of two images on one
 * base, deleting one removes its top CIM with the region and object ID
 * files its write added, a mounted CIM is kept with its parent, deleting
 * both removes everything, and what a crash left (a .cim without its
 * record, stray files) goes too.
 */
#include "store/cim_chain.h"

#include <windows.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fixtures/wclayer_tar.h"
#include "store/blob.h"
#include "store/digest.h"
#include "store/layer_int.h"
#include "store/mount_journal.h"
#include "wcs_double.h"

static char rec_dir[MAX_PATH + 100], cim_dir[MAX_PATH + 100];
static struct blob_store *bs;

static void
setup(void)
{
    char exe[MAX_PATH];
    GetModuleFileNameA(NULL, exe, sizeof(exe));
    *strrchr(exe, '\\') = '\0';
    static char env[MAX_PATH + 64];
    snprintf(env, sizeof(env), "BERTH_TEST_CIMFS_DLL=%s\\cimfs-double\\cimfs.dll", exe);
    _putenv(env);
    wcs_double_setup("cimchain");
    snprintf(rec_dir, sizeof(rec_dir), "%s\\cimfs-log", wcs_tmp);
    CreateDirectoryA(rec_dir, NULL);
    snprintf(cim_dir, sizeof(cim_dir), "%s\\cims", wcs_tmp);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_DIR", rec_dir);
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", NULL);
    struct err err = {0};
    CreateDirectoryA(wcs_path(0, "store"), NULL);
    bs = blob_store_open(wcs_path(0, "store"), &err);
    ck_assert_msg(bs, "%s", err.msg);
}

static void
teardown(void)
{
    blob_store_free(bs);
    bs = NULL;
    wcs_double_teardown();
}

/* How many times cimfs.dll's double logged what. */
static int
logged(const char *what)
{
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\calls.log", rec_dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    int k = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
        k++;
    return k;
}

/* A layer of one file, stored as an uncompressed blob (digest = diff_id), chained on parent. */
static void
layer_put(const char *file, const char *data, const struct meta_layer *parent,
          struct meta_layer *out)
{
    struct tbuf t = {0};
    entry(&t, "Files", '5', NULL, NULL, NULL);
    entry(&t, file, '0', data, NULL, NULL);
    if (!parent)
        entry(&t, "Hives", '5', NULL, NULL, NULL);
    finish(&t);
    struct err err = {0};
    struct blob_writer *w = blob_writer_new(bs, NULL, NULL, -1, -1, &err);
    ck_assert_msg(w, "%s", err.msg);
    ck_assert_int_eq(blob_writer_write(w, t.p, t.len, &err), 0);
    memset(out, 0, sizeof(*out));
    ck_assert_msg(blob_writer_finish(w, out->digest, &out->size, &err) == 0, "%s", err.msg);
    memcpy(out->diff_id, out->digest, sizeof(out->diff_id));
    if (parent)
        ck_assert_int_eq(digest_chain_id(parent->chain_id, out->diff_id, out->chain_id, &err), 0);
    else
        memcpy(out->chain_id, out->diff_id, sizeof(out->chain_id));
    free(t.p);
}

static void
cims_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

START_TEST(each_layer_becomes_a_cim_forked_from_its_parents_once)
{
    struct meta_layer l[3];
    layer_put("Files/base.txt", "base", NULL, &l[0]);
    layer_put("Files/top.txt", "top", &l[0], &l[1]);
    char **cims = NULL;
    struct err err = {0};
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, l, 2, &cims, &err) == 0, "%s", err.msg);
    char want[2][MAX_PATH * 2], line[MAX_PATH * 4];
    for (int i = 0; i < 2; i++) {
        snprintf(want[i], sizeof(want[i]), "%s\\%s.cim", cim_dir, l[i].chain_id + 7);
        ck_assert_str_eq(cims[i], want[i]);
        ck_assert(wcs_exists(cims[i]));
    }
    /* The base from nothing, the top forked from it. */
    snprintf(line, sizeof(line), "CimCreateImage dir=%s existing=- new=%s.cim", cim_dir,
             l[0].chain_id + 7);
    ck_assert_msg(logged(line) == 1, "%s", line);
    snprintf(line, sizeof(line), "CimCreateImage dir=%s existing=%s.cim new=%s.cim", cim_dir,
             l[0].chain_id + 7, l[1].chain_id + 7);
    ck_assert_msg(logged(line) == 1, "%s", line);
    ck_assert_int_eq(logged("CimCommitImage"), 2);
    cims_free(cims, 2);

    /* The next container of the image writes nothing. */
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, l, 2, &cims, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(logged("CimCreateImage"), 2);
    cims_free(cims, 2);

    /* Another image on the same base writes its own top only. */
    struct meta_layer other[2] = {l[0]};
    layer_put("Files/other.txt", "other", &l[0], &other[1]);
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, other, 2, &cims, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(logged("CimCreateImage"), 3);
    ck_assert_str_eq(cims[0], want[0]);
    cims_free(cims, 2);
}
END_TEST

START_TEST(a_blob_that_is_not_the_layers_diff_id_leaves_no_cim)
{
    struct meta_layer l;
    layer_put("Files/base.txt", "base", NULL, &l);
    /* The image says another diff_id (and so another chain ID). */
    struct err err = {0};
    ck_assert_int_eq(digest_of("not this", 8, l.diff_id), 0);
    memcpy(l.chain_id, l.diff_id, sizeof(l.chain_id));
    char **cims = NULL;
    ck_assert_int_eq(cim_chain_ensure(bs, cim_dir, &l, 1, &cims, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "diff_id"), "%s", err.msg);
    char path[MAX_PATH * 2];
    snprintf(path, sizeof(path), "%s\\%s.cim", cim_dir, l.chain_id + 7);
    ck_assert(!wcs_exists(path));
    /* A layer whose blob is gone says so. */
    struct meta_layer gone = l;
    ck_assert_int_eq(digest_of("gone", 4, gone.digest), 0);
    ck_assert_int_eq(cim_chain_ensure(bs, cim_dir, &gone, 1, &cims, &err), -ENOENT);
    ck_assert_msg(strstr(err.msg, gone.digest), "%s", err.msg);
}
END_TEST

/* The chain IDs the gc is told are in use (the images still stored). */
static const char *live_chains[4];

static bool
live(void *arg, const char *chain_id)
{
    (void)arg;
    for (int i = 0; i < 4; i++)
        if (live_chains[i] && strcmp(live_chains[i], chain_id) == 0)
            return true;
    return false;
}

/* The names in cim_dir, sorted and joined by ' '. */
static const char *
cim_files(void)
{
    static char out[8192];
    char pat[MAX_PATH * 2], *names[64];
    int n = 0;
    WIN32_FIND_DATAA fd;
    snprintf(pat, sizeof(pat), "%s\\*", cim_dir);
    HANDLE h = FindFirstFileA(pat, &fd);
    out[0] = '\0';
    if (h == INVALID_HANDLE_VALUE)
        return out;
    do
        if (fd.cFileName[0] != '.' && n < 64)
            names[n++] = strdup(fd.cFileName);
    while (FindNextFileA(h, &fd));
    FindClose(h);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    for (int i = 0; i < n; i++) {
        strcat(out, i ? " " : "");
        strcat(out, names[i]);
        free(names[i]);
    }
    return out;
}

/* How many names in cim_dir start with prefix. */
static int
cim_count(const char *prefix)
{
    int k = 0;
    for (const char *p = cim_files(); (p = strstr(p, prefix)) != NULL; p++)
        k += p == cim_files() || p[-1] == ' ';
    return k;
}

static bool
cim_has(const struct meta_layer *y, const char *suffix)
{
    char name[DIGEST_STR_LEN + 8];
    snprintf(name, sizeof(name), "%s%s", y->chain_id + 7, suffix);
    return strstr(cim_files(), name) != NULL;
}

static void
gc(uint64_t removed)
{
    char journal[MAX_PATH * 2];
    snprintf(journal, sizeof(journal), "%s\\mounts", wcs_tmp);
    struct cim_gc_result res;
    struct err err = {0};
    ck_assert_msg(cim_chain_gc(cim_dir, journal, live, NULL, &res, &err) == 0, "%s", err.msg);
    ck_assert_msg(res.removed == removed, "removed %llu, want %llu: %s",
                  (unsigned long long)res.removed, (unsigned long long)removed, cim_files());
    ck_assert_uint_eq(res.errors, 0);
}

START_TEST(gc_removes_the_cims_no_image_or_mount_uses)
{
    struct meta_layer a[2], b[2];
    layer_put("Files/base.txt", "base", NULL, &a[0]);
    layer_put("Files/a.txt", "a", &a[0], &a[1]);
    b[0] = a[0];
    layer_put("Files/b.txt", "b", &b[0], &b[1]);
    char **cims = NULL;
    struct err err = {0};
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, a, 2, &cims, &err) == 0, "%s", err.msg);
    cims_free(cims, 2);
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, b, 2, &cims, &err) == 0, "%s", err.msg);
    char mounted_b[MAX_PATH * 2];
    snprintf(mounted_b, sizeof(mounted_b), "%s", cims[1]);
    cims_free(cims, 2);
    /* Three CIMs, each with its record and its region and object ID files. */
    ck_assert_msg(cim_count("region_") == 3, "%s", cim_files());
    ck_assert_int_eq(cim_count("objectid_"), 3);
    ck_assert_int_eq(cim_count(a[0].chain_id + 7), 2);
    /* The top's record names its parent and the two files its write added. */
    char own[MAX_PATH * 2], text[1024] = "", want[256];
    snprintf(own, sizeof(own), "%s\\%s.own", cim_dir, a[1].chain_id + 7);
    FILE *f = fopen(own, "rb");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    snprintf(want, sizeof(want), "berth-cim 1\nparent %s.cim\nfile ", a[0].chain_id + 7);
    ck_assert_msg(strncmp(text, want, strlen(want)) == 0, "%s", text);
    ck_assert_msg(strstr(text, "\nfile region_") && strstr(text, "\nfile objectid_"), "%s", text);

    /* Both images stored: nothing goes. */
    live_chains[0] = a[0].chain_id, live_chains[1] = a[1].chain_id, live_chains[2] = b[1].chain_id;
    gc(0);
    ck_assert_int_eq(cim_count("region_"), 3);

    /* Image a deleted: its top goes with its files, the shared base stays. */
    live_chains[1] = NULL;
    gc(1);
    ck_assert(!cim_has(&a[1], ".cim") && !cim_has(&a[1], ".own"));
    ck_assert(cim_has(&a[0], ".cim") && cim_has(&b[1], ".cim"));
    ck_assert_int_eq(cim_count("region_"), 2);
    ck_assert_int_eq(cim_count("objectid_"), 2);

    /* Image b deleted while a container has its top mounted: the top and
     * the base it forks from stay. */
    struct mjournal *j = NULL;
    char journal[MAX_PATH * 2];
    snprintf(journal, sizeof(journal), "%s\\mounts", wcs_tmp);
    ck_assert_msg(mjournal_open(journal, &j, &err) == 0, "%s", err.msg);
    struct mj_entry *e = mj_entry_new("rootfs-c1", "container:c1", LAYER_KIND_CIMFS);
    ck_assert_int_eq(mj_entry_set(e, "cim", mounted_b, &err), 0);
    ck_assert_msg(mjournal_put(j, e, &err) == 0, "%s", err.msg);
    live_chains[0] = live_chains[2] = NULL;
    gc(0);
    ck_assert(cim_has(&a[0], ".cim") && cim_has(&b[1], ".cim"));
    ck_assert_int_eq(cim_count("region_"), 2);

    /* Unmounted: everything goes. */
    ck_assert_int_eq(mjournal_remove(j, e->name, &err), 0);
    mj_entry_free(e);
    mjournal_free(j);
    gc(2);
    ck_assert_str_eq(cim_files(), "");
}
END_TEST

START_TEST(gc_removes_what_a_crash_left_and_ensure_rewrites_it)
{
    struct meta_layer l;
    layer_put("Files/base.txt", "base", NULL, &l);
    char **cims = NULL;
    struct err err = {0};
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, &l, 1, &cims, &err) == 0, "%s", err.msg);
    /* A crash after the commit, before the record; and a write cut short. */
    char own[MAX_PATH * 2], stray[MAX_PATH * 2];
    snprintf(own, sizeof(own), "%s\\%s.own", cim_dir, l.chain_id + 7);
    ck_assert(DeleteFileA(own));
    snprintf(stray, sizeof(stray), "%s\\region_deadbeef_0", cim_dir);
    wcs_write(stray, "half");
    /* The next container's create writes it again, with its record. */
    ck_assert_msg(cim_chain_ensure(bs, cim_dir, &l, 1, &cims, &err) == 0, "%s", err.msg);
    cims_free(cims, 1);
    ck_assert_int_eq(logged("CimCreateImage"), 2);
    ck_assert(wcs_exists(own));
    /* Still in use: only the region files no record names go. */
    live_chains[0] = l.chain_id;
    gc(0);
    ck_assert(!wcs_exists(stray));
    ck_assert_int_eq(cim_count("region_"), 1);
    ck_assert_int_eq(cim_count("objectid_"), 1);
    /* A .cim a crash left without its record goes, unused. */
    ck_assert(DeleteFileA(own));
    live_chains[0] = NULL;
    gc(1);
    ck_assert_int_eq(cim_count(l.chain_id + 7), 0);
    ck_assert_str_eq(cim_files(), "");
}
END_TEST

START_TEST(block_layers_get_one_merged_cim_per_top_chain_shared_and_swept_with_it)
{
    struct meta_layer l[2], other[2];
    layer_put("Files/base.txt", "base", NULL, &l[0]);
    layer_put("Files/top.txt", "top", &l[0], &l[1]);
    char **cims = NULL, *merged = NULL;
    struct err err = {0};
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    char want[MAX_PATH * 2], line[MAX_PATH * 6];
    snprintf(want, sizeof(want), "%s\\%s-merged.cim", cim_dir, l[1].chain_id + 7);
    ck_assert_str_eq(merged, want);
    /* Each layer its own block file (no fork), the merge top-most first. */
    snprintf(line, sizeof(line), "CimCreateImage2 flags=0x18 file=%s new=layer.cim", cims[0]);
    ck_assert_msg(logged(line) == 1, "%s", line);
    ck_assert_int_eq(logged("CimCreateImage dir="), 0);
    snprintf(line, sizeof(line), "CimAddFsToMergedImage2 flags=0x1 %s\\layer.cim", cims[1]);
    ck_assert_int_eq(logged(line), 1);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 2);
    /* The top's record names the merged CIM, which goes with it. */
    ck_assert(cim_has(&l[1], "-merged.cim"));
    char own[MAX_PATH * 2], text[1024] = "", wl[256];
    snprintf(own, sizeof(own), "%s\\%s.own", cim_dir, l[1].chain_id + 7);
    FILE *f = fopen(own, "rb");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    snprintf(wl, sizeof(wl), "\nfile %s-merged.cim\n", l[1].chain_id + 7);
    ck_assert_msg(strstr(text, wl), "%s", text);
    cims_free(cims, 2);
    free(merged);

    /* A second image with the same chain reuses it: nothing written. */
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_str_eq(merged, want);
    ck_assert_int_eq(logged("CimCreateImage2"), 3);
    cims_free(cims, 2);
    free(merged);
    /* Another top on the same base: its own block file and merged CIM only. */
    other[0] = l[0];
    layer_put("Files/other.txt", "other", &l[0], &other[1]);
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, other, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimCreateImage2"), 5);
    cims_free(cims, 2);
    free(merged);
    /* One layer: no merged CIM. */
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 1, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_ptr_null(merged);
    cims_free(cims, 1);
    ck_assert_int_eq(cim_count("region_"), 0);

    /* The first image deleted: its top and merged CIM go; the base and
     * the other chain stay. */
    live_chains[0] = other[0].chain_id, live_chains[1] = other[1].chain_id;
    gc(1);
    ck_assert(!cim_has(&l[1], ".cim") && !cim_has(&l[1], "-merged.cim") && !cim_has(&l[1], ".own"));
    ck_assert(cim_has(&l[0], ".cim") && cim_has(&other[1], "-merged.cim"));
    live_chains[0] = live_chains[1] = NULL;
    gc(2);
    ck_assert_str_eq(cim_files(), "");
}
END_TEST

START_TEST(a_merged_cim_a_crash_left_unrecorded_is_written_again)
{
    struct meta_layer l[2];
    layer_put("Files/base.txt", "base", NULL, &l[0]);
    layer_put("Files/top.txt", "top", &l[0], &l[1]);
    char **cims = NULL, *merged = NULL;
    struct err err = {0};
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    cims_free(cims, 2);
    /* The record as it was before the merge was named in it. */
    char own[MAX_PATH * 2], text[1024] = "";
    snprintf(own, sizeof(own), "%s\\%s.own", cim_dir, l[1].chain_id + 7);
    FILE *f = fopen(own, "rb");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    char *cut = strstr(text, "file ");
    ck_assert_ptr_nonnull(cut);
    *cut = '\0';
    wcs_write(own, text);
    wcs_write(merged, "half");
    free(merged);
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 4);
    FILE *m = fopen(merged, "rb");
    char head[64] = "";
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(fgets(head, sizeof(head), m));
    fclose(m);
    ck_assert_str_eq(head, "berth-cimfs-double 1 block merged.cim\n");
    cims_free(cims, 2);
    /* Recorded but gone: written again. */
    ck_assert(DeleteFileA(merged));
    free(merged);
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 6);
    cims_free(cims, 2);
    free(merged);
    /* The base written again (its record lost): the merged CIM is made
     * anew for it, and the top's record still names it once. */
    char base_own[MAX_PATH * 2];
    snprintf(base_own, sizeof(base_own), "%s\\%s.own", cim_dir, l[0].chain_id + 7);
    ck_assert(DeleteFileA(base_own));
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 8);
    f = fopen(own, "rb");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    char *first = strstr(text, "-merged.cim");
    ck_assert_msg(first && !strstr(first + 1, "-merged.cim"), "%s", text);
    cims_free(cims, 2);
    free(merged);
    /* Nothing written: nothing merged again. */
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 8);
    cims_free(cims, 2);
    free(merged);
    /* A merge that fails leaves no merged file and fails the ensure. */
    ck_assert(DeleteFileA(own) && cim_has(&l[1], ".cim"));
    SetEnvironmentVariableA("BERTH_CIMFS_DOUBLE_FAIL", "merge");
    ck_assert_int_lt(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err), 0);
    ck_assert_msg(strstr(err.msg, "merged cim"), "%s", err.msg);
    ck_assert(!cim_has(&l[1], "-merged.cim"));
}
END_TEST

/* The gc removed a base, a crash stopped it before the top, and an image
 * of the base alone wrote the base again: the top's merged CIM, made of
 * the old base, is not reused, even when the clock went back meanwhile
 * (the new base's time is older than the merged CIM's). */
START_TEST(a_merged_cim_is_written_again_when_a_layer_it_merges_was_written_again_later)
{
    struct meta_layer l[2];
    layer_put("Files/base.txt", "base", NULL, &l[0]);
    layer_put("Files/top.txt", "top", &l[0], &l[1]);
    char **cims = NULL, *merged = NULL;
    struct err err = {0};
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 2);
    cims_free(cims, 2);
    free(merged);
    char base[MAX_PATH * 2], base_own[MAX_PATH * 2];
    snprintf(base, sizeof(base), "%s\\%s.cim", cim_dir, l[0].chain_id + 7);
    snprintf(base_own, sizeof(base_own), "%s\\%s.own", cim_dir, l[0].chain_id + 7);
    ck_assert(DeleteFileA(base_own) && DeleteFileA(base));
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 1, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_ptr_null(merged);
    cims_free(cims, 1);
    HANDLE h =
        CreateFileA(base, FILE_WRITE_ATTRIBUTES, FILE_SHARE_READ, NULL, OPEN_EXISTING, 0, NULL);
    ck_assert(h != INVALID_HANDLE_VALUE);
    FILETIME ft;
    ULARGE_INTEGER t;
    GetSystemTimeAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    t.QuadPart -= 3600ull * 10000000ull; /* an hour back */
    ft.dwLowDateTime = t.LowPart;
    ft.dwHighDateTime = t.HighPart;
    ck_assert(SetFileTime(h, NULL, NULL, &ft));
    CloseHandle(h);
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 4);
    cims_free(cims, 2);
    free(merged);
    /* And once made again, it is reused. */
    ck_assert_msg(cim_chain_ensure_block(bs, cim_dir, l, 2, &cims, &merged, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(logged("CimAddFsToMergedImage2"), 4);
    cims_free(cims, 2);
    free(merged);
}
END_TEST

int
main(void)
{
    (void)tb_read; /* wclayer_tar.h's reader: the blobs here are read by the store */
    Suite *s = suite_create("cim_chain");
    TCase *tc = tcase_create("chain");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, each_layer_becomes_a_cim_forked_from_its_parents_once);
    tcase_add_test(tc, a_blob_that_is_not_the_layers_diff_id_leaves_no_cim);
    tcase_add_test(tc, gc_removes_the_cims_no_image_or_mount_uses);
    tcase_add_test(tc, gc_removes_what_a_crash_left_and_ensure_rewrites_it);
    tcase_add_test(tc, block_layers_get_one_merged_cim_per_top_chain_shared_and_swept_with_it);
    tcase_add_test(tc, a_merged_cim_a_crash_left_unrecorded_is_written_again);
    tcase_add_test(tc,
                   a_merged_cim_is_written_again_when_a_layer_it_merges_was_written_again_later);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
