/*
 * api/http_loop.h on Windows: MHD in its external-select mode, a uv_poll_t
 * per socket it waits on, re-synced from MHD_get_fdset2() after every run,
 * and the time each socket was last reported readable. Loop thread only.
 */
/* MHD on W32 is built with this FD_SETSIZE (its mhd_options.h); our fd
 * sets must be as large to receive its sockets. Before any header. */
#define FD_SETSIZE 2048

#include "api/http_loop.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define BUCKETS 1024

struct watch {
    struct http_loop *l;
    SOCKET s;
    uv_poll_t poll;
    int events; /* what the poll watches now */
    int want;   /* what MHD's latest fd sets ask */
    bool failed;
    uint64_t last_readable_ms; /* uv_hrtime ms */
    struct watch *next;        /* in its bucket */
};

struct http_loop {
    uv_loop_t *loop;
    struct MHD_Daemon *mhd;
    void (*run)(void *arg);
    void *arg;
    struct watch *buckets[BUCKETS];
    uv_timer_t closer; /* closed last at stop: done never runs inside the call */
    bool stopping;
    unsigned closing;
    void (*done)(void *arg);
    void *done_arg;
};

unsigned
http_loop_mhd_flags(void)
{
    return 0; /* external select: no thread, no epoll */
}

static uint64_t
hr_ms(void)
{
    return uv_hrtime() / 1000000;
}

static size_t
bucket_of(SOCKET s)
{
    return (size_t)((uintptr_t)s >> 2) & (BUCKETS - 1);
}

static struct watch *
watch_find(struct http_loop *l, SOCKET s)
{
    for (struct watch *w = l->buckets[bucket_of(s)]; w; w = w->next)
        if (w->s == s)
            return w;
    return NULL;
}

static void
loop_closed_one(struct http_loop *l)
{
    if (--l->closing > 0 || !l->stopping)
        return;
    void (*done)(void *) = l->done;
    void *arg = l->done_arg;
    free(l);
    if (done)
        done(arg);
}

static void
watch_closed_cb(uv_handle_t *h)
{
    struct watch *w = h->data;
    struct http_loop *l = w->l;
    free(w);
    loop_closed_one(l);
}

/* Stops watching s and forgets it (its socket is about to close). */
static void
watch_drop(struct http_loop *l, SOCKET s)
{
    for (struct watch **pp = &l->buckets[bucket_of(s)]; *pp; pp = &(*pp)->next) {
        struct watch *w = *pp;
        if (w->s != s)
            continue;
        *pp = w->next;
        uv_poll_stop(&w->poll);
        l->closing++;
        uv_close((uv_handle_t *)&w->poll, watch_closed_cb);
        return;
    }
}

static void
poll_cb(uv_poll_t *p, int status, int events)
{
    struct watch *w = p->data;
    struct http_loop *l = w->l;
    if (status < 0) {
        /* Left stopped: MHD's own run (its timeout) finds what is wrong
         * with the socket, and a fresh one gets a fresh watch. */
        log_debug("http: poll on socket %llu: %s", (unsigned long long)w->s, uv_strerror(status));
        w->failed = true;
        uv_poll_stop(&w->poll);
        w->events = 0;
    } else if (events & (UV_READABLE | UV_DISCONNECT)) {
        w->last_readable_ms = hr_ms();
    }
    l->run(l->arg);
}

static struct watch *
watch_get(struct http_loop *l, SOCKET s)
{
    struct watch *w = watch_find(l, s);
    if (w)
        return w;
    w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    if (uv_poll_init_socket(l->loop, &w->poll, s) < 0) {
        free(w);
        return NULL;
    }
    w->l = l;
    w->s = s;
    w->poll.data = w;
    size_t b = bucket_of(s);
    w->next = l->buckets[b];
    l->buckets[b] = w;
    return w;
}

static void
want_set(struct http_loop *l, const fd_set *set, int events)
{
    for (u_int i = 0; i < set->fd_count; i++) {
        struct watch *w = watch_get(l, set->fd_array[i]);
        if (w)
            w->want |= events;
    }
}

/* Makes the watches what MHD's fd sets now ask. */
static void
sync_watches(struct http_loop *l)
{
    fd_set rs, ws, es;
    FD_ZERO(&rs);
    FD_ZERO(&ws);
    FD_ZERO(&es);
    MHD_socket max = MHD_INVALID_SOCKET;
    if (MHD_get_fdset2(l->mhd, &rs, &ws, &es, &max, FD_SETSIZE) != MHD_YES) {
        log_warn("http: MHD_get_fdset2 failed (more than %d sockets?)", FD_SETSIZE);
        return;
    }
    for (size_t b = 0; b < BUCKETS; b++)
        for (struct watch *w = l->buckets[b]; w; w = w->next)
            w->want = 0;
    want_set(l, &rs, UV_READABLE);
    want_set(l, &ws, UV_WRITABLE);
    want_set(l, &es, UV_READABLE);
    for (size_t b = 0; b < BUCKETS; b++) {
        for (struct watch *w = l->buckets[b]; w; w = w->next) {
            if (w->want == w->events || w->failed)
                continue;
            if (w->want == 0) {
                uv_poll_stop(&w->poll);
            } else if (uv_poll_start(&w->poll, w->want, poll_cb) < 0) {
                w->failed = true;
                w->want = 0;
            }
            w->events = w->want;
        }
    }
}

int
http_loop_start(uv_loop_t *loop, struct MHD_Daemon *mhd, void (*run)(void *arg), void *arg,
                struct http_loop **out, struct err *err)
{
    struct http_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return err_set(err, ENOMEM, "http server: out of memory");
    l->loop = loop;
    l->mhd = mhd;
    l->run = run;
    l->arg = arg;
    uv_timer_init(loop, &l->closer);
    l->closer.data = l;
    sync_watches(l);
    *out = l;
    return 0;
}

void
http_loop_run_begin(struct http_loop *l)
{
    (void)l;
}

void
http_loop_run_end(struct http_loop *l)
{
    if (!l->stopping)
        sync_watches(l);
}

void
http_loop_resumed(struct http_loop *l, struct MHD_Connection *conn)
{
    (void)l;
    (void)conn; /* MHD's own select sees its socket again on the next run */
}

void
http_loop_conn_closed(struct http_loop *l, struct MHD_Connection *conn, intptr_t fd)
{
    (void)conn;
    if (!l->stopping && fd >= 0)
        watch_drop(l, (SOCKET)fd);
}

void
http_loop_listener_closed(struct http_loop *l, intptr_t fd)
{
    if (!l->stopping && fd >= 0)
        watch_drop(l, (SOCKET)fd);
}

bool
http_loop_new_data(struct http_loop *l, intptr_t fd, uint64_t since_ms, uint64_t now_ms,
                   uint64_t margin_ms, uint64_t *ago_ms)
{
    struct watch *w = fd >= 0 ? watch_find(l, (SOCKET)fd) : NULL;
    if (!w || w->last_readable_ms <= since_ms + margin_ms)
        return false;
    *ago_ms = now_ms > w->last_readable_ms ? now_ms - w->last_readable_ms : 0;
    return true;
}

static void
closer_closed_cb(uv_handle_t *h)
{
    loop_closed_one(h->data);
}

void
http_loop_stop(struct http_loop *l, void (*done)(void *arg), void *arg)
{
    l->stopping = true;
    l->done = done;
    l->done_arg = arg;
    for (size_t b = 0; b < BUCKETS; b++) {
        while (l->buckets[b]) {
            struct watch *w = l->buckets[b];
            l->buckets[b] = w->next;
            uv_poll_stop(&w->poll);
            l->closing++;
            uv_close((uv_handle_t *)&w->poll, watch_closed_cb);
        }
    }
    l->closing++;
    uv_close((uv_handle_t *)&l->closer, closer_closed_cb);
}
