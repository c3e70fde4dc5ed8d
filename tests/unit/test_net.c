/*
 * The network service against the real CNI plugins (/usr/lib/cni), in
 * namespaces, bridges and pools this suite makes itself: each test has
 * its own bridge name (bt<pid><letter>), its own /24 in a 10.x.0.0/16 no
 * route on this machine covers, its own state directory, and a guard
 * chain that drops (and counts) any packet from its pool that would be
 * forwarded to an interface the test did not make, so no traffic leaves
 * this machine; each test checks that counter is 0. The parent process
 * sweeps whatever a failed test left (links, rules, mounts, files).
 * Loop tests: every handle closed, uv_loop_close returns 0.
 *
 * Needs root (network namespaces, iptables); skipped otherwise.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "daemon/job.h"
#include "daemon/net.h"
#include "daemon/net_host.h"
#include "tests/unit/testutil.h"

/* ---- names and pools, fixed in the parent before the tests fork ------------ */

static char g_prefix[8]; /* "bt" + 4 hex digits of the parent's pid */
static unsigned g_octet; /* the 10.<g_octet>.0.0/16 no route covers */

struct tnet {
    char id;               /* the test's letter */
    char name[16];         /* bridge and network */
    char pool[20], gw[16]; /* 10.O.K.0/24, 10.O.K.1 */
    char net3[16];         /* "10.O.K" */
    char root[128];        /* state and container dirs */
    char state[160];
    char guard[32];     /* the no-traffic-leaves chain */
    char extra_out[16]; /* another interface traffic may leave by (the NAT test) */
    uv_loop_t loop;
    struct job_queue *jobs;
    struct net *n;
};

static bool
route_overlaps(uint32_t net, uint32_t mask)
{
    FILE *f = fopen("/proc/net/route", "re");
    if (!f)
        return true;
    char line[256];
    bool hit = false;
    if (!fgets(line, sizeof(line), f)) { /* header */
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

/* The sweep: whatever of this suite is still there goes. Parent and child. */
static void
sweep(void)
{
    /* Rules that name our networks or pools, then the chains they left empty. */
    tu_sh("for t in filter nat mangle; do "
          "iptables-save -t $t 2>/dev/null | grep -E -- '%s|10\\.%u\\.' | grep '^-A' | "
          "sed 's/^-A /-D /' | while read -r l; do eval iptables -w -t $t $l 2>/dev/null; done; "
          "for c in $(iptables-save -t $t 2>/dev/null | grep -E '^:(BERTH-[A-Z]+-%s|BTG-%s)' | "
          "cut -d' ' -f1 | tr -d :); do iptables -w -t $t -F $c; iptables -w -t $t -X $c; done; "
          "done",
          g_prefix, g_octet, g_prefix, g_prefix);
    tu_sh("ip6tables-save -t filter 2>/dev/null | grep -E -- '%s' | grep '^-A' | "
          "sed 's/^-A /-D /' | while read -r l; do eval ip6tables -w $l 2>/dev/null; done; "
          "for c in $(ip6tables-save -t filter 2>/dev/null | grep -E '^:BERTH-IN-%s' | "
          "cut -d' ' -f1 | tr -d :); do ip6tables -w -F $c; ip6tables -w -X $c; done",
          g_prefix, g_prefix);
    tu_sh("for l in $(ls /sys/class/net | grep '^%s'); do ip link del $l 2>/dev/null; done",
          g_prefix);
    tu_sh("for m in $(grep -o ' /tmp/berth-nt-%s[^ ]*' /proc/self/mountinfo); do "
          "umount -l $m; done; rm -rf /tmp/berth-nt-%s*",
          g_prefix, g_prefix);
}

static void
suite_setup(void)
{
    snprintf(g_prefix, sizeof(g_prefix), "bt%04x", (unsigned)getpid() & 0xffff);
    for (unsigned o = 200 + (unsigned)getpid() % 40, tries = 0; tries < 51; o++, tries++) {
        if (o > 250)
            o = 200;
        if (route_overlaps((10u << 24) | (o << 16), 0xffff0000u) ||
            route_overlaps((198u << 24) | (18u << 16) | (o << 8), 0xffffff00u))
            continue;
        /* Another run of this suite may have picked it and not made its
         * bridges yet: the lock (held until exit) says. */
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
        fprintf(stderr, "test_net: no free 10.x.0.0/16 for the test networks\n");
        exit(1);
    }
    sweep();
}

static void
suite_teardown(void)
{
    sweep();
}

/* ---- the loop --------------------------------------------------------------- */

struct wait {
    bool done;
    struct err err;
    bool failed;
    const struct net_attachment *a;
    struct net_reconcile_stats st;
};

static void
done_cb(void *arg, const struct err *err)
{
    struct wait *w = arg;
    w->done = true;
    if (err) {
        w->failed = true;
        w->err = *err;
    }
}

static void
attach_cb(void *arg, const struct net_attachment *a, const struct err *err)
{
    struct wait *w = arg;
    w->done = true;
    w->a = a;
    if (err) {
        w->failed = true;
        w->err = *err;
    }
}

static void
reconcile_cb(void *arg, const struct net_reconcile_stats *st, const struct err *err)
{
    struct wait *w = arg;
    w->done = true;
    w->st = *st;
    if (err) {
        w->failed = true;
        w->err = *err;
    }
}

static void
run_until(struct tnet *t, struct wait *w)
{
    while (!w->done)
        uv_run(&t->loop, UV_RUN_ONCE);
}

static void
opts_default(struct tnet *t, struct net_opts *o, char *resolv)
{
    snprintf(resolv, 256, "%s/resolv.conf", t->root);
    const char *text = "nameserver 127.0.0.53\nnameserver 192.0.2.53\nsearch ci.test\n";
    tu_write(resolv, text, strlen(text));
    *o = (struct net_opts){
        .state_dir = t->state, .name = t->name, .pool = t->pool, .resolv_conf = resolv};
}

static void
tnet_open(struct tnet *t, const struct net_opts *o)
{
    ck_assert_int_eq(uv_loop_init(&t->loop), 0);
    t->jobs = job_queue_new(&t->loop);
    struct err err = {0};
    ck_assert_msg(net_new(&t->loop, t->jobs, o, &t->n, &err) == 0, "%s", err.msg);
}

static void
tnet_setup(struct tnet *t)
{
    struct wait w = {0};
    struct err err = {0};
    ck_assert_msg(net_setup(t->n, done_cb, &w, &err) == 0, "%s", err.msg);
    run_until(t, &w);
    ck_assert_msg(!w.failed, "setup: %s", w.err.msg);
}

/* Makes t's names, directories and guard chain; opens the service (default options). */
static void
tnet_init(struct tnet *t, char id, bool open)
{
    memset(t, 0, sizeof(*t));
    t->id = id;
    unsigned k = (unsigned)(id - 'a') + 1;
    snprintf(t->name, sizeof(t->name), "%s%c", g_prefix, id);
    snprintf(t->net3, sizeof(t->net3), "10.%u.%u", g_octet, k);
    snprintf(t->pool, sizeof(t->pool), "%s.0/24", t->net3);
    snprintf(t->gw, sizeof(t->gw), "%s.1", t->net3);
    snprintf(t->root, sizeof(t->root), "/tmp/berth-nt-%s", t->name);
    snprintf(t->state, sizeof(t->state), "%s/network", t->root);
    snprintf(t->guard, sizeof(t->guard), "BTG-%s", t->name);
    struct err err = {0};
    ck_assert_msg(fs_mkdir_p(t->root, 0700, &err) == 0, "%s", err.msg);
    /* Nothing from the pool may be forwarded anywhere but to the test's own
     * links. In mangle, which FORWARD traverses before filter: berth's own
     * accept for the pool is first in filter's FORWARD. */
    ck_assert_int_eq(tu_sh("iptables -w -t mangle -N %s && iptables -w -t mangle -A %s -o %s -j "
                           "RETURN && iptables -w -t mangle -A %s -j DROP && "
                           "iptables -w -t mangle -I FORWARD 1 -s %s -j %s",
                           t->guard, t->guard, t->name, t->guard, t->pool, t->guard),
                     0);
    if (open) {
        struct net_opts o;
        char resolv[256];
        opts_default(t, &o, resolv);
        tnet_open(t, &o);
        tnet_setup(t);
    }
}

static unsigned long
guard_drops(struct tnet *t)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "iptables -w -t mangle -L %s -v -n -x | awk '$3 == \"DROP\" {print $1}'", t->guard);
    FILE *p = popen(cmd, "r");
    unsigned long n = 0;
    if (p) {
        if (fscanf(p, "%lu", &n) != 1)
            n = 999999;
        pclose(p);
    }
    return n;
}

static void
tnet_close(struct tnet *t)
{
    if (t->n) {
        struct wait w = {0};
        struct err err = {0};
        ck_assert_msg(net_teardown(t->n, done_cb, &w, &err) == 0, "%s", err.msg);
        run_until(t, &w);
        ck_assert_msg(!w.failed, "teardown: %s", w.err.msg);
        ck_assert(net_idle(t->n));
        net_free(t->n);
        t->n = NULL;
    }
    if (t->jobs) {
        uv_run(&t->loop, UV_RUN_DEFAULT);
        job_queue_free(t->jobs);
        ck_assert_int_eq(uv_loop_close(&t->loop), 0);
        t->jobs = NULL;
    }
    ck_assert_msg(guard_drops(t) == 0, "%lu packets from %s tried to leave this machine",
                  guard_drops(t), t->pool);
    tu_sh("iptables -w -t mangle -D FORWARD -s %s -j %s; iptables -w -t mangle -F %s; "
          "iptables -w -t mangle -X %s",
          t->pool, t->guard, t->guard, t->guard);
    tu_sh("rm -rf %s", t->root);
}

static int
tnet_attach(struct tnet *t, const char *handle, bool disabled, const struct net_port *ports,
            size_t nports, const struct net_attachment **out, struct err *err)
{
    struct net_attach_req req = {
        .handle = handle, .disabled = disabled, .ports = ports, .nports = nports};
    struct wait w = {0};
    int rc = net_attach(t->n, &req, attach_cb, &w, err);
    if (rc < 0)
        return rc;
    run_until(t, &w);
    if (w.failed) {
        *err = w.err;
        return -w.err.code;
    }
    if (out)
        *out = w.a;
    return 0;
}

static void
tnet_attach_ok(struct tnet *t, const char *handle, const struct net_port *ports, size_t nports,
               const struct net_attachment **out)
{
    struct err err = {0};
    ck_assert_msg(tnet_attach(t, handle, false, ports, nports, out, &err) == 0, "attach %s: %s",
                  handle, err.msg);
}

static int
tnet_detach(struct tnet *t, const char *handle, struct err *err)
{
    struct wait w = {0};
    int rc = net_detach(t->n, handle, done_cb, &w, err);
    if (rc < 0)
        return rc;
    run_until(t, &w);
    if (w.failed) {
        *err = w.err;
        return -w.err.code;
    }
    return 0;
}

static void
tnet_detach_ok(struct tnet *t, const char *handle)
{
    struct err err = {0};
    ck_assert_msg(tnet_detach(t, handle, &err) == 0, "detach %s: %s", handle, err.msg);
}

/* ---- what is on the host ---------------------------------------------------- */

static int
sh_in(const char *netns, const char *cmd)
{
    return tu_sh("nsenter --net=%s sh -c '%s' >/dev/null 2>&1", netns, cmd);
}

static int
ping_from(const char *netns, const char *ip)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "busybox ping -c 1 -W 3 %s", ip);
    return sh_in(netns, cmd);
}

static size_t
count_entries(const char *dir, bool ip_names_only)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *de;
    struct in_addr a;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (ip_names_only && inet_pton(AF_INET, de->d_name, &a) != 1)
            continue;
        n++;
    }
    closedir(d);
    return n;
}

static size_t
bridge_ports(struct tnet *t)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/class/net/%s/brif", t->name);
    return count_entries(path, false);
}

static size_t
leases(struct tnet *t)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/ipam/%s", t->state, t->name);
    return count_entries(path, true);
}

/* iptables-save lines (both tables, the test's guard left out) that name what, and also. */
static int
rules_naming_both(struct tnet *t, const char *what, const char *also)
{
    char cmd[384];
    snprintf(cmd, sizeof(cmd),
             "(iptables-save -t filter; iptables-save -t nat) | grep '^-A' | grep -v '%s' | "
             "grep -F -- '%s' | grep -c -F -- '%s'",
             t->guard, also, what);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* Lines that name what (an address of the test's own pool, say). */
static int
rules_naming(struct tnet *t, const char *what)
{
    return rules_naming_both(t, what, what);
}

static void
read_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "open %s", path);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* ---- servers and clients in namespaces ------------------------------------- */

static void
enter(const char *netns)
{
    if (!netns)
        return;
    int fd = open(netns, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
        _exit(90);
    close(fd);
}

/*
 * A TCP server in netns on ip:port that answers one client with the
 * client's address; returns its pid once it listens.
 */
static pid_t
serve(const char *netns, const char *ip, uint16_t port)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        enter(netns);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, ip, &sa.sin_addr);
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 8) < 0)
            _exit(91);
        if (write(ready[1], "r", 1) != 1)
            _exit(92);
        struct sockaddr_in peer;
        socklen_t len = sizeof(peer);
        char addr[INET_ADDRSTRLEN + 1];
        int c = accept(s, (struct sockaddr *)&peer, &len);
        if (c < 0)
            _exit(93);
        inet_ntop(AF_INET, &peer.sin_addr, addr, sizeof(addr));
        size_t n = strlen(addr);
        addr[n++] = '\n';
        if (write(c, addr, n) < 0)
            _exit(94);
        close(c);
        _exit(0);
    }
    close(ready[1]);
    char r;
    struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
    ck_assert_msg(poll(&pfd, 1, 10000) == 1 && read(ready[0], &r, 1) == 1, "server did not start");
    close(ready[0]);
    return pid;
}

/*
 * Connects from netns (NULL: the host) to ip:port and reads one line into
 * buf (unless buf is NULL). Returns 0, or the errno of the connect
 * (ETIMEDOUT after timeout_ms).
 */
static int
fetch(const char *netns, const char *ip, uint16_t port, char *buf, size_t size, int timeout_ms)
{
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(out[0]);
        enter(netns);
        /* IPv4, or IPv6 with a scope ("fe80::1%eth0", resolved in the namespace). */
        struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        char service[8];
        snprintf(service, sizeof(service), "%u", port);
        if (getaddrinfo(ip, service, &hints, &ai) != 0)
            _exit(96);
        int s = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
        int e = 0;
        if (connect(s, ai->ai_addr, ai->ai_addrlen) < 0) {
            if (errno != EINPROGRESS) {
                e = errno;
            } else {
                struct pollfd pfd = {.fd = s, .events = POLLOUT};
                if (poll(&pfd, 1, timeout_ms) != 1) {
                    e = ETIMEDOUT;
                } else {
                    socklen_t l = sizeof(e);
                    getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
                }
            }
        }
        char msg[128];
        int n = snprintf(msg, sizeof(msg), "%d ", e);
        if (e == 0 && buf) {
            struct pollfd pfd = {.fd = s, .events = POLLIN};
            if (poll(&pfd, 1, 10000) == 1) {
                ssize_t r = read(s, msg + n, sizeof(msg) - (size_t)n - 1);
                if (r > 0)
                    n += (int)r;
            }
        }
        if (write(out[1], msg, (size_t)n) < 0)
            _exit(95);
        _exit(0);
    }
    close(out[1]);
    char msg[128];
    ssize_t n = 0, r;
    while ((r = read(out[0], msg + n, sizeof(msg) - 1 - (size_t)n)) > 0)
        n += r;
    close(out[0]);
    int status;
    waitpid(pid, &status, 0);
    msg[n > 0 ? n : 0] = '\0';
    int e = atoi(msg);
    char *sp = strchr(msg, ' ');
    if (buf) {
        snprintf(buf, size, "%s", sp ? sp + 1 : "");
        buf[strcspn(buf, "\n")] = '\0';
    }
    return e;
}

static void
reap(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* ---- tests ------------------------------------------------------------------ */

/* In a namespace: one link, lo, up. (/sys shows the host's: it was mounted there.) */
#define ONLY_LO "test \"$(ip -o link | wc -l)\" = 1 && ip -o link | grep -q \"^1: lo: .*UP\""

START_TEST(net_container_gets_a_pool_address_and_reaches_its_gateway)
{
    struct tnet t;
    tnet_init(&t, 'a', true);
    const struct net_attachment *a = NULL;
    tnet_attach_ok(&t, "c1", NULL, 0, &a);
    ck_assert_msg(strncmp(a->ip, t.net3, strlen(t.net3)) == 0, "%s not in %s", a->ip, t.pool);
    ck_assert_str_eq(a->gateway, t.gw);
    ck_assert_uint_eq(a->prefix, 24);
    ck_assert(!a->disabled);
    ck_assert_int_eq(ping_from(a->netns_path, t.gw), 0);
    ck_assert_ptr_eq(net_attachment_find(t.n, "c1"), a);

    /* The /etc files, written by berth, mounted read-only by the runtime. */
    char buf[512];
    ck_assert_uint_eq(a->nmounts, 3);
    ck_assert_str_eq(a->mounts[0].target, "/etc/hosts");
    ck_assert_str_eq(a->mounts[1].target, "/etc/hostname");
    ck_assert_str_eq(a->mounts[2].target, "/etc/resolv.conf");
    ck_assert(a->mounts[0].readonly);
    read_file(a->mounts[0].source, buf, sizeof(buf));
    char line[64];
    snprintf(line, sizeof(line), "%s\tc1\n", a->ip);
    ck_assert_msg(strstr(buf, line) && strstr(buf, "127.0.0.1\tlocalhost"), "%s", buf);
    read_file(a->mounts[1].source, buf, sizeof(buf));
    ck_assert_str_eq(buf, "c1\n");
    read_file(a->mounts[2].source, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "nameserver 192.0.2.53\n") && !strstr(buf, "127.0.0.53") &&
                      strstr(buf, "search ci.test\n"),
                  "%s", buf);
    ck_assert_uint_eq(leases(&t), 1);
    ck_assert_uint_eq(bridge_ports(&t), 1);

    char netns[256];
    snprintf(netns, sizeof(netns), "%s", a->netns_path);
    tnet_detach_ok(&t, "c1");
    ck_assert_ptr_null(net_attachment_find(t.n, "c1"));
    ck_assert_int_ne(access(netns, F_OK), 0);
    ck_assert_uint_eq(leases(&t), 0);
    ck_assert_uint_eq(bridge_ports(&t), 0);
    /* A second detach finds nothing to do. */
    tnet_detach_ok(&t, "c1");
    tnet_close(&t);
}
END_TEST

START_TEST(net_two_containers_reach_each_other)
{
    struct tnet t;
    tnet_init(&t, 'b', true);
    const struct net_attachment *a, *b;
    tnet_attach_ok(&t, "one", NULL, 0, &a);
    tnet_attach_ok(&t, "two", NULL, 0, &b);
    ck_assert_str_ne(a->ip, b->ip);
    ck_assert_int_eq(ping_from(a->netns_path, b->ip), 0);
    ck_assert_int_eq(ping_from(b->netns_path, a->ip), 0);
    pid_t srv = serve(b->netns_path, "0.0.0.0", 7000);
    char got[64];
    ck_assert_int_eq(fetch(a->netns_path, b->ip, 7000, got, sizeof(got), 10000), 0);
    ck_assert_str_eq(got, a->ip);
    reap(srv);
    tnet_detach_ok(&t, "one");
    tnet_detach_ok(&t, "two");
    tnet_close(&t);
}
END_TEST

START_TEST(net_forwarded_port_reaches_a_server_in_the_container)
{
    struct tnet t;
    tnet_init(&t, 'c', true);
    struct net_port ports[] = {{.host = 0, .container = 8080, .proto = NET_PROTO_TCP}};
    const struct net_attachment *a;
    tnet_attach_ok(&t, "web", ports, 1, &a);
    ck_assert_uint_eq(a->nports, 1);
    uint16_t hp = a->ports[0].host;
    ck_assert_uint_ne(hp, 0);
    ck_assert_uint_eq(a->ports[0].container, 8080);

    char got[64];
    for (int i = 0; i < 2; i++) {
        /* From the host's loopback and from its address on the bridge. */
        const char *to = i == 0 ? "127.0.0.1" : t.gw;
        pid_t srv = serve(a->netns_path, "0.0.0.0", 8080);
        int e = fetch(NULL, to, hp, got, sizeof(got), 10000);
        reap(srv);
        ck_assert_msg(e == 0, "connect %s:%u: %s", to, hp, strerror(e));
        ck_assert_msg(got[0] != '\0', "no answer through %s:%u", to, hp);
    }

    /* The port is this container's now: a second one cannot have it. */
    struct net_port same[] = {{.host = hp, .container = 80, .proto = NET_PROTO_TCP}};
    struct err err = {0};
    ck_assert_int_eq(tnet_attach(&t, "web2", false, same, 1, NULL, &err), -ERR_CONFLICT);
    ck_assert_msg(strstr(err.msg, "already forwarded"), "%s", err.msg);
    char ip[24];
    snprintf(ip, sizeof(ip), "%s", a->ip);
    ck_assert_int_gt(rules_naming(&t, ip), 0);
    tnet_detach_ok(&t, "web");
    ck_assert_int_eq(rules_naming(&t, ip), 0);
    /* The forward is gone with the container. */
    ck_assert_int_ne(fetch(NULL, "127.0.0.1", hp, got, sizeof(got), 2000), 0);
    tnet_close(&t);
}
END_TEST

START_TEST(net_disabled_container_has_only_lo)
{
    struct tnet t;
    tnet_init(&t, 'd', true);
    const struct net_attachment *a;
    struct err err = {0};
    ck_assert_msg(tnet_attach(&t, "alone", true, NULL, 0, &a, &err) == 0, "%s", err.msg);
    ck_assert(a->disabled);
    ck_assert_str_eq(a->ip, "");
    ck_assert_int_eq(sh_in(a->netns_path, ONLY_LO), 0);
    ck_assert_int_eq(ping_from(a->netns_path, "127.0.0.1"), 0);
    ck_assert_int_ne(ping_from(a->netns_path, t.gw), 0);
    char buf[256];
    read_file(a->mounts[2].source, buf, sizeof(buf));
    ck_assert_ptr_null(strstr(buf, "nameserver"));
    ck_assert_uint_eq(leases(&t), 0);
    ck_assert_uint_eq(bridge_ports(&t), 0);
    tnet_detach_ok(&t, "alone");
    tnet_close(&t);

    /* --network none: every container is loopback-only, whatever it asks. */
    tnet_init(&t, 'd', false);
    struct net_opts o;
    char resolv[256];
    opts_default(&t, &o, resolv);
    o.disabled = true;
    tnet_open(&t, &o);
    ck_assert_msg(tnet_attach(&t, "asks", false, NULL, 0, &a, &err) == 0, "%s", err.msg);
    ck_assert(a->disabled);
    ck_assert_int_eq(sh_in(a->netns_path, ONLY_LO), 0);
    bool exists, up;
    nethost_link_state(t.name, &exists, &up, NULL);
    ck_assert(!exists);
    tnet_detach_ok(&t, "asks");
    struct net_probe *p = net_probe_new(t.n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert(!h.usable && h.disabled);
    net_probe_free(p);
    tnet_close(&t);
}
END_TEST

START_TEST(net_twenty_attach_detach_cycles_leave_nothing)
{
    struct tnet t;
    tnet_init(&t, 'e', true);
    char veths_before[32];
    snprintf(veths_before, sizeof(veths_before), "%zu", bridge_ports(&t));
    for (int i = 0; i < 20; i++) {
        char h[32];
        snprintf(h, sizeof(h), "cycle-%d", i);
        struct net_port ports[] = {{.host = 0, .container = 80, .proto = NET_PROTO_TCP}};
        const struct net_attachment *a;
        tnet_attach_ok(&t, h, ports, i % 2, &a);
        ck_assert_uint_eq(leases(&t), 1);
        if (i % 2)
            ck_assert_int_gt(rules_naming_both(&t, h, t.name), 0);
        tnet_detach_ok(&t, h);
    }
    char netns_dir[256], attach_dir[256];
    snprintf(netns_dir, sizeof(netns_dir), "%s/netns", t.state);
    snprintf(attach_dir, sizeof(attach_dir), "%s/attach", t.state);
    ck_assert_uint_eq(count_entries(netns_dir, false), 0);
    ck_assert_uint_eq(count_entries(attach_dir, false), 0);
    snprintf(attach_dir, sizeof(attach_dir), "%s/files", t.state);
    ck_assert_uint_eq(count_entries(attach_dir, false), 0);
    ck_assert_uint_eq(leases(&t), 0);
    ck_assert_uint_eq(bridge_ports(&t), 0);
    ck_assert_int_eq(tu_sh("ip -o link show type veth | grep -q 'master %s'", t.name), 1);
    /* No rule names an address of the pool but berth's own (the masquerade
     * and the guard, which name the pool itself). */
    char addr[24];
    snprintf(addr, sizeof(addr), "%s.", t.net3);
    char pool_rules[32];
    snprintf(pool_rules, sizeof(pool_rules), "%s", t.pool);
    ck_assert_int_eq(rules_naming(&t, addr) - rules_naming(&t, pool_rules), 0);
    /* portmap's rules name the network and the container (other runs of
     * this suite may have containers of the same name). */
    ck_assert_int_eq(rules_naming_both(&t, "cycle-", t.name), 0);
    tnet_close(&t);
}
END_TEST

/* A plugin directory with the real plugins and two of the test's own. */
static void
fake_plugins(struct tnet *t, char *dir, size_t size)
{
    snprintf(dir, size, "%s/plugins", t->root);
    ck_assert_int_eq(tu_sh("mkdir -p %s && for p in bridge host-local firewall portmap; do "
                           "ln -sf /usr/lib/cni/$p %s/$p; done",
                           dir, dir),
                     0);
    char path[512];
    snprintf(path, sizeof(path), "%s/refuse", dir);
    const char *refuse = "#!/bin/sh\ncat >/dev/null\n"
                         "if [ \"$CNI_COMMAND\" = ADD ]; then\n"
                         "  echo '{\"cniVersion\":\"1.0.0\",\"code\":7,\"msg\":\"refused by the "
                         "test\",\"details\":\"on purpose\"}'\n  exit 1\nfi\nexit 0\n";
    tu_write(path, refuse, strlen(refuse));
    chmod(path, 0755);
    snprintf(path, sizeof(path), "%s/hang", dir);
    const char *hang =
        "#!/bin/sh\ncat >/dev/null\n[ \"$CNI_COMMAND\" = ADD ] && sleep 60\nexit 0\n";
    tu_write(path, hang, strlen(hang));
    chmod(path, 0755);
}

/* The operator's list: the bridge on t's pool, then `last`. */
static void
operator_list(struct tnet *t, const char *last, char *dir, size_t size)
{
    snprintf(dir, size, "%s/net.d", t->root);
    char path[512], text[2048];
    snprintf(path, sizeof(path), "%s/10-op.conflist", dir);
    snprintf(text, sizeof(text),
             "{\"cniVersion\":\"1.0.0\",\"name\":\"%s\",\"plugins\":[{\"type\":\"bridge\","
             "\"bridge\":\"%s\",\"isGateway\":true,\"ipam\":{\"type\":\"host-local\","
             "\"subnet\":\"%s\",\"dataDir\":\"%s/ipam\"}},{\"type\":\"%s\"}]}",
             t->name, t->name, t->pool, t->state, last);
    tu_write(path, text, strlen(text));
}

static void
check_nothing_left(struct tnet *t)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/netns", t->state);
    ck_assert_uint_eq(count_entries(dir, false), 0);
    snprintf(dir, sizeof(dir), "%s/attach", t->state);
    ck_assert_uint_eq(count_entries(dir, false), 0);
    snprintf(dir, sizeof(dir), "%s/files", t->state);
    ck_assert_uint_eq(count_entries(dir, false), 0);
    ck_assert_uint_eq(leases(t), 0);
    ck_assert_uint_eq(bridge_ports(t), 0);
    char addr[24];
    snprintf(addr, sizeof(addr), "%s.", t->net3);
    ck_assert_int_eq(rules_naming(t, addr) - rules_naming(t, t->pool), 0);
}

START_TEST(net_missing_plugin_gives_a_clear_error_and_leaves_nothing)
{
    struct tnet t;
    tnet_init(&t, 'f', false);
    struct net_opts o;
    char resolv[256], cni[256];
    opts_default(&t, &o, resolv);
    operator_list(&t, "no-such-plugin", cni, sizeof(cni));
    o.name = o.pool = NULL;
    o.cni_config_dir = cni;
    tnet_open(&t, &o);
    tnet_setup(&t);
    struct err err = {0};
    ck_assert_int_eq(tnet_attach(&t, "x", false, NULL, 0, NULL, &err), -ERR_UNAVAILABLE);
    ck_assert_str_eq(err.msg, "cni plugin no-such-plugin: not found in /usr/lib/cni");
    check_nothing_left(&t);
    ck_assert_ptr_null(net_attachment_find(t.n, "x"));
    struct net_probe *p = net_probe_new(t.n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert(!h.usable);
    ck_assert_msg(strstr(h.reason, "cni plugin no-such-plugin: not found"), "%s", h.reason);
    net_probe_free(p);
    tnet_close(&t);
}
END_TEST

START_TEST(net_plugin_failing_after_add_is_undone_with_its_own_message)
{
    struct tnet t;
    tnet_init(&t, 'g', false);
    struct net_opts o;
    char resolv[256], cni[256], plugins[256];
    opts_default(&t, &o, resolv);
    fake_plugins(&t, plugins, sizeof(plugins));
    operator_list(&t, "refuse", cni, sizeof(cni));
    o.name = o.pool = NULL;
    o.cni_config_dir = cni;
    o.plugin_dir = plugins;
    tnet_open(&t, &o);
    tnet_setup(&t);
    struct err err = {0};
    ck_assert_int_eq(tnet_attach(&t, "x", false, NULL, 0, NULL, &err), -EIO);
    ck_assert_str_eq(err.msg, "network for x: cni plugin refuse ADD: refused by the test: on "
                              "purpose (code 7)");
    /* The bridge plugin ran (it made the bridge), and its DEL undid it all. */
    bool exists, up;
    nethost_link_state(t.name, &exists, &up, NULL);
    ck_assert(exists);
    check_nothing_left(&t);
    ck_assert_ptr_null(net_attachment_find(t.n, "x"));
    tnet_close(&t);
    tu_sh("ip link del %s", t.name);
}
END_TEST

START_TEST(net_plugin_that_does_not_answer_is_killed_and_undone)
{
    struct tnet t;
    tnet_init(&t, 'h', false);
    struct net_opts o;
    char resolv[256], cni[256], plugins[256];
    opts_default(&t, &o, resolv);
    fake_plugins(&t, plugins, sizeof(plugins));
    operator_list(&t, "hang", cni, sizeof(cni));
    o.name = o.pool = NULL;
    o.cni_config_dir = cni;
    o.plugin_dir = plugins;
    o.plugin_timeout_ms = 500;
    tnet_open(&t, &o);
    tnet_setup(&t);
    struct err err = {0};
    uint64_t t0 = uv_hrtime();
    ck_assert_int_eq(tnet_attach(&t, "x", false, NULL, 0, NULL, &err), -ETIMEDOUT);
    ck_assert_msg(strstr(err.msg, "cni plugin hang ADD: no answer after 500 ms"), "%s", err.msg);
    /* Killed at the timeout, its pipes cut a second later at most: not 60 s. */
    ck_assert_uint_lt((uv_hrtime() - t0) / 1000000, 20000);
    check_nothing_left(&t);
    tnet_close(&t);
    tu_sh("ip link del %s", t.name);
}
END_TEST

START_TEST(net_outside_traffic_is_masqueraded)
{
    struct tnet t;
    tnet_init(&t, 'i', true);
    /* An outside host on a routed subnet, in a namespace of the test's own. */
    char outns[256], out_ip[24], host_ip[24], hostif[16];
    snprintf(outns, sizeof(outns), "%s/outside", t.root);
    snprintf(host_ip, sizeof(host_ip), "198.18.%u.1", g_octet);
    snprintf(out_ip, sizeof(out_ip), "198.18.%u.2", g_octet);
    snprintf(hostif, sizeof(hostif), "%so", t.name);
    struct err err = {0};
    ck_assert_msg(nethost_netns_create(outns, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(tu_sh("ip link add %s type veth peer name eth0 netns %s && "
                           "ip addr add %s/24 dev %s && ip link set %s up && "
                           "iptables -w -t mangle -I %s 1 -o %s -j RETURN",
                           hostif, outns, host_ip, hostif, hostif, t.guard, hostif),
                     0);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "ip addr add %s/24 dev eth0 && ip link set eth0 up", out_ip);
    ck_assert_int_eq(sh_in(outns, cmd), 0);

    const struct net_attachment *a;
    tnet_attach_ok(&t, "client", NULL, 0, &a);
    pid_t srv = serve(outns, "0.0.0.0", 9000);
    char got[64];
    int e = fetch(a->netns_path, out_ip, 9000, got, sizeof(got), 10000);
    reap(srv);
    ck_assert_msg(e == 0, "connect to the outside host: %s", strerror(e));
    /* The outside host has no route to the pool: it saw the host's address. */
    ck_assert_str_eq(got, host_ip);
    tnet_detach_ok(&t, "client");
    tu_sh("ip link del %s", hostif);
    ck_assert_int_eq(nethost_netns_remove(outns, &err), 0);
    tnet_close(&t);
}
END_TEST

/* A TCP listener on the host at ip:port (0: any), for the guard tests. */
static int
listen_on(const char *ip, uint16_t *port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(*port)};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(s, 16), 0);
    socklen_t len = sizeof(sa);
    getsockname(s, (struct sockaddr *)&sa, &len);
    *port = ntohs(sa.sin_port);
    return s;
}

START_TEST(net_guard_refuses_the_api_port_from_containers)
{
    struct tnet t;
    tnet_init(&t, 'j', true);
    const struct net_attachment *a;
    tnet_attach_ok(&t, "probe", NULL, 0, &a);
    const char *listens[] = {t.gw, "0.0.0.0"};
    for (int i = 0; i < 2; i++) {
        uint16_t api = 0, other = 0;
        int s_api = listen_on(listens[i], &api);
        int s_other = listen_on(listens[i], &other);
        /* Before the guard knows the port, a container reaches it. */
        ck_assert_int_eq(fetch(a->netns_path, t.gw, api, NULL, 0, 5000), 0);
        net_set_api(t.n, listens[i], api);
        tnet_setup(&t);
        ck_assert_int_eq(fetch(a->netns_path, t.gw, api, NULL, 0, 5000), ECONNREFUSED);
        /* Another port of the host is still reachable: the guard is that narrow. */
        ck_assert_int_eq(fetch(a->netns_path, t.gw, other, NULL, 0, 5000), 0);
        /* And the host itself still reaches the API. */
        ck_assert_int_eq(fetch(NULL, t.gw, api, NULL, 0, 5000), 0);
        close(s_api);
        close(s_other);
    }
    /* Back to a loopback API: the port rule goes (the container's own
     * 127.0.0.1 is its own namespace), the loopback rule stays. */
    net_set_api(t.n, "127.0.0.1", 7380);
    tnet_setup(&t);
    char rule[64];
    snprintf(rule, sizeof(rule), "--dport 7380");
    ck_assert_int_eq(rules_naming(&t, rule), 0);
    tnet_detach_ok(&t, "probe");
    tnet_close(&t);
}
END_TEST

/* The bridge's IPv6 link-local address once it is usable (DAD done), or "". */
static void
bridge_link_local(struct tnet *t, char *out, size_t size)
{
    out[0] = '\0';
    for (int i = 0; i < 100 && !out[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "ip -6 -o addr show dev %s scope link | grep -v tentative | awk '{print $4}' | "
                 "cut -d/ -f1",
                 t->name);
        FILE *p = popen(cmd, "r");
        if (p) {
            if (!fgets(out, (int)size, p))
                out[0] = '\0';
            out[strcspn(out, "\n")] = '\0';
            pclose(p);
        }
        if (!out[0])
            usleep(100000);
    }
}

START_TEST(net_guard_refuses_the_api_port_on_ipv6_too)
{
    struct tnet t;
    tnet_init(&t, 'p', true);
    const struct net_attachment *a;
    tnet_attach_ok(&t, "six", NULL, 0, &a);
    char ll[64];
    bridge_link_local(&t, ll, sizeof(ll));
    ck_assert_msg(ll[0], "the bridge has no IPv6 link-local address");
    char to[96];
    snprintf(to, sizeof(to), "%s%%eth0", ll);
    /* berthd on [::] takes IPv4 and IPv6. */
    int s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int zero = 0, one = 1;
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(s, 16), 0);
    socklen_t len = sizeof(sa);
    getsockname(s, (struct sockaddr *)&sa, &len);
    uint16_t api = ntohs(sa.sin6_port);
    ck_assert_int_eq(fetch(a->netns_path, to, api, NULL, 0, 5000), 0);
    ck_assert_int_eq(fetch(a->netns_path, t.gw, api, NULL, 0, 5000), 0);
    net_set_api(t.n, "::", api);
    tnet_setup(&t);
    ck_assert_int_eq(fetch(a->netns_path, to, api, NULL, 0, 5000), ECONNREFUSED);
    ck_assert_int_eq(fetch(a->netns_path, t.gw, api, NULL, 0, 5000), ECONNREFUSED);
    close(s);
    tnet_detach_ok(&t, "six");
    tnet_close(&t);
    ck_assert_int_eq(tu_sh("ip6tables -w -S BERTH-IN-%s >/dev/null 2>&1", t.name), 1);
}
END_TEST

/*
 * The container routes 127.0.0.1 to the bridge (what a container with
 * CAP_NET_RAW does by writing frames itself) and sends one UDP datagram
 * to the host's 127.0.0.1:port.
 */
static void
send_to_host_loopback(const struct net_attachment *a, const char *gw, uint16_t port)
{
    char cmd[512];
    snprintf(
        cmd, sizeof(cmd),
        "sysctl -qw net.ipv4.conf.eth0.route_localnet=1; "
        "ip route del local 127.0.0.1 table local; ip route del local 127.0.0.0/8 table local; "
        "ip route replace 127.0.0.1/32 via %s dev eth0 src %s",
        gw, a->ip);
    sh_in(a->netns_path, cmd);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        enter(a->netns_path);
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in sa = {
            .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
        _exit(sendto(s, "hi", 2, 0, (struct sockaddr *)&sa, sizeof(sa)) == 2 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "send from the container");
}

START_TEST(net_guard_keeps_containers_off_host_loopback)
{
    struct tnet t;
    tnet_init(&t, 'k', true);
    const struct net_attachment *a;
    tnet_attach_ok(&t, "raw", NULL, 0, &a);
    /* portmap sets this once a container forwards a port (for the host's own
     * 127.0.0.1 to reach it): a container can then route to host loopback. */
    ck_assert_int_eq(tu_sh("sysctl -qw net.ipv4.conf.%s.route_localnet=1", t.name), 0);
    for (int guarded = 1; guarded >= 0; guarded--) {
        if (!guarded) {
            /* The control: without berth's rules the datagram gets through. */
            struct wait w = {0};
            struct err err = {0};
            ck_assert_int_eq(net_teardown(t.n, done_cb, &w, &err), 0);
            run_until(&t, &w);
        }
        uint16_t port = 0;
        int ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
        ck_assert_int_eq(bind(ufd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        socklen_t len = sizeof(sa);
        getsockname(ufd, (struct sockaddr *)&sa, &len);
        port = ntohs(sa.sin_port);
        send_to_host_loopback(a, t.gw, port);
        struct pollfd pfd = {.fd = ufd, .events = POLLIN};
        int got = poll(&pfd, 1, 1500);
        close(ufd);
        if (guarded)
            ck_assert_msg(got == 0, "a container reached the host's 127.0.0.1 through the guard");
        else
            ck_assert_msg(got == 1, "the control datagram did not arrive: the test proves nothing");
    }
    tnet_setup(&t);
    tnet_detach_ok(&t, "raw");
    tnet_close(&t);
}
END_TEST

START_TEST(net_reconcile_keeps_the_live_and_releases_the_gone)
{
    struct tnet t;
    tnet_init(&t, 'l', true);
    struct net_port ports[] = {{.host = 0, .container = 8080, .proto = NET_PROTO_TCP}};
    const struct net_attachment *a, *b;
    tnet_attach_ok(&t, "stays", ports, 1, &a);
    tnet_attach_ok(&t, "goes", ports, 1, &b);
    const struct net_attachment *q = NULL;
    struct err qerr = {0};
    ck_assert_msg(tnet_attach(&t, "quiet", true, NULL, 0, &q, &qerr) == 0, "%s", qerr.msg);
    char quiet_ns[256];
    snprintf(quiet_ns, sizeof(quiet_ns), "%s", q->netns_path);
    char ip_a[24], ip_b[24];
    snprintf(ip_a, sizeof(ip_a), "%s", a->ip);
    snprintf(ip_b, sizeof(ip_b), "%s", b->ip);
    uint16_t hp = a->ports[0].host;
    ck_assert_uint_eq(leases(&t), 2);

    /* kill -9: the service goes without detaching anything. */
    net_free(t.n);
    t.n = NULL;
    uv_run(&t.loop, UV_RUN_DEFAULT);

    /* What a crash can leave without a record: a lease and a namespace. */
    char path[512];
    snprintf(path, sizeof(path), "%s/ipam/%s/%s.200", t.state, t.name, t.net3);
    tu_write(path, "ghost\r\neth0", 11);
    char tmp_rec[512];
    snprintf(tmp_rec, sizeof(tmp_rec), "%s/attach/goes.json.tmp.4242", t.state);
    tu_write(tmp_rec, "{\"hand", 6); /* a record's write the kill cut short */
    snprintf(path, sizeof(path), "%s/netns/ghost-ns", t.state);
    struct err err = {0};
    ck_assert_msg(nethost_netns_create(path, &err) == 0, "%s", err.msg);
    /* And the host side lost under the containers (a flush of the host's
     * rules, for this network only): the bridge, berth's forward jump,
     * portmap's DNAT jumps. */
    ck_assert_int_eq(tu_sh("ip link del %s", t.name), 0);
    ck_assert_int_eq(tu_sh("iptables -w -D FORWARD -j BERTH-FWD-%s", t.name), 0);
    /* The masquerade's jump and the guard's rules too (its chain emptied). */
    ck_assert_int_eq(
        tu_sh("iptables -w -t nat -D POSTROUTING -s %s -j BERTH-NAT-%s", t.pool, t.name), 0);
    ck_assert_int_eq(tu_sh("iptables -w -F BERTH-IN-%s", t.name), 0);
    ck_assert_int_eq(tu_sh("iptables-save -t nat | grep '^-A CNI-HOSTPORT-DNAT' | grep -F -- "
                           "'%s' | grep -q . && iptables-save -t nat | "
                           "grep '^-A CNI-HOSTPORT-DNAT' | grep -F -- '%s' | "
                           "sed 's/^-A /-D /' | while read -r l; do eval iptables -w -t nat $l; "
                           "done",
                           t.name, t.name),
                     0);

    struct net_opts o;
    char resolv[256];
    opts_default(&t, &o, resolv);
    struct err e2 = {0};
    ck_assert_msg(net_new(&t.loop, t.jobs, &o, &t.n, &e2) == 0, "%s", e2.msg);
    const char *live[] = {"stays", "quiet"};
    struct wait w = {0};
    ck_assert_int_eq(net_reconcile(t.n, live, 2, reconcile_cb, &w, &err), 0);
    run_until(&t, &w);
    ck_assert_msg(!w.failed, "%s", w.err.msg);
    ck_assert_uint_eq(w.st.kept, 2);
    /* A loopback-only container is kept as it was, its namespace too. */
    q = net_attachment_find(t.n, "quiet");
    ck_assert_ptr_nonnull(q);
    ck_assert(q->disabled);
    ck_assert(nethost_netns_mounted(quiet_ns));
    tnet_detach_ok(&t, "quiet");
    ck_assert_uint_eq(w.st.released, 1);
    ck_assert_uint_ge(w.st.orphans, 3);
    ck_assert_msg(access(tmp_rec, F_OK) != 0, "%s is left", tmp_rec);
    ck_assert_uint_ge(w.st.repaired, 1);

    a = net_attachment_find(t.n, "stays");
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a->ip, ip_a);
    ck_assert_uint_eq(a->ports[0].host, hp);
    ck_assert_ptr_null(net_attachment_find(t.n, "goes"));
    ck_assert_uint_eq(leases(&t), 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(rules_naming(&t, ip_b), 0);
    /* The kept container works again: its gateway, its port, the forward rule. */
    ck_assert_int_eq(ping_from(a->netns_path, t.gw), 0);
    ck_assert_int_eq(tu_sh("iptables -w -C FORWARD -j BERTH-FWD-%s", t.name), 0);
    ck_assert_int_eq(
        tu_sh("iptables -w -t nat -C POSTROUTING -s %s -j BERTH-NAT-%s", t.pool, t.name), 0);
    ck_assert_int_eq(
        tu_sh("iptables -w -S BERTH-IN-%s | grep -q 'never reach host loopback'", t.name), 0);
    pid_t srv = serve(a->netns_path, "0.0.0.0", 8080);
    char got[64];
    ck_assert_int_eq(fetch(NULL, "127.0.0.1", hp, got, sizeof(got), 10000), 0);
    reap(srv);
    /* Its address stays taken: a new container gets another. */
    const struct net_attachment *c;
    tnet_attach_ok(&t, "new", NULL, 0, &c);
    ck_assert_str_ne(c->ip, ip_a);
    tnet_detach_ok(&t, "new");
    tnet_detach_ok(&t, "stays");
    check_nothing_left(&t);
    tnet_close(&t);
}
END_TEST

/*
 * A client may create a container the moment the daemon answers, with
 * the handle of one that is gone: its attach waits for the start-up
 * reconciliation, which releases the old network first, instead of
 * failing as "exists already" or racing the release of the old record.
 */
START_TEST(net_attach_during_the_reconciliation_waits_for_it)
{
    struct tnet t;
    tnet_init(&t, 'r', true);
    const struct net_attachment *a;
    tnet_attach_ok(&t, "again", NULL, 0, &a);
    tnet_attach_ok(&t, "other", NULL, 0, &a);
    /* kill -9, and "again" deleted meanwhile. */
    net_free(t.n);
    t.n = NULL;
    uv_run(&t.loop, UV_RUN_DEFAULT);
    struct net_opts o;
    char resolv[256];
    opts_default(&t, &o, resolv);
    struct err err = {0};
    ck_assert_msg(net_new(&t.loop, t.jobs, &o, &t.n, &err) == 0, "%s", err.msg);
    const char *live[] = {"other"};
    struct wait rw = {0}, aw = {0}, pw = {0};
    ck_assert_int_eq(net_reconcile(t.n, live, 1, reconcile_cb, &rw, &err), 0);
    struct net_attach_req req = {.handle = "again"};
    ck_assert_msg(net_attach(t.n, &req, attach_cb, &aw, &err) == 0, "%s", err.msg);
    /* A request that is wrong is refused at once all the same. */
    struct net_port bad[] = {{.host = 0, .container = 0, .proto = NET_PROTO_TCP}};
    struct net_attach_req breq = {.handle = "bad", .ports = bad, .nports = 1};
    ck_assert_int_lt(net_attach(t.n, &breq, attach_cb, &pw, &err), 0);
    run_until(&t, &rw);
    run_until(&t, &aw);
    ck_assert_msg(!rw.failed, "%s", rw.err.msg);
    ck_assert_msg(!aw.failed, "attach during the reconciliation: %s", aw.err.msg);
    ck_assert_uint_eq(rw.st.kept, 1);
    ck_assert_uint_eq(rw.st.released, 1);
    a = net_attachment_find(t.n, "again");
    ck_assert_ptr_nonnull(a);
    ck_assert(nethost_netns_mounted(a->netns_path));
    ck_assert_uint_eq(leases(&t), 2);
    ck_assert_int_eq(ping_from(a->netns_path, t.gw), 0);
    tnet_detach_ok(&t, "again");
    tnet_detach_ok(&t, "other");
    check_nothing_left(&t);
    tnet_close(&t);
}
END_TEST

START_TEST(net_health_reports_what_is_missing)
{
    struct tnet t;
    tnet_init(&t, 'm', true);
    struct net_probe *p = net_probe_new(t.n);
    struct net_health h;
    net_probe_run(p, &h);
    ck_assert_msg(h.usable, "%s", h.reason);
    ck_assert_int_eq(tu_sh("ip link set %s down", t.name), 0);
    net_probe_run(p, &h);
    ck_assert(!h.usable);
    char want[64];
    snprintf(want, sizeof(want), "bridge %s: down", t.name);
    ck_assert_str_eq(h.reason, want);
    tnet_setup(&t); /* brings it up again */
    net_probe_run(p, &h);
    ck_assert_msg(h.usable, "%s", h.reason);
    ck_assert_int_eq(tu_sh("iptables -w -D INPUT -j BERTH-IN-%s", t.name), 0);
    net_probe_run(p, &h);
    ck_assert(!h.usable);
    ck_assert_msg(strstr(h.reason, "the jump from INPUT to BERTH-IN-"), "%s", h.reason);
    net_probe_free(p);
    tnet_close(&t);
}
END_TEST

START_TEST(net_eight_containers_at_once_all_get_addresses)
{
    struct tnet t;
    tnet_init(&t, 'o', false);
    struct net_opts o;
    char resolv[256];
    opts_default(&t, &o, resolv);
    tnet_open(&t, &o);
    /* No setup first: the attaches wait for the one the first of them starts. */
    enum { N = 8 };
    struct wait w[N];
    char handles[N][16];
    struct net_port ports[] = {{.host = 0, .container = 80, .proto = NET_PROTO_TCP}};
    for (int i = 0; i < N; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        snprintf(handles[i], sizeof(handles[i]), "many-%d", i);
        struct err err = {0};
        struct net_attach_req req = {
            .handle = handles[i], .ports = ports, .nports = (size_t)(i % 2)};
        ck_assert_msg(net_attach(t.n, &req, attach_cb, &w[i], &err) == 0, "%s", err.msg);
    }
    for (int i = 0; i < N; i++)
        run_until(&t, &w[i]);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(!w[i].failed, "%s: %s", handles[i], w[i].err.msg);
        for (int j = 0; j < i; j++) {
            ck_assert_str_ne(w[i].a->ip, w[j].a->ip);
            if (w[i].a->nports && w[j].a->nports)
                ck_assert_uint_ne(w[i].a->ports[0].host, w[j].a->ports[0].host);
        }
    }
    ck_assert_uint_eq(leases(&t), N);
    ck_assert_int_eq(ping_from(w[0].a->netns_path, w[N - 1].a->ip), 0);
    struct wait d[N];
    for (int i = 0; i < N; i++) {
        memset(&d[i], 0, sizeof(d[i]));
        struct err err = {0};
        ck_assert_msg(net_detach(t.n, handles[i], done_cb, &d[i], &err) == 0, "%s", err.msg);
    }
    for (int i = 0; i < N; i++) {
        run_until(&t, &d[i]);
        ck_assert_msg(!d[i].failed, "%s: %s", handles[i], d[i].err.msg);
    }
    check_nothing_left(&t);
    tnet_close(&t);
}
END_TEST

START_TEST(net_bad_requests_are_refused_at_once)
{
    struct tnet t;
    tnet_init(&t, 'n', true);
    struct err err = {0};
    struct net_port zero[] = {{.host = 0, .container = 0, .proto = NET_PROTO_TCP}};
    ck_assert_int_eq(tnet_attach(&t, "../x", false, NULL, 0, NULL, &err), -EINVAL);
    struct net_attach_req req = {.handle = "h", .hostname = "h\n10.0.0.1 api"};
    ck_assert_int_eq(net_attach(t.n, &req, attach_cb, NULL, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "expected 1 to 63 of [A-Za-z0-9_.-]"), "%s", err.msg);
    ck_assert_int_eq(tnet_attach(&t, "p", false, zero, 1, NULL, &err), -EINVAL);
    ck_assert_msg(strstr(err.msg, "ports[0].container"), "%s", err.msg);
    struct net_port twice[] = {{.host = 40001, .container = 1, .proto = NET_PROTO_TCP},
                               {.host = 40001, .container = 2, .proto = NET_PROTO_TCP}};
    ck_assert_int_eq(tnet_attach(&t, "p", false, twice, 2, NULL, &err), -EINVAL);
    /* A host port that a host process holds. */
    uint16_t port = 0;
    int s = listen_on("0.0.0.0", &port);
    struct net_port held[] = {{.host = port, .container = 80, .proto = NET_PROTO_TCP}};
    ck_assert_int_eq(tnet_attach(&t, "p", false, held, 1, NULL, &err), -ERR_CONFLICT);
    ck_assert_msg(strstr(err.msg, "in use on the host"), "%s", err.msg);
    close(s);
    check_nothing_left(&t);
    /* A teardown while a setup runs: EBUSY, with or without an error to fill. */
    struct wait w = {0};
    ck_assert_msg(net_setup(t.n, done_cb, &w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(net_teardown(t.n, done_cb, NULL, NULL), -EBUSY);
    ck_assert_int_eq(net_teardown(t.n, done_cb, NULL, &err), -EBUSY);
    ck_assert_msg(strstr(err.msg, "a setup is running"), "%s", err.msg);
    run_until(&t, &w);
    ck_assert_msg(!w.failed, "setup: %s", w.err.msg);
    tnet_close(&t);
}
END_TEST

/* What the ready callback saw, for the runtime that starts meanwhile. */
struct ready_wait {
    struct wait w; /* first: attach_cb takes it */
    bool ready, ready_before_done, netns_bound, ip_empty;
    unsigned nmounts;
    ino_t hosts_ino;
    char hosts[256];
};

static void
ready_cb(void *arg, const struct net_attachment *a, const struct err *err)
{
    struct ready_wait *r = arg;
    ck_assert_ptr_null(err);
    r->ready = true;
    r->ready_before_done = !r->w.done;
    r->netns_bound = nethost_netns_mounted(a->netns_path);
    r->ip_empty = a->ip[0] == '\0';
    r->nmounts = (unsigned)a->nmounts;
    struct stat st;
    if (a->nmounts && stat(a->mounts[0].source, &st) == 0) {
        r->hosts_ino = st.st_ino;
        read_file(a->mounts[0].source, r->hosts, sizeof(r->hosts));
    }
}

START_TEST(net_ready_comes_with_namespace_and_files_before_add)
{
    struct tnet t;
    tnet_init(&t, 'q', true);
    for (int disabled = 0; disabled < 2; disabled++) {
        const char *h = disabled ? "rd" : "rn";
        struct ready_wait r = {0};
        struct net_attach_req req = {.handle = h, .disabled = disabled, .ready = ready_cb};
        struct err err = {0};
        ck_assert_msg(net_attach(t.n, &req, attach_cb, &r, &err) == 0, "%s", err.msg);
        ck_assert(!r.ready); /* never inside the call */
        run_until(&t, &r.w);
        ck_assert_msg(!r.w.failed, "%s", r.w.err.msg);
        ck_assert(r.ready && r.ready_before_done && r.netns_bound && r.ip_empty);
        ck_assert_uint_eq(r.nmounts, 3);
        char line[64];
        snprintf(line, sizeof(line), "127.0.1.1\t%s\n", h);
        ck_assert_msg(strstr(r.hosts, line), "%s", r.hosts);
        /* The address goes into the same file, which a runtime may have
         * bind-mounted by then. */
        const struct net_attachment *a = r.w.a;
        struct stat st;
        ck_assert_int_eq(stat(a->mounts[0].source, &st), 0);
        ck_assert_uint_eq(st.st_ino, r.hosts_ino);
        char buf[256];
        read_file(a->mounts[0].source, buf, sizeof(buf));
        snprintf(line, sizeof(line), "%s\t%s\n", disabled ? "127.0.1.1" : a->ip, h);
        ck_assert_msg(strstr(buf, line), "%s", buf);
        ck_assert(disabled ? a->ip[0] == '\0' : a->ip[0] != '\0');
        tnet_detach_ok(&t, h);
    }
    check_nothing_left(&t);
    tnet_close(&t);
}
END_TEST

int
main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_net: needs root (network namespaces, iptables); skipped\n");
        return 77;
    }
    suite_setup();
    Suite *s = suite_create("net");
    TCase *tc = tcase_create("net");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, net_container_gets_a_pool_address_and_reaches_its_gateway);
    tcase_add_test(tc, net_two_containers_reach_each_other);
    tcase_add_test(tc, net_forwarded_port_reaches_a_server_in_the_container);
    tcase_add_test(tc, net_disabled_container_has_only_lo);
    tcase_add_test(tc, net_twenty_attach_detach_cycles_leave_nothing);
    tcase_add_test(tc, net_missing_plugin_gives_a_clear_error_and_leaves_nothing);
    tcase_add_test(tc, net_plugin_failing_after_add_is_undone_with_its_own_message);
    tcase_add_test(tc, net_plugin_that_does_not_answer_is_killed_and_undone);
    tcase_add_test(tc, net_outside_traffic_is_masqueraded);
    tcase_add_test(tc, net_guard_refuses_the_api_port_from_containers);
    tcase_add_test(tc, net_guard_refuses_the_api_port_on_ipv6_too);
    tcase_add_test(tc, net_guard_keeps_containers_off_host_loopback);
    tcase_add_test(tc, net_reconcile_keeps_the_live_and_releases_the_gone);
    tcase_add_test(tc, net_attach_during_the_reconciliation_waits_for_it);
    tcase_add_test(tc, net_health_reports_what_is_missing);
    tcase_add_test(tc, net_eight_containers_at_once_all_get_addresses);
    tcase_add_test(tc, net_bad_requests_are_refused_at_once);
    tcase_add_test(tc, net_ready_comes_with_namespace_and_files_before_add);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    suite_teardown();
    return failed ? 1 : 0;
}
