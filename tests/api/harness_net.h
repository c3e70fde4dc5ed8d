/*
 * Networks of a test's own, for the API suites that run berthd with one
 * (every other daemon the harness starts has --network none, so no test
 * makes the host's berth0). Each test gets a bridge name, bh<4 hex digits
 * of the suite's pid><letter>, and a /24, 10.<octet>.<k>.0/24: the octet
 * is reserved for the whole suite with the lock file that the network
 * unit suite's runs take too (several helpers run suites at once on one
 * machine), and checked against the host's routes. A guard chain in
 * mangle FORWARD (which packets traverse before filter's, where berth's
 * own accept for the pool comes first) drops, and counts, anything from
 * the pool forwarded anywhere but back to its bridge (or to an interface
 * the test made), so no traffic leaves this machine; hnet_cleanup fails
 * the test if it dropped anything. What a failed test left is swept by
 * the suite's parent at the end (bridges, rules and chains of its names).
 *
 * Needs root; the suites skip without it.
 */
#ifndef BERTH_TESTS_API_HARNESS_NET_H
#define BERTH_TESTS_API_HARNESS_NET_H

#include "harness.h"

struct hnet {
    char id;        /* the test's letter */
    char name[16];  /* bridge and network name */
    char pool[20];  /* 10.O.K.0/24 */
    char gw[16];    /* 10.O.K.1 */
    char net3[16];  /* "10.O.K" */
    char guard[32]; /* the no-traffic-leaves chain (mangle) */
    char extra[16]; /* another interface the guard lets through (the NAT test's), or "" */
};

/* In the suite's main, before harness_run_suite: reserves the octet, sweeps. */
void hnet_suite_setup(void);
/* After harness_run_suite: sweeps what failed tests left. */
void hnet_suite_teardown(void);

/* Names and the guard for the test's letter id ('a'..'z'). */
void hnet_init(struct hnet *n, char id);
/* Lets traffic out through ifname too (an "outside" namespace the test made). */
void hnet_allow(struct hnet *n, const char *ifname);
/*
 * Adds --network-name, --network-pool and --dns 192.0.2.53 (TEST-NET-1,
 * which nothing here ever sends to) to opts->args after the ones there.
 */
void hnet_args(const struct hnet *n, struct berthd_opts *opts);
/* Packets from the pool the guard dropped so far. */
unsigned long hnet_leaks(const struct hnet *n);
/*
 * Once the test's daemons stopped: asserts nothing leaked, then removes
 * berth's chains for the network, its bridge and the guard.
 */
void hnet_cleanup(struct hnet *n);

/* Host-side checks. */
/* Links enslaved to the bridge. */
unsigned hnet_bridge_ports(const struct hnet *n);
/* Entries (not . or ..) in dir; 0 when it does not exist. ips_only: named by an IPv4 address. */
unsigned hnet_dir_entries(const char *dir, bool ips_only);
/* iptables-save lines (filter and nat, the guard left out) containing both what and also. */
int hnet_rules_naming(const struct hnet *n, const char *what, const char *also);

#endif
