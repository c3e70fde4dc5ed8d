/*
 * Fuzzes the parsing step that every JSON request body of the API goes
 * through (api/json.c: json_parse_object, json_check_fields and the
 * typed getters) and api_parse_env (api/containers.c), the one body
 * parser that is not static. What each route makes of the parsed object
 * (api/bodies.h) is fuzz_bodies' part.
 *
 * Input: a request body, as the access handler buffers it. Checked:
 * - strict parsing: a body is accepted only when it is one JSON object,
 *   nothing but whitespace after it, and json-c's strict mode also takes
 *   it (no trailing commas, no leading zeros); a refusal is EINVAL with a
 *   "request body:" message, and leaves no object behind;
 * - an accepted object prints and parses back to the same text;
 * - for every field, at any depth: exactly the getter of its JSON type
 *   takes it (null counts as absent, required or not), every other one
 *   refuses it with a message naming the field; json_check_fields
 *   refuses an unknown field and takes the known ones;
 * - every array through api_parse_env: NULL-terminated copies of
 *   "NAME=value" strings, or a refusal naming the field.
 */
#include "fuzz/fuzz.h"

#include "api/request.h"
#include "jsonutil/jsonutil.h"

#define DEPTH_MAX 8

/* As the messages name it (jsonutil_field_join escapes raw bytes of keys). */
static void
field_name(char *buf, size_t len, const char *where, const char *key)
{
    char joined[JSONUTIL_FIELD_MAX];
    jsonutil_field_join(joined, where, key);
    snprintf(buf, len, "%s", joined);
}

/* A getter's refusal: EINVAL, and a message that starts with the field. */
static void
check_field_err(int r, const struct err *err, const char *field)
{
    FUZZ_CHECK(r == -EINVAL && err->code == EINVAL, "getter of %s returned %d", field, r);
    FUZZ_CHECK(strncmp(err->msg, "field \"", 7) == 0, "message does not name the field: %s",
               err->msg);
    char want[300];
    snprintf(want, sizeof(want), "field \"%s", field);
    FUZZ_CHECK(strncmp(err->msg, want, strnlen(want, 200)) == 0 || strlen(field) > 200,
               "message names another field: %s (want %s)", err->msg, field);
}

static void
check_env(json_object *arr, const char *field)
{
    char **env = NULL;
    struct err err = {0};
    int r = jsonutil_strv(arr, field, 4096, &env, &err);
    size_t n = json_object_array_length(arr);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && env == NULL, "jsonutil_strv: %d", r);
        FUZZ_CHECK(strncmp(err.msg, "field \"", 7) == 0, "env message: %s", err.msg);
        return;
    }
    FUZZ_CHECK(env && n <= 4096, "env of %zu entries accepted", n);
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        FUZZ_CHECK(env[i] && strcmp(env[i], json_object_get_string(v)) == 0,
                   "env[%zu] is not a copy", i);
        free(env[i]);
    }
    FUZZ_CHECK(env[n] == NULL, "env is not NULL-terminated");
    free(env);
}

static void walk(json_object *o, const char *where, int depth);

static void
check_key(json_object *o, const char *where, const char *key, json_object *val, int depth)
{
    char field[256];
    field_name(field, sizeof(field), where, key);
    json_type t = json_object_get_type(val);
    /* A key with a NUL byte in it is seen cut at the NUL. */
    json_object *found = NULL;
    if (!json_object_object_get_ex(o, key, &found) || found != val)
        return;

    struct err err = {0};
    const char *s = NULL;
    int64_t i64 = 0;
    bool b = false;
    json_object *sub = NULL;
    int r;

    if (t == json_type_null) {
        FUZZ_CHECK(jsonutil_get_string(o, where, key, false, &s, &err) == 0 && !s, "null string");
        FUZZ_CHECK(jsonutil_get_int64(o, where, key, false, &i64, &err) == 0, "null int");
        FUZZ_CHECK(jsonutil_get_bool(o, where, key, false, &b, &err) == 0, "null bool");
        FUZZ_CHECK(jsonutil_get_object(o, where, key, false, &sub, &err) == 0 && !sub,
                   "null object");
        FUZZ_CHECK(jsonutil_get_array(o, where, key, false, &sub, &err) == 0 && !sub, "null array");
        r = jsonutil_get_string(o, where, key, true, &s, &err);
        check_field_err(r, &err, field);
        FUZZ_CHECK(strstr(err.msg, "required"), "null required field: %s", err.msg);
        return;
    }

    r = jsonutil_get_string(o, where, key, false, &s, &err);
    if (t == json_type_string &&
        strlen(json_object_get_string(val)) == (size_t)json_object_get_string_len(val))
        FUZZ_CHECK(r == 1 && s == json_object_get_string(val), "string %s not taken", field);
    else if (t == json_type_string) /* a NUL inside: refused, naming the field */
        check_field_err(r, &err, field);
    else
        check_field_err(r, &err, field);

    memset(&err, 0, sizeof(err));
    r = jsonutil_get_int64(o, where, key, true, &i64, &err);
    if (t == json_type_int) {
        int64_t x = json_object_get_int64(val);
        if (r == 1)
            FUZZ_CHECK(i64 == x && x != INT64_MAX && x != INT64_MIN, "int %s", field);
        else
            check_field_err(r, &err, field);
    } else if (t == json_type_double && r == 1) {
        /* An integral number written with a fraction or an exponent (1e2)
         * is that integer, within range. */
        double x = json_object_get_double(val);
        FUZZ_CHECK(x == (double)i64 && x >= -9007199254740992.0 && x <= 9007199254740992.0,
                   "double %s taken as %lld", field, (long long)i64);
    } else {
        check_field_err(r, &err, field);
    }

    memset(&err, 0, sizeof(err));
    r = jsonutil_get_bool(o, where, key, false, &b, &err);
    if (t == json_type_boolean)
        FUZZ_CHECK(r == 1 && b == json_object_get_boolean(val), "bool %s", field);
    else
        check_field_err(r, &err, field);

    memset(&err, 0, sizeof(err));
    r = jsonutil_get_object(o, where, key, false, &sub, &err);
    if (t == json_type_object) {
        FUZZ_CHECK(r == 1 && sub == val, "object %s", field);
        if (depth < DEPTH_MAX)
            walk(val, field, depth + 1);
    } else {
        check_field_err(r, &err, field);
    }

    memset(&err, 0, sizeof(err));
    r = jsonutil_get_array(o, where, key, false, &sub, &err);
    if (t == json_type_array) {
        FUZZ_CHECK(r == 1 && sub == val, "array %s", field);
        check_env(val, field);
        size_t n = json_object_array_length(val);
        for (size_t i = 0; i < n && i < 64 && depth < DEPTH_MAX; i++) {
            json_object *e = json_object_array_get_idx(val, i);
            if (json_object_is_type(e, json_type_object)) {
                char elem[300];
                snprintf(elem, sizeof(elem), "%s[%zu]", field, i);
                walk(e, elem, depth + 1);
            }
        }
    } else {
        check_field_err(r, &err, field);
    }
}

static void
walk(json_object *o, const char *where, int depth)
{
    /* No field is known: the first one is refused by name. */
    static const char *const none[] = {NULL};
    struct err err = {0};
    int r = jsonutil_check_fields(o, where, none, &err);
    FUZZ_CHECK((r == 0) == (json_object_object_length(o) == 0), "check_fields with none: %d", r);
    if (r < 0)
        FUZZ_CHECK(r == -EINVAL && strstr(err.msg, "unknown field"), "check_fields: %s", err.msg);

    /* Every field known: taken. */
    size_t n = (size_t)json_object_object_length(o);
    const char **all = calloc(n + 1, sizeof(*all));
    FUZZ_CHECK(all, "out of memory");
    size_t k = 0;
    json_object_object_foreach(o, key, val)
    {
        (void)val;
        all[k++] = key;
    }
    memset(&err, 0, sizeof(err));
    FUZZ_CHECK(jsonutil_check_fields(o, where, all, &err) == 0, "known fields refused: %s",
               err.msg);
    free(all);

    json_object_object_foreach(o, key2, val2) check_key(o, where, key2, val2, depth);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > API_JSON_BODY_MAX)
        return 0;
    /* Exactly the body's bytes, not NUL-terminated. */
    char *text = malloc(size ? size : 1);
    FUZZ_CHECK(text, "out of memory");
    if (size)
        memcpy(text, data, size);

    json_object *o = NULL;
    struct err err = {0};
    int r = jsonutil_parse_object(text, size, true, &o, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err.code == EINVAL && o == NULL, "parse returned %d", r);
        FUZZ_CHECK(strncmp(err.msg, "malformed JSON", 14) == 0 ||
                       strncmp(err.msg, "expected a JSON object", 22) == 0,
                   "message: %s", err.msg);
        FUZZ_CHECK(fuzz_printable(err.msg), "message with raw bytes: %s", err.msg);
        free(text);
        return 0;
    }
    FUZZ_CHECK(o && json_object_is_type(o, json_type_object) && err.code == 0,
               "accepted something else than an object");

    size_t lead = 0;
    while (lead < size && text[lead] && strchr(" \t\r\n", text[lead]))
        lead++;
    if (lead < size) {
        /* Not an empty body: strict json-c takes it too, with nothing after. */
        json_tokener *tok = json_tokener_new();
        FUZZ_CHECK(tok, "out of memory");
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        json_object *s = json_tokener_parse_ex(tok, text, (int)size);
        enum json_tokener_error e = json_tokener_get_error(tok);
        json_tokener_free(tok);
        FUZZ_CHECK(s && e == json_tokener_success, "accepted, but strict json-c says: %s",
                   json_tokener_error_desc(e));
        json_object_put(s);
        /* And refused when empty bodies are not allowed only if empty. */
        json_object *o2 = NULL;
        FUZZ_CHECK(jsonutil_parse_object(text, size, false, &o2, &err) == 0, "allow_empty matters");
        json_object_put(o2);
    }

    /* It prints and parses back to the same text. */
    const char *printed = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    json_object *back = NULL;
    r = jsonutil_parse_object(printed, strlen(printed), false, &back, &err);
    FUZZ_CHECK(r == 0, "printed object does not parse: %s\n%s", err.msg, printed);
    FUZZ_CHECK(strcmp(json_object_to_json_string_ext(back, JSON_C_TO_STRING_PLAIN), printed) == 0,
               "printed object parses differently");
    json_object_put(back);

    walk(o, "", 0);
    json_object_put(o);
    free(text);
    return 0;
}
