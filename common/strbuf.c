/* A growing string (common/strbuf.h); any thread. */
#include "common/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
reserve(struct strbuf *b, size_t more)
{
    if (b->failed)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void
strbuf_put(struct strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void
strbuf_puts(struct strbuf *b, const char *s)
{
    strbuf_put(b, s, strlen(s));
}

void
strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *
strbuf_steal(struct strbuf *b, size_t *len)
{
    char *out = NULL;
    if (!b->failed && reserve(b, 0)) {
        b->data[b->len] = '\0';
        out = b->data;
        if (len)
            *len = b->len;
        b->data = NULL;
    }
    strbuf_clear(b);
    return out;
}

void
strbuf_clear(struct strbuf *b)
{
    free(b->data);
    *b = (struct strbuf){0};
}
