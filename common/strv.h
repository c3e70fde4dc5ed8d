/*
 * String vectors: NULL-terminated arrays of owned strings (argv, env
 * lists), the one implementation every layer uses. Pure; any thread.
 */
#ifndef BERTH_COMMON_STRV_H
#define BERTH_COMMON_STRV_H

#include <stdbool.h>
#include <stddef.h>

/* Entries before the NULL; 0 for a NULL vector. */
size_t strv_len(char *const *v);

/* Frees every entry and the vector; NULL is a no-op. */
void strv_free(char **v);

/* A deep copy (caller frees with strv_free); NULL for a NULL vector or on
 * out of memory (*oom tells which when not NULL). */
char **strv_dup(char *const *v, bool *oom);

/*
 * Appends a copy of s to *v, which holds *n entries (the vector stays
 * NULL-terminated). 0 or -ENOMEM (then *v is unchanged).
 */
int strv_push(char ***v, size_t *n, const char *s);

/* "NAME=value" entries: the index of the one named like entry's name
 * (up to and with the '='), or -1. */
long strv_env_find(char *const *v, const char *entry);

static inline void
cleanup_strv_fn(char ***v)
{
    strv_free(*v);
}
#define cleanup_strv __attribute__((cleanup(cleanup_strv_fn)))

#endif
