/* common/sock.h on Linux. Any thread. */
#include "common/sock.h"

#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

int
sock_shutdown(intptr_t fd)
{
    return shutdown((int)fd, SHUT_RDWR) < 0 ? -errno : 0;
}

int
sock_close(intptr_t fd)
{
    return close((int)fd) < 0 ? -errno : 0;
}

int
sock_unread(intptr_t fd, int *out)
{
    return ioctl((int)fd, FIONREAD, out) < 0 ? -errno : 0;
}

enum sock_peer
sock_peer(intptr_t fd)
{
    struct pollfd pfd = {.fd = (int)fd, .events = POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return SOCK_PEER_OPEN;
    return pfd.revents & (POLLHUP | POLLERR) ? SOCK_PEER_RESET : SOCK_PEER_FIN;
}
