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
#include "store/cim_format.h"
#include "runtime/hcs/sizing.h"

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
    "  --pool-nice N               pool threads' nice: berthd's own plus N, 0 to 19 (default 10)\n"
    "                                                                           BERTH_POOL_NICE\n"
    "  --store-max-bytes N[KMGT]   after each new image, prune least recently used unused\n"
    "                              images (never the new one) until all total at most N\n"
    "                                                                     BERTH_STORE_MAX_BYTES\n"
    "  --store-device-nodes        create device nodes found in image layers (default: skip)\n"
    "                                                                  BERTH_STORE_DEVICE_NODES\n"
    "  --max-output-bytes N[KMGT]  output a process may write, stdout and stderr together;\n"
    "                              past it the process is killed (default 1G, 0: no cap)\n"
    "                                                                    BERTH_MAX_OUTPUT_BYTES\n"
    "  --isolation process|hyperv  Windows containers' isolation when a create does not say\n"
    "                              (default process; --runtime hcs only)       BERTH_ISOLATION\n"
    "  --hyperv-cpus N             processors of a hyperv container's utility VM (default 2;\n"
    "                              --runtime hcs only)                        BERTH_HYPERV_CPUS\n"
    "  --hyperv-memory-mb N        memory of a utility VM when the container has no memory\n"
    "                              limit (default 1024; --runtime hcs only)\n"
    "                                                                   BERTH_HYPERV_MEMORY_MB\n"
    "  --layer-format auto|wcifs|cimfs|blockcim  Windows image layers: forked CimFS images,\n"
    "                              block CIMs merged per chain (build 27766+), or WCIFS\n"
    "                              folders; auto: cimfs where the build has it (26100+, 20348\n"
    "                              from revision 2031) and cimfs.dll loads, else wcifs, never\n"
    "                              blockcim (default auto; --runtime hcs only)\n"
    "                                                                       BERTH_LAYER_FORMAT\n"
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
    "  --registry-auth FILE        registry credentials in Docker's config.json format\n"
    "                                                                       BERTH_REGISTRY_AUTH\n"
    "  --registry-ca HOST=FILE     a PEM CA bundle for one registry; repeatable\n"
    "                                                   BERTH_REGISTRY_CA (comma-separated)\n"
    "  --insecure-registry HOST    speak plain HTTP to this registry; repeatable\n"
    "                                             BERTH_INSECURE_REGISTRY (comma-separated)\n"
    "  --registry-mirror URL       a mirror of docker.io, tried before it; repeatable\n"
    "                                               BERTH_REGISTRY_MIRROR (comma-separated)\n"
    "  --pull-parallel N           layers one pull downloads at once (default 3)\n"
    "                                                                       BERTH_PULL_PARALLEL\n"
    "  --service                   run as a Windows service (what sc.exe create starts;\n"
    "                              Windows only)\n"
    "  --docker-listen ADDR        the Docker-compatible API: unix:///PATH, tcp://HOST:PORT or\n"
    "                              none (default unix://" CONFIG_DOCKER_SOCKET_DEFAULT " as root)\n"
    "                                                                       BERTH_DOCKER_LISTEN\n"
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
    OPT_POOL_NICE,
    OPT_STORE_MAX_BYTES,
    OPT_STORE_DEVICE_NODES,
    OPT_MAX_OUTPUT_BYTES,
    OPT_ISOLATION,
    OPT_HYPERV_CPUS,
    OPT_HYPERV_MEMORY_MB,
    OPT_LAYER_FORMAT,
    OPT_NETWORK,
    OPT_NETWORK_NAME,
    OPT_NETWORK_POOL,
    OPT_NETWORK_GATEWAY,
    OPT_DNS,
    OPT_CNI_CONFIG,
    OPT_REGISTRY_AUTH,
    OPT_REGISTRY_CA,
    OPT_INSECURE_REGISTRY,
    OPT_REGISTRY_MIRROR,
    OPT_PULL_PARALLEL,
    OPT_SERVICE,
    OPT_DOCKER_LISTEN,
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
    {OPT_POOL_NICE, "pool-nice", "BERTH_POOL_NICE", required_argument},
    {OPT_STORE_MAX_BYTES, "store-max-bytes", "BERTH_STORE_MAX_BYTES", required_argument},
    {OPT_STORE_DEVICE_NODES, "store-device-nodes", "BERTH_STORE_DEVICE_NODES", no_argument},
    {OPT_MAX_OUTPUT_BYTES, "max-output-bytes", "BERTH_MAX_OUTPUT_BYTES", required_argument},
    {OPT_ISOLATION, "isolation", "BERTH_ISOLATION", required_argument},
    {OPT_HYPERV_CPUS, "hyperv-cpus", "BERTH_HYPERV_CPUS", required_argument},
    {OPT_HYPERV_MEMORY_MB, "hyperv-memory-mb", "BERTH_HYPERV_MEMORY_MB", required_argument},
    {OPT_LAYER_FORMAT, "layer-format", "BERTH_LAYER_FORMAT", required_argument},
    {OPT_NETWORK, "network", "BERTH_NETWORK", required_argument},
    {OPT_NETWORK_NAME, "network-name", "BERTH_NETWORK_NAME", required_argument},
    {OPT_NETWORK_POOL, "network-pool", "BERTH_NETWORK_POOL", required_argument},
    {OPT_NETWORK_GATEWAY, "network-gateway", "BERTH_NETWORK_GATEWAY", required_argument},
    {OPT_DNS, "dns", "BERTH_DNS", required_argument},
    {OPT_CNI_CONFIG, "cni-config", "BERTH_CNI_CONFIG", required_argument},
    {OPT_REGISTRY_AUTH, "registry-auth", "BERTH_REGISTRY_AUTH", required_argument},
    {OPT_REGISTRY_CA, "registry-ca", "BERTH_REGISTRY_CA", required_argument},
    {OPT_INSECURE_REGISTRY, "insecure-registry", "BERTH_INSECURE_REGISTRY", required_argument},
    {OPT_REGISTRY_MIRROR, "registry-mirror", "BERTH_REGISTRY_MIRROR", required_argument},
    {OPT_PULL_PARALLEL, "pull-parallel", "BERTH_PULL_PARALLEL", required_argument},
    {OPT_SERVICE, "service", NULL, no_argument},
    {OPT_DOCKER_LISTEN, "docker-listen", "BERTH_DOCKER_LISTEN", required_argument},
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

int
config_parse_docker_listen(struct config *cfg, const char *s, struct err *err)
{
    if (strcmp(s, "none") == 0) {
        cfg->docker_listen = CONFIG_DOCKER_NONE;
        return 0;
    }
    if (strncmp(s, "unix://", 7) == 0) {
        const char *path = s + 7;
        if (path[0] != '/' || path[1] == '\0')
            return err_set(err, EINVAL, "--docker-listen %s: expected unix:///absolute/path", s);
        /* sun_path holds 108 bytes with its NUL. */
        if (strlen(path) > 107)
            return err_set(err, EINVAL, "--docker-listen %s: the path is over 107 bytes", s);
        char *p = strdup(path);
        if (!p)
            return err_set(err, ENOMEM, "out of memory");
        free(cfg->docker_path);
        cfg->docker_path = p;
        cfg->docker_listen = CONFIG_DOCKER_UNIX;
        return 0;
    }
    if (strncmp(s, "tcp://", 6) == 0) {
        struct err e = {0};
        if (config_parse_listen(s + 6, &cfg->docker_host, &cfg->docker_port, &e) < 0)
            return err_set(err, EINVAL,
                           "--docker-listen %s: expected tcp://HOST:PORT with a port from 0 to "
                           "65535",
                           s);
        cfg->docker_listen = CONFIG_DOCKER_TCP;
        return 0;
    }
    return err_set(err, EINVAL,
                   "--docker-listen %s: expected unix:///PATH, tcp://HOST:PORT or none", s);
}

/* The default Docker socket: root's, else the user's runtime directory's, else none. */
static int
docker_listen_default(struct config *cfg)
{
    if (os_is_superuser()) {
        cfg->docker_path = strdup(CONFIG_DOCKER_SOCKET_DEFAULT);
    } else {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (!xdg || xdg[0] != '/' || strlen(xdg) > 80)
            return 0;
        if (asprintf(&cfg->docker_path, "%s/berth/docker.sock", xdg) < 0)
            cfg->docker_path = NULL;
    }
    if (!cfg->docker_path)
        return -ENOMEM;
    cfg->docker_listen = CONFIG_DOCKER_UNIX;
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

/* Which network flags were given, for the checks across flags, and which
 * lists a flag has started (a flag replaces its variable's list). */
struct net_flags {
    bool name, pool, gateway;
    bool dns_from_flags; /* a --dns flag replaces BERTH_DNS's list */
    /* The hcs runtime's flags given, by name, for the check against --runtime. */
    const char *hcs_flag;
    bool ca_from_flags, insecure_from_flags, mirror_from_flags;
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

/* ---- registry flags --------------------------------------------------------- */

#define REGISTRY_LIST_MAX 32

bool
config_registry_host_valid(const char *s)
{
    const char *port = NULL;
    size_t n = strlen(s);
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close == s + 1)
            return false;
        for (const char *p = s + 1; p < close; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                return false;
        if (close[1] && close[1] != ':')
            return false;
        port = close[1] ? close + 2 : NULL;
    } else {
        const char *colon = strchr(s, ':');
        size_t host = colon ? (size_t)(colon - s) : n;
        if (host == 0 || s[0] == '.' || s[0] == '-' || s[host - 1] == '.' || s[host - 1] == '-')
            return false;
        for (size_t i = 0; i < host; i++)
            if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-')
                return false;
        port = colon ? colon + 1 : NULL;
    }
    if (port) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(port, &end, 10);
        if (!isdigit((unsigned char)*port) || *end || errno || v == 0 || v > 65535)
            return false;
    }
    return true;
}

static int
list_add(char ***v, size_t *n, const char *value, const char *flag, struct err *err)
{
    if (*n >= REGISTRY_LIST_MAX)
        return err_set(err, EINVAL, "--%s %s: at most %d of them", flag, value, REGISTRY_LIST_MAX);
    char **nv = realloc(*v, (*n + 2) * sizeof(char *));
    if (!nv)
        return err_set(err, ENOMEM, "out of memory");
    *v = nv;
    if (!(nv[*n] = strdup(value)))
        return err_set(err, ENOMEM, "out of memory");
    nv[++*n] = NULL;
    return 0;
}

static void
list_clear(char ***v, size_t *n)
{
    for (size_t i = 0; *v && (*v)[i]; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

/* A file berthd reads at start: an absolute path it can read now. */
static int
check_readable(const char *flag, const char *value, const char *path, struct err *err)
{
    if (path[0] != '/')
        return err_set(err, EINVAL, "--%s %s: %s must be an absolute path", flag, value, path);
    if (access(path, R_OK) < 0)
        return err_set(err, EINVAL, "--%s %s: %s cannot be read: %s", flag, value, path,
                       strerror(errno));
    return 0;
}

static int
registry_ca_add(struct config *cfg, const char *flag, const char *value, struct err *err)
{
    const char *eq = strchr(value, '=');
    cleanup_free char *host = eq ? strndup(value, (size_t)(eq - value)) : NULL;
    if (!eq || !host || !config_registry_host_valid(host) || !eq[1])
        return err_set(err, EINVAL, "--%s %s: expected HOST[:PORT]=FILE", flag, value);
    if (check_readable(flag, value, eq + 1, err) < 0)
        return -err->code;
    size_t n = cfg->n_registry_cas;
    if (list_add(&cfg->registry_ca_files, &n, eq + 1, flag, err) < 0)
        return -err->code;
    n = cfg->n_registry_cas;
    if (list_add(&cfg->registry_ca_hosts, &n, host, flag, err) < 0)
        return -err->code;
    cfg->n_registry_cas = n;
    return 0;
}

static void
registry_ca_clear(struct config *cfg)
{
    size_t n = cfg->n_registry_cas;
    list_clear(&cfg->registry_ca_hosts, &n);
    n = cfg->n_registry_cas;
    list_clear(&cfg->registry_ca_files, &n);
    cfg->n_registry_cas = 0;
}

static int
registry_mirror_add(struct config *cfg, const char *flag, const char *value, struct err *err)
{
    const char *rest = strncmp(value, "https://", 8) == 0  ? value + 8
                       : strncmp(value, "http://", 7) == 0 ? value + 7
                                                           : NULL;
    size_t host_len = rest ? strcspn(rest, "/") : 0;
    cleanup_free char *host = rest ? strndup(rest, host_len) : NULL;
    if (!rest || !host || !config_registry_host_valid(host))
        return err_set(err, EINVAL, "--%s %s: expected http(s)://HOST[:PORT][/PATH]", flag, value);
    return list_add(&cfg->registry_mirrors, &cfg->n_registry_mirrors, value, flag, err);
}

/* Applies one value of a repeatable registry flag (from the environment:
 * a comma-separated list). */
static int
apply_registry_list(struct config *cfg, struct net_flags *nf, bool from_env, int id,
                    const char *flag, const char *value, struct err *err)
{
    bool *from_flags = id == OPT_REGISTRY_CA         ? &nf->ca_from_flags
                       : id == OPT_INSECURE_REGISTRY ? &nf->insecure_from_flags
                                                     : &nf->mirror_from_flags;
    if (!from_env && !*from_flags) {
        if (id == OPT_REGISTRY_CA)
            registry_ca_clear(cfg);
        else if (id == OPT_INSECURE_REGISTRY)
            list_clear(&cfg->insecure_registries, &cfg->n_insecure_registries);
        else
            list_clear(&cfg->registry_mirrors, &cfg->n_registry_mirrors);
        *from_flags = true;
    }
    cleanup_free char *copy = strdup(value);
    if (!copy)
        return err_set(err, ENOMEM, "out of memory");
    char *save = NULL;
    for (char *t = from_env ? strtok_r(copy, ", ", &save) : copy; t;
         t = from_env ? strtok_r(NULL, ", ", &save) : NULL) {
        int rc = 0;
        if (id == OPT_REGISTRY_CA)
            rc = registry_ca_add(cfg, flag, t, err);
        else if (id == OPT_REGISTRY_MIRROR)
            rc = registry_mirror_add(cfg, flag, t, err);
        else if (!config_registry_host_valid(t))
            rc = err_set(err, EINVAL, "--%s %s: expected HOST[:PORT]", flag, t);
        else
            rc = list_add(&cfg->insecure_registries, &cfg->n_insecure_registries, t, flag, err);
        if (rc < 0)
            return rc;
    }
    return 0;
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
    case OPT_REGISTRY_AUTH:
        if (check_readable(flag, value, value, err) < 0)
            return -err->code;
        return set_str(&cfg->registry_auth, value) < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
    case OPT_REGISTRY_CA:
    case OPT_INSECURE_REGISTRY:
    case OPT_REGISTRY_MIRROR:
        return apply_registry_list(cfg, nf, from_env, id, flag, value, err);
    case OPT_PULL_PARALLEL:
        return parse_uint(flag, value, 1, 32, &cfg->pull_parallel, err);
    case OPT_CNI_CONFIG:
        if (value[0] != '/')
            return err_set(err, EINVAL, "--cni-config %s: must be an absolute path", value);
        return set_str(&cfg->cni_config, value) < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
    case OPT_DOCKER_LISTEN:
        cfg->docker_listen_given = true;
        return config_parse_docker_listen(cfg, value, err);
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
    case OPT_POOL_NICE:
        return parse_uint(flag, value, 0, 19, &cfg->pool_nice, err);
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
    case OPT_ISOLATION:
        if (strcmp(value, "process") != 0 && strcmp(value, "hyperv") != 0)
            return err_set(err, EINVAL, "--isolation %s: expected process or hyperv", value);
        nf->hcs_flag = "isolation";
        return set_str(&cfg->isolation, value) < 0 ? err_set(err, ENOMEM, "out of memory") : 0;
    case OPT_HYPERV_CPUS:
        nf->hcs_flag = "hyperv-cpus";
        return parse_uint(flag, value, 1, HCS_UVM_MAX_CPUS, &cfg->hyperv_cpus, err);
    case OPT_HYPERV_MEMORY_MB:
        nf->hcs_flag = "hyperv-memory-mb";
        return parse_uint(flag, value, HCS_UVM_MIN_MEMORY_MB, HCS_UVM_MAX_MEMORY_MB,
                          &cfg->hyperv_memory_mb, err);
    case OPT_LAYER_FORMAT:
        if (layer_format_parse(value, &cfg->layer_format) < 0)
            return err_set(err, EINVAL,
                           "--layer-format %s: expected auto, wcifs, cimfs or blockcim", value);
        nf->hcs_flag = "layer-format";
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
    cfg->pool_nice = 10;
    cfg->store_max_bytes = -1;
    cfg->max_output_bytes = 1LL << 30;
    cfg->hyperv_cpus = HCS_UVM_DEFAULT_CPUS;
    cfg->hyperv_memory_mb = HCS_UVM_DEFAULT_MEMORY_MB;
    cfg->pull_parallel = 3;
    cfg->network_name = strdup(NET_NAME_DEFAULT);
    cfg->network_pool = strdup(NET_POOL_DEFAULT);
    if (!cfg->listen_host || !cfg->root || !cfg->runtime || !cfg->network_name ||
        !cfg->network_pool || docker_listen_default(cfg) < 0)
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
    /* Parsed and checked everywhere, so a typo fails on Linux too; but
     * meaningless to any runtime but hcs, which a reader should be told. */
    if (nf.hcs_flag && strcmp(cfg->runtime, "hcs") != 0)
        return err_set(err, EINVAL,
                       "--%s: only for --runtime hcs (Windows containers); this daemon runs "
                       "--runtime %s",
                       nf.hcs_flag, cfg->runtime);
    return check_network(cfg, &nf, err) < 0 ? -err->code : CONFIG_RUN;
}

void
config_close(struct config *cfg)
{
    free(cfg->listen_host);
    free(cfg->root);
    free(cfg->runtime);
    free(cfg->oci_runtime);
    free(cfg->isolation);
    free(cfg->network_name);
    free(cfg->network_pool);
    free(cfg->network_gateway);
    dns_clear(cfg);
    free(cfg->cni_config);
    free(cfg->docker_path);
    free(cfg->docker_host);
    free(cfg->registry_auth);
    registry_ca_clear(cfg);
    list_clear(&cfg->insecure_registries, &cfg->n_insecure_registries);
    list_clear(&cfg->registry_mirrors, &cfg->n_registry_mirrors);
    memset(cfg, 0, sizeof(*cfg));
}
