/* JSON body parsing and typed getters: errors name the field. */
#include <check.h>
#include <string.h>

#include "jsonutil/jsonutil.h"

static json_object *
parse(const char *text)
{
    json_object *o = NULL;
    struct err err = {0};
    ck_assert_msg(jsonutil_parse_object(text, strlen(text), false, &o, &err) == 0, "%s", err.msg);
    return o;
}

START_TEST(json_parse_reports_malformed_input_with_offset)
{
    json_object *o = NULL;
    struct err err = {0};
    const char *text = "{\"a\": tru}";
    ck_assert_int_eq(jsonutil_parse_object(text, strlen(text), false, &o, &err), -EINVAL);
    ck_assert_ptr_null(o);
    ck_assert_msg(strstr(err.msg, "malformed JSON at byte") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(json_parse_reports_truncated_input)
{
    json_object *o = NULL;
    struct err err = {0};
    ck_assert_int_eq(jsonutil_parse_object("{\"a\": 1", 7, false, &o, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "unexpected end") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(json_parse_refuses_trailing_data_and_non_objects)
{
    json_object *o = NULL;
    struct err err = {0};
    ck_assert_int_eq(jsonutil_parse_object("{} {}", 5, false, &o, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "trailing") != NULL, "%s", err.msg);
    ck_assert_int_eq(jsonutil_parse_object("[1,2]", 5, false, &o, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "got an array") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(json_parse_empty_body_only_when_allowed)
{
    json_object *o = NULL;
    struct err err = {0};
    ck_assert_int_eq(jsonutil_parse_object("  \n", 3, false, &o, &err), -EINVAL);
    ck_assert_int_eq(jsonutil_parse_object("  \n", 3, true, &o, &err), 0);
    ck_assert(json_object_is_type(o, json_type_object));
    json_object_put(o);
}
END_TEST

START_TEST(json_getter_names_field_on_wrong_type)
{
    json_object *o = parse("{\"limits\": {\"memory_bytes\": \"lots\"}}");
    json_object *limits = NULL;
    struct err err = {0};
    ck_assert_int_eq(jsonutil_get_object(o, "", "limits", true, &limits, &err), 1);
    int64_t v = 7;
    ck_assert_int_eq(jsonutil_get_int64(limits, "limits", "memory_bytes", false, &v, &err),
                     -EINVAL);
    ck_assert_str_eq(err.msg, "field \"limits.memory_bytes\": expected an integer, got a string");
    ck_assert_int_eq(v, 7);
    json_object_put(o);
}
END_TEST

START_TEST(json_getter_absent_optional_leaves_value)
{
    json_object *o = parse("{\"a\": null}");
    struct err err = {0};
    const char *s = "default";
    ck_assert_int_eq(jsonutil_get_string(o, "", "a", false, &s, &err), 0);
    ck_assert_int_eq(jsonutil_get_string(o, "", "b", false, &s, &err), 0);
    ck_assert_str_eq(s, "default");
    ck_assert_int_eq(jsonutil_get_string(o, "", "b", true, &s, &err), -EINVAL);
    ck_assert_str_eq(err.msg, "field \"b\": required");
    json_object_put(o);
}
END_TEST

START_TEST(json_check_fields_refuses_unknown_field)
{
    json_object *o = parse("{\"name\": \"x\", \"nmae\": 1}");
    static const char *const allowed[] = {"name", NULL};
    struct err err = {0};
    ck_assert_int_eq(jsonutil_check_fields(o, "source", allowed, &err), -EINVAL);
    ck_assert_str_eq(err.msg, "field \"source.nmae\": unknown field");
    json_object_put(o);
}
END_TEST

START_TEST(json_int64_refuses_fractions_and_out_of_range)
{
    json_object *o = parse("{\"a\": 1.5, \"b\": 99999999999999999999999, \"c\": -3}");
    struct err err = {0};
    int64_t v = 0;
    ck_assert_int_eq(jsonutil_get_int64(o, "", "a", true, &v, &err), -EINVAL);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "b", true, &v, &err), -EINVAL);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "c", true, &v, &err), 1);
    ck_assert_int_eq(v, -3);
    json_object_put(o);
}
END_TEST

/* Each case: a body json-c's lenient parser takes, the byte where it goes
 * wrong, and what the message must name. */
START_TEST(json_parse_is_strict_naming_what_and_where)
{
    static const struct {
        const char *text;
        const char *why;
        const char *at;
    } cases[] = {
        {"{\"handle\":\"t1\",\"image\":\"busybox:1\",}", "trailing comma", "at byte 35"},
        {"{'handle':\"t1\"}", "single-quoted", "at byte 1"},
        {"{\"a\":1 /* c */}", "comment", "at byte 7"},
        {"{\"a\":1, // c\n\"b\":2}", "comment", "at byte 8"},
        {"{\"a\":1,\"b\":2,\"a\":3}", "duplicate key \"a\"", "at byte 13"},
        {"{\"a\":{\"x\":1,\"\\u0078\":2}}", "duplicate key \"x\"", "at byte 12"},
        {"{\"a\":NaN}", "NaN", "at byte 5"},
        {"{\"a\":Infinity}", "Infinity", "at byte 5"},
        {"{\"a\":-Infinity}", "Infinity", "at byte 5"},
        {"{\"a\":[1,2,]}", "trailing comma", "at byte 10"},
        {"{\"a\":1} x", "trailing data", "at byte 8"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *o = NULL;
        struct err err = {0};
        const char *t = cases[i].text;
        ck_assert_msg(jsonutil_parse_object(t, strlen(t), false, &o, &err) == -EINVAL,
                      "%s was accepted", t);
        ck_assert_ptr_null(o);
        ck_assert_msg(strstr(err.msg, "malformed JSON") && strstr(err.msg, cases[i].why) &&
                          strstr(err.msg, cases[i].at),
                      "%s: %s", t, err.msg);
    }
    /* Keys that only look alike are distinct. */
    json_object *o = parse("{\"a\":1,\"A\":2,\"a \":3,\"b\":{\"a\":4}}");
    json_object_put(o);
}
END_TEST

START_TEST(json_int64_takes_integral_exponents)
{
    json_object *o = parse("{\"a\": 1e2, \"b\": 2.5e1, \"c\": 100.0, \"d\": 1e300, \"e\": 1.5e0}");
    struct err err = {0};
    int64_t v = 0;
    ck_assert_int_eq(jsonutil_get_int64(o, "", "a", true, &v, &err), 1);
    ck_assert_int_eq(v, 100);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "b", true, &v, &err), 1);
    ck_assert_int_eq(v, 25);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "c", true, &v, &err), 1);
    ck_assert_int_eq(v, 100);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "d", true, &v, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "out of range"), "%s", err.msg);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "e", true, &v, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "expected an integer"), "%s", err.msg);
    json_object_put(o);
}
END_TEST

START_TEST(json_messages_carry_no_raw_bytes_of_keys)
{
    /* Found by fuzz_oci and fuzz_json: a key's own bytes reached messages. */
    json_object *o = NULL;
    struct err err = {0};
    const char dup[] = "{\"k\\u00e9\\n\": 1, \"k\\u00e9\\n\": 2}";
    ck_assert_int_eq(jsonutil_parse_object(dup, strlen(dup), false, &o, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "duplicate key \"k\\xc3\\xa9\\x0a\"") != NULL, "%s", err.msg);
    o = parse("{\"\\u00e9\\\"\": 1}");
    static const char *const none[] = {NULL};
    ck_assert_int_eq(jsonutil_check_fields(o, "body", none, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "field \"body.\\xc3\\xa9\\x22\": unknown field") != NULL, "%s",
                  err.msg);
    json_object_put(o);
}
END_TEST

START_TEST(json_int64_refuses_fractions_a_double_cannot_hold)
{
    /* Found by fuzz_json: -9223372036850368547.8675 read as an integer,
     * because a double that large has no fraction left. */
    json_object *o = parse("{\"a\": -9223372036850368547.8675, \"b\": 9007199254740993.5, "
                           "\"c\": 9007199254740992.0, \"d\": 9223372036854775000}");
    struct err err = {0};
    int64_t v = 0;
    ck_assert_int_eq(jsonutil_get_int64(o, "", "a", true, &v, &err), -EINVAL);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "b", true, &v, &err), -EINVAL);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "c", true, &v, &err), 1);
    ck_assert(v == 9007199254740992LL);
    ck_assert_int_eq(jsonutil_get_int64(o, "", "d", true, &v, &err), 1);
    ck_assert(v == 9223372036854775000LL);
    json_object_put(o);
}
END_TEST

START_TEST(json_double3_prints_three_decimals)
{
    json_object *d = jsonutil_new_double3(1.23456);
    ck_assert_str_eq(json_object_to_json_string(d), "1.235");
    json_object_put(d);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("jsonutil");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, json_parse_reports_malformed_input_with_offset);
    tcase_add_test(tc, json_parse_reports_truncated_input);
    tcase_add_test(tc, json_parse_refuses_trailing_data_and_non_objects);
    tcase_add_test(tc, json_parse_empty_body_only_when_allowed);
    tcase_add_test(tc, json_getter_names_field_on_wrong_type);
    tcase_add_test(tc, json_getter_absent_optional_leaves_value);
    tcase_add_test(tc, json_check_fields_refuses_unknown_field);
    tcase_add_test(tc, json_int64_refuses_fractions_and_out_of_range);
    tcase_add_test(tc, json_parse_is_strict_naming_what_and_where);
    tcase_add_test(tc, json_int64_takes_integral_exponents);
    tcase_add_test(tc, json_double3_prints_three_decimals);
    tcase_add_test(tc, json_messages_carry_no_raw_bytes_of_keys);
    tcase_add_test(tc, json_int64_refuses_fractions_a_double_cannot_hold);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
