/* Construction and wrapping of struct err; any thread. */
#include "common/err.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int
err_set(struct err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return -code;
}

int
err_errno(struct err *err, int errnum, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof(err->msg))
            snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(errnum));
        err->code = errnum;
    }
    return -errnum;
}

int
err_wrap(struct err *err, const char *fmt, ...)
{
    if (!err)
        return -EIO;
    char prefix[ERR_MSG_MAX];
    char old[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    /* Layers that each name the operation (the driver, then the registry)
     * would otherwise say it twice: "create container x1: create container x1: ...". */
    size_t plen = strlen(prefix);
    bool said =
        strncmp(err->msg, prefix, plen) == 0 && err->msg[plen] == ':' && err->msg[plen + 1] == ' ';
    if (!said) {
        memcpy(old, err->msg, sizeof(old));
        snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
    }
    if (err->code == 0)
        err->code = EIO;
    return -err->code;
}

void
err_copy(struct err *dst, const struct err *src)
{
    if (dst && src && dst != src)
        memcpy(dst, src, sizeof(*dst));
}
