/*
 * store/digest and store/oci against real tools: an image that umoci
 * builds and skopeo turns into a docker-save archive parses end to end,
 * and chain IDs agree with sha256sum. The fixtures are made through
 * /bin/sh, so this suite runs on Linux only (see cmake/windows.cmake).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "store/digest.h"
#include "store/oci.h"
#include "tests/unit/testutil.h"

#define D_B "sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
#define D_C "sha256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"

static void
expect_invalid(int r, const struct err *err, const char *needle)
{
    ck_assert_msg(r == -ERR_INVALID_CONTENT, "want -ERR_INVALID_CONTENT, got %d (%s)", r, err->msg);
    ck_assert_int_eq(err->code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err->msg, needle), "message \"%s\" lacks \"%s\"", err->msg, needle);
}

struct fixture {
    char *dir;
    char *layout;
    char *archive_dir; /* the docker-save archive, extracted */
};

static void
fixture_make(struct fixture *f)
{
    f->dir = tu_tmpdir("oci");
    ck_assert_int_ge(asprintf(&f->layout, "%s/layout", f->dir), 0);
    ck_assert_int_ge(asprintf(&f->archive_dir, "%s/archive", f->dir), 0);
    int rc = tu_sh("set -e; cd %s; mkdir -p rootfs/bin archive; cp /bin/busybox rootfs/bin/;"
                   "umoci init --layout layout; umoci new --image layout:t;"
                   "umoci insert --image layout:t rootfs/bin/busybox /bin/busybox;"
                   "umoci config --image layout:t --config.env FOO=bar --config.env PATH=/bin"
                   " --config.entrypoint /bin/busybox --config.cmd sh --config.workingdir /tmp"
                   " --config.user 1000 --os linux --architecture amd64;"
                   "skopeo copy -q oci:layout:t docker-archive:d.tar:repo:t;"
                   "tar -C archive -xf d.tar",
                   f->dir);
    ck_assert_msg(rc == 0, "building the test image failed (%d)", rc);
}

static void
fixture_done(struct fixture *f)
{
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->layout);
    free(f->archive_dir);
}

static char *
file_read(const char *dir, const char *rel, size_t *len)
{
    struct err err = {0};
    char *path = fs_path_join(dir, rel);
    char *buf = NULL;
    ck_assert_ptr_nonnull(path);
    ck_assert_msg(fs_read_file(path, OCI_DOC_MAX, &buf, len, &err) == 0, "%s", err.msg);
    free(path);
    return buf;
}

static char *
blob_read(const char *layout, const char *digest, size_t *len)
{
    char rel[128];
    ck_assert(digest_valid(digest));
    snprintf(rel, sizeof(rel), "blobs/sha256/%s", digest_hex(digest));
    return file_read(layout, rel, len);
}

START_TEST(umoci_layout_parses_end_to_end)
{
    struct fixture f;
    struct err err = {0};
    size_t len;
    fixture_make(&f);

    char *buf = file_read(f.layout, "oci-layout", &len);
    ck_assert_msg(oci_layout_check(buf, len, "oci-layout", &err) == 0, "%s", err.msg);
    free(buf);

    struct oci_index *idx = NULL;
    buf = file_read(f.layout, "index.json", &len);
    ck_assert_msg(oci_index_parse(buf, len, "index.json", &idx, &err) == 0, "%s", err.msg);
    free(buf);
    ck_assert_uint_eq(idx->n_manifests, 1);
    ck_assert_str_eq(idx->manifests[0].media_type, OCI_MT_MANIFEST);
    ck_assert_str_eq(idx->manifests[0].ref_name, "t");
    ck_assert(!idx->manifests[0].has_platform);

    /* By name, and by platform: a single entry without platform is taken. */
    const struct oci_descriptor *sel = NULL;
    struct oci_platform amd64 = {.os = "linux", .architecture = "amd64"};
    struct oci_platform arm64 = {.os = "linux", .architecture = "arm64"};
    ck_assert_int_eq(oci_select_manifest(idx, &amd64, "t", "index.json", &sel, &err), 0);
    ck_assert_ptr_eq(sel, &idx->manifests[0]);
    sel = NULL;
    ck_assert_int_eq(oci_select_manifest(idx, &arm64, NULL, "index.json", &sel, &err), 0);
    ck_assert_ptr_eq(sel, &idx->manifests[0]);
    expect_invalid(oci_select_manifest(idx, &amd64, "nope", "index.json", &sel, &err), &err,
                   "index index.json: no image named \"nope\"; it offers \"t\"");

    struct oci_manifest *m = NULL;
    buf = blob_read(f.layout, idx->manifests[0].digest, &len);
    ck_assert_int_eq((int64_t)len, idx->manifests[0].size);
    ck_assert_msg(oci_manifest_parse(buf, len, idx->manifests[0].digest, &m, &err) == 0, "%s",
                  err.msg);
    free(buf);
    ck_assert_str_eq(m->config.media_type, OCI_MT_CONFIG);
    ck_assert_uint_eq(m->n_layers, 1);
    ck_assert_str_eq(m->layers[0].desc.media_type, OCI_MT_LAYER_GZIP);
    ck_assert_int_eq(m->layers[0].compression, OCI_LAYER_GZIP);
    ck_assert(!m->layers[0].nondistributable);
    ck_assert_int_gt(m->layers[0].desc.size, 500000);

    struct oci_config *c = NULL;
    buf = blob_read(f.layout, m->config.digest, &len);
    ck_assert_msg(oci_config_parse(buf, len, m->config.digest, &c, &err) == 0, "%s", err.msg);
    free(buf);
    ck_assert_str_eq(c->platform.os, "linux");
    ck_assert_str_eq(c->platform.architecture, "amd64");
    ck_assert_uint_eq(c->n_diff_ids, 1);
    ck_assert(digest_valid(c->diff_ids[0]));
    ck_assert_uint_eq(c->n_env, 2);
    ck_assert_str_eq(c->env[0], "FOO=bar");
    ck_assert_str_eq(c->env[1], "PATH=/bin");
    ck_assert_ptr_null(c->env[2]);
    ck_assert_uint_eq(c->n_entrypoint, 1);
    ck_assert_str_eq(c->entrypoint[0], "/bin/busybox");
    ck_assert_uint_eq(c->n_cmd, 1);
    ck_assert_str_eq(c->cmd[0], "sh");
    ck_assert_str_eq(c->working_dir, "/tmp");
    ck_assert_str_eq(c->user, "1000");
    ck_assert_int_eq(oci_image_check_consistent(m, c, idx->manifests[0].digest, &err), 0);

    /* The docker-save archive of the same image. */
    struct docker_manifest *dm = NULL;
    buf = file_read(f.archive_dir, "manifest.json", &len);
    ck_assert_msg(docker_manifest_parse(buf, len, "manifest.json", &dm, &err) == 0, "%s", err.msg);
    free(buf);
    ck_assert_uint_eq(dm->n_images, 1);
    ck_assert_uint_eq(dm->images[0].n_repo_tags, 1);
    ck_assert_ptr_nonnull(strstr(dm->images[0].repo_tags[0], "repo:t"));
    ck_assert_uint_eq(dm->images[0].n_layers, 1);

    /* Its config is the layout's config, byte for byte; its layer tar is
     * the uncompressed layer, whose digest is the config's diff_id. */
    struct oci_config *dc = NULL;
    char cfg_digest[OCI_DIGEST_MAX];
    char layer_digest[OCI_DIGEST_MAX];
    buf = file_read(f.archive_dir, dm->images[0].config, &len);
    ck_assert_int_eq(digest_of(buf, len, cfg_digest), 0);
    ck_assert_str_eq(cfg_digest, m->config.digest);
    ck_assert_msg(oci_config_parse(buf, len, dm->images[0].config, &dc, &err) == 0, "%s", err.msg);
    int64_t cfg_size = (int64_t)len;
    free(buf);
    char *layer_path = fs_path_join(f.archive_dir, dm->images[0].layers[0]);
    char *layer = NULL;
    ck_assert_int_eq(fs_read_file(layer_path, 64 << 20, &layer, &len, &err), 0);
    ck_assert_int_eq(digest_of(layer, len, layer_digest), 0);
    ck_assert_str_eq(layer_digest, dc->diff_ids[0]);
    free(layer);
    free(layer_path);

    /* The synthetic manifest parses, is consistent and is deterministic. */
    struct oci_layer_ref ref = {.size = (int64_t)len, .compression = OCI_LAYER_TAR};
    memcpy(ref.digest, layer_digest, sizeof(ref.digest));
    char *json1 = NULL, *json2 = NULL;
    size_t len1, len2;
    char d1[OCI_DIGEST_MAX], d2[OCI_DIGEST_MAX], check[OCI_DIGEST_MAX];
    ck_assert_int_eq(
        oci_manifest_synthesize(cfg_digest, cfg_size, &ref, 1, &json1, &len1, d1, &err), 0);
    ck_assert_int_eq(
        oci_manifest_synthesize(cfg_digest, cfg_size, &ref, 1, &json2, &len2, d2, &err), 0);
    ck_assert_uint_eq(len1, len2);
    ck_assert_mem_eq(json1, json2, len1);
    ck_assert_str_eq(d1, d2);
    ck_assert_int_eq(digest_of(json1, len1, check), 0);
    ck_assert_str_eq(d1, check);
    struct oci_manifest *sm = NULL;
    ck_assert_msg(oci_manifest_parse(json1, len1, d1, &sm, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(sm->media_type, OCI_MT_MANIFEST);
    ck_assert_str_eq(sm->config.digest, cfg_digest);
    ck_assert_int_eq(sm->config.size, cfg_size);
    ck_assert_str_eq(sm->layers[0].desc.media_type, OCI_MT_LAYER_TAR);
    ck_assert_int_eq(oci_image_check_consistent(sm, dc, d1, &err), 0);

    oci_manifest_free(sm);
    free(json1);
    free(json2);
    oci_config_free(dc);
    docker_manifest_free(dm);
    oci_config_free(c);
    oci_manifest_free(m);
    oci_index_free(idx);
    fixture_done(&f);
}
END_TEST

START_TEST(chain_id_matches_sha256sum)
{
    /* An independent computation through the shell's sha256sum. */
    char *tmp = tu_tmpdir("digest");
    char path[512], c2[DIGEST_STR_LEN], buf[128] = {0};
    struct err err = {0};
    snprintf(path, sizeof(path), "%s/out", tmp);
    ck_assert_int_eq(tu_sh("printf '%%s' '%s %s' | sha256sum | cut -c1-64 > %s", D_B, D_C, path),
                     0);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    ck_assert_int_eq(digest_chain_id(D_B, D_C, c2, &err), 0);
    ck_assert_str_eq(digest_hex(c2), buf);
    tu_rmtree(tmp);
    free(tmp);
}
END_TEST

static Suite *
tools_suite(void)
{
    Suite *s = suite_create("store_tools");
    TCase *tc = tcase_create("tools");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, umoci_layout_parses_end_to_end);
    tcase_add_test(tc, chain_id_matches_sha256sum);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(tools_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
