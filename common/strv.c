/* String vectors (common/strv.h); pure, any thread. */
#include "common/strv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t
strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

void
strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

char **
strv_dup(char *const *v, bool *oom)
{
    if (oom)
        *oom = false;
    if (!v)
        return NULL;
    size_t n = strv_len(v);
    char **d = calloc(n + 1, sizeof(char *));
    for (size_t i = 0; d && i < n; i++) {
        if (!(d[i] = strdup(v[i]))) {
            strv_free(d);
            d = NULL;
        }
    }
    if (!d && oom)
        *oom = true;
    return d;
}

int
strv_push(char ***v, size_t *n, const char *s)
{
    char *copy = strdup(s);
    char **nv = copy ? realloc(*v, (*n + 2) * sizeof(char *)) : NULL;
    if (!nv) {
        free(copy);
        return -ENOMEM;
    }
    nv[(*n)++] = copy;
    nv[*n] = NULL;
    *v = nv;
    return 0;
}

long
strv_env_find(char *const *v, const char *entry)
{
    size_t klen = strcspn(entry, "=");
    for (size_t i = 0; v && v[i]; i++)
        if (strncmp(v[i], entry, klen) == 0 && (v[i][klen] == '=' || v[i][klen] == '\0'))
            return (long)i;
    return -1;
}
