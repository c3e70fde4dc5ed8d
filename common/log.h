/*
 * Logging to stderr, one line per record, as text or as JSON objects.
 * Safe from any thread: each record is formatted into one buffer and
 * written whole (directly with a single write(2), or queued for the
 * writer thread), so lines from pool threads never interleave.
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

/*
 * From here on records go to a thread of their own, which writes them
 * (common/log_writer.c), so a caller never waits on stderr, whatever it
 * is (a file on a busy disk, a full pipe); a record that finds the
 * writer 256 KiB behind is dropped, and the writer says how many were.
 * 0, or -errno (records are then written directly, as before). berthd
 * calls it once configured; log_writer_stop (also run at exit) writes
 * what is queued and goes back to writing directly.
 */
int log_writer_start(void);
void log_writer_stop(void);

/* Writes one record. fmt is the human message; with the JSON format it
 * becomes the "msg" field. */
void log_write(enum log_level level, const char *fmt, ...) BERTH_FORMAT(2, 3);

/*
 * One line per finished request, at info: method, path and query string,
 * status, duration, and for an error its code (and for a 5xx its message:
 * the only line that error gets). In the JSON format each is a field
 * ("path", "query", "code", "error") so log processors can filter; in
 * text, control characters of the client's target are shown as '?'.
 */
struct log_req {
    const char *method;
    const char *path;
    const char *query; /* without the '?', or NULL */
    unsigned status;
    double duration_ms;
    const char *code;  /* the error code replied, or NULL */
    const char *error; /* the error message (5xx), or NULL */
};
void log_request(const struct log_req *r);

#define log_debug(...) log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)

#endif
