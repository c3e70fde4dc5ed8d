/* Streamed response bodies over MHD's content-reader callback. Loop thread. */
#include "api/stream.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"

struct api_stream {
    struct api_req *req; /* NULL once the response was freed */
    char *buf;
    size_t start, len, cap; /* unsent bytes at buf[start, start+len) */
    bool ended;
    bool failed;  /* ended by api_stream_fail */
    bool waiting; /* the reader suspended the connection for want of data */
    int refs;
    api_stream_drained_fn drained;
    void *drained_ctx;
    api_stream_source_fn source;
    void *source_ctx;
};

static void
stream_unref(struct api_stream *s)
{
    if (--s->refs == 0) {
        free(s->buf);
        free(s);
    }
}

static ssize_t
reader_cb(void *cls, uint64_t pos, char *out, size_t max)
{
    struct api_stream *s = cls;
    /* A producer with back-pressure may have more at hand: ask first, so
     * the connection is suspended only when there really is nothing. */
    if (s->len == 0 && !s->ended && s->drained)
        s->drained(s->drained_ctx);
    if (s->len == 0 && !s->ended && s->source) {
        int end = 0;
        size_t n = s->source(s->source_ctx, out, max, &end);
        if (n > 0)
            return (ssize_t)n;
        if (end) {
            s->ended = true;
            s->failed = end == 2;
        }
    }
    if (s->len == 0) {
        if (s->ended)
            return s->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
        /* Nothing to send yet: wait without spinning. */
        if (s->req && !s->req->suspended) {
            api_req_suspend(s->req);
            s->waiting = true;
        }
        return 0;
    }
    size_t n = s->len < max ? s->len : max;
    memcpy(out, s->buf + s->start, n);
    s->start += n;
    s->len -= n;
    if (s->len == 0)
        s->start = 0;
    return (ssize_t)n;
}

static void
free_cb(void *cls)
{
    struct api_stream *s = cls;
    if (s->req)
        s->req->stream = NULL;
    s->req = NULL;
    stream_unref(s);
}

static void
wake(struct api_stream *s)
{
    if (s->waiting && s->req) {
        s->waiting = false;
        api_req_resume(s->req);
    }
}

struct api_stream *
api_stream_start(struct api_req *req, unsigned status, const char *content_type)
{
    struct api_stream *s = calloc(1, sizeof(*s));
    if (!s) {
        api_reply_fail(req, ENOMEM, "out of memory");
        return NULL;
    }
    s->req = req;
    s->refs = 2;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reader_cb, s, free_cb);
    if (!resp) {
        free(s);
        api_reply_fail(req, ENOMEM, "out of memory");
        return NULL;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    api_reply_response(req, status, resp);
    req->stream = s;
    api_req_resume(req);
    return s;
}

void
api_stream_on_drained(struct api_stream *s, api_stream_drained_fn fn, void *ctx)
{
    s->drained = fn;
    s->drained_ctx = ctx;
}

void
api_stream_set_source(struct api_stream *s, api_stream_source_fn fn, void *ctx)
{
    s->source = fn;
    s->source_ctx = ctx;
}

void
api_stream_kick(struct api_stream *s)
{
    wake(s);
}

bool
api_stream_write(struct api_stream *s, const void *data, size_t len)
{
    if (!s->req || s->ended)
        return false;
    if (len == 0)
        return true; /* s->buf may still be NULL: memcpy must not see it */
    if (s->start + s->len + len > s->cap) {
        if (s->start) {
            memmove(s->buf, s->buf + s->start, s->len);
            s->start = 0;
        }
        if (s->len + len > s->cap) {
            size_t ncap = s->cap ? s->cap : 4096;
            while (ncap < s->len + len)
                ncap *= 2;
            char *n = realloc(s->buf, ncap);
            if (!n)
                return false;
            s->buf = n;
            s->cap = ncap;
        }
    }
    memcpy(s->buf + s->start + s->len, data, len);
    s->len += len;
    wake(s);
    return true;
}

size_t
api_stream_pending(const struct api_stream *s)
{
    return s->len;
}

void
api_stream_end(struct api_stream *s)
{
    s->ended = true;
    wake(s);
}

void
api_stream_fail(struct api_stream *s)
{
    s->failed = true;
    api_stream_end(s);
}

bool
api_stream_gone(const struct api_stream *s)
{
    return s->req == NULL;
}

void
api_stream_release(struct api_stream *s)
{
    if (!s)
        return;
    s->drained = NULL;
    s->source = NULL;
    if (!s->ended)
        api_stream_end(s);
    stream_unref(s);
}

void
api_stream_detach(struct api_stream *s)
{
    s->req = NULL;
    s->waiting = false;
}
