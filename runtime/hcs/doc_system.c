/*
 * Compute system documents (doc_system.h): process-isolated container,
 * utility VM, hosted container. Pure json-c construction; any thread.
 */
#include "runtime/hcs/doc_system.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/hcs/guid.h"
#include "runtime/hcs/winpath.h"

/* ---- small builders ------------------------------------------------------- */

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

static json_object *
new_obj_in(json_object *parent, const char *key)
{
    json_object *o = json_object_new_object();
    json_object_object_add(parent, key, o);
    return o;
}

json_object *
hcs_doc_schema_version(void)
{
    json_object *v = json_object_new_object();
    add_int(v, "Major", HCS_SCHEMA_MAJOR);
    add_int(v, "Minor", HCS_SCHEMA_MINOR);
    return v;
}

char *
hcs_doc_string(json_object *doc)
{
    const char *s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE);
    return s ? strdup(s) : NULL;
}

/* The top of every ComputeSystem: Owner, SchemaVersion, ShouldTerminateOnLastHandleClosed. */
static json_object *
system_new(const char *owner, bool terminate_on_last_handle_closed)
{
    json_object *o = json_object_new_object();
    add_str(o, "Owner", owner ? owner : HCS_OWNER);
    json_object_object_add(o, "SchemaVersion", hcs_doc_schema_version());
    add_bool(o, "ShouldTerminateOnLastHandleClosed", terminate_on_last_handle_closed);
    return o;
}

/* ---- path checks ---------------------------------------------------------- */

static bool
share_name_valid(const char *s, size_t len)
{
    if (len == 0 || len > 64)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

int
hcs_vsmb_guest_path(const char *name, char *out, size_t size, struct err *err)
{
    if (!name || !share_name_valid(name, strlen(name)))
        return err_set(err, EINVAL, "vsmb share name %.80s: want 1-64 of [A-Za-z0-9_-]",
                       name ? name : "(null)");
    int n = snprintf(out, size, "%s%s", HCS_VSMB_GUEST_PREFIX, name);
    if (n < 0 || (size_t)n >= size)
        return err_set(err, EINVAL, "vsmb share %s: its guest path does not fit", name);
    return 0;
}

bool
hcs_is_vsmb_guest_path(const char *s)
{
    size_t plen = strlen(HCS_VSMB_GUEST_PREFIX);
    if (!s || strncasecmp(s, HCS_VSMB_GUEST_PREFIX, plen) != 0)
        return false;
    const char *name = s + plen;
    const char *sub = strchr(name, '\\');
    if (!share_name_valid(name, sub ? (size_t)(sub - name) : strlen(name)))
        return false;
    if (!sub)
        return true;
    /* A subpath is checked as a path below C:\ would be. */
    char probe[HCS_PATH_MAX + 4];
    char norm[HCS_PATH_MAX + 4];
    if (snprintf(probe, sizeof(probe), "C:%s", sub) >= (int)sizeof(probe))
        return false;
    return hcs_path_to_windows(probe, norm, sizeof(norm), NULL) == 0 && strcmp(norm, probe) == 0;
}

bool
hcs_is_volume_guid_path(const char *s)
{
    static const char prefix[] = "\\\\?\\Volume{";
    if (!s || strncmp(s, prefix, sizeof(prefix) - 1) != 0)
        return false;
    const char *g = s + sizeof(prefix) - 1;
    char guid[HCS_GUID_SIZE];
    if (strlen(g) < HCS_GUID_LEN + 1)
        return false;
    memcpy(guid, g, HCS_GUID_LEN);
    guid[HCS_GUID_LEN] = '\0';
    const char *tail = g + HCS_GUID_LEN;
    return hcs_guid_valid(guid) && tail[0] == '}' &&
           (tail[1] == '\0' || (tail[1] == '\\' && tail[2] == '\0'));
}

/* ---- the Container object, shared by both isolations ------------------------ */

enum paths {
    PATHS_HOST,  /* process isolation: host folders */
    PATHS_GUEST, /* hosted: VSMB paths and the VM's own C:\ */
};

static bool
hostname_valid(const char *h)
{
    size_t len = strlen(h);
    if (len == 0 || len > 63)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static bool
source_path_ok(const char *p, enum paths mode)
{
    return p && (mode == PATHS_HOST ? hcs_path_is_windows(p) : hcs_is_vsmb_guest_path(p));
}

static int
container_validate(const struct hcs_container_doc *c, enum paths mode, struct err *err)
{
    const char *where = mode == PATHS_HOST ? "a host path (C:\\...)" : "a vsmb path in the vm";
    if (c->hostname && !hostname_valid(c->hostname))
        return err_set(err, EINVAL, "hostname %.80s: want 1-63 of [A-Za-z0-9._-]", c->hostname);
    if (c->nlayers == 0 || !c->layers)
        return err_set(err, EINVAL, "container storage: no layers (the base layer at least)");
    for (size_t i = 0; i < c->nlayers; i++) {
        const struct hcs_layer *l = &c->layers[i];
        if (!hcs_guid_valid(l->id))
            return err_set(err, EINVAL, "layer %zu: id %.64s is not a guid", i,
                           l->id ? l->id : "(null)");
        /* A mounted CIM is its layer's volume (store/layer_cimfs.h). */
        bool cim_volume = mode == PATHS_HOST && hcs_is_volume_guid_path(l->path);
        if (!cim_volume && !source_path_ok(l->path, mode))
            return err_set(err, EINVAL, "layer %zu: path %.200s is not %s", i,
                           l->path ? l->path : "(null)", where);
        for (size_t j = 0; j < i; j++)
            if (strcasecmp(c->layers[j].id, l->id) == 0)
                return err_set(err, EINVAL, "layers %zu and %zu: the same id %s", j, i, l->id);
    }
    if (mode == PATHS_HOST ? !hcs_is_volume_guid_path(c->scratch_path)
                           : !hcs_path_is_windows(c->scratch_path))
        return err_set(err, EINVAL, "container storage path %.200s: want %s",
                       c->scratch_path ? c->scratch_path : "(null)",
                       mode == PATHS_HOST ? "a volume guid path, \\\\?\\Volume{GUID}\\"
                                          : "a path in the vm (C:\\...)");
    for (size_t i = 0; i < c->nmounts; i++) {
        const struct hcs_mapped_dir *m = &c->mounts[i];
        if (!source_path_ok(m->host_path, mode))
            return err_set(err, EINVAL, "mapped directory %zu: source %.200s is not %s", i,
                           m->host_path ? m->host_path : "(null)", where);
        if (!hcs_path_is_windows(m->container_path) || strlen(m->container_path) <= 3)
            return err_set(err, EINVAL,
                           "mapped directory %zu: target %.200s is not a path below a drive "
                           "(C:\\...)",
                           i, m->container_path ? m->container_path : "(null)");
        for (size_t j = 0; j < i; j++)
            if (strcasecmp(c->mounts[j].container_path, m->container_path) == 0)
                return err_set(err, EINVAL, "mapped directories %zu and %zu: the same target %s", j,
                               i, m->container_path);
    }
    if (c->network_namespace && !hcs_guid_valid(c->network_namespace))
        return err_set(err, EINVAL, "network namespace %.64s is not a guid", c->network_namespace);
    const struct hcs_processor *p = &c->processor;
    if ((p->count != 0) + (p->maximum != 0) + (p->weight != 0) > 1)
        return err_set(err, EINVAL,
                       "processor: count %u, maximum %u and weight %u are mutually exclusive",
                       p->count, p->maximum, p->weight);
    if (p->maximum > 10000 || p->weight > 10000)
        return err_set(err, EINVAL, "processor: maximum %u or weight %u over 10000", p->maximum,
                       p->weight);
    if (c->memory_mb > INT32_MAX)
        return err_set(err, EINVAL, "memory %llu MB: too large", (unsigned long long)c->memory_mb);
    return 0;
}

/*
 * hcsshim adds this to every Windows container: servercore waits
 * WaitToKillServiceTimeout (5 s by default) before it kills services on
 * CtrlShutdown, which cuts a graceful stop short; the maximum lets the
 * caller's own stop timeout decide.
 */
static json_object *
container_registry_changes(void)
{
    json_object *rc = json_object_new_object();
    json_object *add = json_object_new_array();
    json_object *v = json_object_new_object();
    json_object *key = new_obj_in(v, "Key");
    add_str(key, "Hive", "System");
    add_str(key, "Name", "ControlSet001\\Control");
    add_str(v, "Name", "WaitToKillServiceTimeout");
    add_str(v, "StringValue", "2147483647");
    add_str(v, "Type", "String");
    json_object_array_add(add, v);
    json_object_object_add(rc, "AddValues", add);
    return rc;
}

static json_object *
container_build(const struct hcs_container_doc *c, enum paths mode)
{
    json_object *ctr = json_object_new_object();
    if (c->hostname)
        add_str(new_obj_in(ctr, "GuestOs"), "HostName", c->hostname);

    json_object *storage = new_obj_in(ctr, "Storage");
    json_object *layers = json_object_new_array();
    for (size_t i = 0; i < c->nlayers; i++) {
        json_object *l = json_object_new_object();
        add_str(l, "Id", c->layers[i].id);
        add_str(l, "Path", c->layers[i].path);
        json_object_array_add(layers, l);
    }
    json_object_object_add(storage, "Layers", layers);
    if (mode == PATHS_HOST && c->scratch_path[strlen(c->scratch_path) - 1] != '\\') {
        char path[64];
        snprintf(path, sizeof(path), "%s\\", c->scratch_path);
        add_str(storage, "Path", path);
    } else {
        add_str(storage, "Path", c->scratch_path);
    }

    if (c->nmounts) {
        json_object *mds = json_object_new_array();
        for (size_t i = 0; i < c->nmounts; i++) {
            json_object *m = json_object_new_object();
            add_str(m, "HostPath", c->mounts[i].host_path);
            add_str(m, "ContainerPath", c->mounts[i].container_path);
            add_bool(m, "ReadOnly", c->mounts[i].readonly);
            json_object_array_add(mds, m);
        }
        json_object_object_add(ctr, "MappedDirectories", mds);
    }
    if (c->network_namespace)
        add_str(new_obj_in(ctr, "Networking"), "Namespace", c->network_namespace);
    const struct hcs_processor *p = &c->processor;
    if (p->count || p->maximum || p->weight) {
        json_object *po = new_obj_in(ctr, "Processor");
        if (p->count)
            add_int(po, "Count", p->count);
        if (p->maximum)
            add_int(po, "Maximum", p->maximum);
        if (p->weight)
            add_int(po, "Weight", p->weight);
    }
    if (c->memory_mb)
        add_int(new_obj_in(ctr, "Memory"), "SizeInMB", (int64_t)c->memory_mb);
    json_object_object_add(ctr, "RegistryChanges", container_registry_changes());
    return ctr;
}

json_object *
hcs_doc_container(const struct hcs_container_doc *c, struct err *err)
{
    if (container_validate(c, PATHS_HOST, err) < 0) {
        err_wrap(err, "process-isolated container document");
        return NULL;
    }
    json_object *doc = system_new(c->owner, c->terminate_on_last_handle_closed);
    json_object_object_add(doc, "Container", container_build(c, PATHS_HOST));
    return doc;
}

static bool
system_id_valid(const char *id)
{
    size_t len = id ? strlen(id) : 0;
    if (len == 0 || len > 256)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == '"' || id[i] == '\\')
            return false;
    return true;
}

json_object *
hcs_doc_hosted_container(const struct hcs_container_doc *c, const char *uvm_id, struct err *err)
{
    if (!system_id_valid(uvm_id)) {
        err_set(err, EINVAL, "hosted container document: utility vm id %.80s is not valid",
                uvm_id ? uvm_id : "(null)");
        return NULL;
    }
    if (container_validate(c, PATHS_GUEST, err) < 0) {
        err_wrap(err, "hosted container document");
        return NULL;
    }
    json_object *doc = system_new(c->owner, c->terminate_on_last_handle_closed);
    add_str(doc, "HostingSystemId", uvm_id);
    json_object *hosted = new_obj_in(doc, "HostedSystem");
    json_object_object_add(hosted, "SchemaVersion", hcs_doc_schema_version());
    json_object_object_add(hosted, "Container", container_build(c, PATHS_GUEST));
    return doc;
}

/* ---- the utility VM ---------------------------------------------------------- */

static bool
ends_with_ci(const char *s, const char *suffix)
{
    size_t ls = strlen(s);
    size_t lx = strlen(suffix);
    return ls >= lx && strcasecmp(s + ls - lx, suffix) == 0;
}

json_object *
hcs_doc_vsmb_readonly_options(void)
{
    json_object *o = json_object_new_object();
    add_bool(o, "ReadOnly", true);
    add_bool(o, "ShareRead", true);
    add_bool(o, "CacheIo", true);
    add_bool(o, "PseudoOplocks", true);
    add_bool(o, "TakeBackupPrivilege", true);
    return o;
}

json_object *
hcs_doc_uvm(const struct hcs_uvm_doc *u, struct err *err)
{
    if (u->memory_mb < 2 || u->memory_mb % 2 || u->memory_mb > HCS_UVM_MAX_MEMORY_MB) {
        err_set(err, EINVAL, "utility vm document: memory %u MB is not an even size up to %u",
                u->memory_mb, HCS_UVM_MAX_MEMORY_MB);
        return NULL;
    }
    if (u->processors == 0 || u->processors > HCS_UVM_MAX_CPUS) {
        err_set(err, EINVAL, "utility vm document: %u processors, want 1..%u", u->processors,
                HCS_UVM_MAX_CPUS);
        return NULL;
    }
    if (!u->os_files_path || !hcs_path_is_windows(u->os_files_path)) {
        err_set(err, EINVAL, "utility vm document: os files %.200s are not a host path (C:\\...)",
                u->os_files_path ? u->os_files_path : "(null)");
        return NULL;
    }
    if (!u->scratch_vhd || !hcs_path_is_windows(u->scratch_vhd) ||
        !ends_with_ci(u->scratch_vhd, ".vhdx")) {
        err_set(err, EINVAL, "utility vm document: scratch %.200s is not a host .vhdx path",
                u->scratch_vhd ? u->scratch_vhd : "(null)");
        return NULL;
    }

    json_object *doc = system_new(u->owner, u->terminate_on_last_handle_closed);
    json_object *vm = new_obj_in(doc, "VirtualMachine");
    add_bool(vm, "StopOnReset", true);

    json_object *boot = new_obj_in(new_obj_in(new_obj_in(vm, "Chipset"), "Uefi"), "BootThis");
    add_str(boot, "DeviceType", "VmbFs");
    add_str(boot, "DevicePath", HCS_UVM_BOOT_PATH);

    json_object *topo = new_obj_in(vm, "ComputeTopology");
    json_object *mem = new_obj_in(topo, "Memory");
    add_int(mem, "SizeInMB", u->memory_mb);
    /* Pagefile-backed and committed in full at start: what admission counts. */
    add_bool(mem, "AllowOvercommit", true);
    add_bool(mem, "EnableHotHint", true);
    add_bool(mem, "EnableDeferredCommit", false);
    add_int(new_obj_in(topo, "Processor"), "Count", u->processors);

    json_object *dev = new_obj_in(vm, "Devices");
    json_object *att =
        new_obj_in(new_obj_in(new_obj_in(dev, "Scsi"), HCS_SCSI_CONTROLLER0), "Attachments");
    json_object *lun0 = new_obj_in(att, "0");
    add_str(lun0, "Type", "VirtualDisk");
    add_str(lun0, "Path", u->scratch_vhd);
    /* SYSTEM and Builtin Administrators may bind hvsockets into the VM. */
    add_str(new_obj_in(new_obj_in(dev, "HvSocket"), "HvSocketConfig"),
            "DefaultBindSecurityDescriptor", "D:P(A;;FA;;;SY)(A;;FA;;;BA)");
    json_object *vsmb = new_obj_in(dev, "VirtualSmb");
    add_int(vsmb, "DirectFileMappingInMB", 1024);
    json_object *shares = json_object_new_array();
    json_object *os = json_object_new_object();
    add_str(os, "Name", HCS_VSMB_OS_SHARE);
    add_str(os, "Path", u->os_files_path);
    json_object_object_add(os, "Options", hcs_doc_vsmb_readonly_options());
    json_object_array_add(shares, os);
    json_object_object_add(vsmb, "Shares", shares);

    /* The guest network service keeps one compartment per namespace. */
    json_object *rc = new_obj_in(vm, "RegistryChanges");
    json_object *add = json_object_new_array();
    json_object *v = json_object_new_object();
    json_object *key = new_obj_in(v, "Key");
    add_str(key, "Hive", "System");
    add_str(key, "Name", "CurrentControlSet\\Services\\gns");
    add_str(v, "Name", "EnableCompartmentNamespace");
    add_int(v, "DWordValue", 1);
    add_str(v, "Type", "DWord");
    json_object_array_add(add, v);
    json_object_object_add(rc, "AddValues", add);

    /* Present: HCS itself connects to the guest's GCS, and the start
     * completes only once that connection is up. */
    new_obj_in(vm, "GuestConnection");
    return doc;
}
