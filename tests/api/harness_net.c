/* Networks of a test's own for the API suites; see harness_net.h. */
#include "harness_net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_prefix[8]; /* "bh" + 4 hex digits of the suite's pid */
static unsigned g_octet; /* 10.<g_octet>.0.0/16, which no route covers */

static int
sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return st == 0 ? 0 : (st < 0 ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128));
}

static bool
route_overlaps(uint32_t net, uint32_t mask)
{
    FILE *f = fopen("/proc/net/route", "re");
    if (!f)
        return true;
    char line[256];
    bool hit = false;
    if (!fgets(line, sizeof(line), f)) {
        fclose(f);
        return true;
    }
    while (fgets(line, sizeof(line), f)) {
        char ifname[32];
        unsigned dst, gw, flags, refcnt, use, metric, rmask;
        if (sscanf(line, "%31s %x %x %x %u %u %u %x", ifname, &dst, &gw, &flags, &refcnt, &use,
                   &metric, &rmask) != 8)
            continue;
        dst = ntohl(dst);
        rmask = ntohl(rmask);
        if (rmask == 0)
            continue; /* the default route covers everything */
        uint32_t m = mask & rmask;
        if ((dst & m) == (net & m))
            hit = true;
    }
    fclose(f);
    return hit;
}

static void
sweep(void)
{
    if (!g_prefix[0])
        return;
    /* Rules naming our networks or pools, then the chains they left empty. */
    sh("for t in filter nat mangle; do "
       "iptables-save -t $t 2>/dev/null | grep -E -- '%s|10\\.%u\\.' | grep '^-A' | "
       "sed 's/^-A /-D /' | while read -r l; do eval iptables -w -t $t $l 2>/dev/null; done; "
       "for c in $(iptables-save -t $t 2>/dev/null | grep -E '^:(BERTH-[A-Z]+-%s|BHG-%s)' | "
       "cut -d' ' -f1 | tr -d :); do iptables -w -t $t -F $c; iptables -w -t $t -X $c; done; "
       "done",
       g_prefix, g_octet, g_prefix, g_prefix);
    sh("ip6tables-save -t filter 2>/dev/null | grep -E -- '%s' | grep '^-A' | "
       "sed 's/^-A /-D /' | while read -r l; do eval ip6tables -w $l 2>/dev/null; done; "
       "for c in $(ip6tables-save -t filter 2>/dev/null | grep -E '^:BERTH-IN-%s' | "
       "cut -d' ' -f1 | tr -d :); do ip6tables -w -F $c; ip6tables -w -X $c; done",
       g_prefix, g_prefix);
    sh("for l in $(ls /sys/class/net | grep '^%s'); do ip link del $l 2>/dev/null; done", g_prefix);
}

void
hnet_suite_setup(void)
{
    snprintf(g_prefix, sizeof(g_prefix), "bh%04x", (unsigned)getpid() & 0xffff);
    for (unsigned o = 200 + (unsigned)getpid() % 40, tries = 0; tries < 51; o++, tries++) {
        if (o > 250)
            o = 200;
        if (route_overlaps((10u << 24) | (o << 16), 0xffff0000u) ||
            route_overlaps((198u << 24) | (18u << 16) | (o << 8), 0xffffff00u))
            continue;
        /* The same locks as the network unit suite's: another run of
         * either may have picked it and not made its bridges yet. Held
         * until this process exits. */
        char lock[64];
        snprintf(lock, sizeof(lock), "/tmp/berth-nt-octet-%u.lock", o);
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            g_octet = o;
            break;
        }
        if (fd >= 0)
            close(fd);
    }
    if (g_octet == 0) {
        fprintf(stderr, "no free 10.x.0.0/16 for the test networks\n");
        exit(1);
    }
    sweep();
}

void
hnet_suite_teardown(void)
{
    sweep();
}

void
hnet_init(struct hnet *n, char id)
{
    ck_assert_msg(g_octet, "hnet_suite_setup was not called");
    memset(n, 0, sizeof(*n));
    n->id = id;
    unsigned k = (unsigned)(id - 'a') + 1;
    snprintf(n->name, sizeof(n->name), "%s%c", g_prefix, id);
    snprintf(n->net3, sizeof(n->net3), "10.%u.%u", g_octet, k);
    snprintf(n->pool, sizeof(n->pool), "%s.0/24", n->net3);
    snprintf(n->gw, sizeof(n->gw), "%s.1", n->net3);
    snprintf(n->guard, sizeof(n->guard), "BHG-%s", n->name);
    ck_assert_int_eq(sh("iptables -w -t mangle -N %s && iptables -w -t mangle -A %s -o %s -j "
                        "RETURN && iptables -w -t mangle -A %s -j DROP && "
                        "iptables -w -t mangle -I FORWARD 1 -s %s -j %s",
                        n->guard, n->guard, n->name, n->guard, n->pool, n->guard),
                     0);
}

void
hnet_allow(struct hnet *n, const char *ifname)
{
    snprintf(n->extra, sizeof(n->extra), "%s", ifname);
    ck_assert_int_eq(sh("iptables -w -t mangle -I %s 1 -o %s -j RETURN", n->guard, ifname), 0);
}

void
hnet_args(const struct hnet *n, struct berthd_opts *opts)
{
    int i = 0;
    while (opts->args[i])
        i++;
    ck_assert_int_lt(i + 6, HARNESS_MAX_ARGS);
    opts->args[i++] = "--network-name";
    opts->args[i++] = n->name;
    opts->args[i++] = "--network-pool";
    opts->args[i++] = n->pool;
    opts->args[i++] = "--dns";
    opts->args[i++] = "192.0.2.53";
    opts->args[i] = NULL;
}

unsigned long
hnet_leaks(const struct hnet *n)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "iptables -w -t mangle -L %s -v -n -x | awk '$3 == \"DROP\" {print $1}'", n->guard);
    FILE *p = popen(cmd, "r");
    unsigned long drops = 999999;
    if (p) {
        if (fscanf(p, "%lu", &drops) != 1)
            drops = 999999;
        pclose(p);
    }
    return drops;
}

void
hnet_cleanup(struct hnet *n)
{
    unsigned long leaks = hnet_leaks(n);
    sh("for t in filter nat; do for c in $(iptables-save -t $t 2>/dev/null | "
       "grep -E '^:BERTH-[A-Z]+-%s ' | cut -d' ' -f1 | tr -d :); do "
       "iptables-save -t $t | grep -- \"-j $c\\$\" | sed 's/^-A /-D /' | "
       "while read -r l; do eval iptables -w -t $t $l; done; "
       "iptables -w -t $t -F $c; iptables -w -t $t -X $c; done; done",
       n->name);
    sh("ip link del %s >/dev/null 2>&1", n->name);
    sh("iptables -w -t mangle -D FORWARD -s %s -j %s; iptables -w -t mangle -F %s; "
       "iptables -w -t mangle -X %s",
       n->pool, n->guard, n->guard, n->guard);
    ck_assert_msg(leaks == 0, "%lu packets from %s tried to leave this machine", leaks, n->pool);
}

unsigned
hnet_dir_entries(const char *dir, bool ips_only)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    unsigned count = 0;
    struct dirent *de;
    struct in_addr a;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (ips_only && inet_pton(AF_INET, de->d_name, &a) != 1)
            continue;
        count++;
    }
    closedir(d);
    return count;
}

unsigned
hnet_bridge_ports(const struct hnet *n)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/class/net/%s/brif", n->name);
    return hnet_dir_entries(path, false);
}

int
hnet_rules_naming(const struct hnet *n, const char *what, const char *also)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "(iptables-save -t filter; iptables-save -t nat) | grep '^-A' | grep -v '%s' | "
             "grep -F -- '%s' | grep -c -F -- '%s'",
             n->guard, also, what);
    FILE *p = popen(cmd, "r");
    int count = -1;
    if (p) {
        if (fscanf(p, "%d", &count) != 1)
            count = -1;
        pclose(p);
    }
    return count;
}
