/*
 * CNI plugins run as child processes on the loop (uv_spawn, with pipes
 * for the configuration on stdin and the result on stdout), never waited
 * for: a chain runs its plugins one after the other, each from the exit
 * of the one before, the way libcni's AddNetworkList and DelNetworkList
 * do (https://www.cni.dev/docs/spec/). Loop thread.
 */
#ifndef BERTH_DAEMON_NET_CNI_H
#define BERTH_DAEMON_NET_CNI_H

#include <json-c/json.h>
#include <stddef.h>
#include <uv.h>

#include "common/err.h"
#include "daemon/net_conf.h"

/* A plugin that has not answered after this long is killed. */
#define CNI_TIMEOUT_MS_DEFAULT 30000

enum cni_cmd { CNI_ADD, CNI_DEL };

struct cni_chain_req {
    enum cni_cmd cmd;
    struct json_object *list; /* the configuration list (referenced for the run) */
    const char *plugin_dir;   /* CNI_PATH: where the plugins are */
    const char *container_id;
    const char *netns; /* the namespace's path; "" for a DEL without one */
    const char *ifname;
    /*
     * DEL: the chain's ADD result, given to every plugin as prevResult (or
     * NULL). ADD: the prevResult of the first plugin run (NULL for a new
     * chain; a result to re-run plugins after the first, with `only`); each
     * next plugin gets the result of the one before.
     */
    struct json_object *prev;
    const struct net_port *ports; /* handed to plugins with the portMappings capability */
    size_t nports;
    const char *const *only; /* NULL-terminated plugin types to run; NULL: all */
    unsigned timeout_ms;     /* per plugin; 0: CNI_TIMEOUT_MS_DEFAULT */
};

/*
 * Called once on the loop when the chain has run. ADD: result is the
 * chain's result, or on error the last plugin's result that succeeded
 * (NULL if none did); the callback owns it. DEL runs every plugin even
 * after an error (deletes are idempotent, and each one releases
 * something) and reports the first error; a plugin that is not there is
 * skipped. err is NULL on success.
 */
typedef void (*cni_chain_cb)(void *arg, struct json_object *result, const struct err *err);

/*
 * Starts a chain. The request is copied; cb always runs later, never
 * inside this call. Returns 0, or -ENOMEM (cb is then not called).
 */
int cni_chain_run(uv_loop_t *loop, const struct cni_chain_req *req, cni_chain_cb cb, void *arg);

/* Chains started and not finished (for shutdown and tests). */
unsigned cni_chains_running(void);

#endif
