/*
 * An attach request's checks and its host ports (net_ports.h), shared by
 * the Linux and the Windows network. Loop thread.
 */
#include "daemon/net_ports.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/sock.h"
#include "runtime/driver.h"

int
net_req_check(const char *handle, const char *hostname, const struct net_port *ports, size_t nports,
              struct err *err)
{
    if (!handle || !rt_handle_valid(handle))
        return err_set(err, EINVAL, "network: container handle %s is invalid",
                       handle ? handle : "(null)");
    if (hostname) {
        /* It goes into /etc/hosts: nothing but a name. */
        size_t len = strlen(hostname);
        bool ok = len > 0 && len <= 63;
        for (size_t i = 0; ok && i < len; i++) {
            char c = hostname[i];
            ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_';
        }
        if (!ok)
            return err_set(err, EINVAL, "hostname %s: expected 1 to 63 of [A-Za-z0-9_.-]",
                           hostname);
    }
    if (nports > NET_PORTS_MAX)
        return err_set(err, EINVAL, "ports: at most %d, not %zu", NET_PORTS_MAX, nports);
    for (size_t i = 0; i < nports; i++) {
        const struct net_port *p = &ports[i];
        if (p->container == 0)
            return err_set(err, EINVAL, "ports[%zu].container: must be from 1 to 65535", i);
        if (p->proto != NET_PROTO_TCP && p->proto != NET_PROTO_UDP)
            return err_set(err, EINVAL, "ports[%zu].protocol: expected tcp or udp", i);
        for (size_t j = 0; j < i && p->host; j++)
            if (ports[j].host == p->host && ports[j].proto == p->proto)
                return err_set(err, EINVAL, "ports[%zu].host %u: given twice", i, p->host);
    }
    return 0;
}

/* The last socket call's error as an errno value. */
static int
sock_errno(void)
{
#ifdef _WIN32
    int e = WSAGetLastError();
    return e == WSAEADDRINUSE ? EADDRINUSE : e == WSAEACCES ? EACCES : EIO;
#else
    return errno;
#endif
}

/*
 * Binds port (0: any) on every IPv4 address to see that nothing on the
 * host has it; *out gets the port bound. socket and bind do not block.
 */
static int
port_probe(uint16_t port, enum net_proto proto, uint16_t *out)
{
    int type = proto == NET_PROTO_UDP ? SOCK_DGRAM : SOCK_STREAM;
#ifdef SOCK_CLOEXEC
    type |= SOCK_CLOEXEC;
#endif
    intptr_t fd = (intptr_t)socket(AF_INET, type, 0);
#ifdef _WIN32
    if ((SOCKET)fd == INVALID_SOCKET)
#else
    if (fd < 0)
#endif
        return -sock_errno();
#ifndef _WIN32
    /* On Windows SO_REUSEADDR would let the bind succeed on a port in use. */
    int one = 1;
    setsockopt((int)fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
#endif
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int rc = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        rc = -sock_errno();
    } else {
        socklen_t len = sizeof(sa);
        if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
            rc = -sock_errno();
        else
            *out = ntohs(sa.sin_port);
    }
    sock_close(fd);
    return rc;
}

int
net_ports_choose(const struct net_port *req, size_t nreq, net_port_taken_fn taken, void *ctx,
                 struct net_port *out, size_t *nout, struct err *err)
{
    *nout = 0;
    for (size_t i = 0; i < nreq; i++) {
        struct net_port p = req[i];
        const char *proto = net_proto_name(p.proto);
        if (p.host) {
            uint16_t bound;
            if (taken(ctx, p.host, p.proto))
                return err_set(err, ERR_CONFLICT, "host port %u/%s: already forwarded", p.host,
                               proto);
            int rc = port_probe(p.host, p.proto, &bound);
            if (rc == -EADDRINUSE)
                return err_set(err, ERR_CONFLICT, "host port %u/%s: in use on the host", p.host,
                               proto);
            if (rc < 0)
                return err_errno(err, -rc, "host port %u/%s", p.host, proto);
        } else {
            int tries = 0;
            for (;;) {
                uint16_t bound = 0;
                int rc = port_probe(0, p.proto, &bound);
                if (rc < 0)
                    return err_errno(err, -rc, "choose a host port for %u/%s", p.container, proto);
                if (!taken(ctx, bound, p.proto)) {
                    p.host = bound;
                    break;
                }
                if (++tries == 64)
                    return err_set(err, ERR_CONFLICT, "choose a host port for %u/%s: none free",
                                   p.container, proto);
            }
        }
        out[(*nout)++] = p;
    }
    return 0;
}
