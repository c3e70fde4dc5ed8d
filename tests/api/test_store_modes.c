/*
 * What berthd creates in its store is its own: after an import, a volume
 * with a child and an upload, and a restart, every file and directory of
 * the store is 0600/0700 or stricter (no group or other bits), whatever
 * the umask it was started with. Only content keeps its own modes: the
 * trees of snapshots (an image's files and its root) and of volumes'
 * data (what containers and clients see).
 */
#include <ftw.h>
#include <sys/stat.h>

#include "tests/fixtures/imgfix.h"

static char report[16384];
static size_t root_len;

/* Content: the snapshot trees and the volumes' filesystems. */
static bool
is_content(const char *rel)
{
    const char *p;
    if (strncmp(rel, "snapshots/", 10) == 0 && (p = strchr(rel + 10, '/')) &&
        (strcmp(p, "/fs") == 0 || strncmp(p, "/fs/", 4) == 0))
        return true;
    if (strncmp(rel, "volumes/", 8) == 0 && (p = strchr(rel + 8, '/')) &&
        (strncmp(p, "/fs/data", 8) == 0 || strncmp(p, "/l/", 3) == 0 || strncmp(p, "/u/", 3) == 0))
        return true;
    return false;
}

static int
check_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    const char *rel = path + root_len;
    if (*rel == '/')
        rel++;
    if (!*rel || is_content(rel) || S_ISLNK(st->st_mode))
        return 0;
    if ((st->st_mode & 077) != 0) {
        size_t o = strlen(report);
        snprintf(report + o, sizeof(report) - o, "  %s %o\n", rel, st->st_mode & 07777);
    }
    return 0;
}

static void
assert_private(const char *root)
{
    report[0] = '\0';
    root_len = strlen(root);
    nftw(root, check_cb, 16, FTW_PHYS | FTW_MOUNT);
    struct stat st;
    ck_assert_int_eq(stat(root, &st), 0);
    ck_assert_msg((st.st_mode & 077) == 0, "the root is %o", st.st_mode & 07777);
    ck_assert_msg(report[0] == '\0', "open to group or others:\n%s", report);
}

START_TEST(everything_the_store_creates_is_private_but_content)
{
    struct berthd b = {0};
    /* A permissive umask: the modes must not come from it. */
    mode_t old = umask(0);
    berthd_start(&b, NULL);
    umask(old);
    struct hresp r;
    fx_import_layout(&b, NULL, fx_path("base"), NULL, &r);
    ck_assert_msg(r.status == 201, "import: %ld %s", r.status, r.body);
    hresp_free(&r);
    fx_upload_file(&b, "?name=up:1", fx_path("base.tar.gz"), NULL, &r);
    ck_assert_msg(r.status == 200 || r.status == 201, "upload: %ld %s", r.status, r.body);
    hresp_free(&r);
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"v\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    struct fx_buf t = {0};
    fx_tar_add(&t, "dir/", '5', NULL, NULL, 0, 0755);
    fx_tar_file(&t, "dir/file", "x\n");
    fx_tar_end(&t);
    http_do(&b,
            &(struct hreq){.method = "PUT",
                           .path = "/v1/volumes/v/files?path=/in",
                           .body = t.data,
                           .body_len = t.len},
            &r);
    ck_assert_msg(r.status == 200, "tar in: %ld %s", r.status, r.body);
    hresp_free(&r);
    http_post_json(&b, "/v1/volumes", "{\"handle\": \"c\", \"parent\": \"v\"}", &r);
    ck_assert_int_eq(r.status, 201);
    hresp_free(&r);
    free(t.data);
    assert_private(b.root);

    /* And after a restart (start-up makes and repairs directories too). */
    ck_assert_int_eq(berthd_term(&b, 10000), 0);
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s", b.root);
    old = umask(0);
    berthd_start(&b, &(struct berthd_opts){.root = root});
    umask(old);
    assert_private(b.root);
    /* Content keeps its own modes: the volume's data and what was put. */
    struct stat st;
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/volumes/v/fs/data/in/dir", b.root);
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0755);
    berthd_finish(&b);
}
END_TEST

int
main(void)
{
    if (!fx_build(false)) {
        fx_cleanup();
        return 1;
    }
    Suite *s = suite_create("api_store_modes");
    TCase *tc = tcase_create("modes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, everything_the_store_creates_is_private_but_content);
    suite_add_tcase(s, tc);
    int rc = harness_run_suite(s);
    fx_cleanup();
    return rc;
}
