/*
 * api/http_loop.h on Linux: MHD's epoll fd under one uv_poll_t, the
 * re-arming of resumed connections' sockets, and TCP_INFO for the time of
 * a connection's last data. Loop thread only.
 */
#include "api/http_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "common/log.h"

struct http_loop {
    uv_poll_t poll;
    struct MHD_Daemon *mhd;
    int epoll_fd; /* MHD's */
    void (*run)(void *arg);
    void *arg;
    /* Connections resumed since the last run, whose sockets are re-armed
     * in MHD's epoll set once that run has taken them back. */
    struct MHD_Connection **rearm;
    size_t n_rearm, cap_rearm;
    size_t pending; /* n_rearm when the current run began */
    void (*done)(void *arg);
    void *done_arg;
};

unsigned
http_loop_mhd_flags(void)
{
    return MHD_USE_EPOLL;
}

/*
 * MHD (0.9.75) keeps a suspended connection's socket in its edge-triggered
 * epoll set but drops the events that arrive while it is suspended, and
 * does not mark it readable again when it resumes: data or a hang-up that
 * came in the meantime is never seen, and an upload whose client went
 * away hangs until the idle timeout. Modifying the registration (same
 * events, same data, as MHD registers them) makes the kernel report the
 * socket's current readiness again.
 */
static void
rearm_resumed(struct http_loop *l)
{
    for (size_t i = 0; i < l->n_rearm; i++) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(l->rearm[i], MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info)
            continue;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLET,
                                 .data.ptr = l->rearm[i]};
        /* ENOENT: not in the set now; MHD adds it, with a fresh edge, when
         * it needs to wait on it. */
        epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, info->connect_fd, &ev);
    }
    l->n_rearm = 0;
}

static void
poll_cb(uv_poll_t *p, int status, int events)
{
    struct http_loop *l = p->data;
    if (status < 0)
        log_warn("http: poll on MHD's epoll fd: %s", uv_strerror(status));
    l->run(l->arg);
}

int
http_loop_start(uv_loop_t *loop, struct MHD_Daemon *mhd, void (*run)(void *arg), void *arg,
                struct http_loop **out, struct err *err)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info)
        return err_set(err, EIO, "http server: MHD has no epoll fd");
    struct http_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return err_set(err, ENOMEM, "http server: out of memory");
    l->mhd = mhd;
    l->epoll_fd = info->epoll_fd;
    l->run = run;
    l->arg = arg;
    int rc = uv_poll_init(loop, &l->poll, l->epoll_fd);
    if (rc < 0) {
        free(l);
        return err_set(err, -rc, "http server: watch MHD's epoll fd: %s", uv_strerror(rc));
    }
    l->poll.data = l;
    if ((rc = uv_poll_start(&l->poll, UV_READABLE, poll_cb)) < 0) {
        /* The handle is closed on the next loop turn; leak l rather than
         * free memory libuv still references. Start-up fails anyway. */
        uv_close((uv_handle_t *)&l->poll, NULL);
        return err_set(err, -rc, "http server: watch MHD's epoll fd: %s", uv_strerror(rc));
    }
    *out = l;
    return 0;
}

void
http_loop_run_begin(struct http_loop *l)
{
    l->pending = l->n_rearm;
}

void
http_loop_run_end(struct http_loop *l)
{
    /* The run took back the connections resumed before it. */
    if (l->pending)
        rearm_resumed(l);
    l->pending = 0;
}

void
http_loop_resumed(struct http_loop *l, struct MHD_Connection *conn)
{
    if (l->n_rearm == l->cap_rearm) {
        size_t ncap = l->cap_rearm ? l->cap_rearm * 2 : 16;
        struct MHD_Connection **n = realloc(l->rearm, ncap * sizeof(*n));
        if (!n)
            return;
        l->rearm = n;
        l->cap_rearm = ncap;
    }
    l->rearm[l->n_rearm++] = conn;
}

void
http_loop_conn_closed(struct http_loop *l, struct MHD_Connection *conn, intptr_t fd)
{
    (void)fd;
    for (size_t i = 0; i < l->n_rearm; i++)
        if (l->rearm[i] == conn)
            l->rearm[i--] = l->rearm[--l->n_rearm];
}

void
http_loop_listener_closed(struct http_loop *l, intptr_t fd)
{
    (void)l;
    (void)fd; /* not in our poll: MHD's epoll set had it */
}

/*
 * MHD reads whatever arrives into its own buffer, so the socket itself
 * shows nothing; the kernel's record of the last data received does.
 */
bool
http_loop_new_data(struct http_loop *l, intptr_t fd, uint64_t since_ms, uint64_t now_ms,
                   uint64_t margin_ms, uint64_t *ago_ms)
{
    (void)l;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt((int)fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
        return false;
    uint64_t arrived = now_ms - ti.tcpi_last_data_recv;
    if (arrived <= since_ms + margin_ms)
        return false;
    *ago_ms = ti.tcpi_last_data_recv;
    return true;
}

static void
closed_cb(uv_handle_t *h)
{
    struct http_loop *l = h->data;
    void (*done)(void *) = l->done;
    void *arg = l->done_arg;
    free(l->rearm);
    free(l);
    if (done)
        done(arg);
}

void
http_loop_stop(struct http_loop *l, void (*done)(void *arg), void *arg)
{
    l->done = done;
    l->done_arg = arg;
    uv_poll_stop(&l->poll);
    uv_close((uv_handle_t *)&l->poll, closed_cb);
}
