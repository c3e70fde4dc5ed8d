/*
 * Log times (api/logtime.h): unix seconds in, RFC 3339 with nanoseconds
 * out. Any thread.
 */
#include "api/logtime.h"

#include <stdio.h>
#include <time.h>

int
api_logtime_parse(const char *name, const char *v, int64_t *ns, struct err *err)
{
    const char *p = v;
    int64_t sec = 0, frac = 0;
    int digits = 0, fdigits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (sec > (INT64_MAX / 1000000000 - 9) / 10)
            return err_set(err, EINVAL, "query \"%s\": %.64s is out of range", name, v);
        sec = sec * 10 + (*p - '0');
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, fdigits++) {
            if (fdigits == 9)
                return err_set(err, EINVAL,
                               "query \"%s\": %.64s has more than nine digits after the point",
                               name, v);
            frac = frac * 10 + (*p - '0');
        }
        if (fdigits == 0)
            digits = 0;
    }
    if (digits == 0 || *p)
        return err_set(err, EINVAL, "query \"%s\": %.64s is not unix seconds, such as 1700000000.5",
                       name, v);
    for (int i = fdigits; i < 9; i++)
        frac *= 10;
    *ns = sec * 1000000000 + frac;
    return 0;
}

size_t
api_logtime_format(int64_t ns, char out[API_LOGTIME_MAX])
{
    time_t sec = (time_t)(ns / 1000000000);
    long nsec = (long)(ns % 1000000000);
    if (nsec < 0) {
        sec--;
        nsec += 1000000000;
    }
    struct tm tm;
    gmtime_r(&sec, &tm);
    int n =
        snprintf(out, API_LOGTIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nsec);
    return n > 0 ? (size_t)n : 0;
}
