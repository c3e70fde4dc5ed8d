/*
 * berthd's configuration: command-line flags and the BERTH_* environment
 * variables of the same meaning (a flag wins over the environment).
 * Parsed once in main, before the loop starts; read-only afterwards.
 */
#ifndef BERTH_DAEMON_CONFIG_H
#define BERTH_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/log.h"

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
    int64_t store_max_bytes;  /* -1: no limit */
    bool store_device_nodes;  /* create device nodes found in layers */
    int64_t max_output_bytes; /* per process, stdout and stderr together; 0: no cap */

    /* The network (daemon/net.h). */
    bool network_disabled; /* --network none: every container gets only lo */
    char *network_name;    /* the bridge and network name: "berth0" */
    char *network_pool;    /* IPv4 CIDR: "10.88.0.0/16" */
    char *network_gateway; /* NULL: the pool's first address */
    char **dns;            /* NULL-terminated --dns servers; NULL: the host's resolvers */
    char *cni_config;      /* --cni-config DIR, or NULL: berth's own configuration */

    bool service; /* --service: run under the Windows service control manager */
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

/* Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024). */
int config_parse_bytes(const char *s, int64_t *out);

extern const char config_usage[];

#endif
