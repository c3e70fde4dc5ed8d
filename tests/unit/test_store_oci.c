/*
 * store/oci: hostile image documents fail with ERR_INVALID_CONTENT and a
 * message that names the blob, the field and the value, and well-formed
 * ones select, resolve and synthesize as they should. Documents made by
 * real tools (umoci, skopeo) are in test_store_tools.c. Pure: no files,
 * no shell, so this suite also runs under Wine.
 */
#include "store/oci.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/digest.h"

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEX_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define DA "sha256:" HEX_A
#define DB "sha256:" HEX_B
#define DC "sha256:" HEX_C
#define NAME "sha256:" HEX_C

#define CONFIG_DESC "{\"mediaType\":\"" OCI_MT_CONFIG "\",\"digest\":\"" DA "\",\"size\":10}"

static void
expect_invalid(int r, const struct err *err, const char *needle)
{
    ck_assert_msg(r == -ERR_INVALID_CONTENT, "want -ERR_INVALID_CONTENT, got %d (%s)", r, err->msg);
    ck_assert_int_eq(err->code, ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err->msg, needle), "message \"%s\" lacks \"%s\"", err->msg, needle);
}

/* ---- helpers: parse and free, returning r ---- */

static int
manifest_try(const char *json, struct err *err)
{
    struct oci_manifest *m = NULL;
    int r = oci_manifest_parse(json, strlen(json), NAME, &m, err);
    if (r == 0)
        ck_assert_ptr_nonnull(m);
    else
        ck_assert_ptr_null(m);
    oci_manifest_free(m);
    return r;
}

static int
index_try(const char *json, struct err *err)
{
    struct oci_index *idx = NULL;
    int r = oci_index_parse(json, strlen(json), NAME, &idx, err);
    oci_index_free(idx);
    return r;
}

static int
config_try(const char *json, struct err *err)
{
    struct oci_config *c = NULL;
    int r = oci_config_parse(json, strlen(json), NAME, &c, err);
    oci_config_free(c);
    return r;
}

static int
docker_try(const char *json, struct err *err)
{
    struct docker_manifest *m = NULL;
    int r = docker_manifest_parse(json, strlen(json), "manifest.json", &m, err);
    docker_manifest_free(m);
    return r;
}

/* A manifest with one layer whose descriptor body is layer (without braces). */
static int
manifest_with_layer(const char *layer, struct err *err)
{
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\",\"config\":" CONFIG_DESC
             ",\"layers\":[{\"mediaType\":\"" OCI_MT_LAYER_GZIP "\",\"digest\":\"" DB
             "\",\"size\":1},{%s}]}",
             layer);
    return manifest_try(json, err);
}

START_TEST(synthesized_manifest_bytes_are_canonical)
{
    struct err err = {0};
    struct oci_layer_ref l[2] = {{DB, 5, OCI_LAYER_TAR}, {DC, 7, OCI_LAYER_GZIP}};
    char *json = NULL;
    size_t len;
    char digest[OCI_DIGEST_MAX];
    ck_assert_int_eq(oci_manifest_synthesize(DA, 3, l, 2, &json, &len, digest, &err), 0);
    ck_assert_str_eq(json,
                     "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST
                     "\",\"config\":{\"mediaType\":\"" OCI_MT_CONFIG "\",\"digest\":\"" DA
                     "\",\"size\":3},\"layers\":[{\"mediaType\":\"" OCI_MT_LAYER_TAR
                     "\",\"digest\":\"" DB "\",\"size\":5},{\"mediaType\":\"" OCI_MT_LAYER_GZIP
                     "\",\"digest\":\"" DC "\",\"size\":7}]}");
    ck_assert_uint_eq(len, strlen(json));
    free(json);
    json = NULL;
    ck_assert_int_eq(oci_manifest_synthesize("sha256:XYZ", 3, l, 2, &json, &len, digest, &err),
                     -EINVAL);
    ck_assert_ptr_null(json);
}
END_TEST

/* ---- hostile manifests ---- */

START_TEST(manifest_rejects_bad_digests)
{
    struct err err = {0};
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR
                                       "\",\"digest\":\"sha256:XYZ\",\"size\":1",
                                       &err),
                   &err,
                   "manifest " NAME ": layers[1].digest \"sha256:XYZ\" is not sha256:<64 "
                   "lowercase hex>");
    expect_invalid(
        manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR
                            "\",\"digest\":\"sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                            "AAAAAAAAAAAAAAAAAAAAAAAA\",\"size\":1",
                            &err),
        &err, "layers[1].digest \"sha256:AAAA");
    ck_assert_ptr_nonnull(strstr(err.msg, "is not sha256:<64 lowercase hex>"));
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR
                                       "\",\"digest\":\"sha512:" HEX_A HEX_A "\",\"size\":1",
                                       &err),
                   &err, "uses algorithm sha512; only sha256 is supported");
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR
                                       "\",\"digest\":\"sha256:" HEX_A "a\",\"size\":1",
                                       &err),
                   &err, "layers[1].digest");
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"digest\":\"" HEX_A
                                       "\",\"size\":1",
                                       &err),
                   &err, "is not sha256:<64 lowercase hex>");
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"size\":1", &err),
                   &err, "layers[1].digest is missing");
}
END_TEST

START_TEST(manifest_rejects_bad_sizes)
{
    struct err err = {0};
    const char *pre = "\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"digest\":\"" DA "\"";
    char layer[256];
    snprintf(layer, sizeof(layer), "%s", pre);
    expect_invalid(manifest_with_layer(layer, &err), &err, "layers[1].size is missing");
    snprintf(layer, sizeof(layer), "%s,\"size\":-1", pre);
    expect_invalid(manifest_with_layer(layer, &err), &err, "layers[1].size is negative (-1)");
    snprintf(layer, sizeof(layer), "%s,\"size\":\"12\"", pre);
    expect_invalid(manifest_with_layer(layer, &err), &err,
                   "layers[1].size is a string, want an integer");
    snprintf(layer, sizeof(layer), "%s,\"size\":1.5", pre);
    expect_invalid(manifest_with_layer(layer, &err), &err, "layers[1].size is a fractional number");
    snprintf(layer, sizeof(layer), "%s,\"size\":null", pre);
    expect_invalid(manifest_with_layer(layer, &err), &err, "layers[1].size is null");
    snprintf(layer, sizeof(layer), "%s,\"size\":99999999999999999999999", pre);
    expect_invalid(manifest_with_layer(layer, &err), &err, "layers[1].size is out of range");
    snprintf(layer, sizeof(layer), "%s,\"size\":0", pre);
    ck_assert_msg(manifest_with_layer(layer, &err) == 0, "%s", err.msg);
}
END_TEST

START_TEST(manifest_classifies_layer_media_types)
{
    static const struct {
        const char *mt;
        enum oci_layer_compression c;
        bool nondist;
    } cases[] = {
        {OCI_MT_LAYER_TAR, OCI_LAYER_TAR, false},
        {OCI_MT_LAYER_GZIP, OCI_LAYER_GZIP, false},
        {OCI_MT_LAYER_ZSTD, OCI_LAYER_ZSTD, false},
        {DOCKER_MT_LAYER_GZIP, OCI_LAYER_GZIP, false},
        {"application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_LAYER_TAR, true},
        {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_LAYER_GZIP, true},
        {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_LAYER_ZSTD, true},
        {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", OCI_LAYER_GZIP, true},
    };
    struct err err = {0};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char json[1024];
        struct oci_manifest *m = NULL;
        snprintf(json, sizeof(json),
                 "{\"schemaVersion\":2,\"mediaType\":\"" DOCKER_MT_MANIFEST
                 "\",\"config\":{\"mediaType\":\"" DOCKER_MT_CONFIG "\",\"digest\":\"" DA
                 "\",\"size\":10},\"layers\":[{\"mediaType\":\"%s\",\"digest\":\"" DB
                 "\",\"size\":1,\"urls\":[\"https://example.com/x\"]}]}",
                 cases[i].mt);
        ck_assert_msg(oci_manifest_parse(json, strlen(json), NAME, &m, &err) == 0, "%s: %s",
                      cases[i].mt, err.msg);
        ck_assert_int_eq(m->layers[0].compression, cases[i].c);
        ck_assert_int_eq(m->layers[0].nondistributable, cases[i].nondist);
        oci_manifest_free(m);
    }
}
END_TEST

START_TEST(manifest_rejects_unknown_media_types)
{
    struct err err = {0};
    expect_invalid(manifest_with_layer("\"mediaType\":\"application/x-evil\",\"digest\":\"" DA
                                       "\",\"size\":1",
                                       &err),
                   &err, "layers[1].mediaType \"application/x-evil\" is not a known layer type");
    expect_invalid(manifest_with_layer("\"mediaType\":\"\",\"digest\":\"" DA "\",\"size\":1", &err),
                   &err, "layers[1].mediaType is empty");
    expect_invalid(manifest_try("{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX
                                "\",\"config\":" CONFIG_DESC ",\"layers\":[]}",
                                &err),
                   &err, "is an image index, not a manifest");
    expect_invalid(manifest_try("{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/"
                                "vnd.cncf.helm.config.v1+json\",\"digest\":\"" DA
                                "\",\"size\":1},\"layers\":[]}",
                                &err),
                   &err, "config.mediaType \"application/vnd.cncf.helm.config.v1+json\" is not");
    expect_invalid(manifest_try("{\"schemaVersion\":1,\"name\":\"x\",\"fsLayers\":[]}", &err), &err,
                   "schemaVersion is 1 (docker schema 1)");
    /* An OCI manifest without mediaType is allowed. */
    ck_assert_msg(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[]}", &err) == 0,
        "%s", err.msg);
}
END_TEST

START_TEST(documents_reject_malformed_json)
{
    struct err err = {0};
    const char *ok = "{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[]}";
    struct oci_manifest *m = NULL;
    /* Truncated at every length: never accepted, never crashes. */
    for (size_t n = 0; n < strlen(ok); n++) {
        int r = oci_manifest_parse(ok, n, NAME, &m, &err);
        ck_assert_msg(r == -ERR_INVALID_CONTENT, "prefix of %zu bytes gave %d", n, r);
        ck_assert_ptr_null(m);
    }
    expect_invalid(manifest_try("{\"schemaVersion\":2,", &err), &err,
                   "manifest " NAME ": is not valid JSON");
    expect_invalid(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[],}", &err), &err,
        "is not valid JSON");
    expect_invalid(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[]} x", &err),
        &err, "is not valid JSON");
    expect_invalid(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[]}{}", &err),
        &err, "is not valid JSON");
    expect_invalid(manifest_try("", &err), &err, "is empty");
    expect_invalid(manifest_try("null ", &err), &err, "is null, want an object");
    expect_invalid(manifest_try("[]", &err), &err, "is an array, want an object");
    /* A NUL byte after the value is data, not whitespace. */
    static const char nul[] = "{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[]}\0";
    expect_invalid(oci_manifest_parse(nul, sizeof(nul) - 1, NAME, &m, &err), &err,
                   "is not valid JSON");
    /* Trailing whitespace is fine. */
    ck_assert_int_eq(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[]}\n  ", &err),
        0);
    /* Larger than the limit. */
    char *big = malloc(OCI_DOC_MAX + 2);
    memset(big, ' ', OCI_DOC_MAX + 1);
    big[0] = '{';
    big[OCI_DOC_MAX] = '}';
    big[OCI_DOC_MAX + 1] = '\0';
    expect_invalid(oci_manifest_parse(big, OCI_DOC_MAX + 1, NAME, &m, &err), &err,
                   "more than the 4194304 byte limit");
    free(big);
}
END_TEST

START_TEST(documents_name_fields_of_wrong_type)
{
    struct err err = {0};
    expect_invalid(
        manifest_try("{\"schemaVersion\":\"2\",\"config\":" CONFIG_DESC ",\"layers\":[]}", &err),
        &err, "schemaVersion is a string, want an integer");
    expect_invalid(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":{}}", &err), &err,
        "layers is an object, want an array");
    expect_invalid(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[7]}", &err), &err,
        "layers[0] is an integer, want an object");
    expect_invalid(
        manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC ",\"layers\":[null]}", &err),
        &err, "layers[0] is null, want an object");
    expect_invalid(manifest_try("{\"schemaVersion\":2,\"layers\":[]}", &err), &err,
                   "config is missing");
    expect_invalid(manifest_try("{\"schemaVersion\":2,\"config\":" CONFIG_DESC "}", &err), &err,
                   "layers is missing");
    expect_invalid(manifest_with_layer("\"mediaType\":5,\"digest\":\"" DA "\",\"size\":1", &err),
                   &err, "layers[1].mediaType is an integer, want a string");
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"digest\":\"" DA
                                       "\",\"size\":1,\"annotations\":{\"a\":1}",
                                       &err),
                   &err, "layers[1].annotations[\"a\"] is an integer, want a string");
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"digest\":\"" DA
                                       "\",\"size\":1,\"platform\":[]",
                                       &err),
                   &err, "layers[1].platform is an array, want an object");
    expect_invalid(
        manifest_with_layer("\"mediaType\":\"a\\u0000b\",\"digest\":\"" DA "\",\"size\":1", &err),
        &err, "layers[1].mediaType \"a\\x00b\" contains a NUL byte");
}
END_TEST

/* ---- configs ---- */

#define ROOTFS "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" DA "\",\"" DB "\"]}"

START_TEST(config_rejects_bad_fields)
{
    struct err err = {0};
    expect_invalid(config_try("{\"architecture\":\"amd64\"," ROOTFS "}", &err), &err,
                   "config " NAME ": os is missing");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":7," ROOTFS "}", &err), &err,
                   "architecture is an integer, want a string");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\"}", &err), &err,
                   "rootfs is missing");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":"
                              "\"snapshot\",\"diff_ids\":[]}}",
                              &err),
                   &err, "rootfs.type \"snapshot\" is not \"layers\"");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":"
                              "\"layers\",\"diff_ids\":[\"" DA "\",\"md5:abc\"]}}",
                              &err),
                   &err, "rootfs.diff_ids[1] \"md5:abc\" uses algorithm md5");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":"
                              "\"layers\"}}",
                              &err),
                   &err, "rootfs.diff_ids is missing");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\"," ROOTFS
                              ",\"config\":{\"Env\":[\"A=1\",2]}}",
                              &err),
                   &err, "config.Env[1] is an integer, want a string");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\"," ROOTFS
                              ",\"config\":{\"Cmd\":\"sh\"}}",
                              &err),
                   &err, "config.Cmd is a string, want an array");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":\"amd64\"," ROOTFS
                              ",\"config\":{\"WorkingDir\":[]}}",
                              &err),
                   &err, "config.WorkingDir is an array, want a string");
    expect_invalid(config_try("{\"os\":\"linux\",\"architecture\":"
                              "\"amd64amd64amd64amd64amd64amd64amd64\"," ROOTFS "}",
                              &err),
                   &err, "architecture \"amd64amd64");
}
END_TEST

START_TEST(config_reads_windows_platform_and_nulls)
{
    struct err err = {0};
    struct oci_config *c = NULL;
    const char *json = "{\"os\":\"windows\",\"architecture\":\"amd64\",\"os.version\":"
                       "\"10.0.20348.2655\"," ROOTFS
                       ",\"config\":{\"Env\":null,\"Entrypoint\":null,\"Cmd\":[\"cmd\",\"/S\"],"
                       "\"WorkingDir\":\"\"}}";
    ck_assert_msg(oci_config_parse(json, strlen(json), NAME, &c, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(c->platform.os, "windows");
    ck_assert_str_eq(c->platform.os_version, "10.0.20348.2655");
    ck_assert_uint_eq(c->n_diff_ids, 2);
    ck_assert_str_eq(c->diff_ids[1], DB);
    ck_assert_ptr_null(c->env);
    ck_assert_ptr_null(c->entrypoint);
    ck_assert_uint_eq(c->n_cmd, 2);
    ck_assert_str_eq(c->cmd[1], "/S");
    ck_assert_ptr_null(c->working_dir);
    ck_assert_ptr_null(c->user);
    oci_config_free(c);
}
END_TEST

START_TEST(image_check_consistent_counts_layers)
{
    struct err err = {0};
    struct oci_manifest *m = NULL;
    struct oci_config *c = NULL;
    const char *mj =
        "{\"schemaVersion\":2,\"config\":" CONFIG_DESC
        ",\"layers\":[{\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"digest\":\"" DB "\",\"size\":1}]}";
    const char *cj = "{\"os\":\"linux\",\"architecture\":\"amd64\"," ROOTFS "}";
    ck_assert_int_eq(oci_manifest_parse(mj, strlen(mj), NAME, &m, &err), 0);
    ck_assert_int_eq(oci_config_parse(cj, strlen(cj), DA, &c, &err), 0);
    expect_invalid(oci_image_check_consistent(m, c, NAME, &err), &err,
                   "manifest " NAME ": lists 1 layers but its config " DA " lists 2 diff_ids");
    c->n_diff_ids = 1;
    ck_assert_int_eq(oci_image_check_consistent(m, c, NAME, &err), 0);
    oci_manifest_free(m);
    oci_config_free(c);
}
END_TEST

START_TEST(layout_check_wants_1_0_0)
{
    struct err err = {0};
    const char *ok = "{\"imageLayoutVersion\":\"1.0.0\"}";
    ck_assert_int_eq(oci_layout_check(ok, strlen(ok), "oci-layout", &err), 0);
    const char *v2 = "{\"imageLayoutVersion\":\"2.0.0\"}";
    expect_invalid(oci_layout_check(v2, strlen(v2), "oci-layout", &err), &err,
                   "image layout oci-layout: imageLayoutVersion \"2.0.0\" is not \"1.0.0\"");
    const char *none = "{}";
    expect_invalid(oci_layout_check(none, strlen(none), "oci-layout", &err), &err,
                   "imageLayoutVersion is missing");
}
END_TEST

/* ---- indexes and selection ---- */

#define ENTRY(digest, plat)                                                                        \
    "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"" digest "\",\"size\":100" plat "}"
#define PLAT(os, arch, extra)                                                                      \
    ",\"platform\":{\"os\":\"" os "\",\"architecture\":\"" arch "\"" extra "}"

static struct oci_index *
index_of(const char *json)
{
    struct err err = {0};
    struct oci_index *idx = NULL;
    ck_assert_msg(oci_index_parse(json, strlen(json), NAME, &idx, &err) == 0, "%s", err.msg);
    return idx;
}

START_TEST(index_rejects_bad_documents)
{
    struct err err = {0};
    expect_invalid(
        index_try("{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\",\"manifests\":[]}",
                  &err),
        &err, "index " NAME ": mediaType \"" OCI_MT_MANIFEST "\" is a manifest, not an index");
    expect_invalid(index_try("{\"schemaVersion\":2}", &err), &err, "manifests is missing");
    expect_invalid(index_try("{\"schemaVersion\":3,\"manifests\":[]}", &err), &err,
                   "schemaVersion is 3, want 2");
    expect_invalid(index_try("{\"schemaVersion\":2,\"manifests\":[" ENTRY(
                                 DA, "") ",{\"mediaType\":"
                                         "\"" OCI_MT_MANIFEST "\",\"digest\":\"" DB
                                         "\",\"size\":-5}]}",
                             &err),
                   &err, "manifests[1].size is negative (-5)");
    expect_invalid(
        index_try("{\"schemaVersion\":2,\"manifests\":[" ENTRY(DA, ",\"platform\":{\"os\":"
                                                                   "\"linux\"}") "]}",
                  &err),
        &err, "manifests[0].platform.architecture is missing");
    /* A docker manifest list is an index too. */
    ck_assert_msg(index_try("{\"schemaVersion\":2,\"mediaType\":\"" DOCKER_MT_MANIFEST_LIST
                            "\",\"manifests\":[" ENTRY(DA, PLAT("linux", "amd64", "")) "]}",
                            &err) == 0,
                  "%s", err.msg);
}
END_TEST

START_TEST(select_picks_platform_with_default_variants)
{
    struct err err = {0};
    struct oci_index *idx = index_of(
        "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX
        "\",\"manifests\":[" ENTRY(DA, PLAT("linux", "amd64", "")) "," ENTRY(
            DB,
            PLAT("linux", "arm64",
                 ",\"variant\":\"v8\"")) "," ENTRY(DC,
                                                   PLAT(
                                                       "linux", "arm",
                                                       ",\"variant\":\"v7\"")) ","
                                                                               "{\"mediaType\":"
                                                                               "\"application/"
                                                                               "vnd.in-toto+json\","
                                                                               "\"digest\":\"" DA
                                                                               "\",\"size\":1,"
                                                                               "\"platform\":{"
                                                                               "\"os\":\"unknown\","
                                                                               "\"architecture\":"
                                                                               "\"unknown\"}}]}");
    const struct oci_descriptor *sel = NULL;
    struct oci_platform want = {.os = "linux", .architecture = "arm64"};
    ck_assert_int_eq(oci_select_manifest(idx, &want, NULL, NAME, &sel, &err), 0);
    ck_assert_str_eq(sel->digest, DB);
    struct oci_platform arm = {.os = "linux", .architecture = "arm"};
    ck_assert_int_eq(oci_select_manifest(idx, &arm, NULL, NAME, &sel, &err), 0);
    ck_assert_str_eq(sel->digest, DC);
    struct oci_platform amd64 = {.os = "linux", .architecture = "amd64"};
    ck_assert_int_eq(oci_select_manifest(idx, &amd64, NULL, NAME, &sel, &err), 0);
    ck_assert_str_eq(sel->digest, DA);
    struct oci_platform armv6 = {.os = "linux", .architecture = "arm", .variant = "v6"};
    expect_invalid(oci_select_manifest(idx, &armv6, NULL, NAME, &sel, &err), &err,
                   "index " NAME ": no image for linux/arm/v6; it offers linux/amd64, "
                   "linux/arm64/v8, linux/arm/v7");
    struct oci_platform riscv = {.os = "linux", .architecture = "riscv64"};
    expect_invalid(oci_select_manifest(idx, &riscv, NULL, NAME, &sel, &err), &err,
                   "no image for linux/riscv64");
    expect_invalid(oci_select_manifest(idx, NULL, NULL, NAME, &sel, &err), &err,
                   "lists 3 images; a platform is needed");
    oci_index_free(idx);
}
END_TEST

START_TEST(select_prefers_the_hosts_windows_build)
{
    struct err err = {0};
    struct oci_index *idx = index_of("{\"schemaVersion\":2,\"manifests\":[" ENTRY(
        DA,
        PLAT(
            "windows", "amd64",
            ",\"os.version\":\"10.0.17763.6054\"")) "," ENTRY(DB,
                                                              PLAT(
                                                                  "windows", "amd64",
                                                                  ",\"os.version\":\"10.0.20348."
                                                                  "2655\"")) "," ENTRY(DC,
                                                                                       PLAT(
                                                                                           "window"
                                                                                           "s",
                                                                                           "amd64",
                                                                                           ",\"os."
                                                                                           "version"
                                                                                           "\":"
                                                                                           "\"10.0."
                                                                                           "26100."
                                                                                           "1742"
                                                                                           "\"")) "]}");
    const struct oci_descriptor *sel = NULL;
    struct oci_platform want = {
        .os = "windows", .architecture = "amd64", .os_version = "10.0.20348.1000"};
    ck_assert_int_eq(oci_select_manifest(idx, &want, NULL, NAME, &sel, &err), 0);
    ck_assert_str_eq(sel->digest, DB);
    strcpy(want.os_version, "10.0.22000.1");
    ck_assert_int_eq(oci_select_manifest(idx, &want, NULL, NAME, &sel, &err), 0);
    ck_assert_str_eq(sel->digest, DB);
    strcpy(want.os_version, "10.0.17000.1");
    ck_assert_int_eq(oci_select_manifest(idx, &want, NULL, NAME, &sel, &err), 0);
    ck_assert_str_eq(sel->digest, DA);
    struct oci_platform linux_ = {.os = "linux", .architecture = "amd64"};
    expect_invalid(oci_select_manifest(idx, &linux_, NULL, NAME, &sel, &err), &err,
                   "it offers windows/amd64 10.0.17763.6054, windows/amd64 10.0.20348.2655");
    oci_index_free(idx);
}
END_TEST

/* A blob store in memory for oci_index_resolve. */
struct mem_blobs {
    const char *digest[4];
    const char *json[4];
};

static int
mem_read_cb(void *ctx, const char *digest, char **buf, size_t *len, struct err *err)
{
    struct mem_blobs *b = ctx;
    for (int i = 0; i < 4 && b->digest[i]; i++) {
        if (strcmp(b->digest[i], digest) == 0) {
            *buf = strdup(b->json[i]);
            *len = strlen(b->json[i]);
            return 0;
        }
    }
    return err_set(err, ENOENT, "blob %s not found", digest);
}

/* Writes the descriptor of json (as an index) with its real digest and size. */
static void
index_entry(char *out, size_t size, const char *json, const char *ref, char digest[OCI_DIGEST_MAX])
{
    ck_assert_int_eq(digest_of(json, strlen(json), digest), 0);
    snprintf(out, size,
             "{\"mediaType\":\"" OCI_MT_INDEX "\",\"digest\":\"%s\",\"size\":%zu"
             ",\"annotations\":{\"" OCI_ANNOTATION_REF_NAME "\":\"%s\"}}",
             digest, strlen(json), ref);
}

START_TEST(resolve_follows_nested_indexes)
{
    struct err err = {0};
    /* index.json -> "t" -> a multi-platform index -> manifests. */
    const char *multi =
        "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",\"manifests\":[" ENTRY(
            DA, PLAT("linux", "amd64", "")) "," ENTRY(DB, PLAT("linux", "arm64", "")) "]}";
    char multi_digest[OCI_DIGEST_MAX];
    char entry[512];
    char top[1024];
    index_entry(entry, sizeof(entry), multi, "t", multi_digest);
    snprintf(top, sizeof(top), "{\"schemaVersion\":2,\"manifests\":[%s]}", entry);
    struct mem_blobs blobs = {{multi_digest}, {multi}};
    struct oci_index *idx = NULL;
    ck_assert_int_eq(oci_index_parse(top, strlen(top), "index.json", &idx, &err), 0);

    struct oci_descriptor out = {0};
    struct oci_platform arm64 = {.os = "linux", .architecture = "arm64", .variant = "v8"};
    ck_assert_msg(
        oci_index_resolve(idx, &arm64, "t", "index.json", mem_read_cb, &blobs, &out, &err) == 0,
        "%s", err.msg);
    ck_assert_str_eq(out.digest, DB);
    ck_assert_str_eq(out.media_type, OCI_MT_MANIFEST);
    oci_descriptor_clear(&out);
    ck_assert_ptr_null(out.media_type);

    /* No match in the nested index names the nested index. */
    struct oci_platform s390x = {.os = "linux", .architecture = "s390x"};
    expect_invalid(
        oci_index_resolve(idx, &s390x, "t", "index.json", mem_read_cb, &blobs, &out, &err), &err,
        "no image for linux/s390x; it offers linux/amd64, linux/arm64");
    ck_assert_ptr_nonnull(strstr(err.msg, multi_digest));
    oci_index_free(idx);

    /* A blob whose size differs from its descriptor is refused. */
    char lie[1024];
    snprintf(lie, sizeof(lie),
             "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_INDEX
             "\",\"digest\":\"%s\",\"size\":3}]}",
             multi_digest);
    idx = index_of(lie);
    expect_invalid(
        oci_index_resolve(idx, &arm64, NULL, "index.json", mem_read_cb, &blobs, &out, &err), &err,
        "says 3 bytes");
    oci_index_free(idx);
}
END_TEST

START_TEST(resolve_refuses_nesting_past_the_limit)
{
    struct err err = {0};
    /* top -> l1 -> l2 -> l3 -> manifest: three nested indexes, one too many. */
    char l3[512], l2[1024], l1[1024], top[1024], e[512];
    char d3[OCI_DIGEST_MAX], d2[OCI_DIGEST_MAX], d1[OCI_DIGEST_MAX];
    snprintf(l3, sizeof(l3), "{\"schemaVersion\":2,\"manifests\":[" ENTRY(DA, "") "]}");
    index_entry(e, sizeof(e), l3, "x", d3);
    snprintf(l2, sizeof(l2), "{\"schemaVersion\":2,\"manifests\":[%s]}", e);
    index_entry(e, sizeof(e), l2, "x", d2);
    snprintf(l1, sizeof(l1), "{\"schemaVersion\":2,\"manifests\":[%s]}", e);
    index_entry(e, sizeof(e), l1, "x", d1);
    snprintf(top, sizeof(top), "{\"schemaVersion\":2,\"manifests\":[%s]}", e);
    struct mem_blobs blobs = {{d1, d2, d3}, {l1, l2, l3}};
    struct oci_descriptor out = {0};
    struct oci_platform amd64 = {.os = "linux", .architecture = "amd64"};

    struct oci_index *idx = index_of(top);
    expect_invalid(
        oci_index_resolve(idx, &amd64, NULL, "index.json", mem_read_cb, &blobs, &out, &err), &err,
        "is an index nested more than 2 deep");
    oci_index_free(idx);

    /* Two levels are fine. */
    idx = index_of(l1);
    ck_assert_msg(oci_index_resolve(idx, &amd64, NULL, d1, mem_read_cb, &blobs, &out, &err) == 0,
                  "%s", err.msg);
    ck_assert_str_eq(out.digest, DA);
    oci_descriptor_clear(&out);
    oci_index_free(idx);
}
END_TEST

/* ---- docker save manifest.json ---- */

#define DOCKER_IMG(config, layers)                                                                 \
    "{\"Config\":\"" config "\",\"RepoTags\":[\"repo:t\"],\"Layers\":[" layers "]}"

START_TEST(docker_manifest_rejects_escaping_paths)
{
    struct err err = {0};
    expect_invalid(
        docker_try("[" DOCKER_IMG("c.json", "\"a/layer.tar\",\"../etc/passwd\"") "]", &err), &err,
        "docker archive manifest.json: [0].Layers[1] \"../etc/passwd\" has a \"..\" "
        "component");
    expect_invalid(docker_try("[" DOCKER_IMG("c.json", "\"a/../../x\"") "]", &err), &err,
                   "[0].Layers[0] \"a/../../x\" has a \"..\" component");
    expect_invalid(docker_try("[" DOCKER_IMG("/etc/c.json", "\"a.tar\"") "]", &err), &err,
                   "[0].Config \"/etc/c.json\" is absolute");
    expect_invalid(docker_try("[" DOCKER_IMG("c.json", "\"a//b.tar\"") "]", &err), &err,
                   "has an empty component");
    expect_invalid(docker_try("[" DOCKER_IMG("c.json", "\"a/\"") "]", &err), &err,
                   "has an empty component");
    expect_invalid(docker_try("[" DOCKER_IMG("c.json", "\"./a.tar\"") "]", &err), &err,
                   "has a \".\" component");
    expect_invalid(docker_try("[" DOCKER_IMG("c.json", "\"\"") "]", &err), &err,
                   "[0].Layers[0] is empty");
    expect_invalid(
        docker_try("[" DOCKER_IMG("c.json", "\"a.tar\"") "," DOCKER_IMG("..", "") "]", &err), &err,
        "[1].Config \"..\" has a \"..\" component");
    ck_assert_msg(
        docker_try("[" DOCKER_IMG("c.json", "\"a/layer.tar\",\"b..c/..d.tar\"") "]", &err) == 0,
        "%s", err.msg);
}
END_TEST

START_TEST(docker_manifest_rejects_wrong_shapes)
{
    struct err err = {0};
    expect_invalid(docker_try("{}", &err), &err,
                   "docker archive manifest.json: is an object, "
                   "want an array");
    expect_invalid(docker_try("[]", &err), &err, "lists no images");
    expect_invalid(docker_try("[{\"RepoTags\":[],\"Layers\":[]}]", &err), &err,
                   "[0].Config is missing");
    expect_invalid(docker_try("[{\"Config\":\"c.json\",\"RepoTags\":[]}]", &err), &err,
                   "[0].Layers is missing");
    expect_invalid(docker_try("[{\"Config\":\"c.json\",\"Layers\":\"a.tar\"}]", &err), &err,
                   "[0].Layers is a string, want an array");
    expect_invalid(docker_try("[{\"Config\":\"c.json\",\"RepoTags\":[1],\"Layers\":[]}]", &err),
                   &err, "[0].RepoTags[0] is an integer, want a string");
    expect_invalid(docker_try("[3]", &err), &err, "[0] is an integer, want an object");

    /* An untagged image has RepoTags null. */
    struct docker_manifest *m = NULL;
    const char *ok = "[{\"Config\":\"c.json\",\"RepoTags\":null,\"Layers\":[\"a.tar\"]}]";
    ck_assert_msg(docker_manifest_parse(ok, strlen(ok), "manifest.json", &m, &err) == 0, "%s",
                  err.msg);
    ck_assert_uint_eq(m->images[0].n_repo_tags, 0);
    ck_assert_ptr_null(m->images[0].repo_tags);
    ck_assert_str_eq(m->images[0].layers[0], "a.tar");
    docker_manifest_free(m);
}
END_TEST

/* True when msg holds only printable ASCII. */
static bool
printable(const char *msg)
{
    for (const char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            return false;
    return true;
}

/* Found by fuzz/fuzz_oci.c: raw bytes of a document reached messages. */
START_TEST(messages_quote_annotation_keys_algorithms_and_platforms)
{
    struct err err = {0};
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR "\",\"digest\":\"" DA
                                       "\",\"size\":1,\"annotations\":{\"a\\nb\\u00e9\":1}",
                                       &err),
                   &err, "layers[1].annotations[\"a\\x0ab\\xc3\\xa9\"] is an integer");
    ck_assert_msg(printable(err.msg), "%s", err.msg);
    memset(&err, 0, sizeof(err));
    expect_invalid(manifest_with_layer("\"mediaType\":\"" OCI_MT_LAYER_TAR
                                       "\",\"digest\":\"s\\nha:abc\",\"size\":1",
                                       &err),
                   &err, "\"s\\x0aha:abc\" is not sha256:<64 lowercase hex>");
    ck_assert_msg(printable(err.msg), "%s", err.msg);

    struct oci_index *idx = index_of("{\"schemaVersion\":2,\"manifests\":[" ENTRY(
        DA, PLAT("li\\nux", "amd\\u00e964",
                 ",\"os.version\":\"1\\\\\\t\"")) "," ENTRY(DB, PLAT("linux", "arm64", "")) "]}");
    const struct oci_descriptor *sel = NULL;
    struct oci_platform want = {.os = "linux", .architecture = "riscv64"};
    memset(&err, 0, sizeof(err));
    expect_invalid(oci_select_manifest(idx, &want, NULL, NAME, &sel, &err), &err,
                   "it offers li\\x0aux/amd\\xc3\\xa964 1\\x5c\\x09, linux/arm64");
    ck_assert_msg(printable(err.msg), "%s", err.msg);
    oci_index_free(idx);
}
END_TEST

START_TEST(free_functions_take_null)
{
    oci_index_free(NULL);
    oci_manifest_free(NULL);
    oci_config_free(NULL);
    docker_manifest_free(NULL);
    oci_descriptor_clear(NULL);
}
END_TEST

static Suite *
oci_suite(void)
{
    Suite *s = suite_create("store_oci");
    TCase *tc = tcase_create("hostile");
    tcase_add_test(tc, synthesized_manifest_bytes_are_canonical);
    tcase_add_test(tc, manifest_rejects_bad_digests);
    tcase_add_test(tc, manifest_rejects_bad_sizes);
    tcase_add_test(tc, manifest_classifies_layer_media_types);
    tcase_add_test(tc, manifest_rejects_unknown_media_types);
    tcase_add_test(tc, documents_reject_malformed_json);
    tcase_add_test(tc, documents_name_fields_of_wrong_type);
    tcase_add_test(tc, config_rejects_bad_fields);
    tcase_add_test(tc, config_reads_windows_platform_and_nulls);
    tcase_add_test(tc, image_check_consistent_counts_layers);
    tcase_add_test(tc, layout_check_wants_1_0_0);
    tcase_add_test(tc, index_rejects_bad_documents);
    tcase_add_test(tc, select_picks_platform_with_default_variants);
    tcase_add_test(tc, select_prefers_the_hosts_windows_build);
    tcase_add_test(tc, resolve_follows_nested_indexes);
    tcase_add_test(tc, resolve_refuses_nesting_past_the_limit);
    tcase_add_test(tc, docker_manifest_rejects_escaping_paths);
    tcase_add_test(tc, docker_manifest_rejects_wrong_shapes);
    tcase_add_test(tc, messages_quote_annotation_keys_algorithms_and_platforms);
    tcase_add_test(tc, free_functions_take_null);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(oci_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
