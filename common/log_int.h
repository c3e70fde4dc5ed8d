/*
 * Between common/log.c (formatting records) and common/log_writer.c (the
 * thread that writes them once log_writer_start ran). Any thread.
 */
#ifndef BERTH_COMMON_LOG_INT_H
#define BERTH_COMMON_LOG_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/log.h"

/* Queues line (n bytes, its newline included) for the writer thread;
 * false when no writer runs for this process (write it directly). */
bool log_writer_take(const char *line, size_t n);
/* Writes line to stderr now, whole (a record is one write(2)). */
void log_emit_direct(const char *line, size_t n);
/* log_write, written directly: the writer thread's own records. */
void log_write_direct(enum log_level level, const char *fmt, ...) BERTH_FORMAT(2, 3);

#endif
