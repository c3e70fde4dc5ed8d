/* Line-atomic logging to stderr in text or JSON, through the writer
 * thread once it runs (common/log_writer.c); any thread. */
#include "common/log.h"
#include "common/log_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;
static enum log_format out_format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_setup(enum log_level level, enum log_format format)
{
    min_level = level;
    out_format = format;
}

int
log_level_parse(const char *s, enum log_level *out)
{
    for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

int
log_format_parse(const char *s, enum log_format *out)
{
    if (strcmp(s, "text") == 0)
        *out = LOG_FORMAT_TEXT;
    else if (strcmp(s, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else
        return -EINVAL;
    return 0;
}

bool
log_enabled(enum log_level level)
{
    return level >= min_level;
}

static size_t
format_time(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
    return n;
}

/* Appends s to buf as JSON string content (no quotes); returns new length. */
static size_t
json_escape_into(char *buf, size_t pos, size_t cap, const char *s)
{
    for (; *s && pos + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[pos++] = '\\';
            buf[pos++] = (char)c;
        } else if (c < 0x20) {
            pos += snprintf(buf + pos, cap - pos, "\\u%04x", c);
        } else {
            buf[pos++] = (char)c;
        }
    }
    buf[pos] = '\0';
    return pos;
}

/* Adds the newline and hands the record to the writer thread, or writes
 * it when none runs (or direct). */
static void
emit(char *line, size_t len, bool direct)
{
    line[len++] = '\n';
    if (direct || !log_writer_take(line, len))
        log_emit_direct(line, len);
}

static void
log_vwrite(enum log_level level, bool direct, const char *fmt, va_list ap)
{
    if (!log_enabled(level))
        return;
    char msg[2048];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    char line[4608];
    char ts[64];
    format_time(ts, sizeof(ts));
    size_t n;
    if (out_format == LOG_FORMAT_JSON) {
        n = (size_t)snprintf(line, sizeof(line), "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
                             level_names[level]);
        n = json_escape_into(line, n, sizeof(line) - 3, msg);
        n += (size_t)snprintf(line + n, sizeof(line) - n, "\"}");
    } else {
        n = (size_t)snprintf(line, sizeof(line), "%s %-5s %s", ts, level_names[level], msg);
        if (n >= sizeof(line) - 1)
            n = sizeof(line) - 2;
    }
    emit(line, n, direct);
}

void
log_write(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, false, fmt, ap);
    va_end(ap);
}

void
log_write_direct(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, true, fmt, ap);
    va_end(ap);
}

/* Appends s for the text format, control characters as '?'. */
static size_t
text_into(char *buf, size_t pos, size_t cap, const char *s)
{
    for (; s && *s && pos + 1 < cap; s++)
        buf[pos++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    buf[pos] = '\0';
    return pos;
}

void
log_request(const struct log_req *r)
{
    if (!log_enabled(LOG_INFO))
        return;
    char line[4608];
    char ts[64];
    format_time(ts, sizeof(ts));
    size_t n, cap = sizeof(line) - 64;
    if (out_format == LOG_FORMAT_JSON) {
        n = (size_t)snprintf(line, sizeof(line),
                             "{\"time\":\"%s\",\"level\":\"info\",\"msg\":\"request\","
                             "\"method\":\"",
                             ts);
        n = json_escape_into(line, n, cap, r->method);
        n += (size_t)snprintf(line + n, sizeof(line) - n, "\",\"path\":\"");
        n = json_escape_into(line, n, cap, r->path);
        if (r->query && n < cap) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, "\",\"query\":\"");
            n = json_escape_into(line, n, cap, r->query);
        }
        n += (size_t)snprintf(line + n, sizeof(line) - n, "\",\"status\":%u,\"duration_ms\":%.3f",
                              r->status, r->duration_ms);
        if (r->code && n < cap) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, ",\"code\":\"");
            n = json_escape_into(line, n, cap, r->code);
            n += (size_t)snprintf(line + n, sizeof(line) - n, "\"");
        }
        if (r->error && n < cap) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, ",\"error\":\"");
            n = json_escape_into(line, n, cap, r->error);
            n += (size_t)snprintf(line + n, sizeof(line) - n, "\"");
        }
        n += (size_t)snprintf(line + n, sizeof(line) - n, "}");
    } else {
        n = (size_t)snprintf(line, sizeof(line), "%s info  %s ", ts, r->method);
        n = text_into(line, n, cap, r->path);
        if (r->query) {
            n = text_into(line, n, cap, "?");
            n = text_into(line, n, cap, r->query);
        }
        n += (size_t)snprintf(line + n, sizeof(line) - n, " %u %.3fms", r->status, r->duration_ms);
        if (r->code && n < cap) {
            n = text_into(line, n, cap, " ");
            n = text_into(line, n, cap, r->code);
        }
        if (r->error && n < cap) {
            n = text_into(line, n, cap, ": ");
            n = text_into(line, n, cap, r->error);
        }
    }
    if (n >= sizeof(line) - 1)
        n = sizeof(line) - 2;
    emit(line, n, false);
}
