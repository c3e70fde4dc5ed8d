/*
 * Modify requests, process parameters, signals and queries
 * (doc_request.h). Pure json-c construction; any thread.
 */
#include "runtime/hcs/doc_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "runtime/hcs/cmdline.h"
#include "runtime/hcs/guid.h"
#include "runtime/hcs/winpath.h"

#define VSMB_SHARES "VirtualMachine/Devices/VirtualSmb/Shares"

static void
add_str(json_object *o, const char *key, const char *v)
{
    json_object_object_add(o, key, json_object_new_string(v));
}

static void
add_bool(json_object *o, const char *key, bool v)
{
    json_object_object_add(o, key, json_object_new_boolean(v));
}

static void
add_int(json_object *o, const char *key, int64_t v)
{
    json_object_object_add(o, key, json_object_new_int64(v));
}

/* {"ResourcePath": path, "RequestType": type} with room for Settings. */
static json_object *
modify_new(const char *path, const char *type)
{
    json_object *o = json_object_new_object();
    if (path)
        add_str(o, "ResourcePath", path);
    add_str(o, "RequestType", type);
    return o;
}

json_object *
hcs_guest_request(const char *rtype, const char *type, json_object *settings)
{
    json_object *g = json_object_new_object();
    add_str(g, "ResourceType", rtype);
    add_str(g, "RequestType", type);
    json_object_object_add(g, "Settings", settings);
    return g;
}

/* ---- VSMB ---- */

static int
share_check(const char *name, const char *host_path, struct err *err)
{
    char probe[HCS_PATH_MAX + 128];
    if (hcs_vsmb_guest_path(name, probe, sizeof(probe), err) < 0)
        return -EINVAL;
    if (!host_path || !hcs_path_is_windows(host_path))
        return err_set(err, EINVAL, "vsmb share %s: %.200s is not a host path (C:\\...)", name,
                       host_path ? host_path : "(null)");
    return 0;
}

json_object *
hcs_req_vsmb_add(const char *name, const char *host_path, enum hcs_vsmb_kind kind, struct err *err)
{
    if (share_check(name, host_path, err) < 0)
        return NULL;
    json_object *opts;
    switch (kind) {
    case HCS_VSMB_LAYER:
        opts = hcs_doc_vsmb_readonly_options();
        break;
    case HCS_VSMB_VOLUME_RO:
        opts = json_object_new_object();
        add_bool(opts, "ReadOnly", true);
        add_bool(opts, "ShareRead", true);
        add_bool(opts, "CacheIo", true);
        add_bool(opts, "PseudoOplocks", true);
        break;
    case HCS_VSMB_VOLUME_RW:
        opts = json_object_new_object();
        break;
    default:
        err_set(err, EINVAL, "vsmb share %s: kind %d is not a share kind", name, (int)kind);
        return NULL;
    }
    json_object *o = modify_new(VSMB_SHARES, "Add");
    json_object *s = json_object_new_object();
    add_str(s, "Name", name);
    add_str(s, "Path", host_path);
    json_object_object_add(s, "Options", opts);
    json_object_object_add(o, "Settings", s);
    return o;
}

json_object *
hcs_req_vsmb_remove(const char *name, const char *host_path, struct err *err)
{
    if (share_check(name, host_path, err) < 0)
        return NULL;
    json_object *o = modify_new(VSMB_SHARES, "Remove");
    json_object *s = json_object_new_object();
    add_str(s, "Name", name);
    add_str(s, "Path", host_path);
    json_object_object_add(o, "Settings", s);
    return o;
}

/* ---- SCSI ---- */

static int
scsi_check(unsigned lun, const char *guest_path, struct err *err)
{
    if (lun < 1 || lun > 63)
        return err_set(err, EINVAL, "scsi lun %u: want 1..63 (lun 0 is the vm's scratch)", lun);
    if (!guest_path || !hcs_path_is_windows(guest_path) || strlen(guest_path) <= 3)
        return err_set(err, EINVAL, "scsi lun %u: guest path %.200s is not below a drive", lun,
                       guest_path ? guest_path : "(null)");
    return 0;
}

static json_object *
mapped_virtual_disk(const char *type, unsigned lun, const char *guest_path)
{
    json_object *s = json_object_new_object();
    add_str(s, "ContainerPath", guest_path);
    add_int(s, "Lun", lun);
    return hcs_guest_request("MappedVirtualDisk", type, s);
}

json_object *
hcs_req_scsi_add(unsigned lun, const char *vhd_path, const char *guest_path, struct err *err)
{
    if (scsi_check(lun, guest_path, err) < 0)
        return NULL;
    if (!vhd_path || !hcs_path_is_windows(vhd_path)) {
        err_set(err, EINVAL, "scsi lun %u: disk %.200s is not a host path (C:\\...)", lun,
                vhd_path ? vhd_path : "(null)");
        return NULL;
    }
    char path[128];
    snprintf(path, sizeof(path), "VirtualMachine/Devices/Scsi/%s/Attachments/%u",
             HCS_SCSI_CONTROLLER0, lun);
    json_object *o = modify_new(path, "Add");
    json_object *s = json_object_new_object();
    add_str(s, "Type", "VirtualDisk");
    add_str(s, "Path", vhd_path);
    json_object_object_add(o, "Settings", s);
    json_object_object_add(o, "GuestRequest", mapped_virtual_disk("Add", lun, guest_path));
    return o;
}

json_object *
hcs_req_scsi_remove(unsigned lun, const char *guest_path, struct err *err)
{
    if (scsi_check(lun, guest_path, err) < 0)
        return NULL;
    char path[128];
    snprintf(path, sizeof(path), "VirtualMachine/Devices/Scsi/%s/Attachments/%u",
             HCS_SCSI_CONTROLLER0, lun);
    json_object *o = modify_new(path, "Remove");
    json_object_object_add(o, "GuestRequest", mapped_virtual_disk("Remove", lun, guest_path));
    return o;
}

/* ---- CombinedLayers ---- */

static int
root_check(const char *root_path, struct err *err)
{
    if (!root_path || !hcs_path_is_windows(root_path) || strlen(root_path) <= 3)
        return err_set(err, EINVAL, "combined layers: root %.200s is not below a drive in the vm",
                       root_path ? root_path : "(null)");
    return 0;
}

json_object *
hcs_req_combined_layers_add(const char *root_path, const struct hcs_layer *layers, size_t nlayers,
                            struct err *err)
{
    if (root_check(root_path, err) < 0)
        return NULL;
    if (!layers || nlayers == 0) {
        err_set(err, EINVAL, "combined layers over %s: no layers", root_path);
        return NULL;
    }
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < nlayers; i++) {
        if (!hcs_guid_valid(layers[i].id) || !hcs_is_vsmb_guest_path(layers[i].path)) {
            json_object_put(arr);
            err_set(err, EINVAL,
                    "combined layers over %s: layer %zu (id %.64s, path %.200s) wants a guid and "
                    "a vsmb path",
                    root_path, i, layers[i].id ? layers[i].id : "(null)",
                    layers[i].path ? layers[i].path : "(null)");
            return NULL;
        }
        json_object *l = json_object_new_object();
        add_str(l, "Id", layers[i].id);
        add_str(l, "Path", layers[i].path);
        json_object_array_add(arr, l);
    }
    json_object *s = json_object_new_object();
    add_str(s, "ContainerRootPath", root_path);
    json_object_object_add(s, "Layers", arr);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "GuestRequest", hcs_guest_request("CombinedLayers", "Add", s));
    return o;
}

json_object *
hcs_req_combined_layers_remove(const char *root_path, struct err *err)
{
    if (root_check(root_path, err) < 0)
        return NULL;
    json_object *s = json_object_new_object();
    add_str(s, "ContainerRootPath", root_path);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "GuestRequest", hcs_guest_request("CombinedLayers", "Remove", s));
    return o;
}

/* ---- processes ---- */

static bool
user_valid(const char *u)
{
    size_t len = strlen(u);
    if (len == 0 || len > 256)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)u[i] < 0x20 || u[i] == '"')
            return false;
    return true;
}

/* Sets NAME=value in env (a json object) case-insensitively; an empty value removes it. */
static void
env_set(json_object *env, const char *name, size_t nlen, const char *value)
{
    char key[1024];
    snprintf(key, sizeof(key), "%.*s", (int)nlen, name);
    char found[1024] = "";
    json_object_object_foreach(env, k, v)
    {
        (void)v;
        if (strcasecmp(k, key) == 0) {
            snprintf(found, sizeof(found), "%s", k);
            break;
        }
    }
    if (found[0])
        json_object_object_del(env, found);
    if (*value)
        add_str(env, key, value);
}

static json_object *
environment_build(char *const *list, struct err *err)
{
    json_object *env = json_object_new_object();
    for (size_t i = 0; list && list[i]; i++) {
        const char *e = list[i];
        const char *eq = strchr(e, '=');
        if (!eq || eq == e) {
            json_object_put(env);
            err_set(err, EINVAL, "environment entry %.200s: want NAME=value with a name", e);
            return NULL;
        }
        if ((size_t)(eq - e) >= 1024) {
            json_object_put(env);
            err_set(err, EINVAL, "environment entry %.64s...: name longer than 1023 bytes", e);
            return NULL;
        }
        env_set(env, e, (size_t)(eq - e), eq + 1);
    }
    return env;
}

json_object *
hcs_doc_process(const struct hcs_process_doc *p, struct err *err)
{
    cleanup_free char *cmdline = NULL;
    if (hcs_cmdline_build(p->argv, &cmdline, err) < 0) {
        err_wrap(err, "process parameters");
        return NULL;
    }
    if (p->cwd && !hcs_path_is_windows(p->cwd)) {
        err_set(err, EINVAL,
                "process parameters: working directory %.200s is not a path in the "
                "container (C:\\...)",
                p->cwd);
        return NULL;
    }
    if (p->user && !user_valid(p->user)) {
        err_set(err, EINVAL, "process parameters: user %.80s is not a user name", p->user);
        return NULL;
    }
    if (p->emulate_console && (p->console_height == 0) != (p->console_width == 0)) {
        err_set(err, EINVAL,
                "process parameters: console size %ux%u wants both a height and a "
                "width",
                p->console_height, p->console_width);
        return NULL;
    }
    json_object *env = environment_build(p->env, err);
    if (!env) {
        err_wrap(err, "process parameters");
        return NULL;
    }

    json_object *o = json_object_new_object();
    add_str(o, "CommandLine", cmdline);
    if (p->cwd)
        add_str(o, "WorkingDirectory", p->cwd);
    json_object_object_add(o, "Environment", env);
    add_str(o, "User", p->user ? p->user : HCS_DEFAULT_USER);
    add_bool(o, "CreateStdInPipe", p->stdin_pipe);
    add_bool(o, "CreateStdOutPipe", p->stdout_pipe);
    add_bool(o, "CreateStdErrPipe", p->stderr_pipe);
    add_bool(o, "EmulateConsole", p->emulate_console);
    if (p->emulate_console && p->console_height) {
        json_object *size = json_object_new_array();
        json_object_array_add(size, json_object_new_int(p->console_height));
        json_object_array_add(size, json_object_new_int(p->console_width));
        json_object_object_add(o, "ConsoleSize", size);
    }
    return o;
}

json_object *
hcs_doc_process_close_stdin(void)
{
    json_object *o = json_object_new_object();
    add_str(o, "Operation", "CloseHandle");
    json_object *c = json_object_new_object();
    add_str(c, "Handle", "StdIn");
    json_object_object_add(o, "CloseHandle", c);
    return o;
}

json_object *
hcs_doc_process_console_size(uint16_t height, uint16_t width, struct err *err)
{
    if (height == 0 || width == 0) {
        err_set(err, EINVAL, "console size %ux%u: want a height and a width", height, width);
        return NULL;
    }
    json_object *o = json_object_new_object();
    add_str(o, "Operation", "ConsoleSize");
    json_object *c = json_object_new_object();
    add_int(c, "Height", height);
    add_int(c, "Width", width);
    json_object_object_add(o, "ConsoleSize", c);
    return o;
}

static const char *const hcs_signals[] = {"CtrlC", "CtrlBreak", "CtrlClose", "CtrlLogOff",
                                          "CtrlShutdown"};

int
hcs_signal_from_posix(int sig, const char **name, struct err *err)
{
    switch (sig) {
    case HCS_SIGTERM:
        *name = "CtrlShutdown";
        return 0;
    case HCS_SIGINT:
        *name = "CtrlC";
        return 0;
    case HCS_SIGQUIT:
        *name = "CtrlBreak";
        return 0;
    case HCS_SIGHUP:
        *name = "CtrlClose";
        return 0;
    case HCS_SIGKILL:
        *name = NULL;
        return 0;
    }
    return err_set(err, ENOTSUP,
                   "signal %d: a windows process takes only TERM (CtrlShutdown), INT (CtrlC), "
                   "QUIT (CtrlBreak), HUP (CtrlClose) and KILL (terminate)",
                   sig);
}

json_object *
hcs_doc_signal(const char *name, struct err *err)
{
    for (size_t i = 0; name && i < sizeof(hcs_signals) / sizeof(hcs_signals[0]); i++) {
        if (strcmp(name, hcs_signals[i]) == 0) {
            json_object *o = json_object_new_object();
            add_str(o, "Signal", name);
            return o;
        }
    }
    err_set(err, EINVAL, "signal %.32s: not an hcs signal", name ? name : "(null)");
    return NULL;
}

/* ---- queries ---- */

json_object *
hcs_doc_query(const char *const *types)
{
    json_object *o = json_object_new_object();
    json_object *arr = json_object_new_array();
    for (size_t i = 0; types && types[i]; i++)
        json_object_array_add(arr, json_object_new_string(types[i]));
    json_object_object_add(o, "PropertyTypes", arr);
    return o;
}
