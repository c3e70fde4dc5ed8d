/*
 * The MHD <-> libuv glue and connection-level limits; loop thread only.
 * What differs between Linux and Windows (how MHD's sockets are watched,
 * when an idle connection saw data) is api/http_loop.h's.
 */
#include "api/http.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/http_loop.h"
#include "common/log.h"
#include "common/sock.h"

/* Connections still sending headers when the server is this full get
 * the short "under pressure" header deadline. */
#define PRESSURE_NUM 3
#define PRESSURE_DEN 4
#define PRESSURE_HEADER_TIMEOUT_S 1

/* How often header deadlines and idle connections are looked at. */
#define SWEEP_MS 250

/* An idle keep-alive connection whose kernel saw data this long after its
 * last request completed has begun its next request. The kernel's
 * timestamp has jiffy granularity (at most 10 ms); the margin keeps the
 * last bytes of the previous request from counting as new ones. */
#define NEXT_REQUEST_MARGIN_MS 20

/* The oldest connection still sending its headers is evicted before an
 * idle keep-alive one only once it is older than this: younger, its
 * request may simply still be in flight. */
#define EVICT_HEAD_MIN_AGE_MS 100
/* No connection is evicted in its first milliseconds (its client may not
 * have sent its request yet), and eviction looks at no more than this many
 * of the oldest candidates of each kind. */
#define EVICT_GRACE_MS 20
#define EVICT_SCAN 8
/* At the limit, this many are evicted at once, so MHD accepts a batch of
 * newcomers per run rather than one. */
#define EVICT_BATCH 8
/* MHD runs in one go at most while evicting (see run_mhd). */
#define MHD_RUNS_AT_LIMIT 4
/* An idle keep-alive connection is evicted only once it has been idle this
 * long: a busy client's connection is idle between every two requests. */
#define EVICT_IDLE_MIN_MS 1000

/*
 * Where a connection is in its life. Only HEAD has a deadline of ours;
 * REQUEST is governed by MHD's idle timeout and peer_sweep.c's body rate; IDLE
 * by MHD's idle timeout, until its next request begins. UPGRADED is no
 * longer HTTP (api/hijack.c owns it, and MHD has it suspended, without
 * its idle timeout): no deadline, never evicted, until it is closed.
 */
enum conn_phase {
    CONN_HEAD,     /* sending a request line and headers */
    CONN_REQUEST,  /* headers complete, until the request completes */
    CONN_IDLE,     /* keep-alive, between two requests */
    CONN_CLOSING,  /* shut down by us; MHD has not reported it closed yet */
    CONN_UPGRADED, /* hijacked: a raw stream until MHD closes it */
};

/* Connections of one phase, oldest first. */
struct conn_list {
    struct http_conn *first, *last;
};

/* One connection, from MHD's STARTED to its CLOSED notification: its
 * socket context. */
struct http_conn {
    struct MHD_Connection *conn;
    intptr_t fd;
    enum conn_phase phase;
    bool reserve; /* accepted past max_connections: health only */
    /* Times in ms of uv_hrtime(), not of the loop's cached clock: a client
     * gets its grace in real time even when a loop iteration ran long. */
    uint64_t since_ms;    /* the phase began */
    uint64_t deadline_ms; /* CONN_HEAD: its headers are due */
    struct conn_list *list;
    struct http_conn *prev, *next;
};

struct http_server {
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    struct http_loop *glue; /* api/http_loop.h */
    uv_timer_t timer;
    uv_timer_t sweep; /* header deadlines, next-request detection */
    uv_timer_t evict; /* at the limit with no one to evict yet: try again */
    struct conn_list heads, idle;
    bool kick_pending; /* a run was asked for (from inside MHD_run too) */
    unsigned port;
    unsigned connections; /* every open connection, reserve ones included */
    unsigned regular;     /* the ones within max_connections */
    unsigned closing;     /* shut down by us, not yet closed by MHD */
    unsigned upgraded;    /* hijacked connections (CONN_UPGRADED) */
    unsigned evicted;     /* since start, for the log */
    unsigned idle_timeout_s;
    unsigned header_timeout_s;
    unsigned max_connections;
    unsigned limit; /* MHD's: max_connections + reserve_connections */
    bool quiesced;
    int closing_handles;
    void (*done)(void *arg);
    void *done_arg;
};

static void rearm(struct http_server *s);

/*
 * One MHD_run, or a few in a row while connections are being evicted at
 * the limit: MHD closes the evicted ones on the run after the one that
 * accepted, and accepts again only on the run after that, so without
 * this a flood would advance by one loop iteration per step.
 */
static void
run_mhd(struct http_server *s)
{
    s->kick_pending = false;
    http_loop_run_begin(s->glue);
    for (unsigned runs = 0; runs < MHD_RUNS_AT_LIMIT; runs++) {
        unsigned evicted = s->evicted, closing = s->closing;
        if (MHD_run(s->mhd) != MHD_YES)
            log_warn("http: MHD_run failed");
        if (s->evicted == evicted && s->closing == closing)
            break;
    }
    http_loop_run_end(s->glue);
    rearm(s);
}

void
http_server_resumed(struct http_server *s, struct MHD_Connection *conn)
{
    http_server_kick(s);
    http_loop_resumed(s->glue, conn);
}

static void
timer_cb(uv_timer_t *t)
{
    run_mhd(t->data);
}

static void
glue_run_cb(void *arg)
{
    run_mhd(arg);
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

static void
list_append(struct conn_list *l, struct http_conn *c)
{
    c->list = l;
    c->next = NULL;
    c->prev = l->last;
    if (l->last)
        l->last->next = c;
    else
        l->first = c;
    l->last = c;
}

static void
list_unlink(struct http_conn *c)
{
    struct conn_list *l = c->list;
    if (!l)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->first = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->last = c->prev;
    c->prev = c->next = NULL;
    c->list = NULL;
}

static struct http_conn *
conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* Enters CONN_HEAD: the headers are due header_timeout_s from since_ms
 * (one second for a reserve connection, which only health may use). */
static void
conn_enter_head(struct http_server *s, struct http_conn *c, uint64_t since_ms)
{
    list_unlink(c);
    c->phase = CONN_HEAD;
    c->since_ms = since_ms;
    unsigned timeout = c->reserve ? PRESSURE_HEADER_TIMEOUT_S : s->header_timeout_s;
    if (timeout > s->header_timeout_s)
        timeout = s->header_timeout_s;
    c->deadline_ms = since_ms + (uint64_t)timeout * 1000;
    list_append(&s->heads, c);
}

/* Shuts the socket down; MHD sees it fail on its next run and closes the
 * connection itself (its CLOSED notification frees c). */
static void
conn_shut(struct http_server *s, struct http_conn *c)
{
    /* A hijacked connection is its hijack's to close. */
    if (c->phase == CONN_CLOSING || c->phase == CONN_UPGRADED)
        return;
    list_unlink(c);
    c->phase = CONN_CLOSING;
    s->closing++;
    sock_shutdown(c->fd);
    http_server_kick(s);
}

static uint64_t
hr_ms(void)
{
    return uv_hrtime() / 1000000;
}

/*
 * Whether an idle keep-alive connection has received data since it went
 * idle, and how many ms ago the latest of it came (api/http_loop.h).
 */
static bool
conn_has_new_data(struct http_server *s, const struct http_conn *c, uint64_t *ago_ms)
{
    return http_loop_new_data(s->glue, c->fd, c->since_ms, hr_ms(), NEXT_REQUEST_MARGIN_MS, ago_ms);
}

/*
 * MHD's own timeout is an inactivity timer, so a client that trickles one
 * header byte at a time would never be cut off. The sweep enforces a real
 * deadline for the headers of every request, the first on a connection
 * (from the accept) and every later one (from the first byte of it the
 * kernel saw after the previous request completed). Under pressure it
 * tightens every pending connection's deadline, not only new ones', so
 * slow clients cannot hold the slots a normal client needs.
 */
static void
sweep_cb(uv_timer_t *t)
{
    struct http_server *s = t->data;
    uint64_t now = hr_ms();
    bool pressure = under_pressure(s);
    struct http_conn *next;
    for (struct http_conn *c = s->idle.first; c; c = next) {
        next = c->next;
        uint64_t ago = 0;
        if (conn_has_new_data(s, c, &ago))
            conn_enter_head(s, c, now > ago ? now - ago : 0);
    }
    for (struct http_conn *c = s->heads.first; c; c = next) {
        next = c->next;
        uint64_t deadline = c->deadline_ms;
        if (pressure && c->since_ms + PRESSURE_HEADER_TIMEOUT_S * 1000 < deadline)
            deadline = c->since_ms + PRESSURE_HEADER_TIMEOUT_S * 1000;
        if (now >= deadline) {
            log_debug("http: request headers not complete after %.1f s: closing",
                      (double)(now - c->since_ms) / 1000.0);
            conn_shut(s, c);
        }
    }
}

/* Whether c may be evicted now: not the connection just accepted, old
 * enough for its client to have sent its request, and with nothing in the
 * socket that MHD has yet to read (a request on its way in). */
static bool
evictable(const struct http_conn *c, const struct http_conn *newest, uint64_t now,
          uint64_t min_age_ms)
{
    if (c == newest || now - c->since_ms < min_age_ms)
        return false;
    int unread = 0;
    return sock_unread(c->fd, &unread) == 0 && unread == 0;
}

static struct http_conn *
first_evictable(const struct conn_list *l, const struct http_conn *newest, uint64_t now,
                uint64_t min_age_ms)
{
    unsigned looked = 0;
    for (struct http_conn *c = l->first; c && looked < EVICT_SCAN; c = c->next, looked++)
        if (evictable(c, newest, now, min_age_ms))
            return c;
    return NULL;
}

static void evict_timer_cb(uv_timer_t *t);

/*
 * At MHD's limit (MHD then stops accepting), makes room for the next
 * connection by shutting down the one that holds a slot for the least
 * reason: the oldest still sending its headers (once past
 * EVICT_HEAD_MIN_AGE_MS), or else the oldest keep-alive one idle for
 * EVICT_IDLE_MIN_MS.
 * Connections with a request in progress are never evicted. So a flood
 * of slow clients cannot keep a quick one (a health probe) waiting in the
 * kernel's accept queue. When nobody may be evicted yet (all too young),
 * it tries again a grace period later: MHD accepts nothing meanwhile, so
 * no accept would call it.
 */
static void
evict_if_full(struct http_server *s, const struct http_conn *newest)
{
    if (s->connections - s->closing < s->limit || !s->mhd)
        return;
    uint64_t now = hr_ms();
    for (unsigned n = 0; n < EVICT_BATCH; n++) {
        struct http_conn *head = first_evictable(&s->heads, newest, now, EVICT_GRACE_MS);
        struct http_conn *idle = first_evictable(&s->idle, newest, now, EVICT_IDLE_MIN_MS);
        struct http_conn *victim = head;
        if (!head || (idle && now - head->since_ms < EVICT_HEAD_MIN_AGE_MS))
            victim = idle;
        if (!victim) {
            if (n == 0 && !uv_is_active((uv_handle_t *)&s->evict))
                uv_timer_start(&s->evict, evict_timer_cb, EVICT_GRACE_MS, 0);
            return;
        }
        s->evicted++;
        log_debug("http: at the connection limit (%u): closing a%s connection %.1f s old (%u so "
                  "far)",
                  s->limit, victim->phase == CONN_HEAD ? " pending" : "n idle",
                  (double)(now - victim->since_ms) / 1000.0, s->evicted);
        conn_shut(s, victim);
    }
}

static void
evict_timer_cb(uv_timer_t *t)
{
    evict_if_full(t->data, NULL);
}

static void
notify_connection_cb(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                     enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        s->connections++;
        struct http_conn *c = calloc(1, sizeof(*c));
        *socket_ctx = c;
        if (!c) {
            /* Untracked: only MHD's idle timeout applies to it. */
            return;
        }
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->conn = conn;
        c->fd = info ? (intptr_t)info->connect_fd : -1;
        c->reserve = s->regular >= s->max_connections;
        if (!c->reserve)
            s->regular++;
        conn_enter_head(s, c, hr_ms());
        /* Keep one slot free for whoever comes next. */
        evict_if_full(s, c);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (s->glue)
            http_loop_conn_closed(s->glue, conn, info ? (intptr_t)info->connect_fd : -1);
        bool was_full = s->connections >= s->limit;
        s->connections--;
        struct http_conn *c = *socket_ctx;
        if (c) {
            if (!c->reserve)
                s->regular--;
            if (c->phase == CONN_CLOSING)
                s->closing--;
            if (c->phase == CONN_UPGRADED)
                s->upgraded--;
            list_unlink(c);
            free(c);
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
http_server_request_begins(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_of(conn);
    if (c && c->phase == CONN_IDLE)
        conn_enter_head(s, c, hr_ms());
}

void
http_server_headers_done(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_of(conn);
    if (!c || c->phase == CONN_CLOSING)
        return;
    list_unlink(c);
    c->phase = CONN_REQUEST;
    c->since_ms = hr_ms();
}

void
http_server_request_done(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_of(conn);
    if (!c || c->phase != CONN_REQUEST)
        return;
    c->phase = CONN_IDLE;
    c->since_ms = hr_ms();
    list_append(&s->idle, c);
}

void
http_server_conn_upgraded(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_of(conn);
    /* One we shut down already is dying: the hijack finds its socket shut. */
    if (!c || c->phase == CONN_UPGRADED || c->phase == CONN_CLOSING)
        return;
    list_unlink(c);
    c->phase = CONN_UPGRADED;
    s->upgraded++;
}

unsigned
http_server_upgraded(const struct http_server *s)
{
    return s->upgraded;
}

bool
http_server_conn_reserved(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_of(conn);
    return c && c->reserve;
}

void
http_server_conn_close(struct http_server *s, struct MHD_Connection *conn)
{
    struct http_conn *c = conn_of(conn);
    if (c) {
        conn_shut(s, c);
        return;
    }
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info) {
        sock_shutdown((intptr_t)info->connect_fd);
        http_server_kick(s);
    }
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
    if (!opts->has_listen_fd && parse_addr(opts->host, opts->port, &addr, &v6) < 0)
        return err_set(err, EINVAL, "listen address %s: not a numeric IPv4 or IPv6 address",
                       opts->host);
    struct http_server *s = calloc(1, sizeof(*s));
    if (!s) {
        if (opts->has_listen_fd)
            close(opts->listen_fd);
        return err_set(err, ENOMEM, "http server: out of memory");
    }
    s->loop = loop;
    s->idle_timeout_s = opts->idle_timeout_s;
    s->header_timeout_s = opts->header_timeout_s;
    s->max_connections = opts->max_connections;
    s->limit = opts->max_connections + opts->reserve_connections;

    /* No SO_REUSEPORT: a second daemon on the same address must fail to
     * start, not silently share the port with the first. */
    /* MHD_ALLOW_UPGRADE: api/hijack.c's 101 replies. */
    unsigned flags =
        http_loop_mhd_flags() | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    /* The address: MHD binds it, or takes the socket the caller bound. */
    struct MHD_OptionItem where[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (opts->has_listen_fd)
        where[0] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, opts->listen_fd, NULL};
    else
        where[0] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &addr};
    s->mhd = MHD_start_daemon(flags, (uint16_t)opts->port, NULL, NULL, opts->access, opts->cls,
                              /* The logger first, so that MHD's messages about the options that
                               * follow reach our log too. */
                              MHD_OPTION_EXTERNAL_LOGGER, log_cb, s, MHD_OPTION_ARRAY, where,
                              MHD_OPTION_CONNECTION_LIMIT, s->limit, MHD_OPTION_CONNECTION_TIMEOUT,
                              opts->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)HTTP_CONNECTION_POOL_BYTES, MHD_OPTION_NOTIFY_COMPLETED,
                              opts->completed, opts->cls, MHD_OPTION_URI_LOG_CALLBACK,
                              opts->uri_log, opts->cls, MHD_OPTION_NOTIFY_CONNECTION,
                              notify_connection_cb, s, MHD_OPTION_END);
    if (!s->mhd) {
        free(s);
        if (opts->has_listen_fd) {
            close(opts->listen_fd);
            return err_set(err, EIO, "http server: MHD refused the listening socket");
        }
        return err_set(err, EADDRINUSE,
                       "listen on %s:%u: cannot bind (address in use or not available here)",
                       opts->host, opts->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : opts->port;
    int rc = http_loop_start(loop, s->mhd, glue_run_cb, s, &s->glue, err);
    if (rc < 0) {
        MHD_stop_daemon(s->mhd);
        free(s);
        return rc;
    }
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_init(loop, &s->evict);
    s->evict.data = s;
    uv_timer_start(&s->sweep, sweep_cb, SWEEP_MS, SWEEP_MS);
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
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_LISTEN_FD);
    if (info)
        http_loop_listener_closed(s->glue, (intptr_t)info->listen_fd);
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET)
        sock_close((intptr_t)fd);
}

static void
server_closed_one(struct http_server *s)
{
    if (--s->closing_handles > 0)
        return;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    free(s);
    if (done)
        done(arg);
}

static void
handle_closed_cb(uv_handle_t *h)
{
    server_closed_one(h->data);
}

static void
glue_closed_cb(void *arg)
{
    server_closed_one(arg);
}

void
http_server_stop(struct http_server *s, void (*done)(void *arg), void *arg)
{
    s->done = done;
    s->done_arg = arg;
    s->closing_handles = 4;
    /* The glue stops watching before MHD closes the sockets; its handles
     * close on the next loop turn. */
    http_loop_stop(s->glue, glue_closed_cb, s);
    uv_timer_stop(&s->timer);
    uv_timer_stop(&s->sweep);
    uv_timer_stop(&s->evict);
    MHD_stop_daemon(s->mhd); /* closes every connection: CLOSED frees each one's state */
    s->mhd = NULL;
    uv_close((uv_handle_t *)&s->timer, handle_closed_cb);
    uv_close((uv_handle_t *)&s->sweep, handle_closed_cb);
    uv_close((uv_handle_t *)&s->evict, handle_closed_cb);
}
