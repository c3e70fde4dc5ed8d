/*
 * The network's pure parts: pools and gateways, resolv.conf, the /etc
 * files, the configuration lists berth generates or loads, the
 * configuration each plugin reads, and plugins' results and errors.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/net_conf.h"
#include "tests/unit/testutil.h"

START_TEST(net_cidr_parse_takes_ipv4_networks_only)
{
    struct net_cidr c;
    struct err err = {0};
    ck_assert_int_eq(net_cidr_parse("10.88.0.0/16", &c, &err), 0);
    char buf[NET_CIDR_STRLEN];
    net_cidr_format(&c, buf);
    ck_assert_str_eq(buf, "10.88.0.0/16");
    struct {
        const char *in, *msg;
    } bad[] = {
        {"10.88.0.1/16", "has host bits set (the network is 10.88.0.0/16)"},
        {"10.88.0.0/0", "prefix length must be a number from 1 to 30"},
        {"10.88.0.0/31", "prefix length must be a number from 1 to 30"},
        {"10.88.0.0/16x", "prefix length must be a number from 1 to 30"},
        {"10.88.0.0", "expected an IPv4 CIDR"},
        {"10.888.0.0/16", "expected an IPv4 CIDR"},
        {"fd00::/64", "expected an IPv4 CIDR"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        ck_assert_int_eq(net_cidr_parse(bad[i].in, &c, &err), -EINVAL);
        ck_assert_msg(strstr(err.msg, bad[i].msg) && strstr(err.msg, bad[i].in), "%s: %s",
                      bad[i].in, err.msg);
    }
}
END_TEST

START_TEST(net_gateway_must_be_a_host_address_of_the_pool)
{
    struct net_cidr pool;
    struct in_addr gw;
    struct err err = {0};
    ck_assert_int_eq(net_cidr_parse("10.1.2.0/24", &pool, &err), 0);
    struct in_addr first = net_cidr_first(&pool);
    ck_assert_int_eq(net_gateway_parse(&pool, "10.1.2.1", &gw, &err), 0);
    ck_assert_uint_eq(gw.s_addr, first.s_addr);
    ck_assert_int_eq(net_gateway_parse(&pool, "10.1.2.254", &gw, &err), 0);
    ck_assert_int_eq(net_gateway_parse(&pool, "10.1.3.1", &gw, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "not inside the pool 10.1.2.0/24"), "%s", err.msg);
    ck_assert_int_eq(net_gateway_parse(&pool, "10.1.2.0", &gw, &err), -EINVAL);
    ck_assert_int_eq(net_gateway_parse(&pool, "10.1.2.255", &gw, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "broadcast"), "%s", err.msg);
}
END_TEST

START_TEST(net_loopback_and_names)
{
    ck_assert(net_host_is_loopback("127.0.0.1"));
    ck_assert(net_host_is_loopback("127.9.9.9"));
    ck_assert(net_host_is_loopback("::1"));
    ck_assert(net_host_is_loopback("localhost"));
    ck_assert(!net_host_is_loopback("0.0.0.0"));
    ck_assert(!net_host_is_loopback("::"));
    ck_assert(!net_host_is_loopback("10.88.0.1"));
    ck_assert(net_name_valid("berth0"));
    ck_assert(net_name_valid("a.b_c-d"));
    ck_assert(!net_name_valid("1234567890123456"));
    ck_assert(!net_name_valid("br/0"));
    ck_assert(!net_name_valid(""));
    ck_assert(!net_name_valid(".x"));
}
END_TEST

START_TEST(net_dns_parse_skips_loopback_resolvers)
{
    const char *text = "# generated\n"
                       "nameserver 127.0.0.53\n"
                       "nameserver 10.0.0.2\n"
                       "  nameserver ::1\n"
                       "nameserver 2001:db8::1 # trailing\n"
                       "nameserver not-an-ip\n"
                       "search ci.example example\n"
                       "options edns0 trust-ad\n";
    struct net_dns d;
    struct err err = {0};
    ck_assert_int_eq(net_dns_parse(text, &d, &err), 0);
    ck_assert_str_eq(d.servers[0], "10.0.0.2");
    ck_assert_str_eq(d.servers[1], "2001:db8::1");
    ck_assert_ptr_null(d.servers[2]);
    ck_assert_str_eq(d.search, "ci.example example");
    ck_assert_str_eq(d.options, "edns0 trust-ad");
    char *r = net_resolv_render(&d, false);
    ck_assert_str_eq(r, "# written by berth\nnameserver 10.0.0.2\nnameserver 2001:db8::1\n"
                        "search ci.example example\noptions edns0 trust-ad\n");
    free(r);
    /* Without a network, no nameserver: lookups fail at once, not after a timeout. */
    r = net_resolv_render(&d, true);
    ck_assert_ptr_null(strstr(r, "nameserver"));
    free(r);
    net_dns_close(&d);
}
END_TEST

START_TEST(net_dns_load_prefers_the_flags_and_survives_a_missing_file)
{
    char *dir = tu_tmpdir("netconf");
    char path[512];
    snprintf(path, sizeof(path), "%s/resolv.conf", dir);
    const char *text = "nameserver 192.0.2.53\nsearch corp\n";
    tu_write(path, text, strlen(text));
    struct net_dns d;
    struct err err = {0};
    const char *servers[] = {"1.1.1.1", NULL};
    ck_assert_int_eq(net_dns_load(path, servers, &d, &err), 0);
    ck_assert_str_eq(d.servers[0], "1.1.1.1");
    ck_assert_ptr_null(d.servers[1]);
    ck_assert_str_eq(d.search, "corp");
    net_dns_close(&d);
    ck_assert_int_eq(net_dns_load(path, NULL, &d, &err), 0);
    ck_assert_str_eq(d.servers[0], "192.0.2.53");
    net_dns_close(&d);
    snprintf(path, sizeof(path), "%s/missing", dir);
    ck_assert_int_eq(net_dns_load(path, NULL, &d, &err), 0);
    ck_assert_ptr_null(d.servers[0]);
    net_dns_close(&d);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(net_hosts_name_the_container)
{
    char *h = net_hosts_render("build-42", "10.88.0.7");
    ck_assert_str_eq(h, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                        "10.88.0.7\tbuild-42\n");
    free(h);
    h = net_hosts_render("solo", NULL);
    ck_assert_ptr_nonnull(strstr(h, "127.0.1.1\tsolo\n"));
    free(h);
    char name[64];
    char long_handle[129];
    memset(long_handle, 'a', 128);
    long_handle[128] = '\0';
    net_hostname_of(long_handle, name);
    ck_assert_uint_eq(strlen(name), 63);
}
END_TEST

static const char *
plugin_type(struct json_object *list, size_t i)
{
    struct json_object *plugins = NULL, *t = NULL;
    json_object_object_get_ex(list, "plugins", &plugins);
    json_object_object_get_ex(json_object_array_get_idx(plugins, i), "type", &t);
    return json_object_get_string(t);
}

static const char *
path_str(struct json_object *o, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++) {
        if (json_object_is_type(o, json_type_array))
            o = json_object_array_get_idx(o, (size_t)atoi(keys[i]));
        else if (!json_object_object_get_ex(o, keys[i], &o))
            return NULL;
    }
    return json_object_get_string(o);
}

START_TEST(net_generated_list_is_bridge_and_portmap_only_when_ports)
{
    struct net_gen g = {.name = "ci0",
                        .pool = "10.9.0.0/24",
                        .gateway = "10.9.0.1",
                        .ipam_dir = "/var/lib/berth/network/ipam",
                        .portmap = true};
    struct json_object *list = net_conflist_generate(&g);
    struct err err = {0};
    ck_assert_int_eq(net_conflist_check(list, "generated", &err), 0);
    ck_assert_str_eq(plugin_type(list, 0), "bridge");
    ck_assert_str_eq(plugin_type(list, 1), "portmap");
    /* No firewall plugin: berth's own FORWARD rule for the pool does its work. */
    ck_assert_ptr_null(plugin_type(list, 2));
    ck_assert_str_eq(path_str(list, (const char *[]){"plugins", "0", "bridge", NULL}), "ci0");
    ck_assert_str_eq(path_str(list, (const char *[]){"plugins", "0", "ipMasq", NULL}), "false");
    ck_assert_str_eq(path_str(list, (const char *[]){"plugins", "0", "ipam", "type", NULL}),
                     "host-local");
    ck_assert_str_eq(path_str(list, (const char *[]){"plugins", "0", "ipam", "ranges", "0", "0",
                                                     "subnet", NULL}),
                     "10.9.0.0/24");
    ck_assert_str_eq(path_str(list, (const char *[]){"plugins", "0", "ipam", "dataDir", NULL}),
                     "/var/lib/berth/network/ipam");
    ck_assert(net_conflist_has_portmap(list));
    struct net_guard_info gi;
    net_conflist_guard_info(list, &gi);
    ck_assert_str_eq(gi.bridge, "ci0");
    ck_assert_uint_eq(gi.nsubnets, 1);
    json_object_put(list);
    g.portmap = false;
    list = net_conflist_generate(&g);
    ck_assert_str_eq(plugin_type(list, 0), "bridge");
    ck_assert_ptr_null(plugin_type(list, 1));
    ck_assert(!net_conflist_has_portmap(list));
    json_object_put(list);
}
END_TEST

START_TEST(net_plugin_conf_carries_name_prev_result_and_ports_where_asked)
{
    struct net_gen g = {.name = "ci0",
                        .pool = "10.9.0.0/24",
                        .gateway = "10.9.0.1",
                        .ipam_dir = "/x",
                        .portmap = true};
    struct json_object *list = net_conflist_generate(&g);
    struct json_object *prev = json_tokener_parse("{\"cniVersion\":\"1.0.0\",\"ips\":[]}");
    struct net_port ports[] = {{.host = 30080, .container = 80, .proto = NET_PROTO_TCP}};
    struct json_object *c0 = net_plugin_conf(list, 0, NULL, ports, 1);
    ck_assert_str_eq(path_str(c0, (const char *[]){"name", NULL}), "ci0");
    ck_assert_str_eq(path_str(c0, (const char *[]){"cniVersion", NULL}), NET_CNI_VERSION);
    ck_assert_ptr_null(path_str(c0, (const char *[]){"prevResult", NULL}));
    ck_assert_ptr_null(path_str(c0, (const char *[]){"runtimeConfig", NULL}));
    struct json_object *c1 = net_plugin_conf(list, 1, prev, ports, 1);
    ck_assert_str_eq(path_str(c1, (const char *[]){"prevResult", "cniVersion", NULL}), "1.0.0");
    ck_assert_str_eq(
        path_str(c1, (const char *[]){"runtimeConfig", "portMappings", "0", "hostPort", NULL}),
        "30080");
    ck_assert_str_eq(
        path_str(c1, (const char *[]){"runtimeConfig", "portMappings", "0", "protocol", NULL}),
        "tcp");
    json_object_put(c0);
    json_object_put(c1);
    json_object_put(prev);
    json_object_put(list);
}
END_TEST

START_TEST(net_conflist_check_names_the_wrong_field)
{
    struct {
        const char *json, *msg;
    } cases[] = {
        {"[]", "not a JSON object"},
        {"{\"name\":\"x\",\"plugins\":[{\"type\":\"bridge\"}]}", "\"cniVersion\" must be a string"},
        {"{\"cniVersion\":\"1.0.0\",\"plugins\":[{\"type\":\"bridge\"}]}", "\"name\" must be"},
        {"{\"cniVersion\":\"1.0.0\",\"name\":\"x\",\"plugins\":[]}", "\"plugins\" must be a"},
        {"{\"cniVersion\":\"1.0.0\",\"name\":\"x\",\"plugins\":[{\"type\":\"../../bin/sh\"}]}",
         "plugins[0].type ../../bin/sh: expected a plugin file name"},
        {"{\"cniVersion\":\"1.0.0\",\"name\":\"x\",\"plugins\":[{\"type\":\"bridge\"},3]}",
         "plugins[1] is not an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct json_object *o = json_tokener_parse(cases[i].json);
        struct err err = {0};
        ck_assert_int_eq(net_conflist_check(o, "f.conflist", &err), -ERR_INVALID_CONTENT);
        ck_assert_msg(strstr(err.msg, cases[i].msg) && strncmp(err.msg, "f.conflist: ", 12) == 0,
                      "%s: %s", cases[i].json, err.msg);
        json_object_put(o);
    }
}
END_TEST

START_TEST(net_conflist_load_dir_takes_the_first_file_and_wraps_a_conf)
{
    char *dir = tu_tmpdir("netconf");
    char path[512];
    struct err err = {0};
    ck_assert_ptr_null(net_conflist_load_dir(dir, NULL, &err));
    ck_assert_msg(strstr(err.msg, "no *.conflist, *.conf or *.json file"), "%s", err.msg);

    const char *conf = "{\"cniVersion\":\"0.4.0\",\"name\":\"single\",\"type\":\"bridge\","
                       "\"bridge\":\"op0\",\"ipam\":{\"type\":\"host-local\",\"subnet\":"
                       "\"172.30.0.0/24\"}}";
    snprintf(path, sizeof(path), "%s/20-single.conf", dir);
    tu_write(path, conf, strlen(conf));
    snprintf(path, sizeof(path), "%s/10-broken.conflist", dir);
    tu_write(path, "{nope", 5);
    char *from = NULL;
    ck_assert_ptr_null(net_conflist_load_dir(dir, &from, &err));
    ck_assert_msg(strstr(err.msg, "10-broken.conflist: not valid JSON"), "%s", err.msg);
    unlink(path);

    struct json_object *list = net_conflist_load_dir(dir, &from, &err);
    ck_assert_msg(list != NULL, "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(from, "20-single.conf"));
    ck_assert_str_eq(plugin_type(list, 0), "bridge");
    ck_assert_str_eq(path_str(list, (const char *[]){"name", NULL}), "single");
    ck_assert_str_eq(path_str(list, (const char *[]){"cniVersion", NULL}), "0.4.0");
    struct net_guard_info gi;
    net_conflist_guard_info(list, &gi);
    ck_assert_str_eq(gi.bridge, "op0");
    ck_assert_uint_eq(gi.nsubnets, 1);
    char s[NET_CIDR_STRLEN];
    net_cidr_format(&gi.subnets[0], s);
    ck_assert_str_eq(s, "172.30.0.0/24");
    json_object_put(list);
    free(from);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(net_conflist_guard_info_gives_each_subnet_its_gateway)
{
    /* A gateway named next to its subnet; none (host-local's default, the
     * first address); one outside its subnet, which host-local refuses
     * (not taken: the default is reported). */
    struct json_object *list = json_tokener_parse(
        "{\"plugins\":[{\"type\":\"bridge\",\"ipam\":{\"type\":\"host-local\","
        "\"subnet\":\"10.7.0.0/24\",\"gateway\":\"10.7.0.254\",\"ranges\":[[{\"subnet\":"
        "\"10.8.0.0/16\"},{\"subnet\":\"10.9.0.0/24\",\"gateway\":\"10.1.0.1\"}]]}}]}");
    ck_assert_ptr_nonnull(list);
    struct net_guard_info gi;
    net_conflist_guard_info(list, &gi);
    ck_assert_str_eq(gi.bridge, "cni0");
    ck_assert_uint_eq(gi.nsubnets, 3);
    const char *want[][2] = {
        {"10.7.0.0/24", "10.7.0.254"}, {"10.8.0.0/16", "10.8.0.1"}, {"10.9.0.0/24", "10.9.0.1"}};
    for (size_t i = 0; i < 3; i++) {
        char s[NET_CIDR_STRLEN], g[INET_ADDRSTRLEN];
        net_cidr_format(&gi.subnets[i], s);
        ck_assert_str_eq(s, want[i][0]);
        ck_assert_ptr_nonnull(inet_ntop(AF_INET, &gi.gateways[i], g, sizeof(g)));
        ck_assert_str_eq(g, want[i][1]);
    }
    json_object_put(list);
}
END_TEST

/* What the bridge plugin (1.1.1) prints for ADD. */
static const char bridge_result[] =
    "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"ci0\",\"mac\":\"aa:aa:aa:aa:aa:aa\"},"
    "{\"name\":\"veth1234abcd\",\"mac\":\"bb:bb:bb:bb:bb:bb\"},{\"name\":\"eth0\",\"mac\":"
    "\"cc:cc:cc:cc:cc:cc\",\"sandbox\":\"/run/x\"}],\"ips\":[{\"interface\":2,\"address\":"
    "\"10.9.0.2/24\",\"gateway\":\"10.9.0.1\"}],\"routes\":[{\"dst\":\"0.0.0.0/0\"}],\"dns\":{}}";

START_TEST(net_result_parse_finds_the_container_address)
{
    struct json_object *r = json_tokener_parse(bridge_result);
    struct net_result res;
    struct err err = {0};
    ck_assert_int_eq(net_result_parse(r, "ci0", &res, &err), 0);
    ck_assert_str_eq(res.ip, "10.9.0.2");
    ck_assert_uint_eq(res.prefix, 24);
    ck_assert_str_eq(res.gateway, "10.9.0.1");
    ck_assert_str_eq(res.mac, "cc:cc:cc:cc:cc:cc");
    ck_assert_str_eq(res.ifname, "eth0");
    ck_assert_str_eq(res.host_ifname, "veth1234abcd");
    json_object_put(r);
    r = json_tokener_parse("{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"fd00::2/64\"}]}");
    ck_assert_int_eq(net_result_parse(r, NULL, &res, &err), -ERR_INVALID_CONTENT);
    ck_assert_msg(strstr(err.msg, "no IPv4 address"), "%s", err.msg);
    json_object_put(r);
}
END_TEST

START_TEST(net_plugin_error_carries_the_plugins_own_message)
{
    struct err err = {0};
    net_plugin_error("bridge", "ADD",
                     "{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"failed to allocate for "
                     "range 0\",\"details\":\"no IP addresses available in range set\"}",
                     "", 1, 0, &err);
    ck_assert_int_eq(err.code, EIO);
    ck_assert_str_eq(err.msg, "cni plugin bridge ADD: failed to allocate for range 0: no IP "
                              "addresses available in range set (code 11)");
    net_plugin_error("firewall", "DEL", "", "some noise\nfatal: iptables: gone\n\n", 2, 0, &err);
    ck_assert_str_eq(err.msg,
                     "cni plugin firewall DEL: exited with status 2: fatal: iptables: gone");
    net_plugin_error("portmap", "ADD", NULL, NULL, 0, 9, &err);
    ck_assert_str_eq(err.msg, "cni plugin portmap ADD: killed by signal 9");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("net_conf");
    TCase *tc = tcase_create("net_conf");
    tcase_add_test(tc, net_cidr_parse_takes_ipv4_networks_only);
    tcase_add_test(tc, net_gateway_must_be_a_host_address_of_the_pool);
    tcase_add_test(tc, net_loopback_and_names);
    tcase_add_test(tc, net_conflist_guard_info_gives_each_subnet_its_gateway);
    tcase_add_test(tc, net_dns_parse_skips_loopback_resolvers);
    tcase_add_test(tc, net_dns_load_prefers_the_flags_and_survives_a_missing_file);
    tcase_add_test(tc, net_hosts_name_the_container);
    tcase_add_test(tc, net_generated_list_is_bridge_and_portmap_only_when_ports);
    tcase_add_test(tc, net_plugin_conf_carries_name_prev_result_and_ports_where_asked);
    tcase_add_test(tc, net_conflist_check_names_the_wrong_field);
    tcase_add_test(tc, net_conflist_load_dir_takes_the_first_file_and_wraps_a_conf);
    tcase_add_test(tc, net_result_parse_finds_the_container_address);
    tcase_add_test(tc, net_plugin_error_carries_the_plugins_own_message);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
