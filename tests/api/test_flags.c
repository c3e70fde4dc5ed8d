/*
 * berthd's command line and environment: --version, --help, one-line
 * errors with exit status 2 for bad values, BERTH_LISTEN and
 * BERTH_LOG_FORMAT=json from the environment; --pool-nice relative to
 * the nice berthd was started with (read from /proc/<pid>/task/<tid>/stat).
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "tests/api/harness.h"

START_TEST(version_prints_version_and_exits_0)
{
    char *out, *err;
    int st = berthd_run((const char *[]){"--version", NULL}, NULL, 10000, &out, &err);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
    unsigned a, b2, c;
    ck_assert_msg(sscanf(out, "berthd %u.%u.%u", &a, &b2, &c) == 3, "stdout: %s", out);
    ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);

    /* The same version as health reports. */
    struct berthd b = {0};
    berthd_start(&b, NULL);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    char want[64];
    snprintf(want, sizeof(want), "berthd %s\n", json_object_get_string(json_at(r.json, "version")));
    ck_assert_str_eq(out, want);
    hresp_free(&r);
    berthd_finish(&b);
    free(out);
    free(err);
}
END_TEST

START_TEST(help_prints_usage_and_exits_0)
{
    char *out, *err;
    int st = berthd_run((const char *[]){"--help", NULL}, NULL, 10000, &out, &err);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
    ck_assert_msg(strstr(out, "usage: berthd"), "stdout: %s", out);
    ck_assert_msg(strstr(out, "--listen") && strstr(out, "--root"), "stdout: %s", out);
    ck_assert_msg(
        strstr(out, "--pool-nice N               pool threads' nice: berthd's own plus N"),
        "stdout: %s", out);
    free(out);
    free(err);
}
END_TEST

/* The flags and environment variables of one source: "--name ENV" per
 * entry ("--name -" when it has none). */
struct flagset {
    char v[64][96];
    size_t n;
};

static void
flagset_add(struct flagset *f, const char *flag, size_t flen, const char *env, size_t elen)
{
    ck_assert_uint_lt(f->n, 64);
    snprintf(f->v[f->n++], sizeof(f->v[0]), "--%.*s %.*s", (int)flen, flag, elen ? (int)elen : 1,
             elen ? env : "-");
}

static bool
flagset_has(const struct flagset *f, const char *s)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->v[i], s) == 0)
            return true;
    return false;
}

static char *
slurp_source(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", BERTH_SOURCE_DIR, rel);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "open %s", path);
    char *s = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(s);
    s[fread(s, 1, (1 << 20) - 1, f)] = '\0';
    fclose(f);
    return s;
}

/* The next cell border of a Markdown table row at or after p: a '|' that
 * is not escaped ("\\|" is a pipe inside a cell). */
static const char *
cell_end(const char *p)
{
    for (; *p && *p != '\n'; p++)
        if (*p == '|' && p[-1] != '\\')
            return p;
    return NULL;
}

static void
flagsets_equal(const struct flagset *a, const char *an, const struct flagset *b, const char *bn)
{
    for (size_t i = 0; i < a->n; i++)
        ck_assert_msg(flagset_has(b, a->v[i]), "%s has \"%s\"; %s does not", an, a->v[i], bn);
    for (size_t i = 0; i < b->n; i++)
        ck_assert_msg(flagset_has(a, b->v[i]), "%s has \"%s\"; %s does not", bn, b->v[i], an);
}

/* README's flag table, berthd --help and daemon/config.c's option table
 * list the same flags with the same environment variables. */
START_TEST(readme_help_and_config_list_the_same_flags)
{
    struct flagset cfg = {0}, help = {0}, readme = {0};

    /* config.c: {OPT_X, "name", "ENV" or NULL, ...} */
    char *src = slurp_source("daemon/config.c");
    const char *p = strstr(src, "option_descs[] = {");
    ck_assert_ptr_nonnull(p);
    const char *end = strstr(p, "};");
    for (p = strstr(p, "{OPT_"); p && p < end; p = strstr(p + 1, "{OPT_")) {
        const char *q1 = strchr(p, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
        ck_assert_ptr_nonnull(q2);
        const char *e = q2 + 1 + strspn(q2 + 1, ", ");
        const char *e2 = *e == '"' ? strchr(e + 1, '"') : NULL;
        flagset_add(&cfg, q1 + 1, (size_t)(q2 - q1 - 1), e2 ? e + 1 : "",
                    e2 ? (size_t)(e2 - e - 1) : 0);
    }
    free(src);

    /* --help: each flag at the start of a line ("  --name"), and the
     * BERTH_ variable at the end of its entry, if any. */
    char *out, *err;
    int st = berthd_run((const char *[]){"--help", NULL}, NULL, 10000, &out, &err);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
    for (p = strstr(out, "\n  --"); p;) {
        const char *name = p + 5;
        size_t nlen = strspn(name, "abcdefghijklmnopqrstuvwxyz-");
        const char *next = strstr(name, "\n  --");
        const char *stop = next ? next : name + strlen(name);
        const char *env = NULL;
        for (const char *e = strstr(name, "BERTH_"); e && e < stop; e = strstr(e + 1, "BERTH_"))
            env = e;
        flagset_add(&help, name, nlen, env ? env : "",
                    env ? strspn(env, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") : 0);
        p = next;
    }
    free(out);
    free(err);

    /* README: "| `--name ...` | `ENV` ..." rows, and "`--version`, `--help`". */
    char *doc = slurp_source("README.md");
    const char *table = strstr(doc, "| flag | env | default |");
    ck_assert_ptr_nonnull(table);
    for (p = strstr(table, "\n| `--"); p; p = strstr(p + 1, "\n| `--")) {
        const char *eol = strchr(p + 1, '\n');
        const char *cell = cell_end(p + 2);
        ck_assert_ptr_nonnull(cell);
        /* Every `--name` in the first cell. */
        for (const char *f = strstr(p, "`--"); f && f < cell; f = strstr(f + 1, "`--")) {
            const char *name = f + 3;
            size_t nlen = strspn(name, "abcdefghijklmnopqrstuvwxyz-");
            const char *env = strstr(cell, "`BERTH_");
            const char *envcell_end = cell_end(cell + 1);
            bool has_env = env && env < envcell_end && (!eol || env < eol);
            flagset_add(&readme, name, nlen, has_env ? env + 1 : "",
                        has_env ? strspn(env + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") : 0);
        }
        if (!eol || eol[1] != '|')
            break;
    }
    free(doc);

    ck_assert_uint_gt(cfg.n, 20);
    flagsets_equal(&cfg, "daemon/config.c", &help, "berthd --help");
    flagsets_equal(&cfg, "daemon/config.c", &readme, "README's flag table");
}
END_TEST

START_TEST(bad_flag_values_print_one_line_and_exit_2)
{
    static const struct {
        const char *args[6];
        const char *env;
        const char *mention;
    } cases[] = {
        {{"--listen", "nope"}, NULL, "nope"},
        {{"--listen", "127.0.0.1:99999"}, NULL, "99999"},
        {{"--log-level", "loud"}, NULL, "loud"},
        {{"--runtime", "crun"}, NULL, "crun"},
        {{"--max-connections", "0"}, NULL, "--max-connections"},
        {{"--root", "relative/dir"}, NULL, "relative/dir"},
        {{"--no-such-flag"}, NULL, "--no-such-flag"},
        {{"--listen", "127.0.0.1:0", "stray"}, NULL, "stray"},
        {{NULL}, "BERTH_LOG_FORMAT=yaml", "BERTH_LOG_FORMAT"},
        /* The hcs runtime's flags: checked here too, and meaningless to oci. */
        {{"--isolation", "hyperv"}, NULL, "only for --runtime hcs"},
        {{"--layer-format", "cimfs"}, NULL, "--layer-format: only for --runtime hcs"},
        {{"--runtime", "hcs", "--layer-format", "ntfs"}, NULL, "--layer-format ntfs"},
        {{"--hyperv-cpus", "2"}, NULL, "--hyperv-cpus: only for --runtime hcs"},
        {{"--runtime", "hcs", "--hyperv-memory-mb", "64"}, NULL, "--hyperv-memory-mb 64"},
        {{NULL}, "BERTH_ISOLATION=vm", "BERTH_ISOLATION"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out, *err;
        const char *env[] = {cases[i].env, NULL};
        int st = berthd_run(cases[i].args, env, 10000, &out, &err);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2,
                      "case %zu (%s): status 0x%x, stderr: %s", i, cases[i].mention, st, err);
        ck_assert_msg(strncmp(err, "berthd: ", 8) == 0, "case %zu: stderr: %s", i, err);
        ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "case %zu: not one line: %s", i,
                      err);
        ck_assert_msg(strstr(err, cases[i].mention), "case %zu: stderr does not mention %s: %s", i,
                      cases[i].mention, err);
        ck_assert_msg(out[0] == '\0', "case %zu: stdout: %s", i, out);
        free(out);
        free(err);
    }
}
END_TEST

START_TEST(a_registry_auth_file_berthd_cannot_use_is_one_line_and_exit_2)
{
    char dir[PATH_MAX];
    harness_mkdtemp(dir, sizeof(dir));
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    /* Not JSON, and a secret in it that no message may show. */
    fputs("{\"auths\": {\"r.example\": {\"auth\": \"Zm9vOlMzQ1JFVC1YWVo=\",}}", f);
    fclose(f);
    const char *const cases[][3] = {
        {"--registry-auth", path, path},
        {"--registry-auth", "/nonexistent/config.json", "/nonexistent/config.json"},
        {"--registry-ca", "r.example=/nonexistent/ca.pem", "/nonexistent/ca.pem"},
        {"--insecure-registry", "http://r.example", "http://r.example"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out, *err;
        int st =
            berthd_run((const char *[]){cases[i][0], cases[i][1], NULL}, NULL, 10000, &out, &err);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2,
                      "case %zu: status 0x%x, stderr: %s", i, st, err);
        ck_assert_msg(strncmp(err, "berthd: ", 8) == 0 &&
                          strchr(err, '\n') == err + strlen(err) - 1,
                      "case %zu: not one line: %s", i, err);
        ck_assert_msg(strstr(err, cases[i][2]), "case %zu: does not name %s: %s", i, cases[i][2],
                      err);
        ck_assert_msg(!strstr(err, "Zm9vOlMzQ1JFVC1YWVo") && !strstr(err, "S3CRET"),
                      "case %zu: the secret is shown: %s", i, err);
        free(out);
        free(err);
    }
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(listen_address_from_environment)
{
    struct berthd b = {0};
    berthd_start(
        &b, &(struct berthd_opts){.no_listen_flag = true, .env = {"BERTH_LISTEN=127.0.0.1:0"}});
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_msg(r.status == 200 || r.status == 503, "status %ld", r.status);
    ck_assert_ptr_nonnull(r.json);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

START_TEST(flag_wins_over_environment)
{
    struct berthd b = {0};
    /* The environment says errors only; the flag asks for request lines. */
    berthd_start(&b, &(struct berthd_opts){.args = {"--log-level", "info"},
                                           .env = {"BERTH_LOG_LEVEL=error"}});
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    hresp_free(&r);
    sleep_ms(100);
    char *log = berthd_log(&b);
    ck_assert_msg(strstr(log, "GET /v1/health"), "no request line at --log-level info:\n%s", log);
    free(log);
    berthd_finish(&b);
}
END_TEST

START_TEST(json_log_format_one_object_per_line_and_per_request)
{
    struct berthd b = {0};
    berthd_start(&b, &(struct berthd_opts){.env = {"BERTH_LOG_FORMAT=json"}});
    static const struct {
        const char *path;
        int status;
    } reqs[] = {{"/v1/health", 0}, {"/v1/nothing\"here", 404}, {"/v1/metrics", 200}};
    for (size_t i = 0; i < 3; i++) {
        struct hresp r;
        http_get(&b, reqs[i].path, &r);
        hresp_free(&r);
    }
    int st = berthd_term(&b, 10000);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
    char *log = berthd_log(&b);
    int requests = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        json_object *o = json_tokener_parse(line);
        ck_assert_msg(o && json_object_is_type(o, json_type_object), "not JSON: %s", line);
        ck_assert_msg(json_object_is_type(json_at(o, "time"), json_type_string), "%s", line);
        ck_assert_msg(json_object_is_type(json_at(o, "level"), json_type_string), "%s", line);
        ck_assert_msg(json_object_is_type(json_at(o, "msg"), json_type_string), "%s", line);
        if (strcmp(json_object_get_string(json_at(o, "msg")), "request") == 0) {
            ck_assert_msg(requests < 3, "more request lines than requests: %s", line);
            ck_assert_str_eq(json_object_get_string(json_at(o, "method")), "GET");
            ck_assert_str_eq(json_object_get_string(json_at(o, "path")), reqs[requests].path);
            ck_assert_msg(json_object_is_type(json_at(o, "status"), json_type_int), "%s", line);
            if (reqs[requests].status)
                ck_assert_int_eq(json_object_get_int(json_at(o, "status")), reqs[requests].status);
            json_object *d = json_at(o, "duration_ms");
            ck_assert_msg(d &&
                              (json_object_is_type(d, json_type_double) ||
                               json_object_is_type(d, json_type_int)) &&
                              json_object_get_double(d) >= 0,
                          "duration_ms: %s", line);
            requests++;
        }
        json_object_put(o);
    }
    ck_assert_int_eq(requests, 3);
    free(log);
    berthd_finish(&b);
}
END_TEST

/* Reads the soft "Max open files" limit of pid from /proc/<pid>/limits. */
static long long
soft_open_files(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long long soft = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "Max open files", 14) == 0)
            soft = strtoll(line + 14, NULL, 10);
    fclose(f);
    return soft;
}

START_TEST(a_low_open_files_limit_is_raised_for_the_connections)
{
    /* A login shell's 1024 would refuse connections before the cap. The
     * daemon inherits this process's limits. */
    struct rlimit old, low;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 3000)
        return; /* the hard limit leaves nothing to raise to */
    low = old;
    low.rlim_cur = 256;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    struct berthd b = {0};
    berthd_start(&b,
                 &(struct berthd_opts){.args = {"--runtime", "host", "--max-connections", "1500"}});
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    long long soft = soft_open_files(b.pid);
    ck_assert_msg(soft >= 1500 + 32, "soft open files limit %lld for 1500 connections", soft);
    berthd_finish(&b);
}
END_TEST

/* The nice value (field 19 of /proc/<pid>/task/<tid>/stat) of pid's
 * main thread in *main_nice; returns the highest nice of its other threads. */
static int
thread_nices(pid_t pid, int *main_nice)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int highest = -21;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[128], buf[1024];
        snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* a thread that ended */
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* After "pid (comm) " come fields 3, 4, ...: the nice value is field 19. */
        char *p = strrchr(buf, ')');
        ck_assert_ptr_nonnull(p);
        char *save = NULL, *tok = strtok_r(p + 1, " ", &save);
        for (int field = 3; tok && field < 19; field++)
            tok = strtok_r(NULL, " ", &save);
        ck_assert_ptr_nonnull(tok);
        int nice = atoi(tok);
        if (atoi(e->d_name) == (int)pid)
            *main_nice = nice;
        else if (nice > highest)
            highest = nice;
    }
    closedir(d);
    return highest;
}

/* Starts berthd under nice start_nice with --pool-nice pool_nice, runs a
 * long hash job and returns the lowest priority (highest nice) a pool
 * thread had while it ran; *main_nice: the daemon's main thread's. */
static int
pool_nice_under(int start_nice, const char *pool_nice, int *main_nice)
{
    errno = 0;
    int old = getpriority(PRIO_PROCESS, 0);
    ck_assert_int_eq(errno, 0);
    ck_assert_int_eq(setpriority(PRIO_PROCESS, 0, start_nice), 0);
    struct berthd b = {0};
    berthd_start(&b,
                 &(struct berthd_opts){.args = {"--runtime", "host", "--pool-nice", pool_nice}});
    setpriority(PRIO_PROCESS, 0, old); /* root may go back up; others stay */
    struct hresp r;
    http_post_json(&b, "/v1/debug/hash", "{", &r);
    bool have = r.status == 400;
    hresp_free(&r);
    if (!have) {
        fprintf(stderr, "SKIP pool nice: needs POST /v1/debug/hash (-DBERTH_BENCH_ROUTES=ON)\n");
        berthd_finish(&b);
        return -100;
    }
    ck_assert(wait_health_int(&b, "jobs.running", 0, 10000));
    struct bg_req job;
    bg_start(&job, &b,
             &(struct hreq){.method = "POST",
                            .path = "/v1/debug/hash",
                            .body = "{\"bytes\": 1073741824}",
                            .timeout_ms = 120000});
    ck_assert_msg(wait_health_int(&b, "jobs.running", 1, 5000), "the job never ran");
    int highest = -21;
    *main_nice = -21;
    for (int i = 0; i < 50; i++) {
        int h = thread_nices(b.pid, main_nice);
        if (h > highest)
            highest = h;
        sleep_ms(10);
    }
    bg_join(&job);
    ck_assert_msg(job.resp.status == 200, "%ld %s", job.resp.status, job.resp.body);
    hresp_free(&job.resp);
    berthd_finish(&b);
    return highest;
}

START_TEST(pool_nice_is_relative_to_the_daemons_own_nice)
{
    int main_nice;
    int pool = pool_nice_under(5, "5", &main_nice);
    if (pool == -100)
        return;
    ck_assert_int_eq(main_nice, 5);
    ck_assert_msg(pool == 10, "a pool thread under nice 5 with --pool-nice 5 ran at %d", pool);
}
END_TEST

START_TEST(pool_nice_past_19_is_clamped_to_19)
{
    int main_nice;
    int pool = pool_nice_under(15, "10", &main_nice);
    if (pool == -100)
        return;
    ck_assert_int_eq(main_nice, 15);
    ck_assert_msg(pool == 19, "a pool thread under nice 15 with --pool-nice 10 ran at %d", pool);
}
END_TEST

START_TEST(second_daemon_on_a_taken_port_fails_to_start)
{
    struct berthd b = {0};
    berthd_start(&b, NULL);
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", b.port);
    char root[256];
    harness_mkdtemp(root, sizeof(root));
    char *out = NULL, *err = NULL;
    /* It must not share the port with the first (no SO_REUSEPORT). */
    int st = berthd_run((const char *[]){"--listen", listen, "--root", root, NULL}, NULL, 10000,
                        &out, &err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1,
                  "second berthd on %s ended with status %d, expected exit 1; stderr: %s", listen,
                  st, err ? err : "");
    ck_assert_msg(err && strstr(err, "cannot bind"), "stderr: %s", err ? err : "");
    free(out);
    free(err);
    struct hresp r;
    http_get(&b, "/v1/health", &r);
    ck_assert_str_eq(json_object_get_string(json_at(r.json, "store.root")), b.root);
    hresp_free(&r);
    berthd_finish(&b);
}
END_TEST

static Suite *
flags_suite(void)
{
    Suite *s = suite_create("api_flags");
    TCase *tc = tcase_create("flags");
    tcase_add_test(tc, version_prints_version_and_exits_0);
    tcase_add_test(tc, help_prints_usage_and_exits_0);
    tcase_add_test(tc, readme_help_and_config_list_the_same_flags);
    tcase_add_test(tc, bad_flag_values_print_one_line_and_exit_2);
    tcase_add_test(tc, a_registry_auth_file_berthd_cannot_use_is_one_line_and_exit_2);
    tcase_add_test(tc, listen_address_from_environment);
    tcase_add_test(tc, flag_wins_over_environment);
    tcase_add_test(tc, json_log_format_one_object_per_line_and_per_request);
    tcase_add_test(tc, second_daemon_on_a_taken_port_fails_to_start);
    tcase_add_test(tc, a_low_open_files_limit_is_raised_for_the_connections);
    tcase_add_test(tc, pool_nice_is_relative_to_the_daemons_own_nice);
    tcase_add_test(tc, pool_nice_past_19_is_clamped_to_19);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return harness_run_suite(flags_suite());
}
