/*
 * A pull's progress: the events every job of a pull writes into its one
 * bounded pipe of fixed-size records, read on the loop and fanned out to
 * the pull's waiters (byte counts at most every BYTES_LINE_MS), and the
 * replay of what a caller that joins late has missed. Loop thread, except
 * pull_progress_event and progress_put, which run on a job's thread.
 */
#include "daemon/svc_pull_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/bpipe.h"
#include "daemon/daemon.h"
#include "store/pull.h"

/* Byte counts of a pull's downloads go out at most this often (the state
 * changes of each layer always do). */
#define BYTES_LINE_MS 250

/* On a job's thread: a copy of the event into the pipe, dropped when the
 * loop lags (byte counts first; the next one carries the sum anyway). */
static void
progress_put(struct pull_op *op, const struct image_progress *rec)
{
    size_t limit =
        strcmp(rec->status, "downloading") == 0 ? PROGRESS_PIPE_BYTES / 2 : PROGRESS_PIPE_BYTES;
    if (bpipe_buffered(op->progress) + sizeof(*rec) <= limit)
        bpipe_write(op->progress, rec, sizeof(*rec));
}

void
pull_progress_event(void *ctx, const struct import_event *ev)
{
    struct image_progress rec;
    image_progress_set(&rec, ev);
    progress_put(ctx, &rec);
}

static void
fan_out(struct pull_op *op, const struct image_progress *rec)
{
    struct pull_waiter *next;
    for (struct pull_waiter *w = op->waiters; w; w = next) {
        next = w->next;
        if (w->progress && !w->replay)
            w->progress(w->arg, rec);
    }
}

/* A layer's last state, kept for callers that join later. */
static struct image_progress *
layer_slot(struct pull_op *op, const struct image_progress *rec)
{
    if (rec->count == 0 || rec->index == 0 || rec->index > rec->count)
        return NULL;
    if (op->n_layer_last != rec->count) {
        struct image_progress *a = calloc(rec->count, sizeof(*a));
        if (!a)
            return NULL;
        free(op->layer_last);
        op->layer_last = a;
        op->n_layer_last = rec->count;
    }
    return &op->layer_last[rec->index - 1];
}

/*
 * Each layer of a pull goes waiting -> downloading (byte counts) ->
 * downloaded -> [unpacking ->] unpacked, or straight to cached. A layer
 * unpacked in the same pass as its download (its lower layers were done
 * when it started) gets its "downloaded" here, just before "unpacked", so
 * that every front end sees the same sequence.
 */
static void
op_progress(void *ctx, const struct image_progress *rec)
{
    struct pull_op *op = ctx;
    if (strcmp(rec->step, "manifest") == 0)
        op->resolved = *rec;
    struct image_progress *last = strcmp(rec->step, "layer") == 0 ? layer_slot(op, rec) : NULL;
    if (!last) {
        fan_out(op, rec);
        return;
    }
    if (strcmp(rec->status, "downloading") == 0) {
        bool first = strcmp(last->status, "downloading") != 0;
        bool same = !first && last->done == rec->done;
        bool final = rec->total >= 0 && rec->done >= rec->total;
        *last = *rec;
        uint64_t now = uv_now(op->ps->d->loop);
        if (same || (!first && !final && now - op->bytes_line_ms < BYTES_LINE_MS))
            return;
        op->bytes_line_ms = now;
    } else if (strcmp(rec->status, "unpacked") == 0 &&
               (strcmp(last->status, "downloading") == 0 || strcmp(last->status, "waiting") == 0)) {
        struct image_progress dl = *rec;
        snprintf(dl.status, sizeof(dl.status), "downloaded");
        dl.done = rec->total;
        fan_out(op, &dl);
        *last = *rec;
    } else {
        *last = *rec;
    }
    fan_out(op, rec);
}

void
pull_progress_notify(void *ctx)
{
    struct pull_op *op = ctx;
    image_progress_drain(op->progress, &op->pending, &op->pending_len, op_progress, op);
}

/* What a caller that joins a running pull has missed: each layer's latest state. */
void
pull_progress_replay(struct pull_op *op, struct pull_waiter *w)
{
    w->replay = false;
    if (!w->progress)
        return;
    if (op->resolved.step[0])
        w->progress(w->arg, &op->resolved);
    for (size_t i = 0; i < op->n_layer_last; i++)
        if (op->layer_last[i].step[0])
            w->progress(w->arg, &op->layer_last[i]);
}

void
pull_replay_cb(uv_timer_t *t)
{
    struct image_pulls *ps = t->data;
    for (struct pull_op *o = ps->ops; o; o = o->next) {
        struct pull_waiter *next;
        for (struct pull_waiter *w = o->waiters; w; w = next) {
            next = w->next;
            if (w->replay)
                pull_progress_replay(o, w);
        }
    }
}
