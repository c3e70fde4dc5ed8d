/*
 * Pools, CNI configuration lists, plugin configurations, results and the
 * container's /etc files. Pure computation, any thread, except the two
 * loaders that read a file or a directory (they say so).
 */
#include "daemon/net_conf.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fsutil.h"
#include "common/os.h"
#include "common/sock.h"
#include "common/strbuf.h"

#define CONFLIST_MAX (1 << 20)
#define RESOLV_MAX (64 * 1024)

/* ---- addresses -------------------------------------------------------------- */

static uint32_t
mask_of(unsigned prefix)
{
    return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

int
net_cidr_parse(const char *s, struct net_cidr *out, struct err *err)
{
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || slash == s || (size_t)(slash - s) >= INET_ADDRSTRLEN)
        return err_set(err, EINVAL, "pool %s: expected an IPv4 CIDR such as 10.88.0.0/16",
                       s ? s : "(null)");
    char addr[INET_ADDRSTRLEN];
    memcpy(addr, s, (size_t)(slash - s));
    addr[slash - s] = '\0';
    struct in_addr a;
    if (inet_pton(AF_INET, addr, &a) != 1)
        return err_set(err, EINVAL, "pool %s: expected an IPv4 CIDR such as 10.88.0.0/16", s);
    const char *p = slash + 1;
    char *end;
    if (!isdigit((unsigned char)*p))
        return err_set(err, EINVAL, "pool %s: the prefix length must be a number from 1 to 30", s);
    long len = strtol(p, &end, 10);
    if (*end != '\0' || len < 1 || len > 30)
        return err_set(err, EINVAL, "pool %s: the prefix length must be a number from 1 to 30", s);
    uint32_t host = ntohl(a.s_addr);
    uint32_t m = mask_of((unsigned)len);
    if (host & ~m) {
        struct in_addr net = {.s_addr = htonl(host & m)};
        char fixed[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &net, fixed, sizeof(fixed));
        return err_set(err, EINVAL, "pool %s: has host bits set (the network is %s/%ld)", s, fixed,
                       len);
    }
    out->net = a;
    out->prefix = (unsigned)len;
    return 0;
}

void
net_cidr_format(const struct net_cidr *c, char buf[NET_CIDR_STRLEN])
{
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &c->net, a, sizeof(a));
    snprintf(buf, NET_CIDR_STRLEN, "%s/%u", a, c->prefix);
}

bool
net_cidr_contains(const struct net_cidr *c, struct in_addr a)
{
    uint32_t m = mask_of(c->prefix);
    return (ntohl(a.s_addr) & m) == ntohl(c->net.s_addr);
}

struct in_addr
net_cidr_first(const struct net_cidr *c)
{
    return (struct in_addr){.s_addr = htonl(ntohl(c->net.s_addr) + 1)};
}

int
net_gateway_parse(const struct net_cidr *pool, const char *gw, struct in_addr *out, struct err *err)
{
    char p[NET_CIDR_STRLEN];
    net_cidr_format(pool, p);
    struct in_addr a;
    if (!gw || inet_pton(AF_INET, gw, &a) != 1)
        return err_set(err, EINVAL, "gateway %s: expected an IPv4 address", gw ? gw : "(null)");
    if (!net_cidr_contains(pool, a))
        return err_set(err, EINVAL, "gateway %s: not inside the pool %s", gw, p);
    uint32_t h = ntohl(a.s_addr), net = ntohl(pool->net.s_addr);
    if (h == net || h == (net | ~mask_of(pool->prefix)))
        return err_set(err, EINVAL, "gateway %s: the network or broadcast address of %s", gw, p);
    *out = a;
    return 0;
}

bool
net_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > NET_NAME_MAX || !isalnum((unsigned char)name[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '_' && c != '.' && c != '-')
            return false;
    }
    return true;
}

bool
net_ip_valid(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return s && (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1);
}

bool
net_host_is_loopback(const char *host)
{
    if (!host)
        return false;
    if (strcmp(host, "localhost") == 0)
        return true;
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) == 1)
        return (ntohl(a.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

const char *
net_proto_name(enum net_proto p)
{
    return p == NET_PROTO_UDP ? "udp" : "tcp";
}

/* ---- DNS and /etc files ---------------------------------------------------- */

void
net_dns_close(struct net_dns *d)
{
    for (size_t i = 0; d->servers && d->servers[i]; i++)
        free(d->servers[i]);
    free(d->servers);
    free(d->search);
    free(d->options);
    memset(d, 0, sizeof(*d));
}

static int
strv_push(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 2) * sizeof(char *));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    if (!(nv[*n] = strdup(s)))
        return -ENOMEM;
    nv[++*n] = NULL;
    return 0;
}

/* The rest of a line after its keyword, trimmed; NULL when empty. */
static char *
line_value(const char *p, size_t len)
{
    while (len && isspace((unsigned char)*p))
        p++, len--;
    while (len && isspace((unsigned char)p[len - 1]))
        len--;
    return len ? strndup(p, len) : NULL;
}

int
net_dns_parse(const char *text, struct net_dns *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    size_t n = 0;
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *next = eol ? eol + 1 : NULL;
        const char *p = line;
        while (len && (*p == ' ' || *p == '\t'))
            p++, len--;
        size_t kw = 0;
        while (kw < len && !isspace((unsigned char)p[kw]))
            kw++;
        if (kw == 10 && strncmp(p, "nameserver", 10) == 0) {
            cleanup_free char *v = line_value(p + kw, len - kw);
            /* One address per line; anything after it is not part of it. */
            if (v)
                v[strcspn(v, " \t")] = '\0';
            if (v && net_ip_valid(v) && !net_host_is_loopback(v) &&
                strv_push(&out->servers, &n, v) < 0)
                goto oom;
        } else if ((kw == 6 && strncmp(p, "search", 6) == 0) ||
                   (kw == 6 && strncmp(p, "domain", 6) == 0)) {
            /* The last search or domain line wins, as in glibc. */
            free(out->search);
            out->search = line_value(p + kw, len - kw);
        } else if (kw == 7 && strncmp(p, "options", 7) == 0) {
            free(out->options);
            out->options = line_value(p + kw, len - kw);
        }
        line = next;
    }
    if (!out->servers && !(out->servers = calloc(1, sizeof(char *))))
        goto oom;
    return 0;
oom:
    net_dns_close(out);
    return err_set(err, ENOMEM, "parse resolv.conf: out of memory");
}

int
net_dns_load(const char *path, const char *const *servers, struct net_dns *out, struct err *err)
{
    cleanup_free char *text = NULL;
    size_t len = 0;
    struct err rerr = {0};
    if (fs_read_file(path, RESOLV_MAX, &text, &len, &rerr) < 0 && rerr.code != ENOENT)
        return err_set(err, rerr.code, "read %s: %s", path, rerr.msg);
    int ret = net_dns_parse(text ? text : "", out, err);
    if (ret < 0 || !servers)
        return ret;
    for (size_t i = 0; out->servers[i]; i++)
        free(out->servers[i]);
    out->servers[0] = NULL;
    size_t n = 0;
    for (size_t i = 0; servers[i]; i++) {
        if (strv_push(&out->servers, &n, servers[i]) < 0) {
            net_dns_close(out);
            return err_set(err, ENOMEM, "dns: out of memory");
        }
    }
    return 0;
}

void
net_hostname_of(const char *handle, char out[64])
{
    snprintf(out, 64, "%s", handle);
}

char *
net_hosts_render(const char *hostname, const char *ip)
{
    char *out = NULL;
    if (asprintf(&out,
                 "127.0.0.1\tlocalhost\n"
                 "::1\tlocalhost ip6-localhost ip6-loopback\n"
                 "%s\t%s\n",
                 ip ? ip : "127.0.1.1", hostname) < 0)
        return NULL;
    return out;
}

char *
net_resolv_render(const struct net_dns *dns, bool disabled)
{
    struct strbuf f = {0};
    strbuf_puts(&f, "# written by berth\n");
    if (!disabled)
        for (size_t i = 0; dns->servers && dns->servers[i]; i++)
            strbuf_printf(&f, "nameserver %s\n", dns->servers[i]);
    if (dns->search)
        strbuf_printf(&f, "search %s\n", dns->search);
    if (dns->options)
        strbuf_printf(&f, "options %s\n", dns->options);
    return strbuf_steal(&f, NULL);
}

/* ---- configuration lists ---------------------------------------------------- */

static struct json_object *
jstr(const char *s)
{
    return json_object_new_string(s);
}

struct json_object *
net_conflist_generate(const struct net_gen *g)
{
    struct json_object *list = json_object_new_object();
    json_object_object_add(list, "cniVersion", jstr(NET_CNI_VERSION));
    json_object_object_add(list, "name", jstr(g->name));
    struct json_object *plugins = json_object_new_array();

    struct json_object *bridge = json_object_new_object();
    json_object_object_add(bridge, "type", jstr("bridge"));
    json_object_object_add(bridge, "bridge", jstr(g->name));
    json_object_object_add(bridge, "isGateway", json_object_new_boolean(1));
    /* berth masquerades the whole pool with one rule of its own (net_host.c):
     * the plugin's per-container chains would cost four iptables runs per
     * create and per delete, and could not be restored after a flush. */
    json_object_object_add(bridge, "ipMasq", json_object_new_boolean(0));
    json_object_object_add(bridge, "hairpinMode", json_object_new_boolean(1));
    struct json_object *ipam = json_object_new_object();
    json_object_object_add(ipam, "type", jstr("host-local"));
    struct json_object *range = json_object_new_object();
    json_object_object_add(range, "subnet", jstr(g->pool));
    json_object_object_add(range, "gateway", jstr(g->gateway));
    struct json_object *set = json_object_new_array();
    json_object_array_add(set, range);
    struct json_object *ranges = json_object_new_array();
    json_object_array_add(ranges, set);
    json_object_object_add(ipam, "ranges", ranges);
    struct json_object *route = json_object_new_object();
    json_object_object_add(route, "dst", jstr("0.0.0.0/0"));
    struct json_object *routes = json_object_new_array();
    json_object_array_add(routes, route);
    json_object_object_add(ipam, "routes", routes);
    json_object_object_add(ipam, "dataDir", jstr(g->ipam_dir));
    json_object_object_add(bridge, "ipam", ipam);
    json_object_array_add(plugins, bridge);

    if (g->portmap) {
        struct json_object *pm = json_object_new_object();
        json_object_object_add(pm, "type", jstr("portmap"));
        struct json_object *caps = json_object_new_object();
        json_object_object_add(caps, "portMappings", json_object_new_boolean(1));
        json_object_object_add(pm, "capabilities", caps);
        json_object_object_add(pm, "snat", json_object_new_boolean(1));
        json_object_array_add(plugins, pm);
    }
    /* No firewall plugin: berth accepts the whole pool in FORWARD with one
     * chain of its own (net_host.c), for what the plugin would do per
     * container at two Go start-ups and eight iptables runs each way. */

    json_object_object_add(list, "plugins", plugins);
    return list;
}

static const char *
get_str(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static bool
plugin_type_ok(const char *t)
{
    if (!t || !*t || strlen(t) > 64 || strcmp(t, ".") == 0 || strcmp(t, "..") == 0)
        return false;
    for (const char *p = t; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return false;
    return true;
}

int
net_conflist_check(struct json_object *list, const char *source, struct err *err)
{
    if (!json_object_is_type(list, json_type_object))
        return err_set(err, ERR_INVALID_CONTENT, "%s: not a JSON object", source);
    if (!get_str(list, "cniVersion"))
        return err_set(err, ERR_INVALID_CONTENT, "%s: \"cniVersion\" must be a string", source);
    const char *name = get_str(list, "name");
    if (!name || !*name)
        return err_set(err, ERR_INVALID_CONTENT, "%s: \"name\" must be a non-empty string", source);
    struct json_object *plugins;
    if (!json_object_object_get_ex(list, "plugins", &plugins) ||
        !json_object_is_type(plugins, json_type_array) || json_object_array_length(plugins) == 0)
        return err_set(err, ERR_INVALID_CONTENT, "%s: \"plugins\" must be a non-empty array",
                       source);
    for (size_t i = 0; i < json_object_array_length(plugins); i++) {
        struct json_object *p = json_object_array_get_idx(plugins, i);
        if (!json_object_is_type(p, json_type_object))
            return err_set(err, ERR_INVALID_CONTENT, "%s: plugins[%zu] is not an object", source,
                           i);
        const char *t = get_str(p, "type");
        if (!plugin_type_ok(t))
            return err_set(err, ERR_INVALID_CONTENT,
                           "%s: plugins[%zu].type %s: expected a plugin file name", source, i,
                           t ? t : "(missing)");
    }
    return 0;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool
has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && strcmp(s + n - m, suf) == 0;
}

struct json_object *
net_conflist_load_dir(const char *dir, char **path_out, struct err *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        err_errno(err, errno, "--cni-config %s", dir);
        return NULL;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' ||
            !(has_suffix(de->d_name, ".conflist") || has_suffix(de->d_name, ".conf") ||
              has_suffix(de->d_name, ".json")))
            continue;
        if (strv_push(&names, &n, de->d_name) < 0)
            break;
    }
    closedir(d);
    if (n == 0) {
        free(names);
        err_set(err, ENOENT, "--cni-config %s: no *.conflist, *.conf or *.json file in it", dir);
        return NULL;
    }
    qsort(names, n, sizeof(char *), name_cmp);
    char *path = fs_path_join(dir, names[0]);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (!path) {
        err_set(err, ENOMEM, "--cni-config: out of memory");
        return NULL;
    }
    cleanup_free char *text = NULL;
    size_t len = 0;
    if (fs_read_file(path, CONFLIST_MAX, &text, &len, err) < 0) {
        free(path);
        return NULL;
    }
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL;
    bool complete = tok && json_tokener_get_error(tok) == json_tokener_success &&
                    json_tokener_get_parse_end(tok) == len;
    json_tokener_free(tok);
    if (!o || !complete) {
        json_object_put(o);
        err_set(err, ERR_INVALID_CONTENT, "%s: not valid JSON", path);
        free(path);
        return NULL;
    }
    struct json_object *plugins;
    if (json_object_is_type(o, json_type_object) &&
        !json_object_object_get_ex(o, "plugins", &plugins) && get_str(o, "type")) {
        /* A single plugin's .conf: a list of one. */
        struct json_object *list = json_object_new_object();
        const char *v = get_str(o, "cniVersion");
        const char *name = get_str(o, "name");
        json_object_object_add(list, "cniVersion", jstr(v ? v : NET_CNI_VERSION));
        if (name)
            json_object_object_add(list, "name", jstr(name));
        struct json_object *arr = json_object_new_array();
        json_object_array_add(arr, o);
        json_object_object_add(list, "plugins", arr);
        o = list;
    }
    if (net_conflist_check(o, path, err) < 0) {
        json_object_put(o);
        free(path);
        return NULL;
    }
    if (path_out)
        *path_out = path;
    else
        free(path);
    return o;
}

static struct json_object *
plugins_of(struct json_object *list)
{
    struct json_object *plugins = NULL;
    json_object_object_get_ex(list, "plugins", &plugins);
    return plugins;
}

const char **
net_conflist_types(struct json_object *list)
{
    struct json_object *plugins = plugins_of(list);
    size_t n = plugins ? json_object_array_length(plugins) : 0;
    const char **types = calloc(n + 1, sizeof(char *));
    if (!types)
        return NULL;
    for (size_t i = 0; i < n; i++)
        types[i] = get_str(json_object_array_get_idx(plugins, i), "type");
    return types;
}

static bool
plugin_takes_ports(struct json_object *p)
{
    struct json_object *caps, *pm;
    return json_object_object_get_ex(p, "capabilities", &caps) &&
           json_object_object_get_ex(caps, "portMappings", &pm) && json_object_get_boolean(pm);
}

bool
net_conflist_has_portmap(struct json_object *list)
{
    struct json_object *plugins = plugins_of(list);
    for (size_t i = 0; plugins && i < json_object_array_length(plugins); i++)
        if (plugin_takes_ports(json_object_array_get_idx(plugins, i)))
            return true;
    return false;
}

/* A subnet of host-local's (s) and its gateway (gw, NULL: none named). */
static void
guard_add_subnet(struct net_guard_info *g, const char *s, const char *gw)
{
    struct net_cidr c;
    if (!s || g->nsubnets >= sizeof(g->subnets) / sizeof(g->subnets[0]) ||
        net_cidr_parse(s, &c, NULL) < 0)
        return;
    if (!gw || net_gateway_parse(&c, gw, &g->gateways[g->nsubnets], NULL) < 0)
        g->gateways[g->nsubnets] = net_cidr_first(&c);
    g->subnets[g->nsubnets++] = c;
}

void
net_conflist_guard_info(struct json_object *list, struct net_guard_info *out)
{
    memset(out, 0, sizeof(*out));
    struct json_object *plugins = plugins_of(list);
    for (size_t i = 0; plugins && i < json_object_array_length(plugins); i++) {
        struct json_object *p = json_object_array_get_idx(plugins, i);
        const char *t = get_str(p, "type");
        if (t && strcmp(t, "bridge") == 0 && !out->bridge[0]) {
            const char *b = get_str(p, "bridge");
            snprintf(out->bridge, sizeof(out->bridge), "%s", b && net_name_valid(b) ? b : "cni0");
        }
        struct json_object *ipam, *ranges;
        if (!json_object_object_get_ex(p, "ipam", &ipam))
            continue;
        guard_add_subnet(out, get_str(ipam, "subnet"), get_str(ipam, "gateway"));
        if (!json_object_object_get_ex(ipam, "ranges", &ranges) ||
            !json_object_is_type(ranges, json_type_array))
            continue;
        for (size_t j = 0; j < json_object_array_length(ranges); j++) {
            struct json_object *set = json_object_array_get_idx(ranges, j);
            if (!json_object_is_type(set, json_type_array))
                continue;
            for (size_t k = 0; k < json_object_array_length(set); k++) {
                struct json_object *r = json_object_array_get_idx(set, k);
                guard_add_subnet(out, get_str(r, "subnet"), get_str(r, "gateway"));
            }
        }
    }
}

struct json_object *
net_plugin_conf(struct json_object *list, size_t i, struct json_object *prev,
                const struct net_port *ports, size_t nports)
{
    struct json_object *src = json_object_array_get_idx(plugins_of(list), i);
    struct json_object *conf = NULL;
    if (!src || json_object_deep_copy(src, &conf, NULL) < 0)
        return NULL;
    json_object_object_add(conf, "name", jstr(get_str(list, "name")));
    json_object_object_add(conf, "cniVersion", jstr(get_str(list, "cniVersion")));
    if (prev)
        json_object_object_add(conf, "prevResult", json_object_get(prev));
    if (nports && plugin_takes_ports(src)) {
        struct json_object *rc = json_object_new_object();
        struct json_object *pms = json_object_new_array();
        for (size_t k = 0; k < nports; k++) {
            struct json_object *m = json_object_new_object();
            json_object_object_add(m, "hostPort", json_object_new_int(ports[k].host));
            json_object_object_add(m, "containerPort", json_object_new_int(ports[k].container));
            json_object_object_add(m, "protocol", jstr(net_proto_name(ports[k].proto)));
            json_object_array_add(pms, m);
        }
        json_object_object_add(rc, "portMappings", pms);
        json_object_object_add(conf, "runtimeConfig", rc);
    }
    return conf;
}

/* ---- results and errors ----------------------------------------------------- */

int
net_result_parse(struct json_object *result, const char *bridge, struct net_result *out,
                 struct err *err)
{
    memset(out, 0, sizeof(*out));
    struct json_object *ips = NULL, *ifaces = NULL;
    json_object_object_get_ex(result, "ips", &ips);
    json_object_object_get_ex(result, "interfaces", &ifaces);
    size_t nif = ifaces && json_object_is_type(ifaces, json_type_array)
                     ? json_object_array_length(ifaces)
                     : 0;
    for (size_t i = 0;
         ips && json_object_is_type(ips, json_type_array) && i < json_object_array_length(ips);
         i++) {
        struct json_object *ip = json_object_array_get_idx(ips, i);
        const char *addr = get_str(ip, "address");
        struct json_object *idx;
        struct json_object *iface = NULL;
        if (json_object_object_get_ex(ip, "interface", &idx)) {
            int k = json_object_get_int(idx);
            if (k >= 0 && (size_t)k < nif)
                iface = json_object_array_get_idx(ifaces, (size_t)k);
            const char *sandbox = iface ? get_str(iface, "sandbox") : NULL;
            if (!sandbox || !*sandbox)
                continue;
        }
        const char *slash = addr ? strchr(addr, '/') : NULL;
        if (!slash || (size_t)(slash - addr) >= sizeof(out->ip))
            continue;
        char a[INET_ADDRSTRLEN];
        memcpy(a, addr, (size_t)(slash - addr));
        a[slash - addr] = '\0';
        struct in_addr v4;
        if (inet_pton(AF_INET, a, &v4) != 1)
            continue;
        long prefix = strtol(slash + 1, NULL, 10);
        if (prefix < 0 || prefix > 32)
            continue;
        snprintf(out->ip, sizeof(out->ip), "%s", a);
        out->prefix = (unsigned)prefix;
        const char *gw = get_str(ip, "gateway");
        if (gw && inet_pton(AF_INET, gw, &v4) == 1)
            snprintf(out->gateway, sizeof(out->gateway), "%s", gw);
        if (iface) {
            const char *mac = get_str(iface, "mac");
            const char *name = get_str(iface, "name");
            snprintf(out->mac, sizeof(out->mac), "%s", mac ? mac : "");
            snprintf(out->ifname, sizeof(out->ifname), "%s", name ? name : "");
        }
        break;
    }
    if (!out->ip[0])
        return err_set(err, ERR_INVALID_CONTENT, "cni result has no IPv4 address");
    /* The host end: the last interface outside the sandbox that is not the bridge. */
    for (size_t k = 0; k < nif; k++) {
        struct json_object *iface = json_object_array_get_idx(ifaces, k);
        const char *sandbox = get_str(iface, "sandbox");
        const char *name = get_str(iface, "name");
        if ((sandbox && *sandbox) || !name || (bridge && strcmp(name, bridge) == 0) ||
            !net_name_valid(name))
            continue;
        snprintf(out->host_ifname, sizeof(out->host_ifname), "%s", name);
    }
    return 0;
}

/* The last line of text that is not blank, at most 200 characters. */
static void
last_line(const char *text, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!text)
        return;
    size_t len = strlen(text);
    while (len && isspace((unsigned char)text[len - 1]))
        len--;
    size_t start = len;
    while (start && text[start - 1] != '\n')
        start--;
    size_t n = len - start;
    if (n > 200)
        start = len - 200, n = 200;
    if (n >= size)
        n = size - 1;
    memcpy(buf, text + start, n);
    buf[n] = '\0';
}

void
net_plugin_error(const char *type, const char *cmd, const char *out, const char *errout,
                 int exit_status, int term_signal, struct err *err)
{
    struct json_object *o = out && *out ? json_tokener_parse(out) : NULL;
    const char *msg = o ? get_str(o, "msg") : NULL;
    if (msg && *msg) {
        const char *details = get_str(o, "details");
        struct json_object *code = NULL;
        json_object_object_get_ex(o, "code", &code);
        if (details && *details)
            err_set(err, EIO, "cni plugin %s %s: %s: %s (code %d)", type, cmd, msg, details,
                    code ? json_object_get_int(code) : 0);
        else
            err_set(err, EIO, "cni plugin %s %s: %s (code %d)", type, cmd, msg,
                    code ? json_object_get_int(code) : 0);
        json_object_put(o);
        return;
    }
    json_object_put(o);
    char tail[256];
    last_line(errout, tail, sizeof(tail));
    if (term_signal)
        err_set(err, EIO, "cni plugin %s %s: killed by signal %d%s%s", type, cmd, term_signal,
                tail[0] ? ": " : "", tail);
    else
        err_set(err, EIO, "cni plugin %s %s: exited with status %d%s%s", type, cmd, exit_status,
                tail[0] ? ": " : "", tail);
}
