/*
 * What the libFuzzer targets in fuzz/ share: the entry point libFuzzer
 * calls, and FUZZ_CHECK, which turns a broken property into a crash that
 * libFuzzer records (message, stack trace, the input as an artifact).
 * Targets run single-threaded, one input at a time.
 */
#ifndef BERTH_FUZZ_FUZZ_H
#define BERTH_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with the failed property when cond is false. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "\nfuzz: %s:%d: property failed: %s\nfuzz: ", __FILE__, __LINE__,      \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A NUL-terminated copy of the input (the caller frees it). */
static inline char *
fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* True when every byte of s is printable ASCII: what a message that goes
 * to logs and replies may hold once its values are quoted. */
static inline int
fuzz_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

#endif
