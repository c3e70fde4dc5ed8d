/*
 * The relay of containers that stop on their own (ctr_stops.h): the
 * driver's callback runs on its own thread and touches only the queue,
 * under the relay's mutex; everything else runs on the loop.
 */
#include "daemon/ctr_stops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/daemon.h"

struct stop_item {
    struct stop_item *next;
    char handle[];
};

struct ctr_stops {
    struct containers *reg;
    uv_mutex_t mu;
    bool closed;             /* under mu: the callback queues nothing more */
    struct stop_item *queue; /* under mu */
    uv_async_t async;
    bool async_closed;
};

void
ctr_stops_mark(struct container *c)
{
    log_warn("container %s: its runtime says it stopped; the container is stopped", c->p->handle);
    c->state = CTR_STOPPED;
    for (struct ctr_proc *pr = c->procs; pr; pr = pr->next)
        container_proc_check(pr);
}

/* The driver's thread. */
static void
stopped_cb(void *arg, const char *handle)
{
    struct ctr_stops *s = arg;
    size_t n = strlen(handle);
    struct stop_item *it = malloc(sizeof(*it) + n + 1);
    if (!it)
        return; /* the container reads as running until its next check */
    memcpy(it->handle, handle, n + 1);
    uv_mutex_lock(&s->mu);
    if (s->closed) {
        uv_mutex_unlock(&s->mu);
        free(it);
        return;
    }
    it->next = s->queue;
    s->queue = it;
    uv_async_send(&s->async);
    uv_mutex_unlock(&s->mu);
}

static void
relay_cb(uv_async_t *a)
{
    struct ctr_stops *s = a->data;
    uv_mutex_lock(&s->mu);
    struct stop_item *list = s->queue;
    s->queue = NULL;
    uv_mutex_unlock(&s->mu);
    while (list) {
        struct stop_item *it = list;
        list = it->next;
        struct container *c = containers_find(s->reg, it->handle);
        /* A delete's own shutdown is not news; a create still running
         * takes it when it ends (ctr_create.c). */
        if (c && c->state == CTR_CREATING)
            c->stopped_while_creating = true;
        else if (c && c->state == CTR_RUNNING && !c->removing)
            ctr_stops_mark(c);
        free(it);
    }
}

int
ctr_stops_open(struct containers *reg, struct err *err)
{
    if (!reg->drv || !reg->drv->set_stop_cb)
        return 0;
    struct ctr_stops *s = calloc(1, sizeof(*s));
    if (!s)
        return err_set(err, ENOMEM, "containers: out of memory");
    s->reg = reg;
    if (uv_mutex_init(&s->mu) < 0) {
        free(s);
        return err_set(err, ENOMEM, "containers: no mutex for the stop relay");
    }
    int rc = uv_async_init(reg->d->loop, &s->async, relay_cb);
    if (rc < 0) {
        uv_mutex_destroy(&s->mu);
        free(s);
        return err_set(err, -rc, "containers: stop relay: %s", uv_strerror(rc));
    }
    s->async.data = s;
    reg->stops = s;
    reg->drv->set_stop_cb(reg->drv_ctx, stopped_cb, s);
    return 0;
}

static void
async_closed_cb(uv_handle_t *h)
{
    struct ctr_stops *s = h->data;
    s->async_closed = true;
}

void
ctr_stops_close(struct containers *reg)
{
    struct ctr_stops *s = reg->stops;
    if (!s || s->closed)
        return;
    uv_mutex_lock(&s->mu);
    s->closed = true;
    uv_mutex_unlock(&s->mu);
    uv_close((uv_handle_t *)&s->async, async_closed_cb);
}

void
ctr_stops_free(struct containers *reg)
{
    struct ctr_stops *s = reg->stops;
    if (!s)
        return;
    reg->stops = NULL;
    if (!s->async_closed) {
        /* The loop never ran the close: the handle stays (a leak, not a crash). */
        log_warn("containers: the stop relay's handle was not closed");
        return;
    }
    while (s->queue) {
        struct stop_item *it = s->queue;
        s->queue = it->next;
        free(it);
    }
    uv_mutex_destroy(&s->mu);
    free(s);
}
