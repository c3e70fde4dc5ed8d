/* Container events, their subscribers and a short history (daemon/ctr_events.h). Loop thread. */
#include "daemon/ctr_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

/* An emit in progress: the next subscriber it calls. Emits nest (a
 * subscriber's work may emit), so they form a stack. */
struct emit_frame {
    struct ctr_sub *next;
    struct emit_frame *up;
};

struct ctr_events {
    struct ctr_sub *subs;
    struct emit_frame *frames;
    struct ctr_change ring[CTR_EVENTS_HISTORY];
    size_t head, n; /* the oldest kept is ring[head] */
    int64_t last_ns;
};

const char *
ctr_change_name(enum ctr_change_kind k)
{
    static const char *const names[] = {"create", "start",   "kill",   "die",
                                        "stop",   "restart", "destroy"};
    return (size_t)k < sizeof(names) / sizeof(names[0]) ? names[k] : "unknown";
}

static struct ctr_events *
events_of(struct containers *reg)
{
    if (!reg->events)
        reg->events = calloc(1, sizeof(*reg->events));
    return reg->events;
}

static void
change_clear(struct ctr_change *ev)
{
    free(ev->name);
    free(ev->image);
    for (size_t i = 0; i < ev->nlabels; i++) {
        free(ev->label_keys[i]);
        free(ev->label_values[i]);
    }
    free(ev->label_keys);
    free(ev->label_values);
    memset(ev, 0, sizeof(*ev));
}

void
ctr_events_subscribe(struct containers *reg, struct ctr_sub *s)
{
    struct ctr_events *e = events_of(reg);
    s->prev = NULL;
    s->next = e ? e->subs : NULL;
    if (!e)
        return;
    if (e->subs)
        e->subs->prev = s;
    e->subs = s;
}

void
ctr_events_unsubscribe(struct containers *reg, struct ctr_sub *s)
{
    struct ctr_events *e = reg->events;
    if (!e)
        return;
    for (struct emit_frame *f = e->frames; f; f = f->up)
        if (f->next == s)
            f->next = s->next;
    if (s->prev)
        s->prev->next = s->next;
    else if (e->subs == s)
        e->subs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

void
ctr_events_replay(struct containers *reg, int64_t since_ns, int64_t until_ns,
                  void (*fn)(void *arg, const struct ctr_change *ev), void *arg)
{
    struct ctr_events *e = reg->events;
    for (size_t i = 0; e && i < e->n; i++) {
        const struct ctr_change *ev = &e->ring[(e->head + i) % CTR_EVENTS_HISTORY];
        if (ev->time_ns >= since_ns && ev->time_ns <= until_ns)
            fn(arg, ev);
    }
}

/* Fills ev with copies of what c shows; false when out of memory. */
static bool
change_fill(struct ctr_change *ev, const struct container *c)
{
    const struct ctr_params *p = c->p;
    snprintf(ev->handle, sizeof(ev->handle), "%s", p->handle);
    ev->has_main = p->main != NULL;
    bool oom = false;
    if (p->name && !(ev->name = strdup(p->name)))
        oom = true;
    if (p->image_ref && !(ev->image = strdup(p->image_ref)))
        oom = true;
    if (p->nprops) {
        ev->label_keys = calloc(p->nprops, sizeof(char *));
        ev->label_values = calloc(p->nprops, sizeof(char *));
        oom |= !ev->label_keys || !ev->label_values;
        for (size_t i = 0; !oom && i < p->nprops; i++) {
            ev->label_keys[i] = strdup(p->prop_keys[i]);
            ev->label_values[i] = strdup(p->prop_values[i]);
            ev->nlabels = i + 1;
            oom |= !ev->label_keys[i] || !ev->label_values[i];
        }
    }
    return !oom;
}

void
ctr_events_emit(struct container *c, enum ctr_change_kind kind, int exit_code, int signal)
{
    struct ctr_events *e = events_of(c->reg);
    if (!e)
        return;
    struct ctr_change *ev = &e->ring[(e->head + e->n) % CTR_EVENTS_HISTORY];
    if (e->n == CTR_EVENTS_HISTORY) {
        ev = &e->ring[e->head];
        e->head = (e->head + 1) % CTR_EVENTS_HISTORY;
        e->n--;
    }
    change_clear(ev);
    ev->kind = kind;
    /* Strictly increasing, so "since" never replays one twice at the edge. */
    int64_t now = clock_unix_ms() * 1000000;
    ev->time_ns = now > e->last_ns ? now : e->last_ns + 1;
    e->last_ns = ev->time_ns;
    ev->exit_code = exit_code;
    ev->signal = signal;
    if (!change_fill(ev, c)) {
        change_clear(ev);
        return;
    }
    e->n++;
    /* A subscriber may unsubscribe (itself or one the frame would call
     * next): the frame moves past it. */
    struct emit_frame frame = {.next = NULL, .up = e->frames};
    e->frames = &frame;
    for (struct ctr_sub *s = e->subs; s; s = frame.next) {
        frame.next = s->next;
        s->fn(s, ev, c);
    }
    e->frames = frame.up;
}

void
ctr_events_free(struct containers *reg)
{
    struct ctr_events *e = reg->events;
    if (!e)
        return;
    for (size_t i = 0; i < CTR_EVENTS_HISTORY; i++)
        change_clear(&e->ring[i]);
    free(e);
    reg->events = NULL;
}
