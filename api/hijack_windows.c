/*
 * api/hijack.h on Windows: no hijacks yet. api/hijack.c drives MHD's
 * upgraded sockets with POSIX calls (sendmsg, MSG_DONTWAIT, a uv_poll_t
 * on the fd); Winsock needs its own writer, and the only users are
 * Docker's attach and exec start, which need containers, and Windows has
 * none until the hcs driver lands. So hijack_start refuses (ENOTSUP, a
 * clear 4xx/5xx through the error table) and the set stays empty, which
 * keeps api.c's shutdown the same on both systems. Loop thread.
 */
#include "api/hijack.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>

#include "api/request.h"

struct hijack_set {
    char unused;
};

bool
hijack_req_upgrade(const struct api_req *req)
{
    return api_req_header(req, MHD_HTTP_HEADER_UPGRADE) != NULL;
}

struct hijack *
hijack_start(struct api_req *req, const struct hijack_opts *opts, struct err *err)
{
    (void)req;
    (void)opts;
    err_set(err, ENOTSUP,
            "hijack: raw streams on upgraded connections are not supported on "
            "Windows yet");
    return NULL;
}

/* No hijack is ever made, so nothing below receives one. */
struct api_req *
hijack_req(const struct hijack *h)
{
    (void)h;
    return NULL;
}

void
hijack_read_start(struct hijack *h)
{
    (void)h;
}

void
hijack_read_stop(struct hijack *h)
{
    (void)h;
}

int
hijack_writev(struct hijack *h, const uv_buf_t *bufs, unsigned n, hijack_write_cb cb, void *arg)
{
    (void)h;
    (void)bufs;
    (void)n;
    (void)cb;
    (void)arg;
    return -EPIPE;
}

int
hijack_write(struct hijack *h, const void *data, size_t len, hijack_write_cb cb, void *arg)
{
    (void)h;
    (void)data;
    (void)len;
    (void)cb;
    (void)arg;
    return -EPIPE;
}

size_t
hijack_write_queued(const struct hijack *h)
{
    (void)h;
    return 0;
}

size_t
hijack_write_room(const struct hijack *h)
{
    (void)h;
    return 0;
}

void
hijack_close(struct hijack *h)
{
    (void)h;
}

struct hijack_set *
hijack_set_new(uv_loop_t *loop, struct http_server *http)
{
    (void)loop;
    (void)http;
    return calloc(1, sizeof(struct hijack_set));
}

void
hijack_set_begin_shutdown(struct hijack_set *set)
{
    (void)set;
}

void
hijack_set_abort(struct hijack_set *set)
{
    (void)set;
}

unsigned
hijack_set_count(const struct hijack_set *set)
{
    (void)set;
    return 0;
}

void
hijack_set_free(struct hijack_set *set)
{
    free(set);
}

void
hijack_detach(struct hijack *h)
{
    (void)h;
}
