/*
 * A streamed request body fed into a service's upload pipe (daemon/bpipe.h),
 * the same way for image imports and volume tar streams: each piece goes
 * in as far as there is room; without room the request is suspended
 * until the service reports room (api_upload_room). Pieces that come
 * after the request was answered (the service stopped early) are read and
 * dropped. Loop thread.
 */
#ifndef BERTH_API_UPLOAD_H
#define BERTH_API_UPLOAD_H

struct api_req;
struct bpipe;

/*
 * Streams req's body into pipe. ended runs when the whole body is in (the
 * pipe is closed for writing by then); it may be NULL, in which case the
 * request is suspended to wait for its answer unless it has one.
 */
void api_upload_attach(struct api_req *req, struct bpipe *pipe, void (*ended)(struct api_req *req));

/* The service has room again: the uploader goes on. */
void api_upload_room(struct api_req *req);

#endif
