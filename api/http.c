/* The MHD <-> libuv glue and connection-level limits; loop thread only. */
#include "api/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

/* Connections still sending headers when the server is this full get
 * the short "under pressure" header timeout. */
#define PRESSURE_NUM 3
#define PRESSURE_DEN 4
#define PRESSURE_HEADER_TIMEOUT_S 1

/* A connection that has not finished sending its first request's headers,
 * with the moment it must have done so. */
struct pending_conn {
    struct MHD_Connection *conn;
    uint64_t accepted_ms;
    uint64_t deadline_ms;
    bool linked; /* still in the pending list (headers not done) */
    struct pending_conn *prev, *next;
};

struct http_server {
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    uv_poll_t poll;
    uv_timer_t timer;
    uv_timer_t sweep; /* closes connections past their header deadline */
    struct pending_conn *pending;
    bool kick_pending; /* a run was asked for (from inside MHD_run too) */
    int epoll_fd;      /* MHD's */
    /* Connections resumed since the last run, whose sockets are re-armed
     * in MHD's epoll set once that run has taken them back. */
    struct MHD_Connection **rearm;
    size_t n_rearm, cap_rearm;
    unsigned port;
    unsigned connections;
    unsigned idle_timeout_s;
    unsigned header_timeout_s;
    unsigned max_connections;
    bool quiesced;
    int closing_handles;
    void (*done)(void *arg);
    void *done_arg;
};

static void rearm(struct http_server *s);

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
rearm_resumed(struct http_server *s)
{
    for (size_t i = 0; i < s->n_rearm; i++) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(s->rearm[i], MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info)
            continue;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLET,
                                 .data.ptr = s->rearm[i]};
        /* ENOENT: not in the set now; MHD adds it, with a fresh edge, when
         * it needs to wait on it. */
        epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, info->connect_fd, &ev);
    }
    s->n_rearm = 0;
}

static void
run_mhd(struct http_server *s)
{
    s->kick_pending = false;
    size_t pending_rearm = s->n_rearm;
    if (MHD_run(s->mhd) != MHD_YES)
        log_warn("http: MHD_run failed");
    /* The run took back the connections resumed before it. */
    if (pending_rearm)
        rearm_resumed(s);
    rearm(s);
}

void
http_server_resumed(struct http_server *s, struct MHD_Connection *conn)
{
    http_server_kick(s);
    if (s->n_rearm == s->cap_rearm) {
        size_t ncap = s->cap_rearm ? s->cap_rearm * 2 : 16;
        struct MHD_Connection **n = realloc(s->rearm, ncap * sizeof(*n));
        if (!n)
            return;
        s->rearm = n;
        s->cap_rearm = ncap;
    }
    s->rearm[s->n_rearm++] = conn;
}

static void
timer_cb(uv_timer_t *t)
{
    run_mhd(t->data);
}

static void
poll_cb(uv_poll_t *p, int status, int events)
{
    struct http_server *s = p->data;
    if (status < 0)
        log_warn("http: poll on MHD's epoll fd: %s", uv_strerror(status));
    run_mhd(s);
}

/* Re-arms the timer from MHD's next timeout, or stops it when MHD has none. */
static void
rearm(struct http_server *s)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    /* A kick asked for during MHD_run (a resume, a freed slot) must not be
     * overwritten by MHD's own, later timeout. */
    if (s->kick_pending)
        uv_timer_start(&s->timer, timer_cb, 0, 0);
    else if (MHD_get_timeout(s->mhd, &ms) == MHD_YES)
        uv_timer_start(&s->timer, timer_cb, ms, 0);
    else
        uv_timer_stop(&s->timer);
}

void
http_server_kick(struct http_server *s)
{
    s->kick_pending = true;
    uv_timer_start(&s->timer, timer_cb, 0, 0);
}

static bool
under_pressure(const struct http_server *s)
{
    return s->connections * PRESSURE_DEN >= s->max_connections * PRESSURE_NUM;
}

/* Takes p out of the pending list; the memory stays the connection's
 * socket context until MHD reports it closed. */
static void
pending_unlink(struct http_server *s, struct pending_conn *p)
{
    if (!p->linked)
        return;
    if (p->prev)
        p->prev->next = p->next;
    else
        s->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->linked = false;
}

/*
 * MHD's own timeout is an inactivity timer, so a client that trickles one
 * header byte at a time would never be cut off. The sweep enforces a real
 * deadline for the headers; under pressure it tightens every pending
 * connection's deadline, not only new ones', so slow clients cannot hold
 * the slots a normal client needs.
 */
static void
sweep_cb(uv_timer_t *t)
{
    struct http_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    bool pressure = under_pressure(s);
    bool closed = false;
    for (struct pending_conn *p = s->pending; p; p = p->next) {
        uint64_t deadline = p->deadline_ms;
        if (pressure && p->accepted_ms + PRESSURE_HEADER_TIMEOUT_S * 1000 < deadline)
            deadline = p->accepted_ms + PRESSURE_HEADER_TIMEOUT_S * 1000;
        if (now < deadline)
            continue;
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(p->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info) {
            /* MHD sees the socket fail and closes the connection itself. */
            shutdown(info->connect_fd, SHUT_RDWR);
            closed = true;
        }
        p->deadline_ms = UINT64_MAX; /* once is enough; CLOSED unlinks it */
    }
    if (closed)
        http_server_kick(s);
}

static void
notify_connection_cb(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                     enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        s->connections++;
        unsigned timeout = s->header_timeout_s;
        if (under_pressure(s) && timeout > PRESSURE_HEADER_TIMEOUT_S)
            timeout = PRESSURE_HEADER_TIMEOUT_S;
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, timeout);
        struct pending_conn *p = calloc(1, sizeof(*p));
        if (p) {
            p->conn = conn;
            p->accepted_ms = uv_now(s->loop);
            p->deadline_ms = p->accepted_ms + (uint64_t)timeout * 1000;
            p->linked = true;
            p->next = s->pending;
            if (s->pending)
                s->pending->prev = p;
            s->pending = p;
        }
        *socket_ctx = p;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        for (size_t i = 0; i < s->n_rearm; i++)
            if (s->rearm[i] == conn)
                s->rearm[i--] = s->rearm[--s->n_rearm];
        bool was_full = s->connections >= s->max_connections;
        s->connections--;
        if (*socket_ctx) {
            pending_unlink(s, *socket_ctx);
            free(*socket_ctx);
            *socket_ctx = NULL;
        }
        /* At the cap MHD stops watching the listening socket and only
         * looks again on its next run: make that run happen now, so the
         * freed slot is used at once. */
        if (was_full)
            http_server_kick(s);
    }
}

void
http_server_headers_done(struct http_server *s, struct MHD_Connection *conn)
{
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->idle_timeout_s);
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (info && info->socket_context)
        pending_unlink(s, info->socket_context);
}

static void
log_cb(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    log_debug("http: %s", msg);
}

static int
parse_addr(const char *host, unsigned port, struct sockaddr_storage *ss, bool *v6)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *v6 = false;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *v6 = true;
        return 0;
    }
    if (strcmp(host, "localhost") == 0)
        return parse_addr("127.0.0.1", port, ss, v6);
    return -EINVAL;
}

int
http_server_start(uv_loop_t *loop, const struct http_server_opts *opts, struct http_server **out,
                  struct err *err)
{
    struct sockaddr_storage addr;
    bool v6 = false;
    if (parse_addr(opts->host, opts->port, &addr, &v6) < 0)
        return err_set(err, EINVAL, "listen address %s: not a numeric IPv4 or IPv6 address",
                       opts->host);
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s)
        return err_set(err, ENOMEM, "http server: out of memory");
    s->loop = loop;
    s->idle_timeout_s = opts->idle_timeout_s;
    s->header_timeout_s = opts->header_timeout_s;
    s->max_connections = opts->max_connections;

    /* No SO_REUSEPORT: a second daemon on the same address must fail to
     * start, not silently share the port with the first. */
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)opts->port, NULL, NULL, opts->access, opts->cls,
        /* The logger first, so that MHD's messages about the options that
         * follow reach our log too. */
        MHD_OPTION_EXTERNAL_LOGGER, log_cb, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, opts->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        opts->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_CONNECTION_POOL_BYTES, MHD_OPTION_NOTIFY_COMPLETED, opts->completed, opts->cls,
        MHD_OPTION_URI_LOG_CALLBACK, opts->uri_log, opts->cls, MHD_OPTION_NOTIFY_CONNECTION,
        notify_connection_cb, s, MHD_OPTION_END);
    if (!s->mhd) {
        free(s);
        return err_set(err, EADDRINUSE,
                       "listen on %s:%u: cannot bind (address in use or not available here)",
                       opts->host, opts->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : opts->port;
    info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info) {
        MHD_stop_daemon(s->mhd);
        free(s);
        return err_set(err, EIO, "http server: MHD has no epoll fd");
    }
    s->epoll_fd = info->epoll_fd;
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, sweep_cb, 250, 250);
    int rc = uv_poll_init(loop, &s->poll, info->epoll_fd);
    if (rc == 0)
        rc = uv_poll_start(&s->poll, UV_READABLE, poll_cb);
    s->poll.data = s;
    if (rc < 0) {
        uv_close((uv_handle_t *)&s->timer, NULL);
        uv_close((uv_handle_t *)&s->sweep, NULL);
        MHD_stop_daemon(s->mhd);
        /* The timer is closed on the next loop turn; leak s rather than
         * free memory libuv still references. Start-up fails anyway. */
        return err_set(err, -rc, "http server: watch MHD's epoll fd: %s", uv_strerror(rc));
    }
    rearm(s);
    *out = s;
    return 0;
}

unsigned
http_server_port(const struct http_server *s)
{
    return s->port;
}

unsigned
http_server_connections(const struct http_server *s)
{
    return s->connections;
}

void
http_server_quiesce(struct http_server *s)
{
    if (s->quiesced)
        return;
    s->quiesced = true;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

static void
handle_closed_cb(uv_handle_t *h)
{
    struct http_server *s = h->data;
    if (--s->closing_handles > 0)
        return;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    free(s->rearm);
    free(s);
    if (done)
        done(arg);
}

void
http_server_stop(struct http_server *s, void (*done)(void *arg), void *arg)
{
    uv_poll_stop(&s->poll);
    uv_timer_stop(&s->timer);
    uv_timer_stop(&s->sweep);
    MHD_stop_daemon(s->mhd); /* closes every connection: CLOSED unlinks pending */
    s->mhd = NULL;
    s->done = done;
    s->done_arg = arg;
    s->closing_handles = 3;
    uv_close((uv_handle_t *)&s->poll, handle_closed_cb);
    uv_close((uv_handle_t *)&s->timer, handle_closed_cb);
    uv_close((uv_handle_t *)&s->sweep, handle_closed_cb);
}
