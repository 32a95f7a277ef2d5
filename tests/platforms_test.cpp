// The table of platforms (src/platforms/registry.h): one entry per platform with everything the other
// layers read from it (probe, priority, name patterns, callback path, known packages), and look-ups
// that agree with each other.
#include <gtest/gtest.h>

#include <set>

#include "fetch/fetch.h"
#include "platforms/bridge_file.h"
#include "platforms/registry.h"
#include "test_env.h"

namespace plugboard::platforms {
namespace {

TEST(Platforms, EachNameOnceEachProbeOnceWithItsFunction) {
  std::set<std::string> names;
  std::set<ProbeKind> probes;
  for (const PlatformTraits& p : platforms()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_EQ(find_platform(p.name), &p);
    EXPECT_FALSE(p.name_patterns.empty()) << p.name;
    EXPECT_EQ(p.probe == ProbeKind::kNone, p.run_probe == nullptr) << p.name;
    if (p.probe == ProbeKind::kNone) continue;
    EXPECT_TRUE(probes.insert(p.probe).second) << p.name;
    EXPECT_EQ(platform_for_probe(p.probe), &p);
    EXPECT_EQ(probe_kind_name(p.probe), p.name);
    auto parsed = parse_probe_kind(p.name);
    PB_ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, p.probe);
  }
  EXPECT_EQ(find_platform("xpu"), nullptr);
  EXPECT_EQ(platform_for_probe(ProbeKind::kNone), nullptr);
  EXPECT_EQ(probe_kind_name(ProbeKind::kNone), "none");
}

TEST(Platforms, AcceleratorsComeBeforeTheCpu) {
  const PlatformTraits* cpu = find_platform("cpu");
  ASSERT_NE(cpu, nullptr);
  for (const char* accelerator : {"cuda", "rocm", "tpu"}) {
    ASSERT_NE(find_platform(accelerator), nullptr) << accelerator;
    EXPECT_GT(find_platform(accelerator)->priority, cpu->priority) << accelerator;
  }
  EXPECT_GT(find_platform("tpu")->priority, find_platform("cuda")->priority);
  EXPECT_GT(find_platform("cuda")->priority, find_platform("rocm")->priority);
}

TEST(Platforms, OnlyTheTpuProbeIsMandatory) {
  for (const PlatformTraits& p : platforms()) EXPECT_EQ(p.probe_mandatory, p.name == "tpu") << p.name;
}

TEST(Platforms, ANameSaysItsPlatformAcceleratorsFirst) {
  EXPECT_EQ(platform_named_in("cuda13 xla_cuda_plugin.so"), find_platform("cuda"));
  EXPECT_EQ(platform_named_in("ROCM7"), find_platform("rocm"));
  EXPECT_EQ(platform_named_in("libtpu.so"), find_platform("tpu"));
  EXPECT_EQ(platform_named_in("xla_cpu_pjrt.so"), find_platform("cpu"));
  EXPECT_EQ(platform_named_in("cpu-with-cuda"), find_platform("cuda"));  // "cpu" is tried last
  EXPECT_EQ(platform_named_in("plugin.so"), nullptr);
  EXPECT_EQ(platform_named_in("\xff\xfe CUDA"), find_platform("cuda"));  // bytes past 0x7f are left alone
}

TEST(Platforms, UnknownProbeNamesTheKnownOnes) {
  auto bad = parse_probe_kind("xpu");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("expected none, cuda, rocm or tpu"), std::string::npos) << bad.error().message();
  auto none = parse_probe_kind("none");
  PB_ASSERT_OK(none);
  EXPECT_EQ(*none, ProbeKind::kNone);
}

TEST(Platforms, CallbackPathsHostOnCpuAndCudaThroughItsBridge) {
  EXPECT_EQ(platform_for_client("cpu"), find_platform("cpu"));
  EXPECT_EQ(platform_for_client("Host"), find_platform("cpu"));
  EXPECT_EQ(platform_for_client("CUDA"), find_platform("cuda"));
  EXPECT_EQ(platform_for_client("gpu"), find_platform("cuda"));
  EXPECT_EQ(platform_for_client("fault"), nullptr);
  const PlatformTraits* cpu = find_platform("cpu");
  ASSERT_TRUE(cpu->callbacks);
  EXPECT_EQ(cpu->callbacks->ffi_platform, "Host");
  EXPECT_FALSE(cpu->callbacks->bridge);
  const PlatformTraits* cuda = find_platform("cuda");
  ASSERT_TRUE(cuda->callbacks && cuda->callbacks->bridge);
  EXPECT_EQ(cuda->callbacks->ffi_platform, "CUDA");
  EXPECT_EQ(cuda->callbacks->bridge->file_name, "libplugboard_cuda_bridge.so");
  EXPECT_EQ(cuda->callbacks->bridge->variable, "PLUGBOARD_CUDA_BRIDGE");
  EXPECT_EQ(platform_for_ffi("cuda"), cuda);
  EXPECT_EQ(platform_for_ffi("Host"), cpu);
  EXPECT_EQ(cuda->callbacks->bridge->file_name, device_bridge_file("CUDA").file_name);  // one naming rule
  EXPECT_EQ(device_bridge_file("ROCM").file_name, "libplugboard_rocm_bridge.so");
  EXPECT_EQ(device_bridge_file("ROCM").variable, "PLUGBOARD_ROCM_BRIDGE");
  EXPECT_FALSE(find_platform("rocm")->callbacks);
  EXPECT_FALSE(find_platform("tpu")->callbacks);
}

TEST(Platforms, KnownPackagesTakeTheirFoldersPlatformProbeAndPriority) {
  std::set<std::string> with_packages;
  for (const fetch::KnownPackage& k : fetch::known_packages()) {
    const PlatformTraits* p = find_platform(k.platform);
    ASSERT_NE(p, nullptr) << k.package;
    EXPECT_EQ(k.probe, probe_kind_name(p->probe)) << k.package;
    EXPECT_EQ(k.priority, p->priority) << k.package;
    with_packages.insert(k.platform);
  }
  for (const PlatformTraits& p : platforms()) EXPECT_TRUE(with_packages.count(p.name)) << p.name << " has no known package";
}

}  // namespace
}  // namespace plugboard::platforms
