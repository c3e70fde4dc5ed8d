/*
 * Scope-bound cleanup for locals (GCC/Clang cleanup attribute), as crun
 * does: `cleanup_free char *p = ...;` frees p when it goes out of scope,
 * and steal_ptr(p) hands ownership on. Header only.
 */
#ifndef BERTH_COMMON_CLEANUP_H
#define BERTH_COMMON_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void
cleanup_free_fn(void *p)
{
    free(*(void **)p);
}

static inline void
cleanup_close_fn(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void
cleanup_fclose_fn(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define cleanup_free __attribute__((cleanup(cleanup_free_fn)))
#define cleanup_close __attribute__((cleanup(cleanup_close_fn)))
#define cleanup_fclose __attribute__((cleanup(cleanup_fclose_fn)))

/* Returns *pp and sets it to NULL, so a cleanup attribute no longer frees it. */
#define steal_ptr(pp)                                                                              \
    ({                                                                                             \
        __typeof__(*(pp)) stolen_ = *(pp);                                                         \
        *(pp) = NULL;                                                                              \
        stolen_;                                                                                   \
    })

/* Returns fd and sets the variable to -1. */
#define steal_fd(fdp)                                                                              \
    ({                                                                                             \
        int stolen_fd_ = *(fdp);                                                                   \
        *(fdp) = -1;                                                                               \
        stolen_fd_;                                                                                \
    })

#endif
