/* Flag and environment parsing for berthd; runs once in main. */
#include "daemon/config.h"

#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/os.h"
#include "common/sock.h"
#include "daemon/net_conf.h"

const char config_usage[] =
    "usage: berthd [flags]\n"
    "\n"
    "berth container worker daemon: images, volumes, containers and processes over HTTP+JSON.\n"
    "\n"
    "  --listen HOST:PORT          address to serve on (default 127.0.0.1:7380; port 0 picks a\n"
    "                              free one and logs it)                         BERTH_LISTEN\n"
    "  --root DIR                  store root (default /var/lib/berth as root, else\n"
    "                              $XDG_DATA_HOME/berth or ~/.local/share/berth; on Windows\n"
    "                              %ProgramData%\\berth)                         BERTH_ROOT\n"
    "  --runtime oci|host|hcs      container runtime driver (default oci; hcs on Windows)\n"
    "                                                                             BERTH_RUNTIME\n"
    "  --oci-runtime PATH          OCI runtime binary for --runtime oci (default runc on PATH)\n"
    "                                                                            "
    "BERTH_OCI_RUNTIME\n"
    "  --log-level LEVEL           debug, info, warn or error (default info)     BERTH_LOG_LEVEL\n"
    "  --log-format text|json      log line format (default text)               BERTH_LOG_FORMAT\n"
    "  --max-connections N         concurrent HTTP connections (default 1024)\n"
    "                                                                      BERTH_MAX_CONNECTIONS\n"
    "  --connection-timeout S      idle seconds before a connection is closed (default 60)\n"
    "                                                                   BERTH_CONNECTION_TIMEOUT\n"
    "  --pool-threads N            worker threads for blocking jobs (default 8, at least 2)\n"
    "                                                                        BERTH_POOL_THREADS\n"
    "  --store-max-bytes N[KMGT]   prune least recently used unused images past this size\n"
    "                                                                     BERTH_STORE_MAX_BYTES\n"
    "  --store-device-nodes        create device nodes found in image layers (default: skip)\n"
    "                                                                  BERTH_STORE_DEVICE_NODES\n"
    "  --max-output-bytes N[KMGT]  output a process may write, stdout and stderr together;\n"
    "                              past it the process is killed (default 1G, 0: no cap)\n"
    "                                                                    BERTH_MAX_OUTPUT_BYTES\n"
    "  --network bridge|none       containers on a bridge with CNI (default), or loopback only\n"
    "                                                                             BERTH_NETWORK\n"
    "  --network-name NAME         the bridge and network name (default berth0)\n"
    "                                                                        BERTH_NETWORK_NAME\n"
    "  --network-pool CIDR         containers' IPv4 addresses (default 10.88.0.0/16)\n"
    "                                                                        BERTH_NETWORK_POOL\n"
    "  --network-gateway IP        the bridge's address (default the pool's first)\n"
    "                                                                     BERTH_NETWORK_GATEWAY\n"
    "  --dns IP                    a DNS server for containers; repeatable (default the host's\n"
    "                              non-loopback resolvers)          BERTH_DNS (comma-separated)\n"
    "  --cni-config DIR            use the CNI configuration list in DIR instead of berth's\n"
    "                                                                          BERTH_CNI_CONFIG\n"
    "  --service                   run as a Windows service (what sc.exe create starts;\n"
    "                              Windows only)\n"
    "  --version                   print the version and exit\n"
    "  --help                      print this help and exit\n";

enum {
    OPT_LISTEN = 256,
    OPT_ROOT,
    OPT_RUNTIME,
    OPT_OCI_RUNTIME,
    OPT_LOG_LEVEL,
    OPT_LOG_FORMAT,
    OPT_MAX_CONNECTIONS,
    OPT_CONNECTION_TIMEOUT,
    OPT_POOL_THREADS,
    OPT_STORE_MAX_BYTES,
    OPT_STORE_DEVICE_NODES,
    OPT_MAX_OUTPUT_BYTES,
    OPT_NETWORK,
    OPT_NETWORK_NAME,
    OPT_NETWORK_POOL,
    OPT_NETWORK_GATEWAY,
    OPT_DNS,
    OPT_CNI_CONFIG,
    OPT_SERVICE,
    OPT_VERSION,
    OPT_HELP,
};

struct option_desc {
    int id;
    const char *flag;
    const char *env;
    int has_arg;
};

static const struct option_desc option_descs[] = {
    {OPT_LISTEN, "listen", "BERTH_LISTEN", required_argument},
    {OPT_ROOT, "root", "BERTH_ROOT", required_argument},
    {OPT_RUNTIME, "runtime", "BERTH_RUNTIME", required_argument},
    {OPT_OCI_RUNTIME, "oci-runtime", "BERTH_OCI_RUNTIME", required_argument},
    {OPT_LOG_LEVEL, "log-level", "BERTH_LOG_LEVEL", required_argument},
    {OPT_LOG_FORMAT, "log-format", "BERTH_LOG_FORMAT", required_argument},
    {OPT_MAX_CONNECTIONS, "max-connections", "BERTH_MAX_CONNECTIONS", required_argument},
    {OPT_CONNECTION_TIMEOUT, "connection-timeout", "BERTH_CONNECTION_TIMEOUT", required_argument},
    {OPT_POOL_THREADS, "pool-threads", "BERTH_POOL_THREADS", required_argument},
    {OPT_STORE_MAX_BYTES, "store-max-bytes", "BERTH_STORE_MAX_BYTES", required_argument},
    {OPT_STORE_DEVICE_NODES, "store-device-nodes", "BERTH_STORE_DEVICE_NODES", no_argument},
    {OPT_MAX_OUTPUT_BYTES, "max-output-bytes", "BERTH_MAX_OUTPUT_BYTES", required_argument},
    {OPT_NETWORK, "network", "BERTH_NETWORK", required_argument},
    {OPT_NETWORK_NAME, "network-name", "BERTH_NETWORK_NAME", required_argument},
    {OPT_NETWORK_POOL, "network-pool", "BERTH_NETWORK_POOL", required_argument},
    {OPT_NETWORK_GATEWAY, "network-gateway", "BERTH_NETWORK_GATEWAY", required_argument},
    {OPT_DNS, "dns", "BERTH_DNS", required_argument},
    {OPT_CNI_CONFIG, "cni-config", "BERTH_CNI_CONFIG", required_argument},
    {OPT_SERVICE, "service", NULL, no_argument},
    {OPT_VERSION, "version", NULL, no_argument},
    {OPT_HELP, "help", NULL, no_argument},
};

#define N_OPTIONS (sizeof(option_descs) / sizeof(option_descs[0]))

char *
config_default_root(void)
{
    char *raw = os_default_root();
    char *out = NULL;
    struct err err = {0};
    if (raw && os_path_absolute(raw, &out, &err) < 0)
        out = NULL;
    free(raw);
    return out;
}

int
config_parse_listen(const char *s, char **host, unsigned *port, struct err *err)
{
    const char *colon;
    char *h;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return err_set(err, EINVAL, "--listen %s: expected [IPV6]:PORT", s);
        h = strndup(s + 1, (size_t)(close - s - 1));
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s)
            return err_set(err, EINVAL, "--listen %s: expected HOST:PORT", s);
        h = strndup(s, (size_t)(colon - s));
    }
    if (!h)
        return err_set(err, ENOMEM, "--listen: out of memory");
    const char *p = colon + 1;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*p == '\0' || *end != '\0' || errno || v < 0 || v > 65535) {
        free(h);
        return err_set(err, EINVAL, "--listen %s: port must be a number from 0 to 65535", s);
    }
    free(*host);
    *host = h;
    *port = (unsigned)v;
    return 0;
}

static int
parse_uint(const char *flag, const char *s, unsigned min, unsigned max, unsigned *out,
           struct err *err)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)s[0]))
        return err_set(err, EINVAL, "--%s %s: expected a whole number from %u to %u", flag, s, min,
                       max);
    unsigned long v = strtoul(s, &end, 10);
    if (*end != '\0' || errno || v < min || v > max)
        return err_set(err, EINVAL, "--%s %s: expected a whole number from %u to %u", flag, s, min,
                       max);
    *out = (unsigned)v;
    return 0;
}

int
config_parse_bytes(const char *s, int64_t *out)
{
    if (!isdigit((unsigned char)s[0]))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case '\0':
        break;
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        return -EINVAL;
    }
    if (*end) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end)
            return -EINVAL;
    }
    if (v > ((unsigned long long)INT64_MAX >> shift))
        return -ERANGE;
    *out = (int64_t)(v << shift);
    return 0;
}

/* Which network flags were given, for the checks across flags. */
struct net_flags {
    bool name, pool, gateway;
    bool dns_from_flags; /* a --dns flag replaces BERTH_DNS's list */
};

/* The reason in a message "WHAT VALUE: reason" (the message itself otherwise). */
static const char *
msg_reason(const char *msg, const char *what, const char *value)
{
    size_t w = strlen(what), v = strlen(value);
    if (strncmp(msg, what, w) == 0 && msg[w] == ' ' && strncmp(msg + w + 1, value, v) == 0 &&
        strncmp(msg + w + 1 + v, ": ", 2) == 0)
        return msg + w + v + 3;
    return msg;
}

static int
dns_add(struct config *cfg, const char *flag, const char *value, struct err *err)
{
    if (!net_ip_valid(value))
        return err_set(err, EINVAL, "--%s %s: expected an IPv4 or IPv6 address", flag, value);
    size_t n = 0;
    while (cfg->dns && cfg->dns[n])
        n++;
    if (n >= 16)
        return err_set(err, EINVAL, "--%s %s: at most 16 DNS servers", flag, value);
    char **nv = realloc(cfg->dns, (n + 2) * sizeof(char *));
    if (!nv)
        return err_set(err, ENOMEM, "out of memory");
    cfg->dns = nv;
    if (!(nv[n] = strdup(value)))
        return err_set(err, ENOMEM, "out of memory");
    nv[n + 1] = NULL;
    return 0;
}

static void
dns_clear(struct config *cfg)
{
    for (size_t i = 0; cfg->dns && cfg->dns[i]; i++)
        free(cfg->dns[i]);
    free(cfg->dns);
    cfg->dns = NULL;
}

static int
set_str(char **dst, const char *value)
{
    char *v = strdup(value);
    if (!v)
        return -ENOMEM;
    free(*dst);
    *dst = v;
    return 0;
}

static bool
parse_bool_env(const char *s)
{
    return strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0;
}

/* Applies one option's value; flag is the name used in messages. */
static int
apply(struct config *cfg, struct net_flags *nf, bool from_env, int id, const char *flag,
      const char *value, struct err *err)
{
    switch (id) {
    case OPT_NETWORK:
        if (strcmp(value, "bridge") != 0 && strcmp(value, "none") != 0)
            return err_set(err, EINVAL, "--network %s: expected bridge or none", value);
        cfg->network_disabled = strcmp(value, "none") == 0;
        return 0;
    case OPT_NETWORK_NAME:
        if (!net_name_valid(value))
            return err_set(err, EINVAL,
                           "--network-name %s: expected 1 to 15 of [A-Za-z0-9_.-], starting with "
                           "a letter or digit",
                           value);
        nf->name = true;
        return set_str(&cfg->network_name, value) < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
    case OPT_NETWORK_POOL: {
        struct net_cidr c;
        struct err e = {0};
        if (net_cidr_parse(value, &c, &e) < 0)
            return err_set(err, EINVAL, "--network-pool %s: %s", value,
                           msg_reason(e.msg, "pool", value));
        nf->pool = true;
        return set_str(&cfg->network_pool, value) < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
    }
    case OPT_NETWORK_GATEWAY: {
        struct in_addr a;
        if (inet_pton(AF_INET, value, &a) != 1)
            return err_set(err, EINVAL, "--network-gateway %s: expected an IPv4 address", value);
        nf->gateway = true;
        return set_str(&cfg->network_gateway, value) < 0 ? err_set(err, ENOMEM, "out of memory")
                                                         : 0;
    }
    case OPT_DNS:
        if (from_env) {
            /* BERTH_DNS holds the whole list: "1.1.1.1,9.9.9.9". */
            cleanup_free char *copy = strdup(value);
            if (!copy)
                return err_set(err, ENOMEM, "out of memory");
            char *save = NULL;
            for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
                if (dns_add(cfg, flag, t, err) < 0)
                    return -err->code;
            return 0;
        }
        if (!nf->dns_from_flags) {
            dns_clear(cfg);
            nf->dns_from_flags = true;
        }
        return dns_add(cfg, flag, value, err);
    case OPT_CNI_CONFIG:
        if (value[0] != '/')
            return err_set(err, EINVAL, "--cni-config %s: must be an absolute path", value);
        return set_str(&cfg->cni_config, value) < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
    case OPT_LISTEN:
        return config_parse_listen(value, &cfg->listen_host, &cfg->listen_port, err);
    case OPT_ROOT: {
        char *abs = NULL;
        struct err e = {0};
        if (os_path_absolute(value, &abs, &e) < 0)
            return e.code == ENOMEM
                       ? err_set(err, ENOMEM, "out of memory")
                       : err_set(err, EINVAL, "--root %s: must be an absolute path", value);
        free(cfg->root);
        cfg->root = abs;
        return 0;
    }
    case OPT_RUNTIME:
        if (strcmp(value, "oci") != 0 && strcmp(value, "host") != 0 && strcmp(value, "hcs") != 0)
            return err_set(err, EINVAL, "--runtime %s: expected oci, host or hcs", value);
        free(cfg->runtime);
        cfg->runtime = strdup(value);
        return 0;
    case OPT_OCI_RUNTIME:
        if (!*value)
            return err_set(err, EINVAL, "--oci-runtime: must not be empty");
        free(cfg->oci_runtime);
        cfg->oci_runtime = strdup(value);
        return 0;
    case OPT_LOG_LEVEL:
        if (log_level_parse(value, &cfg->log_level) < 0)
            return err_set(err, EINVAL, "--log-level %s: expected debug, info, warn or error",
                           value);
        return 0;
    case OPT_LOG_FORMAT:
        if (log_format_parse(value, &cfg->log_format) < 0)
            return err_set(err, EINVAL, "--log-format %s: expected text or json", value);
        return 0;
    case OPT_MAX_CONNECTIONS:
        return parse_uint(flag, value, 1, 65536, &cfg->max_connections, err);
    case OPT_CONNECTION_TIMEOUT:
        return parse_uint(flag, value, 1, 86400, &cfg->connection_timeout_s, err);
    case OPT_POOL_THREADS:
        return parse_uint(flag, value, 2, 1024, &cfg->pool_threads, err);
    case OPT_STORE_MAX_BYTES:
        if (config_parse_bytes(value, &cfg->store_max_bytes) < 0)
            return err_set(err, EINVAL, "--store-max-bytes %s: expected a byte count such as 10G",
                           value);
        return 0;
    case OPT_STORE_DEVICE_NODES:
        cfg->store_device_nodes = value ? parse_bool_env(value) : true;
        return 0;
    case OPT_MAX_OUTPUT_BYTES:
        if (config_parse_bytes(value, &cfg->max_output_bytes) < 0)
            return err_set(err, EINVAL,
                           "--max-output-bytes %s: expected a byte count such as 1G (0: no cap)",
                           value);
        return 0;
    }
    return err_set(err, EINVAL, "unknown option");
}

/* The checks that involve more than one network flag. */
static int
check_network(const struct config *cfg, const struct net_flags *nf, struct err *err)
{
    if (cfg->cni_config) {
        if (cfg->network_disabled)
            return err_set(err, EINVAL,
                           "--cni-config %s: networking is off (--network none); give one or "
                           "the other",
                           cfg->cni_config);
        const char *other = nf->name      ? "--network-name"
                            : nf->pool    ? "--network-pool"
                            : nf->gateway ? "--network-gateway"
                                          : NULL;
        if (other)
            return err_set(err, EINVAL,
                           "%s: not with --cni-config %s (its configuration list names the "
                           "network, pool and gateway)",
                           other, cfg->cni_config);
        return 0;
    }
    if (cfg->network_gateway) {
        struct net_cidr pool;
        struct in_addr gw;
        struct err e = {0};
        if (net_cidr_parse(cfg->network_pool, &pool, &e) < 0 ||
            net_gateway_parse(&pool, cfg->network_gateway, &gw, &e) < 0)
            return err_set(err, EINVAL, "--network-gateway %s: %s", cfg->network_gateway,
                           msg_reason(e.msg, "gateway", cfg->network_gateway));
    }
    return 0;
}

int
config_parse(struct config *cfg, int argc, char **argv, struct err *err)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen_host = strdup("127.0.0.1");
    cfg->listen_port = 7380;
    cfg->root = config_default_root();
    cfg->runtime = strdup(os_default_runtime());
    cfg->log_level = LOG_INFO;
    cfg->log_format = LOG_FORMAT_TEXT;
    cfg->max_connections = 1024;
    cfg->connection_timeout_s = 60;
    cfg->pool_threads = 8;
    cfg->store_max_bytes = -1;
    cfg->max_output_bytes = 1LL << 30;
    cfg->network_name = strdup(NET_NAME_DEFAULT);
    cfg->network_pool = strdup(NET_POOL_DEFAULT);
    if (!cfg->listen_host || !cfg->root || !cfg->runtime || !cfg->network_name ||
        !cfg->network_pool)
        return err_set(err, ENOMEM, "out of memory");
    struct net_flags nf = {0};

    /* The environment first, so that flags override it. */
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct option_desc *d = &option_descs[i];
        const char *v = d->env ? getenv(d->env) : NULL;
        if (!v || !*v)
            continue;
        struct err e = {0};
        if (apply(cfg, &nf, true, d->id, d->flag, v, &e) < 0)
            return err_set(err, e.code, "%s: %s", d->env, e.msg);
    }

    struct option longopts[N_OPTIONS + 1];
    for (size_t i = 0; i < N_OPTIONS; i++)
        longopts[i] = (struct option){option_descs[i].flag, option_descs[i].has_arg, NULL,
                                      option_descs[i].id};
    longopts[N_OPTIONS] = (struct option){0};

    optind = 1;
    opterr = 0;
    for (;;) {
        int longindex = -1;
        int c = getopt_long(argc, argv, ":h", longopts, &longindex);
        if (c == -1)
            break;
        if (c == '?')
            return err_set(err, EINVAL, "unknown flag %s (see --help)", argv[optind - 1]);
        if (c == ':')
            return err_set(err, EINVAL, "flag %s needs a value", argv[optind - 1]);
        if (c == 'h' || c == OPT_HELP) {
            fputs(config_usage, stdout);
            return CONFIG_EXIT_OK;
        }
        if (c == OPT_SERVICE) {
            cfg->service = true;
            continue;
        }
        if (c == OPT_VERSION) {
            printf("berthd %s\n", BERTH_VERSION);
            return CONFIG_EXIT_OK;
        }
        const char *flag = longindex >= 0 ? longopts[longindex].name : "?";
        if (apply(cfg, &nf, false, c, flag, optarg, err) < 0)
            return -err->code;
    }
    if (optind < argc)
        return err_set(err, EINVAL, "unexpected argument %s (berthd takes only flags)",
                       argv[optind]);
    if (!cfg->root)
        return err_set(err, ENOMEM, "out of memory");
    return check_network(cfg, &nf, err) < 0 ? -err->code : CONFIG_RUN;
}

void
config_close(struct config *cfg)
{
    free(cfg->listen_host);
    free(cfg->root);
    free(cfg->runtime);
    free(cfg->oci_runtime);
    free(cfg->network_name);
    free(cfg->network_pool);
    free(cfg->network_gateway);
    dns_clear(cfg);
    free(cfg->cni_config);
    memset(cfg, 0, sizeof(*cfg));
}
