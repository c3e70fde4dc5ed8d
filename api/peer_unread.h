/*
 * What the other end of a connection has not read yet of what we sent:
 * the hijacked streams (api/hijack.c) hold their first bytes until the
 * client has read the reply's head. Linux only. Any thread.
 */
#ifndef BERTH_API_PEER_UNREAD_H
#define BERTH_API_PEER_UNREAD_H

/*
 * How much of what was sent on the connected stream socket fd the peer's
 * application has not read: 0 when it has read everything; for TCP with
 * the peer on this host (its address is ours) the bytes, for a unix
 * socket the kernel's memory for them (more than the bytes: zero only
 * when they are all read); -1 when it cannot be known (a peer elsewhere,
 * or a lookup that failed).
 */
long peer_unread_bytes(int fd);

#endif
