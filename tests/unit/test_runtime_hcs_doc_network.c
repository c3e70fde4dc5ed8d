/*
 * runtime/hcs/doc_network: the HCN network, endpoint, namespace and query
 * documents against the golden files (tests/unit/golden/hcs/hcn_*.json),
 * and the refusal of every bad value, named in the message.
 */
#include "runtime/hcs/doc_network.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hcs_golden.h"

#define NET "9a6e9f3c-0d3b-4c1e-8f0a-2b7d5e4c3a21"
#define EP "4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"

START_TEST(nat_network_matches_golden)
{
    struct err err = {0};
    const char *dns[] = {"10.0.0.53", "8.8.8.8"};
    struct hcn_network_doc n = {"berth0", "10.88.0.0/16", "10.88.0.1", dns, 2};
    golden_check(hcn_doc_network(&n, &err), "hcn_network_nat.json");
    struct hcn_network_doc m = {"ci-nat", "192.168.100.0/24", "192.168.100.1", NULL, 0};
    golden_check(hcn_doc_network(&m, &err), "hcn_network_nat_minimal.json");
}
END_TEST

START_TEST(nat_network_refuses_bad_values_naming_them)
{
    const struct {
        struct hcn_network_doc n;
        const char *why;
    } bad[] = {
        {{"", "10.88.0.0/16", "10.88.0.1", NULL, 0}, "name  is not"},
        {{"a-name-far-too-long", "10.88.0.0/16", "10.88.0.1", NULL, 0}, "a-name-far-too-long"},
        {{"bad name", "10.88.0.0/16", "10.88.0.1", NULL, 0}, "bad name"},
        {{"n", "10.88.0.0", "10.88.0.1", NULL, 0}, "pool 10.88.0.0 is not"},
        {{"n", "10.88.0.0/31", "10.88.0.1", NULL, 0}, "prefix 8-30"},
        {{"n", "10.88.0.0/7", "10.88.0.1", NULL, 0}, "prefix 8-30"},
        {{"n", "10.88.0.0/016", "10.88.0.1", NULL, 0}, "10.88.0.0/016"},
        {{"n", "10.88.1.0/16", "10.88.0.1", NULL, 0}, "host bits set"},
        {{"n", "256.88.0.0/16", "10.88.0.1", NULL, 0}, "256.88.0.0/16"},
        {{"n", "010.88.0.0/16", "10.88.0.1", NULL, 0}, "010.88.0.0/16"},
        {{"n", "10.88.0.0/16", "10.89.0.1", NULL, 0}, "gateway 10.89.0.1"},
        {{"n", "10.88.0.0/16", "10.88.0.0", NULL, 0}, "gateway 10.88.0.0"},
        {{"n", "10.88.0.0/16", "10.88.255.255", NULL, 0}, "gateway 10.88.255.255"},
        {{"n", "10.88.0.0/16", "10.88.0.1.2", NULL, 0}, "gateway 10.88.0.1.2"},
        {{"n", "10.88.0.0/16", NULL, NULL, 0}, "gateway (null)"},
        {{"n", "10.88.0.0/16", "10.88.0.1", (const char *const[]){"8.8.8"}, 1}, "dns server 8.8.8"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        ck_assert_ptr_null(hcn_doc_network(&bad[i].n, &err));
        ck_assert_int_eq(err.code, EINVAL);
        ck_assert_msg(strstr(err.msg, bad[i].why), "%zu: %s", i, err.msg);
    }
}
END_TEST

START_TEST(endpoint_matches_golden)
{
    struct err err = {0};
    const char *dns[] = {"10.0.0.53"};
    struct hcn_port ports[] = {{"tcp", 8080, 80, NULL}, {"udp", 5353, 53, "127.0.0.1"}};
    struct hcn_endpoint_doc e = {
        .container = "build-42",
        .owner = "0a1b2c3d",
        .network_id = NET,
        .ip = "10.88.0.5",
        .prefix_len = 16,
        .gateway = "10.88.0.1",
        .dns = dns,
        .ndns = 1,
        .ports = ports,
        .nports = 2,
    };
    golden_check(hcn_doc_endpoint(&e, &err), "hcn_endpoint.json");
    /* No address: HNS allocates one from the network's static pool. */
    struct hcn_endpoint_doc m = {.container = "c1", .network_id = NET};
    golden_check(hcn_doc_endpoint(&m, &err), "hcn_endpoint_minimal.json");
}
END_TEST

START_TEST(endpoint_refuses_bad_values_naming_them)
{
    struct hcn_port twice[] = {{"tcp", 8080, 80, NULL}, {"tcp", 8080, 81, NULL}};
    struct hcn_port sctp[] = {{"sctp", 1, 1, NULL}};
    struct hcn_port zero[] = {{"tcp", 0, 80, NULL}};
    struct hcn_port vip[] = {{"tcp", 80, 80, "localhost"}};
    const struct {
        struct hcn_endpoint_doc e;
        const char *why;
    } bad[] = {
        {{.container = "", .network_id = NET}, "container handle  is not valid"},
        {{.container = "a/b", .network_id = NET}, "container handle a/b"},
        {{.container = "c", .network_id = "not-a-guid"}, "network id not-a-guid"},
        {{.container = "c", .network_id = NET, .ip = "10.88.0.300", .prefix_len = 16},
         "address 10.88.0.300/16"},
        {{.container = "c", .network_id = NET, .ip = "10.88.0.3", .prefix_len = 31},
         "address 10.88.0.3/31"},
        {{.container = "c", .network_id = NET, .gateway = "gw"}, "gateway gw"},
        {{.container = "c", .network_id = NET, .owner = "0A1B2C3D"}, "owner 0A1B2C3D"},
        {{.container = "c", .network_id = NET, .owner = "0a1b2c3"}, "owner 0a1b2c3 is not"},
        {{.container = "c", .network_id = NET, .ports = twice, .nports = 2},
         "host port tcp/8080 is forwarded twice"},
        {{.container = "c", .network_id = NET, .ports = sctp, .nports = 1}, "protocol sctp"},
        {{.container = "c", .network_id = NET, .ports = zero, .nports = 1}, "port 0 to 80"},
        {{.container = "c", .network_id = NET, .ports = vip, .nports = 1},
         "host address localhost"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err err = {0};
        ck_assert_ptr_null(hcn_doc_endpoint(&bad[i].e, &err));
        ck_assert_int_eq(err.code, EINVAL);
        ck_assert_msg(strstr(err.msg, bad[i].why), "%zu: %s", i, err.msg);
    }
}
END_TEST

START_TEST(an_endpoint_is_the_roots_only_by_its_tag_after_a_valid_handle)
{
    static const char *const yes[] = {"c-ep-0a1b2c3d", "build-42-ep-0a1b2c3d", "a-ep-ep-0a1b2c3d",
                                      "x.y_z-ep-0a1b2c3d"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        ck_assert_msg(hcn_endpoint_name_owned(yes[i], "0a1b2c3d"), "%s", yes[i]);
    static const char *const no[] = {"c-ep",
                                     "c-ep-1a1b2c3d",
                                     "-ep-0a1b2c3d",
                                     "c-ep-0a1b2c3dx",
                                     "c/d-ep-0a1b2c3d",
                                     "c-ep0a1b2c3d",
                                     "ep-0a1b2c3d",
                                     ""};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        ck_assert_msg(!hcn_endpoint_name_owned(no[i], "0a1b2c3d"), "%s", no[i]);
    ck_assert(!hcn_endpoint_name_owned(NULL, "0a1b2c3d"));
    ck_assert(!hcn_endpoint_name_owned("c-ep-", ""));
    ck_assert(!hcn_endpoint_name_owned("c-ep-0A1B2C3D", "0A1B2C3D"));
    char longname[200];
    memset(longname, 'h', 129);
    snprintf(longname + 129, sizeof(longname) - 129, "-ep-0a1b2c3d");
    ck_assert(!hcn_endpoint_name_owned(longname, "0a1b2c3d")); /* no handle is 129 long */
    ck_assert(hcn_endpoint_name_owned(longname + 1, "0a1b2c3d"));
}
END_TEST

START_TEST(the_endpoints_of_a_network_query_filters_by_virtual_network)
{
    struct err err = {0};
    json_object *q = hcn_doc_query_network_endpoints(NET, &err);
    ck_assert_ptr_nonnull(q);
    json_object *f =
        json_tokener_parse(json_object_get_string(json_object_object_get(q, "Filter")));
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(f, "VirtualNetwork")), NET);
    ck_assert_int_eq(json_object_object_length(f), 1);
    json_object_put(f);
    json_object_put(q);
    ck_assert_ptr_null(hcn_doc_query_network_endpoints("berth0", &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "network id berth0 is not a GUID"));
}
END_TEST

START_TEST(namespace_documents_match_golden)
{
    struct err err = {0};
    golden_check(hcn_doc_namespace(), "hcn_namespace.json");
    golden_check(hcn_doc_namespace_endpoint("Add", EP, &err), "hcn_namespace_add_endpoint.json");
    golden_check(hcn_doc_namespace_endpoint("Remove", EP, &err),
                 "hcn_namespace_remove_endpoint.json");
    ck_assert_ptr_null(hcn_doc_namespace_endpoint("Update", EP, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "request Update"));
    ck_assert_ptr_null(hcn_doc_namespace_endpoint("Add", "{" EP "}x", &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "endpoint id {"));
}
END_TEST

START_TEST(query_by_name_matches_golden)
{
    struct err err = {0};
    golden_check(hcn_doc_query_name("berth0", &err), "hcn_query_name.json");
    /* A name that could change the filter's JSON is refused before it is built. */
    ck_assert_ptr_null(hcn_doc_query_name("a\",\"b", &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(ipv4_parse_is_strict)
{
    uint32_t a = 0;
    ck_assert_int_eq(hcn_ipv4_parse("10.88.0.1", &a), 0);
    ck_assert_uint_eq(a, 0x0a580001u);
    ck_assert_int_eq(hcn_ipv4_parse("0.0.0.0", &a), 0);
    ck_assert_int_eq(hcn_ipv4_parse("255.255.255.255", &a), 0);
    const char *bad[] = {"",       "1.2.3",    "1.2.3.4.", "1.2.3.4.5", "01.2.3.4",  "1.2.3.256",
                         "1..3.4", " 1.2.3.4", "1.2.3.4 ", "1.2.3.-4",  "1.2.3.0x1", "1000.1.1.1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(hcn_ipv4_parse(bad[i], &a) == -EINVAL, "%s was taken", bad[i]);
}
END_TEST

static Suite *
doc_network_suite(void)
{
    Suite *s = suite_create("runtime_hcs_doc_network");
    TCase *tc = tcase_create("doc_network");
    tcase_add_test(tc, nat_network_matches_golden);
    tcase_add_test(tc, nat_network_refuses_bad_values_naming_them);
    tcase_add_test(tc, endpoint_matches_golden);
    tcase_add_test(tc, endpoint_refuses_bad_values_naming_them);
    tcase_add_test(tc, an_endpoint_is_the_roots_only_by_its_tag_after_a_valid_handle);
    tcase_add_test(tc, the_endpoints_of_a_network_query_filters_by_virtual_network);
    tcase_add_test(tc, namespace_documents_match_golden);
    tcase_add_test(tc, query_by_name_matches_golden);
    tcase_add_test(tc, ipv4_parse_is_strict);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(doc_network_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
