/*
 * The job queue over uv_queue_work. The list of outstanding jobs and the
 * done callbacks belong to the loop thread; the queued/running counters
 * are atomics because pool threads move jobs from queued to running.
 */
#include "daemon/job.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include <string.h>

#include "common/log.h"
#include "common/os.h"

struct job {
    uv_work_t req;
    struct job_queue *queue;
    const char *name;
    job_work_fn work;
    job_done_fn done;
    void *ctx;
    bool is_long;
    bool prompt;              /* runs at the daemon's priority (job_submit_prompt) */
    struct job *prev, *next;  /* outstanding list, loop-owned */
    struct job *next_waiting; /* long jobs waiting for a slot */
};

struct job_queue {
    uv_loop_t *loop;
    struct job *head;     /* outstanding jobs (queued or running) */
    unsigned outstanding; /* loop-owned */
    atomic_uint queued;
    atomic_uint running;
    atomic_uint_fast64_t completed;
    bool shutting_down;
    unsigned long_max, long_running;         /* loop-owned */
    int nice;                                /* set before the first job, read by pool threads */
    struct job *waiting_head, *waiting_tail; /* long jobs not yet handed to libuv */
};

struct job_queue *
job_queue_new(uv_loop_t *loop)
{
    struct job_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->loop = loop;
    q->long_max = 1;
    q->nice = JOB_POOL_NICE_DEFAULT;
    return q;
}

void
job_queue_set_nice(struct job_queue *q, int nice)
{
    q->nice = nice;
}

void
job_queue_free(struct job_queue *q)
{
    if (!q)
        return;
    if (q->outstanding)
        log_error("job queue freed with %u jobs outstanding", q->outstanding);
    free(q);
}

/*
 * Pool threads run their jobs at a lower priority than the loop thread
 * (nice +10 by default on Linux, where each thread has its own nice
 * value; below normal on Windows): on a small machine several CPU-bound
 * jobs would otherwise compete with the loop for the cores, and every
 * request would wait behind them. A prompt job (job_submit_prompt) runs
 * at the daemon's own priority. The price is paid on a host busy with
 * other work: there a thread at nice +10 gets about a tenth of the CPU
 * share of each nice-0 process, and an import waits on the run queue
 * longer than it runs (bench/README.md, issue 16); --pool-nice 0 leaves
 * every job at the daemon's priority.
 *
 * Between jobs a thread rests at the daemon's priority, and lowers itself
 * only while a job that is not prompt runs: the priority a thread has
 * when it is woken for the next job is the one it waits for a CPU with,
 * and a prompt job picked up by a thread resting at +10 first waited, on
 * a loaded machine, as long as any +10 thread does (under EEVDF, behind
 * every runnable thread at nice 0: 50-230 ms per hand-off at a load of
 * 16 on 2 cores, three hand-offs per container start). A thread that
 * cannot raise itself back (no CAP_SYS_NICE, RLIMIT_NICE) stays low.
 */
static _Thread_local bool thread_low;   /* lowered to the queue's nice now */
static _Thread_local bool thread_stuck; /* cannot go back up: stays low */

static void
pool_thread_set_low(const struct job_queue *q, bool low)
{
    if (low && q->nice == 0)
        low = false; /* --pool-nice 0: never lowered */
    if (low == thread_low || (!low && thread_stuck))
        return;
    int r = low ? os_thread_lower_priority(q->nice) : os_thread_restore_priority();
    if (r == 0) {
        thread_low = low;
    } else if (low) {
        log_debug("job: cannot lower the pool thread's priority: %s", strerror(-r));
        thread_stuck = true; /* and never tried again */
        thread_low = true;
    } else {
        log_debug("job: cannot raise the pool thread's priority again: %s", strerror(-r));
        thread_stuck = true;
    }
}

static void start_waiting(struct job_queue *q);

static void
work_cb(uv_work_t *req)
{
    struct job *job = req->data;
    pool_thread_set_low(job->queue, !job->prompt);
    atomic_fetch_sub(&job->queue->queued, 1);
    atomic_fetch_add(&job->queue->running, 1);
    job->work(job->ctx);
    atomic_fetch_sub(&job->queue->running, 1);
    pool_thread_set_low(job->queue, false); /* rests at the daemon's priority */
}

static void
after_work_cb(uv_work_t *req, int status)
{
    struct job *job = req->data;
    struct job_queue *q = job->queue;
    bool cancelled = status == UV_ECANCELED;
    if (cancelled)
        atomic_fetch_sub(&q->queued, 1);
    if (job->prev)
        job->prev->next = job->next;
    else
        q->head = job->next;
    if (job->next)
        job->next->prev = job->prev;
    q->outstanding--;
    atomic_fetch_add(&q->completed, 1);
    if (job->is_long) {
        q->long_running--;
        start_waiting(q);
    }
    job_done_fn done = job->done;
    void *ctx = job->ctx;
    if (cancelled)
        log_debug("job %s cancelled before it started", job->name);
    free(job);
    done(ctx, cancelled);
}

static struct job *
job_new(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done, void *ctx)
{
    struct job *job = calloc(1, sizeof(*job));
    if (!job)
        return NULL;
    job->queue = q;
    job->name = name;
    job->work = work;
    job->done = done;
    job->ctx = ctx;
    job->req.data = job;
    return job;
}

/* Hands a job to libuv and puts it on the outstanding list. */
static int
job_start(struct job_queue *q, struct job *job)
{
    int rc = uv_queue_work(q->loop, &job->req, work_cb, after_work_cb);
    if (rc < 0)
        return rc;
    job->next = q->head;
    if (q->head)
        q->head->prev = job;
    q->head = job;
    q->outstanding++;
    return 0;
}

/* Starts waiting long jobs while there are free long slots. */
static void
start_waiting(struct job_queue *q)
{
    while (q->waiting_head && q->long_running < q->long_max && !q->shutting_down) {
        struct job *job = q->waiting_head;
        q->waiting_head = job->next_waiting;
        if (!q->waiting_head)
            q->waiting_tail = NULL;
        q->outstanding--; /* job_start counts it again */
        q->long_running++;
        if (job_start(q, job) < 0) {
            /* libuv refused (it does not, short of a bug): end it here. */
            q->long_running--;
            atomic_fetch_sub(&q->queued, 1);
            job_done_fn done = job->done;
            void *ctx = job->ctx;
            free(job);
            done(ctx, true);
        }
    }
}

int
job_submit(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done, void *ctx)
{
    if (q->shutting_down)
        return -ECANCELED;
    struct job *job = job_new(q, name, work, done, ctx);
    if (!job)
        return -ENOMEM;
    atomic_fetch_add(&q->queued, 1);
    int rc = job_start(q, job);
    if (rc < 0) {
        atomic_fetch_sub(&q->queued, 1);
        free(job);
        return rc;
    }
    return 0;
}

int
job_submit_prompt(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done,
                  void *ctx)
{
    if (q->shutting_down)
        return -ECANCELED;
    struct job *job = job_new(q, name, work, done, ctx);
    if (!job)
        return -ENOMEM;
    job->prompt = true;
    atomic_fetch_add(&q->queued, 1);
    int rc = job_start(q, job);
    if (rc < 0) {
        atomic_fetch_sub(&q->queued, 1);
        free(job);
        return rc;
    }
    return 0;
}

int
job_submit_long(struct job_queue *q, const char *name, job_work_fn work, job_done_fn done,
                void *ctx)
{
    if (q->shutting_down)
        return -ECANCELED;
    struct job *job = job_new(q, name, work, done, ctx);
    if (!job)
        return -ENOMEM;
    job->is_long = true;
    atomic_fetch_add(&q->queued, 1);
    if (!q->waiting_head && q->long_running < q->long_max) {
        /* A free slot: start it now, and report a failure to the caller
         * (done is never called for a job that was refused). */
        int rc = job_start(q, job);
        if (rc < 0) {
            atomic_fetch_sub(&q->queued, 1);
            free(job);
            return rc;
        }
        q->long_running++;
        return 0;
    }
    /* Waiting jobs count as outstanding: the queue is not idle with them. */
    q->outstanding++;
    if (q->waiting_tail)
        q->waiting_tail->next_waiting = job;
    else
        q->waiting_head = job;
    q->waiting_tail = job;
    start_waiting(q);
    return 0;
}

void
job_queue_set_long_max(struct job_queue *q, unsigned max)
{
    q->long_max = max ? max : 1;
    start_waiting(q);
}

unsigned
job_queue_queued(const struct job_queue *q)
{
    return atomic_load(&q->queued);
}

unsigned
job_queue_running(const struct job_queue *q)
{
    return atomic_load(&q->running);
}

uint64_t
job_queue_completed(const struct job_queue *q)
{
    return atomic_load(&q->completed);
}

void
job_queue_shutdown(struct job_queue *q)
{
    q->shutting_down = true;
    /* Long jobs still waiting for a slot never reached libuv: end them
     * here, as cancelled. */
    while (q->waiting_head) {
        struct job *job = q->waiting_head;
        q->waiting_head = job->next_waiting;
        q->outstanding--;
        atomic_fetch_sub(&q->queued, 1);
        atomic_fetch_add(&q->completed, 1);
        job_done_fn done = job->done;
        void *ctx = job->ctx;
        free(job);
        done(ctx, true);
    }
    q->waiting_tail = NULL;
    /* uv_cancel fails with EBUSY for jobs already running: they finish. */
    for (struct job *job = q->head; job; job = job->next)
        uv_cancel((uv_req_t *)&job->req);
}

bool
job_queue_idle(const struct job_queue *q)
{
    return q->outstanding == 0;
}
