/*
 * What a peer has not read (api/peer_unread.h): a unix socket pair and a
 * loopback TCP connection, before and after the peer reads, and a socket
 * it cannot tell for (a UDP one: not a stream).
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/peer_unread.h"

/* Reads exactly n bytes from fd. */
static void
read_n(int fd, size_t n)
{
    char buf[256];
    ck_assert_uint_le(n, sizeof(buf));
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ck_assert_int_eq(poll(&p, 1, 5000), 1);
        ssize_t r = recv(fd, buf + got, n - got, 0);
        ck_assert_int_gt(r, 0);
        got += (size_t)r;
    }
}

/* Waits (up to 5 s) for peer_unread_bytes(fd) to be want. */
static long
settle(int fd, long want)
{
    long v = -2;
    for (int i = 0; i < 500 && (v = peer_unread_bytes(fd)) != want; i++)
        usleep(10000);
    return v;
}

START_TEST(unix_pair_counts_what_the_peer_has_not_read)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(peer_unread_bytes(sv[0]), 0);
    ck_assert_int_eq(send(sv[0], "hello", 5, 0), 5);
    ck_assert_int_eq(send(sv[0], "world!", 6, 0), 6);
    ck_assert_int_ge(peer_unread_bytes(sv[0]), 11);
    read_n(sv[1], 11);
    ck_assert_int_eq(peer_unread_bytes(sv[0]), 0);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

START_TEST(loopback_tcp_counts_what_the_peer_has_not_read)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(ls, 1), 0);
    ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &alen), 0);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(client, (struct sockaddr *)&a, sizeof(a)), 0);
    int server = accept(ls, NULL, NULL);
    ck_assert_int_ge(server, 0);
    ck_assert_int_eq(peer_unread_bytes(server), 0);
    ck_assert_int_eq(send(server, "HTTP/1.1 101\r\n\r\n", 16, 0), 16);
    /* Acknowledged at once on loopback, and still unread by the client. */
    ck_assert_int_eq(settle(server, 16), 16);
    read_n(client, 10);
    ck_assert_int_eq(settle(server, 6), 6);
    read_n(client, 6);
    ck_assert_int_eq(settle(server, 0), 0);
    /* The other way round too: the client's view of the server. */
    ck_assert_int_eq(send(client, "x", 1, 0), 1);
    ck_assert_int_eq(settle(client, 1), 1);
    close(client);
    close(server);
    close(ls);
}
END_TEST

START_TEST(a_socket_it_cannot_tell_for_is_minus_one)
{
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_eq(peer_unread_bytes(u), -1); /* not connected */
    close(u);
    ck_assert_int_eq(peer_unread_bytes(-1), -1);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("peer_unread");
    TCase *tc = tcase_create("peer_unread");
    tcase_add_test(tc, unix_pair_counts_what_the_peer_has_not_read);
    tcase_add_test(tc, loopback_tcp_counts_what_the_peer_has_not_read);
    tcase_add_test(tc, a_socket_it_cannot_tell_for_is_minus_one);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
