/*
 * What HNS answers about an existing network (HcnQueryNetworkProperties),
 * and whether a network berth found by its name is the one it would have
 * made: --network-name finds it, but berth hands out addresses from
 * --network-pool and routes through --network-gateway, so a network of
 * that name with another subnet, gateway or type (Transparent, ICS...) is
 * refused, as Linux refuses a bridge of that name with another address
 * (daemon/net_host.c), never adopted nor deleted.
 *
 * The answer comes from computenetwork.dll (or its test double): parsed
 * strictly (jsonutil), bounded in size, each field checked for its type
 * and form, EIO naming the one that is missing or malformed. Field names
 * are hcsshim's hcn package's (HostComputeNetwork: Type, Ipams[].Subnets[]
 * .IpAddressPrefix, .Routes[].NextHop), the shape of doc_network.h's
 * network document. Pure; any thread.
 */
#ifndef BERTH_RUNTIME_HCS_HCN_PROPS_H
#define BERTH_RUNTIME_HCS_HCN_PROPS_H

#include <stddef.h>

#include "common/err.h"
#include "runtime/hcs/doc_network.h"

/* The longest answer read: a network's properties are a few KiB. */
#define HCN_PROPS_MAX (256 * 1024)

#define HCN_NET_TYPE_MAX 32

/* The network as HNS describes it: its type and the first IPAM's first subnet. */
struct hcn_network_props {
    char type[HCN_NET_TYPE_MAX]; /* "NAT", "nat", "Transparent"...: letters, digits, _ and - */
    char subnet[19];             /* Ipams[0].Subnets[0].IpAddressPrefix, an IPv4 CIDR */
    char gateway[16];            /* that subnet's Routes[0].NextHop, an IPv4 address */
};

/* Parses HNS's answer (len bytes of text). EIO naming the field when it is not a network's. */
int hcn_network_props_parse(const char *text, size_t len, struct hcn_network_props *out,
                            struct err *err);

/*
 * 0 when p is the network want describes: of type NAT (in any case, as
 * HNS writes it), with want->pool as its subnet and want->gateway as its
 * route's next hop. Else EEXIST naming what the network is and what the
 * flags ask for: "hcn network hcnt has the subnet 10.9.0.0/24 and gateway
 * 10.9.0.1, not --network-pool 10.77.0.0/24 --network-gateway 10.77.0.1
 * (remove it, or choose another ...)", or "hcn network hcnt is a
 * Transparent network, not NAT (...)".
 */
int hcn_network_props_match(const struct hcn_network_props *p, const struct hcn_network_doc *want,
                            struct err *err);

#endif
