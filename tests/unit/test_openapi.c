/*
 * openapi.yaml and the code describe the same API: every route is
 * documented and every documented path and method is routed (the
 * benchmark-only /v1/debug routes are exempt), and the Error schema's
 * list of codes is exactly the codes /v1 can answer with: those of the
 * error table (api/err_status.c), "internal" for anything else, and the
 * protocol errors the front end answers by hand (api_reply_error calls
 * with a literal status in the .c files of api/).
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/query.h"
#include "api/request.h"
#include "api/router.h"
#include "testutil.h"

START_TEST(openapi_and_routes_list_the_same_operations)
{
    tu_check_openapi_routes("openapi.yaml", api_routes, api_routes_count, "/v1/debug/");
}
END_TEST

struct code {
    char str[64];
    unsigned status;
};

struct codes {
    struct code v[64];
    size_t n;
};

static void
codes_add(struct codes *c, const char *str, size_t len, unsigned status)
{
    for (size_t i = 0; i < c->n; i++)
        if (strlen(c->v[i].str) == len && strncmp(c->v[i].str, str, len) == 0 &&
            c->v[i].status == status)
            return;
    ck_assert_uint_lt(c->n, sizeof(c->v) / sizeof(c->v[0]));
    ck_assert_uint_lt(len, sizeof(c->v[0].str));
    memcpy(c->v[c->n].str, str, len);
    c->v[c->n].str[len] = '\0';
    c->v[c->n++].status = status;
}

static bool
codes_has(const struct codes *c, const char *str, unsigned status)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].str, str) == 0 && c->v[i].status == status)
            return true;
    return false;
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "open %s", path);
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    size_t n;
    while ((n = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            s = realloc(s, cap);
            ck_assert_ptr_nonnull(s);
        }
    }
    fclose(f);
    s[len] = '\0';
    return s;
}

/* The `code` (NNN) pairs of the Error schema's code description. */
static void
documented_codes(struct codes *c)
{
    char *doc = slurp(BERTH_SOURCE_DIR "/openapi.yaml");
    const char *schema = strstr(doc, "\n    Error:\n");
    ck_assert_msg(schema, "openapi.yaml: no components.schemas.Error");
    const char *p = strstr(schema, "description: |");
    const char *end = strstr(schema, "message:");
    ck_assert_msg(p && end && p < end, "openapi.yaml: Error.code has no description");
    while ((p = strchr(p, '`')) && p < end) {
        const char *q = strchr(p + 1, '`');
        ck_assert_ptr_nonnull(q);
        unsigned status = 0;
        ck_assert_msg(sscanf(q + 1, " (%u)", &status) == 1, "openapi.yaml: %.40s has no status", p);
        codes_add(c, p + 1, (size_t)(q - p - 1), status);
        p = q + 1;
    }
    free(doc);
}

/* The codes of api_reply_error(req, NNN, "code", ...) calls in api/
 * (not api/docker/: that front end has its own error bodies). */
static void
hand_codes(struct codes *c)
{
    DIR *d = opendir(BERTH_SOURCE_DIR "/api");
    ck_assert_msg(d, "open %s/api", BERTH_SOURCE_DIR);
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/api/%s", BERTH_SOURCE_DIR, e->d_name);
        char *src = slurp(path);
        files++;
        for (const char *p = src; (p = strstr(p, "api_reply_error(")); p++) {
            unsigned status = 0;
            char code[64];
            if (sscanf(p, "api_reply_error(%*[^,], %u, \"%63[a-z_]\"", &status, code) == 2)
                codes_add(c, code, strlen(code), status);
        }
        free(src);
    }
    closedir(d);
    ck_assert_uint_gt(files, 0);
}

START_TEST(openapi_lists_every_error_code_the_api_answers_with)
{
    struct codes doc = {0}, made = {0};
    documented_codes(&doc);
    ck_assert_uint_gt(doc.n, 0);
    const char *str;
    unsigned status;
    for (size_t i = 0; (status = api_err_status_at(i, &str)) != 0; i++)
        codes_add(&made, str, strlen(str), status);
    /* An unknown error code is internal (500). */
    ck_assert_uint_eq(api_err_status(-12345, &str), 500);
    codes_add(&made, str, strlen(str), 500);
    size_t from_table = made.n;
    hand_codes(&made);
    ck_assert_msg(made.n > from_table, "no api_reply_error(req, NNN, \"code\") found in api/");
    for (size_t i = 0; i < made.n; i++)
        ck_assert_msg(codes_has(&doc, made.v[i].str, made.v[i].status),
                      "the API answers `%s` (%u); openapi.yaml's Error.code does not list it",
                      made.v[i].str, made.v[i].status);
    for (size_t i = 0; i < doc.n; i++)
        ck_assert_msg(codes_has(&made, doc.v[i].str, doc.v[i].status),
                      "openapi.yaml lists `%s` (%u), which the API never answers", doc.v[i].str,
                      doc.v[i].status);
}
END_TEST

/* The query parameters openapi.yaml documents for method on path: the
 * path's own parameters and the operation's, "name" from each entry whose
 * "in" is query (either YAML form the file uses). */
static size_t
documented_query(const char *doc, const char *path, const char *method, char names[][64],
                 size_t max)
{
    char head[300];
    snprintf(head, sizeof(head), "\n  %s:\n", path);
    const char *p = strstr(doc, head);
    ck_assert_msg(p, "openapi.yaml: no path %s", path);
    p += strlen(head);
    const char *end = strstr(p, "\n  /");
    if (!end)
        end = strstr(p, "\ncomponents:");
    ck_assert_ptr_nonnull(end);
    char lower[16];
    size_t ml = strlen(method);
    for (size_t i = 0; i <= ml; i++)
        lower[i] = (char)tolower((unsigned char)method[i]);
    char op[32];
    snprintf(op, sizeof(op), "\n    %s:", lower);
    /* Lines at indent 4 open a section: the path's parameters, this
     * operation, or something else (another operation). */
    bool mine = false;
    char name[64] = "";
    size_t n = 0;
    for (const char *line = p; line && line < end;) {
        const char *eol = strchr(line, '\n');
        size_t indent = strspn(line, " ");
        if (indent == 4 && line[4] != '-') {
            mine =
                strncmp(line + 4, "parameters:", 11) == 0 || strncmp(line - 1, op, strlen(op)) == 0;
            name[0] = '\0';
        } else if (mine) {
            const char *nm = strstr(line, "name: ");
            if (line[indent] == '-')
                name[0] = '\0';
            if (nm && (!eol || nm < eol) && line[indent] == '-')
                sscanf(nm + 6, "%63[^ ,}\n]", name);
            const char *in = strstr(line, "in: query");
            if (in && (!eol || in < eol) && name[0]) {
                ck_assert_uint_lt(n, max);
                snprintf(names[n++], 64, "%s", name);
                name[0] = '\0';
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

/* Every /v1 route takes exactly the query parameters openapi.yaml
 * documents for it (api/routes.c's lists; the server refuses others). */
START_TEST(openapi_documents_the_query_parameters_each_route_takes)
{
    char *doc = slurp(BERTH_SOURCE_DIR "/openapi.yaml");
    for (size_t i = 0; i < api_routes_count; i++) {
        const struct route *r = &api_routes[i];
        if (strncmp(r->pattern, "/v1/debug/", 10) == 0)
            continue;
        char names[16][64];
        size_t n = documented_query(doc, r->pattern, r->method, names, 16);
        size_t taken = 0;
        for (const char *const *q = r->query; q && *q; q++, taken++) {
            bool found = false;
            for (size_t k = 0; k < n && !found; k++)
                found = api_query_entry_takes(*q, names[k]);
            ck_assert_msg(found, "%s %s takes query %s; openapi.yaml does not document it",
                          r->method, r->pattern, *q);
        }
        for (size_t k = 0; k < n; k++) {
            bool found = false;
            for (const char *const *q = r->query; q && *q && !found; q++)
                found = api_query_entry_takes(*q, names[k]);
            ck_assert_msg(found, "openapi.yaml documents query %s on %s %s, which it refuses",
                          names[k], r->method, r->pattern);
        }
        ck_assert_uint_eq(taken, n);
    }
    free(doc);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("openapi");
    TCase *tc = tcase_create("openapi");
    tcase_add_test(tc, openapi_and_routes_list_the_same_operations);
    tcase_add_test(tc, openapi_lists_every_error_code_the_api_answers_with);
    tcase_add_test(tc, openapi_documents_the_query_parameters_each_route_takes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
