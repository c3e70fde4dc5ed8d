/*
 * A streaming tar reader for Windows layer tars: ustar headers, PAX
 * extended records (every record kept, MSWINDOWS.* and LIBARCHIVE.*
 * included) and GNU long names. libarchive reads these tars too, but
 * drops the PAX records it does not know, and MSWINDOWS.rawsd (the
 * security descriptor) is one of them; this reader keeps them all, and
 * needs nothing but libc, so it runs (and is tested) on Linux and under
 * Wine alike.
 *
 * The stream is hostile: every header's checksum is verified, every size
 * and count is bounded (WTAR_*_MAX), a stream that ends before its end
 * marker (two zero blocks) or inside an entry is ERR_INVALID_CONTENT.
 * Synchronous; blocking as its read callback is; one reader per thread.
 */
#ifndef BERTH_STORE_WINTAR_H
#define BERTH_STORE_WINTAR_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/err.h"

/* A name or link target, in bytes (a PAX path may be longer than ustar's). */
#define WTAR_NAME_MAX 4096
/* One PAX extended header (all its records together), and records per entry. */
#define WTAR_PAX_MAX (1024 * 1024)
#define WTAR_RECORDS_MAX 1024

/* Fills up to len bytes of buf: how many, 0 at the end, or a negative errno. */
typedef ssize_t (*wtar_read_fn)(void *ctx, void *buf, size_t len);

struct wtar_record {
    char *key;
    char *value; /* NUL-terminated; vlen bytes (a value may hold NUL bytes) */
    size_t vlen;
};

struct wtar_entry {
    char type;      /* the ustar typeflag: '0' (also for '\0' and '7'), '1', '2', '5', ... */
    char *name;     /* as in the tar: PAX path, else GNU long name, else prefix/name */
    char *linkname; /* PAX linkpath, GNU long link, or the header's; "" when none */
    uint64_t size;  /* bytes of data that follow */
    uint32_t mode;
    int64_t mtime;
    size_t nrecords; /* this entry's PAX records, in the order given */
    struct wtar_record *records;
};

struct wtar_reader;

/* A reader over read(ctx); NULL when out of memory. */
struct wtar_reader *wtar_reader_new(wtar_read_fn read, void *ctx);
void wtar_reader_free(struct wtar_reader *r);

/*
 * The next entry (owned by the reader, valid until the next call): 1, or
 * 0 at the end marker. Data the caller did not read of the previous entry
 * is skipped. ERR_INVALID_CONTENT naming the entry and the offset for a
 * damaged or hostile stream; the read callback's errors as they are.
 */
int wtar_next(struct wtar_reader *r, const struct wtar_entry **out, struct err *err);

/* Reads up to len bytes of the current entry's data: how many, 0 at its end. */
ssize_t wtar_read_data(struct wtar_reader *r, void *buf, size_t len, struct err *err);

/* The value of PAX record key of e, or NULL. */
const struct wtar_record *wtar_entry_record(const struct wtar_entry *e, const char *key);

#endif
