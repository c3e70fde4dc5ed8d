/*
 * The bounded byte pipe: a ring buffer, a condition variable for the job
 * side and a uv_async_t for the loop side. The mutex guards only the
 * ring's positions, never a copy: the one writer copies into free space
 * and the one reader out of published data, each outside the lock, and
 * then moves the positions under it. The loop thus never waits for a
 * pool thread's copy: pool threads run at a lower priority, and one
 * preempted while it held the lock across a 64 KiB copy kept the loop
 * (every connection, /v1/health too) waiting for tens of milliseconds.
 */
#include "daemon/bpipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct bpipe {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char *buf;
    size_t cap, head, len; /* ring: data at [head, head+len) mod cap */
    bool write_closed;     /* the writing side finished */
    atomic_int aborted;    /* positive errno, or 0; read without mu */
    int refs;              /* 2 sides + the async handle while open */
    uv_async_t async;
    bool async_closing;
    bool loop_wants_room; /* a bpipe_write_nb fell short: wake it for room */
    bpipe_notify_fn notify;
    void *notify_ctx;
};

static void
bpipe_destroy(struct bpipe *p)
{
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p->buf);
    free(p);
}

static void
unref(struct bpipe *p)
{
    pthread_mutex_lock(&p->mu);
    int left = --p->refs;
    pthread_mutex_unlock(&p->mu);
    if (left == 0)
        bpipe_destroy(p);
}

static void
async_cb(uv_async_t *a)
{
    struct bpipe *p = a->data;
    if (p->notify)
        p->notify(p->notify_ctx);
}

static void
async_closed_cb(uv_handle_t *h)
{
    unref(h->data);
}

struct bpipe *
bpipe_new(uv_loop_t *loop, size_t capacity, bpipe_notify_fn notify, void *ctx)
{
    struct bpipe *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->buf = malloc(capacity);
    if (!p->buf || uv_async_init(loop, &p->async, async_cb) < 0) {
        free(p->buf);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->cap = capacity;
    p->refs = 3;
    p->async.data = p;
    p->notify = notify;
    p->notify_ctx = ctx;
    return p;
}

/* Wakes the loop side; caller holds mu, so the loop cannot be closing
 * the handle at the same moment (bpipe_release_loop sets async_closing
 * under mu before uv_close). */
static void
wake_loop_locked(struct bpipe *p)
{
    if (!p->async_closing)
        uv_async_send(&p->async);
}

/* Where up to want bytes may be written now (the writer's side; the
 * reader only ever moves head forward, which leaves this free): the
 * ring's offset of the first piece in *tail; returns how many fit.
 * Caller holds mu. */
static size_t
room_locked(struct bpipe *p, size_t want, size_t *tail)
{
    size_t room = p->cap - p->len;
    *tail = (p->head + p->len) % p->cap;
    return want < room ? want : room;
}

/* Copies n bytes into the ring at tail, wrapping; no lock needed. */
static void
copy_in(struct bpipe *p, size_t tail, const void *data, size_t n)
{
    size_t first = n < p->cap - tail ? n : p->cap - tail;
    memcpy(p->buf + tail, data, first);
    memcpy(p->buf, (const char *)data + first, n - first);
}

size_t
bpipe_write_nb(struct bpipe *p, const void *data, size_t len)
{
    size_t tail = 0, take = 0;
    pthread_mutex_lock(&p->mu);
    if (!atomic_load(&p->aborted) && !p->write_closed)
        take = room_locked(p, len, &tail);
    if (take < len)
        p->loop_wants_room = true;
    pthread_mutex_unlock(&p->mu);
    if (take == 0)
        return 0;
    copy_in(p, tail, data, take);
    pthread_mutex_lock(&p->mu);
    p->len += take;
    pthread_mutex_unlock(&p->mu);
    pthread_cond_broadcast(&p->cond);
    return take;
}

void
bpipe_close_write(struct bpipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->write_closed = true;
    pthread_mutex_unlock(&p->mu);
    pthread_cond_broadcast(&p->cond);
}

/* Copies out up to len published bytes (the reader's side; the writer
 * only ever adds after them) and frees their room; takes mu twice, never
 * across the copy. Caller holds mu on entry and on return. */
static size_t
take_unlocking(struct bpipe *p, void *buf, size_t len)
{
    size_t n = len < p->len ? len : p->len;
    size_t head = p->head;
    if (n == 0)
        return 0;
    pthread_mutex_unlock(&p->mu);
    size_t first = n < p->cap - head ? n : p->cap - head;
    memcpy(buf, p->buf + head, first);
    memcpy((char *)buf + first, p->buf, n - first);
    pthread_mutex_lock(&p->mu);
    p->head = (p->head + n) % p->cap;
    p->len -= n;
    return n;
}

size_t
bpipe_read_nb(struct bpipe *p, void *buf, size_t len, bool *eof)
{
    pthread_mutex_lock(&p->mu);
    size_t n = take_unlocking(p, buf, len);
    *eof = p->len == 0 && p->write_closed;
    pthread_mutex_unlock(&p->mu);
    if (n)
        pthread_cond_broadcast(&p->cond);
    return n;
}

ssize_t
bpipe_read(struct bpipe *p, void *buf, size_t len)
{
    pthread_mutex_lock(&p->mu);
    while (p->len == 0 && !p->write_closed && !atomic_load(&p->aborted))
        pthread_cond_wait(&p->cond, &p->mu);
    ssize_t r;
    if (atomic_load(&p->aborted))
        r = -atomic_load(&p->aborted);
    else
        r = (ssize_t)take_unlocking(p, buf, len);
    /* Room for the uploader, once it asked and half the ring is free:
     * not on every read. Each uv_async_send is a window in which a
     * preempted sender (a pool thread at +10, the loop just woken by its
     * eventfd write) holds the handle "busy" and libuv 1.44's loop spins
     * and yields in uv__async_io until the sender runs again, holding mu
     * meanwhile (the loop's next bpipe_write_nb waits on it): under four
     * uploads the loop thread ran for up to 30 ms at a time, 7 % of its
     * samples in that spin. */
    if (r > 0 && p->loop_wants_room && p->cap - p->len >= p->cap / 2) {
        p->loop_wants_room = false;
        wake_loop_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

/* Waits until the ring has room or the pipe was aborted (-errno). Caller
 * holds mu. */
static int
wait_room_locked(struct bpipe *p)
{
    while (p->len == p->cap && !atomic_load(&p->aborted))
        pthread_cond_wait(&p->cond, &p->mu);
    return atomic_load(&p->aborted) ? -atomic_load(&p->aborted) : 0;
}

int
bpipe_write(struct bpipe *p, const void *data, size_t len)
{
    const char *d = data;
    while (len > 0) {
        pthread_mutex_lock(&p->mu);
        int r = wait_room_locked(p);
        size_t tail = 0;
        size_t take = r == 0 ? room_locked(p, len, &tail) : 0;
        pthread_mutex_unlock(&p->mu);
        if (r < 0)
            return r;
        copy_in(p, tail, d, take);
        pthread_mutex_lock(&p->mu);
        p->len += take;
        wake_loop_locked(p);
        pthread_mutex_unlock(&p->mu);
        d += take;
        len -= take;
    }
    return 0;
}

int
bpipe_reserve(struct bpipe *p, size_t max, void **buf, size_t *len)
{
    pthread_mutex_lock(&p->mu);
    int r = wait_room_locked(p);
    if (r < 0) {
        pthread_mutex_unlock(&p->mu);
        return r;
    }
    if (p->len == 0)
        p->head = 0; /* empty (and the reader copies nothing): one region */
    size_t tail = (p->head + p->len) % p->cap;
    /* Free space runs from tail to the end of the buffer, or to head when
     * the data wraps past the end; the reader only ever reads below. */
    size_t room = tail >= p->head ? p->cap - tail : p->head - tail;
    pthread_mutex_unlock(&p->mu);
    *buf = p->buf + tail;
    *len = room < max ? room : max;
    return 0;
}

void
bpipe_commit(struct bpipe *p, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&p->mu);
    if (!atomic_load(&p->aborted)) {
        p->len += n;
        wake_loop_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
}

void
bpipe_close_job(struct bpipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->write_closed = true;
    wake_loop_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void
bpipe_abort(struct bpipe *p, int code)
{
    pthread_mutex_lock(&p->mu);
    if (!atomic_load(&p->aborted))
        atomic_store(&p->aborted, code > 0 ? code : ECANCELED);
    pthread_cond_broadcast(&p->cond);
    wake_loop_locked(p);
    pthread_mutex_unlock(&p->mu);
}

int
bpipe_aborted(struct bpipe *p)
{
    return atomic_load(&p->aborted); /* the loop asks this for every piece of an upload */
}

size_t
bpipe_buffered(struct bpipe *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->len;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void
bpipe_detach_notify(struct bpipe *p)
{
    p->notify = NULL;
    p->notify_ctx = NULL;
}

void
bpipe_release_job(struct bpipe *p)
{
    unref(p);
}

void
bpipe_release_loop(struct bpipe *p)
{
    p->notify = NULL;
    pthread_mutex_lock(&p->mu);
    bool close_it = !p->async_closing;
    p->async_closing = true;
    pthread_mutex_unlock(&p->mu);
    if (close_it)
        uv_close((uv_handle_t *)&p->async, async_closed_cb);
    unref(p);
}
