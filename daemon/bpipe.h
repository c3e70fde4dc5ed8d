/*
 * A bounded byte pipe between the loop and a pool job, for streams that
 * must not be held in memory whole: an upload flows loop -> job, a
 * download job -> loop. One side writes, the other reads; when the pipe
 * is full the writer is told to wait (the loop suspends its connection,
 * a job blocks), so memory stays at the pipe's capacity whatever the
 * size of the stream.
 *
 * The loop side never blocks: its writes take what fits and its reads
 * take what is there. The job side blocks on a condition variable. When
 * the job side makes room (or data, or finishes), the loop is woken
 * through a uv_async_t and the pipe's notify callback runs on the loop.
 *
 * Lifetime: created on the loop; freed with bpipe_release by both sides
 * (the memory goes when the second one releases); the async handle is
 * closed on the loop.
 */
#ifndef BERTH_DAEMON_BPIPE_H
#define BERTH_DAEMON_BPIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

struct bpipe;

/* Called on the loop when the job side changed something: room to write,
 * data to read, end of stream or an error. */
typedef void (*bpipe_notify_fn)(void *ctx);

/* Loop thread. capacity in bytes. */
struct bpipe *bpipe_new(uv_loop_t *loop, size_t capacity, bpipe_notify_fn notify, void *ctx);

/* Loop side, writing (uploads). Returns bytes taken (0 when full). */
size_t bpipe_write_nb(struct bpipe *p, const void *data, size_t len);
/* Loop side: no more data will come. */
void bpipe_close_write(struct bpipe *p);

/* Loop side, reading (downloads). Returns bytes read; 0 when empty.
 * *eof is set once the job closed and everything was read. */
size_t bpipe_read_nb(struct bpipe *p, void *buf, size_t len, bool *eof);

/* Job side, reading: blocks until data, end (0) or abort (-errno). */
ssize_t bpipe_read(struct bpipe *p, void *buf, size_t len);
/* Job side, writing: blocks while full; 0 or -errno when aborted. */
int bpipe_write(struct bpipe *p, const void *data, size_t len);
/* Job side, writing in place: waits while full, then gives the largest
 * contiguous free region at the pipe's end (at most max bytes) in *buf
 * and *len, for the job to fill (a read(2) straight into the pipe saves
 * a copy). Returns 0, or -errno when aborted. Nothing of it is readable
 * until bpipe_commit; the job writes nothing else (no bpipe_write)
 * between the two. */
int bpipe_reserve(struct bpipe *p, size_t max, void **buf, size_t *len);
/* Job side: the first n bytes of the region bpipe_reserve gave hold
 * data; they are readable from now on, after everything before them. */
void bpipe_commit(struct bpipe *p, size_t n);
/* Job side: end of the data it writes. */
void bpipe_close_job(struct bpipe *p);

/* Either side: stop the stream with error code (positive errno); the
 * other side's next call fails with -code. */
void bpipe_abort(struct bpipe *p, int code);
/* The abort code, or 0. Any thread. */
int bpipe_aborted(struct bpipe *p);

/* Bytes buffered now. Any thread. */
size_t bpipe_buffered(struct bpipe *p);

/* Drops the notify callback (the loop side's owner is going away). Loop. */
void bpipe_detach_notify(struct bpipe *p);

/* Each side releases once. The loop side's release also closes the async
 * handle (no notify runs after it); the job side's may run on a pool
 * thread. The memory goes with the last of the two and the handle. */
void bpipe_release_loop(struct bpipe *p);
void bpipe_release_job(struct bpipe *p);

#endif
