/*
 * The Docker API's networks with the real docker CLIs, on a berthd with a
 * network of the test's own (tests/api/harness_net.h: a bridge and a /24,
 * no traffic leaves this machine): docker run --network none has only a
 * loopback interface, the default and --network bridge an address on
 * berth's bridge, which inspect shows; docker network ls and inspect list
 * the two networks create takes, bridge with the pool and the bridge's
 * name (with an operator's --cni-config, its subnets, gateways and bridge).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness_containers.h"
#include "harness_docker.h"
#include "harness_net.h"

static struct dk_client clis[DK_MAX_CLIENTS];
static size_t nclis;

static void
setup(void)
{
    ctr_require_runtime();
    nclis = dk_clis(clis);
}

/* Starts b's Docker API on n's network. */
static void
start_on(struct berthd *b, const struct hnet *n)
{
    struct berthd_opts o = {0};
    hnet_args(n, &o);
    dk_start(b, false, o.args);
}

/* The interfaces a container of this run has, as "lo,eth0,". */
static const char ifaces[] = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d \" \" | tr \"\\n\" ,";

START_TEST(docker_run_network_none_has_only_loopback_and_bridge_an_address)
{
    struct hnet n;
    hnet_init(&n, 'a');
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        start_on(&b, &n);
        const struct dk_client *cl = &clis[i];
        dk_load_busybox(&b);
        char *lo = dk_ok(&b, cl, 0, "\"$D\" run --rm --network none busybox sh -c '%s'", ifaces);
        ck_assert_msg(strcmp(lo, "lo,") == 0, "docker %s --network none: %s", cl->version, lo);
        free(lo);
        char *none = dk_ok(&b, cl, 0, "\"$D\" run --rm --network none busybox ip -4 -o addr");
        ck_assert_msg(!dk_contains(none, n.net3), "docker %s: %s", cl->version, none);
        free(none);
        /* The default and bridge: an address on the bridge. */
        const char *modes[] = {"", "--network bridge", "--network default"};
        for (size_t m = 0; m < 3; m++) {
            char *out = NULL;
            int st = dk_run(&b, cl, &out, "\"$D\" run --rm %s busybox ip -4 -o addr show eth0",
                            modes[m]);
            ck_assert_msg(st == 0 && dk_contains(out, n.net3), "docker %s %s: %d %s", cl->version,
                          modes[m], st, out);
            free(out);
        }
        /* What inspect says of each. */
        char *id = dk_ok(&b, cl, 0, "\"$D\" run -d busybox sleep 300");
        ctr_track(&b, id);
        char *nets = dk_ok(&b, cl, 0,
                           "\"$D\" inspect --format '{{range $k, $v := .NetworkSettings.Networks}}"
                           "{{$k}} {{$v.IPAddress}} {{$v.Gateway}}{{end}} {{.NetworkSettings."
                           "IPAddress}}' %s",
                           id);
        char want[64];
        snprintf(want, sizeof(want), "bridge %s.", n.net3);
        ck_assert_msg(strncmp(nets, want, strlen(want)) == 0 && dk_contains(nets, n.gw),
                      "docker %s: %s", cl->version, nets);
        free(nets);
        char *off = dk_ok(&b, cl, 0, "\"$D\" run -d --network none busybox sleep 300");
        ctr_track(&b, off);
        nets = dk_ok(&b, cl, 0,
                     "\"$D\" inspect --format '{{.HostConfig.NetworkMode}} {{range $k, $v := "
                     ".NetworkSettings.Networks}}{{$k}}:{{$v.IPAddress}}{{end}}' %s",
                     off);
        ck_assert_str_eq(nets, "none none:");
        free(nets);
        free(dk_ok(&b, cl, 0, "\"$D\" rm -f %s %s", id, off));
        free(id);
        free(off);
        berthd_finish(&b);
    }
    hnet_cleanup(&n);
}
END_TEST

START_TEST(docker_network_ls_and_inspect_show_the_networks_create_takes)
{
    struct hnet n;
    hnet_init(&n, 'b');
    for (size_t i = 0; i < nclis; i++) {
        struct berthd b = {0};
        start_on(&b, &n);
        const struct dk_client *cl = &clis[i];
        char *out = NULL;
        ck_assert_int_eq(dk_run(&b, cl, &out,
                                "\"$D\" network ls --format '{{.Name}} {{.Driver}} {{.Scope}}' "
                                "| sort | tr '\\n' ,"),
                         0);
        ck_assert_msg(strcmp(out, "bridge bridge local,none null local,") == 0, "docker %s: %s",
                      cl->version, out);
        free(out);
        char *br = dk_ok(&b, cl, 0,
                         "\"$D\" network inspect bridge --format '{{.Driver}} {{range "
                         ".IPAM.Config}}{{.Subnet}} {{.Gateway}}{{end}} {{index .Options "
                         "\"com.docker.network.bridge.name\"}}'");
        char want[128];
        snprintf(want, sizeof(want), "bridge %s %s %s", n.pool, n.gw, n.name);
        ck_assert_str_eq(br, want);
        free(br);
        /* By id prefix, and filters. */
        char *bid = dk_ok(&b, cl, 0, "\"$D\" network inspect --format '{{.Id}}' bridge");
        char *again = dk_ok(&b, cl, 0, "\"$D\" network inspect --format '{{.Name}}' %.12s", bid);
        ck_assert_str_eq(again, "bridge");
        free(again);
        free(bid);
        char *f = dk_ok(&b, cl, 0, "\"$D\" network ls -q --filter driver=null | wc -l");
        ck_assert_str_eq(f, "1");
        free(f);
        f = dk_ok(&b, cl, 0,
                  "\"$D\" network ls --format '{{.Name}}' --filter name=bri --filter name=no "
                  "| sort | tr '\\n' ,");
        ck_assert_str_eq(f, "bridge,none,");
        free(f);
        ck_assert_int_ne(dk_run(&b, cl, &out, "\"$D\" network inspect host"), 0);
        /* The engine's 404 message, or the older CLI's own words for a 404. */
        ck_assert_msg(dk_contains(out, "network host not found") ||
                          dk_contains(out, "No such network: host"),
                      "docker %s: %s", cl->version, out);
        free(out);
        berthd_finish(&b);
    }
    hnet_cleanup(&n);
}
END_TEST

/* The bridge's IPAM Config of GET /networks/bridge (Docker API), as "subnet gateway,..." */
static void
bridge_ipam(const struct berthd *b, char *out, size_t len, char *bridge, size_t blen)
{
    struct hreq q = {.method = "GET", .path = "/networks/bridge", .docker = true};
    struct hresp r;
    http_do(b, &q, &r);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    json_object *cfg = json_at(r.json, "IPAM.Config");
    ck_assert_msg(cfg && json_object_is_type(cfg, json_type_array), "%s", r.body);
    out[0] = '\0';
    for (size_t i = 0; i < json_object_array_length(cfg); i++) {
        json_object *c = json_object_array_get_idx(cfg, i), *sn, *gw;
        ck_assert(json_object_object_get_ex(c, "Subnet", &sn));
        ck_assert(json_object_object_get_ex(c, "Gateway", &gw));
        size_t at = strlen(out);
        snprintf(out + at, len - at, "%s %s,", json_object_get_string(sn),
                 json_object_get_string(gw));
    }
    json_object *opts = json_at(r.json, "Options"), *name = NULL;
    json_object_object_get_ex(opts, "com.docker.network.bridge.name", &name);
    snprintf(bridge, blen, "%s", name ? json_object_get_string(name) : "");
    hresp_free(&r);
}

START_TEST(docker_network_inspect_bridge_shows_the_operators_cni_config)
{
    /* An operator's list whose bridge, subnets and gateways are none of the
     * flags' defaults: one subnet with a gateway of its own in "ranges",
     * one without (host-local's default, the subnet's first address). */
    struct hnet n;
    hnet_init(&n, 'c');
    struct berthd b = {0};
    harness_mkdtemp(b.tmp, sizeof(b.tmp));
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/net.d", b.tmp);
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/10-ops.conflist", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"cniVersion\":\"1.0.0\",\"name\":\"%s\",\"plugins\":[{\"type\":\"bridge\","
            "\"bridge\":\"%s\",\"isGateway\":true,\"ipMasq\":false,\"ipam\":{\"type\":"
            "\"host-local\",\"ranges\":[[{\"subnet\":\"%s\",\"gateway\":\"%s.254\"}],"
            "[{\"subnet\":\"192.0.2.0/28\"}]],\"dataDir\":\"%s/ipam\"}}]}",
            n.name, n.name, n.pool, n.net3, b.tmp);
    fclose(f);
    const char *const args[] = {"--cni-config", dir, "--dns", "192.0.2.53", NULL};
    dk_start(&b, false, args);
    char ipam[256], bridge[32], want[256];
    bridge_ipam(&b, ipam, sizeof(ipam), bridge, sizeof(bridge));
    snprintf(want, sizeof(want), "%s %s.254,192.0.2.0/28 192.0.2.1,", n.pool, n.net3);
    ck_assert_str_eq(ipam, want);
    ck_assert_str_eq(bridge, n.name);
    /* The CLI shows the same. */
    for (size_t i = 0; i < nclis; i++) {
        char *br = dk_ok(&b, &clis[i], 0,
                         "\"$D\" network inspect bridge --format '{{range "
                         ".IPAM.Config}}{{.Subnet}} {{.Gateway}},{{end}}'");
        ck_assert_str_eq(br, want);
        free(br);
    }
    berthd_finish(&b);
    hnet_cleanup(&n);
}
END_TEST

static Suite *
docker_network_suite(void)
{
    Suite *s = suite_create("api_docker_network");
    TCase *tc = tcase_create("docker_network");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, NULL);
    ctr_add_fixture(tc);
    tcase_add_test(tc, docker_run_network_none_has_only_loopback_and_bridge_an_address);
    tcase_add_test(tc, docker_network_ls_and_inspect_show_the_networks_create_takes);
    tcase_add_test(tc, docker_network_inspect_bridge_shows_the_operators_cni_config);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: needs root (network namespaces, iptables)\n");
        return 77;
    }
    hnet_suite_setup();
    int rc = harness_run_suite(docker_network_suite());
    hnet_suite_teardown();
    return rc;
}
