/*
 * Reading untrusted JSON documents (OCI indexes, manifests, configs,
 * docker-save manifests): the generic field checker of the store's
 * document parsers. Every problem is one ERR_INVALID_CONTENT message
 *   <kind> <name>: <field> <what is wrong>
 * with values quoted, escaped and cut short, since a message ends up in
 * logs and HTTP replies. Field paths read "manifests[12].platform.os".
 * Pure; any thread.
 */
#ifndef BERTH_JSONUTIL_DOC_H
#define BERTH_JSONUTIL_DOC_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "jsonutil/jsonutil.h"

/* What is being read, for messages: kind "manifest", name "sha256:...". */
struct jsonutil_doc {
    const char *kind;
    const char *name;
    struct err *err;
};

static inline void
jsonutil_put_fn(json_object **o)
{
    if (*o)
        json_object_put(*o);
}
#define cleanup_json __attribute__((cleanup(jsonutil_put_fn)))

/* Sets d's err to "<kind> <name>: <message>"; returns -ERR_INVALID_CONTENT. */
int jsonutil_doc_fail(const struct jsonutil_doc *d, const char *fmt, ...) BERTH_FORMAT(2, 3);
int jsonutil_doc_nomem(const struct jsonutil_doc *d);

/* s (len bytes) quoted and escaped, at most about 80 characters. */
#define JSONUTIL_QUOTE_MAX 100
const char *jsonutil_quote(char buf[JSONUTIL_QUOTE_MAX], const char *s, size_t len);

/* Parses buf (at most max bytes) strictly as one value, of type t for _root. */
int jsonutil_doc_parse(const struct jsonutil_doc *d, const char *buf, size_t len, size_t max,
                       json_object **out);
int jsonutil_doc_parse_root(const struct jsonutil_doc *d, const char *buf, size_t len, size_t max,
                            json_type t, json_object **out);

/* v (named field) has type t. */
int jsonutil_doc_check_type(const struct jsonutil_doc *d, json_object *v, const char *field,
                            json_type t);
/* Member key of obj (at path prefix), of type t; *out NULL when absent or
 * null and not required. */
int jsonutil_doc_field(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                       const char *key, json_type t, bool required, json_object **out);
/* A string's text, refusing NUL bytes (and, with nonempty, ""). */
int jsonutil_doc_string_value(const struct jsonutil_doc *d, json_object *v, const char *field,
                              bool nonempty, const char **out);
/* A string member: borrowed, a new copy (NULL when absent or empty), or into a fixed buffer. */
int jsonutil_doc_string(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                        const char *key, bool required, const char **out);
int jsonutil_doc_string_dup(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                            const char *key, bool required, char **out);
int jsonutil_doc_string_fixed(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                              const char *key, bool required, char *dst, size_t size);
/* A required integer from 0 to below INT64_MAX. */
int jsonutil_doc_size(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                      const char *key, int64_t *out);
/* An optional array of strings as a new vector (strv_free); absent: NULL, 0. */
int jsonutil_doc_strv(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                      const char *key, char ***out, size_t *n);
/* Element i of arr, of type t; field gets its path. */
int jsonutil_doc_elem(const struct jsonutil_doc *d, json_object *arr, const char *prefix, size_t i,
                      json_type t, char field[JSONUTIL_FIELD_MAX], json_object **out);

#endif
