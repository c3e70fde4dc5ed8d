/*
 * Reading untrusted JSON documents (jsonutil/doc.h): every problem becomes
 * one ERR_INVALID_CONTENT message naming the document, the field and the
 * value. Pure; any thread.
 */
#include "jsonutil/doc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
jsonutil_doc_fail(const struct jsonutil_doc *d, const char *fmt, ...)
{
    char msg[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return err_set(d->err, ERR_INVALID_CONTENT, "%s %s: %s", d->kind, d->name, msg);
}

int
jsonutil_doc_nomem(const struct jsonutil_doc *d)
{
    return err_set(d->err, ENOMEM, "%s %s: out of memory", d->kind, d->name);
}

const char *
jsonutil_quote(char buf[JSONUTIL_QUOTE_MAX], const char *s, size_t len)
{
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o > 80) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(buf + o, JSONUTIL_QUOTE_MAX - o, "\\x%02x", c);
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* Parses buf as one JSON value, strictly, with nothing but whitespace after it. */
int
jsonutil_doc_parse(const struct jsonutil_doc *d, const char *buf, size_t len, size_t max,
                   json_object **out)
{
    if (len > max)
        return jsonutil_doc_fail(d, "is %zu bytes, more than the %zu byte limit", len, max);
    if (!buf || len == 0)
        return jsonutil_doc_fail(d, "is empty");

    json_object *obj = NULL;
    struct jsonutil_syntax syn;
    int r = jsonutil_parse(buf, len, &obj, &syn);
    if (r == -ENOMEM)
        return jsonutil_doc_nomem(d);
    if (r < 0 && syn.truncated)
        return jsonutil_doc_fail(d, "is not valid JSON: it ends in the middle of a value");
    if (r < 0)
        return jsonutil_doc_fail(d, "is not valid JSON at byte %zu: %s", syn.offset, syn.why);
    *out = obj;
    return 0;
}

/* Parses buf and requires the top-level value to be of type t. */
int
jsonutil_doc_parse_root(const struct jsonutil_doc *d, const char *buf, size_t len, size_t max,
                        json_type t, json_object **out)
{
    json_object *obj = NULL;
    int r = jsonutil_doc_parse(d, buf, len, max, &obj);
    if (r < 0)
        return r;
    if (!json_object_is_type(obj, t)) {
        json_type have = json_object_get_type(obj);
        json_object_put(obj);
        return jsonutil_doc_fail(d, "is %s, want %s", jsonutil_type_name(have),
                                 jsonutil_type_name(t));
    }
    *out = obj;
    return 0;
}

/* Checks that v (named field) has type t. */
int
jsonutil_doc_check_type(const struct jsonutil_doc *d, json_object *v, const char *field,
                        json_type t)
{
    if (!json_object_is_type(v, t))
        return jsonutil_doc_fail(d, "%s is %s, want %s", field,
                                 jsonutil_type_name(json_object_get_type(v)),
                                 jsonutil_type_name(t));
    return 0;
}

/*
 * Looks key up in obj (at path prefix). *out is the value, of type t, or
 * NULL when the key is absent or null and not required.
 */
int
jsonutil_doc_field(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                   const char *key, json_type t, bool required, json_object **out)
{
    char field[JSONUTIL_FIELD_MAX];
    json_object *v = NULL;
    bool present = json_object_object_get_ex(obj, key, &v);

    jsonutil_field_join(field, prefix, key);
    *out = NULL;
    if (!present || !v) {
        if (required)
            return jsonutil_doc_fail(d, "%s is %s", field, present ? "null" : "missing");
        return 0;
    }
    int r = jsonutil_doc_check_type(d, v, field, t);
    if (r < 0)
        return r;
    *out = v;
    return 0;
}

/* The text of a string value, refusing embedded NUL bytes (and empty ones if nonempty). */
int
jsonutil_doc_string_value(const struct jsonutil_doc *d, json_object *v, const char *field,
                          bool nonempty, const char **out)
{
    const char *s = json_object_get_string(v);
    size_t len = (size_t)json_object_get_string_len(v);
    char q[JSONUTIL_QUOTE_MAX];
    /* Set on failure too: jsonutil_doc_fail's result (a vararg function,
     * never inlined) is not known to be negative, so gcc -O3 would see a
     * caller's "== 0" path with *out unset (-Wmaybe-uninitialized). */
    *out = NULL;
    if (strlen(s) != len)
        return jsonutil_doc_fail(d, "%s %s contains a NUL byte", field, jsonutil_quote(q, s, len));
    if (nonempty && len == 0)
        return jsonutil_doc_fail(d, "%s is empty", field);
    *out = s;
    return 0;
}

/* A string field: *out borrowed from obj, NULL when absent and optional. */
int
jsonutil_doc_string(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                    const char *key, bool required, const char **out)
{
    char field[JSONUTIL_FIELD_MAX];
    json_object *v;
    int r = jsonutil_doc_field(d, obj, prefix, key, json_type_string, required, &v);
    *out = NULL;
    if (r < 0 || !v)
        return r;
    jsonutil_field_join(field, prefix, key);
    return jsonutil_doc_string_value(d, v, field, required, out);
}

/* As doc_string, into a new string (NULL when absent or empty). */
int
jsonutil_doc_string_dup(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                        const char *key, bool required, char **out)
{
    const char *s;
    int r = jsonutil_doc_string(d, obj, prefix, key, required, &s);
    *out = NULL;
    if (r < 0 || !s || !*s)
        return r;
    *out = strdup(s);
    return *out ? 0 : jsonutil_doc_nomem(d);
}

/* A string field copied into a fixed buffer; too long is invalid content. */
int
jsonutil_doc_string_fixed(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                          const char *key, bool required, char *dst, size_t size)
{
    const char *s;
    int r = jsonutil_doc_string(d, obj, prefix, key, required, &s);
    if (r < 0)
        return r;
    if (!s) {
        dst[0] = '\0';
        return 0;
    }
    if (strlen(s) >= size) {
        char field[JSONUTIL_FIELD_MAX];
        char q[JSONUTIL_QUOTE_MAX];
        jsonutil_field_join(field, prefix, key);
        return jsonutil_doc_fail(d, "%s %s is longer than %zu bytes", field,
                                 jsonutil_quote(q, s, strlen(s)), size - 1);
    }
    strcpy(dst, s);
    return 0;
}

/* A required non-negative integer that fits int64 (json-c clamps larger ones). */
int
jsonutil_doc_size(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                  const char *key, int64_t *out)
{
    char field[JSONUTIL_FIELD_MAX];
    json_object *v;
    int r = jsonutil_doc_field(d, obj, prefix, key, json_type_int, true, &v);
    if (r < 0)
        return r;
    jsonutil_field_join(field, prefix, key);
    int64_t n = json_object_get_int64(v);
    if (n < 0)
        return jsonutil_doc_fail(d, "%s is negative (%lld)", field, (long long)n);
    if (n == INT64_MAX)
        return jsonutil_doc_fail(d, "%s is out of range", field);
    *out = n;
    return 0;
}

/*
 * An optional array of strings into a new NULL-terminated vector. Absent
 * or null leaves *out NULL and *n 0.
 */
int
jsonutil_doc_strv(const struct jsonutil_doc *d, json_object *obj, const char *prefix,
                  const char *key, char ***out, size_t *n)
{
    char field[JSONUTIL_FIELD_MAX];
    char elem[JSONUTIL_FIELD_MAX];
    json_object *arr;
    int r = jsonutil_doc_field(d, obj, prefix, key, json_type_array, false, &arr);
    *out = NULL;
    *n = 0;
    if (r < 0 || !arr)
        return r;
    jsonutil_field_join(field, prefix, key);
    size_t len = json_object_array_length(arr);
    char **v = calloc(len + 1, sizeof(*v));
    if (!v)
        return jsonutil_doc_nomem(d);
    for (size_t i = 0; i < len; i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        const char *s;
        jsonutil_field_index(elem, field, i);
        if (!e)
            r = jsonutil_doc_fail(d, "%s is null, want a string", elem);
        else if ((r = jsonutil_doc_check_type(d, e, elem, json_type_string)) == 0 &&
                 (r = jsonutil_doc_string_value(d, e, elem, false, &s)) == 0 && !(v[i] = strdup(s)))
            r = jsonutil_doc_nomem(d);
        if (r < 0) {
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return r;
        }
    }
    *out = v;
    *n = len;
    return 0;
}

/* The element i of arr, which must be of type t. */
int
jsonutil_doc_elem(const struct jsonutil_doc *d, json_object *arr, const char *prefix, size_t i,
                  json_type t, char field[JSONUTIL_FIELD_MAX], json_object **out)
{
    json_object *e = json_object_array_get_idx(arr, i);
    jsonutil_field_index(field, prefix, i);
    if (!e)
        return jsonutil_doc_fail(d, "%s is null, want %s", field, jsonutil_type_name(t));
    *out = e;
    return jsonutil_doc_check_type(d, e, field, t);
}
