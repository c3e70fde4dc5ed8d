/*
 * Errors as values: every fallible function returns 0 or a negative errno
 * (or NULL) and fills a caller-owned struct err, left alone on success.
 * Messages read "what failed: why", lowercase, naming the offending value.
 * Any thread; no allocation.
 */
#ifndef BERTH_COMMON_ERR_H
#define BERTH_COMMON_ERR_H

#include <errno.h>

#define ERR_MSG_MAX 512

/*
 * code is a positive errno value (EINVAL, ENOENT, EEXIST...) or one of the
 * berth-specific codes below, chosen so that the API can map each to one
 * HTTP status without parsing the message.
 */
struct err {
    int code;
    char msg[ERR_MSG_MAX];
};

enum {
    /* The request is well formed but its content is invalid (HTTP 422). */
    ERR_INVALID_CONTENT = 10001,
    /* Something the daemon depends on is missing or unusable (HTTP 503). */
    ERR_UNAVAILABLE = 10002,
    /* The operation conflicts with the current state (HTTP 409). */
    ERR_CONFLICT = 10003,
    /* A registry refused our credentials, or asked for some we do not have
     * (HTTP 401; the message names the registry, never the credentials). */
    ERR_UNAUTHORIZED = 10004,
    /* A server we depend on (a registry, a mirror, a token service) failed or
     * answered something unusable: refused connection, 5xx, broken reply
     * (HTTP 502, the message naming the host). */
    ERR_BAD_GATEWAY = 10005,
    /* A server we depend on did not answer in time (HTTP 504, naming the host). */
    ERR_GATEWAY_TIMEOUT = 10006,
};

/*
 * The format functions here and elsewhere say gnu_printf, not printf: they
 * take C99 formats (%zu, %lld), and on mingw-w64 "printf" would mean
 * msvcrt's rules to the compiler's format checks. Same check on Linux.
 * Clang (the fuzz build) has no gnu_printf and would drop the check: its
 * printf is the C99 one.
 */
#if defined(__clang__)
#define BERTH_FORMAT(fmt, first) __attribute__((format(printf, fmt, first)))
#else
#define BERTH_FORMAT(fmt, first) __attribute__((format(gnu_printf, fmt, first)))
#endif

/* Sets err (if not NULL) and returns -code, so callers can write
 * `return err_set(err, EINVAL, "bad x %s", x);`. */
int err_set(struct err *err, int code, const char *fmt, ...) BERTH_FORMAT(3, 4);

/* As err_set, appending ": strerror(errnum)" to the message. */
int err_errno(struct err *err, int errnum, const char *fmt, ...) BERTH_FORMAT(3, 4);

/* Prefixes err->msg with "context: ", keeping the code; returns -code. */
int err_wrap(struct err *err, const char *fmt, ...) BERTH_FORMAT(2, 3);

/* Copies src into dst (either may be NULL). */
void err_copy(struct err *dst, const struct err *src);

#endif
