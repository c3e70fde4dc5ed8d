/*
 * Sockets: the system headers for addresses and sockets (POSIX sockets on
 * Linux, Winsock 2 on Windows), and the few calls on a connected socket
 * that are spelled differently. A socket is an intptr_t here, which holds
 * both a POSIX descriptor and a Winsock SOCKET. sock_linux.c and
 * sock_windows.c implement them. Any thread; none blocks.
 */
#ifndef BERTH_COMMON_SOCK_H
#define BERTH_COMMON_SOCK_H

#include <stdbool.h>
#include <stdint.h>

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

/* Shuts both directions down (the peer sees the connection end). */
int sock_shutdown(intptr_t fd);

/* Closes a socket (closesocket on Windows, where close(2) is not for sockets). */
int sock_close(intptr_t fd);

/* How many received bytes wait to be read, or -errno. */
int sock_unread(intptr_t fd, int *out);

/* What the peer of a connected socket did, as far as can be seen without
 * reading (sock_peer). */
enum sock_peer {
    SOCK_PEER_OPEN,  /* nothing to say: still connected, or bytes wait */
    SOCK_PEER_FIN,   /* it shut its sending side down (a FIN came) */
    SOCK_PEER_RESET, /* the connection was reset or failed */
};

/*
 * Looks at fd without waiting: on Linux poll(POLLRDHUP); on Windows a
 * MSG_PEEK of one byte on the non-blocking socket, which tells a FIN only
 * once nothing is left unread (a FIN behind unread bytes shows as OPEN).
 */
enum sock_peer sock_peer(intptr_t fd);

#endif
