/* common/sock.h on Windows (Winsock 2). Any thread. */
#include "common/sock.h"

#include <errno.h>

static int
wsa_errno(void)
{
    int e = WSAGetLastError();
    switch (e) {
    case WSAEWOULDBLOCK:
        return EAGAIN;
    case WSAECONNRESET:
    case WSAECONNABORTED:
        return ECONNRESET;
    case WSAENOTCONN:
        return ENOTCONN;
    case WSAENOTSOCK:
        return EBADF;
    default:
        return EIO;
    }
}

int
sock_shutdown(intptr_t fd)
{
    return shutdown((SOCKET)fd, SD_BOTH) == SOCKET_ERROR ? -wsa_errno() : 0;
}

int
sock_close(intptr_t fd)
{
    return closesocket((SOCKET)fd) == SOCKET_ERROR ? -wsa_errno() : 0;
}

int
sock_unread(intptr_t fd, int *out)
{
    u_long n = 0;
    if (ioctlsocket((SOCKET)fd, FIONREAD, &n) == SOCKET_ERROR)
        return -wsa_errno();
    *out = (int)n;
    return 0;
}

enum sock_peer
sock_peer(intptr_t fd)
{
    /* MHD's sockets are non-blocking: the peek never waits. */
    char c;
    int n = recv((SOCKET)fd, &c, 1, MSG_PEEK);
    if (n == 0)
        return SOCK_PEER_FIN;
    if (n > 0)
        return SOCK_PEER_OPEN;
    int e = WSAGetLastError();
    return e == WSAEWOULDBLOCK || e == WSAEINTR || e == WSAEINPROGRESS ? SOCK_PEER_OPEN
                                                                       : SOCK_PEER_RESET;
}
