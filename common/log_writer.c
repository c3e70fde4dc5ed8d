/*
 * The log's writer thread (common/log.h: log_writer_start). Once it runs,
 * a record is copied into a ring in memory and a thread of its own
 * writes it to stderr, so that no thread that logs (the loop above all,
 * which logs every request) waits on stderr: a log file on a disk busy
 * with an unpack blocked the loop in write(2) for up to 24 ms a line
 * (balance_dirty_pages throttles every writer of a dirty disk). When the
 * ring is full the record is dropped and counted, and the writer says
 * how many it dropped, rather than let any thread wait.
 *
 * Any thread logs; the writer thread only writes. A child forked without
 * exec has no writer thread: its records are written directly. Linux and
 * other POSIX systems; on Windows records are always written directly.
 */
#include "common/log_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef _WIN32
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define RING_BYTES (256 * 1024)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char *ring;
static size_t head, len;       /* records at [head, head+len) mod RING_BYTES */
static unsigned long dropped;  /* records that found the ring full */
static bool running, stopping; /* under mu */
static atomic_int writer_pid;  /* the process whose thread writes, or 0 */
static bool exit_hook;
static pthread_t thread;

void
log_emit_direct(const char *line, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        line += w;
        n -= (size_t)w;
    }
}

bool
log_writer_take(const char *line, size_t n)
{
    if (atomic_load(&writer_pid) != (int)getpid())
        return false;
    pthread_mutex_lock(&mu);
    if (!running) {
        pthread_mutex_unlock(&mu);
        return false;
    }
    if (RING_BYTES - len < n) {
        dropped++;
    } else {
        size_t tail = (head + len) % RING_BYTES;
        size_t first = n < RING_BYTES - tail ? n : RING_BYTES - tail;
        memcpy(ring + tail, line, first);
        memcpy(ring, line + first, n - first);
        len += n;
    }
    pthread_mutex_unlock(&mu);
    pthread_cond_signal(&cond);
    return true;
}

static void *
writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (len == 0 && dropped == 0 && !stopping)
            pthread_cond_wait(&cond, &mu);
        if (len == 0 && dropped == 0)
            break; /* stopping, and everything written */
        /* Written from the ring itself, outside the lock: the loggers
         * only ever add after it. */
        size_t at = head, n = len < RING_BYTES - head ? len : RING_BYTES - head;
        unsigned long lost = dropped;
        dropped = 0;
        pthread_mutex_unlock(&mu);
        log_emit_direct(ring + at, n);
        if (lost)
            log_write_direct(LOG_WARN, "log: %lu records dropped: stderr did not keep up", lost);
        pthread_mutex_lock(&mu);
        head = (head + n) % RING_BYTES;
        len -= n;
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void
stop_at_exit(void)
{
    log_writer_stop();
}

int
log_writer_start(void)
{
    pthread_mutex_lock(&mu);
    if (running) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    if (!ring && !(ring = malloc(RING_BYTES))) {
        pthread_mutex_unlock(&mu);
        return -ENOMEM;
    }
    head = len = 0;
    dropped = 0;
    stopping = false;
    int r = pthread_create(&thread, NULL, writer_main, NULL);
    if (r == 0) {
        running = true;
        atomic_store(&writer_pid, (int)getpid());
    }
    pthread_mutex_unlock(&mu);
    if (r == 0 && !exit_hook) {
        exit_hook = true;
        atexit(stop_at_exit); /* an exit() after an error still writes what was logged */
    }
    return -r;
}

void
log_writer_stop(void)
{
    if (atomic_load(&writer_pid) != (int)getpid())
        return;
    pthread_mutex_lock(&mu);
    if (!running) {
        pthread_mutex_unlock(&mu);
        return;
    }
    stopping = true;
    pthread_mutex_unlock(&mu);
    pthread_cond_signal(&cond);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    running = false;
    atomic_store(&writer_pid, 0);
    pthread_mutex_unlock(&mu);
}

#else /* _WIN32: records are written directly */

void
log_emit_direct(const char *line, size_t n)
{
    while (n > 0) {
        int w = write(STDERR_FILENO, line, (unsigned)n);
        if (w <= 0)
            return;
        line += w;
        n -= (size_t)w;
    }
}

bool
log_writer_take(const char *line, size_t n)
{
    (void)line;
    (void)n;
    return false;
}

int
log_writer_start(void)
{
    return -ENOSYS;
}

void
log_writer_stop(void)
{
}

#endif
