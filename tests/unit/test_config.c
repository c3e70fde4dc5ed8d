/* Flag and environment parsing: defaults, overrides, one-line errors. */
#include <check.h>
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
    unsetenv("BERTH_ROOT");
    unsetenv("BERTH_RUNTIME");
    unsetenv("BERTH_LOG_LEVEL");
    unsetenv("BERTH_LOG_FORMAT");
    unsetenv("BERTH_STORE_MAX_BYTES");
    unsetenv("BERTH_MAX_OUTPUT_BYTES");
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
    struct config cfg;
    struct err err = {0};
    char *argv[] = {"berthd", "--listen", "127.0.0.2:0", "--root=/srv/b", NULL};
    ck_assert_int_eq(parse(&cfg, &err, 4, argv), CONFIG_RUN);
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
        {"--store-max-bytes", "10Q", "expected a byte count"},
        {"--max-output-bytes", "-5", "--max-output-bytes -5: expected a byte count"},
        {"--max-output-bytes", "1X", "expected a byte count"},
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
    tcase_add_test(tc, config_bad_environment_names_the_variable);
    tcase_add_test(tc, config_byte_counts_take_suffixes);
    tcase_add_test(tc, config_max_output_bytes_from_flag_and_environment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
