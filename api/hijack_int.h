/*
 * What the two halves of api/hijack.h share: the hijack itself and the
 * steps each half takes of the other. api/hijack.c hands the connection
 * over and owns the hijack's lifetime; api/hijack_stream.c moves the
 * bytes. Loop thread only.
 */
#ifndef BERTH_API_HIJACK_INT_H
#define BERTH_API_HIJACK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "api/hijack.h"

/* Bytes read and dropped at once while lingering. */
#define LINGER_BUF 16384

struct hj_chunk {
    struct hj_chunk *next;
    size_t len, off;
    hijack_write_cb cb;
    void *arg;
    char data[];
};

enum hj_state {
    HJ_PENDING,  /* the 101 is queued; MHD has not handed the socket over */
    HJ_OPEN,     /* the socket is ours */
    HJ_FLUSHING, /* closing: sending what is queued */
    HJ_LINGER,   /* closing: FIN sent, dropping what the client still sends */
    HJ_DONE,     /* handed back; the handles are closing */
};

struct hijack_set {
    uv_loop_t *loop;
    struct http_server *http;
    struct hijack *first;
    unsigned count;
    bool shutting_down; /* no new hijacks */
    bool aborting;      /* the final shutdown step: end everything now */
    bool free_pending;  /* freed by the last hijack to go */
};

struct hijack {
    struct hijack_set *set;
    struct hijack *prev, *next;
    struct api_req *req; /* NULL once detached or handed back */
    struct MHD_UpgradeResponseHandle *urh;
    enum hijack_mode mode;
    enum hj_state state;
    int fd;
    struct hijack_cbs cbs;
    void *ctx;

    uv_poll_t poll;
    uv_timer_t defer;    /* deferred work: callbacks never run inside our calls */
    uv_timer_t deadline; /* the flush and linger limits of a close */
    uv_timer_t head;     /* the checks of head_hold */
    bool poll_open;      /* initialised and not closed */
    int poll_events;     /* what it is started with */
    unsigned handles;    /* open; h is freed when none are left */
    bool pending_mhd;    /* MHD still holds h as its upgrade handler's closure */

    bool reading, closing, eof_seen, eof_told, error_told, detached;
    bool raw_head;          /* the raw mode's head is the first chunk, not all sent */
    bool head_hold;         /* the head is sent; the stream waits for the client to read it */
    bool peer_known;        /* the kernel can say what the peer has not read */
    uint64_t head_sent_at;  /* loop time the head was all sent */
    unsigned head_check_ms; /* the interval of the next check of head_hold */
    int error;              /* negative errno once the connection broke */
    uint64_t linger_until;  /* loop time the linger ends at, at the latest */

    char *rx; /* bytes read and not yet taken: rx[rx_off, rx_off + rx_len) */
    size_t rx_cap, rx_off, rx_len;

    struct hj_chunk *wq_head, *wq_tail;
    size_t queued, write_max;
};

/* api/hijack.c */
/* Runs the deferred step (the owner's close, an error, bytes to offer) on
 * the next loop turn: callbacks never run inside our calls. */
void hj_schedule(struct hijack *h);
/* The end: writes fail, the owner's closed callback, the socket back to MHD. */
void hj_finish(struct hijack *h);

/* api/hijack_stream.c */
void hj_update_poll(struct hijack *h);
void hj_fail(struct hijack *h, int err);
void hj_fail_writes(struct hijack *h, int status);
void hj_offer(struct hijack *h);
void hj_drop_input(int fd);
void hj_begin_linger(struct hijack *h);
void hj_begin_flush(struct hijack *h);
void hj_flush(struct hijack *h);
void hj_hold_after_head(struct hijack *h);

#endif
