/*
 * OCI image documents and docker-save manifests. Runs on pool threads
 * during an import; pure functions of their input, no shared state.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/strv.h"
#include "jsonutil/doc.h"
#include "jsonutil/jsonutil.h"
#include "store/digest.h"

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
static int
doc_digest_value(const struct jsonutil_doc *d, const char *field, const char *s,
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
    return doc_digest_value(d, field, s, out);
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

static const char *
layer_media_type(enum oci_layer_compression c)
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

static void
oci_index_freep(struct oci_index **p)
{
    oci_index_free(*p);
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

/* ---- config ------------------------------------------------------------ */

void
oci_config_free(struct oci_config *c)
{
    if (!c)
        return;
    free(c->diff_ids);
    strv_free(c->env);
    strv_free(c->entrypoint);
    strv_free(c->cmd);
    free(c->working_dir);
    free(c->user);
    strv_free(c->exposed_ports);
    strv_free(c->label_keys);
    strv_free(c->label_values);
    free(c);
}

static void
oci_config_freep(struct oci_config **p)
{
    oci_config_free(*p);
}

static int
config_rootfs(const struct jsonutil_doc *d, json_object *root, struct oci_config *c)
{
    json_object *rootfs;
    json_object *arr;
    const char *type;
    char field[JSONUTIL_FIELD_MAX];
    char q[JSONUTIL_QUOTE_MAX];
    int r;

    if ((r = jsonutil_doc_field(d, root, "", "rootfs", json_type_object, true, &rootfs)) < 0 ||
        (r = jsonutil_doc_string(d, rootfs, "rootfs", "type", true, &type)) < 0)
        return r;
    if (strcmp(type, "layers") != 0)
        return jsonutil_doc_fail(d, "rootfs.type %s is not \"layers\"",
                                 jsonutil_quote(q, type, strlen(type)));
    if ((r = jsonutil_doc_field(d, rootfs, "rootfs", "diff_ids", json_type_array, true, &arr)) < 0)
        return r;
    size_t n = json_object_array_length(arr);
    if (n && !(c->diff_ids = calloc(n, sizeof(*c->diff_ids))))
        return jsonutil_doc_nomem(d);
    for (size_t i = 0; i < n; i++) {
        json_object *e;
        const char *s;
        if ((r = jsonutil_doc_elem(d, arr, "rootfs.diff_ids", i, json_type_string, field, &e)) <
                0 ||
            (r = jsonutil_doc_string_value(d, e, field, false, &s)) < 0 ||
            (r = doc_digest_value(d, field, s, c->diff_ids[i])) < 0)
            return r;
    }
    c->n_diff_ids = n;
    return 0;
}

/* A NULL-terminated copy of v[0..n) grown by one; false on OOM. */
static bool
strv_append(char ***v, size_t *n, const char *s)
{
    return strv_push(v, n, s) == 0;
}

/*
 * ExposedPorts (an object whose keys are "port/proto") and Labels (an
 * object of strings): shown with the image, used for nothing else.
 */
static int
config_ports_labels(const struct jsonutil_doc *d, json_object *run, struct oci_config *c)
{
    json_object *ports, *labels;
    char field[JSONUTIL_FIELD_MAX];
    int r;
    if ((r = jsonutil_doc_field(d, run, "config", "ExposedPorts", json_type_object, false,
                                &ports)) < 0 ||
        (r = jsonutil_doc_field(d, run, "config", "Labels", json_type_object, false, &labels)) < 0)
        return r;
    if (ports) {
        json_object_object_foreach(ports, key, val)
        {
            (void)val;
            if (!strv_append(&c->exposed_ports, &c->n_exposed_ports, key))
                return jsonutil_doc_nomem(d);
        }
    }
    if (labels) {
        size_t nv = 0;
        json_object_object_foreach(labels, key, val)
        {
            jsonutil_field_join(field, "config.Labels", key);
            const char *v;
            if ((r = jsonutil_doc_check_type(d, val, field, json_type_string)) < 0 ||
                (r = jsonutil_doc_string_value(d, val, field, false, &v)) < 0)
                return r;
            if (!strv_append(&c->label_keys, &c->n_labels, key) ||
                !strv_append(&c->label_values, &nv, v))
                return jsonutil_doc_nomem(d);
        }
    }
    return 0;
}

int
oci_config_parse(const char *buf, size_t len, const char *name, struct oci_config **out,
                 struct err *err)
{
    struct jsonutil_doc d = {"config", name, err};
    cleanup_json json_object *root = NULL;
    __attribute__((cleanup(oci_config_freep))) struct oci_config *c = NULL;
    struct oci_platform *p;
    json_object *run;
    int r;

    if ((r = jsonutil_doc_parse_root(&d, buf, len, OCI_DOC_MAX, json_type_object, &root)) < 0)
        return r;
    if (!(c = calloc(1, sizeof(*c))))
        return jsonutil_doc_nomem(&d);
    p = &c->platform;
    if ((r = jsonutil_doc_string_fixed(&d, root, "", "os", true, p->os, sizeof(p->os))) < 0 ||
        (r = jsonutil_doc_string_fixed(&d, root, "", "architecture", true, p->architecture,
                                       sizeof(p->architecture))) < 0 ||
        (r = jsonutil_doc_string_fixed(&d, root, "", "variant", false, p->variant,
                                       sizeof(p->variant))) < 0 ||
        (r = jsonutil_doc_string_fixed(&d, root, "", "os.version", false, p->os_version,
                                       sizeof(p->os_version))) < 0 ||
        (r = config_rootfs(&d, root, c)) < 0 ||
        (r = jsonutil_doc_field(&d, root, "", "config", json_type_object, false, &run)) < 0)
        return r;
    if (run && ((r = jsonutil_doc_strv(&d, run, "config", "Env", &c->env, &c->n_env)) < 0 ||
                (r = jsonutil_doc_strv(&d, run, "config", "Entrypoint", &c->entrypoint,
                                       &c->n_entrypoint)) < 0 ||
                (r = jsonutil_doc_strv(&d, run, "config", "Cmd", &c->cmd, &c->n_cmd)) < 0 ||
                (r = jsonutil_doc_string_dup(&d, run, "config", "WorkingDir", false,
                                             &c->working_dir)) < 0 ||
                (r = jsonutil_doc_string_dup(&d, run, "config", "User", false, &c->user)) < 0 ||
                (r = config_ports_labels(&d, run, c)) < 0))
        return r;
    *out = steal_ptr(&c);
    return 0;
}

/* ---- layout, consistency ------------------------------------------------ */

int
oci_layout_check(const char *buf, size_t len, const char *name, struct err *err)
{
    struct jsonutil_doc d = {"image layout", name, err};
    cleanup_json json_object *root = NULL;
    const char *v;
    char q[JSONUTIL_QUOTE_MAX];
    int r;

    if ((r = jsonutil_doc_parse_root(&d, buf, len, OCI_DOC_MAX, json_type_object, &root)) < 0 ||
        (r = jsonutil_doc_string(&d, root, "", "imageLayoutVersion", true, &v)) < 0)
        return r;
    if (strcmp(v, "1.0.0") != 0)
        return jsonutil_doc_fail(&d, "imageLayoutVersion %s is not \"1.0.0\"",
                                 jsonutil_quote(q, v, strlen(v)));
    return 0;
}

int
oci_image_check_consistent(const struct oci_manifest *m, const struct oci_config *c,
                           const char *name, struct err *err)
{
    struct jsonutil_doc d = {"manifest", name, err};
    if (m->n_layers != c->n_diff_ids)
        return jsonutil_doc_fail(&d, "lists %zu layers but its config %s lists %zu diff_ids",
                                 m->n_layers, m->config.digest, c->n_diff_ids);
    return 0;
}

/* ---- selection ---------------------------------------------------------- */

static bool
entry_is_image(const struct oci_descriptor *e, const char *ref_name)
{
    if (!oci_media_type_is_manifest(e->media_type) && !oci_media_type_is_index(e->media_type))
        return false;
    return !ref_name || (e->ref_name && strcmp(e->ref_name, ref_name) == 0);
}

/* Appends ", <what>" (or "<what>" first) to a message list, silently truncating. */
static void
list_append(char *buf, size_t size, const char *what)
{
    size_t used = strlen(buf);
    if (used + 1 < size)
        snprintf(buf + used, size - used, "%s%s", used ? ", " : "", what);
}

/* What idx offers, for a no-match message: platforms, or ref names with by_name. */
static void
offers_describe(const struct oci_index *idx, bool by_name, char *buf, size_t size)
{
    char one[200];
    char q[JSONUTIL_QUOTE_MAX];
    buf[0] = '\0';
    for (size_t i = 0; i < idx->n_manifests; i++) {
        const struct oci_descriptor *e = &idx->manifests[i];
        if (!entry_is_image(e, NULL))
            continue;
        if (by_name) {
            if (!e->ref_name)
                continue;
            jsonutil_quote(q, e->ref_name, strlen(e->ref_name));
            list_append(buf, size, q);
            continue;
        }
        if (e->has_platform)
            oci_platform_format(&e->platform, one, sizeof(one));
        else
            snprintf(one, sizeof(one), "no platform");
        list_append(buf, size, one);
    }
    if (!buf[0])
        snprintf(buf, size, "nothing");
}

/*
 * Among Windows matches, the one whose build suits want best: its own
 * build, else the newest older one, else the first. Returns an index
 * into cand.
 */
static size_t
windows_pick(const struct oci_descriptor *const *cand, size_t n, const struct oci_platform *want)
{
    size_t best = 0;
    bool best_older = false;
    for (size_t i = 0; i < n; i++) {
        int c;
        if (!windows_version_compare(cand[i]->platform.os_version, want->os_version, &c))
            continue;
        if (c == 0)
            return i;
        if (c < 0) {
            int nb;
            if (!best_older || (windows_version_compare(cand[i]->platform.os_version,
                                                        cand[best]->platform.os_version, &nb) &&
                                nb > 0)) {
                best = i;
                best_older = true;
            }
        }
    }
    return best;
}

int
oci_select_manifest(const struct oci_index *idx, const struct oci_platform *want,
                    const char *ref_name, const char *name, const struct oci_descriptor **out,
                    struct err *err)
{
    struct jsonutil_doc d = {"index", name, err};
    const struct oci_descriptor *single = NULL;
    size_t n_cand = 0;
    char offers[320];
    char q[JSONUTIL_QUOTE_MAX];

    for (size_t i = 0; i < idx->n_manifests; i++) {
        if (entry_is_image(&idx->manifests[i], ref_name)) {
            single = &idx->manifests[i];
            n_cand++;
        }
    }
    if (n_cand == 0) {
        offers_describe(idx, ref_name != NULL, offers, sizeof(offers));
        if (ref_name)
            return jsonutil_doc_fail(&d, "no image named %s; it offers %s",
                                     jsonutil_quote(q, ref_name, strlen(ref_name)), offers);
        return jsonutil_doc_fail(&d, "lists no image manifest");
    }
    if (n_cand == 1 && (!single->has_platform || !want)) {
        *out = single;
        return 0;
    }
    if (!want)
        return jsonutil_doc_fail(&d, "lists %zu images; a platform is needed to choose one",
                                 n_cand);

    const struct oci_descriptor **match = calloc(n_cand, sizeof(*match));
    size_t n_match = 0;
    if (!match)
        return jsonutil_doc_nomem(&d);
    for (size_t i = 0; i < idx->n_manifests; i++) {
        const struct oci_descriptor *e = &idx->manifests[i];
        if (entry_is_image(e, ref_name) && e->has_platform &&
            oci_platform_match(want, &e->platform))
            match[n_match++] = e;
    }
    if (n_match == 0) {
        char w[200];
        free(match);
        offers_describe(idx, false, offers, sizeof(offers));
        return jsonutil_doc_fail(&d, "no image for %s; it offers %s",
                                 oci_platform_format(want, w, sizeof(w)), offers);
    }
    size_t pick = 0;
    if (strcmp(want->os, "windows") == 0 && want->os_version[0])
        pick = windows_pick(match, n_match, want);
    *out = match[pick];
    free(match);
    return 0;
}

int
oci_index_resolve(const struct oci_index *idx, const struct oci_platform *want,
                  const char *ref_name, const char *name, oci_blob_read_cb read_cb, void *ctx,
                  struct oci_descriptor *out, struct err *err)
{
    __attribute__((cleanup(oci_index_freep))) struct oci_index *owned = NULL;
    char owned_name[OCI_DIGEST_MAX];
    const struct oci_index *cur = idx;
    const char *cur_name = name;

    for (int depth = 0;; depth++) {
        const struct oci_descriptor *e;
        int r = oci_select_manifest(cur, want, depth == 0 ? ref_name : NULL, cur_name, &e, err);
        if (r < 0)
            return r;
        if (!oci_media_type_is_index(e->media_type))
            return oci_descriptor_copy(out, e, err);

        struct jsonutil_doc d = {"index", cur_name, err};
        if (depth == OCI_INDEX_NEST_MAX)
            return jsonutil_doc_fail(&d, "entry %s is an index nested more than %d deep", e->digest,
                                     OCI_INDEX_NEST_MAX);
        if (e->size > OCI_DOC_MAX)
            return jsonutil_doc_fail(
                &d, "entry %s is an index of %lld bytes, more than the %d byte limit", e->digest,
                (long long)e->size, OCI_DOC_MAX);

        char digest[OCI_DIGEST_MAX];
        cleanup_free char *buf = NULL;
        size_t len = 0;
        int64_t size = e->size;
        memcpy(digest, e->digest, sizeof(digest));
        if ((r = read_cb(ctx, digest, &buf, &len, err)) < 0)
            return r;
        if ((int64_t)len != size)
            return jsonutil_doc_fail(&d, "entry %s says %lld bytes, the blob has %zu", digest,
                                     (long long)size, len);
        struct oci_index *next = NULL;
        if ((r = oci_index_parse(buf, len, digest, &next, err)) < 0)
            return r;
        oci_index_free(owned);
        owned = next;
        memcpy(owned_name, digest, sizeof(owned_name));
        cur = owned;
        cur_name = owned_name;
    }
}

/* ---- docker save -------------------------------------------------------- */

void
docker_manifest_free(struct docker_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_images; i++) {
        free(m->images[i].config);
        strv_free(m->images[i].repo_tags);
        strv_free(m->images[i].layers);
    }
    free(m->images);
    free(m);
}

static void
docker_manifest_freep(struct docker_manifest **p)
{
    docker_manifest_free(*p);
}

/*
 * An archive member path must name the member exactly and stay inside
 * the archive: relative, no empty, "." or ".." component.
 */
static int
archive_path_check(const struct jsonutil_doc *d, const char *field, const char *path)
{
    char q[JSONUTIL_QUOTE_MAX];
    const char *why = NULL;
    if (!*path)
        return jsonutil_doc_fail(d, "%s is empty", field);
    if (path[0] == '/')
        why = "is absolute";
    for (const char *c = path; !why;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0)
            why = "has an empty component";
        else if (len == 2 && c[0] == '.' && c[1] == '.')
            why = "has a \"..\" component";
        else if (len == 1 && c[0] == '.')
            why = "has a \".\" component";
        if (!slash)
            break;
        c = slash + 1;
    }
    if (why)
        return jsonutil_doc_fail(d, "%s %s %s", field, jsonutil_quote(q, path, strlen(path)), why);
    return 0;
}

static int
docker_image_from_json(const struct jsonutil_doc *d, json_object *o, const char *field,
                       struct docker_image *img)
{
    char sub[JSONUTIL_FIELD_MAX];
    char elem[JSONUTIL_FIELD_MAX];
    int r;

    if ((r = jsonutil_doc_string_dup(d, o, field, "Config", true, &img->config)) < 0)
        return r;
    jsonutil_field_join(sub, field, "Config");
    if ((r = archive_path_check(d, sub, img->config)) < 0 ||
        (r = jsonutil_doc_strv(d, o, field, "RepoTags", &img->repo_tags, &img->n_repo_tags)) < 0)
        return r;
    json_object *layers;
    if ((r = jsonutil_doc_field(d, o, field, "Layers", json_type_array, true, &layers)) < 0 ||
        (r = jsonutil_doc_strv(d, o, field, "Layers", &img->layers, &img->n_layers)) < 0)
        return r;
    jsonutil_field_join(sub, field, "Layers");
    for (size_t i = 0; i < img->n_layers; i++) {
        jsonutil_field_index(elem, sub, i);
        if ((r = archive_path_check(d, elem, img->layers[i])) < 0)
            return r;
    }
    return 0;
}

int
docker_manifest_parse(const char *buf, size_t len, const char *name, struct docker_manifest **out,
                      struct err *err)
{
    struct jsonutil_doc d = {"docker archive", name, err};
    cleanup_json json_object *root = NULL;
    __attribute__((cleanup(docker_manifest_freep))) struct docker_manifest *m = NULL;
    char field[JSONUTIL_FIELD_MAX];
    int r;

    if ((r = jsonutil_doc_parse_root(&d, buf, len, OCI_DOC_MAX, json_type_array, &root)) < 0)
        return r;
    size_t n = json_object_array_length(root);
    if (n == 0)
        return jsonutil_doc_fail(&d, "lists no images");
    if (!(m = calloc(1, sizeof(*m))) || !(m->images = calloc(n, sizeof(*m->images))))
        return jsonutil_doc_nomem(&d);
    for (size_t i = 0; i < n; i++) {
        json_object *e;
        m->n_images = i + 1;
        if ((r = jsonutil_doc_elem(&d, root, "", i, json_type_object, field, &e)) < 0 ||
            (r = docker_image_from_json(&d, e, field, &m->images[i])) < 0)
            return r;
    }
    *out = steal_ptr(&m);
    return 0;
}

/* Appends to buf at *o; once full, *o stays >= cap and nothing more is written. */
static void buf_append(char *buf, size_t cap, size_t *o, const char *fmt, ...)
    __attribute__((format(gnu_printf, 4, 5)));

static void
buf_append(char *buf, size_t cap, size_t *o, const char *fmt, ...)
{
    if (*o >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *o, cap - *o, fmt, ap);
    va_end(ap);
    *o = n < 0 ? cap : *o + (size_t)n;
}

int
oci_manifest_synthesize(const char *config_digest, int64_t config_size,
                        const struct oci_layer_ref *layers, size_t n_layers, char **out_json,
                        size_t *out_len, char out_digest[OCI_DIGEST_MAX], struct err *err)
{
    if (!digest_valid(config_digest) || config_size < 0)
        return err_set(err, EINVAL, "synthesize manifest: bad config digest or size");
    for (size_t i = 0; i < n_layers; i++) {
        if (!digest_valid(layers[i].digest) || layers[i].size < 0 ||
            !layer_media_type(layers[i].compression))
            return err_set(err, EINVAL, "synthesize manifest: bad layer %zu", i);
    }
    if (n_layers > (SIZE_MAX - 512) / 256)
        return err_set(err, EINVAL, "synthesize manifest: %zu layers is too many", n_layers);

    /* Each layer entry is under 200 bytes, the frame under 300. */
    size_t cap = 512 + n_layers * 256;
    cleanup_free char *buf = malloc(cap);
    if (!buf)
        return err_set(err, ENOMEM, "synthesize manifest: out of memory");
    size_t o = 0;
    buf_append(buf, cap, &o,
               "{\"schemaVersion\":2,\"mediaType\":\"%s\","
               "\"config\":{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%lld},\"layers\":[",
               OCI_MT_MANIFEST, OCI_MT_CONFIG, config_digest, (long long)config_size);
    for (size_t i = 0; i < n_layers; i++)
        buf_append(buf, cap, &o, "%s{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%lld}",
                   i ? "," : "", layer_media_type(layers[i].compression), layers[i].digest,
                   (long long)layers[i].size);
    buf_append(buf, cap, &o, "]}");
    if (o >= cap)
        return err_set(err, EOVERFLOW, "synthesize manifest: buffer too small");
    if (digest_of(buf, o, out_digest) < 0)
        return err_set(err, ENOMEM, "synthesize manifest: out of memory");
    *out_len = o;
    *out_json = steal_ptr(&buf);
    return 0;
}
