/* JSON body parsing and typed field access with field-naming errors. */
#include "api/json.h"

#include <stdio.h>
#include <string.h>

const char *
json_type_article(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_null:
        return "null";
    case json_type_boolean:
        return "a boolean";
    case json_type_double:
        return "a number with a fraction";
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

int
json_parse_object(const char *text, size_t len, bool allow_empty, json_object **out,
                  struct err *err)
{
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t'))
        i++;
    if (i == len) {
        if (!allow_empty)
            return err_set(err, EINVAL, "request body: expected a JSON object, got nothing");
        *out = json_object_new_object();
        return 0;
    }
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return err_set(err, ENOMEM, "request body: out of memory");
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t offset = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (jerr == json_tokener_continue) {
        json_object_put(obj);
        return err_set(err, EINVAL, "request body: malformed JSON: unexpected end of input");
    }
    if (!obj && jerr != json_tokener_success)
        return err_set(err, EINVAL, "request body: malformed JSON at byte %zu: %s", offset,
                       json_tokener_error_desc(jerr));
    /* Anything but whitespace after the value is an error too. */
    for (size_t k = offset; k < len; k++) {
        if (text[k] != ' ' && text[k] != '\n' && text[k] != '\r' && text[k] != '\t') {
            json_object_put(obj);
            return err_set(err, EINVAL,
                           "request body: malformed JSON at byte %zu: trailing data after the "
                           "object",
                           k);
        }
    }
    /* json-c's default mode takes trailing commas and leading zeros; its
     * strict mode refuses them (and would call trailing data merely an
     * unexpected character, hence the first pass above). */
    tok = json_tokener_new();
    if (!tok) {
        json_object_put(obj);
        return err_set(err, ENOMEM, "request body: out of memory");
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *strict = json_tokener_parse_ex(tok, text, (int)offset);
    jerr = json_tokener_get_error(tok);
    size_t strict_end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    json_object_put(strict);
    if (jerr != json_tokener_success) {
        json_object_put(obj);
        return err_set(err, EINVAL, "request body: malformed JSON at byte %zu: %s", strict_end,
                       jerr == json_tokener_continue ? "unexpected end of input"
                                                     : json_tokener_error_desc(jerr));
    }
    if (!json_object_is_type(obj, json_type_object)) {
        int rc = err_set(err, EINVAL, "request body: expected a JSON object, got %s",
                         json_type_article(obj));
        json_object_put(obj);
        return rc;
    }
    *out = obj;
    return 0;
}

static void
field_name(char *buf, size_t len, const char *where, const char *key)
{
    if (where && *where)
        snprintf(buf, len, "%s.%s", where, key);
    else
        snprintf(buf, len, "%s", key);
}

int
json_check_fields(json_object *o, const char *where, const char *const *allowed, struct err *err)
{
    json_object_object_foreach(o, key, val)
    {
        (void)val;
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                ok = true;
        if (!ok) {
            char name[256];
            field_name(name, sizeof(name), where, key);
            return err_set(err, EINVAL, "field \"%s\": unknown field", name);
        }
    }
    return 0;
}

/* Looks key up; 0 absent (error if required), 1 present. */
static int
lookup(json_object *o, const char *where, const char *key, bool required, json_object **v,
       struct err *err)
{
    if (!json_object_object_get_ex(o, key, v) || json_object_is_type(*v, json_type_null)) {
        if (required) {
            char name[256];
            field_name(name, sizeof(name), where, key);
            return err_set(err, EINVAL, "field \"%s\": required", name);
        }
        return 0;
    }
    return 1;
}

static int
wrong_type(const char *where, const char *key, const char *want, json_object *v, struct err *err)
{
    char name[256];
    field_name(name, sizeof(name), where, key);
    return err_set(err, EINVAL, "field \"%s\": expected %s, got %s", name, want,
                   json_type_article(v));
}

int
json_get_string(json_object *o, const char *where, const char *key, bool required, const char **out,
                struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_string))
        return wrong_type(where, key, "a string", v, err);
    *out = json_object_get_string(v);
    return 1;
}

int
json_get_int64(json_object *o, const char *where, const char *key, bool required, int64_t *out,
               struct err *err)
{
    json_object *v;
    int r = lookup(o, where, key, required, &v, err);
    if (r <= 0)
        return r;
    if (!json_object_is_type(v, json_type_int))
        return wrong_type(where, key, "an integer", v, err);
    errno = 0;
    int64_t x = json_object_get_int64(v);
    /* json-c clamps out-of-range numbers and reports it through errno. */
    if (errno == ERANGE || x == INT64_MAX || x == INT64_MIN) {
        char name[256];
        field_name(name, sizeof(name), where, key);
        return err_set(err, EINVAL, "field \"%s\": integer out of range", name);
    }
    *out = x;
    return 1;
}

int
json_get_bool(json_object *o, const char *where, const char *key, bool required, bool *out,
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
json_get_object(json_object *o, const char *where, const char *key, bool required,
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
json_get_array(json_object *o, const char *where, const char *key, bool required, json_object **out,
               struct err *err)
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

json_object *
json_new_double3(double v)
{
    char text[64];
    snprintf(text, sizeof(text), "%.3f", v);
    return json_object_new_double_s(v, text);
}
