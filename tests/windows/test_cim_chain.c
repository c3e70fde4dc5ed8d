/*
 * store/cim_chain_windows.c against the TEST DOUBLE of cimfs.dll: an
 * image's layer blobs, in a real blob store, written into one CIM per
 * layer named by its chain ID, each forked from its parent's; a second
 * call (the next container of the image) writes nothing; an image that
 * shares the base reuses its CIM; a blob whose bytes are not the layer's
 * diff_id leaves no CIM.
 */
#include "store/cim_chain.h"

#include <windows.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cimfs_tar.h"
#include "store/blob.h"
#include "store/digest.h"
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

int
main(void)
{
    (void)tb_read; /* cimfs_tar.h's reader: the blobs here are read by the store */
    Suite *s = suite_create("cim_chain");
    TCase *tc = tcase_create("chain");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, each_layer_becomes_a_cim_forked_from_its_parents_once);
    tcase_add_test(tc, a_blob_that_is_not_the_layers_diff_id_leaves_no_cim);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
