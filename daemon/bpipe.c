/* The bounded byte pipe: a ring buffer under a mutex, a condition variable
 * for the job side and a uv_async_t for the loop side. */
#include "daemon/bpipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct bpipe {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char *buf;
    size_t cap, head, len; /* ring: data at [head, head+len) mod cap */
    bool write_closed;     /* the writing side finished */
    int aborted;           /* positive errno, or 0 */
    int refs;              /* 2 sides + the async handle while open */
    uv_async_t async;
    bool async_closing;
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

size_t
bpipe_write_nb(struct bpipe *p, const void *data, size_t len)
{
    pthread_mutex_lock(&p->mu);
    size_t take = 0;
    if (!p->aborted && !p->write_closed) {
        size_t room = p->cap - p->len;
        take = len < room ? len : room;
        size_t tail = (p->head + p->len) % p->cap;
        size_t first = take < p->cap - tail ? take : p->cap - tail;
        memcpy(p->buf + tail, data, first);
        memcpy(p->buf, (const char *)data + first, take - first);
        p->len += take;
        if (take)
            pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->mu);
    return take;
}

void
bpipe_close_write(struct bpipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->write_closed = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

/* Copies out up to len bytes; caller holds mu. */
static size_t
take_locked(struct bpipe *p, void *buf, size_t len)
{
    size_t n = len < p->len ? len : p->len;
    size_t first = n < p->cap - p->head ? n : p->cap - p->head;
    memcpy(buf, p->buf + p->head, first);
    memcpy((char *)buf + first, p->buf, n - first);
    p->head = (p->head + n) % p->cap;
    p->len -= n;
    return n;
}

size_t
bpipe_read_nb(struct bpipe *p, void *buf, size_t len, bool *eof)
{
    pthread_mutex_lock(&p->mu);
    size_t n = take_locked(p, buf, len);
    if (n)
        pthread_cond_broadcast(&p->cond);
    *eof = p->len == 0 && p->write_closed;
    pthread_mutex_unlock(&p->mu);
    return n;
}

ssize_t
bpipe_read(struct bpipe *p, void *buf, size_t len)
{
    pthread_mutex_lock(&p->mu);
    while (p->len == 0 && !p->write_closed && !p->aborted)
        pthread_cond_wait(&p->cond, &p->mu);
    ssize_t r;
    if (p->aborted)
        r = -p->aborted;
    else
        r = (ssize_t)take_locked(p, buf, len);
    if (r > 0)
        wake_loop_locked(p); /* room for the uploader */
    pthread_mutex_unlock(&p->mu);
    return r;
}

int
bpipe_write(struct bpipe *p, const void *data, size_t len)
{
    const char *d = data;
    while (len > 0) {
        pthread_mutex_lock(&p->mu);
        while (p->len == p->cap && !p->aborted)
            pthread_cond_wait(&p->cond, &p->mu);
        if (p->aborted) {
            int code = p->aborted;
            pthread_mutex_unlock(&p->mu);
            return -code;
        }
        size_t room = p->cap - p->len;
        size_t take = len < room ? len : room;
        size_t tail = (p->head + p->len) % p->cap;
        size_t first = take < p->cap - tail ? take : p->cap - tail;
        memcpy(p->buf + tail, d, first);
        memcpy(p->buf, d + first, take - first);
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
    while (p->len == p->cap && !p->aborted)
        pthread_cond_wait(&p->cond, &p->mu);
    if (p->aborted) {
        int code = p->aborted;
        pthread_mutex_unlock(&p->mu);
        return -code;
    }
    if (p->len == 0)
        p->head = 0; /* empty: the whole ring is one region */
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
    if (!p->aborted) {
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
    if (!p->aborted)
        p->aborted = code > 0 ? code : ECANCELED;
    pthread_cond_broadcast(&p->cond);
    wake_loop_locked(p);
    pthread_mutex_unlock(&p->mu);
}

int
bpipe_aborted(struct bpipe *p)
{
    pthread_mutex_lock(&p->mu);
    int a = p->aborted;
    pthread_mutex_unlock(&p->mu);
    return a;
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
