/*
 * Jobs: the one wrapper around uv_queue_work. A job's work function runs
 * on a pool thread and must touch nothing the loop owns: it gets its ctx,
 * which the submitter filled with owned copies of everything it needs.
 * Its done function runs on the loop afterwards, also when the job was
 * cancelled before it started (cancelled == true), and owns ctx from then
 * on. The queue counts queued and running jobs for health and metrics and
 * can cancel everything not yet started at shutdown.
 */
#ifndef BERTH_DAEMON_JOB_H
#define BERTH_DAEMON_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef void (*job_work_fn)(void *ctx);
typedef void (*job_done_fn)(void *ctx, bool cancelled);

struct job_queue;

/* Loop thread. Returns NULL on allocation failure. */
struct job_queue *job_queue_new(uv_loop_t *loop);
/* Loop thread; every job must have completed (job_queue_idle). */
void job_queue_free(struct job_queue *q);

/*
 * Submits a job; name labels it in logs and metrics ("image.import").
 * Loop thread. Returns 0, or a negative errno when the queue is shutting
 * down or out of memory, in which case done is never called and ctx
 * stays the caller's.
 */
int job_submit(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done,
               void *ctx);

/*
 * As job_submit, for a short job that mostly waits on the kernel and on
 * child processes while a client waits on it (a container's create or
 * delete, a process's start): it runs at the daemon's own priority, not
 * the pool's lowered one, so on a busy machine it is not queued behind
 * every other runnable thread. Not for CPU-bound work. Loop thread.
 */
int job_submit_prompt(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done,
                      void *ctx);

/*
 * As job_submit, for a job that may run for long at a client's pace (an
 * import, a tar stream in or out of a volume): at most the queue's long
 * limit of them run at once and the others wait their turn in order, so
 * however many slow clients stream at once, pool threads stay free for
 * short jobs. Loop thread.
 */
int job_submit_long(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done,
                    void *ctx);

/* How many nice steps below the daemon's own nice value (at most to 19)
 * pool threads run unless a job is prompt (the default
 * leaves the loop a core on a small machine; 0 leaves the pool at the
 * daemon's priority, which on a host busy with other work lets imports
 * compete as equals). Loop thread, before the first job is submitted. */
#define JOB_POOL_NICE_DEFAULT 10
void job_queue_set_nice(struct job_queue *q, int nice);

/* Sets how many long jobs may run at once (at least 1). Loop thread. */
void job_queue_set_long_max(struct job_queue *q, unsigned max);

/* Jobs submitted and not started yet / started and not finished. Any thread. */
unsigned job_queue_queued(const struct job_queue *q);
unsigned job_queue_running(const struct job_queue *q);
/* Jobs finished since start (done called, cancelled or not). */
uint64_t job_queue_completed(const struct job_queue *q);

/*
 * Refuses new jobs and cancels every job not yet started (their done
 * callbacks run with cancelled == true). Running jobs finish normally.
 * Loop thread.
 */
void job_queue_shutdown(struct job_queue *q);

/* True when no job is queued or running (every done callback has run). */
bool job_queue_idle(const struct job_queue *q);

#endif
