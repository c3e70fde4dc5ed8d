/*
 * A network's properties as HNS answers them, and their match with the
 * flags (hcn_props.h). Pure; any thread.
 */
#include "runtime/hcs/hcn_props.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jsonutil/jsonutil.h"

/* jsonutil's errors name the field; coming from HNS they are EIO, not a bad request. */
static int
as_eio(int r, struct err *err)
{
    if (r >= 0 || r == -ENOMEM)
        return r;
    if (err)
        err->code = EIO;
    return -EIO;
}

/* The first entry of the array o[key] (where is o's path), which must be a non-empty array of
 * objects; its path into path. Borrowed from o. */
static json_object *
first_object(json_object *o, const char *where, const char *key, char path[JSONUTIL_FIELD_MAX],
             struct err *err)
{
    json_object *a = NULL;
    char field[JSONUTIL_FIELD_MAX];
    jsonutil_field_join(field, where, key);
    if (as_eio(jsonutil_get_array(o, where, key, true, &a, err), err) < 0)
        return NULL;
    if (json_object_array_length(a) == 0) {
        err_set(err, EIO, "field \"%s\": empty", field);
        return NULL;
    }
    json_object *e = json_object_array_get_idx(a, 0);
    jsonutil_field_index(path, field, 0);
    if (!json_object_is_type(e, json_type_object)) {
        err_set(err, EIO, "field \"%s\": expected an object, got %s", path,
                jsonutil_type_article(e));
        return NULL;
    }
    return e;
}

/* The required string o[key], copied into out (size bytes) when ok(s) accepts it. */
static int
get_checked(json_object *o, const char *where, const char *key, bool (*ok)(const char *),
            const char *what, char *out, size_t size, struct err *err)
{
    const char *s = NULL;
    int r = as_eio(jsonutil_get_string(o, where, key, true, &s, err), err);
    if (r < 0)
        return r;
    if (strlen(s) >= size || !ok(s)) {
        char field[JSONUTIL_FIELD_MAX];
        jsonutil_field_join(field, where, key);
        /* The value is HNS's: named only when it is short and of the expected characters. */
        return err_set(err, EIO, "field \"%s\": not %s", field, what);
    }
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

static bool
type_ok(const char *s)
{
    if (!s[0])
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

static bool
cidr_ok(const char *s)
{
    uint32_t a;
    unsigned p;
    return hcn_cidr_parse(s, &a, &p) == 0;
}

static bool
ipv4_ok(const char *s)
{
    uint32_t a;
    return hcn_ipv4_parse(s, &a) == 0;
}

/* Type, then Ipams[0].Subnets[0]'s IpAddressPrefix and its Routes[0].NextHop, into p. */
static int
props_read(json_object *o, struct hcn_network_props *p, struct err *err)
{
    char ipam[JSONUTIL_FIELD_MAX], subnet[JSONUTIL_FIELD_MAX], route[JSONUTIL_FIELD_MAX];
    int rc = get_checked(o, "", "Type", type_ok, "a network type", p->type, sizeof(p->type), err);
    if (rc < 0)
        return rc;
    json_object *i = first_object(o, "", "Ipams", ipam, err);
    json_object *s = i ? first_object(i, ipam, "Subnets", subnet, err) : NULL;
    if (!s)
        return -EIO;
    rc = get_checked(s, subnet, "IpAddressPrefix", cidr_ok, "an IPv4 prefix", p->subnet,
                     sizeof(p->subnet), err);
    if (rc < 0)
        return rc;
    json_object *r = first_object(s, subnet, "Routes", route, err);
    if (!r)
        return -EIO;
    return get_checked(r, route, "NextHop", ipv4_ok, "an IPv4 address", p->gateway,
                       sizeof(p->gateway), err);
}

int
hcn_network_props_parse(const char *text, size_t len, struct hcn_network_props *out,
                        struct err *err)
{
    if (!text)
        return err_set(err, EIO, "hcn network properties: HNS answered nothing");
    if (len > HCN_PROPS_MAX)
        return err_set(err, EIO, "hcn network properties: HNS answered %zu bytes, more than %d",
                       len, HCN_PROPS_MAX);
    json_object *o = NULL;
    if (as_eio(jsonutil_parse_object(text, len, false, &o, err), err) < 0)
        return err_wrap(err, "hcn network properties");
    struct hcn_network_props p = {{0}};
    int rc = props_read(o, &p, err);
    json_object_put(o);
    if (rc < 0)
        return err_wrap(err, "hcn network properties");
    *out = p;
    return 0;
}

/* ASCII, whatever the locale. */
static bool
equal_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

/* "an" before a vowel's sound: ICS, Overlay, L2Bridge; "a" before Transparent, Private. */
static const char *
article(const char *type)
{
    return strchr("AEIOUaeiou", type[0]) || (type[0] == 'L' && type[1] == '2') ? "an" : "a";
}

int
hcn_network_props_match(const struct hcn_network_props *p, const struct hcn_network_doc *want,
                        struct err *err)
{
    if (!equal_nocase(p->type, "NAT"))
        return err_set(err, EEXIST,
                       "hcn network %s is %s %s network, not NAT (remove it, or choose another "
                       "--network-name)",
                       want->name, article(p->type), p->type);
    uint32_t have_net, want_net, have_gw, want_gw;
    unsigned have_len, want_len;
    if (hcn_cidr_parse(want->pool, &want_net, &want_len) < 0 ||
        hcn_ipv4_parse(want->gateway, &want_gw) < 0)
        return err_set(err, EINVAL, "hcn network %s: pool %.64s or gateway %.64s is not IPv4",
                       want->name, want->pool, want->gateway);
    if (hcn_cidr_parse(p->subnet, &have_net, &have_len) < 0 ||
        hcn_ipv4_parse(p->gateway, &have_gw) < 0)
        return err_set(err, EIO, "hcn network %s: subnet %s or gateway %s is not IPv4", want->name,
                       p->subnet, p->gateway);
    if (have_net != want_net || have_len != want_len || have_gw != want_gw)
        return err_set(err, EEXIST,
                       "hcn network %s has the subnet %s and gateway %s, not --network-pool %s "
                       "--network-gateway %s (remove it, or choose another --network-name, "
                       "--network-pool or --network-gateway)",
                       want->name, p->subnet, p->gateway, want->pool, want->gateway);
    return 0;
}
