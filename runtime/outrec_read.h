/*
 * Reading a process's output through its chunk index (runtime/outrec.h):
 * stdout and stderr in the order they were written, cut into lines, each
 * with the time its line began, filtered by stream, `since` and `until`,
 * from the start or from the last N lines.
 *
 * The files are the writer's and may be damaged by a crash, so every
 * entry is checked before it is used (runtime/outrec.h) and the read
 * stops at the first that fails: what it gives is always a prefix of what
 * was written. Once the writer is done (the process exited), what the
 * files hold past the last good entry (a chunk whose entry never made it,
 * or output past the index's own cap) is given too, stdout's rest then
 * stderr's, with the time of the last entry, so nothing written is lost.
 *
 * Blocking (pread on the files): call from pool jobs. The state is all in
 * a plain struct outrec_pos, which the caller keeps between reads.
 */
#ifndef BERTH_RUNTIME_OUTREC_READ_H
#define BERTH_RUNTIME_OUTREC_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The three files of one process's output; the fds are borrowed. */
struct outrec_log {
    int index_fd;
    int data_fd[2]; /* stdout, stderr */
};

/* Which lines a read gives. */
struct outrec_filter {
    unsigned streams; /* bit 0 stdout, bit 1 stderr */
    int64_t since_ns; /* lines begun before it are left out; 0: none */
    int64_t until_ns; /* the read ends at the first line begun after it; 0: none */
};

/* Where a read is: start from a zeroed one (the beginning) or outrec_log_tail. */
struct outrec_pos {
    uint64_t entry;       /* the next entry of the index */
    uint32_t skip;        /* bytes of it already read */
    uint64_t next_off[2]; /* where each stream's next chunk must start */
    bool mid_line[2];     /* the stream's next byte continues a line */
    bool dropping[2];     /* ... one that is left out (before since, or the tail) */
    int64_t line_time[2]; /* when the stream's current line began */
    int64_t last_time;    /* the newest entry's time */
    bool raw;             /* past the index: the rest of the files */
};

/* One piece of output: a whole line, or part of one (a line ends after its '\n'). */
struct outrec_piece {
    uint8_t stream;
    bool line_start; /* the first piece of its line */
    int64_t time_ns; /* when its line began */
    size_t at, len;  /* in the caller's buffer */
};

enum outrec_state {
    OUTREC_MORE,  /* the buffer or the pieces are full: read again */
    OUTREC_END,   /* nothing more is there now */
    OUTREC_UNTIL, /* a line began after until: nothing more will be given */
};

/*
 * Reads on from *pos (and moves it): bytes into buf (cap of them), up to
 * max pieces. final: the writer is done, so an entry that fails is the
 * end of the index and the rest of the files is given. Returns the number
 * of pieces (0 is possible with OUTREC_MORE, when only skipped output was
 * read) or a negative errno; *state says why it stopped.
 */
int outrec_log_read(const struct outrec_log *l, struct outrec_pos *pos,
                    const struct outrec_filter *f, bool final, char *buf, size_t cap,
                    struct outrec_piece *pieces, size_t max, enum outrec_state *state,
                    struct err *err);

/*
 * Sets *pos where a read gives the last n lines (of f's streams) written
 * so far; all of them when there are fewer. Reads the whole index and,
 * from the end, the lines' bytes.
 */
int outrec_log_tail(const struct outrec_log *l, const struct outrec_filter *f, uint64_t n,
                    struct outrec_pos *pos, struct err *err);

#endif
