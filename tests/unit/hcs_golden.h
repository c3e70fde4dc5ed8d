/*
 * Golden JSON files for the hcs document suites: tests/unit/golden/hcs/
 * holds each document as HCS should receive it, written by hand from the
 * schema facts in ../shared/research/windows-hcs.md. A built document
 * matches when it is the same JSON value (objects compared by key, arrays
 * in order, numbers and booleans by type and value), and its compact
 * string form (what computecore gets) parses back to the same value.
 *
 * Header-only so that the suites link nothing else, on Linux and in the
 * Windows build under Wine (BERTH_SOURCE_DIR is a Linux path there too,
 * which Wine resolves on its Z: drive).
 */
#ifndef BERTH_TESTS_HCS_GOLDEN_H
#define BERTH_TESTS_HCS_GOLDEN_H

#include <check.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hcs/doc_system.h"

static json_object *
golden_load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/unit/golden/hcs/%s", BERTH_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "golden file %s cannot be opened", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    json_object *o = json_tokener_parse(buf);
    ck_assert_msg(o, "golden file %s is not JSON", path);
    return o;
}

/* Checks doc against golden file name; takes ownership of doc. */
static void
golden_check(json_object *doc, const char *name)
{
    ck_assert_msg(doc, "%s: no document was built", name);
    json_object *want = golden_load(name);
    char *text = hcs_doc_string(doc);
    ck_assert_ptr_nonnull(text);
    json_object *back = json_tokener_parse(text);
    if (!json_object_equal(doc, want)) {
        fprintf(stderr, "%s: built\n%s\nwant\n%s\n", name,
                json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                        JSON_C_TO_STRING_NOSLASHESCAPE),
                json_object_to_json_string_ext(want, JSON_C_TO_STRING_PRETTY |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
        ck_abort_msg("%s: the built document differs from the golden file", name);
    }
    ck_assert_msg(back && json_object_equal(back, want), "%s: the string form does not parse back",
                  name);
    ck_assert_msg(!strstr(text, "\\/"), "%s: slashes are escaped: %s", name, text);
    json_object_put(back);
    json_object_put(want);
    json_object_put(doc);
    free(text);
}

#endif
