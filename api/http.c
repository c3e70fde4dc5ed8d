/* The MHD <-> libuv glue and connection-level limits; loop thread only. */
#include "api/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

/* Connections still sending headers when the server is this full get
 * the short "under pressure" header timeout. */
#define PRESSURE_NUM 3
#define PRESSURE_DEN 4
#define PRESSURE_HEADER_TIMEOUT_S 2

struct http_server {
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    uv_poll_t poll;
    uv_timer_t timer;
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

static void
run_mhd(struct http_server *s)
{
    if (MHD_run(s->mhd) != MHD_YES)
        log_warn("http: MHD_run failed");
    rearm(s);
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
    if (MHD_get_timeout(s->mhd, &ms) == MHD_YES)
        uv_timer_start(&s->timer, timer_cb, ms, 0);
    else
        uv_timer_stop(&s->timer);
}

void
http_server_kick(struct http_server *s)
{
    uv_timer_start(&s->timer, timer_cb, 0, 0);
}

static void
notify_connection_cb(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                     enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        s->connections++;
        unsigned timeout = s->header_timeout_s;
        if (s->connections * PRESSURE_DEN >= s->max_connections * PRESSURE_NUM &&
            timeout > PRESSURE_HEADER_TIMEOUT_S)
            timeout = PRESSURE_HEADER_TIMEOUT_S;
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, timeout);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        s->connections--;
    }
}

void
http_server_headers_done(struct http_server *s, struct MHD_Connection *conn)
{
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->idle_timeout_s);
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
http_server_start(uv_loop_t *loop, const struct http_server_opts *opts,
                  struct http_server **out, struct err *err)
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

    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)opts->port, NULL, NULL, opts->access, opts->cls, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, opts->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, opts->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED, opts->completed, opts->cls,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection_cb, s, MHD_OPTION_EXTERNAL_LOGGER, log_cb,
        s, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
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
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    int rc = uv_poll_init(loop, &s->poll, info->epoll_fd);
    if (rc == 0)
        rc = uv_poll_start(&s->poll, UV_READABLE, poll_cb);
    s->poll.data = s;
    if (rc < 0) {
        uv_close((uv_handle_t *)&s->timer, NULL);
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
    free(s);
    if (done)
        done(arg);
}

void
http_server_stop(struct http_server *s, void (*done)(void *arg), void *arg)
{
    uv_poll_stop(&s->poll);
    uv_timer_stop(&s->timer);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    s->done = done;
    s->done_arg = arg;
    s->closing_handles = 2;
    uv_close((uv_handle_t *)&s->poll, handle_closed_cb);
    uv_close((uv_handle_t *)&s->timer, handle_closed_cb);
}
