/*
 * Host-side network operations: namespaces, the bridge, forwarding, the
 * rules berth owns, leases. Blocking; pool threads, the monitor thread,
 * or main before the loop runs.
 *
 * The rules, per network (iptables, which the CNI plugins need anyway;
 * on Debian 12 it is iptables-nft, so they land in nftables):
 *
 *   filter FORWARD -> BERTH-FWD-<net> (first rule of FORWARD)
 *     -s <pool>:                                          ACCEPT
 *     -d <pool>, a reply or a forwarded port (DNAT):      ACCEPT
 *   filter INPUT -> BERTH-IN-<net>   (first rule of INPUT)
 *     -i <bridge> -d 127.0.0.0/8, not a reply:            DROP
 *     -s <pool> ! -i lo -d 127.0.0.0/8, not a reply:      DROP
 *     -i <bridge> -p tcp --dport <api port>:              REJECT (tcp-reset)
 *     -s <pool> ! -i lo -p tcp --dport <api port>:        REJECT (tcp-reset)
 *   nat POSTROUTING -s <pool> -> BERTH-NAT-<net>
 *     -d <pool> RETURN, -d 224.0.0.0/4 RETURN, MASQUERADE
 *
 * The loopback rules are there whatever --listen says: portmap sets
 * route_localnet on the bridge (so that the host's own 127.0.0.1 reaches
 * forwarded ports), after which a container with CAP_NET_RAW could send
 * a frame to 127.0.0.1 through the bridge and reach anything listening
 * on the host's loopback, berthd's API included (CVE-2020-8558). Replies
 * to the host's own connections (ESTABLISHED, and DNAT for forwarded
 * ports) still pass. The pool rules leave lo alone: the host's own
 * connections from the gateway address come in there.
 *
 * The FORWARD chain is what the CNI firewall plugin would add for each
 * container (its "-s IP -j ACCEPT" and "-d IP RELATED,ESTABLISHED"), once
 * for the whole pool: a host whose FORWARD policy is DROP (Docker sets
 * it) still forwards the containers' traffic. The plugin costs two Go
 * start-ups and eight iptables runs per create and per delete (~45 ms of
 * CPU here), the one chain nothing per container. Forwarded ports (DNAT)
 * are let in too: they were asked for.
 */
#include "daemon/net_host.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"

#define TOOL_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define ERROUT_MAX 2048

/* ---- running tools ---------------------------------------------------------- */

char *
nethost_find_tool(const char *tool)
{
    char path[] = TOOL_PATH;
    char *save = NULL;
    for (char *dir = strtok_r(path, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/%s", dir, tool) < 0)
            return NULL;
        if (access(cand, X_OK) == 0)
            return cand;
        free(cand);
    }
    return NULL;
}

static void
join_argv(const char *const *argv, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; argv[i] && used + 1 < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? " " : "", argv[i]);
}

int
nethost_exec(const char *const *argv, const char *input, char **errout, struct err *err)
{
    cleanup_free char *bin = nethost_find_tool(argv[0]);
    if (!bin)
        return err_set(err, ERR_UNAVAILABLE, "%s: not found in %s", argv[0], TOOL_PATH);
    int in[2] = {-1, -1}, errp[2] = {-1, -1};
    if ((input && pipe2(in, O_CLOEXEC) < 0) || pipe2(errp, O_CLOEXEC) < 0) {
        int e = errno;
        if (in[0] >= 0)
            close(in[0]), close(in[1]);
        return err_errno(err, e, "run %s: pipe", argv[0]);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (input)
        posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    else
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, errp[1], STDERR_FILENO);
    char *envp[] = {"PATH=" TOOL_PATH, "LC_ALL=C", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(errp[1]);
    if (input)
        close(in[0]);
    if (rc != 0) {
        close(errp[0]);
        if (input)
            close(in[1]);
        return err_errno(err, rc, "run %s", bin);
    }
    if (input) {
        size_t len = strlen(input), off = 0;
        while (off < len) {
            ssize_t w = write(in[1], input + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break; /* the tool went away; its status says why */
            off += (size_t)w;
        }
        close(in[1]);
    }
    char buf[ERROUT_MAX + 1];
    size_t used = 0;
    for (;;) {
        char chunk[512];
        ssize_t r = read(errp[0], chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        /* Keep the tail (a chunk is smaller than the buffer): the last
         * lines say what went wrong. */
        size_t n = (size_t)r;
        if (used + n > ERROUT_MAX) {
            size_t drop = used + n - ERROUT_MAX;
            memmove(buf, buf + drop, used - drop);
            used -= drop;
        }
        memcpy(buf + used, chunk, n);
        used += n;
    }
    close(errp[0]);
    buf[used] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return err_errno(err, errno, "wait for %s", bin);
    }
    if (errout)
        *errout = strdup(buf);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int
nethost_run(const char *const *argv, const char *input, struct err *err)
{
    cleanup_free char *errout = NULL;
    int st = nethost_exec(argv, input, &errout, err);
    if (st <= 0)
        return st;
    char cmd[256];
    join_argv(argv, cmd, sizeof(cmd));
    size_t n = errout ? strlen(errout) : 0;
    while (n && (errout[n - 1] == '\n' || errout[n - 1] == ' '))
        errout[--n] = '\0';
    char *nl = errout ? strrchr(errout, '\n') : NULL;
    return err_set(err, EIO, "%s: exited with status %d%s%s", cmd, st, n ? ": " : "",
                   n ? (nl ? nl + 1 : errout) : "");
}

/* ---- namespaces ------------------------------------------------------------- */

static int
loopback_up(struct err *err)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return err_errno(err, errno, "bring lo up: socket");
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int ret = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        ret = err_errno(err, errno, "bring lo up: get flags");
    else {
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
            ret = err_errno(err, errno, "bring lo up");
    }
    close(s);
    return ret;
}

int
nethost_netns_create(const char *path, struct err *err)
{
    int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0)
        return err_errno(err, errno, "create network namespace file %s", path);
    close(fd);
    int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (orig < 0) {
        int e = errno;
        unlink(path);
        return err_errno(err, e, "open this thread's network namespace");
    }
    if (unshare(CLONE_NEWNET) < 0) {
        int e = errno;
        close(orig);
        unlink(path);
        return err_errno(err, e, "create network namespace %s", path);
    }
    int ret = loopback_up(err);
    if (ret == 0 && mount("/proc/thread-self/ns/net", path, NULL, MS_BIND, NULL) < 0)
        ret = err_errno(err, errno, "bind network namespace at %s", path);
    if (setns(orig, CLONE_NEWNET) < 0) {
        /* This thread would run later jobs (pulls, say) inside a container's
         * namespace. There is no safe way on. */
        log_error("net: cannot return a pool thread to the host's network namespace: %s",
                  strerror(errno));
        abort();
    }
    close(orig);
    if (ret < 0)
        unlink(path);
    return ret;
}

int
nethost_netns_remove(const char *path, struct err *err)
{
    if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
        return err_errno(err, errno, "unmount network namespace %s", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return err_errno(err, errno, "remove network namespace file %s", path);
    return 0;
}

bool
nethost_netns_mounted(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == NSFS_MAGIC;
}

/* ---- rules ------------------------------------------------------------------ */

void
nethost_rules_init(struct nethost_rules *r, const char *name)
{
    memset(r, 0, sizeof(*r));
    char id[NET_NAME_MAX + 1];
    if (net_name_valid(name)) {
        snprintf(id, sizeof(id), "%s", name);
    } else {
        /* FNV-1a: a stable short name for a long or odd network name. */
        uint32_t h = 2166136261u;
        for (const char *p = name; p && *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        snprintf(id, sizeof(id), "%08x", h);
    }
    snprintf(r->in_chain, sizeof(r->in_chain), "BERTH-IN-%s", id);
    snprintf(r->fwd_chain, sizeof(r->fwd_chain), "BERTH-FWD-%s", id);
    snprintf(r->nat_chain, sizeof(r->nat_chain), "BERTH-NAT-%s", id);
}

/* The iptables-restore input that replaces the chains' contents. */
static char *
rules_text(const struct nethost_rules *r, bool v6)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    const char *localnet = "-m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -m comment "
                           "--comment \"berth: containers never reach host loopback\" -j DROP";
    const char *reject = "-m comment --comment \"berth: containers never reach the API\" -j "
                         "REJECT --reject-with tcp-reset";
    fprintf(f, "*filter\n:%s - [0:0]\n", r->in_chain);
    if (!v6) {
        if (r->bridge[0])
            fprintf(f, "-A %s -i %s -d 127.0.0.0/8 %s\n", r->in_chain, r->bridge, localnet);
        for (size_t i = 0; i < r->npools; i++) {
            char p[NET_CIDR_STRLEN];
            net_cidr_format(&r->pools[i], p);
            fprintf(f, "-A %s ! -i lo -s %s -d 127.0.0.0/8 %s\n", r->in_chain, p, localnet);
        }
    }
    if ((v6 ? r->guard_v6 : r->guard_v4) && r->api_port) {
        if (r->bridge[0])
            fprintf(f, "-A %s -i %s -p tcp --dport %u %s\n", r->in_chain, r->bridge, r->api_port,
                    reject);
        for (size_t i = 0; !v6 && i < r->npools; i++) {
            char p[NET_CIDR_STRLEN];
            net_cidr_format(&r->pools[i], p);
            fprintf(f, "-A %s ! -i lo -s %s -p tcp --dport %u %s\n", r->in_chain, p, r->api_port,
                    reject);
        }
    }
    if (!v6 && r->forward && r->npools) {
        char p[NET_CIDR_STRLEN];
        net_cidr_format(&r->pools[0], p);
        fprintf(f,
                ":%s - [0:0]\n"
                "-A %s -s %s -m comment --comment \"berth: containers reach out\" -j ACCEPT\n"
                "-A %s -d %s -m conntrack --ctstate RELATED,ESTABLISHED,DNAT -m comment "
                "--comment \"berth: replies and forwarded ports reach containers\" -j ACCEPT\n",
                r->fwd_chain, r->fwd_chain, p, r->fwd_chain, p);
    }
    fprintf(f, "COMMIT\n");
    if (!v6 && r->nat && r->npools) {
        char p[NET_CIDR_STRLEN];
        net_cidr_format(&r->pools[0], p);
        fprintf(f,
                "*nat\n:%s - [0:0]\n-A %s -d %s -j RETURN\n-A %s -d 224.0.0.0/4 -j RETURN\n"
                "-A %s -m comment --comment \"berth: containers reach out masqueraded\" -j "
                "MASQUERADE\nCOMMIT\n",
                r->nat_chain, r->nat_chain, p, r->nat_chain, r->nat_chain);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Adds the jump (argv: tool, -w, [-t table], chain, match..., -j target) unless it is there. */
static int
jump_ensure(const char *tool, const char *table, const char *from, const char *match_src,
            const char *to, bool first, struct err *err)
{
    const char *check[12], *add[14];
    size_t n = 0, m = 0;
    check[n++] = tool, add[m++] = tool;
    check[n++] = "-w", add[m++] = "-w";
    if (table) {
        check[n++] = "-t", check[n++] = table;
        add[m++] = "-t", add[m++] = table;
    }
    check[n++] = "-C", check[n++] = from;
    add[m++] = first ? "-I" : "-A", add[m++] = from;
    if (first)
        add[m++] = "1";
    if (match_src) {
        check[n++] = "-s", check[n++] = match_src;
        add[m++] = "-s", add[m++] = match_src;
    }
    check[n++] = "-j", check[n++] = to, check[n] = NULL;
    add[m++] = "-j", add[m++] = to, add[m] = NULL;
    int st = nethost_exec(check, NULL, NULL, err);
    if (st < 0)
        return st;
    if (st == 0)
        return 0;
    return nethost_run(add, NULL, err);
}

int
nethost_rules_apply(const struct nethost_rules *r, struct err *err)
{
    cleanup_free char *v4 = rules_text(r, false);
    if (!v4)
        return err_set(err, ENOMEM, "firewall rules: out of memory");
    const char *restore[] = {"iptables-restore", "-w", "--noflush", NULL};
    int ret = nethost_run(restore, v4, err);
    if (ret == 0)
        ret = jump_ensure("iptables", NULL, "INPUT", NULL, r->in_chain, true, err);
    if (ret == 0 && r->forward && r->npools)
        ret = jump_ensure("iptables", NULL, "FORWARD", NULL, r->fwd_chain, true, err);
    if (ret == 0 && r->nat && r->npools) {
        char p[NET_CIDR_STRLEN];
        net_cidr_format(&r->pools[0], p);
        ret = jump_ensure("iptables", "nat", "POSTROUTING", p, r->nat_chain, false, err);
    }
    if (ret == 0 && r->guard_v6) {
        cleanup_free char *v6 = rules_text(r, true);
        const char *restore6[] = {"ip6tables-restore", "-w", "--noflush", NULL};
        ret = v6 ? nethost_run(restore6, v6, err) : err_set(err, ENOMEM, "out of memory");
        if (ret == 0)
            ret = jump_ensure("ip6tables", NULL, "INPUT", NULL, r->in_chain, true, err);
    }
    if (ret < 0)
        return err_wrap(err, "install firewall rules for %s", r->in_chain);
    return 0;
}

/* Removes every jump to chain from `from`, then the chain; a missing chain is fine. */
static int
chain_remove(const char *tool, const char *table, const char *from, const char *match_src,
             const char *chain, struct err *err)
{
    const char *exists[] = {tool, "-w", "-t", table, "-S", chain, NULL};
    int st = nethost_exec(exists, NULL, NULL, err);
    if (st < 0)
        return st;
    if (st != 0)
        return 0;
    for (int i = 0; i < 16; i++) {
        const char *del[12];
        size_t n = 0;
        del[n++] = tool, del[n++] = "-w", del[n++] = "-t", del[n++] = table;
        del[n++] = "-D", del[n++] = from;
        if (match_src)
            del[n++] = "-s", del[n++] = match_src;
        del[n++] = "-j", del[n++] = chain, del[n] = NULL;
        if (nethost_exec(del, NULL, NULL, err) != 0)
            break;
    }
    const char *flush[] = {tool, "-w", "-t", table, "-F", chain, NULL};
    const char *drop[] = {tool, "-w", "-t", table, "-X", chain, NULL};
    int ret = nethost_run(flush, NULL, err);
    if (ret == 0)
        ret = nethost_run(drop, NULL, err);
    return ret;
}

int
nethost_rules_remove(const struct nethost_rules *r, struct err *err)
{
    int ret = chain_remove("iptables", "filter", "INPUT", NULL, r->in_chain, err);
    if (ret == 0)
        ret = chain_remove("iptables", "filter", "FORWARD", NULL, r->fwd_chain, err);
    if (ret == 0 && r->npools) {
        char p[NET_CIDR_STRLEN];
        net_cidr_format(&r->pools[0], p);
        ret = chain_remove("iptables", "nat", "POSTROUTING", p, r->nat_chain, err);
    }
    if (ret == 0) {
        cleanup_free char *ip6 = nethost_find_tool("ip6tables");
        if (ip6)
            ret = chain_remove("ip6tables", "filter", "INPUT", NULL, r->in_chain, err);
    }
    if (ret < 0)
        return err_wrap(err, "remove firewall rules %s", r->in_chain);
    return 0;
}

int
nethost_rules_check(const struct nethost_rules *r, struct err *err)
{
    const char *in[] = {"iptables", "-w", "-C", "INPUT", "-j", r->in_chain, NULL};
    int st = nethost_exec(in, NULL, NULL, err);
    if (st < 0)
        return st;
    if (st != 0)
        return err_set(err, ENOENT, "firewall: the jump from INPUT to %s is missing", r->in_chain);
    if (r->forward && r->npools && !nethost_forward_present(r))
        return err_set(err, ENOENT, "firewall: the jump from FORWARD to %s is missing",
                       r->fwd_chain);
    if (r->nat && r->npools) {
        char p[NET_CIDR_STRLEN];
        net_cidr_format(&r->pools[0], p);
        const char *nat[] = {"iptables", "-w", "-t", "nat",        "-C", "POSTROUTING",
                             "-s",       p,    "-j", r->nat_chain, NULL};
        st = nethost_exec(nat, NULL, NULL, err);
        if (st < 0)
            return st;
        if (st != 0)
            return err_set(err, ENOENT, "firewall: the masquerade jump to %s is missing",
                           r->nat_chain);
    }
    if (r->guard_v6) {
        const char *in6[] = {"ip6tables", "-w", "-C", "INPUT", "-j", r->in_chain, NULL};
        st = nethost_exec(in6, NULL, NULL, err);
        if (st < 0)
            return st;
        if (st != 0)
            return err_set(err, ENOENT, "firewall: the IPv6 jump from INPUT to %s is missing",
                           r->in_chain);
    }
    return 0;
}

bool
nethost_chain_exists(const char *table, const char *chain)
{
    const char *argv[] = {"iptables", "-w", "-t", table, "-S", chain, NULL};
    return nethost_exec(argv, NULL, NULL, NULL) == 0;
}

bool
nethost_forward_present(const struct nethost_rules *r)
{
    const char *argv[] = {"iptables", "-w", "-C", "FORWARD", "-j", r->fwd_chain, NULL};
    return nethost_exec(argv, NULL, NULL, NULL) == 0;
}

/* ---- links ------------------------------------------------------------------ */

void
nethost_link_state(const char *name, bool *exists, bool *up, bool *is_bridge)
{
    char path[128];
    *exists = *up = false;
    if (is_bridge)
        *is_bridge = false;
    if (!net_name_valid(name))
        return;
    snprintf(path, sizeof(path), "/sys/class/net/%s/flags", name);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    unsigned long flags = 0;
    if (fscanf(f, "%lx", &flags) == 1) {
        *exists = true;
        *up = (flags & IFF_UP) != 0;
    }
    fclose(f);
    if (is_bridge) {
        snprintf(path, sizeof(path), "/sys/class/net/%s/bridge", name);
        *is_bridge = access(path, F_OK) == 0;
    }
}

void
nethost_link_master(const char *name, char out[NET_NAME_MAX + 1])
{
    out[0] = '\0';
    char path[128], target[256];
    snprintf(path, sizeof(path), "/sys/class/net/%s/master", name);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0)
        return;
    target[n] = '\0';
    const char *slash = strrchr(target, '/');
    snprintf(out, NET_NAME_MAX + 1, "%s", slash ? slash + 1 : target);
}

/* The IPv4 addresses (with prefixes) of link name. */
static size_t
link_addrs(const char *name, struct net_cidr *out, struct in_addr *addrs, size_t max)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return 0;
    size_t n = 0;
    for (struct ifaddrs *p = ifa; p && n < max; p = p->ifa_next) {
        if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || strcmp(p->ifa_name, name) != 0)
            continue;
        struct in_addr a = ((struct sockaddr_in *)p->ifa_addr)->sin_addr;
        uint32_t m = p->ifa_netmask ? ntohl(((struct sockaddr_in *)p->ifa_netmask)->sin_addr.s_addr)
                                    : 0xffffffffu;
        unsigned prefix = (unsigned)__builtin_popcount(m);
        addrs[n] = a;
        out[n].net.s_addr = htonl(ntohl(a.s_addr) & m);
        out[n].prefix = prefix;
        n++;
    }
    freeifaddrs(ifa);
    return n;
}

int
nethost_bridge_ensure(const char *name, const struct net_cidr *pool, struct in_addr gw,
                      bool *created, struct err *err)
{
    *created = false;
    bool exists, up, is_bridge;
    nethost_link_state(name, &exists, &up, &is_bridge);
    if (exists && !is_bridge)
        return err_set(err, EEXIST, "network %s: a link of that name exists and is not a bridge",
                       name);
    if (!exists) {
        const char *add[] = {"ip", "link", "add", "name", name, "type", "bridge", NULL};
        int ret = nethost_run(add, NULL, err);
        if (ret < 0) {
            /* Someone else (a bridge plugin run) may have made it meanwhile. */
            nethost_link_state(name, &exists, &up, &is_bridge);
            if (!exists || !is_bridge)
                return err_wrap(err, "create bridge %s", name);
        } else {
            *created = true;
        }
    }
    char gws[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &gw, gws, sizeof(gws));
    struct net_cidr nets[16];
    struct in_addr addrs[16];
    size_t n = link_addrs(name, nets, addrs, 16);
    bool have = false;
    for (size_t i = 0; i < n; i++) {
        if (addrs[i].s_addr == gw.s_addr && nets[i].prefix == pool->prefix) {
            have = true;
            continue;
        }
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &addrs[i], a, sizeof(a));
        return err_set(err, EEXIST,
                       "bridge %s has the address %s/%u, not the gateway %s/%u (remove it, or "
                       "choose another --network-name or --network-gateway)",
                       name, a, nets[i].prefix, gws, pool->prefix);
    }
    if (!have) {
        char cidr[NET_CIDR_STRLEN + 4];
        snprintf(cidr, sizeof(cidr), "%s/%u", gws, pool->prefix);
        const char *addr[] = {"ip", "addr", "add", cidr, "brd", "+", "dev", name, NULL};
        if (nethost_run(addr, NULL, err) < 0)
            return err_wrap(err, "bridge %s", name);
    }
    if (!up) {
        const char *set[] = {"ip", "link", "set", name, "up", NULL};
        if (nethost_run(set, NULL, err) < 0)
            return err_wrap(err, "bridge %s", name);
    }
    return 0;
}

int
nethost_link_delete(const char *name, struct err *err)
{
    bool exists, up;
    nethost_link_state(name, &exists, &up, NULL);
    if (!exists)
        return 0;
    const char *del[] = {"ip", "link", "del", name, NULL};
    return nethost_run(del, NULL, err);
}

int
nethost_link_set_master(const char *link, const char *bridge, struct err *err)
{
    const char *master[] = {"ip", "link", "set", link, "master", bridge, NULL};
    const char *hairpin[] = {"ip",           "link",    "set", link, "type",
                             "bridge_slave", "hairpin", "on",  NULL};
    int ret = nethost_run(master, NULL, err);
    if (ret == 0)
        ret = nethost_run(hairpin, NULL, err);
    return ret;
}

bool
nethost_ip_forward(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_forward", "re");
    if (!f)
        return false;
    int v = 0;
    bool on = fscanf(f, "%d", &v) == 1 && v == 1;
    fclose(f);
    return on;
}

int
nethost_ip_forward_enable(struct err *err)
{
    int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return err_errno(err, errno, "enable IPv4 forwarding");
    ssize_t w = write(fd, "1\n", 2);
    int e = errno;
    close(fd);
    if (w != 2)
        return err_errno(err, e, "enable IPv4 forwarding");
    return 0;
}

/* ---- leases ----------------------------------------------------------------- */

int
nethost_leases_list(const char *dir, struct nethost_lease **out, size_t *n, struct err *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return err_errno(err, errno, "list leases in %s", dir);
    }
    int dfd = dirfd(d);
    struct dirent *de;
    size_t cap = 0;
    int ret = 0;
    while ((de = readdir(d)) != NULL) {
        struct in_addr a;
        if (inet_pton(AF_INET, de->d_name, &a) != 1)
            continue;
        int fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        char buf[256];
        ssize_t r = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (r < 0)
            continue;
        buf[r] = '\0';
        buf[strcspn(buf, "\r\n")] = '\0';
        if (*n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct nethost_lease *nl = realloc(*out, ncap * sizeof(**out));
            if (!nl) {
                ret = err_set(err, ENOMEM, "list leases: out of memory");
                break;
            }
            *out = nl;
            cap = ncap;
        }
        snprintf((*out)[*n].ip, sizeof((*out)[*n].ip), "%s", de->d_name);
        snprintf((*out)[*n].id, sizeof((*out)[*n].id), "%s", buf);
        (*n)++;
    }
    closedir(d);
    if (ret < 0) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return ret;
}
