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
 * code is a positive errno value or one of the berth-specific codes
 * below, set where the error happens, so that every front end can map it
 * to its own status without parsing the message. The meanings:
 *
 *   EINVAL               the request itself is malformed (a field, a query)
 *   ENOENT               what it names does not exist
 *   EEXIST, EBUSY,       it conflicts with the current state (a name taken,
 *   ERR_CONFLICT           a process still running, a container deleting)
 *   ERR_INVALID_CONTENT  well formed, but what it carries is unusable (an
 *                          image, a tar stream, a program that cannot run)
 *   ENOTSUP              asks for something this host does not offer
 *   EFBIG                larger than a limit allows
 *   ERR_MEDIA_TYPE       a body of a type the operation does not take
 *   ERR_DEADLINE         the caller's own time limit passed (a wait)
 *   ETIMEDOUT            something the daemon waited on did not answer
 *   ERR_UNAUTHORIZED     a registry refused or wants credentials
 *   ERR_BAD_GATEWAY,     a server the daemon depends on failed, or did not
 *   ERR_GATEWAY_TIMEOUT    answer in time
 *   ERR_UNAVAILABLE,     the daemon cannot do it now (no store, no runtime,
 *   ECANCELED              shutting down)
 *   ENOSPC, EDQUOT       out of storage
 *   anything else        an internal error
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
    /* The caller's own deadline passed before the result (HTTP 408). */
    ERR_DEADLINE = 10007,
    /* A body of a media type the operation does not take (HTTP 415). */
    ERR_MEDIA_TYPE = 10008,
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

/* Prefixes err->msg with "context: " unless it starts with that already,
 * keeping the code; returns -code. */
int err_wrap(struct err *err, const char *fmt, ...) BERTH_FORMAT(2, 3);

/* Copies src into dst (either may be NULL). */
void err_copy(struct err *dst, const struct err *src);

#endif
