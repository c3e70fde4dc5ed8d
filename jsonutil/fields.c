/* Field access with messages that name the field (jsonutil.h); pure, any thread. */
#include "jsonutil/jsonutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"

const char *
jsonutil_type_name(json_type t)
{
    switch (t) {
    case json_type_null:
        return "null";
    case json_type_boolean:
        return "a boolean";
    case json_type_double:
        return "a fractional number";
    case json_type_int:
        return "an integer";
    case json_type_object:
        return "an object";
    case json_type_array:
        return "an array";
    case json_type_string:
        return "a string";
    }
    return "an unknown value";
}

const char *
jsonutil_type_article(json_object *v)
{
    return jsonutil_type_name(json_object_get_type(v));
}

/*
 * Field names only ever go into messages, and a key is the client's (or a
 * hostile document's) bytes: anything but printable ASCII, and the quote
 * and backslash that would end or escape the quoted name, are written as
 * \xNN, so no raw byte reaches a reply or a log line.
 */
void
jsonutil_field_join(char out[JSONUTIL_FIELD_MAX], const char *prefix, const char *key)
{
    size_t o = 0;
    if (prefix && *prefix)
        o = (size_t)snprintf(out, JSONUTIL_FIELD_MAX, "%s.", prefix);
    if (o >= JSONUTIL_FIELD_MAX)
        return;
    for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
        bool plain = *k >= 0x20 && *k < 0x7f && *k != '"' && *k != '\\';
        if (o + (plain ? 1 : 4) >= JSONUTIL_FIELD_MAX)
            break;
        if (plain)
            out[o++] = (char)*k;
        else
            o += (size_t)snprintf(out + o, JSONUTIL_FIELD_MAX - o, "\\x%02x", *k);
    }
    out[o] = '\0';
}

void
jsonutil_field_index(char out[JSONUTIL_FIELD_MAX], const char *prefix, size_t i)
{
    snprintf(out, JSONUTIL_FIELD_MAX, "%s[%zu]", prefix, i);
}

bool
jsonutil_lookup(json_object *o, const char *key, json_object **v)
{
    return json_object_object_get_ex(o, key, v) && !json_object_is_type(*v, json_type_null);
}

int
jsonutil_check_fields(json_object *o, const char *where, const char *const *allowed,
                      struct err *err)
{
    json_object_object_foreach(o, key, val)
    {
        (void)val;
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, key) == 0;
        if (!ok) {
            char name[JSONUTIL_FIELD_MAX];
            jsonutil_field_join(name, where, key);
            return err_set(err, EINVAL, "field \"%s\": unknown field", name);
        }
    }
    return 0;
}

/* Looks key up; 0 absent (an error if required), 1 present. */
static int
lookup(json_object *o, const char *where, const char *key, bool required, json_object **v,
       struct err *err)
{
    if (jsonutil_lookup(o, key, v))
        return 1;
    if (required) {
        char name[JSONUTIL_FIELD_MAX];
        jsonutil_field_join(name, where, key);
        return err_set(err, EINVAL, "field \"%s\": required", name);
    }
    return 0;
}

static int
wrong_type(const char *where, const char *key, const char *want, json_object *v, struct err *err)
{
    char name[JSONUTIL_FIELD_MAX];
    jsonutil_field_join(name, where, key);
    return err_set(err, EINVAL, "field \"%s\": expected %s, got %s", name, want,
                   jsonutil_type_article(v));
}

int
jsonutil_get_string(json_object *o, const char *where, const char *key, bool required,
                    const char **out, struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_string))
        return wrong_type(where, key, "a string", v, err);
    const char *s = json_object_get_string(v);
    if (strlen(s) != (size_t)json_object_get_string_len(v)) {
        char name[JSONUTIL_FIELD_MAX];
        jsonutil_field_join(name, where, key);
        return err_set(err, EINVAL, "field \"%s\": contains a NUL character", name);
    }
    *out = s;
    return 1;
}

bool
jsonutil_int64_of(json_object *v, int64_t *out)
{
    if (json_object_is_type(v, json_type_int)) {
        errno = 0;
        int64_t x = json_object_get_int64(v);
        /* json-c clamps out-of-range numbers and reports it through errno. */
        if (errno == ERANGE || x == INT64_MAX || x == INT64_MIN)
            return false;
        *out = x;
        return true;
    }
    if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        /* 1e2 and 100.0 are the integer 100. Past 2^53 a double has no
         * fraction left to check (1e17 + 0.5 reads as 1e17), so a number
         * written with a fraction or an exponent must stay below it;
         * plain integers of any int64 size are json_type_int above. */
        if (!isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0)
            return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

int
jsonutil_get_int64(json_object *o, const char *where, const char *key, bool required, int64_t *out,
                   struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return wrong_type(where, key, "an integer", v, err);
    if (!jsonutil_int64_of(v, out)) {
        char name[JSONUTIL_FIELD_MAX];
        jsonutil_field_join(name, where, key);
        if (json_object_is_type(v, json_type_double) &&
            floor(json_object_get_double(v)) != json_object_get_double(v))
            return wrong_type(where, key, "an integer", v, err);
        return err_set(err, EINVAL, "field \"%s\": integer out of range", name);
    }
    return 1;
}

int
jsonutil_get_bool(json_object *o, const char *where, const char *key, bool required, bool *out,
                  struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_boolean))
        return wrong_type(where, key, "a boolean", v, err);
    *out = json_object_get_boolean(v);
    return 1;
}

int
jsonutil_get_object(json_object *o, const char *where, const char *key, bool required,
                    json_object **out, struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_object))
        return wrong_type(where, key, "an object", v, err);
    *out = v;
    return 1;
}

int
jsonutil_get_array(json_object *o, const char *where, const char *key, bool required,
                   json_object **out, struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_array))
        return wrong_type(where, key, "an array", v, err);
    *out = v;
    return 1;
}

int
jsonutil_strv(json_object *arr, const char *field, size_t max, char ***out, struct err *err)
{
    size_t n = json_object_array_length(arr);
    if (n > max)
        return err_set(err, EINVAL, "field \"%s\": more than %zu entries", field, max);
    char **v = calloc(n + 1, sizeof(char *));
    if (!v)
        return err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
        if (!s || strlen(s) != (size_t)json_object_get_string_len(e)) {
            strv_free(v);
            return err_set(err, EINVAL, "field \"%s[%zu]\": expected a string, got %s", field, i,
                           s ? "a string with a NUL character" : jsonutil_type_article(e));
        }
        if (!(v[i] = strdup(s))) {
            strv_free(v);
            return err_set(err, ENOMEM, "out of memory");
        }
    }
    *out = v;
    return 0;
}

char *
jsonutil_strdup(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return strdup(json_object_get_string(v));
}

int64_t
jsonutil_int64_or0(json_object *o, const char *key)
{
    json_object *v;
    int64_t x = 0;
    if (!json_object_object_get_ex(o, key, &v) || !jsonutil_int64_of(v, &x))
        return 0;
    return x;
}

json_object *
jsonutil_new_double3(double v)
{
    char text[64];
    snprintf(text, sizeof(text), "%.3f", v);
    return json_object_new_double_s(v, text);
}
