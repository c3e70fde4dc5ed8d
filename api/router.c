/* Path matching for the routing table; pure, any thread. */
#include "api/router.h"

#include <string.h>

#include "common/pctdecode.h"

/* Matches one pattern; 1 on match, 0 no match, -1 bad parameter. Also
 * returns via *literal_score how many literal segments matched. */
static int
match_pattern(const char *pattern, bool rest, const char *path, struct route_match *m,
              int *literal_score)
{
    const char *p = pattern;
    const char *u = path;
    unsigned np = 0;
    int score = 0;
    while (*p == '/' && *u == '/') {
        p++;
        u++;
        const char *pend = strchr(p, '/');
        const char *uend = strchr(u, '/');
        size_t plen = pend ? (size_t)(pend - p) : strlen(p);
        size_t ulen = uend ? (size_t)(uend - u) : strlen(u);
        if (plen > 2 && p[0] == '{' && p[plen - 1] == '}') {
            if (rest && !strchr(p + plen, '{')) {
                /* The last parameter takes the rest, slashes included, up
                 * to the literal segments that follow it in the pattern. */
                size_t tail = strlen(p + plen), left = strlen(u);
                if (tail >= left || memcmp(u + left - tail, p + plen, tail) != 0)
                    return 0;
                ulen = left - tail;
                if (ulen && u[ulen - 1] == '/')
                    return 0;
            }
            if (ulen == 0)
                return 0;
            if (np >= ROUTE_MAX_PARAMS)
                return 0;
            if (pct_decode(u, ulen, m->params[np], ROUTE_PARAM_MAX) < 0)
                return -1;
            size_t nlen =
                plen - 2 < sizeof(m->names_buf[np]) - 1 ? plen - 2 : sizeof(m->names_buf[np]) - 1;
            memcpy(m->names_buf[np], p + 1, nlen);
            m->names_buf[np][nlen] = '\0';
            m->param_names[np] = m->names_buf[np];
            np++;
        } else {
            if (plen != ulen || memcmp(p, u, plen) != 0)
                return 0;
            score++;
        }
        p += plen;
        u += ulen;
    }
    if (*p != '\0' || *u != '\0')
        return 0;
    m->nparams = np;
    *literal_score = score;
    return 1;
}

enum route_result
router_match(const struct route *routes, size_t n, const char *method, const char *path,
             struct route_match *m, char *allow, size_t allow_len)
{
    int best_score = -1;
    bool path_known = false;
    bool bad = false;
    size_t allow_used = 0;
    if (allow && allow_len)
        allow[0] = '\0';
    memset(m, 0, sizeof(*m));

    /* First pass: the best-scoring pattern that matches the path, any method. */
    for (size_t i = 0; i < n; i++) {
        struct route_match tmp;
        int score = 0;
        int r = match_pattern(routes[i].pattern, routes[i].rest, path, &tmp, &score);
        if (r < 0) {
            bad = true;
            continue;
        }
        if (r == 1 && score > best_score)
            best_score = score;
    }
    if (best_score < 0)
        return bad ? ROUTE_BAD_PATH : ROUTE_NOT_FOUND;

    for (size_t i = 0; i < n; i++) {
        struct route_match tmp;
        int score = 0;
        if (match_pattern(routes[i].pattern, routes[i].rest, path, &tmp, &score) != 1 ||
            score != best_score)
            continue;
        if (!path_known)
            m->pattern = routes[i].pattern;
        path_known = true;
        if (strcmp(routes[i].method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0)) {
            *m = tmp;
            /* Parameter names point into tmp's buffer: repoint them. */
            for (unsigned k = 0; k < m->nparams; k++)
                m->param_names[k] = m->names_buf[k];
            m->route = &routes[i];
            m->pattern = routes[i].pattern;
            return ROUTE_FOUND;
        }
        if (allow && allow_len) {
            size_t ml = strlen(routes[i].method);
            if (allow_used + ml + 3 < allow_len) {
                if (allow_used) {
                    memcpy(allow + allow_used, ", ", 2);
                    allow_used += 2;
                }
                memcpy(allow + allow_used, routes[i].method, ml);
                allow_used += ml;
                allow[allow_used] = '\0';
            }
        }
    }
    return path_known ? ROUTE_METHOD_NOT_ALLOWED : ROUTE_NOT_FOUND;
}

const char *
route_param(const struct route_match *m, const char *name)
{
    for (unsigned i = 0; i < m->nparams; i++)
        if (strcmp(m->param_names[i], name) == 0)
            return m->params[i];
    return NULL;
}
