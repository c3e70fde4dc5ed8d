/* Lexical path normalisation (common/path.h); pure, any thread. */
#include "common/path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int
path_normalize(const char *in, char **out)
{
    size_t len = in ? strlen(in) : 0;
    if (len == 0 || in[0] != '/' || len >= PATH_MAX || strchr(in, '\n'))
        return -EINVAL;
    char *buf = malloc(len + 2);
    if (!buf)
        return -ENOMEM;
    size_t o = 0;
    const char *s = in;
    while (*s) {
        while (*s == '/')
            s++;
        size_t seg = strcspn(s, "/");
        if (seg == 0)
            break;
        if (seg == 1 && s[0] == '.') {
            s += seg;
            continue;
        }
        if (seg == 2 && s[0] == '.' && s[1] == '.') {
            free(buf);
            return -EINVAL;
        }
        buf[o++] = '/';
        memcpy(buf + o, s, seg);
        o += seg;
        s += seg;
    }
    if (o == 0)
        buf[o++] = '/';
    buf[o] = '\0';
    *out = buf;
    return 0;
}
