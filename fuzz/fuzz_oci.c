/*
 * Fuzzes the image document parsers of store/oci*.c: every input is given,
 * as the whole document, to the index (and index.json), manifest, config,
 * docker-save manifest.json and oci-layout parsers.
 *
 * Checked for each parser:
 * - a refusal is ERR_INVALID_CONTENT (or ENOMEM), leaves the output
 *   NULL, and its message names the document and is printable ASCII
 *   (values are quoted before they reach logs and replies);
 * - what is accepted holds what oci.h promises: valid sha256 digests,
 *   sizes >= 0, media types set, counted NULL-terminated vectors,
 *   canonical relative archive paths;
 * - an index: oci_select_manifest picks an image entry of the index, and
 *   every image entry with a platform is picked for its own platform and
 *   ref name;
 * - a manifest: its synthesized docker-save twin parses back to the same
 *   config and layers, and has the digest of its bytes.
 */
#include "fuzz/fuzz.h"

#include "store/digest.h"
#include "store/oci.h"

#define NAME "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void
check_refusal(const char *what, int r, const struct err *err, const void *out)
{
    FUZZ_CHECK(r == -ERR_INVALID_CONTENT || r == -ENOMEM, "%s returned %d", what, r);
    FUZZ_CHECK(err->code == -r, "%s: err.code %d for %d", what, err->code, r);
    FUZZ_CHECK(out == NULL, "%s: output set on failure", what);
    FUZZ_CHECK(err->msg[0], "%s: empty message", what);
    FUZZ_CHECK(fuzz_printable(err->msg), "%s: message with raw bytes: %s", what, err->msg);
}

static void
check_descriptor(const char *what, const struct oci_descriptor *d)
{
    FUZZ_CHECK(d->media_type && d->media_type[0], "%s: no media type", what);
    FUZZ_CHECK(digest_valid(d->digest), "%s: digest %s", what, d->digest);
    FUZZ_CHECK(d->size >= 0, "%s: size %lld", what, (long long)d->size);
    if (d->has_platform)
        FUZZ_CHECK(d->platform.os[0] && d->platform.architecture[0], "%s: platform without os",
                   what);
    FUZZ_CHECK(
        !d->has_platform ||
            (strnlen(d->platform.variant, OCI_PLATFORM_NAME_MAX) < OCI_PLATFORM_NAME_MAX &&
             strnlen(d->platform.os_version, OCI_PLATFORM_VERSION_MAX) < OCI_PLATFORM_VERSION_MAX),
        "%s: platform field not terminated", what);
}

static bool
is_image(const struct oci_descriptor *d)
{
    return oci_media_type_is_manifest(d->media_type) || oci_media_type_is_index(d->media_type);
}

static void
check_select(const struct oci_index *idx, const struct oci_platform *want, const char *ref)
{
    struct err err = {0};
    const struct oci_descriptor *pick = NULL;
    int r = oci_select_manifest(idx, want, ref, "index.json", &pick, &err);
    if (r < 0) {
        check_refusal("oci_select_manifest", r, &err, pick);
        return;
    }
    FUZZ_CHECK(pick >= idx->manifests && pick < idx->manifests + idx->n_manifests,
               "selected a descriptor outside the index");
    FUZZ_CHECK(is_image(pick), "selected %s", pick->media_type);
    if (ref)
        FUZZ_CHECK(pick->ref_name && strcmp(pick->ref_name, ref) == 0,
                   "asked for %s, got ref name %s", ref, pick->ref_name ? pick->ref_name : "none");
    /* Only a lone candidate without a platform is taken unmatched. */
    if (want && pick->has_platform)
        FUZZ_CHECK(oci_platform_match(want, &pick->platform), "picked a platform not asked for");
}

static void
fuzz_index(const char *buf, size_t len)
{
    struct oci_index *idx = NULL;
    struct err err = {0};
    int r = oci_index_parse(buf, len, NAME, &idx, &err);
    if (r < 0) {
        check_refusal("oci_index_parse", r, &err, idx);
        return;
    }
    FUZZ_CHECK(idx && err.code == 0, "success without an index, or with an error");
    FUZZ_CHECK(!idx->media_type || oci_media_type_is_index(idx->media_type), "index media type %s",
               idx->media_type);
    for (size_t i = 0; i < idx->n_manifests; i++)
        check_descriptor("index entry", &idx->manifests[i]);

    struct oci_platform host = {.os = "linux", .architecture = "amd64"};
    check_select(idx, NULL, NULL);
    check_select(idx, &host, NULL);
    /* Each image entry with a platform is found by its own platform and name. */
    for (size_t i = 0; i < idx->n_manifests && i < 16; i++) {
        const struct oci_descriptor *e = &idx->manifests[i];
        if (!is_image(e) || !e->has_platform)
            continue;
        struct err e2 = {0};
        const struct oci_descriptor *pick = NULL;
        r = oci_select_manifest(idx, &e->platform, e->ref_name, "index.json", &pick, &e2);
        FUZZ_CHECK(r == 0, "entry %zu is not selected for its own platform: %s", i, e2.msg);
        check_select(idx, &e->platform, e->ref_name);
    }
    oci_index_free(idx);
}

static void
fuzz_manifest(const char *buf, size_t len)
{
    struct oci_manifest *m = NULL;
    struct err err = {0};
    int r = oci_manifest_parse(buf, len, NAME, &m, &err);
    if (r < 0) {
        check_refusal("oci_manifest_parse", r, &err, m);
        return;
    }
    FUZZ_CHECK(!m->media_type || oci_media_type_is_manifest(m->media_type),
               "manifest media type %s", m->media_type);
    check_descriptor("config", &m->config);
    FUZZ_CHECK(strcmp(m->config.media_type, OCI_MT_CONFIG) == 0 ||
                   strcmp(m->config.media_type, DOCKER_MT_CONFIG) == 0,
               "config media type %s", m->config.media_type);
    struct oci_layer_ref *refs = calloc(m->n_layers + 1, sizeof(*refs));
    FUZZ_CHECK(refs, "out of memory");
    for (size_t i = 0; i < m->n_layers; i++) {
        const struct oci_layer *l = &m->layers[i];
        check_descriptor("layer", &l->desc);
        FUZZ_CHECK(l->compression == OCI_LAYER_TAR || l->compression == OCI_LAYER_GZIP ||
                       l->compression == OCI_LAYER_ZSTD,
                   "layer compression %d", (int)l->compression);
        memcpy(refs[i].digest, l->desc.digest, sizeof(refs[i].digest));
        refs[i].size = l->desc.size;
        refs[i].compression = l->compression;
    }

    /* The synthesized twin parses back to the same image. */
    char *json = NULL;
    size_t json_len = 0;
    char digest[OCI_DIGEST_MAX];
    r = oci_manifest_synthesize(m->config.digest, m->config.size, refs, m->n_layers, &json,
                                &json_len, digest, &err);
    FUZZ_CHECK(r == 0, "synthesize: %s", err.msg);
    char again[OCI_DIGEST_MAX];
    FUZZ_CHECK(digest_of(json, json_len, again) == 0 && strcmp(again, digest) == 0,
               "synthesized digest is not the digest of its bytes");
    struct oci_manifest *m2 = NULL;
    r = oci_manifest_parse(json, json_len, digest, &m2, &err);
    FUZZ_CHECK(r == 0, "synthesized manifest does not parse: %s\n%s", err.msg, json);
    FUZZ_CHECK(strcmp(m2->config.digest, m->config.digest) == 0 &&
                   m2->config.size == m->config.size && m2->n_layers == m->n_layers,
               "synthesized manifest differs");
    for (size_t i = 0; i < m->n_layers; i++)
        FUZZ_CHECK(strcmp(m2->layers[i].desc.digest, refs[i].digest) == 0 &&
                       m2->layers[i].desc.size == refs[i].size &&
                       m2->layers[i].compression == refs[i].compression &&
                       !m2->layers[i].nondistributable,
                   "synthesized layer %zu differs", i);
    oci_manifest_free(m2);
    free(json);
    free(refs);
    oci_manifest_free(m);
}

static void
check_strv(const char *what, char **v, size_t n)
{
    FUZZ_CHECK(v || n == 0, "%s: %zu entries but no vector", what, n);
    for (size_t i = 0; v && i < n; i++)
        FUZZ_CHECK(v[i], "%s[%zu] is NULL", what, i);
    FUZZ_CHECK(!v || !v[n], "%s is not NULL-terminated", what);
}

static void
fuzz_config(const char *buf, size_t len)
{
    struct oci_config *c = NULL;
    struct err err = {0};
    int r = oci_config_parse(buf, len, NAME, &c, &err);
    if (r < 0) {
        check_refusal("oci_config_parse", r, &err, c);
        return;
    }
    FUZZ_CHECK(c->platform.os[0] && c->platform.architecture[0], "config without os or arch");
    for (size_t i = 0; i < c->n_diff_ids; i++)
        FUZZ_CHECK(digest_valid(c->diff_ids[i]), "diff_id %zu: %s", i, c->diff_ids[i]);
    check_strv("env", c->env, c->n_env);
    check_strv("entrypoint", c->entrypoint, c->n_entrypoint);
    check_strv("cmd", c->cmd, c->n_cmd);
    FUZZ_CHECK(!c->working_dir || c->working_dir[0], "empty working_dir kept");
    FUZZ_CHECK(!c->user || c->user[0], "empty user kept");
    char plat[256];
    oci_platform_format(&c->platform, plat, sizeof(plat));
    oci_config_free(c);
}

/* What archive_path_check promises: relative, no empty, "." or ".." part. */
static bool
path_canonical(const char *p)
{
    if (!p || !*p || *p == '/')
        return false;
    for (const char *c = p;;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!c[n])
            return true;
        c += n + 1;
    }
}

static void
fuzz_docker(const char *buf, size_t len)
{
    struct docker_manifest *m = NULL;
    struct err err = {0};
    int r = docker_manifest_parse(buf, len, "manifest.json", &m, &err);
    if (r < 0) {
        check_refusal("docker_manifest_parse", r, &err, m);
        return;
    }
    FUZZ_CHECK(m->n_images > 0, "docker manifest without images");
    for (size_t i = 0; i < m->n_images; i++) {
        const struct docker_image *img = &m->images[i];
        FUZZ_CHECK(path_canonical(img->config), "Config %s", img->config);
        check_strv("RepoTags", img->repo_tags, img->n_repo_tags);
        check_strv("Layers", img->layers, img->n_layers);
        for (size_t k = 0; k < img->n_layers; k++)
            FUZZ_CHECK(path_canonical(img->layers[k]), "Layers[%zu] %s", k, img->layers[k]);
    }
    docker_manifest_free(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, not NUL-terminated: the parsers take a length. */
    char *buf = malloc(size ? size : 1);
    FUZZ_CHECK(buf, "out of memory");
    if (size)
        memcpy(buf, data, size);
    fuzz_index(buf, size);
    fuzz_manifest(buf, size);
    fuzz_config(buf, size);
    fuzz_docker(buf, size);
    struct err err = {0};
    int r = oci_layout_check(buf, size, "oci-layout", &err);
    if (r < 0)
        check_refusal("oci_layout_check", r, &err, NULL);
    free(buf);
    return 0;
}
