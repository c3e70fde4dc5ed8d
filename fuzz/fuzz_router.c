/*
 * Fuzzes the router (api/router.c) with the daemon's own routing table:
 * its path matching and the percent-decoding of path parameters, the one
 * place where berth decodes a request target (MHD decodes the query).
 *
 * Input: "METHOD PATH", as the access handler sees them: the method cut
 * to what api_req keeps, the path cut at "?" or "#". Checked:
 * - a match names a route of the table for that method (HEAD takes GET),
 *   with one decoded, non-empty, NUL-free parameter per {name};
 * - the same route and parameters come back when every parameter is
 *   percent-encoded again byte by byte;
 * - 405's Allow lists exactly methods that then match; 404 and 400 do
 *   not depend on the method; a short Allow buffer stays terminated.
 */
#include "fuzz/fuzz.h"

#include "api/api.h"
#include "api/router.h"

static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

static enum route_result
route(const char *method, const char *path, struct route_match *m, char *allow, size_t allow_len)
{
    return router_match(api_routes, api_routes_count, method, path, m, allow, allow_len);
}

/* The k-th {name} of pattern into name (empty if there is none). */
static void
pattern_param(const char *pattern, unsigned k, char *name, size_t size)
{
    name[0] = '\0';
    for (const char *p = pattern; (p = strchr(p, '{')) != NULL; p++) {
        const char *end = strchr(p, '}');
        if (k-- == 0 && end) {
            snprintf(name, size, "%.*s", (int)(end - p - 1), p + 1);
            return;
        }
    }
}

static unsigned
pattern_nparams(const char *pattern)
{
    unsigned n = 0;
    for (const char *p = pattern; (p = strchr(p, '{')) != NULL; p++)
        n++;
    return n;
}

/* The pattern with each parameter replaced by its value, every byte %XX. */
static char *
reencode(const struct route_match *m)
{
    const char *pattern = m->route->pattern;
    size_t cap = strlen(pattern) + 1;
    for (unsigned k = 0; k < m->nparams; k++)
        cap += 3 * strlen(m->params[k]);
    char *out = malloc(cap);
    FUZZ_CHECK(out, "out of memory");
    size_t o = 0;
    unsigned k = 0;
    for (const char *p = pattern; *p;) {
        if (*p == '{') {
            for (const unsigned char *v = (const unsigned char *)m->params[k]; *v; v++)
                o += (size_t)snprintf(out + o, cap - o, "%%%02X", *v);
            k++;
            p = strchr(p, '}') + 1;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

static void
check_found(const char *method, const char *path, const struct route_match *m)
{
    const struct route *r = m->route;
    FUZZ_CHECK(r >= api_routes && r < api_routes + api_routes_count, "route outside the table");
    FUZZ_CHECK(strcmp(r->method, method) == 0 ||
                   (strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0),
               "%s %s matched %s %s", method, path, r->method, r->pattern);
    FUZZ_CHECK(m->nparams == pattern_nparams(r->pattern), "%s: %u parameters for %s", path,
               m->nparams, r->pattern);
    for (unsigned k = 0; k < m->nparams; k++) {
        char name[64];
        pattern_param(r->pattern, k, name, sizeof(name));
        size_t len = strnlen(m->params[k], ROUTE_PARAM_MAX);
        FUZZ_CHECK(len > 0 && len < ROUTE_PARAM_MAX, "%s: parameter %u is %zu bytes", path, k, len);
        FUZZ_CHECK(m->param_names[k] == m->names_buf[k], "parameter name %u not in the match", k);
        FUZZ_CHECK(strcmp(m->param_names[k], name) == 0, "parameter %u named %s, want %s", k,
                   m->param_names[k], name);
        FUZZ_CHECK(route_param(m, name) == m->params[k], "route_param(%s) is not parameter %u",
                   name, k);
        if (!strchr(path, '%'))
            FUZZ_CHECK(strstr(path, m->params[k]), "%s: parameter %s is not in the path", path,
                       m->params[k]);
    }

    char *again = reencode(m);
    struct route_match m2;
    enum route_result rr = route(method, again, &m2, NULL, 0);
    FUZZ_CHECK(rr == ROUTE_FOUND && m2.route == r, "%s %s re-encoded as %s gives %d", method, path,
               again, (int)rr);
    for (unsigned k = 0; k < m->nparams; k++)
        FUZZ_CHECK(strcmp(m2.params[k], m->params[k]) == 0, "%s: parameter %u changed", again, k);
    free(again);
}

static void
check_not_allowed(const char *method, const char *path, const char *allow)
{
    FUZZ_CHECK(allow[0], "%s %s: 405 with an empty Allow", method, path);
    char *list = strdup(allow);
    FUZZ_CHECK(list, "out of memory");
    char *save = NULL;
    for (char *m = strtok_r(list, ", ", &save); m; m = strtok_r(NULL, ", ", &save)) {
        FUZZ_CHECK(strcmp(m, method) != 0, "%s %s: 405 that allows %s", method, path, method);
        struct route_match mm;
        FUZZ_CHECK(route(m, path, &mm, NULL, 0) == ROUTE_FOUND, "%s %s is in Allow but not found",
                   m, path);
    }
    free(list);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = fuzz_strndup(data, size);
    char *sp = strchr(in, ' ');
    if (!sp) {
        free(in);
        return 0;
    }
    *sp = '\0';
    /* What access.c keeps: 15 bytes of method, the raw path before ? or #. */
    char method[16];
    snprintf(method, sizeof(method), "%s", in);
    char *path = sp + 1;
    path[strcspn(path, "?#")] = '\0';

    struct route_match m;
    char allow[128];
    enum route_result rr = route(method, path, &m, allow, sizeof(allow));
    switch (rr) {
    case ROUTE_FOUND:
        check_found(method, path, &m);
        if (strcmp(method, "GET") == 0) {
            struct route_match mh;
            FUZZ_CHECK(route("HEAD", path, &mh, NULL, 0) == ROUTE_FOUND && mh.route == m.route,
                       "HEAD %s does not match as GET does", path);
        }
        break;
    case ROUTE_METHOD_NOT_ALLOWED:
        check_not_allowed(method, path, allow);
        break;
    case ROUTE_NOT_FOUND:
    case ROUTE_BAD_PATH:
        for (size_t i = 0; i < N_METHODS; i++) {
            struct route_match mm;
            enum route_result r2 = route(methods[i], path, &mm, NULL, 0);
            FUZZ_CHECK(r2 == rr, "%s %s gives %d, %s gives %d", method, path, (int)rr, methods[i],
                       (int)r2);
        }
        break;
    default:
        FUZZ_CHECK(0, "router_match returned %d", (int)rr);
    }

    /* A short Allow buffer is cut, never overrun, and stays terminated. */
    char small[9];
    memset(small, 'x', sizeof(small));
    struct route_match ms;
    FUZZ_CHECK(route(method, path, &ms, small, sizeof(small) - 1) == rr, "result depends on Allow");
    FUZZ_CHECK(small[sizeof(small) - 1] == 'x', "Allow buffer overrun");
    FUZZ_CHECK(memchr(small, '\0', sizeof(small) - 1), "Allow buffer not terminated");
    free(in);
    return 0;
}
