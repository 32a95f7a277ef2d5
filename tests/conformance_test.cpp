// Every conformance case, in both formats, on each real CPU plugin, with plugboard's default compile
// options (JAX's numerics). A mismatch fails; a limitation written in case.json is reported.
#include <fstream>

#include "conformance/runner.h"
#include "test_env.h"

namespace plugboard {
namespace {

struct Param {
  testing::RealPlugin plugin;
  ProgramFormat format;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.plugin.name << " " << format_name(p.format); }

class ConformanceTest : public ::testing::TestWithParam<Param> {};

TEST_P(ConformanceTest, EveryCasePasses) {
  const Param& p = GetParam();
  auto cases = conformance::load_cases(testing::conformance_dir() / "cases");
  PB_ASSERT_OK(cases);
  EXPECT_GE(cases->size(), 48u);
  auto plugin = load_plugin(p.plugin.path);
  PB_ASSERT_OK(plugin);
  auto client = Client::create(*plugin);
  PB_ASSERT_OK(client);
  for (const auto& c : *cases) {
    auto r = conformance::run_case(**client, c, p.format);
    if (r.outcome == conformance::Outcome::kLimitation)
      std::printf("[ LIMITATION ] %s on %s: %s\n", c.name.c_str(), p.plugin.name.c_str(), r.reason.c_str());
    else
      EXPECT_EQ(r.outcome, conformance::Outcome::kPass) << c.name << " (" << format_name(p.format) << "): " << r.reason;
  }
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const auto& p : testing::cpu_plugins())
    for (auto f : {ProgramFormat::kMlirText, ProgramFormat::kMlirBytecode}) out.push_back({p, f});
  return out;
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, ConformanceTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return info.param.plugin.name + (info.param.format == ProgramFormat::kMlirText ? "_text" : "_bytecode");
});

TEST(ConformanceSpecTest, MalformedCaseJsonNamesTheField) {
  auto dir = std::filesystem::temp_directory_path() / "plugboard_bad_case";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "case.json") << R"({"name": "x", "inputs": [{"file": "in0.npy", "dtype": "f33", "shape": [2]}], "outputs": []})";
  auto c = conformance::load_case(dir);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("inputs[0].dtype 'f33'"), std::string::npos) << c.error().to_string();
}

}  // namespace
}  // namespace plugboard
