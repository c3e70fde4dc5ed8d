/*
 * A raw-socket client for hijacked connections (api/hijack.c) through the
 * test build's POST /v1/debug/echo-upgrade (api/bench_hijack.c): sends a
 * request, reads the reply's head, then reads Docker frames (stream byte,
 * three zero bytes, big-endian length) with a buffer of its own, since the
 * head and the first frames may come in one segment.
 */
#ifndef BERTH_TESTS_API_HARNESS_HIJACK_H
#define BERTH_TESTS_API_HARNESS_HIJACK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HJ_ROUTE "/v1/debug/echo-upgrade"
#define HJ_UPGRADE_HEADERS "Upgrade: tcp\r\nConnection: Upgrade\r\n"

struct hj_client {
    int fd;
    char buf[65536];
    size_t off, len; /* buffered bytes: buf[off, off + len) */
};

/*
 * Connects to port and sends, in one send(), "POST target HTTP/1.1" with
 * the header lines given (each ending in CRLF; may be NULL), a
 * Content-Length body when body is not NULL, and then the bytes of early.
 * Reads the reply's head (up to its blank line) into head. Returns the
 * status, or 0 when no head came within timeout_ms (-1: cannot connect).
 */
int hj_open(struct hj_client *c, unsigned port, const char *target, const char *headers,
            const char *body, const char *early, char *head, size_t head_len, int timeout_ms);

/* hj_open with the Upgrade headers and no body; asserts the 101. */
void hj_open_upgraded(struct hj_client *c, unsigned port, const char *query);

/* Sends all of len bytes; false on error. */
bool hj_send(struct hj_client *c, const void *data, size_t len);
/* Reads exactly len bytes; false on EOF, error or timeout. */
bool hj_read_exact(struct hj_client *c, void *out, size_t len, int timeout_ms);
/* Reads one frame: its stream and up to cap bytes of payload (a longer one
 * fails); false on EOF, error or timeout. */
bool hj_read_frame(struct hj_client *c, unsigned *stream, char *data, size_t cap, size_t *len,
                   int timeout_ms);
/* Whether the server's FIN comes (nothing buffered, recv gives 0) within
 * timeout_ms. */
bool hj_read_eof(struct hj_client *c, int timeout_ms);
/* The write half-close: shutdown(SHUT_WR). */
void hj_half_close(struct hj_client *c);
/* Closes; with reset, with SO_LINGER 0, so the kernel sends an RST. */
void hj_close(struct hj_client *c, bool reset);

/* Resident memory of a process in KiB (VmRSS), or -1. */
long hj_rss_kib(pid_t pid);

#endif
