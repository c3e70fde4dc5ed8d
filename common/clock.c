/* Wall clocks and RFC 3339 rendering (common/clock.h); any thread. */
#include "common/clock.h"

#include <stdio.h>
#include <time.h>

int64_t
clock_unix_s(void)
{
    return (int64_t)time(NULL);
}

int64_t
clock_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *
clock_rfc3339(int64_t unix_ms, bool with_ms, char buf[CLOCK_RFC3339_MAX])
{
    int64_t s = unix_ms / 1000, ms = unix_ms % 1000;
    if (ms < 0) {
        ms += 1000;
        s--;
    }
    time_t t = (time_t)s;
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, CLOCK_RFC3339_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
    if (with_ms)
        snprintf(buf + n, CLOCK_RFC3339_MAX - n, ".%03dZ", (int)ms);
    else
        snprintf(buf + n, CLOCK_RFC3339_MAX - n, "Z");
    return buf;
}
