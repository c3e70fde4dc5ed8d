/*
 * runtime/hcs/hcn_props: an existing network's properties as HNS answers
 * them (HcnQueryNetworkProperties), each missing or malformed field named,
 * and their match with the flags: a NAT network of the pool and gateway is
 * adopted, another subnet, gateway or type is refused naming both.
 */
#include "runtime/hcs/hcn_props.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What HNS answers for the network berth makes (doc_network.h), with its ID and more. */
#define NAT_PROPS                                                                                  \
    "{\"ID\":\"9a6e9f3c-0d3b-4c1e-8f0a-2b7d5e4c3a21\",\"Name\":\"hcnt\",\"Type\":\"NAT\","         \
    "\"Flags\":0,\"MacPool\":{\"Ranges\":[{\"StartMacAddress\":\"00-15-5D-52-C0-00\","             \
    "\"EndMacAddress\":\"00-15-5D-52-CF-FF\"}]},\"Ipams\":[{\"Type\":\"Static\",\"Subnets\":[{"    \
    "\"IpAddressPrefix\":\"10.77.0.0/24\",\"Routes\":[{\"NextHop\":\"10.77.0.1\","                 \
    "\"DestinationPrefix\":\"0.0.0.0/0\"}]}]}],\"SchemaVersion\":{\"Major\":2,\"Minor\":0}}"

static const struct hcn_network_doc want = {"hcnt", "10.77.0.0/24", "10.77.0.1", NULL, 0};

static int
parse(const char *text, struct hcn_network_props *p, struct err *err)
{
    return hcn_network_props_parse(text, strlen(text), p, err);
}

START_TEST(a_nat_network_of_the_pool_and_gateway_matches)
{
    struct hcn_network_props p;
    struct err err = {0};
    ck_assert_msg(parse(NAT_PROPS, &p, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(p.type, "NAT");
    ck_assert_str_eq(p.subnet, "10.77.0.0/24");
    ck_assert_str_eq(p.gateway, "10.77.0.1");
    ck_assert_msg(hcn_network_props_match(&p, &want, &err) == 0, "%s", err.msg);
    /* HNS writes the type "nat" too. */
    struct hcn_network_props lower = p;
    memcpy(lower.type, "nat", 4);
    ck_assert_msg(hcn_network_props_match(&lower, &want, &err) == 0, "%s", err.msg);
}
END_TEST

START_TEST(another_subnet_or_gateway_is_refused_naming_both)
{
    struct hcn_network_props p = {"NAT", "10.9.0.0/24", "10.9.0.1"};
    struct err err = {0};
    ck_assert_int_eq(hcn_network_props_match(&p, &want, &err), -EEXIST);
    ck_assert_int_eq(err.code, EEXIST);
    ck_assert_str_eq(err.msg, "hcn network hcnt has the subnet 10.9.0.0/24 and gateway 10.9.0.1, "
                              "not --network-pool 10.77.0.0/24 --network-gateway 10.77.0.1 (remove "
                              "it, or choose another --network-name, --network-pool or "
                              "--network-gateway)");
    /* The same subnet with another gateway, and the same base with another prefix. */
    struct hcn_network_props gw = {"NAT", "10.77.0.0/24", "10.77.0.254"};
    ck_assert_int_eq(hcn_network_props_match(&gw, &want, &err), -EEXIST);
    ck_assert_msg(strstr(err.msg, "gateway 10.77.0.254, not"), "%s", err.msg);
    struct hcn_network_props len = {"NAT", "10.77.0.0/16", "10.77.0.1"};
    ck_assert_int_eq(hcn_network_props_match(&len, &want, &err), -EEXIST);
    ck_assert_msg(strstr(err.msg, "subnet 10.77.0.0/16"), "%s", err.msg);
}
END_TEST

START_TEST(a_network_of_another_type_is_refused)
{
    const struct {
        const char *type, *msg;
    } other[] = {
        {"Transparent", "hcn network hcnt is a Transparent network, not NAT (remove it, or choose "
                        "another --network-name)"},
        {"ICS", "hcn network hcnt is an ICS network, not NAT"},
        {"L2Bridge", "hcn network hcnt is an L2Bridge network, not NAT"},
        {"NATx", "is a NATx network"},
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        struct hcn_network_props p = {"", "10.77.0.0/24", "10.77.0.1"};
        snprintf(p.type, sizeof(p.type), "%s", other[i].type);
        struct err err = {0};
        ck_assert_int_eq(hcn_network_props_match(&p, &want, &err), -EEXIST);
        ck_assert_msg(strstr(err.msg, other[i].msg), "%s: %s", other[i].type, err.msg);
    }
}
END_TEST

START_TEST(a_missing_or_malformed_field_is_eio_naming_it)
{
    const struct {
        const char *text, *why;
    } bad[] = {
        {"", "expected a JSON object, got nothing"},
        {"[]", "expected a JSON object, got an array"},
        {"{\"Type\":\"NAT\",", "malformed JSON"},
        {"{\"Type\":\"NAT\",\"Type\":\"NAT\"}", "duplicate key"},
        {"{\"Ipams\":[]}", "field \"Type\": required"},
        {"{\"Type\":7}", "field \"Type\": expected a string, got an integer"},
        {"{\"Type\":\"N A T\"}", "field \"Type\": not a network type"},
        {"{\"Type\":\"NATNATNATNATNATNATNATNATNATNATNAT\"}", "field \"Type\": not a network type"},
        {"{\"Type\":\"NAT\"}", "field \"Ipams\": required"},
        {"{\"Type\":\"NAT\",\"Ipams\":{}}", "field \"Ipams\": expected an array, got an object"},
        {"{\"Type\":\"NAT\",\"Ipams\":[]}", "field \"Ipams\": empty"},
        {"{\"Type\":\"NAT\",\"Ipams\":[1]}",
         "field \"Ipams[0]\": expected an object, got an integer"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{}]}", "field \"Ipams[0].Subnets\": required"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[]}]}", "field \"Ipams[0].Subnets\": empty"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[{}]}]}",
         "field \"Ipams[0].Subnets[0].IpAddressPrefix\": required"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[{\"IpAddressPrefix\":\"fd00::/64\"}]}]}",
         "field \"Ipams[0].Subnets[0].IpAddressPrefix\": not an IPv4 prefix"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[{\"IpAddressPrefix\":\"10.77.0.0/24\"}]}]}",
         "field \"Ipams[0].Subnets[0].Routes\": required"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[{\"IpAddressPrefix\":\"10.77.0.0/24\","
         "\"Routes\":[{\"DestinationPrefix\":\"0.0.0.0/0\"}]}]}]}",
         "field \"Ipams[0].Subnets[0].Routes[0].NextHop\": required"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[{\"IpAddressPrefix\":\"10.77.0.0/24\","
         "\"Routes\":[{\"NextHop\":\"10.77.0.1\\u0000x\"}]}]}]}",
         "field \"Ipams[0].Subnets[0].Routes[0].NextHop\": contains a NUL character"},
        {"{\"Type\":\"NAT\",\"Ipams\":[{\"Subnets\":[{\"IpAddressPrefix\":\"10.77.0.0/24\","
         "\"Routes\":[{\"NextHop\":\"10.77.0.1/24\"}]}]}]}",
         "field \"Ipams[0].Subnets[0].Routes[0].NextHop\": not an IPv4 address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct hcn_network_props p = {"untouched", "", ""};
        struct err err = {0};
        ck_assert_int_eq(parse(bad[i].text, &p, &err), -EIO);
        ck_assert_int_eq(err.code, EIO);
        ck_assert_msg(strncmp(err.msg, "hcn network properties: ", 24) == 0, "%zu: %s", i, err.msg);
        ck_assert_msg(strstr(err.msg, bad[i].why), "%zu: %s", i, err.msg);
        ck_assert_str_eq(p.type, "untouched");
    }
    struct err err = {0};
    struct hcn_network_props p;
    ck_assert_int_eq(hcn_network_props_parse(NULL, 0, &p, &err), -EIO);
    /* An answer past the bound is not parsed at all. */
    size_t big = HCN_PROPS_MAX + 1;
    char *text = malloc(big + 1);
    ck_assert_ptr_nonnull(text);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    text[big] = '\0';
    ck_assert_int_eq(hcn_network_props_parse(text, big, &p, &err), -EIO);
    ck_assert_msg(strstr(err.msg, "more than"), "%s", err.msg);
    free(text);
}
END_TEST

static Suite *
hcn_props_suite(void)
{
    Suite *s = suite_create("runtime_hcs_hcn_props");
    TCase *tc = tcase_create("hcn_props");
    tcase_add_test(tc, a_nat_network_of_the_pool_and_gateway_matches);
    tcase_add_test(tc, another_subnet_or_gateway_is_refused_naming_both);
    tcase_add_test(tc, a_network_of_another_type_is_refused);
    tcase_add_test(tc, a_missing_or_malformed_field_is_eio_naming_it);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(hcn_props_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
