/* Percent-decoding (common/pctdecode.h); pure, any thread. */
#include "common/pctdecode.h"

#include <stdlib.h>
#include <string.h>

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long
pct_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval(in[i + 1]), lo = hexval(in[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            if (c == '\0')
                return -1;
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return (long)o;
}

char *
pct_decode_dup(const char *in)
{
    size_t len = strlen(in);
    char *out = malloc(len + 1);
    if (out && pct_decode(in, len, out, len + 1) < 0) {
        free(out);
        out = NULL;
    }
    return out;
}
