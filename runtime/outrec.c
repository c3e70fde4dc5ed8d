/*
 * Output record entries (runtime/outrec.h): encoding, checking and
 * appending. libc only, also linked into the static berth-init. Any
 * thread; the appends block on the disk.
 */
#include "runtime/outrec.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint32_t
outrec_crc32(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void
put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t
get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void
outrec_encode(const struct outrec *r, unsigned char out[OUTREC_SIZE])
{
    memset(out, 0, OUTREC_SIZE);
    put_le(out, OUTREC_MAGIC, 4);
    out[4] = r->stream;
    put_le(out + 8, (uint64_t)r->time_ns, 8);
    put_le(out + 16, r->offset, 8);
    put_le(out + 24, r->len, 4);
    put_le(out + 28, outrec_crc32(out, 28), 4);
}

int
outrec_decode(const unsigned char in[OUTREC_SIZE], struct outrec *r)
{
    if (get_le(in, 4) != OUTREC_MAGIC || in[4] > 1 || in[5] || in[6] || in[7])
        return -1;
    if ((uint32_t)get_le(in + 28, 4) != outrec_crc32(in, 28))
        return -1;
    uint64_t len = get_le(in + 24, 4);
    uint64_t off = get_le(in + 16, 8);
    if (len == 0 || len > OUTREC_CHUNK_MAX || off > (UINT64_MAX >> 2))
        return -1;
    r->stream = in[4];
    r->time_ns = (int64_t)get_le(in + 8, 8);
    r->offset = off;
    r->len = (uint32_t)len;
    return 0;
}

int64_t
outrec_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int
outrec_append(int index_fd, const struct outrec *r)
{
    unsigned char b[OUTREC_SIZE];
    outrec_encode(r, b);
    ssize_t n;
    do {
        n = write(index_fd, b, sizeof(b));
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    /* A short write leaves a torn entry, which readers stop at. */
    return n == (ssize_t)sizeof(b) ? 0 : -EIO;
}

int
outrec_write_output(int dirfd, int stream, const char *data, size_t len)
{
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dirfd, stream ? "stderr" : "stdout", flags, 0640);
    if (fd < 0)
        return -errno;
    int ifd = openat(dirfd, OUTREC_INDEX, flags, 0640);
    struct stat st;
    int ret = 0;
    if (ifd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        ret = ifd < 0 ? -errno : -EIO;
        goto out;
    }
    struct outrec r = {
        .stream = (uint8_t)stream, .time_ns = outrec_now_ns(), .offset = (uint64_t)st.st_size};
    while (len > 0 && ret == 0) {
        size_t want = len > OUTREC_CHUNK_MAX ? OUTREC_CHUNK_MAX : len;
        ssize_t n = write(fd, data, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ret = n < 0 ? -errno : -EIO;
            break;
        }
        r.len = (uint32_t)n;
        ret = outrec_append(ifd, &r);
        r.offset += (uint64_t)n;
        data += n;
        len -= (size_t)n;
    }
out:
    if (ifd >= 0)
        close(ifd);
    close(fd);
    return ret;
}
