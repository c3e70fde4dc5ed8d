/* Flag and environment parsing: defaults, overrides, one-line errors. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"

static int
parse(struct config *cfg, struct err *err, int argc, char **argv)
{
    return config_parse(cfg, argc, argv, err);
}

static void
clear_env(void)
{
    unsetenv("BERTH_LISTEN");
    unsetenv("BERTH_LAYER_FORMAT");
    unsetenv("BERTH_ROOT");
    unsetenv("BERTH_RUNTIME");
    unsetenv("BERTH_LOG_LEVEL");
    unsetenv("BERTH_LOG_FORMAT");
    unsetenv("BERTH_STORE_MAX_BYTES");
    unsetenv("BERTH_MAX_OUTPUT_BYTES");
    unsetenv("BERTH_POOL_NICE");
    unsetenv("BERTH_NETWORK");
    unsetenv("BERTH_NETWORK_NAME");
    unsetenv("BERTH_NETWORK_POOL");
    unsetenv("BERTH_NETWORK_GATEWAY");
    unsetenv("BERTH_DNS");
    unsetenv("BERTH_CNI_CONFIG");
    unsetenv("BERTH_ISOLATION");
    unsetenv("BERTH_HYPERV_CPUS");
    unsetenv("BERTH_HYPERV_MEMORY_MB");
    unsetenv("BERTH_REGISTRY_AUTH");
    unsetenv("BERTH_REGISTRY_CA");
    unsetenv("BERTH_INSECURE_REGISTRY");
    unsetenv("BERTH_REGISTRY_MIRROR");
    unsetenv("BERTH_PULL_PARALLEL");
}

START_TEST(config_defaults)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv), CONFIG_RUN);
    ck_assert_str_eq(cfg.listen_host, "127.0.0.1");
    ck_assert_uint_eq(cfg.listen_port, 7380);
    ck_assert_str_eq(cfg.runtime, "oci");
    ck_assert_int_eq(cfg.log_level, LOG_INFO);
    ck_assert_int_eq(cfg.store_max_bytes, -1);
    ck_assert_int_eq(cfg.max_output_bytes, 1LL << 30);
    ck_assert_uint_eq(cfg.pool_nice, 10);
    ck_assert_ptr_nonnull(cfg.root);
    if (geteuid() == 0)
        ck_assert_str_eq(cfg.root, "/var/lib/berth");
    config_close(&cfg);
}
END_TEST

START_TEST(config_flags_override_environment)
{
    clear_env();
    setenv("BERTH_LISTEN", "127.0.0.1:9000", 1);
    setenv("BERTH_LOG_FORMAT", "json", 1);
    setenv("BERTH_POOL_NICE", "5", 1);
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", "--listen", "127.0.0.2:0", "--root=/srv/b", "--pool-nice", "0", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 6, argv), CONFIG_RUN);
    ck_assert_uint_eq(cfg.pool_nice, 0);
    ck_assert_str_eq(cfg.listen_host, "127.0.0.2");
    ck_assert_uint_eq(cfg.listen_port, 0);
    ck_assert_str_eq(cfg.root, "/srv/b");
    ck_assert_int_eq(cfg.log_format, LOG_FORMAT_JSON);
    config_close(&cfg);
    clear_env();
}
END_TEST

START_TEST(config_parses_ipv6_listen)
{
    char *host = NULL;
    unsigned port = 0;
    struct err err = {0};
    ck_assert_int_eq(config_parse_listen("[::1]:8080", &host, &port, &err), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_uint_eq(port, 8080);
    free(host);
}
END_TEST

START_TEST(config_bad_values_give_one_line_errors)
{
    clear_env();
    struct {
        char *flag, *value, *expect;
    } cases[] = {
        {"--listen", "nope", "--listen nope: expected HOST:PORT"},
        {"--listen", "127.0.0.1:70000", "port must be a number from 0 to 65535"},
        {"--log-level", "loud", "--log-level loud: expected debug, info, warn or error"},
        {"--log-format", "xml", "--log-format xml: expected text or json"},
        {"--runtime", "crun", "--runtime crun: expected oci, host or hcs"},
        {"--root", "relative/dir", "must be an absolute path"},
        {"--pool-threads", "1", "expected a whole number from 2 to 1024"},
        {"--pool-nice", "20", "expected a whole number from 0 to 19"},
        {"--pool-nice", "-1", "--pool-nice -1"},
        {"--store-max-bytes", "10Q", "expected a byte count"},
        {"--max-output-bytes", "-5", "--max-output-bytes -5: expected a byte count"},
        {"--max-output-bytes", "1X", "expected a byte count"},
        {"--network", "host", "--network host: expected bridge or none"},
        {"--network-name", "a-name-too-long-x",
         "--network-name a-name-too-long-x: expected 1 to 15"},
        {"--network-name", "-dash", "--network-name -dash: expected 1 to 15"},
        {"--network-pool", "10.88.0.1/16",
         "--network-pool 10.88.0.1/16: has host bits set (the "
         "network is 10.88.0.0/16)"},
        {"--network-pool", "10.88.0.0/31", "the prefix length must be a number from 1 to 30"},
        {"--network-pool", "fd00::/64", "--network-pool fd00::/64: expected an IPv4 CIDR"},
        {"--network-gateway", "10.89.0.1",
         "--network-gateway 10.89.0.1: not inside the pool "
         "10.88.0.0/16"},
        {"--network-gateway", "10.88.255.255", "the network or broadcast address"},
        {"--network-gateway", "gw", "--network-gateway gw: expected an IPv4 address"},
        {"--dns", "resolver", "--dns resolver: expected an IPv4 or IPv6 address"},
        {"--cni-config", "net.d", "--cni-config net.d: must be an absolute path"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config cfg;
        struct err err = {0};
        char *argv[] = {"berthd", cases[i].flag, cases[i].value, NULL};
        ck_assert_int_lt(parse(&cfg, &err, 3, argv), 0);
        ck_assert_msg(strstr(err.msg, cases[i].expect) != NULL, "%s: got \"%s\"", cases[i].flag,
                      err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        config_close(&cfg);
    }
}
END_TEST

START_TEST(config_network_defaults)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv), CONFIG_RUN);
    ck_assert(!cfg.network_disabled);
    ck_assert_str_eq(cfg.network_name, "berth0");
    ck_assert_str_eq(cfg.network_pool, "10.88.0.0/16");
    ck_assert_ptr_null(cfg.network_gateway);
    ck_assert_ptr_null(cfg.dns);
    ck_assert_ptr_null(cfg.cni_config);
    config_close(&cfg);
}
END_TEST

START_TEST(config_network_flags_are_parsed)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd",         "--network-name", "ci0",
                    "--network-pool", "10.1.2.0/24",    "--network-gateway",
                    "10.1.2.254",     "--dns",          "1.1.1.1",
                    "--dns",          "2001:db8::53",   NULL};
    ck_assert_int_eq(parse(&cfg, &err, 11, argv), CONFIG_RUN);
    ck_assert_str_eq(cfg.network_name, "ci0");
    ck_assert_str_eq(cfg.network_pool, "10.1.2.0/24");
    ck_assert_str_eq(cfg.network_gateway, "10.1.2.254");
    ck_assert_str_eq(cfg.dns[0], "1.1.1.1");
    ck_assert_str_eq(cfg.dns[1], "2001:db8::53");
    ck_assert_ptr_null(cfg.dns[2]);
    config_close(&cfg);

    char *argv2[] = {"berthd", "--network", "none", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 3, argv2), CONFIG_RUN);
    ck_assert(cfg.network_disabled);
    config_close(&cfg);

    char *argv3[] = {"berthd", "--cni-config", "/etc/cni/net.d", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 3, argv3), CONFIG_RUN);
    ck_assert_str_eq(cfg.cni_config, "/etc/cni/net.d");
    config_close(&cfg);
}
END_TEST

START_TEST(config_dns_flags_replace_the_environment_list)
{
    clear_env();
    setenv("BERTH_DNS", "9.9.9.9, 149.112.112.112", 1);
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv), CONFIG_RUN);
    ck_assert_str_eq(cfg.dns[0], "9.9.9.9");
    ck_assert_str_eq(cfg.dns[1], "149.112.112.112");
    ck_assert_ptr_null(cfg.dns[2]);
    config_close(&cfg);
    char *argv2[] = {"berthd", "--dns", "1.0.0.1", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 3, argv2), CONFIG_RUN);
    ck_assert_str_eq(cfg.dns[0], "1.0.0.1");
    ck_assert_ptr_null(cfg.dns[1]);
    config_close(&cfg);
    setenv("BERTH_DNS", "1.1.1.1,bad", 1);
    ck_assert_int_lt(parse(&cfg, &err, 1, argv), 0);
    ck_assert_msg(strstr(err.msg, "BERTH_DNS: --dns bad: expected an IPv4 or IPv6 address"), "%s",
                  err.msg);
    config_close(&cfg);
    clear_env();
}
END_TEST

START_TEST(config_cni_config_excludes_the_generated_network_flags)
{
    clear_env();
    const char *cases[][3] = {
        {"--network-pool", "10.1.0.0/16", "--network-pool: not with --cni-config /etc/cni"},
        {"--network-name", "x0", "--network-name: not with --cni-config /etc/cni"},
        {"--network-gateway", "10.88.0.9", "--network-gateway: not with --cni-config /etc/cni"},
        {"--network", "none", "--cni-config /etc/cni: networking is off (--network none)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config cfg;
        struct err err = {0};
        char *argv[] = {
            "berthd", "--cni-config", "/etc/cni", (char *)cases[i][0], (char *)cases[i][1], NULL};
        ck_assert_int_lt(parse(&cfg, &err, 5, argv), 0);
        ck_assert_msg(strstr(err.msg, cases[i][2]) != NULL, "%s: got \"%s\"", cases[i][0], err.msg);
        config_close(&cfg);
    }
}
END_TEST

START_TEST(config_unknown_flag_and_stray_argument)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", "--frobnicate", NULL};
    ck_assert_int_lt(parse(&cfg, &err, 2, argv), 0);
    ck_assert_msg(strstr(err.msg, "unknown flag --frobnicate") != NULL, "%s", err.msg);
    config_close(&cfg);
    char *argv2[] = {"berthd", "serve", NULL};
    ck_assert_int_lt(parse(&cfg, &err, 2, argv2), 0);
    ck_assert_msg(strstr(err.msg, "unexpected argument serve") != NULL, "%s", err.msg);
    config_close(&cfg);
    char *argv3[] = {"berthd", "--listen", NULL};
    ck_assert_int_lt(parse(&cfg, &err, 2, argv3), 0);
    ck_assert_msg(strstr(err.msg, "needs a value") != NULL, "%s", err.msg);
    config_close(&cfg);
}
END_TEST

START_TEST(config_bad_environment_names_the_variable)
{
    clear_env();
    setenv("BERTH_LOG_LEVEL", "chatty", 1);
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_lt(parse(&cfg, &err, 1, argv), 0);
    ck_assert_msg(strncmp(err.msg, "BERTH_LOG_LEVEL: ", 17) == 0, "%s", err.msg);
    config_close(&cfg);
    clear_env();
}
END_TEST

START_TEST(config_max_output_bytes_from_flag_and_environment)
{
    clear_env();
    setenv("BERTH_MAX_OUTPUT_BYTES", "64K", 1);
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv), CONFIG_RUN);
    ck_assert_int_eq(cfg.max_output_bytes, 64 << 10);
    config_close(&cfg);
    char *argv2[] = {"berthd", "--max-output-bytes", "2M", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 3, argv2), CONFIG_RUN);
    ck_assert_int_eq(cfg.max_output_bytes, 2 << 20);
    config_close(&cfg);
    char *argv3[] = {"berthd", "--max-output-bytes=0", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 2, argv3), CONFIG_RUN);
    ck_assert_int_eq(cfg.max_output_bytes, 0);
    config_close(&cfg);
    clear_env();
}
END_TEST

START_TEST(config_hcs_flags_are_parsed_for_runtime_hcs)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv), CONFIG_RUN);
    ck_assert_ptr_null(cfg.isolation);
    ck_assert_uint_eq(cfg.hyperv_cpus, 2);
    ck_assert_uint_eq(cfg.hyperv_memory_mb, 1024);
    config_close(&cfg);
    setenv("BERTH_HYPERV_CPUS", "4", 1);
    char *argv2[] = {"berthd", "--runtime",          "hcs",  "--isolation",
                     "hyperv", "--hyperv-memory-mb", "2048", NULL};
    ck_assert_msg(parse(&cfg, &err, 7, argv2) == CONFIG_RUN, "%s", err.msg);
    ck_assert_str_eq(cfg.isolation, "hyperv");
    ck_assert_uint_eq(cfg.hyperv_cpus, 4);
    ck_assert_uint_eq(cfg.hyperv_memory_mb, 2048);
    config_close(&cfg);
    clear_env();
}
END_TEST

START_TEST(config_hcs_flags_are_refused_with_another_runtime)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", "--isolation", "hyperv", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 3, argv), -EINVAL);
    ck_assert_str_eq(err.msg, "--isolation: only for --runtime hcs (Windows containers); this "
                              "daemon runs --runtime oci");
    config_close(&cfg);
    setenv("BERTH_HYPERV_MEMORY_MB", "512", 1);
    char *argv2[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv2), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--hyperv-memory-mb: only for --runtime hcs"));
    config_close(&cfg);
    clear_env();
    /* Bad values are refused whatever the runtime, naming the value. */
    char *bad[][5] = {{"berthd", "--runtime", "hcs", "--isolation", "vm"},
                      {"berthd", "--runtime", "hcs", "--hyperv-cpus", "0"},
                      {"berthd", "--runtime", "hcs", "--hyperv-memory-mb", "128"},
                      {"berthd", "--runtime", "hcs", "--hyperv-cpus", "two"}};
    const char *want[] = {"--isolation vm: expected process or hyperv",
                          "--hyperv-cpus 0: expected a whole number from 1 to 1024",
                          "--hyperv-memory-mb 128: expected a whole number from 256 to 1048576",
                          "--hyperv-cpus two: expected a whole number from 1 to 1024"};
    for (size_t i = 0; i < 4; i++) {
        char *a[] = {bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], NULL};
        ck_assert_int_eq(parse(&cfg, &err, 5, a), -EINVAL);
        ck_assert_str_eq(err.msg, want[i]);
        config_close(&cfg);
    }
}
END_TEST

START_TEST(config_layer_format_is_parsed_for_runtime_hcs_and_refused_elsewhere)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", "--runtime", "hcs", NULL};
    ck_assert_msg(parse(&cfg, &err, 3, argv) == CONFIG_RUN, "%s", err.msg);
    ck_assert_int_eq(cfg.layer_format, LAYER_FORMAT_AUTO);
    ck_assert_ptr_null(cfg.layer_format_used);
    config_close(&cfg);
    setenv("BERTH_LAYER_FORMAT", "wcifs", 1);
    char *argv2[] = {"berthd", "--runtime", "hcs", "--layer-format", "cimfs", NULL};
    ck_assert_msg(parse(&cfg, &err, 5, argv2) == CONFIG_RUN, "%s", err.msg);
    ck_assert_int_eq(cfg.layer_format, LAYER_FORMAT_CIMFS); /* the flag wins */
    config_close(&cfg);
    char *argv3[] = {"berthd", "--runtime", "hcs", NULL};
    ck_assert_msg(parse(&cfg, &err, 3, argv3) == CONFIG_RUN, "%s", err.msg);
    ck_assert_int_eq(cfg.layer_format, LAYER_FORMAT_WCIFS);
    config_close(&cfg);
    clear_env();
    /* Linux has only the overlay: the flag, even auto, is refused, as the other hcs flags are. */
    char *argv4[] = {"berthd", "--layer-format", "auto", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 3, argv4), -EINVAL);
    ck_assert_str_eq(err.msg, "--layer-format: only for --runtime hcs (Windows containers); this "
                              "daemon runs --runtime oci");
    config_close(&cfg);
    char *argv5[] = {"berthd", "--runtime", "hcs", "--layer-format", "overlay", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 5, argv5), -EINVAL);
    ck_assert_str_eq(err.msg, "--layer-format overlay: expected auto, wcifs, cimfs or blockcim");
    config_close(&cfg);
    char *argv6[] = {"berthd", "--runtime", "hcs", "--layer-format", "blockcim", NULL};
    ck_assert_msg(parse(&cfg, &err, 5, argv6) == CONFIG_RUN, "%s", err.msg);
    ck_assert_int_eq(cfg.layer_format, LAYER_FORMAT_BLOCKCIM);
    config_close(&cfg);
}
END_TEST

START_TEST(config_byte_counts_take_suffixes)
{
    int64_t v = 0;
    ck_assert_int_eq(config_parse_bytes("10G", &v), 0);
    ck_assert_int_eq(v, 10LL << 30);
    ck_assert_int_eq(config_parse_bytes("512MiB", &v), 0);
    ck_assert_int_eq(v, 512LL << 20);
    ck_assert_int_eq(config_parse_bytes("4096", &v), 0);
    ck_assert_int_eq(v, 4096);
    ck_assert_int_lt(config_parse_bytes("-1", &v), 0);
    ck_assert_int_lt(config_parse_bytes("99999999999T", &v), 0);
}
END_TEST

/* A readable file for the flags that name one. */
static const char *
readable_file(void)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/berth-config-test-%ld.json", (long)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"auths\":{}}", f);
    fclose(f);
    return path;
}

START_TEST(config_registry_defaults)
{
    clear_env();
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 1, argv), CONFIG_RUN);
    ck_assert_ptr_null(cfg.registry_auth);
    ck_assert_uint_eq(cfg.n_registry_cas, 0);
    ck_assert_uint_eq(cfg.n_insecure_registries, 0);
    ck_assert_uint_eq(cfg.n_registry_mirrors, 0);
    ck_assert_uint_eq(cfg.pull_parallel, 3);
    config_close(&cfg);
}
END_TEST

START_TEST(config_registry_flags_are_parsed_and_repeat)
{
    clear_env();
    const char *file = readable_file();
    char ca[128];
    snprintf(ca, sizeof(ca), "127.0.0.1:5000=%s", file);
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd",
                    "--registry-auth",
                    (char *)file,
                    "--registry-ca",
                    ca,
                    "--registry-ca",
                    ca,
                    "--insecure-registry",
                    "127.0.0.1:5000",
                    "--insecure-registry",
                    "[::1]:5001",
                    "--registry-mirror",
                    "https://mirror.example/cache",
                    "--registry-mirror",
                    "http://127.0.0.1:5002",
                    "--pull-parallel",
                    "8",
                    NULL};
    ck_assert_msg(parse(&cfg, &err, 17, argv) == CONFIG_RUN, "%s", err.msg);
    ck_assert_str_eq(cfg.registry_auth, file);
    ck_assert_uint_eq(cfg.n_registry_cas, 2);
    ck_assert_str_eq(cfg.registry_ca_hosts[1], "127.0.0.1:5000");
    ck_assert_str_eq(cfg.registry_ca_files[1], file);
    ck_assert_uint_eq(cfg.n_insecure_registries, 2);
    ck_assert_str_eq(cfg.insecure_registries[0], "127.0.0.1:5000");
    ck_assert_str_eq(cfg.insecure_registries[1], "[::1]:5001");
    ck_assert_ptr_null(cfg.insecure_registries[2]);
    ck_assert_uint_eq(cfg.n_registry_mirrors, 2);
    ck_assert_str_eq(cfg.registry_mirrors[0], "https://mirror.example/cache");
    ck_assert_uint_eq(cfg.pull_parallel, 8);
    config_close(&cfg);
    unlink(file);
}
END_TEST

START_TEST(config_registry_flags_replace_the_environment_lists)
{
    clear_env();
    setenv("BERTH_INSECURE_REGISTRY", "a.example:1, b.example:2", 1);
    setenv("BERTH_REGISTRY_MIRROR", "http://m1.example", 1);
    setenv("BERTH_PULL_PARALLEL", "5", 1);
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", NULL};
    ck_assert_msg(parse(&cfg, &err, 1, argv) == CONFIG_RUN, "%s", err.msg);
    ck_assert_uint_eq(cfg.n_insecure_registries, 2);
    ck_assert_str_eq(cfg.insecure_registries[1], "b.example:2");
    ck_assert_uint_eq(cfg.n_registry_mirrors, 1);
    ck_assert_uint_eq(cfg.pull_parallel, 5);
    config_close(&cfg);
    char *argv2[] = {"berthd", "--insecure-registry", "c.example", NULL};
    ck_assert_msg(parse(&cfg, &err, 3, argv2) == CONFIG_RUN, "%s", err.msg);
    ck_assert_uint_eq(cfg.n_insecure_registries, 1);
    ck_assert_str_eq(cfg.insecure_registries[0], "c.example");
    ck_assert_uint_eq(cfg.n_registry_mirrors, 1); /* untouched: no --registry-mirror */
    config_close(&cfg);
    clear_env();
}
END_TEST

START_TEST(config_bad_registry_values_give_one_line_errors)
{
    clear_env();
    const char *file = readable_file();
    char ca_no_host[128];
    snprintf(ca_no_host, sizeof(ca_no_host), "=%s", file);
    struct {
        const char *flag, *value, *want;
    } cases[] = {
        {"--registry-auth", "relative.json",
         "--registry-auth relative.json: relative.json must be an absolute path"},
        {"--registry-auth", "/nonexistent/config.json", "cannot be read"},
        {"--registry-ca", "h.example", "expected HOST[:PORT]=FILE"},
        {"--registry-ca", ca_no_host, "expected HOST[:PORT]=FILE"},
        {"--registry-ca", "h.example=relative.pem", "must be an absolute path"},
        {"--registry-ca", "h.example=/nonexistent/ca.pem", "cannot be read"},
        {"--insecure-registry", "http://h.example",
         "--insecure-registry http://h.example: expected HOST[:PORT]"},
        {"--insecure-registry", "h.example:99999", "expected HOST[:PORT]"},
        {"--insecure-registry", "-h.example", "expected HOST[:PORT]"},
        {"--registry-mirror", "mirror.example", "expected http(s)://HOST[:PORT][/PATH]"},
        {"--registry-mirror", "ftp://mirror.example", "expected http(s)://"},
        {"--pull-parallel", "0", "--pull-parallel 0: expected a whole number from 1 to 32"},
        {"--pull-parallel", "33", "from 1 to 32"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config cfg;
        struct err err = {0};
        char *argv[] = {"berthd", (char *)cases[i].flag, (char *)cases[i].value, NULL};
        ck_assert_int_lt(parse(&cfg, &err, 3, argv), 0);
        ck_assert_int_eq(err.code, EINVAL);
        ck_assert_msg(strstr(err.msg, cases[i].want), "%s %s: %s", cases[i].flag, cases[i].value,
                      err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        config_close(&cfg);
    }
    unlink(file);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, config_defaults);
    tcase_add_test(tc, config_flags_override_environment);
    tcase_add_test(tc, config_parses_ipv6_listen);
    tcase_add_test(tc, config_bad_values_give_one_line_errors);
    tcase_add_test(tc, config_unknown_flag_and_stray_argument);
    tcase_add_test(tc, config_network_defaults);
    tcase_add_test(tc, config_network_flags_are_parsed);
    tcase_add_test(tc, config_dns_flags_replace_the_environment_list);
    tcase_add_test(tc, config_cni_config_excludes_the_generated_network_flags);
    tcase_add_test(tc, config_bad_environment_names_the_variable);
    tcase_add_test(tc, config_byte_counts_take_suffixes);
    tcase_add_test(tc, config_max_output_bytes_from_flag_and_environment);
    tcase_add_test(tc, config_hcs_flags_are_parsed_for_runtime_hcs);
    tcase_add_test(tc, config_hcs_flags_are_refused_with_another_runtime);
    tcase_add_test(tc, config_registry_defaults);
    tcase_add_test(tc, config_registry_flags_are_parsed_and_repeat);
    tcase_add_test(tc, config_registry_flags_replace_the_environment_lists);
    tcase_add_test(tc, config_bad_registry_values_give_one_line_errors);
    tcase_add_test(tc, config_layer_format_is_parsed_for_runtime_hcs_and_refused_elsewhere);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
