/*
 * OCI image configs (platform, rootfs diff_ids, the run defaults, exposed
 * ports and labels), the oci-layout file, and whether a manifest and its
 * config agree. Every document is untrusted and read as oci.c says. Runs
 * on pool threads during an import; pure functions of their input.
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
#include "store/oci_int.h"

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
            (r = oci_doc_digest_value(d, field, s, c->diff_ids[i])) < 0)
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
