/*
 * What store/meta.c and store/meta_image.c share, and nothing else sees:
 * the connection and its mutex, the transaction steps, small helpers.
 * Blocking, like the rest of the metadata layer.
 */
#ifndef BERTH_STORE_META_INT_H
#define BERTH_STORE_META_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/digest.h"

#define META_NAME_MAX 512
#define META_USER_MAX 256

struct meta {
    sqlite3 *db;
    pthread_mutex_t lock;
};

/* One transaction at a time on the one connection: takes the mutex and
 * begins; commits when ret is 0 (else rolls back), lets go, returns ret
 * or the commit's error. */
int meta_txn_begin(struct meta *m, struct err *err);
int meta_txn_end(struct meta *m, int ret, struct err *err);

/* A column's digest text into dst ("" for NULL). */
void meta_copy_digest(char dst[DIGEST_STR_LEN], const unsigned char *src);
int64_t meta_now_s(void);
/* Is s a string of 1..max bytes without control characters? */
bool meta_text_valid(const char *s, size_t max);

#endif
