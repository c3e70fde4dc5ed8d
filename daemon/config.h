/*
 * berthd's configuration: command-line flags and the BERTH_* environment
 * variables of the same meaning (a flag wins over the environment).
 * Parsed once in main, before the loop starts; read-only afterwards.
 */
#ifndef BERTH_DAEMON_CONFIG_H
#define BERTH_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/log.h"
#include "store/cim_format.h"

enum config_docker_listen {
    CONFIG_DOCKER_NONE, /* --docker-listen none */
    CONFIG_DOCKER_UNIX, /* unix:///path */
    CONFIG_DOCKER_TCP,  /* tcp://host:port */
};

/* The Docker API's socket when --docker-listen is not given: root's, or
 * $XDG_RUNTIME_DIR/berth/docker.sock for other users (none without it). */
#define CONFIG_DOCKER_SOCKET_DEFAULT "/run/berth/docker.sock"

struct config {
    char *listen_host;    /* "127.0.0.1" */
    unsigned listen_port; /* 7380; 0 picks a free port */
    char *root;           /* store root */
    char *runtime;        /* "oci", "host", "hcs" */
    char *oci_runtime;    /* path or name of the OCI runtime binary; NULL: runc on PATH */
    enum log_level log_level;
    enum log_format log_format;
    unsigned max_connections;
    unsigned connection_timeout_s;
    unsigned pool_threads;    /* libuv pool size */
    unsigned pool_nice;       /* nice value of pool threads (job_queue_set_nice) */
    int64_t store_max_bytes;  /* -1: no limit */
    bool store_device_nodes;  /* create device nodes found in layers */
    int64_t max_output_bytes; /* per process, stdout and stderr together; 0: no cap */

    /* The hcs runtime (runtime/hcs/): refused with any other --runtime. */
    char *isolation;           /* --isolation: "process" or "hyperv"; NULL: process */
    unsigned hyperv_cpus;      /* --hyperv-cpus: a utility VM's processors (2) */
    unsigned hyperv_memory_mb; /* --hyperv-memory-mb: a VM's memory without a limit (1024) */
    /* --layer-format, as asked (LAYER_FORMAT_AUTO by default), and what
     * start-up made of it (daemon/layer_format.h): "wcifs", "cimfs" or "blockcim" on
     * Windows, "overlay" on Linux, where the flag is refused. */
    enum layer_format layer_format;
    const char *layer_format_used; /* a static string; NULL until resolved */

    /* The network (daemon/net.h). */
    bool network_disabled; /* --network none: every container gets only lo */
    char *network_name;    /* the bridge and network name: "berth0" */
    char *network_pool;    /* IPv4 CIDR: "10.88.0.0/16" */
    char *network_gateway; /* NULL: the pool's first address */
    char **dns;            /* NULL-terminated --dns servers; NULL: the host's resolvers */
    char *cni_config;      /* --cni-config DIR, or NULL: berth's own configuration */

    /* Registry pulls (daemon/svc_pull.h). */
    char *registry_auth;      /* --registry-auth FILE: a Docker config.json, or NULL */
    char **registry_ca_hosts; /* --registry-ca HOST=FILE: n_registry_cas hosts and files */
    char **registry_ca_files;
    size_t n_registry_cas;
    char **insecure_registries; /* --insecure-registry HOST: plain HTTP */
    size_t n_insecure_registries;
    char **registry_mirrors; /* --registry-mirror URL: docker.io's, tried in order */
    size_t n_registry_mirrors;
    unsigned pull_parallel; /* layers downloaded at once by one pull */

    bool service; /* --service: run under the Windows service control manager */

    /* The Docker-compatible API (api/docker/): --docker-listen. */
    enum config_docker_listen docker_listen;
    char *docker_path;        /* CONFIG_DOCKER_UNIX: the socket's path */
    char *docker_host;        /* CONFIG_DOCKER_TCP: numeric address */
    unsigned docker_port;     /* CONFIG_DOCKER_TCP; 0 picks a free port */
    bool docker_listen_given; /* by a flag or BERTH_DOCKER_LISTEN, not the default */
};

enum config_action { CONFIG_RUN, CONFIG_EXIT_OK };

/*
 * Fills cfg from argv and the environment. Returns CONFIG_RUN, or
 * CONFIG_EXIT_OK after printing --help or --version to stdout, or a
 * negative errno with a one-line message in err for a bad flag or value.
 * cfg is owned by the caller and released with config_close.
 */
int config_parse(struct config *cfg, int argc, char **argv, struct err *err);
void config_close(struct config *cfg);

/* The default store root: /var/lib/berth for root, else
 * $XDG_DATA_HOME/berth or ~/.local/share/berth; %ProgramData%\berth on
 * Windows, written with '/' separators (common/os.h). Caller frees. */
char *config_default_root(void);

/* Parses "host:port" (IPv4 or [IPv6]:port). */
int config_parse_listen(const char *s, char **host, unsigned *port, struct err *err);

/* Parses --docker-listen: "unix:///abs/path", "tcp://HOST:PORT" or "none". */
int config_parse_docker_listen(struct config *cfg, const char *s, struct err *err);

/* Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024). */
int config_parse_bytes(const char *s, int64_t *out);

/* True for a registry's "host[:port]" ("registry.example", "127.0.0.1:5000",
 * "[::1]:5000"), as --insecure-registry and --registry-ca take it. */
bool config_registry_host_valid(const char *s);

extern const char config_usage[];

#endif
