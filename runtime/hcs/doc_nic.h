/*
 * The modify requests that give a hyperv container's utility VM its
 * network, in the order the driver sends them after the VM starts and
 * before the hosted container is created (hcsshim does the same for a
 * Windows utility VM): the HCN namespace to the guest, then the
 * endpoint's adapter announced to the guest (a pre-add with the
 * endpoint's settings), then the adapter itself
 * (VirtualMachine/Devices/NetworkAdapters/<endpoint id>, EndpointId and
 * MacAddress) with its guest request. The removes undo them at delete.
 * The adapter's id is the endpoint's: one adapter per endpoint, and a
 * remove needs nothing but the attachment.
 *
 * Pure json-c construction with validation (EINVAL naming the value).
 * Any thread. Golden files: tests/unit/golden/hcs/nic_*.json.
 */
#ifndef BERTH_RUNTIME_HCS_DOC_NIC_H
#define BERTH_RUNTIME_HCS_DOC_NIC_H

#include <json-c/json.h>

#include "common/err.h"

/* The container's HCN attachment, as the daemon's network made it. */
struct hcs_nic {
    const char *endpoint_id;  /* a GUID */
    const char *namespace_id; /* a GUID */
    const char *mac;          /* "00-15-5D-12-34-56", as HNS writes it */
    const char *ip;           /* the endpoint's IPv4 address; NULL or "": omitted */
    unsigned prefix;
    const char *gateway; /* NULL or "": omitted */
};

/* GuestRequest NetworkNamespace Add/Remove: the namespace with its endpoint. */
json_object *hcs_req_netns_add(const struct hcs_nic *n, struct err *err);
json_object *hcs_req_netns_remove(const struct hcs_nic *n, struct err *err);

/* GuestRequest Network Add with a PreAdd of the endpoint's settings (guest only). */
json_object *hcs_req_nic_preadd(const struct hcs_nic *n, struct err *err);

/* The adapter on the VM, and its guest request; Remove takes it away. */
json_object *hcs_req_nic_add(const struct hcs_nic *n, struct err *err);
json_object *hcs_req_nic_remove(const struct hcs_nic *n, struct err *err);

#endif
