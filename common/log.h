/*
 * Logging to stderr, one line per record, as text or as JSON objects.
 * Safe from any thread: each record is formatted into one buffer and
 * written with a single write(2), so lines from pool threads never
 * interleave.
 */
#ifndef BERTH_COMMON_LOG_H
#define BERTH_COMMON_LOG_H

#include <stdbool.h>

#include "common/err.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

void log_setup(enum log_level level, enum log_format format);

/* Parses "debug", "info", "warn" or "error"; returns 0 or -EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
/* Parses "text" or "json"; returns 0 or -EINVAL. */
int log_format_parse(const char *s, enum log_format *out);

bool log_enabled(enum log_level level);

/* Writes one record. fmt is the human message; with the JSON format it
 * becomes the "msg" field. */
void log_write(enum log_level level, const char *fmt, ...) BERTH_FORMAT(2, 3);

/*
 * Writes one request record: method, path, status and duration, as
 * separate JSON fields in the JSON format so log processors can filter.
 */
void log_request(const char *method, const char *path, unsigned status, double duration_ms);

#define log_debug(...) log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)

#endif
