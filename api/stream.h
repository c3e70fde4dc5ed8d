/*
 * Streamed response bodies produced on the loop: progress lines of an
 * import, process output, tar downloads. The body is sent with chunked
 * encoding as it is written; when the client has read everything written
 * so far, the connection is suspended (rather than polled) and resumed
 * by the next write or the end. Loop thread.
 *
 * Lifetime: the stream is shared by the response (MHD frees it when the
 * request ends, also when the client disconnects) and the producer,
 * which calls api_stream_release when it will write no more. Writes
 * after the client went away are dropped; api_stream_gone tells.
 */
#ifndef BERTH_API_STREAM_H
#define BERTH_API_STREAM_H

#include <stdbool.h>
#include <stddef.h>

struct api_req;
struct api_stream;

/* Callback for the producer when the client has read everything written
 * (so a producer with back-pressure may write more). May be NULL. */
typedef void (*api_stream_drained_fn)(void *ctx);

/*
 * Starts a streamed reply with status and content type on req (which
 * must not have replied yet). The request is resumed if suspended.
 * Returns NULL on allocation failure (after replying 500).
 */
struct api_stream *api_stream_start(struct api_req *req, unsigned status, const char *content_type);

/* Sets a callback run when the buffer was fully sent. */
void api_stream_on_drained(struct api_stream *s, api_stream_drained_fn fn, void *ctx);

/* A pull source: copies up to max bytes straight into the response's
 * send buffer and returns how many (0: none now); when it returns 0 it may
 * set *end to 1 (the body is complete) or 2 (failed, as api_stream_fail). */
typedef size_t (*api_stream_source_fn)(void *ctx, char *out, size_t max, int *end);

/* Makes the body come from fn, asked whenever what was written is sent:
 * one copy from the producer's buffer to the socket's instead of two
 * through the stream's own buffer. A source that returned 0 calls
 * api_stream_kick once it has more (or ended). */
void api_stream_set_source(struct api_stream *s, api_stream_source_fn fn, void *ctx);
/* The source has data or ended: resume the connection if it waits. */
void api_stream_kick(struct api_stream *s);

/* Appends data; false once the client is gone or on allocation failure. */
bool api_stream_write(struct api_stream *s, const void *data, size_t len);
/* Bytes written and not yet sent. */
size_t api_stream_pending(const struct api_stream *s);
/* Ends the body after what was written. */
void api_stream_end(struct api_stream *s);
/* Ends the body as failed: once what was written is sent, the connection
 * is closed without the final chunk, so the client sees a cut transfer
 * rather than a complete but truncated body. */
void api_stream_fail(struct api_stream *s);
/* True once the client went away (the response was freed). */
bool api_stream_gone(const struct api_stream *s);
/* The producer's release; the stream goes when both sides released. */
void api_stream_release(struct api_stream *s);

/* Called by the request's completion: the request is going away. */
void api_stream_detach(struct api_stream *s);

#endif
