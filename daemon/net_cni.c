/*
 * One plugin run: a uv_process_t, three pipes and a timer. The
 * configuration is written to the child's stdin and the pipe closed;
 * stdout (the result, at most CNI_OUT_MAX) and the tail of stderr are
 * read until EOF; the run is over when all five handles are closed, and
 * only then does the chain look at the exit status and the output. A
 * plugin that outlives its timeout gets SIGKILL. Each run's time (to its
 * exit, to its pipes' end) goes to the debug log. Loop thread only.
 */
#include "daemon/net_cni.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define CNI_OUT_MAX (1 << 20)
#define CNI_ERR_TAIL 4096
#define CNI_READ_CHUNK 16384
#define CNI_PATH_ENV "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct cni_chain;

struct cni_proc {
    struct cni_chain *chain;
    char type[65];
    uv_process_t proc;
    uv_pipe_t in, out, errp;
    uv_timer_t timer;
    uv_write_t wreq;
    char *conf; /* what the child reads */
    char *outbuf;
    size_t outlen, outcap;
    bool out_overflow;
    char errbuf[CNI_ERR_TAIL + 1];
    size_t errlen;
    char out_scratch[CNI_READ_CHUNK], err_scratch[CNI_READ_CHUNK];
    int open_handles;
    int spawn_error; /* uv_spawn's error, or 0 */
    bool exited, timed_out;
    int64_t exit_status;
    int term_signal;
    /* uv_hrtime at the spawn, at the exit, and once its pipes closed (debug log). */
    uint64_t t_spawn, t_exit;
};

struct cni_chain {
    uv_loop_t *loop;
    enum cni_cmd cmd;
    struct json_object *list;
    char *plugin_dir, *id, *netns, *ifname;
    struct json_object *prev;   /* DEL: given to every plugin */
    struct json_object *result; /* ADD: the last plugin's result */
    struct net_port *ports;
    size_t nports;
    char **only;
    unsigned timeout_ms;
    size_t n;    /* plugins in the list */
    size_t next; /* ADD: index of the next plugin; DEL: one past it */
    struct err err;
    bool failed;
    cni_chain_cb cb;
    void *arg;
    uv_timer_t kick; /* starts the chain after cni_chain_run returned */
};

static unsigned chains_running;

unsigned
cni_chains_running(void)
{
    return chains_running;
}

static const char *
cmd_name(enum cni_cmd c)
{
    return c == CNI_ADD ? "ADD" : "DEL";
}

static void chain_step(struct cni_chain *ch);

static void
chain_freed_cb(uv_handle_t *h)
{
    struct cni_chain *ch = h->data;
    json_object_put(ch->list);
    json_object_put(ch->prev);
    free(ch->plugin_dir);
    free(ch->id);
    free(ch->netns);
    free(ch->ifname);
    free(ch->ports);
    for (size_t i = 0; ch->only && ch->only[i]; i++)
        free(ch->only[i]);
    free(ch->only);
    free(ch);
}

static void
chain_finish(struct cni_chain *ch)
{
    chains_running--;
    struct json_object *result = ch->result;
    ch->result = NULL;
    ch->cb(ch->arg, result, ch->failed ? &ch->err : NULL);
    uv_close((uv_handle_t *)&ch->kick, chain_freed_cb);
}

/* ---- one plugin ------------------------------------------------------------- */

static void
proc_done(struct cni_proc *p)
{
    struct cni_chain *ch = p->chain;
    struct err e = {0};
    bool ok = false;
    if (!p->spawn_error)
        log_debug("net: cni %s %s %s: exited at %.1f ms, done at %.1f ms", p->type,
                  cmd_name(ch->cmd), ch->id, (double)(p->t_exit - p->t_spawn) / 1e6,
                  (double)(uv_hrtime() - p->t_spawn) / 1e6);
    if (p->spawn_error == UV_ENOENT || p->spawn_error == UV_EACCES) {
        if (ch->cmd == CNI_DEL) {
            /* Nothing of it to delete if it is not there (any more). */
            log_debug("net: cni plugin %s not found for DEL; skipped", p->type);
            ok = true;
        } else {
            err_set(&e, ERR_UNAVAILABLE, "cni plugin %s: not found in %s", p->type, ch->plugin_dir);
        }
    } else if (p->spawn_error) {
        err_set(&e, EIO, "cni plugin %s: cannot run it: %s", p->type, uv_strerror(p->spawn_error));
    } else if (p->timed_out) {
        err_set(&e, ETIMEDOUT, "cni plugin %s %s: no answer after %u ms", p->type,
                cmd_name(ch->cmd), ch->timeout_ms);
    } else if (p->out_overflow) {
        err_set(&e, EIO, "cni plugin %s %s: result larger than %d bytes", p->type,
                cmd_name(ch->cmd), CNI_OUT_MAX);
    } else if (p->exit_status != 0 || p->term_signal) {
        p->errbuf[p->errlen] = '\0';
        net_plugin_error(p->type, cmd_name(ch->cmd), p->outbuf, p->errbuf, (int)p->exit_status,
                         p->term_signal, &e);
    } else if (ch->cmd == CNI_ADD) {
        struct json_tokener *tok = json_tokener_new();
        struct json_object *r =
            tok && p->outbuf ? json_tokener_parse_ex(tok, p->outbuf, (int)p->outlen) : NULL;
        bool complete = r && json_tokener_get_error(tok) == json_tokener_success;
        json_tokener_free(tok);
        if (!complete || !json_object_is_type(r, json_type_object)) {
            json_object_put(r);
            err_set(&e, EIO, "cni plugin %s ADD: its result is not a JSON object", p->type);
        } else {
            json_object_put(ch->result);
            ch->result = r;
            ok = true;
        }
    } else {
        ok = true;
    }
    free(p->conf);
    free(p->outbuf);
    free(p);

    if (!ok) {
        if (!ch->failed)
            err_copy(&ch->err, &e);
        ch->failed = true;
        if (ch->cmd == CNI_ADD) {
            chain_finish(ch);
            return;
        }
        log_warn("net: %s", e.msg);
    }
    chain_step(ch);
}

static void
proc_handle_closed_cb(uv_handle_t *h)
{
    struct cni_proc *p = h->data;
    --p->open_handles;
    /* The timer goes last: it also ends pipes that a leftover grandchild
     * keeps open after the plugin exited. */
    if (p->open_handles == 1 && !uv_is_closing((uv_handle_t *)&p->timer))
        uv_close((uv_handle_t *)&p->timer, proc_handle_closed_cb);
    else if (p->open_handles == 0)
        proc_done(p);
}

static void
proc_close(struct cni_proc *p, uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, proc_handle_closed_cb);
}

static void
exit_cb(uv_process_t *proc, int64_t status, int term_signal)
{
    struct cni_proc *p = proc->data;
    p->t_exit = uv_hrtime();
    p->exited = true;
    p->exit_status = status;
    p->term_signal = term_signal;
    proc_close(p, (uv_handle_t *)proc);
}

/* Past the timeout the plugin is killed; a second later whatever still
 * holds its pipes open is cut off. */
#define CNI_PIPE_GRACE_MS 1000

static void
timeout_cb(uv_timer_t *t)
{
    struct cni_proc *p = t->data;
    if (!p->exited) {
        p->timed_out = true;
        uv_process_kill(&p->proc, SIGKILL);
        uv_timer_start(&p->timer, timeout_cb, CNI_PIPE_GRACE_MS, 0);
        return;
    }
    p->timed_out = true;
    proc_close(p, (uv_handle_t *)&p->in);
    proc_close(p, (uv_handle_t *)&p->out);
    proc_close(p, (uv_handle_t *)&p->errp);
}

static void
alloc_out_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct cni_proc *p = h->data;
    (void)suggested;
    *buf = uv_buf_init(p->out_scratch, sizeof(p->out_scratch));
}

static void
alloc_err_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct cni_proc *p = h->data;
    (void)suggested;
    *buf = uv_buf_init(p->err_scratch, sizeof(p->err_scratch));
}

static void
read_out_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct cni_proc *p = s->data;
    if (n < 0) {
        proc_close(p, (uv_handle_t *)s);
        return;
    }
    if (n == 0 || p->out_overflow)
        return;
    if (p->outlen + (size_t)n + 1 > CNI_OUT_MAX) {
        p->out_overflow = true;
        return;
    }
    if (p->outlen + (size_t)n + 1 > p->outcap) {
        size_t cap = p->outcap ? p->outcap : 4096;
        while (cap < p->outlen + (size_t)n + 1)
            cap *= 2;
        char *nb = realloc(p->outbuf, cap);
        if (!nb) {
            p->out_overflow = true;
            return;
        }
        p->outbuf = nb;
        p->outcap = cap;
    }
    memcpy(p->outbuf + p->outlen, buf->base, (size_t)n);
    p->outlen += (size_t)n;
    p->outbuf[p->outlen] = '\0';
}

static void
read_err_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct cni_proc *p = s->data;
    if (n < 0) {
        proc_close(p, (uv_handle_t *)s);
        return;
    }
    /* Keep the tail: the last lines say what went wrong. */
    size_t len = (size_t)n;
    const char *src = buf->base;
    if (len >= CNI_ERR_TAIL) {
        src += len - CNI_ERR_TAIL;
        len = CNI_ERR_TAIL;
        p->errlen = 0;
    } else if (p->errlen + len > CNI_ERR_TAIL) {
        size_t drop = p->errlen + len - CNI_ERR_TAIL;
        memmove(p->errbuf, p->errbuf + drop, p->errlen - drop);
        p->errlen -= drop;
    }
    memcpy(p->errbuf + p->errlen, src, len);
    p->errlen += len;
}

static void
write_cb(uv_write_t *req, int status)
{
    struct cni_proc *p = req->data;
    (void)status; /* a plugin that did not read its configuration fails on its own */
    proc_close(p, (uv_handle_t *)&p->in);
}

static bool
chain_runs_type(const struct cni_chain *ch, const char *type)
{
    if (!ch->only)
        return true;
    for (size_t i = 0; ch->only[i]; i++)
        if (strcmp(ch->only[i], type) == 0)
            return true;
    return false;
}

/* Starts plugin i; returns false when it does not run (filtered out). */
static bool
proc_start(struct cni_chain *ch, size_t i)
{
    struct json_object *plugins = NULL;
    json_object_object_get_ex(ch->list, "plugins", &plugins);
    struct json_object *pl = json_object_array_get_idx(plugins, i);
    struct json_object *t = NULL;
    json_object_object_get_ex(pl, "type", &t);
    const char *type = json_object_get_string(t);
    if (!type || !chain_runs_type(ch, type))
        return false;

    struct cni_proc *p = calloc(1, sizeof(*p));
    struct json_object *prev = ch->cmd == CNI_ADD ? ch->result : ch->prev;
    struct json_object *conf = p ? net_plugin_conf(ch->list, i, prev, ch->ports, ch->nports) : NULL;
    if (!conf) {
        free(p);
        if (!ch->failed)
            err_set(&ch->err, ENOMEM, "cni plugin %s: out of memory", type);
        ch->failed = true;
        return false;
    }
    p->chain = ch;
    snprintf(p->type, sizeof(p->type), "%s", type);
    p->conf = strdup(json_object_to_json_string_ext(conf, JSON_C_TO_STRING_PLAIN));
    json_object_put(conf);

    char *path = NULL, *env_cmd = NULL, *env_id = NULL, *env_ns = NULL, *env_if = NULL,
         *env_path = NULL;
    bool oom = !p->conf || asprintf(&path, "%s/%s", ch->plugin_dir, type) < 0 ||
               asprintf(&env_cmd, "CNI_COMMAND=%s", cmd_name(ch->cmd)) < 0 ||
               asprintf(&env_id, "CNI_CONTAINERID=%s", ch->id) < 0 ||
               asprintf(&env_ns, "CNI_NETNS=%s", ch->netns) < 0 ||
               asprintf(&env_if, "CNI_IFNAME=%s", ch->ifname) < 0 ||
               asprintf(&env_path, "CNI_PATH=%s", ch->plugin_dir) < 0;
    char *args[] = {path, NULL};
    char *env[] = {env_cmd, env_id, env_ns, env_if, env_path, CNI_PATH_ENV, NULL};

    uv_pipe_init(ch->loop, &p->in, 0);
    uv_pipe_init(ch->loop, &p->out, 0);
    uv_pipe_init(ch->loop, &p->errp, 0);
    uv_timer_init(ch->loop, &p->timer);
    p->in.data = p->out.data = p->errp.data = p->timer.data = p->proc.data = p;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&p->in},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&p->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&p->errp},
    };
    uv_process_options_t opts = {
        .exit_cb = exit_cb,
        .file = path,
        .args = args,
        .env = env,
        .stdio_count = 3,
        .stdio = stdio,
    };
    p->t_spawn = uv_hrtime();
    int rc = oom ? UV_ENOMEM : uv_spawn(ch->loop, &p->proc, &opts);
    free(path);
    free(env_cmd);
    free(env_id);
    free(env_ns);
    free(env_if);
    free(env_path);
    /* uv_spawn initialises the process handle even when it fails: it is
     * closed like the others then. */
    p->open_handles = oom ? 4 : 5;
    if (rc < 0) {
        p->spawn_error = rc;
        if (!oom)
            proc_close(p, (uv_handle_t *)&p->proc);
        proc_close(p, (uv_handle_t *)&p->in);
        proc_close(p, (uv_handle_t *)&p->out);
        proc_close(p, (uv_handle_t *)&p->errp);
        return true;
    }
    uv_buf_t b = uv_buf_init(p->conf, (unsigned)strlen(p->conf));
    p->wreq.data = p;
    if (uv_write(&p->wreq, (uv_stream_t *)&p->in, &b, 1, write_cb) < 0)
        proc_close(p, (uv_handle_t *)&p->in);
    if (uv_read_start((uv_stream_t *)&p->out, alloc_out_cb, read_out_cb) < 0)
        proc_close(p, (uv_handle_t *)&p->out);
    if (uv_read_start((uv_stream_t *)&p->errp, alloc_err_cb, read_err_cb) < 0)
        proc_close(p, (uv_handle_t *)&p->errp);
    uv_timer_start(&p->timer, timeout_cb, ch->timeout_ms, 0);
    return true;
}

/* ---- the chain -------------------------------------------------------------- */

static void
chain_step(struct cni_chain *ch)
{
    for (;;) {
        if (ch->cmd == CNI_ADD ? ch->next >= ch->n : ch->next == 0) {
            chain_finish(ch);
            return;
        }
        size_t i = ch->cmd == CNI_ADD ? ch->next++ : --ch->next;
        bool failed_before = ch->failed;
        if (proc_start(ch, i))
            return;
        if (ch->failed && !failed_before && ch->cmd == CNI_ADD) {
            chain_finish(ch);
            return;
        }
    }
}

static void
kick_cb(uv_timer_t *t)
{
    chain_step(t->data);
}

static char *
dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int
cni_chain_run(uv_loop_t *loop, const struct cni_chain_req *req, cni_chain_cb cb, void *arg)
{
    struct cni_chain *ch = calloc(1, sizeof(*ch));
    if (!ch)
        return -ENOMEM;
    ch->loop = loop;
    ch->cmd = req->cmd;
    ch->list = json_object_get(req->list);
    if (ch->cmd == CNI_ADD)
        ch->result = req->prev ? json_object_get(req->prev) : NULL;
    else
        ch->prev = req->prev ? json_object_get(req->prev) : NULL;
    ch->plugin_dir = dup_or_empty(req->plugin_dir);
    ch->id = dup_or_empty(req->container_id);
    ch->netns = dup_or_empty(req->netns);
    ch->ifname = dup_or_empty(req->ifname ? req->ifname : NET_IFNAME);
    ch->timeout_ms = req->timeout_ms ? req->timeout_ms : CNI_TIMEOUT_MS_DEFAULT;
    ch->cb = cb;
    ch->arg = arg;
    bool oom = !ch->plugin_dir || !ch->id || !ch->netns || !ch->ifname;
    if (req->nports) {
        ch->ports = calloc(req->nports, sizeof(*ch->ports));
        if (ch->ports)
            memcpy(ch->ports, req->ports, req->nports * sizeof(*ch->ports));
        ch->nports = req->nports;
        oom = oom || !ch->ports;
    }
    if (req->only) {
        size_t k = 0;
        while (req->only[k])
            k++;
        ch->only = calloc(k + 1, sizeof(char *));
        for (size_t i = 0; ch->only && i < k; i++)
            oom = oom || !(ch->only[i] = strdup(req->only[i]));
        oom = oom || !ch->only;
    }
    struct json_object *plugins = NULL;
    json_object_object_get_ex(ch->list, "plugins", &plugins);
    ch->n = plugins ? json_object_array_length(plugins) : 0;
    ch->next = ch->cmd == CNI_ADD ? 0 : ch->n;
    uv_timer_init(loop, &ch->kick);
    ch->kick.data = ch;
    if (oom) {
        /* Freed through the close callback, like every other end. */
        ch->cb = NULL;
        json_object_put(ch->result);
        ch->result = NULL;
        uv_close((uv_handle_t *)&ch->kick, chain_freed_cb);
        return -ENOMEM;
    }
    chains_running++;
    uv_timer_start(&ch->kick, kick_cb, 0, 0);
    return 0;
}
