/*
 * How much of what we sent on a connected stream socket the peer's
 * application has not read yet (api/peer_unread.h). A unix socket says it
 * itself: SIOCOUTQ counts the memory of what is still queued at the
 * receiver. For TCP our side only knows what was acknowledged, which the
 * peer's kernel does on arrival; when the peer is on this host, its
 * socket's receive queue (received, not yet read) is asked of the kernel
 * with one exact sock_diag lookup by the connection's four-tuple, as
 * ss(8) does, and what our side has not had acknowledged yet (SIOCOUTQ
 * again) is added. A peer elsewhere cannot be asked. Each call is a few
 * syscalls that never wait. Any thread (no state); the loop's hijacks
 * call it.
 */
#include "api/peer_unread.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"

/* Whether two addresses of one family are the same host address. */
static bool
same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

static void
diag_addr(const struct sockaddr_storage *sa, __be16 *port, __be32 addr[4])
{
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *port = in->sin_port;
        memcpy(addr, &in->sin_addr, sizeof(in->sin_addr));
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        *port = in6->sin6_port;
        memcpy(addr, &in6->sin6_addr, sizeof(in6->sin6_addr));
    }
}

/* The receive queue of the TCP socket that is local's peer, on this host. */
static long
tcp_peer_rqueue(const struct sockaddr_storage *local, const struct sockaddr_storage *peer)
{
    cleanup_close int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req = {
        .nh = {.nlmsg_len = sizeof(req),
               .nlmsg_type = SOCK_DIAG_BY_FAMILY,
               .nlmsg_flags = NLM_F_REQUEST},
        .r = {.sdiag_family = (__u8)local->ss_family,
              .sdiag_protocol = IPPROTO_TCP,
              .idiag_states = ~0u},
    };
    /* The peer's socket: its source is our peer, its destination us. */
    diag_addr(peer, &req.r.id.idiag_sport, req.r.id.idiag_src);
    diag_addr(local, &req.r.id.idiag_dport, req.r.id.idiag_dst);
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
        return -1;
    union {
        struct nlmsghdr nh;
        char buf[8192];
    } resp;
    ssize_t n = recv(nl, &resp, sizeof(resp), 0);
    if (n < (ssize_t)sizeof(struct nlmsghdr) || !NLMSG_OK(&resp.nh, (size_t)n) ||
        resp.nh.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        resp.nh.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return -1; /* NLMSG_ERROR: no such socket here */
    const struct inet_diag_msg *m = NLMSG_DATA(&resp.nh);
    return (long)m->idiag_rqueue;
}

long
peer_unread_bytes(int fd)
{
    struct sockaddr_storage local, peer;
    socklen_t llen = sizeof(local), plen = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&local, &llen) < 0)
        return -1;
    if (local.ss_family == AF_UNIX) {
        int unread = 0;
        return ioctl(fd, SIOCOUTQ, &unread) == 0 ? unread : -1;
    }
    if ((local.ss_family != AF_INET && local.ss_family != AF_INET6) ||
        getpeername(fd, (struct sockaddr *)&peer, &plen) < 0 || peer.ss_family != local.ss_family)
        return -1;
    /* A peer at our own address is on this host (loopback, or our own
     * address dialled); any other one may be elsewhere: not asked. */
    if (!same_host(&local, &peer))
        return -1;
    /* Not yet acknowledged by the peer's kernel, plus not yet read there. */
    int unacked = 0;
    if (ioctl(fd, SIOCOUTQ, &unacked) < 0)
        return -1;
    long rqueue = tcp_peer_rqueue(&local, &peer);
    return rqueue < 0 ? -1 : rqueue + unacked;
}
