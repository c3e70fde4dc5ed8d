/*
 * Output reads through the chunk index (runtime/outrec_read.h). Pool
 * threads: everything here preads the writer's files.
 */
#include "runtime/outrec_read.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "runtime/outrec.h"

/* Entries read at once, and looked at per read at most (a read that
 * skips much output returns now and then, so a pool job stays short). */
#define INDEX_BATCH 256
#define READ_WORK_MAX 65536

static ssize_t
pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static uint64_t
file_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
}

/*
 * Entry i of the index, checked against what came before it (pos's
 * offsets) and against the data file. 1: good, 0: none (yet), or one
 * that fails; -errno on a read error.
 */
static int
entry_at(const struct outrec_log *l, const struct outrec_pos *pos, uint64_t i, struct outrec *r)
{
    unsigned char b[OUTREC_SIZE];
    ssize_t n = pread_full(l->index_fd, b, sizeof(b), i * OUTREC_SIZE);
    if (n < 0)
        return (int)n;
    if (n < OUTREC_SIZE || outrec_decode(b, r) < 0 || r->offset != pos->next_off[r->stream])
        return 0;
    /* The writer puts the bytes before their entry: bytes missing mean a crash lost them. */
    return file_size(l->data_fd[r->stream]) >= r->offset + r->len;
}

/* Is the byte before off in the stream's file a line end (or off its start)? */
static int
line_begins_at(const struct outrec_log *l, int s, uint64_t off)
{
    if (off == 0)
        return 1;
    char c;
    ssize_t n = pread_full(l->data_fd[s], &c, 1, off - 1);
    if (n < 0)
        return (int)n;
    return n == 1 && c == '\n';
}

/*
 * Cuts buf[at, at+len) of stream s, from a chunk written at t, into
 * pieces. Returns the bytes consumed: fewer than len when the pieces ran
 * out (*state MORE) or a line began after until (*state UNTIL).
 */
static size_t
split(struct outrec_pos *pos, const struct outrec_filter *f, int s, int64_t t, const char *buf,
      size_t at, size_t len, struct outrec_piece *pieces, size_t max, size_t *n,
      enum outrec_state *state)
{
    size_t p = 0;
    while (p < len) {
        bool start = !pos->mid_line[s];
        if (start) {
            if (f->until_ns && t > f->until_ns) {
                *state = OUTREC_UNTIL;
                return p;
            }
            pos->line_time[s] = t;
            pos->dropping[s] = f->since_ns && t < f->since_ns;
        }
        const char *nl = memchr(buf + at + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - (buf + at)) + 1 : len;
        if (!pos->dropping[s]) {
            if (*n == max) {
                *state = OUTREC_MORE;
                return p;
            }
            pieces[(*n)++] = (struct outrec_piece){.stream = (uint8_t)s,
                                                   .line_start = start,
                                                   .time_ns = pos->line_time[s],
                                                   .at = at + p,
                                                   .len = e - p};
        }
        pos->mid_line[s] = buf[at + e - 1] != '\n';
        p = e;
    }
    return p;
}

/* The rest of the files past the index, once the writer is done. */
static int
read_raw(const struct outrec_log *l, struct outrec_pos *pos, const struct outrec_filter *f,
         char *buf, size_t cap, size_t *used, struct outrec_piece *pieces, size_t max, size_t *n,
         enum outrec_state *state)
{
    for (int s = 0; s < 2; s++) {
        if (!(f->streams & (1u << s)))
            continue;
        uint64_t size = file_size(l->data_fd[s]);
        while (pos->next_off[s] < size && *state == OUTREC_END) {
            if (*used == cap) {
                *state = OUTREC_MORE;
                return 0;
            }
            size_t want = cap - *used;
            if (want > size - pos->next_off[s])
                want = (size_t)(size - pos->next_off[s]);
            ssize_t got = pread_full(l->data_fd[s], buf + *used, want, pos->next_off[s]);
            if (got <= 0)
                return (int)got;
            size_t took =
                split(pos, f, s, pos->last_time, buf, *used, (size_t)got, pieces, max, n, state);
            if (*state == OUTREC_UNTIL)
                return 0;
            if (took < (size_t)got)
                *state = OUTREC_MORE;
            pos->next_off[s] += took;
            *used += took;
        }
        if (*state != OUTREC_END)
            return 0;
    }
    return 0;
}

int
outrec_log_read(const struct outrec_log *l, struct outrec_pos *pos, const struct outrec_filter *f,
                bool final, char *buf, size_t cap, struct outrec_piece *pieces, size_t max,
                enum outrec_state *state, struct err *err)
{
    size_t n = 0, used = 0;
    *state = OUTREC_END;
    for (unsigned work = 0; *state == OUTREC_END; work++) {
        if (pos->raw) {
            int ret = read_raw(l, pos, f, buf, cap, &used, pieces, max, &n, state);
            if (ret < 0)
                return err_errno(err, -ret, "read process output");
            break;
        }
        if (work == READ_WORK_MAX || used == cap || n == max) {
            *state = OUTREC_MORE;
            break;
        }
        struct outrec r;
        int ok = entry_at(l, pos, pos->entry, &r);
        if (ok < 0)
            return err_errno(err, -ok, "read the chunk index");
        if (ok == 0) {
            if (!final)
                break; /* END: not (yet) there */
            pos->raw = true;
            continue;
        }
        int s = r.stream;
        if (r.time_ns > pos->last_time)
            pos->last_time = r.time_ns;
        size_t took = 0, left = r.len - pos->skip;
        if (!(f->streams & (1u << s))) {
            took = left;
        } else if (f->since_ns && r.time_ns < f->since_ns) {
            /* Every line it holds or continues began before since: only
             * whether it ends a line matters. */
            int end = line_begins_at(l, s, r.offset + r.len);
            if (end < 0)
                return err_errno(err, -end, "read process output");
            pos->mid_line[s] = pos->dropping[s] = !end;
            took = left;
        } else {
            size_t want = left < cap - used ? left : cap - used;
            ssize_t got = pread_full(l->data_fd[s], buf + used, want, r.offset + pos->skip);
            if (got < 0)
                return err_errno(err, (int)-got, "read process output");
            if ((size_t)got < want) {
                /* The file shrank under its entry: treat the entry as bad. */
                if (!final)
                    break;
                pos->raw = true;
                continue;
            }
            took = split(pos, f, s, r.time_ns, buf, used, want, pieces, max, &n, state);
            used += took;
            if (*state == OUTREC_END && took < left)
                *state = OUTREC_MORE; /* the buffer is full */
        }
        pos->skip += (uint32_t)took;
        if (pos->skip == r.len) {
            pos->next_off[s] += r.len;
            pos->skip = 0;
            pos->entry++;
        }
    }
    return (int)n;
}

/* Moves pos to entry e, byte skip, from the start: offsets, line states. */
static int
tail_seek(const struct outrec_log *l, struct outrec_pos *pos, uint64_t e, uint32_t skip,
          struct err *err)
{
    memset(pos, 0, sizeof(*pos));
    unsigned char b[INDEX_BATCH * OUTREC_SIZE];
    struct outrec r;
    for (uint64_t i = 0; i < e;) {
        ssize_t got = pread_full(l->index_fd, b, sizeof(b), i * OUTREC_SIZE);
        if (got < 0)
            return err_errno(err, (int)-got, "read the chunk index");
        size_t k = 0;
        for (; k < (size_t)got / OUTREC_SIZE && i < e; k++, i++) {
            if (outrec_decode(b + k * OUTREC_SIZE, &r) < 0)
                return err_set(err, EIO, "chunk index: entry %llu changed", (unsigned long long)i);
            pos->next_off[r.stream] = r.offset + r.len;
            if (r.time_ns > pos->last_time)
                pos->last_time = r.time_ns;
        }
        if (k == 0)
            return err_set(err, EIO, "chunk index: shorter than before");
    }
    pos->entry = e;
    pos->skip = skip;
    for (int s = 0; s < 2; s++) {
        int begins = line_begins_at(l, s, pos->next_off[s]);
        if (begins < 0)
            return err_errno(err, -begins, "read process output");
        pos->mid_line[s] = pos->dropping[s] = !begins;
    }
    /* The target itself begins a line (the tail's first). */
    if (skip > 0 && pread_full(l->index_fd, b, OUTREC_SIZE, e * OUTREC_SIZE) == OUTREC_SIZE &&
        outrec_decode(b, &r) == 0)
        pos->mid_line[r.stream] = pos->dropping[r.stream] = false;
    return 0;
}

int
outrec_log_tail(const struct outrec_log *l, const struct outrec_filter *f, uint64_t n,
                struct outrec_pos *pos, struct err *err)
{
    /* How many entries are good, as a read would see them. */
    struct outrec_pos scan = {0};
    struct outrec r;
    for (;;) {
        int ok = entry_at(l, &scan, scan.entry, &r);
        if (ok < 0)
            return err_errno(err, -ok, "read the chunk index");
        if (ok == 0)
            break;
        scan.next_off[r.stream] += r.len;
        scan.entry++;
    }
    if (n == 0)
        return tail_seek(l, pos, scan.entry, 0, err);

    cleanup_free char *data = malloc(OUTREC_CHUNK_MAX);
    if (!data)
        return err_set(err, ENOMEM, "tail of the output: out of memory");
    uint64_t lines = 0;
    for (uint64_t e = scan.entry; e-- > 0;) {
        unsigned char b[OUTREC_SIZE];
        if (pread_full(l->index_fd, b, sizeof(b), e * OUTREC_SIZE) != OUTREC_SIZE ||
            outrec_decode(b, &r) < 0)
            return err_set(err, EIO, "chunk index: entry %llu changed", (unsigned long long)e);
        if (!(f->streams & (1u << r.stream)))
            continue;
        ssize_t got = pread_full(l->data_fd[r.stream], data, r.len, r.offset);
        if (got != (ssize_t)r.len)
            return err_set(err, EIO, "process output: shorter than its chunk index");
        for (uint32_t i = r.len; i-- > 0;) {
            int begins = i > 0 ? data[i - 1] == '\n' : line_begins_at(l, r.stream, r.offset);
            if (begins < 0)
                return err_errno(err, -begins, "read process output");
            if (begins && ++lines == n)
                return tail_seek(l, pos, e, i, err);
        }
    }
    memset(pos, 0, sizeof(*pos)); /* fewer lines than n: all of them */
    return 0;
}
