/* The volume TTL timer (loop thread) and its sweep job (pool thread); see volume_ttl.h. */
#include "daemon/volume_ttl.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <uv.h>

#include "common/log.h"
#include "common/os.h" /* ESTALE on Windows */
#include "daemon/daemon.h"
#include "store/store.h"

#define TTL_TICK_MS 1000
/* A volume that expired but could not go is tried again after this. */
#define TTL_RETRY_S 10

struct volume_ttl {
    struct daemon *d;
    uv_timer_t timer;
    int64_t next;  /* earliest expiry known; 0: none */
    bool sweeping; /* a sweep job is out */
    bool stopped;  /* the timer is closed or closing */
    bool handle_closed;
    /* sweep results */
    int64_t sweep_next;
};

static void
ttl_maybe_free(struct volume_ttl *t)
{
    if (t->handle_closed && !t->sweeping)
        free(t);
}

static void
ttl_closed_cb(uv_handle_t *h)
{
    struct volume_ttl *t = h->data;
    t->handle_closed = true;
    ttl_maybe_free(t);
}

int64_t
volume_ttl_delete_listed(struct store *st, const struct volume_expiry *listed, size_t n,
                         int64_t now)
{
    int64_t retry = 0;
    for (size_t i = 0; i < n; i++) {
        const char *handle = listed[i].handle;
        char **gone = NULL;
        size_t ngone = 0;
        struct err derr = {0};
        if (volume_delete_expired(st->volumes, &listed[i], now, &gone, &ngone, &derr) == 0) {
            log_info("volume %s: expired and deleted", handle);
        } else if (derr.code == ENOENT || derr.code == ESTALE) {
            /* Deleted, re-created or renewed since the listing: not ours to delete. */
            log_debug("volume expiry: %s", derr.msg);
        } else {
            log_info("volume %s: expired but kept for now: %s", handle, derr.msg);
            retry = now + TTL_RETRY_S;
        }
        for (size_t k = 0; k < ngone; k++)
            free(gone[k]);
        free(gone);
    }
    return retry;
}

static void
sweep_work(void *ctx)
{
    struct volume_ttl *t = ctx;
    struct store *st = t->d->store;
    int64_t now = (int64_t)time(NULL);
    struct volume_expiry *listed = NULL;
    size_t n = 0;
    int64_t next = 0;
    struct err err = {0};
    if (vmeta_expired(st->meta, now, &listed, &n, &next, &err) < 0) {
        log_warn("volume expiry: %s", err.msg);
        t->sweep_next = now + TTL_RETRY_S;
        return;
    }
    int64_t retry = volume_ttl_delete_listed(st, listed, n, now);
    free(listed);
    if (retry && (!next || retry < next))
        next = retry;
    t->sweep_next = next;
}

static void
sweep_done(void *ctx, bool cancelled)
{
    struct volume_ttl *t = ctx;
    t->sweeping = false;
    if (!cancelled && t->sweep_next && (!t->next || t->sweep_next < t->next))
        t->next = t->sweep_next;
    ttl_maybe_free(t);
}

static void
tick_cb(uv_timer_t *timer)
{
    struct volume_ttl *t = timer->data;
    if (t->sweeping || !t->next || t->d->shutting_down || !t->d->store)
        return;
    if ((int64_t)time(NULL) < t->next)
        return;
    t->next = 0; /* the sweep says what comes next; hints may come meanwhile */
    t->sweep_next = 0;
    t->sweeping = true;
    if (job_submit(t->d->jobs, "volume.expire", sweep_work, sweep_done, t) < 0) {
        t->sweeping = false;
        t->next = (int64_t)time(NULL) + TTL_RETRY_S;
    }
}

int
volume_ttl_start(struct daemon *d)
{
    if (!d->store)
        return 0;
    struct volume_ttl *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->d = d;
    t->next = 1; /* one sweep at start-up finds the first expiry */
    uv_timer_init(d->loop, &t->timer);
    t->timer.data = t;
    uv_timer_start(&t->timer, tick_cb, 0, TTL_TICK_MS);
    d->volume_ttl = t;
    return 0;
}

void
volume_ttl_hint(struct daemon *d, int64_t expires_at)
{
    struct volume_ttl *t = d->volume_ttl;
    if (!t || t->stopped || expires_at <= 0)
        return;
    if (!t->next || expires_at < t->next)
        t->next = expires_at;
}

void
volume_ttl_stop(struct daemon *d)
{
    struct volume_ttl *t = d->volume_ttl;
    if (!t || t->stopped)
        return;
    t->stopped = true;
    d->volume_ttl = NULL;
    uv_timer_stop(&t->timer);
    uv_close((uv_handle_t *)&t->timer, ttl_closed_cb);
}
