/*
 * Clocks and times as users see them: wall-clock unix seconds and
 * milliseconds, and RFC 3339 renderings in UTC
 * ("2026-11-30T02:31:41Z", "2026-11-30T02:31:41.123Z"). Any thread.
 */
#ifndef BERTH_COMMON_CLOCK_H
#define BERTH_COMMON_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* Room for the longest rendering with milliseconds and its NUL. */
#define CLOCK_RFC3339_MAX 40

int64_t clock_unix_s(void);
int64_t clock_unix_ms(void);

/* Renders unix milliseconds as RFC 3339 UTC into buf; with_ms adds the
 * ".mmm" fraction. Returns buf. */
char *clock_rfc3339(int64_t unix_ms, bool with_ms, char buf[CLOCK_RFC3339_MAX]);

#endif
