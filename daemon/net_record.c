/*
 * The network's records (attach/<handle>.json) and the blocking steps of
 * its jobs: prepare (record, namespace), commit (files, record), remove.
 * Rendering runs on the loop; parsing and the steps on pool threads, on
 * owned copies only.
 *
 * The record is written before the namespace exists and before any plugin
 * runs, and removed last, so whatever a crash interrupts is found again
 * at start-up (net_reconcile) and undone with the list and result it
 * names.
 */
#include "daemon/net_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fsutil.h"

static const char *const file_names[3] = {"hosts", "hostname", "resolv.conf"};
static const char *const file_targets[3] = {"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"};

char *
net_rec_render(const struct net_entry *e, const char *state)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "handle", json_object_new_string(e->handle));
    json_object_object_add(o, "state", json_object_new_string(state));
    json_object_object_add(o, "netns", json_object_new_string(e->netns_path));
    json_object_object_add(o, "hostname", json_object_new_string(e->hostname));
    json_object_object_add(o, "disabled", json_object_new_boolean(e->disabled));
    struct json_object *ports = json_object_new_array();
    for (size_t i = 0; i < e->nports; i++) {
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "host", json_object_new_int(e->ports[i].host));
        json_object_object_add(p, "container", json_object_new_int(e->ports[i].container));
        json_object_object_add(p, "protocol",
                               json_object_new_string(net_proto_name(e->ports[i].proto)));
        json_object_array_add(ports, p);
    }
    json_object_object_add(o, "ports", ports);
    if (e->list)
        json_object_object_add(o, "list", json_object_get(e->list));
    if (e->result)
        json_object_object_add(o, "result", json_object_get(e->result));
    const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *out = text ? strdup(text) : NULL;
    json_object_put(o);
    return out;
}

void
net_rec_close(struct net_rec *r)
{
    free(r->netns);
    free(r->ports);
    json_object_put(r->list);
    json_object_put(r->result);
    memset(r, 0, sizeof(*r));
}

static const char *
get_str(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

int
net_rec_parse(const char *text, struct net_rec *out, struct err *err)
{
    memset(out, 0, sizeof(*out));
    struct json_object *o = json_tokener_parse(text);
    if (!o || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return err_set(err, ERR_INVALID_CONTENT, "network record: not a JSON object");
    }
    const char *handle = get_str(o, "handle"), *state = get_str(o, "state");
    const char *netns = get_str(o, "netns");
    const char *hostname = get_str(o, "hostname");
    if (!handle || !rt_handle_valid(handle) || !state || !netns || netns[0] != '/') {
        json_object_put(o);
        return err_set(err, ERR_INVALID_CONTENT, "network record: handle, state or netns missing");
    }
    snprintf(out->handle, sizeof(out->handle), "%s", handle);
    snprintf(out->state, sizeof(out->state), "%s", state);
    snprintf(out->hostname, sizeof(out->hostname), "%s", hostname ? hostname : handle);
    out->netns = strdup(netns);
    struct json_object *v;
    if (json_object_object_get_ex(o, "disabled", &v))
        out->disabled = json_object_get_boolean(v);
    struct json_object *ports;
    if (json_object_object_get_ex(o, "ports", &ports) &&
        json_object_is_type(ports, json_type_array) && json_object_array_length(ports)) {
        size_t n = json_object_array_length(ports);
        if (n > NET_PORTS_MAX)
            n = NET_PORTS_MAX;
        out->ports = calloc(n, sizeof(*out->ports));
        for (size_t i = 0; out->ports && i < n; i++) {
            struct json_object *p = json_object_array_get_idx(ports, i), *h, *c;
            const char *proto = get_str(p, "protocol");
            if (!json_object_object_get_ex(p, "host", &h) ||
                !json_object_object_get_ex(p, "container", &c))
                continue;
            out->ports[out->nports++] = (struct net_port){
                .host = (uint16_t)json_object_get_int(h),
                .container = (uint16_t)json_object_get_int(c),
                .proto = proto && strcmp(proto, "udp") == 0 ? NET_PROTO_UDP : NET_PROTO_TCP,
            };
        }
    }
    if (json_object_object_get_ex(o, "list", &v) && json_object_is_type(v, json_type_object))
        out->list = json_object_get(v);
    if (json_object_object_get_ex(o, "result", &v) && json_object_is_type(v, json_type_object))
        out->result = json_object_get(v);
    json_object_put(o);
    if (!out->netns) {
        net_rec_close(out);
        return err_set(err, ENOMEM, "network record: out of memory");
    }
    return 0;
}

void
net_rec_to_entry(struct net_rec *r, struct net_entry *e)
{
    snprintf(e->hostname, sizeof(e->hostname), "%s", r->hostname);
    free(e->netns_path);
    e->netns_path = r->netns;
    r->netns = NULL;
    e->disabled = r->disabled;
    free(e->ports);
    e->ports = r->ports;
    e->nports = r->nports;
    r->ports = NULL;
    r->nports = 0;
    json_object_put(e->list);
    e->list = r->list;
    r->list = NULL;
    json_object_put(e->result);
    e->result = r->result;
    r->result = NULL;
}

int
net_entry_set_files(struct net_entry *e)
{
    for (size_t i = 0; i < 3; i++) {
        free(e->files[i]);
        e->files[i] = NULL;
        if (asprintf(&e->files[i], "%s/%s", e->files_dir, file_names[i]) < 0) {
            e->files[i] = NULL;
            return -ENOMEM;
        }
        /* Read-only: a container must not grow a file outside its own
         * writable layer (and its disk limit) through them. */
        e->mounts[i] =
            (struct rt_mount){.source = e->files[i], .target = file_targets[i], .readonly = true};
    }
    return 0;
}

/* ---- the blocking steps ----------------------------------------------------- */

void
net_step_free(struct net_step *s)
{
    if (!s)
        return;
    free(s->record_path);
    free(s->record_text);
    free(s->netns_dir);
    free(s->netns_path);
    free(s->attach_dir);
    free(s->files_dir);
    for (size_t i = 0; i < 3; i++) {
        free(s->file_paths[i]);
        free(s->file_texts[i]);
    }
    for (size_t i = 0; s->plugins && s->plugins[i]; i++)
        free(s->plugins[i]);
    free(s->plugins);
    free(s);
}

/*
 * Writes a file in place (created when missing): the runtime bind-mounts
 * it, and a file renamed over it would not be what the container sees.
 */
static int
write_in_place(const char *path, const char *text, struct err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return err_errno(err, errno, "write %s", path);
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = errno;
            close(fd);
            return err_errno(err, e, "write %s", path);
        }
        off += (size_t)w;
    }
    if (close(fd) < 0)
        return err_errno(err, errno, "write %s", path);
    return 0;
}

static int
write_files(struct net_step *s)
{
    if (!s->files_dir)
        return 0;
    int ret = fs_mkdir_p(s->files_dir, 0700, &s->err);
    for (size_t i = 0; ret == 0 && i < 3; i++) {
        if (!s->file_paths[i] || !s->file_texts[i])
            continue;
        ret = write_in_place(s->file_paths[i], s->file_texts[i], &s->err);
    }
    return ret;
}

static void
remove_files(struct net_step *s)
{
    for (size_t i = 0; i < 3; i++)
        if (s->file_paths[i])
            unlink(s->file_paths[i]);
    if (s->files_dir)
        rmdir(s->files_dir);
}

void
net_step_prepare(struct net_step *s)
{
    for (size_t i = 0; s->plugins && s->plugins[i]; i++) {
        if (access(s->plugins[i], X_OK) < 0) {
            const char *slash = strrchr(s->plugins[i], '/');
            s->rc = err_set(&s->err, ERR_UNAVAILABLE, "cni plugin %s: not found in %.*s",
                            slash ? slash + 1 : s->plugins[i],
                            slash ? (int)(slash - s->plugins[i]) : 0, s->plugins[i]);
            return;
        }
    }
    s->rc = fs_mkdir_p(s->netns_dir, 0700, &s->err);
    if (s->rc == 0)
        s->rc = fs_mkdir_p(s->attach_dir, 0700, &s->err);
    if (s->rc == 0)
        s->rc = fs_write_file_volatile(s->record_path, s->record_text, strlen(s->record_text), 0600,
                                       &s->err);
    if (s->rc < 0)
        return;
    /* A namespace file left by a crash before its record was rewritten. */
    struct err ignored = {0};
    nethost_netns_remove(s->netns_path, &ignored);
    s->rc = nethost_netns_create(s->netns_path, &s->err);
    if (s->rc == 0)
        s->rc = write_files(s);
    if (s->rc < 0) {
        remove_files(s);
        nethost_netns_remove(s->netns_path, &ignored);
        unlink(s->record_path);
    }
}

void
net_step_commit(struct net_step *s)
{
    s->rc = write_files(s);
    if (s->rc == 0)
        s->rc = fs_write_file_volatile(s->record_path, s->record_text, strlen(s->record_text), 0600,
                                       &s->err);
}

void
net_step_remove(struct net_step *s)
{
    s->rc = 0;
    if (s->netns_path)
        s->rc = nethost_netns_remove(s->netns_path, &s->err);
    if (s->rc < 0)
        return;
    remove_files(s);
    if (s->record_path && unlink(s->record_path) < 0 && errno != ENOENT)
        s->rc = err_errno(&s->err, errno, "remove %s", s->record_path);
}
