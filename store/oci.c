/*
 * OCI image documents: descriptors, indexes and manifests (the config is
 * oci_config.c's, choosing a manifest oci_select.c's, docker save's
 * manifest.json oci_docker.c's). Runs on pool threads during an import;
 * pure functions of their input, no shared state.
 *
 * Every document is untrusted. It is parsed strictly (jsonutil: no
 * trailing commas, comments, NaN or duplicate keys, nothing after the
 * value), then each field is fetched through jsonutil/doc.h, which checks
 * the JSON type and turns every problem into one ERR_INVALID_CONTENT
 * message of the form
 *   <kind> <name>: <field> <what is wrong>
 * so a client learns which blob, which field and which value to fix.
 * Duplicate keys are refused rather than resolved: two readers of one
 * manifest must never see two images.
 *
 * Limits: documents are at most OCI_DOC_MAX bytes, json-c caps nesting at
 * 32 levels, integers beyond int64 are refused.
 */
#include "store/oci.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/strv.h"
#include "jsonutil/doc.h"
#include "jsonutil/jsonutil.h"
#include "store/digest.h"
#include "store/oci_int.h"

/* A required "schemaVersion": 2. */
static int
doc_schema_version(const struct jsonutil_doc *d, json_object *root)
{
    json_object *v;
    int r = jsonutil_doc_field(d, root, "", "schemaVersion", json_type_int, true, &v);
    if (r < 0)
        return r;
    int64_t n = json_object_get_int64(v);
    if (n == 1)
        return jsonutil_doc_fail(d, "schemaVersion is 1 (docker schema 1), which is not supported");
    if (n != 2)
        return jsonutil_doc_fail(d, "schemaVersion is %lld, want 2", (long long)n);
    return 0;
}

/* Validates a digest string into out: sha256 and 64 lowercase hex digits only. */
int
oci_doc_digest_value(const struct jsonutil_doc *d, const char *field, const char *s,
                     char out[OCI_DIGEST_MAX])
{
    char q[JSONUTIL_QUOTE_MAX];
    size_t len = strlen(s);
    if (digest_valid(s)) {
        memcpy(out, s, len + 1);
        return 0;
    }
    const char *colon = strchr(s, ':');
    /* Named only when it looks like an algorithm (the OCI grammar's
     * characters): the message must carry no raw bytes of the value. */
    size_t alg_len = colon ? (size_t)(colon - s) : 0;
    if (colon && colon != s && strncmp(s, "sha256:", 7) != 0 &&
        strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789+._-") == alg_len) {
        int alg = (int)alg_len;
        if (alg > 16)
            alg = 16;
        return jsonutil_doc_fail(d, "%s %s uses algorithm %.*s; only sha256 is supported", field,
                                 jsonutil_quote(q, s, len), alg, s);
    }
    return jsonutil_doc_fail(d, "%s %s is not sha256:<64 lowercase hex>", field,
                             jsonutil_quote(q, s, len));
}

static int
doc_digest(const struct jsonutil_doc *d, json_object *obj, const char *prefix, const char *key,
           char out[OCI_DIGEST_MAX])
{
    char field[JSONUTIL_FIELD_MAX];
    const char *s;
    int r = jsonutil_doc_string(d, obj, prefix, key, true, &s);
    if (r < 0)
        return r;
    jsonutil_field_join(field, prefix, key);
    return oci_doc_digest_value(d, field, s, out);
}

/* ---- descriptors ------------------------------------------------------- */

static int
platform_from_json(const struct jsonutil_doc *d, json_object *o, const char *field,
                   struct oci_platform *p)
{
    int r;
    memset(p, 0, sizeof(*p));
    if ((r = jsonutil_doc_string_fixed(d, o, field, "os", true, p->os, sizeof(p->os))) < 0 ||
        (r = jsonutil_doc_string_fixed(d, o, field, "architecture", true, p->architecture,
                                       sizeof(p->architecture))) < 0 ||
        (r = jsonutil_doc_string_fixed(d, o, field, "variant", false, p->variant,
                                       sizeof(p->variant))) < 0 ||
        (r = jsonutil_doc_string_fixed(d, o, field, "os.version", false, p->os_version,
                                       sizeof(p->os_version))) < 0)
        return r;
    return 0;
}

void
oci_descriptor_clear(struct oci_descriptor *d)
{
    if (!d)
        return;
    free(d->media_type);
    free(d->ref_name);
    memset(d, 0, sizeof(*d));
}

int
oci_descriptor_copy(struct oci_descriptor *dst, const struct oci_descriptor *src, struct err *err)
{
    *dst = *src;
    dst->media_type = src->media_type ? strdup(src->media_type) : NULL;
    dst->ref_name = src->ref_name ? strdup(src->ref_name) : NULL;
    if ((src->media_type && !dst->media_type) || (src->ref_name && !dst->ref_name)) {
        oci_descriptor_clear(dst);
        return err_set(err, ENOMEM, "copy descriptor %s: out of memory", src->digest);
    }
    return 0;
}

/* Annotations must map strings to strings; only ref.name is kept. */
static int
annotations_from_json(const struct jsonutil_doc *d, json_object *o, const char *field,
                      struct oci_descriptor *out)
{
    char key_field[JSONUTIL_FIELD_MAX];
    bool has_full = false;
    json_object_object_foreach(o, key, val)
    {
        const char *s;
        int r;
        char kq[JSONUTIL_QUOTE_MAX];
        /* The key is quoted as values are: it ends up in logs and replies. */
        snprintf(key_field, sizeof(key_field), "%s[%s]", field,
                 jsonutil_quote(kq, key, strlen(key)));
        if (!val)
            return jsonutil_doc_fail(d, "%s is null, want a string", key_field);
        if ((r = jsonutil_doc_check_type(d, val, key_field, json_type_string)) < 0 ||
            (r = jsonutil_doc_string_value(d, val, key_field, false, &s)) < 0)
            return r;
        /* containerd's full name (docker save of a containerd store, buildx)
         * wins over the OCI ref name, which is often the tag alone. */
        bool full = strcmp(key, OCI_ANNOTATION_CONTAINERD_NAME) == 0;
        if (full || (strcmp(key, OCI_ANNOTATION_REF_NAME) == 0 && !has_full)) {
            free(out->ref_name);
            if (!(out->ref_name = strdup(s)))
                return jsonutil_doc_nomem(d);
            has_full |= full;
        }
    }
    return 0;
}

/* Parses the descriptor object o at field into out (out is cleared on error). */
static int
descriptor_from_json(const struct jsonutil_doc *d, json_object *o, const char *field,
                     struct oci_descriptor *out)
{
    char sub[JSONUTIL_FIELD_MAX];
    json_object *v;
    int r;

    memset(out, 0, sizeof(*out));
    if ((r = jsonutil_doc_string_dup(d, o, field, "mediaType", true, &out->media_type)) < 0 ||
        (r = doc_digest(d, o, field, "digest", out->digest)) < 0 ||
        (r = jsonutil_doc_size(d, o, field, "size", &out->size)) < 0 ||
        (r = jsonutil_doc_field(d, o, field, "platform", json_type_object, false, &v)) < 0)
        goto fail;
    if (v) {
        jsonutil_field_join(sub, field, "platform");
        if ((r = platform_from_json(d, v, sub, &out->platform)) < 0)
            goto fail;
        out->has_platform = true;
    }
    if ((r = jsonutil_doc_field(d, o, field, "annotations", json_type_object, false, &v)) < 0)
        goto fail;
    if (v) {
        jsonutil_field_join(sub, field, "annotations");
        if ((r = annotations_from_json(d, v, sub, out)) < 0)
            goto fail;
    }
    return 0;
fail:
    oci_descriptor_clear(out);
    return r;
}

/* A required descriptor object under key. */
static int
doc_descriptor(const struct jsonutil_doc *d, json_object *obj, const char *key,
               struct oci_descriptor *out)
{
    json_object *v;
    int r = jsonutil_doc_field(d, obj, "", key, json_type_object, true, &v);
    if (r < 0)
        return r;
    return descriptor_from_json(d, v, key, out);
}

/* ---- media types ------------------------------------------------------- */

bool
oci_media_type_is_index(const char *mt)
{
    return mt && (strcmp(mt, OCI_MT_INDEX) == 0 || strcmp(mt, DOCKER_MT_MANIFEST_LIST) == 0);
}

bool
oci_media_type_is_manifest(const char *mt)
{
    return mt && (strcmp(mt, OCI_MT_MANIFEST) == 0 || strcmp(mt, DOCKER_MT_MANIFEST) == 0);
}

struct layer_type {
    const char *media_type;
    enum oci_layer_compression compression;
    bool nondistributable;
};

static const struct layer_type layer_types[] = {
    {OCI_MT_LAYER_TAR, OCI_LAYER_TAR, false},
    {OCI_MT_LAYER_GZIP, OCI_LAYER_GZIP, false},
    {OCI_MT_LAYER_ZSTD, OCI_LAYER_ZSTD, false},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_LAYER_TAR, true},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_LAYER_GZIP, true},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_LAYER_ZSTD, true},
    {DOCKER_MT_LAYER_GZIP, OCI_LAYER_GZIP, false},
    /* Not in the docker spec, but written by containerd and buildkit for
     * uncompressed layers in docker manifests. */
    {"application/vnd.docker.image.rootfs.diff.tar", OCI_LAYER_TAR, false},
    {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", OCI_LAYER_GZIP, true},
    {"application/vnd.docker.image.rootfs.foreign.diff.tar", OCI_LAYER_TAR, true},
};

static const struct layer_type *
layer_type_find(const char *mt)
{
    for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++) {
        if (strcmp(mt, layer_types[i].media_type) == 0)
            return &layer_types[i];
    }
    return NULL;
}

const char *
oci_layer_media_type(enum oci_layer_compression c)
{
    switch (c) {
    case OCI_LAYER_TAR:
        return OCI_MT_LAYER_TAR;
    case OCI_LAYER_GZIP:
        return OCI_MT_LAYER_GZIP;
    case OCI_LAYER_ZSTD:
        return OCI_MT_LAYER_ZSTD;
    }
    return NULL;
}

/* ---- index ------------------------------------------------------------- */

void
oci_index_free(struct oci_index *idx)
{
    if (!idx)
        return;
    for (size_t i = 0; i < idx->n_manifests; i++)
        oci_descriptor_clear(&idx->manifests[i]);
    free(idx->manifests);
    free(idx->media_type);
    free(idx);
}

int
oci_index_parse(const char *buf, size_t len, const char *name, struct oci_index **out,
                struct err *err)
{
    struct jsonutil_doc d = {"index", name, err};
    cleanup_json json_object *root = NULL;
    __attribute__((cleanup(oci_index_freep))) struct oci_index *idx = NULL;
    json_object *arr;
    char field[JSONUTIL_FIELD_MAX];
    char q[JSONUTIL_QUOTE_MAX];
    int r;

    if ((r = jsonutil_doc_parse_root(&d, buf, len, OCI_DOC_MAX, json_type_object, &root)) < 0 ||
        (r = doc_schema_version(&d, root)) < 0)
        return r;
    if (!(idx = calloc(1, sizeof(*idx))))
        return jsonutil_doc_nomem(&d);
    if ((r = jsonutil_doc_string_dup(&d, root, "", "mediaType", false, &idx->media_type)) < 0)
        return r;
    if (idx->media_type && !oci_media_type_is_index(idx->media_type))
        return jsonutil_doc_fail(
            &d, "mediaType %s is %s", jsonutil_quote(q, idx->media_type, strlen(idx->media_type)),
            oci_media_type_is_manifest(idx->media_type) ? "a manifest, not an index"
                                                        : "not an image index");
    if ((r = jsonutil_doc_field(&d, root, "", "manifests", json_type_array, true, &arr)) < 0)
        return r;
    size_t n = json_object_array_length(arr);
    if (n && !(idx->manifests = calloc(n, sizeof(*idx->manifests))))
        return jsonutil_doc_nomem(&d);
    for (size_t i = 0; i < n; i++) {
        json_object *e;
        if ((r = jsonutil_doc_elem(&d, arr, "manifests", i, json_type_object, field, &e)) < 0 ||
            (r = descriptor_from_json(&d, e, field, &idx->manifests[i])) < 0)
            return r;
        idx->n_manifests = i + 1;
    }
    *out = steal_ptr(&idx);
    return 0;
}

/* ---- manifest ---------------------------------------------------------- */

void
oci_manifest_free(struct oci_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_layers; i++)
        oci_descriptor_clear(&m->layers[i].desc);
    free(m->layers);
    oci_descriptor_clear(&m->config);
    free(m->media_type);
    free(m);
}

static void
oci_manifest_freep(struct oci_manifest **p)
{
    oci_manifest_free(*p);
}

int
oci_manifest_parse(const char *buf, size_t len, const char *name, struct oci_manifest **out,
                   struct err *err)
{
    struct jsonutil_doc d = {"manifest", name, err};
    cleanup_json json_object *root = NULL;
    __attribute__((cleanup(oci_manifest_freep))) struct oci_manifest *m = NULL;
    json_object *arr;
    char field[JSONUTIL_FIELD_MAX];
    char q[JSONUTIL_QUOTE_MAX];
    int r;

    if ((r = jsonutil_doc_parse_root(&d, buf, len, OCI_DOC_MAX, json_type_object, &root)) < 0 ||
        (r = doc_schema_version(&d, root)) < 0)
        return r;
    if (!(m = calloc(1, sizeof(*m))))
        return jsonutil_doc_nomem(&d);
    if ((r = jsonutil_doc_string_dup(&d, root, "", "mediaType", false, &m->media_type)) < 0)
        return r;
    if (m->media_type && !oci_media_type_is_manifest(m->media_type))
        return jsonutil_doc_fail(
            &d, "mediaType %s is %s", jsonutil_quote(q, m->media_type, strlen(m->media_type)),
            oci_media_type_is_index(m->media_type) ? "an image index, not a manifest"
                                                   : "not an image manifest");
    if ((r = doc_descriptor(&d, root, "config", &m->config)) < 0)
        return r;
    if (strcmp(m->config.media_type, OCI_MT_CONFIG) != 0 &&
        strcmp(m->config.media_type, DOCKER_MT_CONFIG) != 0)
        return jsonutil_doc_fail(
            &d, "config.mediaType %s is not an image config (an artifact?)",
            jsonutil_quote(q, m->config.media_type, strlen(m->config.media_type)));
    if ((r = jsonutil_doc_field(&d, root, "", "layers", json_type_array, true, &arr)) < 0)
        return r;
    size_t n = json_object_array_length(arr);
    if (n > OCI_LAYERS_MAX)
        return jsonutil_doc_fail(
            &d, "lists %zu layers, more than the %d that a container can stack", n, OCI_LAYERS_MAX);
    if (n && !(m->layers = calloc(n, sizeof(*m->layers))))
        return jsonutil_doc_nomem(&d);
    for (size_t i = 0; i < n; i++) {
        struct oci_layer *l = &m->layers[i];
        json_object *e;
        if ((r = jsonutil_doc_elem(&d, arr, "layers", i, json_type_object, field, &e)) < 0 ||
            (r = descriptor_from_json(&d, e, field, &l->desc)) < 0)
            return r;
        m->n_layers = i + 1;
        const struct layer_type *t = layer_type_find(l->desc.media_type);
        if (!t)
            return jsonutil_doc_fail(
                &d, "%s.mediaType %s is not a known layer type", field,
                jsonutil_quote(q, l->desc.media_type, strlen(l->desc.media_type)));
        l->compression = t->compression;
        l->nondistributable = t->nondistributable;
    }
    *out = steal_ptr(&m);
    return 0;
}
