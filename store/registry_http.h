/*
 * One HTTP exchange with a registry, a mirror or a token service, over
 * libcurl, read in pull mode: reg_stream_open returns once the status
 * line and headers are in, and reg_stream_read hands out the body as the
 * caller asks for it, with the transfer paused while the caller is busy
 * (a bounded buffer: memory stays flat whatever the size of the body).
 *
 * Internal to the registry client (registry.c, registry_auth.c): nothing
 * here knows about authentication, retries or redirects; it reports what
 * happened and classifies transport failures:
 *   ERR_BAD_GATEWAY      refused, reset, TLS failure, a broken reply
 *   ERR_GATEWAY_TIMEOUT  no connection or no bytes in time
 *   ECANCELED            the caller's cancel callback said so
 * Messages name the host, never a header value.
 *
 * Blocking; a stream is used by one thread at a time. Thread-safe
 * otherwise (easy handles come from a pool guarded by a mutex).
 */
#ifndef BERTH_STORE_REGISTRY_HTTP_H
#define BERTH_STORE_REGISTRY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

struct reg_http;   /* the shared transport state: handle pool, DNS/TLS cache */
struct reg_stream; /* one exchange in progress */

/* A cancel check, polled while waiting: non-zero stops the exchange. */
struct reg_cancel {
    int (*fn)(void *ctx); /* NULL: never */
    void *ctx;
};

/* Creates the transport (global libcurl initialisation happens once). */
struct reg_http *reg_http_new(struct err *err);
void reg_http_free(struct reg_http *h);

struct reg_http_req {
    const char *method;          /* "GET", "HEAD" or "POST" */
    const char *url;             /* never carries credentials */
    const char *const *headers;  /* "Name: value" lines, NULL-terminated; may be NULL */
    const char *post_body;       /* POST: application/x-www-form-urlencoded */
    int64_t range_from;          /* > 0: ask for bytes range_from- */
    const char *ca_file;         /* NULL: the system CAs */
    unsigned connect_timeout_ms; /* > 0 */
    unsigned low_speed_time_s;   /* abort after this long below 1 byte/s; > 0 */
    unsigned total_timeout_ms;   /* 0: none (blobs) */
    struct reg_cancel cancel;
};

/* What the headers said; strings are owned by the stream. */
struct reg_http_resp {
    long status;
    char *www_authenticate; /* the first WWW-Authenticate header, or NULL */
    char *location;
    char *content_type;
    char *docker_digest;    /* Docker-Content-Digest */
    int64_t content_length; /* -1 when not given */
    int64_t range_start;    /* first byte of a Content-Range, -1 when none */
    long retry_after_s;     /* Retry-After in seconds, -1 when none */
};

/*
 * Starts the exchange and waits for the response headers. host names the
 * server in messages ("registry 127.0.0.1:5000", "token service
 * auth.example"). On success *out is owned by the caller
 * (reg_stream_close), whatever the status. On a transport failure
 * *can_retry says whether another attempt may succeed (a reset or a
 * timeout may, a certificate that does not verify will not).
 */
int reg_stream_open(struct reg_http *h, const struct reg_http_req *req, const char *host,
                    struct reg_stream **out, bool *can_retry, struct err *err);

/* After reg_stream_read failed: whether another attempt may succeed. */
bool reg_stream_retryable(const struct reg_stream *s);

const struct reg_http_resp *reg_stream_resp(const struct reg_stream *s);

/* Reads up to len body bytes: > 0, 0 at the end, or a negative errno with
 * err set (classified as above). */
ssize_t reg_stream_read(struct reg_stream *s, void *buf, size_t len, struct err *err);

/* Body bytes received from the server so far (read or buffered). */
int64_t reg_stream_received(const struct reg_stream *s);

/*
 * Reads the rest of the body into a new NUL-terminated buffer (caller
 * frees). A body over max bytes fails with EFBIG before more is read.
 */
int reg_stream_read_all(struct reg_stream *s, size_t max, char **out, size_t *len, struct err *err);

/* Ends the exchange (the connection goes back to the pool when it can be
 * reused); NULL is a no-op. */
void reg_stream_close(struct reg_stream *s);

/* The origin of an absolute URL, "scheme://host:port" with the default
 * port filled in, into out (caller frees); -EINVAL for a URL that is not
 * http or https. host_port (may be NULL) gets "host[:port]" as written. */
int reg_url_origin(const char *url, char **out, char **host_port);

/* Resolves a Location header against the URL it answered (caller frees). */
char *reg_url_resolve(const char *base, const char *location);

/* Percent-encodes s for a query string (caller frees); NULL on OOM. */
char *reg_url_escape(const char *s);

#endif
