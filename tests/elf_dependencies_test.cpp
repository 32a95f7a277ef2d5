// The dependency stage: reading DT_NEEDED/RPATH/RUNPATH and resolving them as the loader would.
#include <unistd.h>

#include <fstream>

#include "select/elf_dependencies.h"
#include "test_env.h"

namespace plugboard::select {
namespace {

TEST(ElfDependenciesTest, RealPluginsNeedOnlyWhatThisMachineHas) {
  for (const auto& p : testing::cpu_plugins()) {
    auto info = read_elf_dynamic_info(p.path);
    PB_ASSERT_OK(info);
    EXPECT_NE(std::find(info->needed.begin(), info->needed.end(), "libc.so.6"), info->needed.end()) << p.name;
    auto report = resolve_dependencies(p.path);
    PB_ASSERT_OK(report);
    EXPECT_TRUE(report->missing().empty()) << p.name << ": " << report->missing_summary();
    EXPECT_GE(report->dependencies.size(), info->needed.size());
  }
}

TEST(ElfDependenciesTest, CudaPluginCarriesTheNvidiaWheelRpath) {
  auto info = read_elf_dynamic_info(testing::cuda_plugin().path);
  PB_ASSERT_OK(info);
  EXPECT_FALSE(info->has_runpath);
  EXPECT_NE(std::find(info->rpath.begin(), info->rpath.end(), "$ORIGIN/../nvidia/cu13/lib"), info->rpath.end());
}

TEST(ElfDependenciesTest, MissingCompanionIsNamedWithWhoNeedsIt) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  auto lib = dir / "libneeds_companion.so";
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_NEEDS_COMPANION, lib);
  auto info = read_elf_dynamic_info(lib);
  PB_ASSERT_OK(info);
  EXPECT_TRUE(info->has_runpath);
  ASSERT_EQ(info->runpath.size(), 1u);
  EXPECT_EQ(info->runpath[0], "$ORIGIN/companions");

  auto report = resolve_dependencies(lib);
  PB_ASSERT_OK(report);
  ASSERT_EQ(report->missing().size(), 1u) << report->missing_summary();
  EXPECT_EQ(report->missing()[0]->name, "libcompanion_dep.so");
  EXPECT_EQ(report->missing_summary(), "libcompanion_dep.so (needed by libneeds_companion.so)");

  // LD_LIBRARY_PATH finds it.
  ResolveOptions with_env;
  with_env.ld_library_path = std::filesystem::path(PLUGBOARD_FIXTURE_COMPANION_DEP).parent_path().string();
  auto found = resolve_dependencies(lib, with_env);
  PB_ASSERT_OK(found);
  EXPECT_TRUE(found->missing().empty()) << found->missing_summary();

  // So does the RUNPATH, once the companion is laid out where $ORIGIN/companions points.
  std::filesystem::create_directories(dir / "companions");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_COMPANION_DEP, dir / "companions/libcompanion_dep.so");
  auto laid_out = resolve_dependencies(lib);
  PB_ASSERT_OK(laid_out);
  EXPECT_TRUE(laid_out->missing().empty()) << laid_out->missing_summary();
  const auto& deps = laid_out->dependencies;
  auto it = std::find_if(deps.begin(), deps.end(), [](const Dependency& d) { return d.name == "libcompanion_dep.so"; });
  ASSERT_NE(it, deps.end());
  ASSERT_TRUE(it->path.has_value());
  EXPECT_EQ(*it->path, dir / "companions/libcompanion_dep.so");
  std::filesystem::remove_all(dir);
}

TEST(ElfDependenciesTest, NotAnElfFileIsAnErrorNamingIt) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  std::ofstream(dir / "plugin.so") << "not an ELF";
  auto r = read_elf_dynamic_info(dir / "plugin.so");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("plugin.so is not an ELF file"), std::string::npos) << r.error().to_string();
  // An ELF header whose program headers point past the end of the file.
  std::ofstream(dir / "short.so", std::ios::binary) << std::string("\x7f" "ELF\x02\x01\x01", 7) << std::string(57, '\x7f');
  auto s = read_elf_dynamic_info(dir / "short.so");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("short.so"), std::string::npos) << s.error().to_string();
  auto missing = read_elf_dynamic_info(dir / "nothing.so");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace plugboard::select
