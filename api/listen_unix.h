/*
 * A listening unix socket for an HTTP server (the Docker API's
 * /run/berth/docker.sock): made with its directory, its mode and group,
 * and taken over from a daemon that died without removing it, never from
 * one that still serves it. Blocks (the group lookup may ask NSS): call
 * at start-up, before the loop runs, or at shutdown. Linux.
 */
#ifndef BERTH_API_LISTEN_UNIX_H
#define BERTH_API_LISTEN_UNIX_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/err.h"

struct listen_unix {
    int fd;    /* the listening socket, for the HTTP server to own */
    dev_t dev; /* the socket file we made, so that only it is removed */
    ino_t ino;
    char path[108];
    const char *group; /* the group it was given ("docker"), or NULL: root's only */
};

/*
 * Binds and listens on path: its directory is made (0755) when missing; a
 * socket file there that nobody answers on is replaced, one a live daemon
 * serves is EADDRINUSE, anything else there is EEXIST. The socket is 0660,
 * owned by root and the group named group when that group exists (else
 * root's group: root only).
 */
int listen_unix_open(const char *path, const char *group, struct listen_unix *out, struct err *err);

/* Removes the socket file if it is still the one listen_unix_open made. */
void listen_unix_remove(const struct listen_unix *l);

#endif
