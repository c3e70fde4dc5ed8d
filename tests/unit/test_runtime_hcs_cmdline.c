/*
 * runtime/hcs/cmdline: Windows command lines from argv. On Linux against
 * a table written from the CommandLineToArgvW rules and a parser of those
 * rules below; in the Windows build (under Wine) every case and a set of
 * generated argument lists also go through the real CommandLineToArgvW,
 * which must give the argv back.
 */
#include "runtime/hcs/cmdline.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#include <shellapi.h>
#endif

struct cmd_case {
    const char *argv[8];
    const char *line;
};

static const struct cmd_case cases[] = {
    {{"cmd.exe", "/c", "echo hi", NULL}, "cmd.exe /c \"echo hi\""},
    {{"C:\\Program Files\\x\\app.exe", "a", NULL}, "\"C:\\Program Files\\x\\app.exe\" a"},
    {{"C:\\dir\\app.exe", NULL}, "C:\\dir\\app.exe"},
    {{"a.exe", "", NULL}, "a.exe \"\""},
    {{"a.exe", "say \"hi\"", NULL}, "a.exe \"say \\\"hi\\\"\""},
    {{"a.exe", "\"", NULL}, "a.exe \"\\\"\""},
    {{"a.exe", "C:\\x\\", NULL}, "a.exe C:\\x\\"},
    {{"a.exe", "C:\\dir with space\\", NULL}, "a.exe \"C:\\dir with space\\\\\""},
    {{"a.exe", "a\\\\\"b", NULL}, "a.exe \"a\\\\\\\\\\\"b\""},
    {{"a.exe", "a\\b\\\\c", NULL}, "a.exe a\\b\\\\c"},
    {{"a.exe", "tab\there", NULL}, "a.exe \"tab\there\""},
    {{"a.exe", "x", "", "y", NULL}, "a.exe x \"\" y"},
    {{"", "x", NULL}, "\"\" x"},
    {{"C:\\dir\\", "x", NULL}, "C:\\dir\\ x"},
    {{"a.exe", "caf\xc3\xa9", NULL}, "a.exe caf\xc3\xa9"},
};

/*
 * The rules the program's C runtime applies (CommandLineToArgvW's since
 * 2008): argv[0] up to the closing quote or the first blank, backslashes
 * literal; then 2n backslashes + '"' give n backslashes and toggle
 * quoting, 2n+1 give n and a literal '"', other backslashes are literal,
 * and inside quotes "" is a literal '"'.
 */
static char **
parse_rules(const char *s, int *argc)
{
    char **argv = calloc(64, sizeof(char *));
    int n = 0;
    size_t len = strlen(s);
    char *cur = malloc(len + 1);
    size_t o = 0;
    const char *p = s;
    if (*p == '"') {
        p++;
        while (*p && *p != '"')
            cur[o++] = *p++;
        if (*p == '"')
            p++;
    } else {
        while (*p && *p != ' ' && *p != '\t')
            cur[o++] = *p++;
    }
    cur[o] = '\0';
    argv[n++] = strdup(cur);
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        o = 0;
        bool quoted = false;
        while (*p && (quoted || (*p != ' ' && *p != '\t'))) {
            if (*p == '\\') {
                size_t k = 0;
                while (*p == '\\') {
                    k++;
                    p++;
                }
                if (*p == '"') {
                    for (size_t i = 0; i < k / 2; i++)
                        cur[o++] = '\\';
                    if (k % 2) {
                        cur[o++] = '"';
                        p++;
                    }
                } else {
                    for (size_t i = 0; i < k; i++)
                        cur[o++] = '\\';
                }
            } else if (*p == '"') {
                if (quoted && p[1] == '"') {
                    cur[o++] = '"';
                    p += 2;
                } else {
                    quoted = !quoted;
                    p++;
                }
            } else {
                cur[o++] = *p++;
            }
        }
        cur[o] = '\0';
        argv[n++] = strdup(cur);
    }
    free(cur);
    *argc = n;
    return argv;
}

static void
argv_free(char **argv, int argc)
{
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
}

static int
argv_len(const char *const *argv)
{
    int n = 0;
    while (argv[n])
        n++;
    return n;
}

#ifdef _WIN32
/* The real CommandLineToArgvW, on the UTF-16 form of line, back to UTF-8. */
static char **
parse_windows(const char *line, int *argc)
{
    wchar_t wline[4096];
    ck_assert(MultiByteToWideChar(CP_UTF8, 0, line, -1, wline, 4096) > 0);
    wchar_t **w = CommandLineToArgvW(wline, argc);
    ck_assert_ptr_nonnull(w);
    char **argv = calloc((size_t)*argc + 1, sizeof(char *));
    for (int i = 0; i < *argc; i++) {
        char buf[4096];
        ck_assert(WideCharToMultiByte(CP_UTF8, 0, w[i], -1, buf, sizeof(buf), NULL, NULL) > 0);
        argv[i] = strdup(buf);
    }
    LocalFree(w);
    return argv;
}
#endif

static void
check_round_trip(const char *const *argv, const char *line)
{
    int argc = 0;
    char **back = parse_rules(line, &argc);
    ck_assert_int_eq(argc, argv_len(argv));
    for (int i = 0; i < argc; i++)
        ck_assert_msg(strcmp(back[i], argv[i]) == 0, "%s: argv[%d] \"%s\", want \"%s\"", line, i,
                      back[i], argv[i]);
    argv_free(back, argc);
#ifdef _WIN32
    back = parse_windows(line, &argc);
    ck_assert_msg(argc == argv_len(argv), "CommandLineToArgvW(%s): %d arguments, want %d", line,
                  argc, argv_len(argv));
    for (int i = 0; i < argc; i++)
        ck_assert_msg(strcmp(back[i], argv[i]) == 0,
                      "CommandLineToArgvW(%s): argv[%d] \"%s\", want \"%s\"", line, i, back[i],
                      argv[i]);
    argv_free(back, argc);
#endif
}

START_TEST(command_lines_match_the_table_and_round_trip)
{
    const struct cmd_case *c = &cases[_i];
    struct err err = {0};
    char *line = NULL;
    ck_assert_int_eq(hcs_cmdline_build((char *const *)c->argv, &line, &err), 0);
    ck_assert_str_eq(line, c->line);
    check_round_trip(c->argv, line);
    free(line);
}
END_TEST

START_TEST(generated_argument_lists_round_trip)
{
    /* Every argument made of the characters that matter, in a fixed
     * pseudo-random sequence so a failure repeats. */
    static const char alphabet[] = {'a', ' ', '\t', '"', '\\', 'x'};
    unsigned seed = 12345;
    for (int round = 0; round < 500; round++) {
        char store[6][12];
        const char *argv[8] = {"prog.exe"};
        int n = 1 + round % 6;
        for (int i = 1; i <= n; i++) {
            seed = seed * 1103515245u + 12345u;
            int len = (int)((seed >> 16) % 11);
            for (int k = 0; k < len; k++) {
                seed = seed * 1103515245u + 12345u;
                store[i - 1][k] = alphabet[(seed >> 16) % sizeof(alphabet)];
            }
            store[i - 1][len] = '\0';
            argv[i] = store[i - 1];
        }
        argv[n + 1] = NULL;
        struct err err = {0};
        char *line = NULL;
        ck_assert_int_eq(hcs_cmdline_build((char *const *)argv, &line, &err), 0);
        check_round_trip(argv, line);
        free(line);
    }
}
END_TEST

START_TEST(refuses_what_cannot_round_trip)
{
    struct err err = {0};
    char *line = NULL;
    char *quoted[] = {"a\"b.exe", NULL};
    ck_assert_int_eq(hcs_cmdline_build(quoted, &line, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "program a\"b.exe"));
    char *none[] = {NULL};
    ck_assert_int_eq(hcs_cmdline_build(none, &line, &err), -EINVAL);
    ck_assert_int_eq(hcs_cmdline_build(NULL, &line, &err), -EINVAL);
    char *big = malloc(HCS_CMDLINE_MAX + 1);
    memset(big, 'a', HCS_CMDLINE_MAX);
    big[HCS_CMDLINE_MAX] = '\0';
    char *toolong[] = {"a.exe", big, NULL};
    ck_assert_int_eq(hcs_cmdline_build(toolong, &line, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "longer than 32767"));
    free(big);
    ck_assert_ptr_null(line);
}
END_TEST

static Suite *
cmdline_suite(void)
{
    Suite *s = suite_create("runtime_hcs_cmdline");
    TCase *tc = tcase_create("cmdline");
    tcase_add_loop_test(tc, command_lines_match_the_table_and_round_trip, 0,
                        (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, generated_argument_lists_round_trip);
    tcase_add_test(tc, refuses_what_cannot_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(cmdline_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
