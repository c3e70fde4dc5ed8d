/*
 * One family of JSON helpers on top of json-c, shared by every layer that
 * reads JSON: the API's request bodies, the OCI image documents the store
 * parses, the records the daemon keeps on disk. (common/ stays libc-only,
 * so these live in a library of their own that store/, runtime/, daemon/
 * and api/ may link; the names avoid json-c's json_ prefix.)
 *
 * - Parsing is strict: RFC 8259 only. json-c's strict tokener refuses
 *   trailing commas and comments; on top of it, single-quoted strings,
 *   NaN and Infinity, duplicate keys and anything after the value are
 *   refused, with the byte offset of the offending token.
 * - Field access names the field in its errors ("limits.memory_bytes"),
 *   and an integer field takes any integral number (1e2 is 100).
 *
 * Pure; any thread.
 */
#ifndef BERTH_JSONUTIL_JSONUTIL_H
#define BERTH_JSONUTIL_JSONUTIL_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Longest dotted field path kept in messages ("mounts[3].target"). */
#define JSONUTIL_FIELD_MAX 256

/* Why a text is not JSON. */
struct jsonutil_syntax {
    bool truncated; /* the text ends in the middle of a value */
    size_t offset;  /* the byte where it went wrong, when not truncated */
    char why[160];  /* "unexpected character", "duplicate key \"a\""... */
};

/*
 * Parses text (len bytes) as exactly one JSON value, strictly. 0 with
 * *out owned by the caller (json_object_put); -EINVAL with *syn filled
 * (syn may be NULL); -ENOMEM.
 */
int jsonutil_parse(const char *text, size_t len, json_object **out, struct jsonutil_syntax *syn);

/*
 * As jsonutil_parse, requiring an object, with the errors as messages
 * ("malformed JSON at byte 12: duplicate key \"a\"", "malformed JSON:
 * unexpected end of input", "expected a JSON object, got an array"), all
 * EINVAL. An empty or blank text gives an empty object when allow_empty.
 */
int jsonutil_parse_object(const char *text, size_t len, bool allow_empty, json_object **out,
                          struct err *err);

/* How messages name a value's type: "a string", "an integer", "a
 * fractional number", "null"... */
const char *jsonutil_type_name(json_type t);
const char *jsonutil_type_article(json_object *v);

/* "prefix.key" (just "key" at the top level) and "prefix[i]". */
void jsonutil_field_join(char out[JSONUTIL_FIELD_MAX], const char *prefix, const char *key);
void jsonutil_field_index(char out[JSONUTIL_FIELD_MAX], const char *prefix, size_t i);

/* The member key of o, when present and not null. */
bool jsonutil_lookup(json_object *o, const char *key, json_object **v);

/*
 * Refuses members of o not listed in allowed (NULL-terminated), EINVAL
 * naming the field; where is the path of o ("" at the top level).
 */
int jsonutil_check_fields(json_object *o, const char *where, const char *const *allowed,
                          struct err *err);

/*
 * Typed getters. Each leaves *out alone when the member is absent or null
 * and not required, and returns 1 when it was present, 0 when absent, or
 * -EINVAL naming the field ("field \"limits.pids\": expected an integer,
 * got a string"). Borrowed pointers live as long as o.
 */
int jsonutil_get_string(json_object *o, const char *where, const char *key, bool required,
                        const char **out, struct err *err);
int jsonutil_get_int64(json_object *o, const char *where, const char *key, bool required,
                       int64_t *out, struct err *err);
int jsonutil_get_bool(json_object *o, const char *where, const char *key, bool required, bool *out,
                      struct err *err);
int jsonutil_get_object(json_object *o, const char *where, const char *key, bool required,
                        json_object **out, struct err *err);
int jsonutil_get_array(json_object *o, const char *where, const char *key, bool required,
                       json_object **out, struct err *err);

/*
 * The integer value of v: an int, or a finite double with no fraction
 * within int64 (1e2, 100.0). false for anything else.
 */
bool jsonutil_int64_of(json_object *v, int64_t *out);

/*
 * An array of strings as a new NULL-terminated vector (caller frees with
 * strv_free): each entry a string without NUL bytes, at most max entries.
 * EINVAL naming field[i].
 */
int jsonutil_strv(json_object *arr, const char *field, size_t max, char ***out, struct err *err);

/* A new string member value, or NULL when absent, not a string, or on OOM. */
char *jsonutil_strdup(json_object *o, const char *key);
/* An integer member value, or 0 when absent or not an integer. */
int64_t jsonutil_int64_or0(json_object *o, const char *key);

/* A number printed with millisecond precision ("12.345") rather than
 * json-c's 17 significant digits. */
json_object *jsonutil_new_double3(double v);

#endif
