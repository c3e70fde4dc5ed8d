/*
 * runtime/hcs/doc_system: the compute system documents of both
 * isolations against the golden files, built the way the driver will
 * build them (paths converted, limits sized), and the refusals of bad
 * input.
 */
#include "runtime/hcs/doc_system.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hcs_golden.h"
#include "runtime/hcs/sizing.h"
#include "runtime/hcs/winpath.h"

#define TOP "6ba9cac1-7086-5ee9-a197-c465d3f50ad7"
#define BASE "02740e08-d1d3-5715-9c08-c255eab4ca01"
#define NS "0c8d2f8e-4a7e-4d5b-9a0e-3d3c0b6f6a11"
#define VOLUME "\\\\?\\Volume{baac0fd5-16b7-405b-9621-112aa8e3d973}"
#define SNAP "C:\\ProgramData\\berth\\snapshots\\"

START_TEST(process_container_matches_golden)
{
    struct err err = {0};
    /* Topmost first, the base layer last. */
    struct hcs_layer layers[] = {{TOP, SNAP "top"}, {BASE, SNAP "base"}};
    char in[64], out[64];
    ck_assert_int_eq(hcs_path_to_windows("/tmp/build/in", in, sizeof(in), &err), 0);
    ck_assert_int_eq(hcs_path_to_windows("/tmp/build//out/", out, sizeof(out), &err), 0);
    struct hcs_mapped_dir mounts[] = {
        {"C:\\ProgramData\\berth\\volumes\\cache\\data", in, true},
        {"C:\\ProgramData\\berth\\volumes\\out\\data", out, false},
    };
    struct hcs_container_doc c = {
        .hostname = "build-42",
        .layers = layers,
        .nlayers = 2,
        .scratch_path = VOLUME, /* the trailing backslash is added */
        .mounts = mounts,
        .nmounts = 2,
        .network_namespace = NS,
        .memory_mb = hcs_memory_mb(256ull << 20),
    };
    /* One and a half CPUs of a 4-processor host. */
    ck_assert_int_eq(hcs_cpu_limits(0, 150, 4, &c.processor, &err), 0);
    golden_check(hcs_doc_container(&c, &err), "container_process.json");
}
END_TEST

START_TEST(process_container_minimal_matches_golden)
{
    struct err err = {0};
    struct hcs_layer layers[] = {{BASE, SNAP "base"}};
    struct hcs_container_doc c = {
        .terminate_on_last_handle_closed = true,
        .layers = layers,
        .nlayers = 1,
        .scratch_path = VOLUME "\\",
    };
    golden_check(hcs_doc_container(&c, &err), "container_process_minimal.json");
}
END_TEST

START_TEST(uvm_matches_golden)
{
    struct err err = {0};
    struct hcs_uvm_size size;
    /* A 256 MiB limit: the task keeps its 256 MB, the guest gets its own. */
    ck_assert_int_eq(hcs_uvm_size(NULL, 256ull << 20, 8, &size, &err), 0);
    struct hcs_uvm_doc u = {
        .memory_mb = size.memory_mb,
        .processors = size.processors,
        .os_files_path = SNAP "base\\UtilityVM\\Files",
        .scratch_vhd = "C:\\ProgramData\\berth\\containers\\build-42\\vm\\sandbox.vhdx",
    };
    golden_check(hcs_doc_uvm(&u, &err), "uvm.json");
}
END_TEST

START_TEST(hosted_container_matches_golden)
{
    struct err err = {0};
    char l0[128], l1[128], v0[128], in[64];
    ck_assert_int_eq(hcs_vsmb_guest_path("l0", l0, sizeof(l0), &err), 0);
    ck_assert_int_eq(hcs_vsmb_guest_path("l1", l1, sizeof(l1), &err), 0);
    ck_assert_int_eq(hcs_vsmb_guest_path("v0", v0, sizeof(v0), &err), 0);
    ck_assert_int_eq(hcs_path_to_windows("/tmp/build/in", in, sizeof(in), &err), 0);
    struct hcs_layer layers[] = {{TOP, l1}, {BASE, l0}};
    struct hcs_mapped_dir mounts[] = {{v0, in, true}};
    struct hcs_uvm_size size;
    ck_assert_int_eq(hcs_uvm_size(NULL, 256ull << 20, 8, &size, &err), 0);
    struct hcs_container_doc c = {
        .hostname = "build-42",
        .layers = layers,
        .nlayers = 2,
        .scratch_path = "C:\\c\\1",
        .mounts = mounts,
        .nmounts = 1,
        .network_namespace = NS,
        .memory_mb = size.task_memory_mb,
    };
    /* The same one and a half CPUs, now of the VM's two processors. */
    ck_assert_int_eq(hcs_cpu_limits(0, 150, size.processors, &c.processor, &err), 0);
    golden_check(hcs_doc_hosted_container(&c, "berth-build-42-vm", &err), "container_hosted.json");
}
END_TEST

START_TEST(document_string_is_compact_with_plain_slashes)
{
    struct err err = {0};
    struct hcs_layer layers[] = {{BASE, SNAP "base"}};
    struct hcs_container_doc c = {.layers = layers, .nlayers = 1, .scratch_path = VOLUME};
    json_object *doc = hcs_doc_container(&c, &err);
    ck_assert_ptr_nonnull(doc);
    char *s = hcs_doc_string(doc);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(strchr(s, '\n'));
    ck_assert_ptr_null(strstr(s, "\\/"));
    ck_assert_ptr_nonnull(strstr(s, "\"Path\":\"\\\\\\\\?\\\\Volume{"));
    ck_assert_ptr_nonnull(strstr(s, "\"SchemaVersion\":{\"Major\":2,\"Minor\":1}"));
    free(s);
    json_object_put(doc);
}
END_TEST

/* ---- refusals ---- */

struct bad_case {
    const char *what;
    struct hcs_container_doc c;
    bool hosted;
    const char *msg;
};

static const struct hcs_layer one_layer[] = {{BASE, SNAP "base"}};
static const struct hcs_layer vsmb_layer[] = {{BASE, HCS_VSMB_GUEST_PREFIX "l0"}};
static const struct hcs_layer bad_id[] = {{"not-a-guid", SNAP "base"}};
static const struct hcs_layer same_ids[] = {{BASE, SNAP "a"}, {BASE, SNAP "b"}};
static const struct hcs_layer relative_layer[] = {{BASE, "snapshots\\base"}};
static const struct hcs_layer dotdot_layer[] = {{BASE, "C:\\x\\..\\base"}};
static const struct hcs_mapped_dir relative_target[] = {{"C:\\v", "tmp\\x", false}};
static const struct hcs_mapped_dir root_target[] = {{"C:\\v", "C:\\", false}};
static const struct hcs_mapped_dir twice[] = {{"C:\\v", "C:\\tmp\\x", false},
                                              {"C:\\w", "C:\\TMP\\X", true}};
static const struct hcs_mapped_dir host_mount[] = {{"C:\\v", "C:\\tmp\\x", false}};

static const struct bad_case bad_cases[] = {
    {"no layers", {.scratch_path = VOLUME}, false, "no layers"},
    {"layer id not a guid",
     {.layers = bad_id, .nlayers = 1, .scratch_path = VOLUME},
     false,
     "layer 0: id not-a-guid is not a guid"},
    {"two layers with one id",
     {.layers = same_ids, .nlayers = 2, .scratch_path = VOLUME},
     false,
     "layers 0 and 1: the same id"},
    {"relative layer path",
     {.layers = relative_layer, .nlayers = 1, .scratch_path = VOLUME},
     false,
     "is not a host path"},
    {"layer path with ..",
     {.layers = dotdot_layer, .nlayers = 1, .scratch_path = VOLUME},
     false,
     "is not a host path"},
    {"scratch is a plain folder",
     {.layers = one_layer, .nlayers = 1, .scratch_path = "C:\\scratch"},
     false,
     "want a volume guid path"},
    {"scratch volume without braces",
     {.layers = one_layer,
      .nlayers = 1,
      .scratch_path = "\\\\?\\Volumebaac0fd5-16b7-405b-9621-112aa8e3d973\\"},
     false,
     "want a volume guid path"},
    {"mount target relative",
     {.layers = one_layer,
      .nlayers = 1,
      .scratch_path = VOLUME,
      .mounts = relative_target,
      .nmounts = 1},
     false,
     "target tmp\\x is not a path below a drive"},
    {"mount onto the drive root",
     {.layers = one_layer,
      .nlayers = 1,
      .scratch_path = VOLUME,
      .mounts = root_target,
      .nmounts = 1},
     false,
     "target C:\\ is not a path below a drive"},
    {"two mounts on one target, case aside",
     {.layers = one_layer, .nlayers = 1, .scratch_path = VOLUME, .mounts = twice, .nmounts = 2},
     false,
     "the same target"},
    {"count and maximum together",
     {.layers = one_layer, .nlayers = 1, .scratch_path = VOLUME, .processor = {2, 5000, 0}},
     false,
     "mutually exclusive"},
    {"network namespace not a guid",
     {.layers = one_layer, .nlayers = 1, .scratch_path = VOLUME, .network_namespace = "nat"},
     false,
     "network namespace nat is not a guid"},
    {"hostname too long",
     {.layers = one_layer,
      .nlayers = 1,
      .scratch_path = VOLUME,
      .hostname = "a234567890123456789012345678901234567890123456789012345678901234"},
     false,
     "hostname"},
    {"hosted with a host layer path",
     {.layers = one_layer, .nlayers = 1, .scratch_path = "C:\\c\\1"},
     true,
     "is not a vsmb path in the vm"},
    {"hosted with a volume guid scratch",
     {.layers = vsmb_layer, .nlayers = 1, .scratch_path = VOLUME},
     true,
     "want a path in the vm"},
};

/* A CimFS container's one layer is the mounted CIM's volume: a host path
 * for process isolation, never one inside a VM. */
START_TEST(a_cim_volume_is_a_layer_of_a_process_container_only)
{
    struct err err = {0};
    struct hcs_layer layers[] = {{TOP, VOLUME "\\"}};
    struct hcs_container_doc c = {.layers = layers, .nlayers = 1, .scratch_path = VOLUME};
    json_object *doc = hcs_doc_container(&c, &err);
    ck_assert_msg(doc, "%s", err.msg);
    json_object *ctr = json_object_object_get(doc, "Container");
    json_object *storage = json_object_object_get(ctr, "Storage");
    json_object *l = json_object_array_get_idx(json_object_object_get(storage, "Layers"), 0);
    ck_assert_str_eq(json_object_get_string(json_object_object_get(l, "Path")), VOLUME "\\");
    json_object_put(doc);
    ck_assert_ptr_null(hcs_doc_hosted_container(&c, "vm", &err));
    ck_assert_int_eq(err.code, EINVAL);
    /* Nor is any other device path. */
    layers[0].path = "\\\\?\\C:\\x";
    ck_assert_ptr_null(hcs_doc_container(&c, &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(container_documents_refuse_bad_input)
{
    const struct bad_case *b = &bad_cases[_i];
    struct err err = {0};
    json_object *doc =
        b->hosted ? hcs_doc_hosted_container(&b->c, "vm", &err) : hcs_doc_container(&b->c, &err);
    ck_assert_msg(doc == NULL, "%s: accepted", b->what);
    ck_assert_int_eq(err.code, EINVAL);
    ck_assert_msg(strstr(err.msg, b->msg), "%s: \"%s\" lacks \"%s\"", b->what, err.msg, b->msg);
}
END_TEST

START_TEST(hosted_container_refuses_bad_vm_id_and_host_mounts)
{
    struct err err = {0};
    char l0[128];
    ck_assert_int_eq(hcs_vsmb_guest_path("l0", l0, sizeof(l0), &err), 0);
    struct hcs_layer layers[] = {{BASE, l0}};
    struct hcs_container_doc c = {.layers = layers,
                                  .nlayers = 1,
                                  .scratch_path = "C:\\c\\1",
                                  .mounts = host_mount,
                                  .nmounts = 1};
    ck_assert_ptr_null(hcs_doc_hosted_container(&c, "vm", &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "source C:\\v is not a vsmb path in the vm"));
    c.nmounts = 0;
    ck_assert_ptr_null(hcs_doc_hosted_container(&c, "", &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "utility vm id"));
    ck_assert_ptr_null(hcs_doc_hosted_container(&c, "a\"b", &err));
    json_object *ok = hcs_doc_hosted_container(&c, "vm", &err);
    ck_assert_ptr_nonnull(ok);
    json_object_put(ok);
}
END_TEST

START_TEST(uvm_document_refuses_bad_sizes_and_paths)
{
    struct err err = {0};
    struct hcs_uvm_doc u = {
        .memory_mb = 1024,
        .processors = 2,
        .os_files_path = SNAP "base\\UtilityVM\\Files",
        .scratch_vhd = "C:\\c\\vm\\sandbox.vhdx",
    };
    json_object *ok = hcs_doc_uvm(&u, &err);
    ck_assert_ptr_nonnull(ok);
    json_object_put(ok);

    struct hcs_uvm_doc odd = u;
    odd.memory_mb = 1025;
    ck_assert_ptr_null(hcs_doc_uvm(&odd, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "memory 1025 MB is not an even size"));
    struct hcs_uvm_doc nocpu = u;
    nocpu.processors = 0;
    ck_assert_ptr_null(hcs_doc_uvm(&nocpu, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "0 processors"));
    struct hcs_uvm_doc vhd = u;
    vhd.scratch_vhd = "C:\\c\\vm\\sandbox.img";
    ck_assert_ptr_null(hcs_doc_uvm(&vhd, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "not a host .vhdx path"));
    struct hcs_uvm_doc os = u;
    os.os_files_path = "\\\\server\\share\\UtilityVM\\Files";
    ck_assert_ptr_null(hcs_doc_uvm(&os, &err));
    ck_assert_int_eq(err.code, EINVAL);
}
END_TEST

START_TEST(vsmb_and_volume_paths_are_recognised)
{
    struct err err = {0};
    char p[128];
    ck_assert_int_eq(hcs_vsmb_guest_path("s7", p, sizeof(p), &err), 0);
    ck_assert_str_eq(p, "\\\\?\\VMSMB\\VSMB-{dcc079ae-60ba-4d07-847c-3493609c0870}\\s7");
    ck_assert(hcs_is_vsmb_guest_path(p));
    ck_assert_int_eq(hcs_vsmb_guest_path("a b", p, sizeof(p), &err), -EINVAL);
    ck_assert_int_eq(hcs_vsmb_guest_path("", p, sizeof(p), &err), -EINVAL);
    ck_assert(hcs_is_vsmb_guest_path(HCS_VSMB_GUEST_PREFIX "s1\\Files\\x"));
    ck_assert(!hcs_is_vsmb_guest_path(HCS_VSMB_GUEST_PREFIX "s1\\..\\x"));
    ck_assert(!hcs_is_vsmb_guest_path(HCS_VSMB_GUEST_PREFIX));
    ck_assert(!hcs_is_vsmb_guest_path("C:\\s1"));

    ck_assert(hcs_is_volume_guid_path(VOLUME));
    ck_assert(hcs_is_volume_guid_path(VOLUME "\\"));
    ck_assert(hcs_is_volume_guid_path("\\\\?\\Volume{BAAC0FD5-16B7-405B-9621-112AA8E3D973}\\"));
    ck_assert(!hcs_is_volume_guid_path(VOLUME "\\x"));
    ck_assert(!hcs_is_volume_guid_path(VOLUME "\\\\"));
    ck_assert(!hcs_is_volume_guid_path("\\\\?\\Volume{baac0fd5}\\"));
    ck_assert(!hcs_is_volume_guid_path("C:\\"));
}
END_TEST

static Suite *
doc_system_suite(void)
{
    Suite *s = suite_create("runtime_hcs_doc_system");
    TCase *tc = tcase_create("doc_system");
    tcase_add_test(tc, process_container_matches_golden);
    tcase_add_test(tc, process_container_minimal_matches_golden);
    tcase_add_test(tc, uvm_matches_golden);
    tcase_add_test(tc, hosted_container_matches_golden);
    tcase_add_test(tc, document_string_is_compact_with_plain_slashes);
    tcase_add_test(tc, a_cim_volume_is_a_layer_of_a_process_container_only);
    tcase_add_loop_test(tc, container_documents_refuse_bad_input, 0,
                        (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, hosted_container_refuses_bad_vm_id_and_host_mounts);
    tcase_add_test(tc, uvm_document_refuses_bad_sizes_and_paths);
    tcase_add_test(tc, vsmb_and_volume_paths_are_recognised);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(doc_system_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
