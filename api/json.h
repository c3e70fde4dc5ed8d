/*
 * Reading JSON request bodies: parse with a clear message on malformed
 * input, and typed field getters whose errors name the field
 * ("field \"limits.memory_bytes\": expected an integer, got a string").
 * Every error is EINVAL (400). Pure; loop thread in practice.
 */
#ifndef BERTH_API_JSON_H
#define BERTH_API_JSON_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/*
 * Parses text as one JSON object, in json-c's strict mode (no trailing
 * commas, no leading zeros), with nothing but whitespace after it. An
 * empty text gives an empty object when allow_empty. The caller owns
 * *out (json_object_put).
 */
int json_parse_object(const char *text, size_t len, bool allow_empty, json_object **out,
                      struct err *err);

/* Refuses fields of o not listed in allowed (NULL-terminated); where
 * prefixes field names in the message ("" at the top level). */
int json_check_fields(json_object *o, const char *where, const char *const *allowed,
                      struct err *err);

/* Each getter leaves *out alone when the field is absent (or null) and
 * not required, and returns 1 when it was present, 0 when absent. */
int json_get_string(json_object *o, const char *where, const char *key, bool required,
                    const char **out, struct err *err);
int json_get_int64(json_object *o, const char *where, const char *key, bool required, int64_t *out,
                   struct err *err);
int json_get_bool(json_object *o, const char *where, const char *key, bool required, bool *out,
                  struct err *err);
int json_get_object(json_object *o, const char *where, const char *key, bool required,
                    json_object **out, struct err *err);
int json_get_array(json_object *o, const char *where, const char *key, bool required,
                   json_object **out, struct err *err);

/* The JSON type's name as users know it ("a string", "an integer"...). */
const char *json_type_article(json_object *v);

/* A number printed with millisecond precision ("12.345") rather than
 * the 17 digits json-c gives doubles by default. */
json_object *json_new_double3(double v);

#endif
