/*
 * The output record: how a process's stdout and stderr are kept so that
 * each chunk keeps its time and its stream.
 *
 * A process's output stays in two plain files, procs/<id>/stdout and
 * stderr, holding exactly the bytes it wrote (so the /v1 routes read them
 * by offset as before). Beside them, procs/<id>/chunks is an append-only
 * index: one fixed-size entry per chunk the writer copied from a pipe,
 * written after that chunk's bytes, saying which stream, when (unix ns,
 * the time the writer read it) and where in that stream's file it lies.
 * The entries' order is the order the chunks were written, across both
 * streams.
 *
 * Why a separate index rather than headers in the data: a process only
 * writes bytes into a pipe, and those bytes are never parsed, so nothing
 * it writes can pass for an entry. And a crash mid-write cannot damage
 * what came before: entries are only ever appended, each is checked on
 * its own (a magic, a CRC-32, its stream's offsets contiguous from 0, its
 * bytes present in the data file), and a reader stops at the first entry
 * that fails, so a torn last entry, or one whose bytes never reached the
 * disk, costs that entry and nothing earlier.
 *
 * Entry layout, 32 bytes, little-endian:
 *
 *   0  u32 magic "BOC1"     16 u64 offset of the chunk in its stream's file
 *   4  u8  stream (0 or 1)  24 u32 length (1 .. OUTREC_CHUNK_MAX)
 *   5  u8[3] zero           28 u32 CRC-32 (IEEE) of bytes 0..27
 *   8  i64 time, unix ns
 *
 * libc only: berth-init (static, runtime/init/) compiles this file too.
 * Any thread; the append functions block on the disk.
 */
#ifndef BERTH_RUNTIME_OUTREC_H
#define BERTH_RUNTIME_OUTREC_H

#include <stddef.h>
#include <stdint.h>

#define OUTREC_SIZE 32
#define OUTREC_MAGIC 0x31434f42u /* "BOC1" */
/* No writer copies more than this at once (the init reads 64 KiB). */
#define OUTREC_CHUNK_MAX (1u << 20)
#define OUTREC_INDEX "chunks"

struct outrec {
    uint8_t stream; /* 0 stdout, 1 stderr */
    int64_t time_ns;
    uint64_t offset;
    uint32_t len;
};

uint32_t outrec_crc32(const unsigned char *p, size_t n);

void outrec_encode(const struct outrec *r, unsigned char out[OUTREC_SIZE]);

/* 0 when in holds a well-formed entry (magic, stream, zeros, length, CRC), else -1. */
int outrec_decode(const unsigned char in[OUTREC_SIZE], struct outrec *r);

/* CLOCK_REALTIME in ns. */
int64_t outrec_now_ns(void);

/* Appends r to an index opened O_APPEND: one write. 0, or -errno. */
int outrec_append(int index_fd, const struct outrec *r);

/*
 * Appends data to the stream's file in the process directory dirfd and
 * its entry to the index (both opened O_APPEND|O_NOFOLLOW, created 0640),
 * for a writer other than the copy loop: a failed spawn's message. The
 * offset is the file's size before the write. 0, or -errno.
 */
int outrec_write_output(int dirfd, int stream, const char *data, size_t len);

#endif
