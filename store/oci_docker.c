/*
 * docker save archives: their manifest.json (every member path checked to
 * stay inside the archive), and the OCI manifest berth writes for the
 * image it picks from one. Runs on pool threads during an import; pure
 * functions of their input.
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
#include "store/oci_int.h"

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
            !oci_layer_media_type(layers[i].compression))
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
                   i ? "," : "", oci_layer_media_type(layers[i].compression), layers[i].digest,
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
