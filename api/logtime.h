/*
 * The times of log readers, as the Docker Engine writes and reads them:
 * `since` and `until` as unix seconds with an optional fraction of up to
 * nine digits ("1700000000.5"), and a line's time as RFC 3339 with
 * nanoseconds, always nine digits, in UTC ("2026-12-01T23:19:55.000000001Z").
 * Shared by the /v1 log route and the Docker API's. Any thread; pure.
 */
#ifndef BERTH_API_LOGTIME_H
#define BERTH_API_LOGTIME_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Room for a formatted time and its NUL. */
#define API_LOGTIME_MAX 40

/* Parses v (named name in errors) as unix seconds into ns. 0, or -EINVAL. */
int api_logtime_parse(const char *name, const char *v, int64_t *ns, struct err *err);

/* Formats ns as RFC 3339 with nanoseconds; returns the length. */
size_t api_logtime_format(int64_t ns, char out[API_LOGTIME_MAX]);

#endif
