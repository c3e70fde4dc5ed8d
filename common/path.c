/* Lexical path normalisation; see path.h. Any thread, no I/O. */
#include "common/path.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

char *
path_normalise(const char *path, bool keep_dotdot)
{
    if (!path || path[0] != '/') {
        errno = EINVAL;
        return NULL;
    }
    size_t len = strlen(path);
    char *out = malloc(len + 2);
    if (!out) {
        errno = ENOMEM;
        return NULL;
    }
    size_t o = 0; /* out[0..o) is the normal form so far, without a trailing '/' */
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *start = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - start);
        if (n == 0 || (n == 1 && start[0] == '.'))
            continue;
        if (n == 2 && start[0] == '.' && start[1] == '.' && !keep_dotdot) {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* the '/' before the dropped component */
            continue;
        }
        out[o++] = '/';
        memcpy(out + o, start, n);
        o += n;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

bool
path_has_dotdot(const char *path)
{
    for (const char *s = path; s && (s = strstr(s, "..")) != NULL; s += 2) {
        bool start = s == path || s[-1] == '/';
        bool end = s[2] == '\0' || s[2] == '/';
        if (start && end)
            return true;
    }
    return false;
}

bool
path_is_within(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 1 && prefix[0] == '/')
        return path[0] == '/';
    return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}
