/* Random hex identifiers (common/randid.h); any thread. */
#include "common/randid.h"

#include "common/os.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void
hex_into(char *out, const unsigned char *raw, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 15];
    }
    out[2 * n] = '\0';
}

int
randid_hex(char *out, size_t nbytes, struct err *err)
{
    unsigned char raw[32];
    if (nbytes > sizeof(raw))
        nbytes = sizeof(raw);
    int r = os_random_bytes(raw, nbytes);
    if (r < 0)
        return err_errno(err, -r, "random id: the OS's random bytes");
    hex_into(out, raw, nbytes);
    return 0;
}

void
randid_new(char *out, size_t outlen, const char *prefix)
{
    char hex[17];
    if (randid_hex(hex, 8, NULL) < 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        unsigned char raw[8];
        memcpy(raw, &t, sizeof(raw));
        hex_into(hex, raw, sizeof(raw));
    }
    snprintf(out, outlen, "%s%s", prefix, hex);
}
