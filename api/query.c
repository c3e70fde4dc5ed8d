/*
 * Query parameter checks for /v1 routes (api/query.h). Loop thread.
 */
#include "api/query.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/request.h"
#include "api/router.h"

bool
api_query_entry_takes(const char *spec, const char *name)
{
    size_t len = strcspn(spec, ":");
    if (len >= 2 && spec[len - 2] == '.' && spec[len - 1] == '*')
        return strncmp(name, spec, len - 1) == 0 && name[len - 1] != '\0';
    return strlen(name) == len && strncmp(name, spec, len) == 0;
}

static bool
is_flag(const char *spec)
{
    const char *c = strchr(spec, ':');
    return c && strcmp(c + 1, "flag") == 0;
}

struct check {
    const struct route *route;
    struct err *err;
    int rc;
};

/* What the route takes, for the message: "offset, follow" or "none". */
static void
taken(const struct route *route, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *const *q = route->query; q && *q; q++) {
        size_t l = strcspn(*q, ":");
        if (n + l + 3 >= len)
            break;
        if (n) {
            memcpy(out + n, ", ", 2);
            n += 2;
        }
        memcpy(out + n, *q, l);
        n += l;
        out[n] = '\0';
    }
    if (!n)
        snprintf(out, len, "none");
}

static enum MHD_Result
check_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct check *c = cls;
    const char *const *q = c->route->query;
    for (; q && *q; q++)
        if (api_query_entry_takes(*q, key))
            break;
    if (!q || !*q) {
        char list[256];
        taken(c->route, list, sizeof(list));
        c->rc = err_set(c->err, EINVAL, "unknown query parameter \"%.64s\" (%s %s takes: %s)", key,
                        c->route->method, c->route->pattern, list);
        return MHD_NO;
    }
    if (is_flag(*q) && value && strcmp(value, "0") != 0 && strcmp(value, "1") != 0 &&
        strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
        c->rc =
            err_set(c->err, EINVAL, "query \"%s\": %.40s is not 0, 1, true or false", key, value);
        return MHD_NO;
    }
    return MHD_YES;
}

int
api_query_check(const struct api_req *req, const struct route *route, struct err *err)
{
    struct check c = {.route = route, .err = err};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, check_cb, &c);
    return c.rc;
}
