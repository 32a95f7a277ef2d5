// Create options plugboard knows are checked before any plugin sees them (src/runtime/
// create_option_rules.h): on the three real CPU plugins, every bad cpu_device_count the hostile
// tester found (0.106 died with SIGSEGV on -1, ±2^31, "4", 4.5 and SIGABRT on true; 0 gave a client
// without devices everywhere) is an INVALID_ARGUMENT naming the option, the value, what is allowed
// and the plugin, and the process goes on to open a good client; an option plugboard does not know
// reaches the plugin, and a refusal names the plugin and the options it was given.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plugboard/plugboard.h"
#include "real_plugins.h"

namespace plugboard::api {
namespace {

using plugboard::testing::cpu_plugins;
using plugboard::testing::RealPlugin;

struct Bad {
  CreateOption option;
  const char* spelled;  // as the message writes the value
};

std::vector<Bad> bad_device_counts() {
  return {{{"cpu_device_count", int64_t{-1}}, "= -1 (an integer)"},
          {{"cpu_device_count", int64_t{0}}, "= 0 (an integer)"},
          {{"cpu_device_count", int64_t{1} << 31}, "= 2147483648 (an integer)"},
          {{"cpu_device_count", -(int64_t{1} << 31)}, "= -2147483648 (an integer)"},
          {{"cpu_device_count", int64_t{4097}}, "= 4097 (an integer)"},
          {{"cpu_device_count", std::string("4")}, "= \"4\" (a string)"},
          {{"cpu_device_count", 4.5f}, "= 4.5 (a float)"},
          {{"cpu_device_count", true}, "= true (a boolean)"},
          {{"cpu_device_count", std::vector<int64_t>{4}}, "= [4] (a list of integers)"}};
}

class CreateOptionsTest : public ::testing::TestWithParam<RealPlugin> {};

TEST_P(CreateOptionsTest, EveryBadDeviceCountIsRefusedNamingOptionValueRangeAndPlugin) {
  for (const Bad& bad : bad_device_counts()) {
    auto client = Client::open(GetParam().path, {bad.option});
    ASSERT_FALSE(client) << bad.spelled << " gave a client with " << (*client)->devices().size() << " devices";
    EXPECT_EQ(client.error().code(), Code::kInvalidArgument) << client.error().to_string();
    const std::string& m = client.error().message();
    EXPECT_NE(m.find("create option cpu_device_count " + std::string(bad.spelled)), std::string::npos) << m;
    EXPECT_NE(m.find("an integer in 1..4096"), std::string::npos) << m;
    EXPECT_NE(m.find(GetParam().path.string()), std::string::npos) << m;
  }
  auto good = Client::open(GetParam().path, {{"cpu_device_count", int64_t{3}}});
  ASSERT_TRUE(good) << good.error().to_string();
  EXPECT_EQ((*good)->devices().size(), 3u);
}

TEST_P(CreateOptionsTest, AKnownGpuOptionOfTheWrongTypeIsRefusedBeforeThePlugin) {
  auto client = Client::open(GetParam().path, {{"memory_fraction", int64_t{2}}});
  ASSERT_FALSE(client);
  EXPECT_NE(client.error().message().find("create option memory_fraction = 2 (an integer)"), std::string::npos)
      << client.error().to_string();
  EXPECT_NE(client.error().message().find("a float in (0, 1]"), std::string::npos) << client.error().to_string();
}

TEST_P(CreateOptionsTest, AnOptionPlugboardDoesNotKnowReachesThePluginAndARefusalNamesPluginAndOptions) {
  // 0.81 and 0.106 ignore an option they do not know; 0.115 refuses it ("Unexpected option name
  // passed to PJRT_Client_Create: no_such_option"), and the error then names the plugin and the options.
  auto client = Client::open(GetParam().path, {{"cpu_device_count", int64_t{2}}, {"no_such_option", std::string("x")}});
  if (GetParam().pjrt_minor < 115) {
    ASSERT_TRUE(client) << client.error().to_string();
    EXPECT_EQ((*client)->devices().size(), 2u);
    return;
  }
  ASSERT_FALSE(client);
  const std::string m = client.error().to_string();
  EXPECT_NE(m.find(GetParam().path.string()), std::string::npos) << m;
  EXPECT_NE(m.find("with cpu_device_count = 2, no_such_option = \"x\""), std::string::npos) << m;
}

TEST_P(CreateOptionsTest, AnOptionNameOrValueHoldingControlCharactersIsSpelledOutInTheError) {
  // A name plugboard does not know reaches the plugin; 0.115 refuses it, and plugboard's part of the
  // error (the options it was given) spells out the ESC of "\e[2J" (a terminal would clear its screen).
  auto client = Client::open(GetParam().path, {{"no_such\x1b[2J", std::string("x\x1b[2J")}});
  if (GetParam().pjrt_minor < 115) {
    ASSERT_TRUE(client) << client.error().to_string();
    return;
  }
  ASSERT_FALSE(client);
  const std::string m = client.error().to_string();
  EXPECT_NE(m.find("with no_such\\e[2J = \"x\\e[2J\""), std::string::npos) << m;
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, CreateOptionsTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace plugboard::api
